"""The snapshot pool and prioritised fictitious self-play (PFSP).

The pool holds ``K`` snapshots of the learner (params and observation normaliser) stacked
``[K, ...]`` plus, as entry ``K``, the current policy (what a lane plays before the first
snapshot exists). A ring buffer takes a snapshot every ``selfplay.snapshot_every`` updates
while self-play is on. Per slot it keeps the learner's decayed win/draw/loss counts, which
drive PFSP: with ``w`` the learner's win rate against a slot (draws count half; 0.5 before
any game),

    hard:      weight (1 - w)^2   (the snapshots the learner loses to)
    variance:  weight w (1 - w)   (the even matches)
    uniform:   weight 1

normalised over the filled slots. Each pool lane draws its next opponent from these
probabilities (:mod:`jaxrl.core.opponents`). Everything is arrays of fixed shape, so a
snapshot or a new draw never retraces.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.core.acting import PolicyParams
from jaxrl.core.elo import expected_score

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


class Roster(struct.PyTreeNode):
    """A member's view of the population league (:mod:`jaxrl.league.population`), kept in its
    self-play state so that PBT copies it with the pool and the member's update sees it.

    The league (a population feature) writes ``policies``, ``ratings`` and ``index`` after
    every update of the whole population; the member's own self-play feature adds its games
    against each member to ``results`` and ``last``.
    """

    policies: PolicyParams  # [R, ...] every member's current policy (entries K+1.. of the pool)
    ratings: jax.Array  # [R] float32, the league's ratings of the members
    results: jax.Array  # [R, 3] float32, decayed W/D/L of this member against each member
    last: jax.Array  # [R, 3] float32, this update's W/D/L against each member (league input)
    index: jax.Array  # () int32, this member's row (-1 until the league first writes it)


class MemberPoolState(SelfPlayState):
    """A member's league in a population league (``selfplay.cross_member`` > 0): the pool and
    the roster of the other members (a subclass, so a run without it keeps its checkpoints)."""

    roster: Roster  # the other members as opponents


def empty_roster(current: PolicyParams, members: int, rating: float) -> Roster:
    """A roster of ``members`` not yet written by the league (every entry ``current``)."""
    return Roster(
        policies=jax.tree.map(
            lambda x: jnp.array(jnp.broadcast_to(x, (members,) + x.shape)), current
        ),
        ratings=jnp.full((members,), rating, jnp.float32),
        results=jnp.zeros((members, 3), jnp.float32),
        last=jnp.zeros((members, 3), jnp.float32),
        index=jnp.full((), -1, jnp.int32),
    )


def member_probs(roster: Roster, mode: str) -> jax.Array:
    """[R] probabilities of a lane's next member opponent: PFSP on the expected win rate
    that the league's ratings give this member against each other member (uniform over them
    if every weight is 0); all 0 until the league has written the roster."""
    own = roster.ratings[jnp.maximum(roster.index, 0)]
    expected = expected_score(own, roster.ratings)
    members = jnp.arange(roster.ratings.shape[0])
    others = (members != roster.index) & (roster.index >= 0)
    weights = jnp.where(others, pfsp_weights(expected, mode), 0.0)
    weights = jnp.where(weights.sum() > 0, weights, others.astype(jnp.float32))
    return weights / jnp.maximum(weights.sum(), 1e-30)


def league_probs(
    pool_probs: jax.Array, roster: Roster, mode: str, cross_member: float
) -> jax.Array:
    """[K + 1 + R] a lane's next opponent: another member with probability ``cross_member``
    (once the league has written the roster), else the pool's PFSP draw ``pool_probs``."""
    share = jnp.where(roster.index >= 0, cross_member, 0.0)
    return jnp.concatenate([(1.0 - share) * pool_probs, share * member_probs(roster, mode)])


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


def empty_pool(current: PolicyParams, size: int, rating: float) -> SelfPlayState:
    """An empty pool of ``size`` slots whose entry K is ``current``; the learner at ``rating``."""
    pool = jax.tree.map(lambda x: jnp.broadcast_to(x, (size + 1,) + x.shape), current)
    return SelfPlayState(
        pool=jax.tree.map(jnp.array, pool),  # distinct buffers: the runner is donated
        filled=jnp.zeros((size,), bool),
        added_at=jnp.full((size,), -1, jnp.int32),
        next_slot=jnp.zeros((), jnp.int32),
        results=jnp.zeros((size, 3), jnp.float32),
        elo=jnp.full((size,), rating, jnp.float32),
        rule_results=jnp.zeros((3,), jnp.float32),
        learner_elo=jnp.asarray(rating, jnp.float32),
        snapshots=jnp.zeros((), jnp.int32),
    )


def fill_slot(
    state: SelfPlayState,
    policy: PolicyParams,
    due: jax.Array,
    update_step: jax.Array,
    elo: jax.Array,
) -> SelfPlayState:
    """``state`` with ``policy`` in the next ring slot where ``due`` (entry K untouched).

    The slot's results are cleared, its rating set to ``elo`` and ``added_at`` to
    ``update_step``; ``snapshots`` counts it. The learner's own snapshots
    (:func:`take_snapshot`) and the exploiters' hand-offs (:mod:`jaxrl.league.exploiters`)
    both enter the pool here.
    """
    size = state.filled.shape[0]
    slot = state.next_slot
    return state.replace(
        pool=jax.tree.map(
            lambda pool, new: pool.at[slot].set(jnp.where(due, new, pool[slot])),
            state.pool,
            policy,
        ),
        filled=state.filled.at[slot].set(state.filled[slot] | due),
        added_at=state.added_at.at[slot].set(jnp.where(due, update_step, state.added_at[slot])),
        next_slot=jnp.where(due, (slot + 1) % size, slot),
        results=state.results.at[slot].set(jnp.where(due, 0.0, state.results[slot])),
        elo=state.elo.at[slot].set(jnp.where(due, elo, state.elo[slot])),
        snapshots=state.snapshots + due.astype(jnp.int32),
    )


def take_snapshot(
    state: SelfPlayState,
    current: PolicyParams,
    due: jax.Array,
    update_step: jax.Array,
    results: jax.Array,
) -> SelfPlayState:
    """``state`` with ``current`` as pool entry K and, where ``due``, in the next ring slot.

    Args:
      state: the league before the snapshot; its ``learner_elo`` is the rating recorded.
      current: the policy after this update.
      due: () bool, a snapshot is due.
      update_step: () int32, the update the snapshot is taken at.
      results: [K, 3] float32, the per-slot results after this update (the new slot's are
        cleared).

    Returns:
      The new state (``filled``, ``added_at``, ``next_slot``, ``results``, ``elo``,
      ``snapshots`` and ``pool`` updated; the rest as in ``state``).
    """
    size = state.filled.shape[0]
    state = fill_slot(state.replace(results=results), current, due, update_step, state.learner_elo)
    # Entry K: the policy the next rollout plays.
    return state.replace(
        pool=jax.tree.map(lambda pool, new: pool.at[size].set(new), state.pool, current)
    )
