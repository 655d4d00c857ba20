"""The play helper shared by evaluate, render, tournament and exploit (:mod:`jaxrl.run.play`)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxrl.commands import render
from jaxrl.commands.evaluate import run_episodes
from jaxrl.config import config_from_dict
from jaxrl.core.acting import PolicyParams
from jaxrl.run.play import (
    play_params,
    policy_like,
    scripted_kind,
    stage_env_params,
    with_team_size,
)
from jaxrl.run.setup import make_setup
from tests.conftest import tiny_selfplay

MAX_STEPS = 12


@pytest.fixture(scope="module")
def soccer():
    """The tiny self-play setup: two curriculum stages, team sizes, scripted kinds."""
    return make_setup(config_from_dict(tiny_selfplay()))


@pytest.fixture(scope="module")
def cartpole():
    data = {
        "env": {"name": "CartPole-v1", "num_envs": 2, "kwargs": {"max_steps_in_episode": 12}},
        "network": {"hidden_sizes": [8]},
        "ppo": {"num_steps": 4, "num_minibatches": 1},
        "train": {"total_steps": 8, "progress_bar": False},
    }
    return make_setup(config_from_dict(data))


def test_stage_params_default_to_the_last_stage(soccer):
    last = stage_env_params(soccer)
    first = stage_env_params(soccer, 0)
    # tiny_selfplay: stage 0 plays 1v1, stage 1 samples team sizes.
    assert np.asarray(first.team_size_weights).sum() == 0
    np.testing.assert_allclose(np.asarray(last.team_size_weights), [0.4, 0.3, 0.3])
    with pytest.raises(ValueError, match=r"stage must be in 0\.\.1, got 2"):
        stage_env_params(soccer, 2)


def test_stage_without_a_curriculum(cartpole):
    assert stage_env_params(cartpole, 0) is cartpole.env_params
    with pytest.raises(ValueError, match="no curriculum stages"):
        stage_env_params(cartpole, 1)


def test_play_params_apply_stage_then_overrides_then_team_size(soccer):
    params = play_params(soccer, 0, {"max_steps_in_episode": 50}, team_size=3)
    assert int(params.max_steps_in_episode) == 50
    assert int(params.blue_size) == int(params.orange_size) == 3
    assert np.asarray(params.team_size_weights).sum() == 0
    with pytest.raises(ValueError, match="^--env-param .*blue_sizes"):
        play_params(soccer, overrides={"blue_sizes": 2})
    with pytest.raises(ValueError, match="^--env-kwargs "):
        play_params(soccer, overrides={"blue_sizes": 2}, overrides_flag="--env-kwargs")


def test_team_sizes_and_scripted_kinds_are_asked_of_the_env(soccer, cartpole):
    with pytest.raises(ValueError, match=r"^--team-sizes: 4 is not in 1\.\.3$"):
        with_team_size(soccer, soccer.env_params, 4, flag="--team-sizes")
    with pytest.raises(ValueError, match="^--team-size: CartPole-v1 has no team sizes$"):
        with_team_size(cartpole, cartpole.env_params, 1)
    assert scripted_kind(soccer, "random") == int(soccer.env.scripted_kinds["random"])
    with pytest.raises(ValueError, match="^--opponent must be one of idle, rule, random"):
        scripted_kind(soccer, "champion")
    with pytest.raises(ValueError, match="^--opponent: CartPole-v1 has no opponent team$"):
        scripted_kind(cartpole, "rule")


def test_policy_like_is_the_one_policy_type(cartpole):
    like = policy_like(cartpole)
    assert type(like) is PolicyParams
    assert like.obs_stats.mean.shape == cartpole.obs_shape


def test_first_episodes_count_once(cartpole):
    """CartPole pays 1 a step: each env's first return equals its length (<= the limit),
    whatever later episodes do; the same key plays the same episodes."""
    policy = policy_like(cartpole)
    play = jax.jit(lambda key: run_episodes(cartpole, policy, key, 5, deterministic=False))
    stats = jax.device_get(play(jax.random.key(3)))
    lengths = np.asarray(stats.episode_length)
    assert np.all((lengths >= 1) & (lengths <= MAX_STEPS))
    np.testing.assert_array_equal(np.asarray(stats.episode_return), lengths.astype(np.float32))
    again = jax.device_get(play(jax.random.key(3)))
    np.testing.assert_array_equal(np.asarray(again.episode_length), lengths)


def test_play_steps_keep_the_start_and_every_step(cartpole):
    """render's loop: the env state at the start and after each of 3 steps (CartPole cannot
    fail in 3 steps, so its clock reads 0, 1, 2, 3), then a second run, same key, same bits."""
    policy = policy_like(cartpole)
    play = jax.jit(render.policy_states, static_argnums=(0, 4, 5))
    states = jax.device_get(play(cartpole, policy, cartpole.env_params, jax.random.key(1), 3, True))
    np.testing.assert_array_equal(np.asarray(states.time), [0, 1, 2, 3])
    again = play(cartpole, policy, cartpole.env_params, jax.random.key(1), 3, True)
    np.testing.assert_array_equal(np.asarray(again.x), np.asarray(states.x))


def test_render_refuses_bad_input_in_one_line(tmp_path, capsys):
    out = str(tmp_path / "rule.gif")
    for bad in (["--env-kwargs", "{blue_sizes: 2}"], ["--env-kwargs", "[1]"]):
        assert render.main(["--rule-policy", "--out", out, *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and "\n" not in err
