"""Soccer env: gymnax contract, masks, physics, mirror symmetry, RulePolicy strength, rendering.

One compiled function serves the whole module: ``_ROLL``, ``scripted_rollout`` (``ROLL_STEPS``
vmapped ``env.step`` calls under ``lax.scan``) on ``ROLL_ENVS`` envs, wrapped in
``chex.assert_max_traces(n=1)`` and reused across team sizes, opponents, blue policies and
reward settings (all traced params) and across hand-set start states. Whole matches chain
``_ROLL`` calls. Everything else runs eagerly on single states.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

import envs
from envs.soccer import (
    IDLE,
    OBS_DIM,
    RANDOM,
    REWARD_TERMS,
    RULE,
    EnvParams,
    RewardWeights,
    Soccer,
    load_reward_weights,
    observe,
    physics,
    rule_policy_actions,
    scripted_rollout,
)
from envs.soccer import env as soccer_env
from envs.soccer.render import BLUE, GRASS, ORANGE, render_frames, save_gif

ROLL_ENVS = 64
ROLL_STEPS = 100
MATCH_STEPS = 1000  # = max_steps_in_episode below: a match is one full episode per env

ENV = Soccer()
INFO_KEYS = {
    "agent_mask",
    "goal_blue",
    "goal_orange",
    "score_blue",
    "score_orange",
    "ball_touch",
    "reward_terms",
    "episode_outcome",
    "terminated",
    "truncated",
    "final_observation",
}


def _params(**overrides) -> EnvParams:
    return ENV.default_params.replace(max_steps_in_episode=MATCH_STEPS, **overrides)


@jax.jit
@chex.assert_max_traces(n=1)
def _ROLL(key, state, params, learner_kind):  # noqa: N802 - the module's compiled function
    return scripted_rollout(ENV, key, state, params, learner_kind, ROLL_STEPS)


@jax.jit
@chex.assert_max_traces(n=1)
def _RESET(key, params):  # noqa: N802 - small; op-by-op eager dispatch would cost more
    return jax.vmap(ENV.reset_env, in_axes=(0, None))(jax.random.split(key, ROLL_ENVS), params)[1]


@jax.jit
@chex.assert_max_traces(n=1)
def _VIEWS(state, params):  # noqa: N802 - both teams' observations and RulePolicy actions
    return (
        observe(state, params, team=0),
        observe(state, params, team=1),
        rule_policy_actions(None, state, params, 0),
        rule_policy_actions(None, state, params, 1),
    )


def _reset(params, seed=0):
    return _RESET(jax.random.key(seed), params)


def _roll(state, params, learner_kind, seed=0):
    state, trace = _ROLL(jax.random.key(seed), state, params, jnp.int32(learner_kind))
    return state, jax.tree.map(np.asarray, trace)


@functools.cache
def _match(blue, orange, opponent, learner, seed=0):
    """Trace [MATCH_STEPS, ROLL_ENVS] of one full match per env (cached: tests share runs)."""
    params = _params(blue_size=blue, orange_size=orange, opponent_kind=opponent)
    state = _reset(params, seed)
    traces = []
    for chunk in range(MATCH_STEPS // ROLL_STEPS):
        state, trace = _roll(state, params, learner, seed=1000 * seed + chunk)
        traces.append(trace)
    return jax.tree.map(lambda *xs: np.concatenate(xs), *traces)


def _results(trace):
    """(wins, losses) for blue over the matches of a ``_match`` trace."""
    done = trace.terminated | trace.truncated
    assert np.all(done.sum(0) == 1) and np.all(done[-1])
    blue, orange = trace.score_blue[-1], trace.score_orange[-1]
    return int((blue > orange).sum()), int((blue < orange).sum())


# ----------------------------------------------------------------------------- contract


def test_spaces_and_registry():
    env, params = envs.make("Soccer", blue_size=2, opponent_kind=RANDOM)
    assert isinstance(env, Soccer) and env.name == "Soccer"
    assert env.num_agents == 3 and env.num_actions == 18
    assert env.action_space(params).n == 18
    assert env.observation_space(params).shape == (3, OBS_DIM)
    # Python scalars from overrides are cast to the leaf dtype, so they never change the jit key.
    assert params.blue_size.dtype == np.int32 and params.opponent_kind == RANDOM
    assert params.replace(opponent_skill=1).opponent_skill.dtype == np.float32
    assert params.replace(goal_ends_episode=True).goal_ends_episode.dtype == np.bool_


def test_step_contract_shapes_dtypes_and_info_keys():
    """Output structure of a vmapped step (abstract evaluation: no compilation)."""
    params = _params(blue_size=3, orange_size=3)
    state = _reset(params)
    keys = jax.random.split(jax.random.key(1), ROLL_ENVS)
    actions = jnp.zeros((ROLL_ENVS, 3), jnp.int32)
    vstep = jax.vmap(ENV.step, in_axes=(0, 0, 0, None))
    out = jax.eval_shape(vstep, keys, state, actions, params)
    obs, next_state, reward, terminated, truncated, info = out
    # Stepping from the stepped state gives the identical structure (scan-compatible).
    assert jax.eval_shape(vstep, keys, next_state, actions, params) == out
    assert jax.tree.structure(next_state) == jax.tree.structure(state)
    n = ROLL_ENVS
    assert (obs.shape, obs.dtype) == ((n, 3, OBS_DIM), jnp.float32)
    assert (reward.shape, reward.dtype) == ((n, 3), jnp.float32)
    assert (terminated.shape, terminated.dtype) == ((n,), jnp.bool_)
    assert (truncated.shape, truncated.dtype) == ((n,), jnp.bool_)
    assert set(info) == INFO_KEYS
    assert (info["agent_mask"].shape, info["agent_mask"].dtype) == ((n, 3), jnp.bool_)
    for key in ("goal_blue", "goal_orange", "score_blue", "score_orange"):
        assert (info[key].shape, info[key].dtype) == ((n,), jnp.float32)
    assert (info["ball_touch"].shape, info["ball_touch"].dtype) == ((n, 3), jnp.float32)
    assert set(info["reward_terms"]) == set(REWARD_TERMS)
    assert set(info["episode_outcome"]) == {"win", "draw", "loss", "goals_for", "goals_against"}
    for term in info["reward_terms"].values():
        assert (term.shape, term.dtype) == ((n, 3), jnp.float32)
    assert info["final_observation"].shape == (n, 3, OBS_DIM)
    assert next_state.time.dtype == jnp.int32


def test_reward_is_team_spirit_blend_of_terms():
    params = _params(blue_size=3, orange_size=2, opponent_kind=RULE)
    _, trace = _roll(_reset(params, seed=2), params, RULE)
    individual = sum(trace.reward_terms.values())  # [T, B, 3]
    mask = trace.agent_mask
    ts = float(params.reward.team_spirit)
    mean = (individual * mask).sum(-1, keepdims=True) / np.maximum(mask.sum(-1, keepdims=True), 1)
    np.testing.assert_allclose(
        trace.reward, np.where(mask, (1 - ts) * individual + ts * mean, 0), atol=1e-5
    )
    assert np.abs(trace.reward_terms["vel_to_ball"]).sum() > 0
    assert trace.reward_terms["touch"].sum() > 0

    sparse = params.replace(reward=params.reward.replace(sparse=True))
    _, trace = _roll(_reset(sparse, seed=2), sparse, RULE)
    for name, term in trace.reward_terms.items():
        if not name.startswith("goal"):
            np.testing.assert_array_equal(term, 0.0)
    goal_terms = trace.reward_terms["goal_scored"] + trace.reward_terms["goal_conceded"]
    np.testing.assert_array_equal(trace.reward == 0.0, goal_terms == 0.0)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_masks_per_team_size(size):
    """1v1, 2v2, 3v3 from the same compiled function."""
    params = _params(blue_size=size, orange_size=size, opponent_kind=RULE)
    state, trace = _roll(_reset(params), params, RANDOM)
    expected = np.arange(3) < size
    np.testing.assert_array_equal(trace.agent_mask, np.broadcast_to(expected, (100, 64, 3)))
    assert trace.obs_masked.all() and trace.obs_finite.all() and trace.parked.all()
    np.testing.assert_array_equal(trace.reward[..., ~expected], 0.0)
    assert np.all(trace.reward[..., expected] != 0.0)  # the time penalty at least
    np.testing.assert_array_equal(state.car_active[:, :3], np.broadcast_to(expected, (64, 3)))
    # Teammate and opponent active flags (first feature of each 9-wide block) of slot 0.
    obs = _VIEWS(jax.tree.map(lambda x: x[0], state), params)[0]
    np.testing.assert_array_equal(obs[0, [20, 29]], np.arange(1, 3) < size)
    np.testing.assert_array_equal(obs[0, [38, 47, 56]], expected)


def test_long_random_rollouts_are_finite_and_keep_the_ball_in_the_field():
    """64 envs x 1000 steps each: random blue vs RulePolicy 3v3, vs random 1v1, vs idle 2v3."""
    for blue, orange, opponent in ((3, 3, RULE), (1, 1, RANDOM), (2, 3, IDLE)):
        trace = _match(blue, orange, opponent, RANDOM)
        label = (blue, orange, opponent)
        assert trace.obs_finite.all() and np.isfinite(trace.reward).all(), label
        assert trace.obs_masked.all() and trace.parked.all(), label
        assert bool(physics.inside_field(trace.ball_pos, physics.BALL_RADIUS).all()), label
        assert trace.ball_touch.sum() > 0, label
        _results(trace)  # exactly one episode end per env, at the match clock


def test_compiles_once_across_team_sizes_opponents_and_rewards():
    """Team sizes, opponents, skill, episode mode and reward switches are leaves: no retrace."""
    for learner, params in (
        (IDLE, _params(opponent_skill=0.5)),
        (RULE, _params(opponent_kind=IDLE, goal_ends_episode=True)),
        (RANDOM, _params(reward=RewardWeights(sparse=True, team_spirit=1.0))),
        (RULE, _params(blue_size=0, orange_size=2, opponent_kind=RANDOM)),
        (RANDOM, _params(blue_size=2, orange_size=1, physics=physics.PhysicsParams(ball_mass=0.5))),
    ):
        _, trace = _roll(_reset(params), params, learner)
        assert trace.obs_finite.all()
    # _ROLL's assert_max_traces(n=1) would have raised on a second trace.


def test_nested_reward_override_from_make_sets_only_those_weights_without_retrace():
    """``envs.make("Soccer", reward={...})`` (what env.kwargs does) keeps dtypes: same trace."""
    _, params = envs.make(
        "Soccer",
        max_steps_in_episode=MATCH_STEPS,
        blue_size=3,
        orange_size=2,
        reward={"touch": 2, "vel_to_ball": 0.0},
    )
    assert params.reward.replace(touch=np.float32(0.5), vel_to_ball=np.float32(0.01)) == (
        ENV.default_params.reward
    )
    _, trace = _roll(_reset(params, seed=2), params, RULE)  # _ROLL allows one trace only
    assert trace.ball_touch.sum() > 0
    np.testing.assert_allclose(trace.reward_terms["touch"], 2.0 * trace.ball_touch)
    np.testing.assert_array_equal(trace.reward_terms["vel_to_ball"], 0.0)
    with pytest.raises(ValueError, match="'reward.tuch'"):
        envs.make("Soccer", reward={"tuch": 0.1})
    with pytest.raises(ValueError, match="'reward' is a RewardWeights"):
        envs.make("Soccer", reward=0.1)
    with pytest.raises(ValueError, match="'blue_size' is not a struct"):
        envs.make("Soccer", blue_size={"n": 1})


# ----------------------------------------------------------------------------- rewards


def test_reward_yaml_matches_defaults_and_validates(tmp_path):
    assert load_reward_weights() == RewardWeights()
    raw = yaml.safe_load(soccer_env.DEFAULT_REWARD_PATH.read_text())
    assert set(raw) == {f.name for f in dataclasses.fields(RewardWeights)}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**raw, "goal_scroed": 1.0}))
    with pytest.raises(ValueError, match="goal_scroed"):
        load_reward_weights(bad)
    bad.write_text(yaml.safe_dump({**raw, "sparse": 1}))
    with pytest.raises(ValueError, match="sparse"):
        load_reward_weights(bad)


def test_team_spirit_blend():
    individual = jnp.array([1.0, 3.0, 100.0])
    mask = jnp.array([True, True, False])
    np.testing.assert_allclose(soccer_env.blend_team_spirit(individual, mask, 0.0), [1, 3, 0])
    np.testing.assert_allclose(soccer_env.blend_team_spirit(individual, mask, 1.0), [2, 2, 0])
    np.testing.assert_allclose(soccer_env.blend_team_spirit(individual, mask, 0.5), [1.5, 2.5, 0])


# ----------------------------------------------------------------------------- physics


def _kin(car_xy, car_v, ball_xy, ball_v):
    """Kinematics with car 0 at ``car_xy`` and the other cars far away."""
    car_x = jnp.array([car_xy[0], 50, 55, 60, 65, 70], jnp.float32)
    car_y = jnp.array([car_xy[1], 50, 50, 50, 50, 50], jnp.float32)
    zeros = jnp.zeros(6, jnp.float32)
    return physics.Kinematics(
        car_x=car_x,
        car_y=car_y,
        car_vx=zeros.at[0].set(car_v[0]),
        car_vy=zeros.at[0].set(car_v[1]),
        car_cos=jnp.ones(6),
        car_sin=zeros,
        car_boost=zeros,
        ball_x=jnp.float32(ball_xy[0]),
        ball_y=jnp.float32(ball_xy[1]),
        ball_vx=jnp.float32(ball_v[0]),
        ball_vy=jnp.float32(ball_v[1]),
    )


def test_car_ball_collision_conserves_momentum_up_to_restitution():
    pp = physics.PhysicsParams(car_mass=1.5, ball_mass=0.25, restitution_car_ball=0.6)
    m_c, m_b, e = 1.5, 0.25, 0.6
    before = _kin((0.0, 0.0), (2.0, 0.3), (0.43, 0.1), (-1.0, 0.5))
    active = jnp.array([True] + [False] * 5)
    after, touch = physics.collide_ball(before, active, pp)
    assert bool(touch[0]) and not bool(touch[1:].any())

    def momentum(k):
        return np.array([m_c * k.car_vx[0] + m_b * k.ball_vx, m_c * k.car_vy[0] + m_b * k.ball_vy])

    def centre_of_mass(k):
        return np.array([m_c * k.car_x[0] + m_b * k.ball_x, m_c * k.car_y[0] + m_b * k.ball_y])

    np.testing.assert_allclose(momentum(after), momentum(before), atol=1e-5)
    np.testing.assert_allclose(centre_of_mass(after), centre_of_mass(before), atol=1e-5)
    normal = np.array([0.43, 0.1]) / np.hypot(0.43, 0.1)  # from car to ball, before the hit

    def rel(k):
        return np.array([k.ball_vx - k.car_vx[0], k.ball_vy - k.car_vy[0]])

    rel_n_before, rel_n_after = rel(before) @ normal, rel(after) @ normal
    assert rel_n_before < 0  # closing
    np.testing.assert_allclose(rel_n_after, -e * rel_n_before, rtol=1e-5)
    tangent = np.array([-normal[1], normal[0]])
    np.testing.assert_allclose(rel(after) @ tangent, rel(before) @ tangent, atol=1e-5)
    gap = np.hypot(after.ball_x - after.car_x[0], after.ball_y - after.car_y[0])
    np.testing.assert_allclose(gap, physics.CAR_RADIUS + physics.BALL_RADIUS, rtol=1e-5)
    # Inactive cars are untouched.
    np.testing.assert_array_equal(after.car_x[1:], before.car_x[1:])


def test_car_car_collision_conserves_momentum():
    pp = physics.PhysicsParams(restitution_car_car=0.3)
    kin = _kin((0.0, 0.0), (1.0, 0.0), (3.0, 3.0), (0.0, 0.0))
    kin = kin.replace(
        car_x=kin.car_x.at[3].set(0.45),
        car_y=kin.car_y.at[3].set(0.05),
        car_vx=kin.car_vx.at[3].set(-1.0),
    )
    active = jnp.array([True, False, False, True, False, False])
    after = physics.collide_cars(kin, active, pp)
    for axis in ("car_vx", "car_vy"):
        np.testing.assert_allclose(getattr(after, axis).sum(), getattr(kin, axis).sum(), atol=1e-6)
    normal = np.array([-0.45, -0.05]) / np.hypot(0.45, 0.05)  # from car 3 to car 0
    rel_before = np.array([kin.car_vx[0] - kin.car_vx[3], kin.car_vy[0] - kin.car_vy[3]])
    rel_after = np.array([after.car_vx[0] - after.car_vx[3], after.car_vy[0] - after.car_vy[3]])
    np.testing.assert_allclose(rel_after @ normal, -0.3 * (rel_before @ normal), rtol=1e-5)


def test_walls_keep_fast_balls_inside():
    """Balls fired at top speed in all directions from random spots never leave the field."""
    params = _params(blue_size=0, orange_size=0)
    state = _reset(params)
    key_pos, key_dir = jax.random.split(jax.random.key(5))
    angle = jax.random.uniform(key_dir, (ROLL_ENVS,), maxval=2 * math.pi)
    start = jax.random.uniform(key_pos, (ROLL_ENVS, 2), minval=-3.5, maxval=3.5)
    bodies = state.bodies.replace(ball_pos=start, ball_vel=6.0 * physics.unit(angle))
    _, trace = _roll(state.replace(bodies=bodies), params, IDLE)
    assert bool(physics.inside_field(trace.ball_pos, physics.BALL_RADIUS).all())
    # The ball bounced around (it reached the walls and the goals) and some went in.
    assert np.abs(trace.ball_pos[..., 0]).max() > physics.HALF_WIDTH - 0.3
    assert trace.goal_blue.sum() + trace.goal_orange.sum() > 0


def _shoot(params, seed=0):
    """Reset, then env 0 shoots into the orange goal, env 1 into the blue goal, env 2 just
    outside the orange goal's mouth (it must bounce off the end wall)."""
    state = _reset(params, seed)
    ball_pos = np.zeros((ROLL_ENVS, 2), np.float32)
    ball_vel = np.zeros((ROLL_ENVS, 2), np.float32)
    ball_pos[0], ball_vel[0] = (0.3, 4.6), (0.0, 5.0)
    ball_pos[1], ball_vel[1] = (-0.3, -4.6), (0.0, -5.0)
    ball_pos[2], ball_vel[2] = (1.6, 4.6), (0.0, 5.0)
    bodies = state.bodies.replace(ball_pos=jnp.asarray(ball_pos), ball_vel=jnp.asarray(ball_vel))
    return state.replace(bodies=bodies)


