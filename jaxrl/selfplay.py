"""Self-play league inside the compiled step: an opponent pool, PFSP and an in-graph Elo.

The pool holds ``K`` snapshots of the learner (params and observation normaliser) stacked
``[K, ...]`` plus, as entry ``K``, the current policy (what a lane plays before the first
snapshot exists). A ring buffer takes a snapshot every ``selfplay.snapshot_every`` updates
while self-play is on. Per slot it keeps the learner's decayed win/draw/loss counts, which
drive prioritised fictitious self-play (PFSP): with ``w`` the learner's win rate against a
slot (draws count half; 0.5 before any game),

    hard:      weight (1 - w)^2   (the snapshots the learner loses to)
    variance:  weight w (1 - w)   (the even matches)
    uniform:   weight 1

normalised over the filled slots. Each pool lane of the layout draws its next opponent from
these probabilities (see :mod:`jaxrl.match`). Everything is arrays of fixed shape, so a
snapshot or a new draw never retraces.

Per update, with self-play on for an env (always, or where a curriculum stage switches it
on): the layout's ``latest`` envs play the current policy, its ``rule`` envs the env's
RulePolicy, its pool lanes their snapshots; the learner's side is drawn per env and match.

Rating. ``selfplay/elo`` is the learner's Bradley-Terry rating against the RulePolicy, the
anchor fixed at 1500 as in :mod:`jaxrl.tournament`. Every update adds the rollout's RulePolicy
matches to decayed win/draw/loss counts (``result_decay`` per update, as the pool's), and
:func:`learner_rating` moves the rating by damped Newton steps toward the maximum-likelihood
rating of those counts (draws half, plus the tournament's 1/2 virtual draw). Its fixed point
is the rating that the win/draw/loss *rates* imply, so 64 and 4096 envs read the same; more
games only make it less noisy. (The per-game K update it replaces moved ``K * (score - n E)``
per update: hundreds of K with hundreds of matches, which overshot and oscillated.)

Snapshots are not used to rate the learner. A snapshot plays only the learner, so in a joint
Bradley-Terry fit its rating is a free parameter that absorbs its own results and says nothing
about the learner's; holding it instead at the learner's rating when it was taken feeds the
learner's past estimate, error included, back into the current one (and re-rating both from
their games against each other lets them drift together, the K update's second failure).
The RulePolicy is the one player whose rating is known, and the tournament's anchor, so the
learner is rated against it alone. Each snapshot keeps the learner's rating at the time it was
taken (``SelfPlayState.elo``), a record that nothing feeds back from.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.acting import PolicyParams
from jaxrl.config import SelfPlayConfig
from jaxrl.elo import newton_elo
from jaxrl.features import Feature, FeatureOutput, UpdateResult, masked_sums, set_rows
from jaxrl.layout import Layout, sum_over_devices
from jaxrl.match import NETWORK, MatchPlan
from jaxrl.metrics import MetricSpec, Scalar, mean_of
from jaxrl.types import RunningStats

RULE_ELO = 1500.0  # the RulePolicy's fixed rating (the anchor)
# Virtual draws against the anchor, as jaxrl.tournament's fit: a perfect record stays finite.
RULE_PRIOR_GAMES = 0.5
# Newton steps per update; warm-started at the last rating, one or two already converge.
ELO_ITERATIONS = 4
PFSP_MODES = ("hard", "variance", "uniform")


class SelfPlayState(struct.PyTreeNode):
    """The league, carried in the runner state and checkpointed as ``selfplay``."""

    pool: PolicyParams  # [K + 1, ...] snapshots; entry K is the current policy
    filled: jax.Array  # [K] bool, the slot holds a snapshot
    added_at: jax.Array  # [K] int32, update step of the slot's snapshot (-1: empty)
    next_slot: jax.Array  # () int32, ring-buffer position of the next snapshot
    results: jax.Array  # [K, 3] float32, decayed learner wins/draws/losses against each slot
    elo: jax.Array  # [K] float32, the learner's Elo when the slot's snapshot was taken
    rule_results: jax.Array  # [3] float32, decayed learner wins/draws/losses against the rule
    learner_elo: jax.Array  # () float32, Elo of the learner (RulePolicy = 1500)
    snapshots: jax.Array  # () int32, snapshots taken so far


def win_rates(results: jax.Array) -> jax.Array:
    """[K] learner win rate per slot, ``(W + D/2) / (W + D + L)``; 0.5 without games."""
    games = results.sum(-1)
    score = results[..., 0] + 0.5 * results[..., 1]
    return jnp.where(games > 0, score / jnp.maximum(games, 1e-9), 0.5)


def pfsp_weights(win_rate: jax.Array, mode: str) -> jax.Array:
    """Unnormalised PFSP weight of each slot for the learner's win rate ``w`` against it."""
    if mode == "hard":
        return jnp.square(1.0 - win_rate)
    if mode == "variance":
        return win_rate * (1.0 - win_rate)
    if mode == "uniform":
        return jnp.ones_like(win_rate)
    raise ValueError(f"pfsp mode must be one of {PFSP_MODES}, got {mode!r}")


