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
    """Channels-first ``[C, M, H, W] -> [block * block * C, M, H / block, W / block]``; the
    new channel axis is ordered ``(p, q, c)`` for pixel ``(p, q)`` of a block, channel ``c``."""
    c, m, h, w = x.shape
    x = x.reshape((c, m, h // block, block, w // block, block))
    return jnp.transpose(x, (3, 5, 0, 1, 2, 4)).reshape((-1, m, h // block, w // block))


class _KernelFirstDense(nn.Module):
    """``Dense`` over the first axis: ``[K, ...] -> [features, ...]`` (params as ``nn.Dense``'s:
    ``kernel [K, features]`` float32, ``bias [features]``)."""

    features: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kernel = self.param(
            "kernel", nn.initializers.orthogonal(np.sqrt(2)), (x.shape[0], self.features)
        )
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        y = jnp.einsum("kf,kn->fn", kernel.astype(self.dtype), x.reshape((x.shape[0], -1)))
        y = y + bias.astype(self.dtype)[:, None]
        return y.reshape((self.features,) + x.shape[1:])


class PatchConv(nn.Module):
    """A VALID convolution of ``kernel x kernel`` with ``stride`` (dividing both the kernel and
    the input size) as slices and one matmul, channels first: ``[C, M, H, W] -> [features, M,
    H', W']``.

    The input is cut into ``stride x stride`` blocks (:func:`space_to_depth`), after which the
    convolution has stride 1 and a kernel of ``kernel / stride``: its ``(kernel / stride)^2``
    shifted views are stacked on the channel axis and go through one dense layer. The same
    function as ``nn.Conv`` (the weights are the flattened kernel, in block order). Why this
    form: XLA:CPU runs the gradient of ``nn.Conv``'s strided convolutions far slower than
    matmuls, and with the channel axis first the weight gradient contracts the patches' minor
    axis (see docs/results/non-jax-envs.md).
    """

    features: int
    kernel: int
    stride: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = space_to_depth(x, self.stride) if self.stride > 1 else x
        size = self.kernel // self.stride
        out_h, out_w = x.shape[2] - size + 1, x.shape[3] - size + 1
        views = [x[:, :, a : a + out_h, b : b + out_w] for a in range(size) for b in range(size)]
        return _KernelFirstDense(self.features, self.dtype, name="Dense_0")(
            jnp.concatenate(views, axis=0)
        )


class NatureEncoder(nn.Module):
    """Mnih et al. (2015)'s convolutions: ``[M, C, 84, 84]`` uint8 -> ``[M, 3136]`` relu features.

    Pixels are scaled to [0, 1]; params float32, layers compute in ``dtype``. The strided
    convolutions are :class:`PatchConv` (the sizes divide: 84 = 21 x 4, 20 = 10 x 2), run
    channels first; the features are flattened in ``(h, w, c)`` order, as ``nn.Conv``'s.
    """

    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = jnp.transpose(obs, (1, 0, 2, 3)).astype(self.dtype) / 255.0  # [M,C,H,W] -> [C,M,H,W]
        for features, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.relu(PatchConv(features, kernel, stride, self.dtype)(x))
        return jnp.transpose(x, (1, 2, 3, 0)).reshape((x.shape[1], -1))


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
