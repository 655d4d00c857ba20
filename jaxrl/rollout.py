"""Acting: a ``lax.scan`` of vmapped policy sampling and env steps.

The rollout is cut into chunks of ``sequence_length`` steps (one chunk without a
recurrent core); the hidden state at the start of each chunk is returned, since each
training sequence re-runs the core from the state it started from.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.networks import make_distribution
from jaxrl.normalize import normalize, update_stats
from jaxrl.setup import Setup
from jaxrl.types import EpisodeSums, RunningStats, Transition

OUTCOME_KEY = "episode_outcome"  # optional info entry: {name: () float32} at episode end


def per_actor(setup: Setup, x: jax.Array, per_agent: bool) -> jax.Array:
    """Env-batched ``[E, A, ...]`` (``per_agent``) or ``[E, ...]`` data as ``[E * A, ...]``.

    Single-agent envs (``A = 1``) pass through unchanged.
    """
    if setup.num_agents == 1:
        return x
    if per_agent:
        return x.reshape((-1,) + x.shape[2:])
    return jnp.repeat(x, setup.num_agents, axis=0)


def per_env(setup: Setup, x: jax.Array) -> jax.Array:
    """Actor-batched ``[E * A, ...]`` data as ``[E, A, ...]`` for the env (identity if A = 1)."""
    if setup.num_agents == 1:
        return x
    return x.reshape((-1, setup.num_agents) + x.shape[1:])


def agent_mask(setup: Setup, info: dict) -> jax.Array | None:
    """``[E * A]`` bool: which actors are active; ``None`` (all of them) for single-agent envs."""
    if setup.num_agents == 1:
        return None
    if "agent_mask" not in info:
        num_envs = info["episode_done"].shape[0]  # EpisodeStatistics reports it for every env
        return jnp.ones((num_envs * setup.num_agents,), bool)
    return per_actor(setup, info["agent_mask"], per_agent=True)


def add_finished_episodes(
    setup: Setup, sums: EpisodeSums, info: dict, mask: jax.Array | None
) -> EpisodeSums:
    """``sums`` plus the episodes that ended on this step (of active actors)."""
    done = per_actor(setup, info["episode_done"], per_agent=False)
    if mask is not None:
        done = jnp.logical_and(done, mask)
    done = done.astype(jnp.float32)
    returns = per_actor(setup, info["episode_return"], per_agent=info["episode_return"].ndim > 1)
    lengths = per_actor(setup, info["episode_length"], per_agent=False)
    outcomes = info.get(OUTCOME_KEY, {})
    return EpisodeSums(
        episodes=sums.episodes + done.sum(),
        return_sum=sums.return_sum + (returns * done).sum(),
        length_sum=sums.length_sum + (lengths.astype(jnp.float32) * done).sum(),
        outcome_sums={
            name: total
            + (per_actor(setup, outcomes[name].astype(jnp.float32), per_agent=False) * done).sum()
            for name, total in sums.outcome_sums.items()
        },
    )


class RolloutCarry(struct.PyTreeNode):
    """What the rollout scan carries from one step to the next."""

    env_state: Any  # [B] env state
    obs: jax.Array  # [B, *obs_shape] raw observation
    is_first: jax.Array  # [B] bool, obs starts an episode
    hidden: Any  # [B, ...] recurrent carry, before the reset for ``is_first`` is applied
    obs_stats: RunningStats


def reset_actors(
    setup: Setup, env_params, key: jax.Array, num_envs: int, obs_stats: RunningStats
) -> RolloutCarry:
    """``num_envs`` freshly reset envs: their actors' first observations and empty hidden state."""
    obs, env_state = jax.vmap(setup.env.reset, in_axes=(0, None))(
        jax.random.split(key, num_envs), env_params
    )
    num_actors = num_envs * setup.num_agents
    return RolloutCarry(
        env_state=env_state,
        obs=per_actor(setup, obs, per_agent=True).astype(jnp.float32),
        is_first=jnp.ones((num_actors,), bool),
        hidden=setup.network.initial_hidden(num_actors),
        obs_stats=obs_stats,
    )


def act(
    setup: Setup,
    params,
    hidden,
    obs_norm: jax.Array,
    is_first: jax.Array,
    key: jax.Array,
    deterministic: bool = False,
):
    """Choose actions for one step of normalised observations ``[B, ...]``.

    Samples from the policy, or takes its mode when ``deterministic``.

    Returns:
      ``(hidden, action [B, *action_shape], log_prob [B], value [B])``.
    """
    hidden, policy_params, value = setup.network.apply(
        params, hidden, obs_norm[None], is_first[None]
    )
    if setup.discrete:
        policy_params = policy_params[0]  # logits [B, num_actions]
    else:
        mean, log_std = policy_params
        policy_params = (mean[0], log_std)  # mean [B, A], log_std [A]
    dist = make_distribution(policy_params, setup.discrete)
    if deterministic:
        action = dist.mode()
        log_prob = dist.log_prob(action)
    else:
        action, log_prob = dist.sample_and_log_prob(seed=key)
    return hidden, action, log_prob, value[0]


