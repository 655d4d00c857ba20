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


def turn_gae(
    rewards: jax.Array,
    values: jax.Array,
    final_values: jax.Array,
    last_value: jax.Array,
    turn: jax.Array,
    last_turn: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float,
    gae_lambda: float,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """GAE(lambda) over each row's own moves, for a turn-based env (one slot moves per step).

    A row's move at step ``t`` collects the rewards of steps ``t, t+1, ...`` up to its next
    move (exclusive) or the end of the episode (inclusive: a game that ends on the opponent's
    move still rewards the row's last move), undiscounted within the stretch; one move is one
    discount. ``delta = R + gamma * V_next - V_t`` with ``V_next`` the value at the row's next
    move, the final observation's value where the episode was truncated, 0 where it
    terminated, and ``last_value`` at the rollout's end where the row moves next
    (``last_turn``); ``A_t = delta_t + gamma * lambda * A_next`` while the episode goes on.

    A move whose stretch runs past the rollout while the row does not move at its end has no
    known successor: its ``known`` is False (no loss weight) and the trace of the moves
    before it stops there. Off-turn steps: advantage 0, target ``V_t``, ``known`` False.
    With every ``turn`` True this is :func:`gae` exactly.

    ``rewards``, ``values``, ``final_values`` (``V(final_obs_t)`` where truncated, else 0):
    ``[T, B]`` float32; ``last_value`` ``[B]`` float32 ``V(obs_T)``; ``turn`` ``[T, B]``
    bool, the row moved at step ``t``; ``last_turn`` ``[B]`` bool, the row moves at step
    ``T``; ``terminated``, ``truncated`` ``[T, B]`` bool; ``gamma``, ``gae_lambda`` per move.

    Returns:
      ``(advantages [T, B], returns [T, B], known [T, B] bool)``.
    """
    zeros = jnp.zeros_like(last_value)
    # What the stretch that reaches step t+1 collects from there: rewards, the discounted
    # bootstrap at its end, the discounted trace of the next move, and whether it is known.
    start = (zeros, gamma * last_value, zeros, last_turn)

    def step(carry, inputs):
        reward, value, final_value, moved, term, trunc = inputs
        done = jnp.logical_or(term, trunc)
        ended = (zeros, gamma * jnp.where(trunc, final_value, 0.0), zeros, jnp.ones_like(done))
        after, boot, trace, known = jax.tree.map(lambda e, c: jnp.where(done, e, c), ended, carry)
        stretch = reward + after
        advantage = stretch + boot - value + trace
        moved_carry = (zeros, gamma * value, gamma * gae_lambda * jnp.where(known, advantage, 0.0))
        carry = jax.tree.map(
            lambda m, c: jnp.where(moved, m, c),
            (*moved_carry, jnp.ones_like(known)),
            (stretch, boot, trace, known),
        )
        out = (jnp.where(moved, advantage, 0.0), jnp.logical_and(moved, known))
        return carry, out

    inputs = (rewards, values, final_values, turn, terminated, truncated)
    _, (advantages, known) = jax.lax.scan(step, start, inputs, reverse=True)
    return advantages, advantages + values, known