def test_goal_detected_once_then_kickoff():
    """A ball shot into each goal scores exactly once; play restarts from kickoff."""
    params = _params(blue_size=1, orange_size=1, opponent_kind=IDLE)
    state, trace = _roll(_shoot(params), params, IDLE)
    goal_steps_blue = np.nonzero(trace.goal_blue[:, 0])[0]
    goal_steps_orange = np.nonzero(trace.goal_orange[:, 1])[0]
    assert len(goal_steps_blue) == 1 and len(goal_steps_orange) == 1
    assert goal_steps_blue[0] <= 3 and goal_steps_orange[0] <= 3
    assert trace.goal_orange[:, 0].sum() == 0 and trace.goal_blue[:, 1].sum() == 0
    assert trace.goal_blue[:, 2].sum() == 0 and trace.goal_orange[:, 2].sum() == 0
    # The goal step restarts from kickoff (ball at rest in the centre); the clock runs on.
    np.testing.assert_array_equal(trace.ball_pos[goal_steps_blue[0], 0], 0.0)
    np.testing.assert_array_equal(trace.ball_pos[goal_steps_orange[0], 1], 0.0)
    assert not trace.terminated.any()
    assert trace.reward[goal_steps_blue[0], 0, 0] > 5.0  # +10 for the goal
    assert trace.reward[goal_steps_orange[0], 1, 0] < -5.0  # -10 for conceding
    np.testing.assert_array_equal(state.score[0], [1, 0])
    np.testing.assert_array_equal(state.score[1], [0, 1])
    np.testing.assert_array_equal(state.time, ROLL_STEPS)


