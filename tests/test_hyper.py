"""Members of a run (``train.num_seeds`` x ``sweep``): vmapped in one program, each equal
to the same seed and hyperparameters trained alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxrl import evaluate as evaluate_cli
from jaxrl.config import ConfigError, load_config
from jaxrl.hyper import make_members
from jaxrl.train import train

REPO = Path(__file__).resolve().parents[1]

# 4 envs x 16 steps, 6 updates in 2 chunks.
SMALL = [
    "env.num_envs=4",
    "ppo.num_steps=16",
    "ppo.update_epochs=2",
    "ppo.num_minibatches=2",
    "network.hidden_sizes=[16, 16]",
    "train.total_steps=384",
    "train.updates_per_chunk=3",
    "train.progress_bar=false",
    "checkpoint.every_updates=3",
]
LRS = [1e-3, 3e-4]
MEMBERS = SMALL + ["train.num_seeds=2", f"sweep={{ppo.lr: {LRS}, ppo.ent_coef: [0.0, 0.02]}}"]
TOLERANCE = 1e-5  # vmapped and single runs may sum in another order


def _config(overrides: list[str]):
    return load_config(REPO / "configs" / "cartpole.yaml", overrides)


def _member(tree, i: int):
    return jax.tree.map(lambda x: np.asarray(x)[i], tree)


def _assert_close(a, b) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=TOLERANCE)


@pytest.fixture(scope="module")
def members_run(tmp_path_factory):
    """4 members (2 sweep points x seeds 0, 1) in one program."""
    return train(_config(MEMBERS), tmp_path_factory.mktemp("members") / "run", quiet=True)


@pytest.fixture(scope="module")
def single_runs(tmp_path_factory):
    """Members 0 (lr 1e-3, ent 0, seed 0) and 3 (lr 3e-4, ent 0.02, seed 1) on their own."""
    root = tmp_path_factory.mktemp("singles")
    first = train(_config(SMALL + ["ppo.lr=1e-3", "ppo.ent_coef=0.0"]), root / "a", quiet=True)
    last = train(
        _config(SMALL + ["seed=1", "ppo.lr=3e-4", "ppo.ent_coef=0.02"]), root / "b", quiet=True
    )
    return first, last


def test_member_layout():
    members = make_members(_config(MEMBERS))
    assert members.names == (
        "lr=0.001-ent_coef=0-seed0",
        "lr=0.001-ent_coef=0-seed1",
        "lr=0.0003-ent_coef=0.02-seed0",
        "lr=0.0003-ent_coef=0.02-seed1",
    )
    assert members.seeds == (0, 1, 0, 1)
    np.testing.assert_array_equal(members.hyper.lr, np.float32([1e-3, 1e-3, 3e-4, 3e-4]))
    np.testing.assert_array_equal(members.hyper.clip_eps, np.float32([0.2] * 4))  # not swept


def test_sweep_values_differ_per_member(members_run):
    runner = members_run.runner
    np.testing.assert_array_equal(runner.hyper.lr, np.float32([1e-3, 1e-3, 3e-4, 3e-4]))
    np.testing.assert_array_equal(runner.hyper.ent_coef, np.float32([0, 0, 0.02, 0.02]))
    kernels = [np.asarray(x) for x in jax.tree.leaves(runner.params)]
    for a in range(4):
        for b in range(a + 1, 4):  # every member trained to params of its own
            assert any(not np.allclose(k[a], k[b]) for k in kernels), (a, b)
    rates = members_run.history[-1]["train/learning_rate"]  # annealed from each member's lr
    assert rates[0] == rates[1] and rates[2] == rates[3] and rates[0] > rates[2]


def test_vmapped_members_equal_runs_one_by_one(members_run, single_runs):
    first, last = single_runs
    _assert_close(_member(members_run.runner.params, 0), first.runner.params)
    _assert_close(_member(members_run.runner.params, 3), last.runner.params)
    _assert_close(_member(members_run.runner.opt_state, 3), last.runner.opt_state)


def test_one_tensorboard_run_per_member(members_run):
    for name in make_members(_config(MEMBERS)).names:
        assert list((members_run.run_dir / name).glob("events.out.tfevents.*")), name


def test_evaluate_json_lists_the_seeds(members_run, capsys):
    assert (
        evaluate_cli.main(["--run-dir", str(members_run.run_dir), "--episodes", "2", "--json"]) == 0
    )
    seeds = json.loads(capsys.readouterr().out)["seeds"]
    assert [s["seed"] for s in seeds] == [0, 1, 0, 1]
    assert seeds[2]["sweep"] == {"ppo.lr": 3e-4, "ppo.ent_coef": 0.02}
    assert seeds[1]["member"] == "lr=0.001-ent_coef=0-seed1"
    assert all(len(s["returns"]) == 2 and "mean_return" in s for s in seeds)


def test_resume_of_members_is_bit_exact(members_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(members_run.run_dir, copy)
    shutil.rmtree(copy / "checkpoints" / "6")  # back to the checkpoint at update 3
    resumed = train(run_dir=copy, resume=True, quiet=True)
    for x, y in zip(
        jax.tree.leaves(resumed.runner.params),
        jax.tree.leaves(members_run.runner.params),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.num_seeds=0", "train.num_seeds must be >= 1"),
        ("sweep={ppo.lr: [0.001, -1]}", r"sweep.ppo.lr: every value must be a finite number > 0"),
        ("sweep={ppo.num_steps: [8, 16]}", "'ppo.num_steps' cannot be swept"),
        ("sweep={ppo.lr: [0.001, 0.002], ppo.gamma: [0.9]}", "same length"),
    ],
)
def test_bad_members_config(override, message):
    with pytest.raises(ConfigError, match=message):
        _config(SMALL + [override])
