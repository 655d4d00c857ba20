"""Self-play as a train-step feature: the league's plan edits, update and metrics.

Per update, with self-play on for an env (always, or where a curriculum stage switches it
on): the groups' ``latest`` envs play the current policy, its ``rule`` envs the env's
RulePolicy, its pool lanes their snapshots (:mod:`jaxrl.league.groups`); the learner's side
is drawn per env and match. After the update the feature adds the rollout's pure pool
matches to the per-slot results (:mod:`jaxrl.league.pool`, PFSP), the RulePolicy matches to
the learner's rating (:mod:`jaxrl.league.rating`), and takes a snapshot every
``selfplay.snapshot_every`` updates.

Where self-play is on is the curriculum's per-env switch of self-play, so the feature
declares that it reads the curriculum (``reads = ("curriculum",)``): the step hands it the
curriculum's view (:class:`~jaxrl.features.curriculum.CurriculumView`) as the update began.
Its groups are the layout's :class:`~jaxrl.core.layout.OpponentGroups`, which the league
declares (:func:`jaxrl.league.groups.selfplay_layout`); its pool and PFSP's draw
distribution go to the match step as the plan's
:class:`~jaxrl.core.opponents.OpponentPlan`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from jaxrl.config import SelfPlayConfig
from jaxrl.core.acting import PolicyParams
from jaxrl.core.layout import Layout, sum_over_devices
from jaxrl.core.match import MatchPlan
from jaxrl.core.metrics import MetricSpec, Scalar, mean_of
from jaxrl.core.opponents import RESULT_NAMES, OpponentPlan
from jaxrl.core.types import RunningStats
from jaxrl.envs import protocols
from jaxrl.features import (
    NO_READS,
    BuildContext,
    Feature,
    FeatureOutput,
    Registration,
    UpdateResult,
    masked_sums,
    set_rows,
)
from jaxrl.features.curriculum import CURRICULUM
from jaxrl.league.groups import group_kinds, group_mask, selfplay_layout
from jaxrl.league.pool import (
    MemberPoolState,
    Roster,
    SelfPlayState,
    empty_pool,
    empty_roster,
    league_probs,
    pfsp_probs,
    take_snapshot,
)
from jaxrl.league.rating import RULE_ELO, learner_rating

SELFPLAY = "selfplay"  # the feature's name: its runner features entry and checkpoint item


@dataclasses.dataclass(frozen=True, eq=False)
class SelfPlay(Feature):
    """The league (see the module docstring); checkpointed as ``selfplay``."""

    name = SELFPLAY
    reads = (CURRICULUM,)  # the curriculum's per-env switch of self-play
    config: SelfPlayConfig
    layout: Layout
    rule_kind: int  # the env's scripted kind of its RulePolicy
    members: int = 0  # R: the other members are opponents too (population league); 0 = off

    def init(self, params: Any, obs_stats: RunningStats) -> SelfPlayState:
        """An empty pool whose entry K is the initial policy (and an unwritten roster of the
        members in a population league)."""
        current = PolicyParams(params=params, obs_stats=obs_stats)
        state = empty_pool(current, self.config.pool_size, RULE_ELO)
        if self.members:
            roster = empty_roster(current, self.members, RULE_ELO)
            fields = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
            state = MemberPoolState(**fields, roster=roster)
        return state

    def switched_on(self, reads: Mapping[str, Any]) -> jax.Array:
        """[E] bool: training envs where self-play is on (a curriculum may switch it)."""
        num_envs = self.layout.num_envs
        curriculum = reads.get(CURRICULUM)
        on = None if curriculum is None else curriculum.switches.get(self.name)
        return jnp.ones((num_envs,), bool) if on is None else on

    def plan(
        self, state: SelfPlayState, plan: MatchPlan, reads: Mapping[str, Any] = NO_READS
    ) -> MatchPlan:
        """Opponents and sides of the training envs where self-play is on; the pool."""
        layout = self.layout
        on = self.switched_on(reads)
        kinds = jnp.asarray(group_kinds(layout, self.rule_kind))
        kind = jnp.where(on, kinds, plan.opponent_kind[: layout.num_envs])
        random_side = on & (self.config.sides == "random")
        random_side = jnp.where(on, random_side, plan.random_side[: layout.num_envs])
        pool = state.pool
        lane_probs = pfsp_probs(state.results, state.filled, self.config.pfsp)
        if self.members:  # the other members follow the pool's K + 1 entries
            roster = state.roster
            pool = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), pool, roster.policies)
            lane_probs = league_probs(
                lane_probs, roster, self.config.pfsp, self.config.cross_member
            )
        return plan.replace(
            opponent_kind=set_rows(plan.opponent_kind, 0, kind),
            random_side=set_rows(plan.random_side, 0, random_side),
            opponents=OpponentPlan(params=pool, probs=lane_probs),
        )

    def after_update(
        self, state: SelfPlayState, result: UpdateResult, reads: Mapping[str, Any] = NO_READS
    ) -> tuple[SelfPlayState, FeatureOutput]:
        """Results, Elo, snapshots; the current policy becomes pool entry K."""
        layout, config = self.layout, self.config
        groups = layout.opponents
        size = config.pool_size
        on = self.switched_on(reads)
        active = sum_over_devices(on.any().astype(jnp.int32), layout.axis) > 0

        # Pool games of this rollout (pure matches only, see jaxrl.core.opponents): PFSP's counts.
        if result.tally is None:  # no pool lanes: every training env plays latest or rule
            slot_results = jnp.zeros((size, len(RESULT_NAMES)), jnp.float32)
        else:
            slot_results = result.tally.slot_results[:size]
        games = slot_results.sum(-1)
        results = state.results * config.result_decay + slot_results
        # RulePolicy games: the rule group's matches, the learner's rating.
        rule_group = group_mask(layout, groups.current_envs, groups.lanes_start, on)
        rule = masked_sums(result.sums, rule_group, layout.axis)
        outcomes = jnp.stack([rule.outcome_sums[name] for name in RESULT_NAMES])
        rule_results = state.rule_results * config.result_decay + outcomes
        learner_elo = learner_rating(state.learner_elo, rule_results, config.elo_damping_games)

        # A snapshot every snapshot_every updates while self-play is on; it records the new
        # rating as the snapshot's.
        due = active & (result.update_step % config.snapshot_every == 0)
        current = PolicyParams(params=result.params, obs_stats=result.obs_stats)
        state = state.replace(rule_results=rule_results, learner_elo=learner_elo)
        state = take_snapshot(state, current, due, result.update_step, results)

        latest_group = group_mask(layout, 0, groups.current_envs, on)
        latest = masked_sums(result.sums, latest_group, layout.axis)
        pool_games = games.sum()
        weight = active.astype(jnp.float32)
        metrics = {
            "selfplay/elo": Scalar.of(learner_elo, weight),
            "selfplay/pool_size": Scalar.of(state.filled.sum(), weight),
            "selfplay/snapshots": Scalar.of(due),
            "selfplay/vs_pool/win": mean_of(slot_results[:, 0].sum(), pool_games),
            "selfplay/vs_pool/draw": mean_of(slot_results[:, 1].sum(), pool_games),
            "selfplay/vs_pool/loss": mean_of(slot_results[:, 2].sum(), pool_games),
            "selfplay/vs_rule/win": mean_of(rule.outcome_sums["win"], rule.matches),
            "selfplay/vs_rule/loss": mean_of(rule.outcome_sums["loss"], rule.matches),
            "selfplay/vs_latest/win": mean_of(latest.outcome_sums["win"], latest.matches),
        }
        if self.members:
            state, member_metrics = self.member_games(state, result.tally.slot_results[size + 1 :])
            metrics.update(member_metrics)
        return state, FeatureOutput.of(metrics)

    def member_games(
        self, state: MemberPoolState, counts: jax.Array
    ) -> tuple[MemberPoolState, dict[str, Scalar]]:
        """This update's games against the other members (``counts [R, 3]`` W/D/L, pure
        matches, all devices) into the roster, and the population league's metrics."""
        roster: Roster = state.roster
        roster = roster.replace(
            results=roster.results * self.config.result_decay + counts, last=counts
        )
        games = counts.sum()
        ready = roster.index >= 0
        metrics = {
            "league/rating": Scalar.of(roster.ratings[jnp.maximum(roster.index, 0)], ready),
            "league/member_games": Scalar.of(games),
            "league/vs_members/win": mean_of(counts[:, 0].sum(), games),
            "league/vs_members/loss": mean_of(counts[:, 2].sum(), games),
        }
        return state.replace(roster=roster), metrics

    def metric_specs(self) -> tuple[MetricSpec, ...]:
        """League figures: Elo and pool size at the chunk's end, win rates over it (and the
        member's league rating and games against the other members in a population league)."""
        members = ()
        if self.members:
            members = (
                MetricSpec("league/rating", "last"),
                MetricSpec("league/member_games", "sum"),
                MetricSpec("league/vs_members/win"),
                MetricSpec("league/vs_members/loss"),
            )
        return members + (
            MetricSpec("selfplay/elo", "last"),
            MetricSpec("selfplay/pool_size", "last"),
            MetricSpec("selfplay/snapshots", "sum"),
            MetricSpec("selfplay/vs_pool/win"),
            MetricSpec("selfplay/vs_pool/draw"),
            MetricSpec("selfplay/vs_pool/loss"),
            MetricSpec("selfplay/vs_rule/win"),
            MetricSpec("selfplay/vs_rule/loss"),
            MetricSpec("selfplay/vs_latest/win"),
        )

    def status(self, metrics: Mapping[str, float]) -> str:
        """``self-play on (pool 3/8)`` or ``self-play off`` (a curriculum stage switched it off
        for the whole chunk: its pool size went unreported); see
        :class:`jaxrl.run.summary.ReportsStatus`."""
        pool = metrics.get("selfplay/pool_size", math.nan)
        if math.isnan(pool):
            return "self-play off"
        return f"self-play on (pool {int(pool)}/{self.config.pool_size})"

    def summary(self, state: SelfPlayState) -> list[str]:
        """Pool size and bytes, the opponent groups."""
        groups, config = self.layout.opponents, self.config
        pool_bytes = sum(x.nbytes for x in jax.tree.leaves(state.pool))
        return [
            f"selfplay     pool of {config.pool_size} snapshots (+ current policy) = "
            f"{pool_bytes / 2**20:.2f} MiB on device, every {config.snapshot_every} updates, "
            f"pfsp {config.pfsp}, sides {config.sides}",
            f"  opponents  {groups.current_envs} envs vs current policy, {groups.scripted_envs} vs "
            f"RulePolicy, {groups.lanes} pool lanes x {groups.lane_envs} envs",
        ]


def make_selfplay(context: BuildContext) -> SelfPlay | None:
    """The self-play feature of the run (None when ``selfplay.pool_size`` is 0).

    Raises:
      ValueError: the env does not report win/draw/loss in ``info["episode_outcome"]``.
    """
    config = context.config.selfplay
    if config.pool_size == 0:
        return None
    if not all(name in context.outcome_names for name in RESULT_NAMES):
        raise ValueError(
            f"self-play needs {context.config.env.name} to report win/draw/loss in "
            "info['episode_outcome']"
        )
    rule_kind = protocols.scripted_kinds(context.env)[protocols.LEAGUE_ANCHOR]
    members = context.config.num_members if config.cross_member > 0 else 0
    return SelfPlay(config=config, layout=context.layout, rule_kind=rule_kind, members=members)


REGISTRATION = Registration(build=make_selfplay, layout=selfplay_layout)
