"""The league's pieces of the match step, on hand-made arrays (no env, no network).

Opponent groups and their network actions, the pool lanes' per-slot results of pure
matches, their next draws and the match step's bookkeeping of which opponent rows restart.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config import SelfPlayConfig
from jaxrl.core.layout import Layout, OpponentGroups
from jaxrl.core.match import NETWORK
from jaxrl.core.opponents import (
    LaneCarry,
    OpponentPlan,
    bookkeeping,
    empty_tally,
    group_actions,
    lane_rows,
    pure_results,
    redraw_lanes,
    start_lanes,
)
from jaxrl.league.groups import group_kinds, group_mask, group_sizes

RULE = 1
NAMES = ("win", "draw", "loss")


def _layout(latest=1, rule=1, lanes=2, lane_envs=3, pool_size=3, eval_envs=1, size=2) -> Layout:
    return Layout(
        num_envs=latest + rule + lanes * lane_envs,
        measured_envs=(eval_envs,) if eval_envs else (),
        num_agents=2 * size,
        two_team=True,
        team_size=size,
        per_env_params=False,
        opponents=OpponentGroups(
            current_envs=latest,
            scripted_envs=rule,
            lanes=lanes,
            lane_envs=lane_envs,
            start_entry=pool_size,
        ),
    )


def _lanes(slot, fresh, pure) -> LaneCarry:
    fresh, pure = jnp.asarray(fresh, bool), jnp.asarray(pure, bool)
    return LaneCarry(hidden=(), slot=jnp.asarray(slot, jnp.int32), fresh=fresh, pure=pure)


# ----------------------------------------------------------------------------- groups


def test_group_sizes_split_the_training_envs():
    config = SelfPlayConfig(pool_size=4, latest_fraction=0.25, rule_fraction=0.25, lanes=3)
    sizes = group_sizes(config, 24)
    assert (sizes.current_envs, sizes.scripted_envs, sizes.lanes, sizes.lane_envs) == (6, 6, 3, 4)
    assert sizes.start_entry == 4  # entry K: the current policy
    # Every env against the current policy or the rule: no lanes.
    config = SelfPlayConfig(pool_size=4, latest_fraction=0.5, rule_fraction=0.5, lanes=3)
    assert (group_sizes(config, 8).lanes, group_sizes(config, 8).lane_envs) == (0, 0)
    assert group_sizes(SelfPlayConfig(), 8) == OpponentGroups()  # self-play off


def test_group_kinds_and_masks():
    layout = _layout(latest=2, rule=1, lanes=1, lane_envs=2)  # 5 training envs, 1 eval env
    np.testing.assert_array_equal(
        group_kinds(layout, RULE), [NETWORK, NETWORK, RULE] + [NETWORK] * 2
    )
    on = jnp.asarray([True, False, True, True, True])
    groups = layout.opponents
    mask = group_mask(layout, groups.current_envs, groups.lanes_start, on)  # the rule group
    np.testing.assert_array_equal(mask, [False, False, True, False, False, False])
    mask = group_mask(layout, 0, groups.current_envs, on)  # latest, env 1 switched off
    np.testing.assert_array_equal(mask, [True, False, False, False, False, False])


def test_group_actions_in_group_order():
    layout = _layout(latest=1, rule=1, lanes=1, lane_envs=2, eval_envs=1, size=2)
    latest = jnp.asarray([[1, 2]], jnp.int32)
    lanes = jnp.asarray([[3, 4], [5, 6]], jnp.int32)
    actions = group_actions(layout, layout.total_envs, latest, lanes)
    # latest | rule (0) | lane envs | evaluation env (0)
    np.testing.assert_array_equal(actions, [[1, 2], [0, 0], [3, 4], [5, 6], [0, 0]])
    no_groups = _layout(latest=0, rule=0, lanes=0, lane_envs=0)
    assert group_actions(no_groups, no_groups.total_envs, None, None) is None


# ----------------------------------------------------------------------------- lanes


def test_start_lanes_and_empty_tally():
    layout = _layout()
    lanes = start_lanes(layout, lambda rows: jnp.zeros((rows, 5)))
    assert lanes.hidden.shape == (2, 3 * 2, 5)
    np.testing.assert_array_equal(lanes.slot, [3, 3])  # entry K: the current policy
    assert not lanes.fresh.any() and lanes.pure.all()
    assert empty_tally(layout).slot_results.shape == (4, 3)
    assert empty_tally(_layout(lanes=0, lane_envs=0)) is None
    assert lane_rows(layout) == slice(2 * 2, 8 * 2)


def test_pure_results_count_only_whole_matches_of_one_slot():
    layout = _layout()  # K = 3
    lanes = _lanes([2, 0], fresh=np.zeros((2, 3)), pure=[[1, 0, 1], [1, 1, 1]])
    done = jnp.asarray([[1, 1, 0], [1, 1, 1]], bool)
    networked = jnp.asarray([[1, 1, 1], [1, 0, 1]], bool)
    outcome = {
        "win": jnp.asarray([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0]]),
        "draw": jnp.asarray([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]),
        "loss": jnp.asarray([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
    }
    tally = pure_results(layout, lanes, done, networked, outcome)
    # Lane 0 (slot 2): env 0 counts (a win); env 1 was not pure, env 2 did not finish.
    # Lane 1 (slot 0): env 0 a draw, env 1 played the rule (not networked), env 2 a loss.
    expected = np.zeros((4, 3), np.float32)
    expected[2] = [1, 0, 0]
    expected[0] = [0, 1, 1]
    np.testing.assert_array_equal(tally.slot_results, expected)


def test_redraw_waits_for_every_env_of_a_lane():
    layout = _layout()
    lanes = _lanes(
        [3, 1],
        fresh=[[1, 1, 0], [0, 0, 0]],
        pure=[[1, 1, 1], [0, 1, 1]],
    )
    done = jnp.asarray([[0, 0, 1], [1, 0, 0]], bool)  # lane 0's last env finishes its match
    networked = jnp.ones((2, 3), bool)
    probs = jnp.asarray([0.0, 0.0, 1.0, 0.0])  # every draw is slot 2
    new, switched = redraw_lanes(layout, lanes, done, networked, probs, jax.random.key(0))
    np.testing.assert_array_equal(new.slot, [2, 1])  # lane 0 drew, lane 1 waits
    np.testing.assert_array_equal(switched, [True, False])
    np.testing.assert_array_equal(new.fresh, [[0, 0, 0], [1, 0, 0]])
    # Purity: a finished match starts pure; a lane that switched makes its running ones impure.
    np.testing.assert_array_equal(new.pure, [[0, 0, 1], [1, 1, 1]])
    # Envs that do not play the lane's network never hold it up: lane 1's env 0 plays the
    # rule, its other two envs finish their matches.
    networked = jnp.asarray([[1, 1, 1], [0, 1, 1]], bool)
    done = jnp.asarray([[0, 0, 1], [0, 1, 1]], bool)
    new, switched = redraw_lanes(layout, lanes, done, networked, probs, jax.random.key(0))
    np.testing.assert_array_equal(switched, [True, True])


def test_redraw_to_the_same_slot_does_not_restart():
    layout = _layout(lanes=1)
    lanes = _lanes([2], fresh=[[1, 1, 1]], pure=[[1, 0, 1]])
    probs = jnp.asarray([0.0, 0.0, 1.0, 0.0])
    new, switched = redraw_lanes(
        layout, lanes, jnp.zeros((1, 3), bool), jnp.ones((1, 3), bool), probs, jax.random.key(0)
    )
    assert not switched.any()
    np.testing.assert_array_equal(new.pure, lanes.pure)
    assert not new.fresh.any()  # a draw happened: the lane waits for new matches again


def _bookkeeping(lanes: int):
    layout = _layout(latest=1, rule=1, lanes=lanes, lane_envs=2, size=2)
    num_envs = layout.total_envs  # 4 training envs with a lane, 2 without; 1 evaluation env
    planned = OpponentPlan(params=None, probs=jnp.asarray([0.0, 0.0, 0.0, 1.0]))  # no acting here
    carry = _lanes([0] * lanes, np.ones((lanes, 2)), np.ones((lanes, 2)))
    done = jnp.asarray([1, 0, 0, 1, 0] if lanes else [1, 0, 1], bool)
    networked = jnp.ones((num_envs,), bool)
    outcome = {"win": jnp.ones((num_envs,)), "draw": jnp.zeros((num_envs,))}
    outcome["loss"] = jnp.zeros((num_envs,))
    return (
        layout,
        done,
        bookkeeping(layout, carry, done, networked, outcome, planned, jax.random.key(0)),
    )


def test_bookkeeping_restarts_the_rows_of_switched_lanes():
    _, _, (new, tally, first) = _bookkeeping(lanes=1)
    # Env 3 (the lane's second env) won a pure match against slot 0; the lane (all fresh)
    # drew slot 3, so both of its envs' opponent rows restart; env 0's because its match ended.
    np.testing.assert_array_equal(tally.slot_results, [[1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(new.slot, [3])
    np.testing.assert_array_equal(first, [1, 1, 0, 0, 1, 1, 1, 1, 0, 0])


def test_bookkeeping_without_lanes_restarts_finished_matches_only():
    layout, done, (new, tally, first) = _bookkeeping(lanes=0)
    assert tally is None and new.slot.shape == (0,)
    np.testing.assert_array_equal(first, np.repeat(np.asarray(done), layout.team_size))
