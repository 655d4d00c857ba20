"""The match step's network opponents: by group, and the lanes.

:func:`jaxrl.core.match.match_step` calls these pure functions on a two-team batch. They know
no league: the entries the lanes play and their draw probabilities arrive as the
:class:`OpponentPlan` in the :class:`~jaxrl.core.match.MatchPlan` a feature hands to the
match step (the league's :class:`~jaxrl.league.feature.SelfPlay`: its pool of snapshots, or
an exploiter's target), and the per-entry results go back to it in the step's tally. The
groups (:class:`~jaxrl.core.layout.OpponentGroups`, filled by a feature) are static slices
of the training envs; the current-policy group acts inside the learner's own forward pass,
each lane acts with the params of the entry it plays (one vmapped pass over the lanes).

A lane draws its entry from the plan's ``probs`` when every env of the lane has started a
new match since the last draw (matches of equal length keep a lane in step), and a match
counts in the per-entry results only if one entry played all of it. Envs of a lane not
playing its network (the feature switched off there, e.g. replayed curriculum stages)
neither count for the entry nor hold up the lane's next draw.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.core.acting import PolicyParams, PolicySpec, act
from jaxrl.core.layout import Layout, shard_rows

RESULT_NAMES = ("win", "draw", "loss")  # outcomes a two-team env reports for lane results


class OpponentPlan(struct.PyTreeNode):
    """What a feature hands the match step for the layout's lanes
    (:class:`~jaxrl.core.layout.OpponentGroups`)."""

    params: PolicyParams  # leaves [P, ...]: the entries a lane may play
    probs: jax.Array  # [P] float32: the distribution of a lane's next entry


class LaneCarry(struct.PyTreeNode):
    """The pool lanes' state in the match carry (``L`` lanes of ``n`` envs, ``S`` a team)."""

    hidden: Any  # [L, n * S, ...] carry of the lanes' opponent rows
    slot: jax.Array  # [L] int32, entry each lane plays (start_entry at the start)
    fresh: jax.Array  # [L, n] bool, env began a match since its lane's last draw
    pure: jax.Array  # [L, n] bool, the env's match so far was played by one entry


class LeagueTally(struct.PyTreeNode):
    """What the lanes count during a rollout: summed over its steps (and devices)."""

    slot_results: jax.Array  # [P, 3] float32, learner W/D/L of pure lane matches per entry


def start_lanes(layout: Layout, policy_hidden) -> LaneCarry:
    """Every lane on the groups' ``start_entry``, pure, with empty hidden states.

    ``policy_hidden(batch)`` returns the initial hidden state of ``batch`` rows.
    """
    groups = layout.opponents
    lanes, lane_envs = groups.lanes, groups.lane_envs
    return LaneCarry(
        hidden=jax.tree.map(
            lambda h: jnp.broadcast_to(h, (lanes,) + h.shape),
            policy_hidden(lane_envs * layout.team_size),
        ),
        slot=jnp.full((lanes,), groups.start_entry, jnp.int32),
        fresh=jnp.zeros((lanes, lane_envs), bool),
        pure=jnp.ones((lanes, lane_envs), bool),
    )


def plan_entries(layout: Layout, opponents: OpponentPlan | None) -> int:
    """Entries of the plan's opponents: ``P``, or ``start_entry + 1`` without a plan."""
    if opponents is None:
        return layout.opponents.start_entry + 1
    return opponents.probs.shape[0]


def empty_tally(layout: Layout, entries: int | None = None) -> LeagueTally | None:
    """A zero tally of ``entries`` entries (default ``start_entry + 1``; None without lanes)."""
    if not layout.opponents.lanes:
        return None
    entries = layout.opponents.start_entry + 1 if entries is None else entries
    return LeagueTally(slot_results=jnp.zeros((entries, len(RESULT_NAMES)), jnp.float32))


