"""Running observation normalisation (parallel Welford merge of batch moments)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.core.types import RunningStats

CLIP = 10.0  # normalised observations are clipped to +-CLIP


def update_stats(stats: RunningStats, batch: jax.Array, axis: str | None = None) -> RunningStats:
    """Merge a batch ``[N, *obs_shape]`` into the running moments (Chan et al.).

    ``axis``: data-parallel mesh axis; the batch is every device's rows together (global
    moments by two sums over devices), so every device keeps the same statistics.
    """
    batch = batch.astype(jnp.float32)
    if axis:
        batch_count = jax.lax.psum(jnp.asarray(batch.shape[0], jnp.float32), axis)
        batch_mean = jax.lax.psum(batch.sum(axis=0), axis) / batch_count
        batch_var = jax.lax.psum(jnp.square(batch - batch_mean).sum(axis=0), axis) / batch_count
    else:
        batch_count = jnp.asarray(batch.shape[0], jnp.float32)
        batch_mean = batch.mean(axis=0)
        batch_var = batch.var(axis=0)
    delta = batch_mean - stats.mean
    total = stats.count + batch_count
    mean = stats.mean + delta * batch_count / total
    m2 = stats.var * stats.count + batch_var * batch_count
    m2 = m2 + jnp.square(delta) * stats.count * batch_count / total
    return RunningStats(mean=mean, var=m2 / total, count=total)


def normalize_steps(stats: RunningStats, step: jax.Array, obs: jax.Array) -> jax.Array:
    """Raw ``obs [L, N, *obs_shape]`` normalised as the rollout did, step by step.

    ``stats`` holds the moments of every rollout step (leaves ``[T, *obs_shape]``) and
    ``step [L, N]`` int32 says which step each observation came from: the same numbers
    :func:`normalize` gave the policy while acting, recomputed in the loss so that the
    rollout buffer keeps observations in the env's dtype (uint8 images: 4x less memory).
    """
    mean, var = stats.mean[step], stats.var[step]
    return jnp.clip((obs.astype(jnp.float32) - mean) / jnp.sqrt(var + 1e-8), -CLIP, CLIP)


def normalize(stats: RunningStats, obs: jax.Array, enabled: bool) -> jax.Array:
    """``clip((obs - mean) / sqrt(var + 1e-8))`` in float32, or ``obs`` as float32 if disabled."""
    obs = obs.astype(jnp.float32)
    if not enabled:
        return obs
    return jnp.clip((obs - stats.mean) / jnp.sqrt(stats.var + 1e-8), -CLIP, CLIP)
