"""The actor-critic of a host run: jaxrl's :class:`~jaxrl.core.networks.ActorCritic`, with a CNN
encoder in front for ``[C, H, W]`` uint8 image observations (Atari): the Nature CNN of
:mod:`jaxrl.core.encoders`, the one the JAX path uses (``network.encoder``)."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl.config.root import Config
from jaxrl.core.encoders import (  # noqa: F401 - PatchConv: the host's public names, as before
    ImageEncoder,
    NatureEncoder,
    PatchConv,
)
from jaxrl.core.networks import ActorCritic
from jaxrl.hostenv.spaces import HostSpaces, host_encoder


class ImageActorCritic(nn.Module):
    """A CNN encoder then :class:`ActorCritic` on its features (same call signature).

    ``__call__(hidden, obs [L, N, C, H, W], is_first [L, N])`` returns what
    :class:`ActorCritic` returns for the encoded ``[L, N, F]`` features. ``kind="nature"``:
    :class:`NatureEncoder` (params ``NatureEncoder_0``, as before the encoders were shared);
    ``"small"``: the small CNN of :class:`~jaxrl.core.encoders.ImageEncoder` (``SmallEncoder``).
    """

    head: ActorCritic
    dtype: Any = jnp.float32
    kind: str = "nature"  # "nature" | "small"
    channels: tuple[int, ...] = (16,)  # the small CNN's channels per layer

    @nn.compact
    def __call__(self, hidden, obs: jax.Array, is_first: jax.Array):
        lead = obs.shape[:2]
        frames = obs.reshape((-1,) + obs.shape[2:])  # [M, C, H, W] uint8
        if self.kind == "nature":
            features = NatureEncoder(self.dtype)(frames)
        else:
            small = ImageEncoder("small", self.channels, self.dtype, name="SmallEncoder")
            features = small(jnp.transpose(frames, (0, 2, 3, 1)).astype(jnp.float32) / 255.0)
        return self.head(hidden, features.reshape(lead + features.shape[1:]), is_first)

    def initial_hidden(self, batch: int):
        """The hidden state of ``batch`` fresh sequences (``()`` without a core)."""
        return self.head.initial_hidden(batch)


def make_network(config: Config, spaces: HostSpaces, dtype: Any, core_unroll: int) -> nn.Module:
    """The run's network for ``spaces``: image observations get the CNN encoder of
    ``network.encoder`` (``auto``: the Nature CNN, or the small one below 36x36)."""
    net = config.network
    kind = host_encoder(net.encoder, spaces, config.env.name)
    head = ActorCritic(
        action_dim=spaces.action_dim,
        discrete=spaces.discrete,
        hidden_sizes=tuple(net.hidden_sizes),
        activation=net.activation,
        shared_torso=net.shared_torso,
        core=net.core,
        core_size=net.core_size,
        core_unroll=core_unroll,
        dtype=dtype,
        obs_ndim=1 if kind else len(spaces.obs_shape),
    )
    if kind is None:
        return head
    return ImageActorCritic(head=head, dtype=dtype, kind=kind, channels=tuple(net.cnn_channels))
