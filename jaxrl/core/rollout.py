"""Training rollouts: a ``lax.scan`` of match steps that records what PPO trains on.

The rollout is cut into chunks of ``sequence_length`` steps (one chunk without a recurrent
core); the hidden state at the start of each chunk is returned, since each training
sequence re-runs the core from the state it started from. Only the first
``layout.num_envs`` envs train; evaluation-lane envs after them act in the same step and
are reported in the episode sums only.

The rollout reads a run through the narrow :class:`RolloutSpec` (a ``jaxrl.run.setup.Setup``
is one); it knows no feature: whatever the match step tallies per step (the league's pool
results) it sums over the rollout without looking inside.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.core.acting import PolicyParams, PolicySpec, value_of
from jaxrl.core.layout import Layout
from jaxrl.core.match import (
    MatchCarry,
    MatchPlan,
    MatchRecord,
    MatchSpec,
    empty_tally,
    match_step,
    step_keys,
)
from jaxrl.core.normalize import normalize, update_stats
from jaxrl.core.types import EpisodeSums, RunningStats, Transition

ENV_STEP_SCOPE = "env_steps"  # named scope of the rollout's loop over env steps
TRUNCATION_SCOPE = "truncation_value"  # the one conditional of an env step (bench.hlo_audit)


class RolloutSpec(Protocol):
    """What a rollout reads of a run (static)."""

    @property
    def layout(self) -> Layout:
        """The env batch (training envs first)."""

    @property
    def match(self) -> MatchSpec:
        """The match step's spec."""

    @property
    def policy(self) -> PolicySpec:
        """The acting spec (truncation values)."""

    @property
    def outcome_names(self) -> tuple[str, ...]:
        """Keys of the env's ``info["episode_outcome"]``."""

    @property
    def reward_term_names(self) -> tuple[str, ...]:
        """Keys of the env's ``info["reward_terms"]`` (empty if it reports none)."""

    @property
    def num_steps(self) -> int:
        """``T``: steps per rollout."""

    @property
    def rollout_chunk(self) -> int:
        """Steps per chunk whose start hidden state is kept (``T`` without a core)."""

    @property
    def normalize_obs(self) -> bool:
        """The learner normalises observations with running moments."""

    @property
    def reward_scale(self) -> float:
        """Training rewards are the env's times this."""

    @property
    def vmapped_members(self) -> bool:
        """The step is vmapped over several members (a cond would run both branches)."""


class RolloutOutput(struct.PyTreeNode):
    """What one rollout returns besides the advanced carry."""

    transitions: Transition  # [T, B] training rows
    start_hidden: Any  # [C, B, ...] learner carry at the start of each chunk of L steps
    sums: EpisodeSums  # [N] finished episodes per env (training and evaluation envs)
    tally: Any  # the match step's per-step tallies summed (the league's), or None
    reward_terms: dict  # {name: [N] float32} each reward term summed over the rollout, per env
    obs_stats: RunningStats  # the learner's normaliser after the rollout
    step_stats: Any  # RunningStats [T, *obs_shape]: the moments each step acted with, or None


def add_episodes(sums: EpisodeSums, record: MatchRecord, actors_per_env: int) -> EpisodeSums:
    """``sums`` plus the episodes that ended in this step, per env."""
    done = record.done.astype(jnp.float32)
    if actors_per_env == 1 and record.mask is None:  # single-agent envs: rows are envs
        done_rows = done
        per_env = lambda x: x  # noqa: E731
    else:
        done_rows = jnp.repeat(record.done, actors_per_env)
        if record.mask is not None:
            done_rows = jnp.logical_and(done_rows, record.mask)
        done_rows = done_rows.astype(jnp.float32)
        per_env = lambda x: x.reshape(-1, actors_per_env).sum(-1)  # noqa: E731 - [N*A] -> [N]
    return EpisodeSums(
        episodes=sums.episodes + per_env(done_rows),
        return_sum=sums.return_sum + per_env(record.episode_return * done_rows),
        length_sum=sums.length_sum + per_env(done_rows) * record.episode_length.astype(jnp.float32),
        matches=sums.matches + done,
        outcome_sums={
            name: total + record.outcome[name] * done for name, total in sums.outcome_sums.items()
        },
    )


def add_reward_terms(totals: dict, record: MatchRecord, actors_per_env: int) -> dict:
    """``totals`` (``{name: [N]}``) plus this step's reward terms of the learner's active rows.

    Summed over every step, not per episode: divided by the episodes that end in the same
    updates, it is the per-episode sum of each term in the long run (and exactly so when
    episodes begin and end with the rollouts).
    """
    out = {}
    for name, total in totals.items():
        term = record.reward_terms[name]
        if record.mask is not None:
            term = jnp.where(record.mask, term, 0.0)
        if actors_per_env > 1 or record.mask is not None:
            term = term.reshape(-1, actors_per_env).sum(-1)  # [N * A] -> [N]
        out[name] = total + term
    return out


