"""Generalised advantage estimation, time-major, with termination and truncation apart."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def bootstrap_values(
    values: jax.Array,
    last_value: jax.Array,
    final_values: jax.Array,
    truncated: jax.Array,
) -> jax.Array:
    """Value of the true next state ``s_{t+1}`` of every step, before any auto-reset.

    Args:
      values: ``[T, B]`` float32, ``V(obs_t)`` (``obs_t`` is post-reset where a new episode began).
      last_value: ``[B]`` float32, ``V(obs_T)`` of the observation after the rollout.
      final_values: ``[T, B]`` float32, ``V(final_obs_t)``: the pre-reset next observation.
      truncated: ``[T, B]`` bool, the episode was cut by a time limit at step ``t``.

    Returns:
      ``[T, B]`` float32. Where the episode continues, ``V(obs_{t+1})``; where it was
      truncated, the value of the final observation, since ``obs_{t+1}`` already belongs
      to the next episode. (Termination is handled in :func:`gae`, which ignores this value.)
    """
    next_values = jnp.concatenate([values[1:], last_value[None]], axis=0)
    return jnp.where(truncated, final_values, next_values)


def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float,
    gae_lambda: float,
) -> tuple[jax.Array, jax.Array]:
    """GAE(lambda) advantages and value targets.

    ``delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t``;
    ``A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}`` with
    ``done_t = terminated_t or truncated_t``: termination zeroes the bootstrap, truncation
    keeps it (from ``next_values``) but, like termination, cuts the trace at the episode end.

    Args:
      rewards: ``[T, B]`` float32.
      values: ``[T, B]`` float32, ``V(obs_t)``.
      next_values: ``[T, B]`` float32, from :func:`bootstrap_values`.
      terminated: ``[T, B]`` bool.
      truncated: ``[T, B]`` bool.
      gamma: discount.
      gae_lambda: trace decay.

    Returns:
      ``(advantages [T, B], returns [T, B])``, float32, ``returns = advantages + values``.
    """
    not_terminated = 1.0 - terminated.astype(jnp.float32)
    not_done = 1.0 - jnp.logical_or(terminated, truncated).astype(jnp.float32)
    deltas = rewards + gamma * not_terminated * next_values - values
    decays = gamma * gae_lambda * not_done

    def step(next_advantage: jax.Array, inputs: tuple[jax.Array, jax.Array]):
        delta, decay = inputs
        advantage = delta + decay * next_advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(
        step, jnp.zeros_like(values[0]), (deltas, decays), reverse=True, unroll=16
    )
    return advantages, advantages + values
