"""The match step on a two-team env: who drives which team, sides, rows, opponent kinds.

One jitted function (a scan of match steps on a tiny Soccer setup) serves the module; the
plan (opponent kinds, sides) is traced, so every case reuses the compile.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.soccer import IDLE, RANDOM, RULE, observe
from jaxrl.acting import PolicyParams
from jaxrl.config import config_from_dict
from jaxrl.evaluate import eval_layout
from jaxrl.match import (
    FROM_PARAMS,
    MatchSpec,
    idle_plan,
    join_teams,
    match_step,
    start_matches,
    team_rows,
)
from jaxrl.setup import init_params, make_setup
from jaxrl.types import RunningStats

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
