"""Acting: a ``lax.scan`` of vmapped policy sampling and env steps."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.networks import make_distribution
from jaxrl.normalize import normalize, update_stats
from jaxrl.setup import Setup
from jaxrl.types import RunningStats, Transition


class RolloutCarry(struct.PyTreeNode):
    """What the rollout scan carries from one step to the next."""

    env_state: Any  # [B] env state
    obs: jax.Array  # [B, *obs_shape] raw observation
    obs_stats: RunningStats


def act(setup: Setup, params, obs_norm: jax.Array, key: jax.Array):
    """Sample actions for normalised observations ``[B, ...]``.

    Returns:
      ``(action [B, *action_shape], log_prob [B], value [B])``.
    """
    policy_params, value = setup.network.apply(params, obs_norm)
    dist = make_distribution(policy_params, setup.discrete)
    action, log_prob = dist.sample_and_log_prob(seed=key)
    return action, log_prob, value


def env_step(
    setup: Setup, params, carry: RolloutCarry, key: jax.Array
) -> tuple[RolloutCarry, Transition]:
    """One agent step of every env: normalise, act, step (with auto-reset), record."""
    key_act, key_env = jax.random.split(key)
    del key
    enabled = setup.config.env.normalize_obs
    obs_stats = update_stats(carry.obs_stats, carry.obs) if enabled else carry.obs_stats
    obs_norm = normalize(obs_stats, carry.obs, enabled)
    action, log_prob, value = act(setup, params, obs_norm, key_act)
    keys_env = jax.random.split(key_env, obs_norm.shape[0])
    obs, env_state, reward, terminated, truncated, info = jax.vmap(
        setup.env.step, in_axes=(0, 0, 0, None)
    )(keys_env, carry.env_state, action, setup.env_params)
    transition = Transition(
        obs=obs_norm,
        action=action,
        log_prob=log_prob,
        value=value,
        reward=reward.astype(jnp.float32) * setup.config.ppo.reward_scale,
        terminated=terminated,
        truncated=jnp.logical_and(truncated, jnp.logical_not(terminated)),
        final_obs=normalize(obs_stats, info["final_observation"], enabled),
        episode_done=info["episode_done"],
        episode_return=info["episode_return"],
        episode_length=info["episode_length"],
    )
    new_carry = RolloutCarry(
        env_state=env_state, obs=obs.astype(jnp.float32), obs_stats=obs_stats
    )
    return new_carry, transition


def rollout(
    setup: Setup, params, carry: RolloutCarry, key: jax.Array
) -> tuple[RolloutCarry, Transition]:
    """``ppo.num_steps`` agent steps; returns the new carry and ``Transition[T, B]``."""
    keys = jax.random.split(key, setup.config.ppo.num_steps)
    step = lambda c, k: env_step(setup, params, c, k)  # noqa: E731
    return jax.lax.scan(step, carry, keys)