def test_goal_ends_episode_terminates():
    params = _params(blue_size=1, orange_size=1, opponent_kind=IDLE, goal_ends_episode=True)
    state, trace = _roll(_shoot(params), params, IDLE)
    step = np.nonzero(trace.goal_blue[:, 0])[0][0]
    assert trace.terminated[step, 0] and not trace.truncated[step, 0]
    assert trace.score_blue[step, 0] == 1.0
    assert trace.terminated[:, 0].sum() == 1  # the idle rest of the episode scores nothing
    step = np.nonzero(trace.goal_orange[:, 1])[0][0]
    assert trace.terminated[step, 1]
    # Auto-reset: the episode restarted, so the clock and score are fresh.
    assert int(state.time[0]) == ROLL_STEPS - 1 - np.nonzero(trace.goal_blue[:, 0])[0][0]
    np.testing.assert_array_equal(state.score[:2], 0)


def test_scripted_matches_count_each_goal_once():
    """Over whole matches, per-step goal flags add up to the final scores; no double counts."""
    trace = _match(1, 1, RANDOM, RULE)
    assert trace.goal_blue.sum() > 0
    np.testing.assert_array_equal(trace.goal_blue.sum(0), trace.score_blue[-1])
    np.testing.assert_array_equal(trace.goal_orange.sum(0), trace.score_orange[-1])
    goal = (trace.goal_blue + trace.goal_orange) > 0
    assert not np.any(goal[1:] & goal[:-1])  # a goal step is always followed by a kickoff