def lane_rows(layout: Layout) -> slice:
    """The lanes' opponent rows ``[lanes_start * S, (lanes_start + L * n) * S)``."""
    size, groups = layout.team_size, layout.opponents
    return slice(groups.lanes_start * size, groups.envs * size)


def lane_actions(
    policy: PolicySpec,
    layout: Layout,
    pool: PolicyParams,
    lanes: LaneCarry,
    obs: jax.Array,
    is_first: jax.Array,
    keys: jax.Array,
    legal: jax.Array | None = None,
) -> tuple[jax.Array, Any]:
    """Every lane's opponent rows act with the snapshot the lane plays.

    Args:
      policy: the acting spec.
      layout: the batch (sizes of the lanes).
      pool: the plan's entries, leaves ``[P, ...]``.
      lanes: the lanes' carry.
      obs: ``[L * n * S, *obs_shape]`` raw observations of the lanes' opponent rows.
      is_first: ``[L * n * S]`` bool.
      keys: ``[L]`` one sampling key per lane.
      legal: ``[L * n * S, num_actions]`` bool legal actions of the rows (masked envs), or None.

    Returns:
      ``(actions [L * n, S] int32, hidden [L, n * S, ...])``.
    """
    count, lane_envs, size = layout.opponents.lanes, layout.opponents.lane_envs, layout.team_size
    lane_policy = jax.tree.map(lambda x: x[lanes.slot], pool)  # [L, ...]
    per_lane = lambda x: x.reshape((count, lane_envs * size) + x.shape[1:])  # noqa: E731
    args = (policy, lane_policy, lanes.hidden, per_lane(obs), per_lane(is_first), keys)
    if legal is None:
        out = jax.vmap(act, in_axes=(None, 0, 0, 0, 0, 0))(*args)
    else:
        masked_act = lambda *a: act(*a[:-1], legal=a[-1])  # noqa: E731
        out = jax.vmap(masked_act, in_axes=(None, 0, 0, 0, 0, 0, 0))(*args, per_lane(legal))
    return out.action.reshape((count * lane_envs, size)), out.hidden


def group_actions(
    layout: Layout, num_envs: int, latest: jax.Array | None, lanes: jax.Array | None
) -> jax.Array | None:
    """[N, S] network actions of every env in group order (0 where no network acts).

    ``latest``: ``[latest_envs, S]`` the current-policy group's actions; ``lanes``:
    ``[L * n, S]`` the pool lanes'. None when neither group exists.
    """
    size = layout.team_size
    pieces = []
    if latest is not None:
        pieces.append(latest)
    if layout.opponents.scripted_envs:
        pieces.append(jnp.zeros((layout.opponents.scripted_envs, size), jnp.int32))
    if lanes is not None:
        pieces.append(lanes)
    if not pieces:
        return None
    covered = layout.opponents.envs
    pieces.append(jnp.zeros((num_envs - covered, size), jnp.int32))
    return jnp.concatenate(pieces)


def pure_results(
    layout: Layout,
    lanes: LaneCarry,
    done: jax.Array,
    networked: jax.Array,
    outcome: dict[str, jax.Array],
    entries: int | None = None,
) -> LeagueTally:
    """This step's finished pure matches of the lanes, per pool slot.

    Args:
      layout: the batch.
      lanes: the lanes' carry before this step (its ``slot`` played the step).
      done: ``[L, n]`` bool, the env's match ended this step.
      networked: ``[L, n]`` bool, the env's opponent is the lane's network.
      outcome: ``{win, draw, loss: [L, n] float32}`` the learner's outcome (valid where done).
      entries: pool entries (default ``K + 1``).

    Returns:
      The step's tally: ``[entries, 3]`` learner W/D/L per slot.
    """
    counted = (done & lanes.pure & networked).astype(jnp.float32)
    per_lane = jnp.stack(
        [(counted * outcome[name]).sum(1) for name in RESULT_NAMES], axis=-1
    )  # [L, 3]
    entries = layout.opponents.start_entry + 1 if entries is None else entries
    slot_results = jnp.zeros((entries, len(RESULT_NAMES)), jnp.float32).at[lanes.slot].add(per_lane)
    return LeagueTally(slot_results=slot_results)


