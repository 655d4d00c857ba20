"""The structured suites' adapters (jaxrl.envs.suites.jumanji, .pgx, .jaxmarl): spaces, shapes,
exact flat rows, masks against the suite's own, turns, outcomes, termination vs truncation."""

from __future__ import annotations

import functools
import importlib.util
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import envs
from jaxrl.envs import protocols

# Looked up, not imported: the suites import in seconds (jaxmarl brings brax and MuJoCo), and
# both test workers collect this file while only one runs it.
_MISSING = [n for n in ("jumanji", "pgx", "jaxmarl") if importlib.util.find_spec(n) is None]
pytestmark = pytest.mark.skipif(
    bool(_MISSING), reason=f"extras not installed: {', '.join(_MISSING)}"
)

KEY = jax.random.key(3)


@functools.cache
def _make(name: str, **make_kwargs):
    return envs.make(name, make_kwargs=make_kwargs)


def _run(env, params, steps: int = 3, num_envs: int = 2):
    """``steps`` jit(vmap) steps with the first action of each slot; returns the last outputs."""
    keys = jax.random.split(KEY, num_envs)
    obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
    action = jnp.zeros((num_envs, *envs.action_shape(env, params)), jnp.int32)
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    for _ in range(steps):
        obs, state, reward, terminated, truncated, info = step(keys, state, action, params)
    return obs, reward, terminated, truncated, info


# ----------------------------------------------------------------------------- jumanji


def test_jumanji_snake_spaces_leaves_and_steps():
    env, params = _make("jumanji:Snake-v1")
    assert env.action_space(params).n == 4
    leaves = protocols.observation_leaves(env).leaves
    assert [(x.name, x.shape, x.offset) for x in leaves] == [
        ("grid", (12, 12, 5), 0),
        ("step_count", (), 720),
    ]
    assert env.observation_space(params).shape == (721,)
    assert protocols.action_masked(env) is not None
    obs, reward, terminated, truncated, info = _run(env, params)
    assert obs.shape == (2, 721) and obs.dtype == jnp.float32
    assert reward.shape == (2,) and reward.dtype == jnp.float32
    assert terminated.dtype == truncated.dtype == jnp.bool_
    assert info["final_observation"].shape == (2, 721)


def test_jumanji_row_is_the_leaves_back_to_back_and_mask_is_jumanjis():
    env, params = _make("jumanji:Snake-v1")
    obs, state = env.reset(KEY, params)
    inner, timestep = env.env.reset(KEY)
    expected = np.concatenate(
        [np.ravel(timestep.observation.grid), [timestep.observation.step_count]]
    ).astype(np.float32)
    np.testing.assert_array_equal(obs, expected)
    # A reachable state: one step on; its mask is jumanji's (it forbids moving back).
    obs, state, *_ = env.step(KEY, state, jnp.int32(1), params)
    _, timestep = env.env.step(inner, jnp.int32(1))
    np.testing.assert_array_equal(obs[720], timestep.observation.step_count)
    np.testing.assert_array_equal(env.action_mask(state, params), timestep.observation.action_mask)


def _snake_until_done(env, params, key, pick):
    obs, state = env.reset(key, params)
    step = jax.jit(env.step)
    for _ in range(20):
        action = pick(state)
        obs, state, reward, terminated, truncated, info = step(key, state, action, params)
        if terminated | truncated:
            return terminated, truncated, info
    raise AssertionError("the episode did not end")


def test_jumanji_wall_terminates_and_time_limit_truncates():
    env, params = _make("jumanji:Snake-v1")
    terminated, truncated, info = _snake_until_done(env, params, KEY, lambda s: jnp.int32(0))
    assert bool(terminated) and not bool(truncated)  # ran up into the wall
    short, params = _make("jumanji:Snake-v1", time_limit=2)

    def away_from_wall(state):  # down in the top half, up in the bottom half: no wall hit
        return jnp.where(state.inner.head_position.row < 6, 2, 0)

    terminated, truncated, info = _snake_until_done(short, params, KEY, away_from_wall)
    assert bool(truncated) and not bool(terminated)
    assert info["final_observation"][720] == 2.0  # the last row of the episode: step 2


class _Obs(NamedTuple):
    board: jax.Array
    action_mask: jax.Array


