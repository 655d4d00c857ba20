"""Shared fixtures; also makes the repository root importable under plain ``pytest``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

NUM_ENVS = 8
STEPS = 16
UPDATES = 12


def tiny_selfplay(**extra) -> dict:
    """Soccer: 2 updates of 1v1 against the RulePolicy, then a league at mixed team sizes."""
    config = {
        "seed": 0,
        "env": {
            "name": "Soccer",
            "num_envs": NUM_ENVS,
            "kwargs": {"max_steps_in_episode": 24},
            "normalize_obs": True,
        },
        "network": {"hidden_sizes": [16]},
        "ppo": {"num_steps": STEPS, "num_minibatches": 2, "update_epochs": 1},
        "train": {
            "total_steps": NUM_ENVS * STEPS * UPDATES,
            "updates_per_chunk": 4,
            "progress_bar": False,
        },
        "checkpoint": {"every_updates": 2, "keep": 20},
        "curriculum": {
            "replay": 0.25,
            "stages": [
                {
                    "name": "rule",
                    "env": {"blue_size": 1, "orange_size": 1, "opponent_kind": 1},
                    "metric": "episode_length",
                    "threshold": 0.0,
                    "window": 1,
                    "min_updates": 2,
                },
                {
                    "name": "league",
                    "env": {"team_size_weights": [0.4, 0.3, 0.3], "opponent_kind": 1},
                    "features": {"selfplay": True},
                },
            ],
        },
        "selfplay": {
            "pool_size": 3,
            "snapshot_every": 2,
            "latest_fraction": 0.25,
            "rule_fraction": 0.25,
            "lanes": 2,
            "pfsp": "hard",
        },
        "evaluation": {
            "every_updates": 2,
            "lanes": [
                {"name": "rule_1v1", "envs": 2, "env": {"blue_size": 1, "orange_size": 1}},
                {"name": "rule_3v3", "envs": 2, "env": {"blue_size": 3, "orange_size": 3}},
            ],
        },
    }
    for key, value in extra.items():
        section, field = key.split("__")
        config[section] = {**config[section], field: value}
    return config


@pytest.fixture(scope="session")
def selfplay_run(tmp_path_factory):
    """A tiny self-play run whose snapshots (every 4 updates) fall on its checkpoints."""
    from jaxrl.config import config_from_dict  # noqa: PLC0415 - keep conftest import light
    from jaxrl.train import train  # noqa: PLC0415

    config = config_from_dict(tiny_selfplay(selfplay__snapshot_every=4))
    return train(config, tmp_path_factory.mktemp("selfplay") / "run", quiet=True)
