"""Scripted car-soccer play: both teams driven by the scripted policies, stepped in a scan.

For "RulePolicy vs X" evaluations, tests and rendering (:func:`rollout_states`). It sits above
both :mod:`jaxrl.envs.soccer.env` and :mod:`jaxrl.envs.soccer.rule_policy`, which import neither it
nor each other's scripted play: the env imports the policies, the policies import only physics.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.envs.soccer import physics
from jaxrl.envs.soccer.env import EnvParams, EnvState, Soccer, observe_teams
from jaxrl.envs.soccer.physics import MAX_PER_TEAM
from jaxrl.envs.soccer.rule_policy import scripted_team_actions


class ScriptedTrace(struct.PyTreeNode):
    """Per-step record of :func:`scripted_rollout`; every leaf is time-major [T, B, ...]."""

    reward: jax.Array  # [T, B, 6] float32
    reward_terms: dict[str, jax.Array]  # name -> [T, B, 6] float32, weighted terms
    outcome: dict[str, jax.Array]  # info["episode_outcome"], name -> [T, B, 6] float32
    terminated: jax.Array  # [T, B] bool
    truncated: jax.Array  # [T, B] bool
    agent_mask: jax.Array  # [T, B, 6] bool
    goal_blue: jax.Array  # [T, B] float32
    goal_orange: jax.Array  # [T, B] float32
    score_blue: jax.Array  # [T, B] float32, episode score after the step (before auto-reset)
    score_orange: jax.Array  # [T, B] float32
    ball_touch: jax.Array  # [T, B, 6] float32
    ball_pos: jax.Array  # [T, B, 2] float32, after the step (and after any reset)
    obs_finite: jax.Array  # [T, B] bool, every observation entry is finite
    obs_masked: jax.Array  # [T, B] bool, rows of inactive slots are exactly zero
    parked: jax.Array  # [T, B] bool, every inactive car sits on its parking spot


class ScriptedCarry(struct.PyTreeNode):
    """Scan carry of :func:`scripted_rollout`."""

    key: jax.Array
    env_state: EnvState  # [B]
    obs: jax.Array  # [B, 6, OBS_DIM] float32, the observation of env_state


def scripted_step(
    env: Soccer, params: EnvParams, learner_kind: jax.Array, carry: ScriptedCarry, _: Any
) -> tuple[ScriptedCarry, ScriptedTrace]:
    """One vmapped env step with both teams scripted (a ``lax.scan`` body)."""
    key, key_blue, key_orange, key_step = jax.random.split(carry.key, 4)
    state = carry.env_state
    num_envs = state.time.shape[0]
    team_actions = jax.vmap(scripted_team_actions, in_axes=(0, 0, None, None))
    blue = team_actions(
        jax.random.split(key_blue, num_envs), carry.obs[:, :MAX_PER_TEAM], learner_kind, 1.0
    )  # [B, 3]
    orange = team_actions(
        jax.random.split(key_orange, num_envs),
        carry.obs[:, MAX_PER_TEAM:],
        params.opponent_kind,
        params.opponent_skill,
    )  # [B, 3]
    obs, next_state, reward, terminated, truncated, info = jax.vmap(
        env.step, in_axes=(0, 0, 0, None)
    )(
        jax.random.split(key_step, num_envs),
        state,
        jnp.concatenate([blue, orange], axis=-1),
        params,
    )
    inactive = ~next_state.car_active  # [B, 6] (a new episode may have drawn new sizes)
    on_spot = jnp.all(next_state.bodies.car_pos == physics.PARK_POSITIONS, axis=-1)  # [B, 6]
    trace = ScriptedTrace(
        reward=reward,
        reward_terms=info["reward_terms"],
        outcome=info["episode_outcome"],
        terminated=terminated,
        truncated=truncated,
        agent_mask=info["agent_mask"],
        goal_blue=info["goal_blue"],
        goal_orange=info["goal_orange"],
        score_blue=info["score_blue"],
        score_orange=info["score_orange"],
        ball_touch=info["ball_touch"],
        ball_pos=next_state.bodies.ball_pos,
        obs_finite=jnp.all(jnp.isfinite(obs), axis=(1, 2)),
        obs_masked=jnp.all(jnp.where(inactive[..., None], obs == 0.0, True), (1, 2)),
        parked=jnp.all(jnp.where(inactive, on_spot, True), axis=-1),
    )
    return ScriptedCarry(key=key, env_state=next_state, obs=obs), trace


def scripted_rollout(
    env: Soccer,
    key: jax.Array,
    state: EnvState,
    params: EnvParams,
    learner_kind: jax.Array,
    num_steps: int,
) -> tuple[EnvState, ScriptedTrace]:
    """``num_steps`` steps of B envs, both teams scripted, from their observation rows.

    Blue plays ``learner_kind`` (IDLE, RULE or RANDOM) at full skill, orange plays
    ``params.opponent_kind`` with ``params.opponent_skill``; for "RulePolicy vs X" evaluations,
    benchmarks and tests. Jit it with ``env`` and ``num_steps`` static: ``state`` (any batch
    size B), ``params`` and ``learner_kind`` are traced, so team sizes, policies and skill
    change without recompiling, and calls chain (pass the returned state back in).

    Args:
      env: the env.
      key: PRNG key.
      state: EnvState with a leading batch axis [B].
      params: unbatched EnvParams.
      learner_kind: int32 (), the blue team's scripted policy.
      num_steps: scan length T.

    Returns:
      ``(state [B], trace [T, B])``.
    """
    obs = jax.vmap(observe_teams, in_axes=(0, None))(state, params)
    carry = ScriptedCarry(key=key, env_state=state, obs=obs)
    carry, trace = jax.lax.scan(
        functools.partial(scripted_step, env, params, jnp.asarray(learner_kind, jnp.int32)),
        carry,
        None,
        length=num_steps,
    )
    return carry.env_state, trace


def rollout_states(
    env: Soccer,
    key: jax.Array,
    params: EnvParams,
    learner_kind: jax.Array,
    num_steps: int,
) -> EnvState:
    """One scripted episode's states, stacked time-major: EnvState with leaves [T + 1, ...].

    Blue plays ``learner_kind``, orange ``params.opponent_kind`` with ``opponent_skill`` (as
    in :func:`scripted_rollout`). For rendering (:func:`jaxrl.envs.soccer.render.render_frames`);
    jit with ``env`` and ``num_steps`` static.
    """
    key_reset, key_play = jax.random.split(key)
    del key
    obs, state = env.reset(key_reset, params)

    def body(carry, key):
        state, obs = carry
        key_blue, key_orange, key_step = jax.random.split(key, 3)
        del key
        blue = scripted_team_actions(key_blue, obs[:MAX_PER_TEAM], learner_kind, 1.0)
        orange = scripted_team_actions(
            key_orange, obs[MAX_PER_TEAM:], params.opponent_kind, params.opponent_skill
        )
        obs, state, _, _, _, _ = env.step(key_step, state, jnp.concatenate([blue, orange]), params)
        return (state, obs), state

    _, states = jax.lax.scan(body, (state, obs), jax.random.split(key_play, num_steps))
    return jax.tree.map(lambda s0, s: jnp.concatenate([s0[None], s]), state, states)