def redraw_lanes(
    layout: Layout,
    lanes: LaneCarry,
    done: jax.Array,
    networked: jax.Array,
    lane_probs: jax.Array,
    key: jax.Array,
) -> tuple[LaneCarry, jax.Array]:
    """Lanes whose envs all began anew draw their next slot; purity follows.

    Args:
      layout: the batch (lanes, devices).
      lanes: the lanes' carry before this step.
      done: ``[L, n]`` bool, the env's match ended this step.
      networked: ``[L, n]`` bool, the env's opponent is the lane's network.
      lane_probs: ``[P]`` float32, the distribution of a lane's next entry.
      key: draws the slots of every lane of every device (sliced to this device's).

    Returns:
      ``(lanes, switched [L] bool)``: the new carry (its ``hidden`` unchanged) and the lanes
      that changed opponent (their rows start afresh).
    """
    count = layout.opponents.lanes
    fresh = lanes.fresh | done | ~networked
    ready = fresh.all(axis=1)  # [L]
    drawn = jax.random.categorical(key, jnp.log(lane_probs), shape=(count * layout.devices,))
    drawn = shard_rows(drawn, layout.axis, count)
    slot = jnp.where(ready, drawn.astype(jnp.int32), lanes.slot)
    switched = ready & (slot != lanes.slot)
    new = lanes.replace(
        slot=slot,
        fresh=jnp.where(ready[:, None], False, fresh),
        pure=jnp.where(done, True, jnp.where(switched[:, None], False, lanes.pure)),
    )
    return new, switched


def bookkeeping(
    layout: Layout,
    lanes: LaneCarry,
    done: jax.Array,
    networked: jax.Array,
    outcome: dict[str, jax.Array],
    opponents: OpponentPlan | None,
    key: jax.Array,
) -> tuple[LaneCarry, LeagueTally | None, jax.Array]:
    """The pool lanes after a match step: results of pure matches, then the next draws.

    Args:
      layout: the batch.
      lanes: the lanes' carry (hidden states already advanced).
      done: ``[N]`` bool, the env's match ended this step.
      networked: ``[N]`` bool, the env's opponent this step was a network.
      outcome: ``{win, draw, loss: [N] float32}`` the learner's outcomes (valid where done).
      opponents: the plan's entries and their draw distribution ``[P]``.
      key: the lanes' draw key.

    Returns:
      ``(lanes, tally, opponent_first [N * S] bool)``: the new carry, this step's tally (None
      without pool lanes) and which opponent rows start afresh (a new match, or a lane that
      changed opponent).
    """
    first = jnp.repeat(done, layout.team_size)
    groups = layout.opponents
    if not groups.lanes:
        return lanes, None, first
    count, lane_envs = groups.lanes, groups.lane_envs
    pool = slice(groups.lanes_start, groups.envs)

    def per_lane(x):  # [N] -> [L, n] of the pool envs
        return x[pool].reshape(count, lane_envs)

    pool_done, pool_networked = per_lane(done), per_lane(networked)
    pool_outcome = {name: per_lane(outcome[name]) for name in RESULT_NAMES}
    entries = plan_entries(layout, opponents)
    tally = pure_results(layout, lanes, pool_done, pool_networked, pool_outcome, entries)
    probs = opponents.probs
    lanes, switched = redraw_lanes(layout, lanes, pool_done, pool_networked, probs, key)
    lane_first = jnp.repeat(
        jnp.broadcast_to(switched[:, None], (count, lane_envs)).reshape(-1), layout.team_size
    )
    rows = lane_rows(layout)
    first = first.at[rows].set(first[rows] | lane_first)
    return lanes, tally, first
