"""Statistics of a rollout that the learners log, over one device or all of a mesh axis."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.core.layout import sum_over_devices


def global_var(x: jax.Array, axis: str | None) -> jax.Array:
    """Variance of every element of ``x`` on every device of ``axis``."""
    if not axis:
        return jnp.var(x)
    count = sum_over_devices(jnp.asarray(x.size, jnp.float32), axis)
    mean = sum_over_devices(x.sum(), axis) / count
    return sum_over_devices(jnp.square(x - mean).sum(), axis) / count


def explained_variance(values: jax.Array, returns: jax.Array, axis: str | None = None) -> jax.Array:
    """``1 - Var[returns - values] / Var[returns]`` (nan when the returns are constant)."""
    var_returns = global_var(returns, axis)
    residual = global_var(returns - values, axis)
    return jnp.where(var_returns > 0, 1.0 - residual / var_returns, jnp.nan)
