"""Observation encoders in front of the MLP torso: CNNs for images, one encoder per leaf.

One set of convolutions serves both trainers. The JAX path (:class:`ObsEncoder`, inside
:class:`jaxrl.core.networks.ActorCritic`) reads float observation rows ``[B, F]`` and cuts them into
the observation's leaves (:class:`LeafEncoding`); the host path
(:mod:`jaxrl.hostenv.networks`) reads uint8 ``[M, C, H, W]`` frames (:class:`NatureEncoder`).

Two CNNs, both relu, both :class:`PatchConv` layers (a convolution as slices and one matmul):

- ``nature``: Mnih et al. (2015)'s 8x8/4, 4x4/2, 3x3/1 with 32, 64, 64 channels, VALID. It
  needs images of at least 36x36 (:data:`NATURE_MIN_SIZE`); on a size the strides do not
  divide, each layer reads the rows and columns a VALID ``nn.Conv`` reads and drops the rest
  at the bottom and right edge, exactly as ``nn.Conv(padding="VALID")`` does.
- ``small``: 3x3/1 convolutions with ``cnn_channels`` channels, SAME (zero) padding, for
  small grids (MinAtar's 10x10, navix's 7x7): the output keeps the grid's size.

Features are flattened in ``(h, w, c)`` order, as ``nn.Conv``'s. Params are float32; the
layers compute in ``dtype``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config.encoders import (  # noqa: F401 - the plan, read here by the networks
    NATURE_MIN_SIZE,
    LeafEncoding,
    nature_fits,
    plan_encoders,
)

NATURE_LAYERS = ((32, 8, 4, 0), (64, 4, 2, 0), (64, 3, 1, 0))  # (features, kernel, stride, pad)
SMALL_KERNEL = 3  # the small CNN's kernel (stride 1, padding 1: SAME)


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


def valid_extent(size: int, kernel: int, stride: int) -> int:
    """Pixels of a side of ``size`` that a VALID ``kernel``/``stride`` convolution reads."""
    return (size - kernel) // stride * stride + kernel


class PatchConv(nn.Module):
    """A VALID convolution of ``kernel x kernel`` with ``stride`` (dividing the kernel) as
    slices and one matmul, channels first: ``[C, M, H, W] -> [features, M, H', W']``.

    The input is cut to the pixels a VALID convolution reads (:func:`valid_extent`: a no-op
    when the stride divides ``size - kernel``), then into ``stride x stride`` blocks
    (:func:`space_to_depth`), after which the convolution has stride 1 and a kernel of
    ``kernel / stride``: its ``(kernel / stride)^2`` shifted views are stacked on the channel
    axis and go through one dense layer. The same function as ``nn.Conv`` (the weights are
    the flattened kernel, in block order). Why this form: XLA:CPU runs the gradient of
    ``nn.Conv``'s strided convolutions far slower than matmuls, and with the channel axis
    first the weight gradient contracts the patches' minor axis (see
    docs/results/non-jax-envs.md).
    """

    features: int
    kernel: int
    stride: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h, w = (valid_extent(n, self.kernel, self.stride) for n in x.shape[2:])
        x = x if (h, w) == x.shape[2:] else x[:, :, :h, :w]
        x = space_to_depth(x, self.stride) if self.stride > 1 else x
        size = self.kernel // self.stride
        out_h, out_w = x.shape[2] - size + 1, x.shape[3] - size + 1
        views = [x[:, :, a : a + out_h, b : b + out_w] for a in range(size) for b in range(size)]
        return _KernelFirstDense(self.features, self.dtype, name="Dense_0")(
            jnp.concatenate(views, axis=0)
        )


def cnn_layers(kind: str, channels: Sequence[int]) -> tuple[tuple[int, int, int, int], ...]:
    """``(features, kernel, stride, pad)`` of each layer of the ``nature`` or ``small`` CNN."""
    if kind == "nature":
        return NATURE_LAYERS
    return tuple((c, SMALL_KERNEL, 1, SMALL_KERNEL // 2) for c in channels)


def zero_pad(x: jax.Array, pad: int) -> jax.Array:
    """``[C, M, H, W] -> [C, M, H + 2 pad, W + 2 pad]``, zeros around: ``jnp.pad``'s values,
    written as concatenations, which the ONNX converter lowers with a dynamic batch axis (its
    ``pad`` needs every size known)."""
    rows = jnp.zeros_like(x[:, :, :pad, :])
    x = jnp.concatenate([rows, x, rows], axis=2)
    cols = jnp.zeros_like(x[:, :, :, :pad])
    return jnp.concatenate([cols, x, cols], axis=3)


def conv_features(x: jax.Array, layers, dtype: Any) -> jax.Array:
    """relu(:class:`PatchConv`) per layer, channels first ``[C, M, H, W]``, then the features
    flattened ``(h, w, c)``: ``[M, H' * W' * C']``. Call it inside a compact module: the
    layers are that module's ``PatchConv_<i>``."""
    for features, kernel, stride, pad in layers:
        if pad:
            x = zero_pad(x, pad)
        x = nn.relu(PatchConv(features, kernel, stride, dtype)(x))
    return jnp.transpose(x, (1, 2, 3, 0)).reshape((x.shape[1], -1))


class NatureEncoder(nn.Module):
    """The host path's Nature CNN: ``[M, C, H, W]`` uint8 (H, W >= 36) -> ``[M, F]`` features.

    Pixels are scaled to [0, 1]; run channels first (Atari's 84x84: ``F = 7 * 7 * 64``).
    """

    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = jnp.transpose(obs, (1, 0, 2, 3)).astype(self.dtype) / 255.0  # [M,C,H,W] -> [C,M,H,W]
        return conv_features(x, NATURE_LAYERS, self.dtype)


class ImageEncoder(nn.Module):
    """The ``nature`` or ``small`` CNN on ``[M, H, W, C]`` images -> ``[M, F]`` relu features.

    Values are read as they are (no scaling: the env's floats, or ``env.normalize_obs``).
    """

    kind: str  # "nature" | "small"
    channels: Sequence[int] = (16,)  # the small CNN's channels per layer
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        x = jnp.transpose(images.astype(self.dtype), (3, 0, 1, 2))  # [C, M, H, W]
        return conv_features(x, cnn_layers(self.kind, self.channels), self.dtype)


class ObsEncoder(nn.Module):
    """Observation rows ``[B, F] -> [B, F']``: each leaf through its encoder, concatenated.

    A ``flat`` leaf's values pass as they are; an image leaf (``[H, W, C]``) goes through its
    :class:`ImageEncoder`, named by the leaf (``<leaf.name>/PatchConv_<i>/Dense_0``).
    """

    leaves: tuple[LeafEncoding, ...]
    channels: Sequence[int] = (16,)  # the small CNN's channels per layer
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        parts = []
        for leaf in self.leaves:
            values = x[:, leaf.offset : leaf.end].astype(self.dtype)
            if leaf.kind != "flat":
                encoder = ImageEncoder(leaf.kind, tuple(self.channels), self.dtype, name=leaf.name)
                values = encoder(values.reshape((-1,) + leaf.shape))
            parts.append(values)
        return parts[0] if len(parts) == 1 else jnp.concatenate(parts, -1)
