"""The actor-critic of a host run: jaxrl's :class:`~jaxrl.networks.ActorCritic`, with a
Nature-CNN encoder in front for ``[C, H, W]`` uint8 image observations (Atari)."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config.root import Config
from jaxrl.hostenv.spaces import HostSpaces
from jaxrl.networks import ActorCritic


def space_to_depth(x: jax.Array, block: int) -> jax.Array:
    """``[M, H, W, C] -> [M, H / block, W / block, block * block * C]`` (pixel ``(p, q, c)``)."""
    m, h, w, c = x.shape
    x = x.reshape((m, h // block, block, w // block, block, c))
    return jnp.transpose(x, (0, 1, 3, 2, 4, 5)).reshape((m, h // block, w // block, -1))


class PatchConv(nn.Module):
    """A VALID convolution of ``kernel x kernel`` with ``stride`` (dividing both the kernel and
    the input size) as slices and one matmul: ``[M, H, W, C] -> [M, H', W', features]``.

    The input is cut into ``stride x stride`` blocks (:func:`space_to_depth`), after which the
    convolution has stride 1 and a kernel of ``kernel / stride``: its ``(kernel / stride)^2``
    shifted views are concatenated and go through one dense layer. The same function as
    ``nn.Conv`` (the weights are the flattened kernel, in block order); XLA:CPU runs the
    gradient of ``nn.Conv``'s strided convolutions far slower than matmuls.
    """

    features: int
    kernel: int
    stride: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = space_to_depth(x, self.stride) if self.stride > 1 else x
        size = self.kernel // self.stride
        out_h, out_w = x.shape[1] - size + 1, x.shape[2] - size + 1
        views = [x[:, a : a + out_h, b : b + out_w] for a in range(size) for b in range(size)]
        return nn.Dense(
            self.features,
            kernel_init=nn.initializers.orthogonal(np.sqrt(2)),
            dtype=self.dtype,
            param_dtype=jnp.float32,
        )(jnp.concatenate(views, axis=-1))


class NatureEncoder(nn.Module):
    """Mnih et al. (2015)'s convolutions: ``[M, C, 84, 84]`` uint8 -> ``[M, 3136]`` relu features.

    Pixels are scaled to [0, 1]; params float32, layers compute in ``dtype``. The strided
    convolutions are :class:`PatchConv` (the sizes divide: 84 = 21 x 4, 20 = 10 x 2).
    """

    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = jnp.transpose(obs, (0, 2, 3, 1)).astype(self.dtype) / 255.0  # NCHW -> NHWC
        for features, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.relu(PatchConv(features, kernel, stride, self.dtype)(x))
        return x.reshape((x.shape[0], -1))


class ImageActorCritic(nn.Module):
    """:class:`NatureEncoder` then :class:`ActorCritic` on its features (same call signature).

    ``__call__(hidden, obs [L, N, C, H, W], is_first [L, N])`` returns what
    :class:`ActorCritic` returns for the encoded ``[L, N, F]`` features.
    """

    head: ActorCritic
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, hidden, obs: jax.Array, is_first: jax.Array):
        lead = obs.shape[:2]
        features = NatureEncoder(self.dtype)(obs.reshape((-1,) + obs.shape[2:]))
        return self.head(hidden, features.reshape(lead + features.shape[1:]), is_first)

    def initial_hidden(self, batch: int):
        """The hidden state of ``batch`` fresh sequences (``()`` without a core)."""
        return self.head.initial_hidden(batch)


def make_network(config: Config, spaces: HostSpaces, dtype: Any, core_unroll: int) -> nn.Module:
    """The run's network for ``spaces``: image observations get the CNN encoder."""
    net = config.network
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
        obs_ndim=1 if spaces.image else len(spaces.obs_shape),
    )
    return ImageActorCritic(head=head, dtype=dtype) if spaces.image else head
