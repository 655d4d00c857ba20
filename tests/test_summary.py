"""What a run says about itself: rounding of total_steps, agents per env, feature status."""

from __future__ import annotations

import math
from pathlib import Path

from jaxrl.config import load_config
from jaxrl.run.setup import make_setup
from jaxrl.run.summary import batch_line, done_line, feature_status, schedule_line
from tests.conftest import make_tiny_config

REPO = Path(__file__).resolve().parents[1]


def test_schedule_states_the_rounding_of_total_steps():
    config = make_tiny_config("train.total_steps=3100")  # batch 128: 24 updates
    assert schedule_line(config, 0) == (
        "24 updates (3,072 env steps): train.total_steps=3100 rounds to 3,072 (24 updates of "
        "128) in chunks of 8; starting at update 0"
    )
    whole = make_tiny_config()  # 3072 = 24 x 128: nothing to say
    assert (
        schedule_line(whole, 8)
        == "24 updates (3,072 env steps) in chunks of 8; starting at update 8"
    )


def test_multi_agent_batch_gives_agents_per_env_and_agent_steps():
    config = load_config(REPO / "configs" / "metta_arena.yaml")
    assert batch_line(config, make_setup(config)) == (
        "1024 = 16 envs x 64 steps (24 agents per env: 24,576 agent steps per update); "
        "4 minibatches of 256 x 1 epochs"
    )
    teams = load_config(REPO / "configs" / "soccer_selfplay.yaml")  # 3v3, 64 envs x 128 steps
    assert batch_line(teams, make_setup(teams)).startswith(
        "8192 = 64 envs x 128 steps (3 of 6 agents per env on the learner's team: 24,576 "
        "agent steps per update); "
    )
    single = make_tiny_config()
    assert batch_line(single, make_setup(single)) == (
        "128 = 4 envs x 32 steps; 2 minibatches of 64 x 2 epochs"
    )


CURRICULUM = (
    "curriculum.stages=[{name: short, env: {max_steps_in_episode: 20}, threshold: 0},"
    "{name: long, env: {max_steps_in_episode: 60}}]"
)


def test_status_names_the_stage_from_the_chunks_metric():
    setup = make_setup(make_tiny_config(CURRICULUM))
    assert feature_status(setup, [{"curriculum/stage": 1.0}]) == "stage 2/2 (long)"
    assert feature_status(setup, [{"curriculum/stage": 0.0}, {"curriculum/stage": 1.0}]) == (
        "members: stage 1/2 (short) | stage 2/2 (long)"
    )
    assert feature_status(make_setup(make_tiny_config()), [{}]) == ""  # nothing to report


def test_status_says_whether_self_play_is_on():
    setup = make_setup(load_config(REPO / "configs" / "soccer_selfplay.yaml"))  # pool of 8
    assert feature_status(setup, [{"selfplay/pool_size": 3.0}]) == "self-play on (pool 3/8)"
    assert feature_status(setup, [{"selfplay/pool_size": math.nan}]) == "self-play off"


def test_done_line_carries_the_status():
    line = done_line(3072, 1, 1234.4, 2.5, 21.0, "stage 2/2 (long)", Path("runs/x"))
    assert line == (
        "done: 3,072 env steps, 1,234 env steps/s after 2.5 s compile, last episode return 21, "
        "stage 2/2 (long); run dir runs/x"
    )


def test_network_line_names_the_cnn_of_each_image_leaf():
    from jaxrl.run.summary import _network_line  # noqa: PLC0415

    pixels = make_tiny_config("env.name=jaxrl.envs.probes:PixelProbe")  # 12x12x1 frames: small CNN
    assert _network_line(pixels, make_setup(pixels).network).startswith(
        "small CNN on obs 12x12x1, MLP ["
    )
    leaves = make_tiny_config("env.name=jaxrl.envs.probes:DictProbe")  # a 6x6x1 grid and a flag
    assert _network_line(leaves, make_setup(leaves).network).startswith(
        "small CNN on grid 6x6x1, MLP ["
    )
    vector = make_tiny_config()
    assert _network_line(vector, make_setup(vector).network).startswith("MLP [")