def pfsp_probs(results: jax.Array, filled: jax.Array, mode: str) -> jax.Array:
    """[K + 1] probabilities of a lane's next opponent.

    PFSP over the filled slots; uniform over them if every weight is 0 (e.g. ``hard`` when
    the learner beats every snapshot); all mass on entry K (the current policy) while the
    pool is empty.
    """
    weights = jnp.where(filled, pfsp_weights(win_rates(results), mode), 0.0)
    uniform = filled.astype(jnp.float32)
    weights = jnp.where(weights.sum() > 0, weights, uniform)
    weight_sum = weights.sum()
    empty = weight_sum <= 0
    probs = jnp.where(empty, 0.0, weights / jnp.maximum(weight_sum, 1e-30))
    return jnp.concatenate([probs, empty[None].astype(jnp.float32)])


def learner_rating(rating: jax.Array, rule_results: jax.Array, damping_games: float) -> jax.Array:
    """The learner's Elo from its decayed results against the RulePolicy (fixed at 1500).

    Damped Newton steps (:func:`jaxrl.elo.newton_elo`) from ``rating`` toward the
    maximum-likelihood rating of ``rule_results`` plus ``RULE_PRIOR_GAMES`` virtual draws,
    with a prior worth ``damping_games`` even games centred on ``rating``.

    Args:
      rating: () float32, the learner's rating after the previous update.
      rule_results: [3] float32, decayed wins/draws/losses against the RulePolicy.
      damping_games: weight of the prior on the previous rating, in games between equals.

    Returns:
      () float32, the new rating.
    """
    wins, draws, losses = rule_results[0], rule_results[1], rule_results[2]
    points = wins + 0.5 * draws + 0.5 * RULE_PRIOR_GAMES
    games = wins + draws + losses + RULE_PRIOR_GAMES
    return newton_elo(
        rating,
        jnp.full((1,), RULE_ELO, jnp.float32),
        points[None],
        games[None],
        damping_games,
        iterations=ELO_ITERATIONS,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class SelfPlay(Feature):
    """The league (see the module docstring); checkpointed as ``selfplay``."""

    name = "selfplay"
    config: SelfPlayConfig
    layout: Layout
    rule_kind: int  # the env's scripted kind of its RulePolicy

    def init(self, params: Any, obs_stats: RunningStats) -> SelfPlayState:
        """An empty pool whose entry K is the initial policy."""
        size = self.config.pool_size
        current = PolicyParams(params=params, obs_stats=obs_stats)
        pool = jax.tree.map(lambda x: jnp.broadcast_to(x, (size + 1,) + x.shape), current)
        return SelfPlayState(
            pool=jax.tree.map(jnp.array, pool),  # distinct buffers: the runner is donated
            filled=jnp.zeros((size,), bool),
            added_at=jnp.full((size,), -1, jnp.int32),
            next_slot=jnp.zeros((), jnp.int32),
            results=jnp.zeros((size, 3), jnp.float32),
            elo=jnp.full((size,), RULE_ELO, jnp.float32),
            rule_results=jnp.zeros((3,), jnp.float32),
            learner_elo=jnp.asarray(RULE_ELO, jnp.float32),
            snapshots=jnp.zeros((), jnp.int32),
        )

    def switched_on(self, plan: MatchPlan) -> jax.Array:
        """[E] bool: training envs where self-play is on (a curriculum may switch it)."""
        num_envs = self.layout.num_envs
        on = plan.switches.get(self.name)
        return jnp.ones((num_envs,), bool) if on is None else on[:num_envs]

    def plan(self, state: SelfPlayState, plan: MatchPlan) -> MatchPlan:
        """Opponents and sides of the training envs where self-play is on; the pool."""
        layout = self.layout
        on = self.switched_on(plan)
        group_kind = np.full(layout.num_envs, NETWORK, np.int32)
        group_kind[layout.latest_envs : layout.pool_start] = self.rule_kind
        kind = jnp.where(on, jnp.asarray(group_kind), plan.opponent_kind[: layout.num_envs])
        random_side = on & (self.config.sides == "random")
        random_side = jnp.where(on, random_side, plan.random_side[: layout.num_envs])
        return plan.replace(
            opponent_kind=set_rows(plan.opponent_kind, 0, kind),
            random_side=set_rows(plan.random_side, 0, random_side),
            pool=state.pool,
            lane_probs=pfsp_probs(state.results, state.filled, self.config.pfsp),
        )

    def _group_mask(self, start: int, stop: int, on: jax.Array) -> jax.Array:
        mask = np.zeros(self.layout.total_envs, bool)
        mask[start:stop] = True
        return jnp.asarray(mask) & set_rows(jnp.zeros((self.layout.total_envs,), bool), 0, on)

    def after_update(
        self, state: SelfPlayState, result: UpdateResult
    ) -> tuple[SelfPlayState, FeatureOutput]:
        """Results, Elo, snapshots; the current policy becomes pool entry K."""
        layout, config = self.layout, self.config
        size = config.pool_size
        on = self.switched_on(result.plan)
        active = sum_over_devices(on.any().astype(jnp.int32), layout.axis) > 0

        # Pool games of this rollout (pure matches only, see jaxrl.match): PFSP's counts.
        slot_results = result.slot_results[:size]
        games = slot_results.sum(-1)
        results = state.results * config.result_decay + slot_results
        # RulePolicy games: the rule group's matches, the learner's rating.
        rule = masked_sums(
            result.sums,
            self._group_mask(layout.latest_envs, layout.pool_start, on),
            layout.axis,
        )
        outcomes = jnp.stack([rule.outcome_sums[name] for name in ("win", "draw", "loss")])
        rule_results = state.rule_results * config.result_decay + outcomes
        learner_elo = learner_rating(state.learner_elo, rule_results, config.elo_damping_games)

        # A snapshot every snapshot_every updates while self-play is on.
        due = active & (result.update_step % config.snapshot_every == 0)
        slot = state.next_slot
        current = PolicyParams(params=result.params, obs_stats=result.obs_stats)

        def write(pool, new):
            pool = pool.at[slot].set(jnp.where(due, new, pool[slot]))
            return pool.at[size].set(new)  # entry K: the policy the next rollout plays

        pool = jax.tree.map(write, state.pool, current)
        state = SelfPlayState(
            pool=pool,
            filled=state.filled.at[slot].set(state.filled[slot] | due),
            added_at=state.added_at.at[slot].set(
                jnp.where(due, result.update_step, state.added_at[slot])
            ),
            next_slot=jnp.where(due, (slot + 1) % size, slot),
            results=results.at[slot].set(jnp.where(due, 0.0, results[slot])),
            elo=state.elo.at[slot].set(jnp.where(due, learner_elo, state.elo[slot])),
            rule_results=rule_results,
            learner_elo=learner_elo,
            snapshots=state.snapshots + due.astype(jnp.int32),
        )

        latest = masked_sums(result.sums, self._group_mask(0, layout.latest_envs, on), layout.axis)
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
        return state, FeatureOutput.of(metrics)

    def metric_specs(self) -> tuple[MetricSpec, ...]:
        """League figures: Elo and pool size at the chunk's end, win rates over it."""
        return (
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

    def summary(self, state: SelfPlayState) -> list[str]:
        """Pool size and bytes, the opponent groups."""
        layout, config = self.layout, self.config
        pool_bytes = sum(x.nbytes for x in jax.tree.leaves(state.pool))
        return [
            f"selfplay     pool of {config.pool_size} snapshots (+ current policy) = "
            f"{pool_bytes / 2**20:.2f} MiB on device, every {config.snapshot_every} updates, "
            f"pfsp {config.pfsp}, sides {config.sides}",
            f"  opponents  {layout.latest_envs} envs vs current policy, {layout.rule_envs} vs "
            f"RulePolicy, {layout.pool_lanes} pool lanes x {layout.lane_envs} envs",
        ]


def make_selfplay(config, layout: Layout, env) -> SelfPlay | None:
    """The self-play feature of ``config`` (None when ``selfplay.pool_size`` is 0)."""
    if config.selfplay.pool_size == 0:
        return None
    return SelfPlay(
        config=config.selfplay, layout=layout, rule_kind=int(env.scripted_kinds["rule"])
    )
