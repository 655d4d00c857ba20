"""Mixed-precision policy: float32 params and optimizer state, configurable compute dtype."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def compute_dtype(precision: str, backend: str | None = None) -> jnp.dtype:
    """The layer compute dtype for a ``precision`` setting.

    ``auto`` picks bfloat16 on GPU and TPU and float32 on CPU, where bf16 is slower (no
    native bf16 matmul; docs/results/speed.md).

    Args:
      precision: ``float32``, ``bfloat16`` or ``auto``.
      backend: platform name; defaults to ``jax.default_backend()``.
    """
    if precision == "float32":
        return jnp.float32
    if precision == "bfloat16":
        return jnp.bfloat16
    if precision == "auto":
        backend = backend or jax.default_backend()
        return jnp.bfloat16 if backend in ("gpu", "cuda", "rocm", "tpu") else jnp.float32
    raise ValueError(f"unknown precision {precision!r}")
