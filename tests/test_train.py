"""End-to-end tests of the compiled train step and the training loop (small shapes, CPU)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.config import load_config
from jaxrl.setup import make_setup
from jaxrl.train import TrainingError, train
from jaxrl.train_step import init_runner_state, make_train_step, train_chunk

REPO = Path(__file__).resolve().parents[1]

# 4 envs x 32 steps, 24 updates in 3 chunks of 8: compiles in a few seconds on CPU.
TINY = [
    "env.num_envs=4",
    "ppo.num_steps=32",
    "ppo.update_epochs=2",
    "ppo.num_minibatches=2",
    "network.hidden_sizes=[16, 16]",
    "train.total_steps=3072",
    "train.updates_per_chunk=8",
    "train.progress_bar=false",
    "checkpoint.every_updates=8",
]


def _leaves_equal(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


@pytest.fixture(scope="module")
def tiny_config():
    return load_config(REPO / "configs" / "cartpole.yaml", TINY)


def test_train_step_compiles_once(tiny_config):
    setup = make_setup(tiny_config)
    runner = init_runner_state(setup, jax.random.key(0))

    def chunk(runner):
        return train_chunk(setup, runner)

    traced = jax.jit(chex.assert_max_traces(chunk, n=1), donate_argnums=0)
    for _ in range(3):
        runner, metrics = traced(runner)
    assert int(runner.update_step) == tiny_config.num_updates
    # The real factory too: three calls, one cached executable.
    step = make_train_step(setup)
    runner = init_runner_state(setup, jax.random.key(0))
    for _ in range(3):
        runner, metrics = step(runner)
    assert step._cache_size() == 1
    assert int(metrics["train/updates"]) == 8


def test_chunk_past_the_end_is_idle(tiny_config):
    setup = make_setup(tiny_config)
    step = make_train_step(setup)
    runner = init_runner_state(setup, jax.random.key(0))
    for _ in range(3):
        runner, _ = step(runner)
    params = jax.device_get(runner.params)
    runner, metrics = step(runner)
    assert int(metrics["train/updates"]) == 0
    assert int(runner.update_step) == tiny_config.num_updates
    assert _leaves_equal(params, runner.params)


def test_runner_state_dtypes(tiny_config):
    setup = make_setup(tiny_config)
    runner = jax.eval_shape(lambda k: init_runner_state(setup, k), jax.random.key(0))
    for leaf in jax.tree.leaves(runner.params):
        assert leaf.dtype == jnp.float32
    assert runner.match.obs.shape == (4, 4)
    assert runner.update_step.dtype == jnp.int32


@pytest.fixture(scope="module")
def two_runs(tiny_config, tmp_path_factory):
    base = tmp_path_factory.mktemp("det")
    first = train(tiny_config, base / "a", quiet=True)
    second = train(tiny_config, base / "b", quiet=True)
    return first, second


def test_same_seed_same_bits(two_runs):
    first, second = two_runs
    assert _leaves_equal(first.runner.params, second.runner.params)
    assert _leaves_equal(first.runner.opt_state, second.runner.opt_state)
    for a, b in zip(first.history, second.history, strict=True):
        keys = [k for k in a if not k.startswith("perf/")]  # wall-clock figures differ
        assert np.array_equal([a[k] for k in keys], [b[k] for k in keys], equal_nan=True)


def test_different_seed_different_params(tiny_config, tmp_path, two_runs):
    config = load_config(REPO / "configs" / "cartpole.yaml", [*TINY, "seed=1"])
    other = train(config, tmp_path / "c", quiet=True)
    assert not _leaves_equal(other.runner.params, two_runs[0].runner.params)


def test_run_writes_config_events_and_checkpoints(two_runs):
    run_dir = two_runs[0].run_dir
    assert (run_dir / "config.yaml").is_file()
    assert list(run_dir.glob("events.out.tfevents.*"))
    steps = sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    assert steps == [8, 16, 24]


def test_tensorboard_scalars(two_runs):
    from tensorboard.backend.event_processing import event_accumulator  # noqa: PLC0415

    run_dir = two_runs[0].run_dir
    acc = event_accumulator.EventAccumulator(str(run_dir))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    expected = {
        "rollout/episode_return",
        "rollout/episode_length",
        "train/policy_loss",
        "train/value_loss",
        "train/entropy",
        "train/approx_kl",
        "train/clip_fraction",
        "train/explained_variance",
        "train/grad_norm",
        "train/learning_rate",
        "train/nonfinite_updates",
        "perf/sps",
        "perf/compile_s",
    }
    assert expected <= tags


def test_existing_run_dir_is_refused(tiny_config, two_runs):
    with pytest.raises(TrainingError, match="already holds a run"):
        train(tiny_config, two_runs[0].run_dir, quiet=True)


def test_evaluate_restores_params(two_runs):
    from jaxrl.evaluate import evaluate  # noqa: PLC0415

    result = evaluate(two_runs[0].run_dir, episodes=4)
    assert result.step == 24
    assert len(result.returns) == 4
    assert all(1 <= r <= 500 for r in result.returns)
    early = evaluate(two_runs[0].run_dir, episodes=4, step=8)
    assert early.step == 8


def test_resume_after_sigkill_is_bit_exact(tiny_config, tmp_path, two_runs):
    """Kill a CLI run mid-way with SIGKILL, resume it, compare with an uninterrupted run."""
    run_dir = tmp_path / "killed"
    # Slow each chunk down by making it longer than the tiny config is not needed: we
    # poll for the first checkpoint and kill right away, before the run can finish.
    overrides = [o for o in TINY if not o.startswith("train.total_steps")]
    cmd = [
        sys.executable,
        "-m",
        "jaxrl.train",
        "--config",
        str(REPO / "configs" / "cartpole.yaml"),
        *overrides,
        "train.total_steps=3072",
        "--run-dir",
        str(run_dir),
        "--quiet",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, env=env, cwd=REPO)
    first = run_dir / "checkpoints" / "8"
    deadline = time.time() + 120
    while not first.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved = sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    assert saved and saved[-1] < 24, f"the run was not interrupted mid-way: {saved}"
    resumed = subprocess.run(
        [sys.executable, "-m", "jaxrl.train", "--resume", str(run_dir), "--quiet"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert resumed.returncode == 0, resumed.stderr
    from jaxrl.checkpoint import Checkpointer  # noqa: PLC0415

    setup = make_setup(tiny_config)
    like = init_runner_state(setup, jax.random.key(0))
    final, _ = Checkpointer(run_dir, create=False).restore(like)
    reference = two_runs[0].runner
    assert int(final.update_step) == 24
    assert _leaves_equal(final.params, reference.params)
    assert _leaves_equal(final.opt_state, reference.opt_state)
