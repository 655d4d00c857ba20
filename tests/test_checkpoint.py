"""Orbax checkpoints of whole runner states: every leaf round-trips, empty ones included;
unreadable checkpoints are reported in one line, and ``--resume`` falls back past them."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import chex
import jax
import numpy as np
import pytest

from jaxrl.commands.evaluate import main as evaluate_main
from jaxrl.commands.train import main as train_main
from jaxrl.config import load_config
from jaxrl.core.acting import PolicyParams
from jaxrl.run.checkpoint import Checkpointer, CorruptCheckpointError
from jaxrl.run.driver import train
from jaxrl.run.play import policy_like
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_run
from tests.conftest import make_tiny_config

REPO = Path(__file__).resolve().parents[1]


def test_soccer_without_selfplay_round_trips(tmp_path):
    """A two-team run without pool lanes holds zero-size lane state, which Orbax refuses to
    save; the checkpointer drops and restores those leaves (configs/soccer_1v1.yaml could
    not save a checkpoint before)."""
    config = load_config(REPO / "configs" / "soccer_1v1.yaml", ["env.num_envs=4"])
    setup = make_setup(config)
    runner = init_run(setup)
    empty = [x.shape for x in jax.tree.leaves(runner) if x.size == 0]
    assert empty, "the case under test: some leaf has zero size"
    checkpointer = Checkpointer(tmp_path, keep=1)
    checkpointer.save(runner, {"env_steps": 0}, step=1)
    restored, meta = checkpointer.restore(runner)
    policy, step = checkpointer.restore_policy(policy_like(setup), 1)
    checkpointer.close()
    # The policy item restores as the one policy type, the runner's params and normaliser.
    assert step == 1 and type(policy) is PolicyParams
    chex.assert_trees_all_equal(
        policy, PolicyParams(params=runner.params, obs_stats=runner.obs_stats)
    )
    assert meta["update_step"] == 1
    want, tree = jax.tree.flatten(runner)
    got, tree_restored = jax.tree.flatten(restored)
    assert tree_restored == tree
    for x, y in zip(want, got, strict=True):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# ----------------------------------------------------------------- unreadable checkpoints


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """The tiny CartPole run (checkpoints 8, 16, 24) and its final params."""
    config = make_tiny_config()
    result = train(config, tmp_path_factory.mktemp("healing") / "run", quiet=True)
    return result


def _copy(run, tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(run.run_dir, run_dir)
    return run_dir


def _truncate_data(step_dir: Path, item: str = "policy") -> None:
    """Cut every data file of ``item`` to half its size (as a full disk or a killed copy)."""
    files = [p for p in (step_dir / item).rglob("*") if p.is_file() and p.parent.name == "d"]
    assert files, "the case under test: the item has data files"
    for path in files:
        os.truncate(path, path.stat().st_size // 2)


def _sizes(directory: Path) -> list[int]:
    return sorted(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def _policy_like(run_dir: Path) -> PolicyParams:
    return policy_like(make_setup(load_config(run_dir / "config.yaml")))


def test_a_truncated_data_file_is_one_line_naming_the_intact_steps(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path)
    _truncate_data(run_dir / "checkpoints" / "24")
    checkpointer = Checkpointer(run_dir, create=False)
    with pytest.raises(CorruptCheckpointError) as caught:
        checkpointer.restore_policy(_policy_like(run_dir))
    err = caught.value
    assert (err.step, err.intact) == (24, [8, 16])
    assert re.fullmatch(
        r"data file policy/\S*d/[0-9a-f]+ is truncated \(\d+ of \d+ bytes\)", err.cause
    )
    message = str(err)
    assert "\n" not in message and "tensorstore" not in message.lower()
    assert message.startswith(
        f"checkpoint 24 in {run_dir / 'checkpoints'} is unreadable: data file"
    )
    assert message.endswith("; intact checkpoints: 8, 16")
    # An intact step still restores, as asked.
    _, step = checkpointer.restore_policy(_policy_like(run_dir), 16)
    assert step == 16


def test_corrupt_meta_and_missing_item_in_plain_words(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path)
    (run_dir / "checkpoints" / "24" / "meta" / "metadata").write_text("{not json")
    shutil.rmtree(run_dir / "checkpoints" / "16" / "state")
    checkpointer = Checkpointer(run_dir, create=False)
    with pytest.raises(CorruptCheckpointError) as meta:
        checkpointer.meta(24)
    assert meta.value.cause.startswith("its meta JSON is not valid (")
    like = init_run(make_setup(load_config(run_dir / "config.yaml")))
    with pytest.raises(CorruptCheckpointError) as item:
        checkpointer.restore(like, 16)
    assert item.value.cause == "item 'state' is missing"
    assert item.value.intact == [8]  # 24's meta is unreadable too


def test_evaluate_suggests_an_intact_step(finished_run, tmp_path, capsys):
    run_dir = _copy(finished_run, tmp_path)
    _truncate_data(run_dir / "checkpoints" / "24")
    assert evaluate_main(["--run-dir", str(run_dir), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: checkpoint 24 in ")
    assert err.endswith("intact checkpoints: 8, 16 (choose one with --step 16)\n")


def test_resume_falls_back_keeps_the_bad_checkpoint_and_finishes(finished_run, tmp_path, capsys):
    """The newest checkpoint's data truncated: --resume says so in one line, trains on from
    update 16 and ends where the uninterrupted run ended; the bad one is kept aside."""
    run_dir = _copy(finished_run, tmp_path)
    _truncate_data(run_dir / "checkpoints" / "24", "state")
    bad = sorted(
        p.stat().st_size for p in (run_dir / "checkpoints" / "24").rglob("*") if p.is_file()
    )
    assert train_main(["--resume", str(run_dir), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("warning:")]
    assert line.startswith(f"warning: checkpoint 24 in {run_dir / 'checkpoints'} is unreadable: ")
    assert line.endswith(
        "; intact checkpoints: 8, 16; resuming from update 16, the newest intact one "
        "(kept as checkpoints/24.corrupt)"
    )
    kept = run_dir / "checkpoints" / "24.corrupt"
    assert _sizes(kept) == bad
    checkpointer = Checkpointer(run_dir, create=False)
    assert checkpointer.steps() == [8, 16, 24]  # 24 trained again; Orbax ignores 24.corrupt
    policy, _ = checkpointer.restore_policy(_policy_like(run_dir))
    chex.assert_trees_all_equal(policy.params, finished_run.runner.params)


# 64-unit layers: Orbax stores the larger arrays as OCDBT values and, when one is cut short,
# wraps TensorStore's precise error in a generic Exception that ends in a store spec and a
# ``<bound method ...>`` repr; the plain words come from the error's ``__cause__``.
WIDE = (
    "network.hidden_sizes=[64, 64]",
    "train.total_steps=512",
    "train.updates_per_chunk=2",
    "checkpoint.every_updates=2",
)


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory):
    """A CartPole run with 64-unit layers: 4 updates, checkpoints 2 and 4."""
    config = make_tiny_config(*WIDE)
    return train(config, tmp_path_factory.mktemp("wide") / "run", quiet=True)


def _truncate_largest(item_dir: Path, size: int = 100) -> None:
    """Cut the largest file of a checkpoint item to ``size`` bytes (``truncate -s 100 FILE``)."""
    largest = max((p for p in item_dir.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    assert largest.stat().st_size > size, "the case under test: a data file to cut"
    os.truncate(largest, size)


def test_a_truncated_ocdbt_value_is_named_in_plain_words(wide_run, tmp_path, capsys):
    run_dir = _copy(wide_run, tmp_path)
    _truncate_largest(run_dir / "checkpoints" / "4" / "policy")
    assert evaluate_main(["--run-dir", str(run_dir), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: checkpoint 4 in {run_dir / 'checkpoints'} is unreadable: ")
    assert re.search(
        r"unreadable: data for params\.\S+\.kernel in policy/ is truncated \(100 of \d+ bytes\)"
        r"; intact checkpoints: 2 \(choose one with --step 2\)\n$",
        err,
    ), err
    assert "<bound method" not in err and "tensorstore" not in err.lower()


def test_resume_falls_back_past_a_truncated_ocdbt_value(wide_run, tmp_path, capsys):
    run_dir = _copy(wide_run, tmp_path)
    _truncate_largest(run_dir / "checkpoints" / "4" / "policy")
    assert train_main(["--resume", str(run_dir), "--quiet"]) == 0
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("warning:")]
    assert "is unreadable: data for params." in line and "<bound method" not in line
    assert line.endswith(
        "; intact checkpoints: 2; resuming from update 2, the newest intact one "
        "(kept as checkpoints/4.corrupt)"
    )
    assert Checkpointer(run_dir, create=False).steps() == [2, 4]