def test_kickoff_is_symmetric():
    active = jnp.ones(6, bool)
    for seed in range(6):
        b = physics.kickoff(jax.random.key(seed), active, physics.PhysicsParams())
        np.testing.assert_allclose(b.car_pos[3:], -b.car_pos[:3], atol=1e-6)
        np.testing.assert_allclose(np.cos(b.car_heading[3:] - b.car_heading[:3]), -1.0, atol=1e-6)
        np.testing.assert_array_equal(b.ball_pos, 0.0)
        np.testing.assert_array_equal(b.car_vel, 0.0)
        assert bool(physics.inside_field(b.car_pos, physics.CAR_RADIUS).all())
        # Cars face the ball.
        to_ball = -b.car_pos / jnp.linalg.norm(b.car_pos, axis=-1, keepdims=True)
        np.testing.assert_allclose(
            jnp.sum(to_ball * physics.unit(b.car_heading), -1), 1.0, atol=1e-5
        )
    partial = physics.kickoff(jax.random.key(0), physics.team_active(1, 2), physics.PhysicsParams())
    parked = np.array([1, 2, 5])
    np.testing.assert_array_equal(
        np.asarray(partial.car_pos)[parked], physics.PARK_POSITIONS[parked]
    )


# ----------------------------------------------------------------------------- symmetry