def transition_of(
    spec: RolloutSpec, params: Any, obs_stats: RunningStats, obs: jax.Array, record: MatchRecord
) -> Transition:
    """The training rows of one match step as a PPO transition.

    ``obs``: the training rows' raw observations of the step (the env's dtype), kept as they
    are; the loss normalises them again with the step's moments.
    """
    rows = spec.layout.num_envs * spec.layout.actors_per_env
    train = lambda x: None if x is None else x[:rows]  # noqa: E731
    enabled = spec.normalize_obs
    truncated = record.truncated[:rows]
    hidden = jax.tree.map(lambda h: h[:rows], record.act.hidden)

    # Truncation bootstraps from the value of the pre-reset observation, seen with the
    # hidden state of the episode it ends. Time limits are rare, so skip it when unused.
    def final_values():
        return value_of(
            spec.policy,
            params,
            hidden,
            normalize(obs_stats, record.final_obs[:rows], enabled),
            jnp.zeros_like(truncated),  # the final obs continues the episode that ends
        )

    if spec.vmapped_members:
        # vmapped over members a cond runs both branches anyway: compute it.
        final_value = final_values()
    else:
        with jax.named_scope(TRUNCATION_SCOPE):
            final_value = jax.lax.cond(
                truncated.any(),
                final_values,
                lambda: jnp.zeros_like(record.act.value[:rows]),
            )
    return Transition(
        obs=obs,
        is_first=record.is_first[:rows],
        action=record.act.action[:rows],
        log_prob=record.act.log_prob[:rows],
        value=record.act.value[:rows],
        reward=record.reward[:rows] * spec.reward_scale,
        terminated=record.terminated[:rows],
        truncated=truncated,
        final_value=jnp.where(truncated, final_value, 0.0),
        mask=train(record.mask),
        legal=train(record.legal),
        turn=train(record.turn),
        next_turn=train(record.next_turn),
    )


def rollout(
    spec: RolloutSpec,
    params: Any,
    obs_stats: RunningStats,
    plan: MatchPlan,
    carry: MatchCarry,
    key: jax.Array,
) -> tuple[MatchCarry, RolloutOutput]:
    """``spec.num_steps`` match steps of every env under ``plan``."""
    layout = spec.layout
    num_steps, chunk = spec.num_steps, spec.rollout_chunk
    train_rows = layout.num_envs * layout.actors_per_env
    enabled = spec.normalize_obs
    # Every key of the rollout drawn before the loop (on CPU a split inside the loop body is a
    # loop of its own): [C, L] steps of StepKeys.
    keys = jax.vmap(lambda k: step_keys(spec.match, k))(jax.random.split(key, num_steps))
    keys = jax.tree.map(lambda k: k.reshape((num_steps // chunk, chunk) + k.shape[1:]), keys)

    def step(state, step_key):
        carry, stats, sums, tally, terms = state
        obs = carry.obs[:train_rows]
        if enabled:  # the training rows only: evaluation lanes never change training
            stats = update_stats(stats, obs, layout.axis)
        carry, record = match_step(
            spec.match, PolicyParams(params=params, obs_stats=stats), plan, carry, step_key
        )
        sums = add_episodes(sums, record, layout.actors_per_env)
        tally = jax.tree.map(jnp.add, tally, record.tally)
        terms = add_reward_terms(terms, record, layout.actors_per_env)
        transition = transition_of(spec, params, stats, obs, record)
        return (carry, stats, sums, tally, terms), (transition, stats if enabled else None)

    def run_chunk(state, chunk_keys):
        start_hidden = jax.tree.map(lambda h: h[:train_rows], state[0].hidden)
        # The scope names the per-env-step loop in the compiled HLO (bench.hlo_audit).
        with jax.named_scope(ENV_STEP_SCOPE):
            state, (transitions, step_stats) = jax.lax.scan(step, state, chunk_keys)
        return state, (transitions, step_stats, start_hidden)

    sums = EpisodeSums.zeros(layout.total_envs, spec.outcome_names)
    terms = {name: jnp.zeros((layout.total_envs,), jnp.float32) for name in spec.reward_term_names}
    state = (carry, obs_stats, sums, empty_tally(spec.match, plan), terms)
    (carry, stats, sums, tally, terms), (transitions, step_stats, start_hidden) = jax.lax.scan(
        run_chunk, state, keys
    )
    steps_first = lambda x: x.reshape((num_steps,) + x.shape[2:])  # noqa: E731 - [C, L] -> [T]
    transitions = jax.tree.map(steps_first, transitions)
    return carry, RolloutOutput(
        transitions=transitions,
        start_hidden=start_hidden,
        sums=sums,
        tally=tally,
        reward_terms=terms,
        obs_stats=stats,
        step_stats=jax.tree.map(steps_first, step_stats),
    )
