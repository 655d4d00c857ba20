"""Pytrees carried through the compiled train step.

All arrays of a rollout are time-major: ``[T, B, ...]`` with ``T = ppo.num_steps`` and
``B = env.num_envs * num_agents`` actors (one per env for single-agent envs; one per
agent slot of each env, sharing the policy, for multi-agent envs).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct


class Transition(struct.PyTreeNode):
    """One agent step for every env; stacked to ``[T, B, ...]`` by the rollout scan."""

    obs: jax.Array  # [B, *obs_shape] float32, normalised observation the policy saw
    is_first: jax.Array  # [B] bool, obs starts an episode (the hidden state was reset here)
    action: jax.Array  # [B] int32 (discrete) or [B, A] float32 (continuous), unclipped
    log_prob: jax.Array  # [B] float32, log pi_old(action | obs)
    value: jax.Array  # [B] float32, V_old(obs)
    reward: jax.Array  # [B] float32, scaled reward
    terminated: jax.Array  # [B] bool, episode ended in a terminal state: no bootstrap
    truncated: jax.Array  # [B] bool, episode cut by a time limit: bootstrap from final obs
    final_value: jax.Array  # [B] float32, V(pre-reset next obs) where truncated, else 0
    mask: Any  # [B] bool, the actor is active (multi-agent envs only; None otherwise)


class EpisodeSums(struct.PyTreeNode):
    """Finished episodes of one rollout, summed in the rollout carry (active actors only).

    Summing in the carry instead of stacking per-step statistics keeps the rollout's
    per-step output to what training needs.
    """

    episodes: jax.Array  # () float32, episodes that ended
    return_sum: jax.Array  # () float32, their summed unscaled returns
    length_sum: jax.Array  # () float32, their summed lengths in agent steps
    outcome_sums: Any  # {name: () float32} their summed env-reported outcomes

    @classmethod
    def zeros(cls, outcome_names: tuple[str, ...]) -> EpisodeSums:
        """No episodes yet."""
        zero = jnp.zeros((), jnp.float32)
        return cls(
            episodes=zero,
            return_sum=zero,
            length_sum=zero,
            outcome_sums={name: zero for name in outcome_names},
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


class UpdateMetrics(struct.PyTreeNode):
    """Scalars from one update (rollout + epochs of minibatches), reduced in-graph."""

    loss: LossMetrics  # means over epochs x minibatches
    grad_norm: jax.Array  # () float32, mean global norm before clipping
    learning_rate: jax.Array  # () float32, lr of the update's first minibatch step
    explained_variance: jax.Array  # () float32, 1 - Var[returns - values] / Var[returns]
    episode_return_sum: jax.Array  # () float32, summed returns of episodes finished
    episode_length_sum: jax.Array  # () float32, summed lengths of episodes finished
    outcome_sums: Any  # {name: () float32} summed env-reported outcomes of those episodes
    episodes: jax.Array  # () float32, number of episodes finished
    nonfinite: jax.Array  # () bool, a minibatch step had a non-finite loss or gradient
    promoted: jax.Array  # () bool, the curriculum moved to the next stage after this update
    active: jax.Array  # () bool, the update ran (false past the end of training)


class ChunkMetrics(struct.PyTreeNode):
    """What the host sees after a compiled chunk of updates: scalars only."""

    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_fraction: jax.Array
    explained_variance: jax.Array
    grad_norm: jax.Array
    learning_rate: jax.Array
    episode_return: jax.Array  # mean over episodes finished in the chunk (nan if none)
    episode_length: jax.Array  # mean over episodes finished in the chunk (nan if none)
    outcomes: Any  # {name: mean over episodes finished in the chunk} (e.g. soccer win rate)
    episodes: jax.Array  # episodes finished in the chunk
    nonfinite_updates: jax.Array  # non-finite updates in the chunk
    updates: jax.Array  # updates run in the chunk
    curriculum_stage: jax.Array  # stage at the end of the chunk
    curriculum_metric: jax.Array  # promotion-window mean at the end of the chunk
    curriculum_promotions: jax.Array  # promotions during the chunk


class RunnerState(struct.PyTreeNode):
    """Everything training carries from one update to the next; checkpointed whole."""

    params: Any  # flax params, float32
    opt_state: Any  # optax state, float32
    env_state: Any  # [B] batched env state (wrapped)
    obs: jax.Array  # [B, *obs_shape] float32, raw current observation of every actor
    is_first: jax.Array  # [B] bool, obs starts an episode (previous step ended one)
    hidden: Any  # recurrent carry for the B envs, float32 (() without a core)
    obs_stats: RunningStats  # observation normaliser
    key: jax.Array  # typed PRNG key for the next update
    update_step: jax.Array  # () int32, updates done so far
    nonfinite_streak: jax.Array  # () int32, non-finite updates in a row
    nonfinite_total: jax.Array  # () int32, non-finite updates so far
    curriculum: Any  # CurriculumState: stage, promotion window (stage 0 without stages)