def test_jumanji_joint_actions_and_masks():
    from jaxrl.envs.suites import jumanji as jumanji_adapter  # noqa: PLC0415 - see _MISSING

    layout = jumanji_adapter.Layout(
        paths=(("board",),),
        leaves=None,
        low=np.zeros(1),
        high=np.ones(1),
        nvec=(3, 3),
        num_actions=9,
        mask_shape=(2, 3),
    )
    mask = jnp.array([[True, False, True], [False, True, True]])
    joint = jumanji_adapter.joint_mask(layout, _Obs(jnp.zeros(1), mask))
    # a = 3 * a0 + a1 is legal where both components are.
    np.testing.assert_array_equal(joint, [0, 1, 1, 0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(jumanji_adapter.decode_action(layout, jnp.int32(7)), [2, 1])
    env, params = _make("jumanji:Tetris-v0")  # mask (4, 10) = num_values: flattened as is
    assert env.action_space(params).n == 40
    _, state = env.reset(KEY, params)
    _, timestep = env.env.reset(KEY)
    np.testing.assert_array_equal(
        env.action_mask(state, params), np.ravel(timestep.observation.action_mask)
    )


def test_jumanji_refuses_huge_multidiscrete():
    with pytest.raises(ValueError, match="Connector-v3.*joint actions"):
        envs.make("jumanji:Connector-v3")


# ----------------------------------------------------------------------------- pgx


def test_pgx_tic_tac_toe_protocols_and_steps():
    env, params = _make("pgx:tic_tac_toe")
    assert protocols.two_team(env) is env and protocols.turn_based(env) is env
    assert protocols.action_masked(env) is env
    assert (env.num_agents, env.num_teams, env.team_size) == (2, 2, 1)
    assert env.action_space(params).n == 9
    assert env.observation_space(params).shape == (2, 18)
    assert protocols.observation_leaves(env).leaves[0].shape == (3, 3, 2)
    assert params.opponent_kind.dtype == np.int32 and int(params.opponent_kind) == 0
    assert params.opponent_skill.dtype == np.float32 and float(params.opponent_skill) == 1.0
    obs, reward, terminated, truncated, info = _run(env, params)
    assert obs.shape == (2, 2, 18) and obs.dtype == jnp.float32
    assert reward.shape == (2, 2) and reward.dtype == jnp.float32
    assert set(info["episode_outcome"]) == {"win", "draw", "loss"}
    action = env.scripted_team_actions(KEY, obs[0, :1], jnp.int32(0), jnp.float32(1))
    assert action.shape == (1,) and action.dtype == jnp.int32 and 0 <= int(action[0]) < 9


def _play(env, params, moves, other=8):
    """Play ``moves`` (cells) for whoever moves; the idle slot's action is ``other``."""
    obs, state = env.reset(KEY, params)
    step = jax.jit(env.step)
    players, outs = [], []
    for move in moves:
        mover = int(env.current_player(state, params))
        players.append(mover)
        action = jnp.full((2,), other, jnp.int32).at[mover].set(move)
        before = state
        obs, state, reward, terminated, truncated, info = step(KEY, state, action, params)
        outs.append((before, state, reward, terminated, truncated, info))
    return players, outs


def test_pgx_turns_alternate_and_only_the_mover_acts():
    env, params = _make("pgx:tic_tac_toe")
    players, outs = _play(env, params, [0, 4, 1])
    assert players[1] == 1 - players[0] and players[2] == players[0]
    before, after, *_ = outs[0]
    expected = env.env.step(before.inner, jnp.int32(0))  # the idle slot's 8 changed nothing
    for got, want in zip(jax.tree.leaves(after.inner), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(got, want)
    mask = env.action_mask(after, params)
    assert mask.shape == (2, 9)
    np.testing.assert_array_equal(mask[0], after.inner.legal_action_mask)
    np.testing.assert_array_equal(mask[1], after.inner.legal_action_mask)
    assert not bool(mask[0, 0]) and bool(mask[0, 8])


def test_pgx_forced_win_rewards_and_outcome():
    env, params = _make("pgx:tic_tac_toe")
    # The opener takes the top row (0, 1, 2); the other plays 3 and 4.
    players, outs = _play(env, params, [0, 3, 1, 4, 2])
    winner = players[0]
    loser = 1 - winner
    for *_, reward, terminated, truncated, _ in outs[:-1]:
        assert not bool(terminated) and not bool(truncated)
        np.testing.assert_array_equal(reward, [0.0, 0.0])
    _, _, reward, terminated, truncated, info = outs[-1]
    assert bool(terminated) and not bool(truncated)
    assert float(reward[winner]) == 1.0 and float(reward[loser]) == -1.0
    outcome = info["episode_outcome"]
    assert float(outcome["win"][winner]) == 1.0 and float(outcome["loss"][loser]) == 1.0
    assert float(outcome["win"][loser]) == 0.0 and float(outcome["loss"][winner]) == 0.0
    np.testing.assert_array_equal(outcome["draw"], [0.0, 0.0])


def test_pgx_step_limit_truncates_as_a_draw():
    env, params = _make("pgx:tic_tac_toe")
    params = params.replace(max_steps_in_episode=jnp.int32(2))
    _, outs = _play(env, params, [0, 4])
    _, _, reward, terminated, truncated, info = outs[-1]
    assert bool(truncated) and not bool(terminated)
    np.testing.assert_array_equal(info["episode_outcome"]["draw"], [1.0, 1.0])
    _, _, _, terminated, truncated, info = outs[0]
    assert not bool(truncated | terminated)
    np.testing.assert_array_equal(info["episode_outcome"]["draw"], [0.0, 0.0])


def test_pgx_single_player_and_refusal():
    env, params = _make("pgx:2048")
    assert protocols.action_masked(env) is env and protocols.turn_based(env) is None
    assert protocols.num_agents(env) == 1
    obs, state = env.reset(KEY, params)
    assert obs.shape == (496,) and obs.dtype == jnp.float32
    np.testing.assert_array_equal(env.action_mask(state, params), state.inner.legal_action_mask)
    with pytest.raises(ValueError, match="sparrow_mahjong.*3 players"):
        envs.make("pgx:sparrow_mahjong")


# ----------------------------------------------------------------------------- jaxmarl


def test_jaxmarl_spread_rows_rewards_and_steps():
    env, params = _make("jaxmarl:MPE_simple_spread_v3")
    assert protocols.num_agents(env) == 3 and protocols.two_team(env) is None
    assert env.observation_space(params).shape == (3, 18) and env.action_space(params).n == 5
    obs, state = env.reset(KEY, params)
    marl_obs, marl_state = env.env.reset(KEY)
    np.testing.assert_array_equal(obs, np.stack([marl_obs[a] for a in env.env.agents]))
    action = jnp.array([1, 2, 3], jnp.int32)
    key_step, _ = jax.random.split(KEY)  # gymnax's base class splits the step's key so
    _, _, reward, *_ = env.step(KEY, state, action, params)
    actions = {a: action[i] for i, a in enumerate(env.env.agents)}
    _, _, marl_reward, _, _ = env.env.step_env(key_step, marl_state, actions)
    np.testing.assert_array_equal(reward, np.stack([marl_reward[a] for a in env.env.agents]))
    obs, reward, terminated, truncated, info = _run(env, params)
    assert obs.shape == (2, 3, 18) and reward.shape == (2, 3) and reward.dtype == jnp.float32


def test_jaxmarl_step_limit_is_truncation():
    env, params = _make("jaxmarl:MPE_simple_spread_v3", max_steps=3)
    _, state = env.reset(KEY, params)
    step = jax.jit(env.step)
    ends = []
    for _ in range(5):
        obs, state, _, terminated, truncated, info = step(KEY, state, jnp.zeros(3, int), params)
        ends.append((bool(terminated), bool(truncated)))
    # MPE ends the episode on the step taken at step count 3: the fourth.
    assert ends == [(False, False)] * 3 + [(False, True), (False, False)]


def test_jaxmarl_hanabi_mask_is_its_legal_moves():
    env, params = _make("jaxmarl:hanabi")
    _, state = env.reset(KEY, params)
    legal = env.env.get_legal_moves(state.inner)
    np.testing.assert_array_equal(
        env.action_mask(state, params), np.stack([legal[a] for a in env.env.agents]).astype(bool)
    )


def test_jaxmarl_refuses_unlike_agents():
    with pytest.raises(ValueError, match="MPE_simple_push_v3: its agents differ"):
        envs.make("jaxmarl:MPE_simple_push_v3")