def _random_state(seed, blue=3, orange=2):
    """One env (no batch axis) with its active cars, ball and clock scattered at random."""
    params = _params(blue_size=blue, orange_size=orange)
    state = jax.tree.map(lambda x: x[0], _reset(params, seed))
    rng = np.random.default_rng(seed)
    active = np.asarray(state.car_active)[:, None]
    f32 = np.float32
    bodies = state.bodies.replace(
        car_pos=jnp.asarray(
            np.where(active, rng.uniform(-3, 3, (6, 2)), state.bodies.car_pos), f32
        ),
        car_vel=jnp.asarray(np.where(active, rng.normal(size=(6, 2)), 0.0), f32),
        car_heading=jnp.asarray(rng.uniform(-math.pi, math.pi, 6), f32),
        car_boost=jnp.asarray(rng.uniform(0, 1, 6), f32),
        ball_pos=jnp.asarray(rng.uniform(-3, 3, 2), f32),
        ball_vel=jnp.asarray(rng.normal(size=2), f32),
    )
    return state.replace(bodies=bodies, time=jnp.asarray(123, jnp.int32)), params


def _mirror_by_hand(state):
    """Swap the teams and rotate the field by 180 degrees, written out independently (numpy)."""
    b = jax.tree.map(np.asarray, state.bodies)
    order = [3, 4, 5, 0, 1, 2]
    heading = b.car_heading[order] + np.pi
    bodies = physics.Bodies(
        car_pos=-b.car_pos[order],
        car_vel=-b.car_vel[order],
        car_heading=np.arctan2(np.sin(heading), np.cos(heading)).astype(np.float32),
        car_boost=b.car_boost[order],
        ball_pos=-b.ball_pos,
        ball_vel=-b.ball_vel,
    )
    return state.replace(
        bodies=jax.tree.map(jnp.asarray, bodies),
        car_active=jnp.asarray(np.asarray(state.car_active)[order]),
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_mirror_symmetry_of_observations_and_rule_policy(seed):
    state, params = _random_state(seed)
    blue_obs, orange_obs, blue_rule, orange_rule = _VIEWS(state, params)
    m_blue_obs, m_orange_obs, m_blue_rule, m_orange_rule = _VIEWS(_mirror_by_hand(state), params)
    np.testing.assert_allclose(m_orange_obs, blue_obs, atol=1e-5)
    np.testing.assert_allclose(m_blue_obs, orange_obs, atol=1e-5)
    np.testing.assert_array_equal(m_orange_rule, blue_rule)
    np.testing.assert_array_equal(m_blue_rule, orange_rule)
    # Orange's rows differ from blue's in a non-symmetric state (the test is not vacuous).
    assert not np.allclose(blue_obs, orange_obs)


def test_env_is_mirror_equivariant():
    """RulePolicy vs RulePolicy from a state and from its mirror image play mirrored games."""
    state, params = _random_state(3, blue=3, orange=3)
    params = params.replace(opponent_kind=RULE)
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), _mirror_by_hand(state), *[state] * 63)
    _, trace = _roll(batch, params, RULE)
    goal = (trace.goal_blue + trace.goal_orange)[:, :2].sum(1) > 0
    horizon = min(int(np.argmax(goal)) if goal.any() else ROLL_STEPS, 15)  # before kickoffs
    assert horizon >= 5
    np.testing.assert_allclose(trace.ball_pos[:horizon, 0], -trace.ball_pos[:horizon, 1], atol=1e-3)
    assert np.abs(trace.ball_pos[horizon - 1, 1]).sum() > 0