def value_of(setup: Setup, params, hidden, obs_norm: jax.Array, is_first: jax.Array) -> jax.Array:
    """``V(obs) [B]`` of one step of normalised observations, after ``hidden``."""
    _, _, value = setup.network.apply(params, hidden, obs_norm[None], is_first[None])
    return value[0]


def env_step(
    setup: Setup,
    params,
    env_params,
    carry: RolloutCarry,
    sums: EpisodeSums,
    key_act: jax.Array,
    keys_env: jax.Array,
) -> tuple[RolloutCarry, EpisodeSums, Transition]:
    """One agent step of every env: normalise, act, step (with auto-reset), record.

    ``key_act`` samples the actions; ``keys_env`` ``[E]`` step the envs (both drawn before
    the rollout loop, so no key is split inside it).
    """
    enabled = setup.config.env.normalize_obs
    obs_stats = update_stats(carry.obs_stats, carry.obs) if enabled else carry.obs_stats
    obs_norm = normalize(obs_stats, carry.obs, enabled)
    hidden, action, log_prob, value = act(
        setup, params, carry.hidden, obs_norm, carry.is_first, key_act
    )
    obs, env_state, reward, terminated, truncated, info = jax.vmap(
        setup.env.step, in_axes=(0, 0, 0, None)
    )(keys_env, carry.env_state, per_env(setup, action), env_params)
    # From here on everything is per actor: [E * A, ...].
    obs = per_actor(setup, obs, per_agent=True)
    reward = per_actor(setup, reward, per_agent=True)
    terminated = per_actor(setup, terminated, per_agent=False)
    truncated = per_actor(setup, truncated, per_agent=False)
    final_obs = per_actor(setup, info["final_observation"], per_agent=True)
    truncated = jnp.logical_and(truncated, jnp.logical_not(terminated))
    # Truncation bootstraps from the value of the pre-reset observation, seen with the
    # hidden state of the episode it ends. Time limits are rare, so skip it when unused.
    final_value = jax.lax.cond(
        truncated.any(),
        lambda: value_of(
            setup,
            params,
            hidden,
            normalize(obs_stats, final_obs, enabled),
            jnp.zeros_like(truncated),  # the final obs continues the episode that ends
        ),
        lambda: jnp.zeros_like(value),
    )
    mask = agent_mask(setup, info)
    transition = Transition(
        obs=obs_norm,
        is_first=carry.is_first,
        action=action,
        log_prob=log_prob,
        value=value,
        reward=reward.astype(jnp.float32) * setup.config.ppo.reward_scale,
        terminated=terminated,
        truncated=truncated,
        final_value=jnp.where(truncated, final_value, 0.0),
        mask=mask,
    )
    new_carry = RolloutCarry(
        env_state=env_state,
        obs=obs.astype(jnp.float32),
        is_first=jnp.logical_or(terminated, truncated),
        hidden=hidden,
        obs_stats=obs_stats,
    )
    return new_carry, add_finished_episodes(setup, sums, info, mask), transition


def rollout(
    setup: Setup, params, env_params, carry: RolloutCarry, key: jax.Array
) -> tuple[RolloutCarry, Transition, Any, EpisodeSums]:
    """``ppo.num_steps`` agent steps of every env under ``env_params``.

    Returns:
      ``(carry, Transition[T, B], initial_hidden [C, B, ...], episode sums)`` with ``C``
      chunks of ``sequence_length`` steps (``C = 1`` and an empty hidden state without a
      core).
    """
    config = setup.config
    num_steps, num_envs = config.ppo.num_steps, config.env.num_envs
    chunk = config.sequence_length if config.network.core != "none" else num_steps
    # Every key of the rollout in one call: [T, 1 + E] = the step's action key, then its
    # env keys. (On CPU each key split inside the loop is a loop of its own.)
    keys = jax.random.split(key, (num_steps // chunk, chunk, 1 + num_envs))

    def run_chunk(carry_sums, chunk_keys: jax.Array):
        def step(c, step_keys):
            c, sums, transition = env_step(
                setup, params, env_params, c[0], c[1], step_keys[0], step_keys[1:]
            )
            return (c, sums), transition

        start_hidden = carry_sums[0].hidden
        carry_sums, transitions = jax.lax.scan(step, carry_sums, chunk_keys)
        return carry_sums, (transitions, start_hidden)

    sums = EpisodeSums.zeros(setup.outcome_names)
    (carry, sums), (transitions, start_hidden) = jax.lax.scan(run_chunk, (carry, sums), keys)
    transitions = jax.tree.map(lambda x: x.reshape((num_steps,) + x.shape[2:]), transitions)
    return carry, transitions, start_hidden, sums
