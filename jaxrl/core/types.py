"""Pytrees carried through the compiled train step.

All arrays of a rollout are time-major: ``[T, B, ...]`` with ``T = ppo.num_steps`` and
``B = env.num_envs * A`` training actors: one per env for single-agent envs, one per agent
slot of each env for multi-agent envs, one per slot of the learner's team for two-team envs
(all sharing the policy). Per-env arrays are ``[N]`` over all stepped envs (training envs,
then evaluation lanes).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct


class Transition(struct.PyTreeNode):
    """One agent step for every env; stacked to ``[T, B, ...]`` by the rollout scan."""

    obs: jax.Array  # [B, *obs_shape] the env's dtype: the raw observation the policy saw
    is_first: jax.Array  # [B] bool, obs starts an episode (the hidden state was reset here)
    action: jax.Array  # [B] int32 (discrete) or [B, A] float32 (continuous), unclipped
    log_prob: jax.Array  # [B] float32, log pi_old(action | obs)
    value: jax.Array  # [B] float32, V_old(obs)
    reward: jax.Array  # [B] float32, scaled reward
    terminated: jax.Array  # [B] bool, episode ended in a terminal state: no bootstrap
    truncated: jax.Array  # [B] bool, episode cut by a time limit: bootstrap from final obs
    final_value: jax.Array  # [B] float32, V(pre-reset next obs) where truncated, else 0
    mask: Any  # [B] bool, the actor is active (multi-agent envs only; None otherwise)
    # [B, num_actions] bool legal actions of obs (jaxrl.envs.protocols.ActionMaskEnv; None
    # otherwise)
    legal: Any = None
    turn: Any = None  # [B] bool, the row's slot moved at this step (TurnBasedEnv; else None)
    next_turn: Any = None  # [B] bool, the row's slot moves at the next step (TurnBasedEnv)


class EpisodeSums(struct.PyTreeNode):
    """Finished episodes of one rollout, summed per env in the rollout carry.

    Returns and lengths count one episode per active learner actor; outcomes (an env's
    ``info["episode_outcome"]``, e.g. soccer's win/draw/loss) count once per match, from the
    learner team's side. Summing in the carry instead of stacking per-step statistics keeps
    the rollout's per-step output to what training needs.
    """

    episodes: jax.Array  # [N] float32, actor-episodes that ended (active actors)
    return_sum: jax.Array  # [N] float32, their summed unscaled returns
    length_sum: jax.Array  # [N] float32, their summed lengths in steps
    matches: jax.Array  # [N] float32, env episodes (matches) that ended
    outcome_sums: Any  # {name: [N] float32} their summed outcomes

    @classmethod
    def zeros(cls, num_envs: int, outcome_names: tuple[str, ...]) -> EpisodeSums:
        """No episodes yet."""
        zero = lambda: jnp.zeros((num_envs,), jnp.float32)  # noqa: E731
        return cls(
            episodes=zero(),
            return_sum=zero(),
            length_sum=zero(),
            matches=zero(),
            outcome_sums={name: zero() for name in outcome_names},
        )


class RunningStats(struct.PyTreeNode):
    """Running mean and variance of observations (parallel Welford merge)."""

    mean: jax.Array  # [*obs_shape] float32
    var: jax.Array  # [*obs_shape] float32
    count: jax.Array  # () float32, number of samples merged (starts at a small epsilon)

    @classmethod
    def create(cls, obs_shape: tuple[int, ...]) -> RunningStats:
        """Zero mean, unit variance, with a tiny prior count so the first merge dominates."""
        return cls(
            mean=jnp.zeros(obs_shape, jnp.float32),
            var=jnp.ones(obs_shape, jnp.float32),
            count=jnp.asarray(1e-4, jnp.float32),
        )


class LossMetrics(struct.PyTreeNode):
    """Scalars from one minibatch loss."""

    total_loss: jax.Array  # () float32
    policy_loss: jax.Array  # () float32
    value_loss: jax.Array  # () float32
    entropy: jax.Array  # () float32
    approx_kl: jax.Array  # () float32, E[(ratio - 1) - log ratio]
    clip_fraction: jax.Array  # () float32, fraction of samples with |ratio - 1| > clip_eps


class RunnerState(struct.PyTreeNode):
    """Everything training carries from one update to the next; checkpointed whole."""

    params: Any  # flax params, float32
    opt_state: Any  # optax state, float32
    match: Any  # MatchCarry: env states, observations, hidden states, sides, opponents
    obs_stats: RunningStats  # observation normaliser
    key: jax.Array  # typed PRNG key for the next update
    update_step: jax.Array  # () int32, updates done so far
    nonfinite_streak: jax.Array  # () int32, non-finite updates in a row
    nonfinite_total: jax.Array  # () int32, non-finite updates so far
    features: Any  # {feature name: its state} (curriculum, selfplay, evaluation, ...)
    hyper: Any  # Hyper: the member's traced hyperparameters (learning rate, coefficients)