# ----------------------------------------------------------------------------- RulePolicy


def test_rule_policy_beats_random():
    trace = _match(1, 1, RANDOM, RULE)
    wins, losses = _results(trace)
    decided = wins + losses
    rate = wins / max(decided, 1)
    print(
        f"\nRulePolicy vs random, 1v1, {ROLL_ENVS} games of {MATCH_STEPS} steps: {wins} won, "
        f"{losses} lost, {ROLL_ENVS - decided} drawn; win rate {rate:.3f} of decided games"
    )
    assert decided >= ROLL_ENVS // 2
    assert rate >= 0.95, (wins, losses)


def test_rule_policy_scores_against_idle_quickly():
    trace = _match(1, 1, IDLE, RULE)
    scored = trace.goal_blue.sum(0) > 0
    first = np.where(scored, np.argmax(trace.goal_blue > 0, axis=0), MATCH_STEPS)
    print(
        f"\nRulePolicy vs idle: first goal after median {np.median(first):.0f} steps; "
        f"{scored.mean():.0%} of games score; {trace.goal_blue.sum(0).mean():.1f} goals per "
        "game"
    )
    assert scored.mean() >= 0.9
    assert np.median(first) <= 300  # 20 s of game time
    assert trace.goal_orange.sum() == 0


# ----------------------------------------------------------------------------- rendering


def test_render_frames_and_gif(tmp_path):
    state, params = _random_state(4, blue=2, orange=2)
    state = jax.tree.map(np.asarray, state)
    frames = render_frames([state, state.replace(time=np.int32(124))], params)
    assert len(frames) == 2
    frame = frames[0]
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    colours = {tuple(int(v) for v in c) for c in frame.reshape(-1, 3)[::7]}
    assert {BLUE, ORANGE, GRASS} <= colours
    stacked = jax.tree.map(lambda *xs: np.stack(xs), state, state)
    assert len(render_frames(stacked, params)) == 2
    path = tmp_path / "match.gif"
    save_gif(frames, path, fps=15)
    assert path.stat().st_size > 0
