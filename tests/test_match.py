"""The match step on a two-team env: who drives which team, sides, rows, opponent kinds.

One jitted function (a scan of match steps on a tiny Soccer setup) serves the module; the
plan (opponent kinds, sides) is traced, so every case reuses the compile.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.commands.evaluate import eval_layout
from jaxrl.config import config_from_dict
from jaxrl.core import opponents
from jaxrl.core.acting import PolicyParams, act
from jaxrl.core.layout import OpponentGroups
from jaxrl.core.match import (
    FROM_PARAMS,
    NETWORK,
    MatchSpec,
    idle_plan,
    join_teams,
    learner_pass,
    match_step,
    opponent_actions,
    opponent_kinds,
    start_matches,
    step_keys,
    team_rows,
)
from jaxrl.core.opponents import OpponentPlan
from jaxrl.core.types import RunningStats
from jaxrl.envs.soccer import IDLE, RANDOM, RULE, observe
from jaxrl.run.runner import init_params
from jaxrl.run.setup import make_setup

ENVS = 4
STEPS = 20


@pytest.fixture(scope="module")
def setup():
    return make_setup(
        config_from_dict(
            {
                "env": {
                    "name": "Soccer",
                    "num_envs": ENVS,
                    "kwargs": {"max_steps_in_episode": 100},
                },
                "network": {"hidden_sizes": [8]},
                "ppo": {"num_steps": 8, "num_minibatches": 1},
            }
        )
    )


@pytest.fixture(scope="module")
def play(setup):
    """``(opponent_kind [E], side [E], learner_kind [E]) -> (env states [T], records [T])``."""
    layout = eval_layout(setup, ENVS)
    spec = MatchSpec(setup.env, setup.policy, layout, deterministic=True, eval_deterministic=True)
    learner = PolicyParams(
        params=init_params(setup, jax.random.key(0)),
        obs_stats=RunningStats.create(setup.obs_shape),
    )
    params = setup.env_params.replace(blue_size=2, orange_size=2, opponent_kind=RULE)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(opponent_kind, side, learner_kind):
        plan = idle_plan(layout, params).replace(
            opponent_kind=opponent_kind, side=side, learner_kind=learner_kind
        )
        carry = start_matches(spec, setup.network.initial_hidden, plan, jax.random.key(1))

        def step(c, key):
            c, record = match_step(spec, learner, plan, c, key)
            return c, (c.env_state, c.side, c.obs, record)

        _, out = jax.lax.scan(step, carry, jax.random.split(jax.random.key(2), STEPS))
        return carry, out

    return run


def _inner(state):
    while hasattr(state, "env_state"):
        state = state.env_state
    return state


def _moved(states, team: int) -> np.ndarray:
    """[E] bool: a car of ``team`` (its two active slots) ever had a non-zero velocity."""
    vel = np.asarray(_inner(states).bodies.car_vel)[:, :, 3 * team : 3 * team + 2]  # [T, E, 2, 2]
    return np.abs(vel).max(axis=(0, 2, 3)) > 0


def test_rows_and_join_are_inverse():
    x = jnp.arange(3 * 6).reshape(3, 6)
    side = jnp.asarray([0, 1, 0])
    own, other = team_rows(x, side, own=True), team_rows(x, side, own=False)
    np.testing.assert_array_equal(own[1], [9, 10, 11])
    np.testing.assert_array_equal(other[1], [6, 7, 8])
    np.testing.assert_array_equal(join_teams(own, other, side), x)


def test_opponent_comes_from_the_params_or_the_plan(play):
    learner_rule = jnp.full((ENVS,), RULE, jnp.int32)  # the learner's team plays rule too
    blue = jnp.zeros((ENVS,), jnp.int32)
    # Env params name the RulePolicy: orange drives.
    _, (states, *_) = play(jnp.full((ENVS,), FROM_PARAMS, jnp.int32), blue, learner_rule)
    assert _moved(states, team=1).all() and _moved(states, team=0).all()
    # The plan overrides the params: an idle orange never moves.
    _, (states, *_) = play(jnp.full((ENVS,), IDLE, jnp.int32), blue, learner_rule)
    assert not _moved(states, team=1).any() and _moved(states, team=0).all()
    # Per env: idle, rule, random, idle.
    kinds = jnp.asarray([IDLE, RULE, RANDOM, IDLE], jnp.int32)
    _, (states, *_) = play(kinds, blue, learner_rule)
    assert _moved(states, team=1).tolist() == [False, True, True, False]


def test_learner_drives_its_side_and_sees_its_own_rows(play, setup):
    side = jnp.asarray([0, 1, 1, 0], jnp.int32)
    idle = jnp.full((ENVS,), IDLE, jnp.int32)
    start, (states, sides, obs, record) = play(idle, side, jnp.full((ENVS,), RULE, jnp.int32))
    np.testing.assert_array_equal(start.side, side)
    np.testing.assert_array_equal(sides[-1], side)  # fixed sides stay across matches
    # The learner's team moves, the idle opponent's does not, whichever colour it is.
    moved_blue, moved_orange = _moved(states, 0), _moved(states, 1)
    np.testing.assert_array_equal(moved_blue, np.asarray(side) == 0)
    np.testing.assert_array_equal(moved_orange, np.asarray(side) == 1)
    # The learner's observation rows are its team's egocentric rows.
    last = jax.tree.map(lambda x: x[-1], _inner(states))
    params = setup.env_params.replace(blue_size=2, orange_size=2)
    for e in range(ENVS):
        state = jax.tree.map(lambda x, e=e: x[e], last)
        team = int(side[e])
        np.testing.assert_allclose(
            np.asarray(obs[-1]).reshape(ENVS, 3, -1)[e],
            observe(state, params, team=team),
            rtol=0,
            atol=1e-6,  # compiled and vmapped vs eager: float32 rounding
        )
    # Rewards and masks are the learner team's: two active cars per env.
    assert np.asarray(record.mask).reshape(STEPS, ENVS, 3).sum(-1).tolist() == [[2] * ENVS] * STEPS


# ----------------------------------------------------------------------------- step pieces


@pytest.fixture(scope="module")
def league(setup):
    """A 4-env batch with league groups (latest 1, rule 1, one lane of 2), started."""
    groups = OpponentGroups(current_envs=1, scripted_envs=1, lanes=1, lane_envs=2, start_entry=1)
    layout = dataclasses.replace(eval_layout(setup, ENVS), opponents=groups)
    spec = MatchSpec(setup.env, setup.policy, layout, deterministic=True, eval_deterministic=True)
    stats = RunningStats.create(setup.obs_shape)
    learner = PolicyParams(params=init_params(setup, jax.random.key(0)), obs_stats=stats)
    snapshot = PolicyParams(params=init_params(setup, jax.random.key(9)), obs_stats=stats)
    params = setup.env_params.replace(blue_size=2, orange_size=2, opponent_kind=RULE)
    plan = idle_plan(layout, params).replace(
        opponent_kind=jnp.asarray([NETWORK, RULE, NETWORK, NETWORK], jnp.int32),
        opponents=OpponentPlan(
            params=jax.tree.map(lambda a, b: jnp.stack([a, b]), snapshot, learner),
            probs=jnp.asarray([1.0, 0.0]),
        ),
    )
    carry = start_matches(spec, setup.network.initial_hidden, plan, jax.random.key(1))
    carry = carry.replace(
        opponent=carry.opponent.replace(
            lanes=carry.opponent.lanes.replace(
                slot=jnp.zeros((1,), jnp.int32)  # the lane plays the snapshot
            )
        )
    )
    return spec, learner, plan, carry, step_keys(spec, jax.random.key(2))


def test_learner_pass_batches_the_current_policy_opponents(league):
    spec, learner, _, carry, keys = league
    mine, latest = learner_pass(spec, learner, carry, keys.learner)
    size = spec.layout.team_size
    assert mine.action.shape == (ENVS * size,) and latest.action.shape == (size,)
    # Row by row the same network: the learner's rows (deterministic) as if acting alone,
    # the opponent rows as the opponent team's observations of env 0.
    alone = act(spec.policy, learner, carry.hidden, carry.obs, carry.is_first, keys.learner, True)
    np.testing.assert_array_equal(mine.action, alone.action)
    np.testing.assert_allclose(mine.value, alone.value, atol=1e-6)
    opp = carry.opponent
    theirs = act(
        spec.policy, learner, opp.hidden_latest, opp.obs[:size], opp.is_first[:size], keys.learner
    )
    np.testing.assert_allclose(latest.value, theirs.value, atol=1e-6)
    # Without a current-policy group there is no second part.
    no_current = dataclasses.replace(spec.layout.opponents, current_envs=0)
    plain = dataclasses.replace(spec, layout=dataclasses.replace(spec.layout, opponents=no_current))
    assert learner_pass(plain, learner, carry, keys.learner)[1] is None


def test_opponent_actions_by_group(league, setup):
    spec, learner, plan, carry, keys = league
    size = spec.layout.team_size
    _, latest = learner_pass(spec, learner, carry, keys.learner)
    kind, skill = opponent_kinds(plan, ENVS)
    np.testing.assert_array_equal(kind, plan.opponent_kind)
    action, opp = opponent_actions(spec, plan, carry.opponent, latest, kind, skill, keys)
    assert action.shape == (ENVS, size) and action.dtype == jnp.int32
    # Env 0: the current policy (from the learner's pass); env 1: the scripted RulePolicy;
    # envs 2-3: the lane, acting with the snapshot it plays.
    np.testing.assert_array_equal(action[0], latest.action)
    team_obs = carry.opponent.obs.reshape((ENVS, size) + setup.obs_shape)
    scripted = jax.vmap(setup.env.scripted_team_actions)(keys.scripted, team_obs, kind, skill)
    np.testing.assert_array_equal(action[1], scripted[1])
    rows = opponents.lane_rows(spec.layout)
    lane_action, lane_hidden = opponents.lane_actions(
        spec.policy,
        spec.layout,
        plan.opponents.params,
        carry.opponent.lanes,
        carry.opponent.obs[rows],
        carry.opponent.is_first[rows],
        keys.lanes[:1],
    )
    np.testing.assert_array_equal(action[2:], lane_action)
    chex.assert_trees_all_equal(opp.lanes.hidden, lane_hidden)
    # A scripted kind in a network group: the scripted policy acts.
    idle = kind.at[2:].set(IDLE)
    action, _ = opponent_actions(spec, plan, carry.opponent, latest, idle, skill, keys)
    scripted = jax.vmap(setup.env.scripted_team_actions)(keys.scripted, team_obs, idle, skill)
    np.testing.assert_array_equal(action[2:], scripted[2:])
