"""End-to-end tests of the compiled train step and the training loop (small shapes, CPU)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.commands.train import main as train_main
from jaxrl.config import ConfigError, load_config, save_config
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.driver import train
from jaxrl.run.errors import TrainingError
from jaxrl.run.setup import current_learning_rate, make_setup
from jaxrl.run.signals import Signals
from jaxrl.run.train_step import init_run, init_runner_state, make_train_step, train_chunk
from tests.conftest import TINY_CARTPOLE, make_tiny_config

REPO = Path(__file__).resolve().parents[1]


def _leaves_equal(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


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
    config = make_tiny_config("seed=1")
    other = train(config, tmp_path / "c", quiet=True)
    assert not _leaves_equal(other.runner.params, two_runs[0].runner.params)


def test_a_resumed_run_compiles_the_fresh_runs_program(tiny_config, two_runs):
    # A restored state has no weak types and is committed to its device; init_run gives a
    # fresh one the same, so resuming hits the compilation cache instead of compiling again.
    setup = make_setup(tiny_config)
    fresh = init_run(setup)
    restored, _ = Checkpointer(two_runs[0].run_dir, create=False).restore(fresh, step=8)
    step = make_train_step(setup)
    assert step.lower(restored).as_text() == step.lower(fresh).as_text()


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
    from jaxrl.commands.evaluate import evaluate  # noqa: PLC0415

    result = evaluate(two_runs[0].run_dir, episodes=4)
    assert result.step == 24
    assert len(result.returns) == 4
    assert all(1 <= r <= 500 for r in result.returns)
    early = evaluate(two_runs[0].run_dir, episodes=4, step=8)
    assert early.step == 8


def test_evaluate_env_param_is_cast_to_the_leaf_dtype(two_runs, capsys):
    """``--env-param`` values take the leaf's dtype (5.0 for an int) or are refused in one line."""
    from jaxrl.commands.evaluate import evaluate, main  # noqa: PLC0415

    run_dir = two_runs[0].run_dir
    short = evaluate(run_dir, episodes=2, env_overrides={"max_steps_in_episode": 5.0})
    # 5 steps are too few to drop the pole (12 degrees): every episode is cut at 5, return 5
    assert short.returns == (5.0, 5.0)
    argv = ["--run-dir", str(run_dir), "--episodes", "2", "--env-param"]
    assert main([*argv, "max_steps_in_episode=0.5"]) == 2  # bad input
    err = capsys.readouterr().err
    assert err == (
        "error: --env-param max_steps_in_episode: expected int, got 0.5 (not a whole number)\n"
    )


def _held_run(run_dir: Path, where: str, *extra: str) -> subprocess.Popen:
    """A CLI run of the tiny config held at ``where`` (see ``tests/held_train.py``).

    Its stdout and stderr come through one pipe, line by line.
    """
    cmd = [
        sys.executable,
        str(REPO / "tests" / "held_train.py"),
        where,
        "--config",
        str(REPO / "configs" / "cartpole.yaml"),
        *TINY_CARTPOLE,
        *extra,
        "--run-dir",
        str(run_dir),
        "--quiet",
    ]
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # A guard against a hung child only (it kills, the test then fails); never a sync point.
    guard = threading.Timer(900, proc.kill)
    guard.daemon = True
    guard.start()
    return proc


def _read_until(proc: subprocess.Popen, text: str) -> str:
    """The child's output up to and including the first line containing ``text``."""
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if text in line:
            return "".join(seen)
    raise AssertionError(f"the run ended before printing {text!r}:\n{''.join(seen)}")


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    out, _ = proc.communicate()
    return proc.returncode, out


def _saved_steps(run_dir: Path) -> list[int]:
    directory = run_dir / "checkpoints"
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def _final_state(tiny_config, run_dir: Path):
    from jaxrl.run.checkpoint import Checkpointer  # noqa: PLC0415

    setup = make_setup(tiny_config)
    like = init_runner_state(setup, jax.random.key(0))
    checkpointer = Checkpointer(run_dir, create=False)
    try:
        return checkpointer.restore(like)[0]
    finally:
        checkpointer.close()


def _resume(run_dir: Path) -> int:
    """``jaxrl train --resume RUN_DIR``, in this process (the run it resumes is gone: its
    checkpoints are all it left)."""
    return train_main(["--resume", str(run_dir), "--quiet"])


def _assert_same_as_uninterrupted(tiny_config, run_dir: Path, reference) -> None:
    final = _final_state(tiny_config, run_dir)
    assert int(final.update_step) == 24
    assert _leaves_equal(final.params, reference.params)
    assert _leaves_equal(final.opt_state, reference.opt_state)


@pytest.mark.slow
def test_resume_after_sigkill_is_bit_exact(tiny_config, tmp_path, two_runs):
    """SIGKILL a CLI run held in its second chunk (after checkpoint 8), resume, compare."""
    run_dir = tmp_path / "killed"
    proc = _held_run(run_dir, "chunk:2")
    _read_until(proc, "held")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _saved_steps(run_dir) == [8]
    assert _resume(run_dir) == 0
    _assert_same_as_uninterrupted(tiny_config, run_dir, two_runs[0].runner)


@pytest.mark.slow
def test_first_signal_saves_the_chunk_in_flight(tiny_config, tmp_path, two_runs, capsys):
    """SIGINT during chunk 2 of a run that checkpoints only at its end: update 16 is saved,
    exit 130; ``--resume`` ends bit-exact with an uninterrupted run, then says it is complete.
    The SIGINT comes twice at once, as ``timeout -s INT`` sends it (to the command, then to
    its process group): the repeat within the grace period is the same request."""
    run_dir = tmp_path / "interrupted"
    proc = _held_run(run_dir, "chunk:2", "checkpoint.every_updates=0")
    _read_until(proc, "held")
    proc.send_signal(signal.SIGINT)
    notice = _read_until(proc, "finishing the chunk in flight")
    assert "SIGINT again aborts" in notice
    proc.send_signal(signal.SIGINT)  # the handler has run once: this one is the repeat
    proc.stdin.write("\n")  # release the held chunk
    proc.stdin.flush()
    code, out = _finish(proc)
    assert code == 130, out
    last = out.strip().splitlines()[-1]
    assert last == f"SIGINT: saved update 16; resume with --resume {run_dir}"
    assert _saved_steps(run_dir) == [16]

    assert _resume(run_dir) == 0
    _assert_same_as_uninterrupted(tiny_config, run_dir, two_runs[0].runner)
    capsys.readouterr()  # the resumed run's done line

    # A finished run: one line, exit 0, and the train step is never compiled.
    from jaxrl.run import chunk_source  # noqa: PLC0415

    def no_compile(*args):
        raise AssertionError("a complete run was compiled")

    original, chunk_source._compile = chunk_source._compile, no_compile
    try:
        assert train_main(["--resume", str(run_dir)]) == 0
    finally:
        chunk_source._compile = original
    out = capsys.readouterr().out.strip()
    assert out == f"run {run_dir} is complete: update 24 of 24 (3,072 env steps) is saved; " + (
        "nothing to train"
    )


@pytest.mark.slow
def test_second_signal_aborts_at_once(tmp_path):
    """Two SIGTERMs while chunk 2 is held: the second exits 143 at once (the chunk never ends),
    nothing is saved (checkpoints only at the end) and the message says so."""
    run_dir = tmp_path / "aborted"
    proc = _held_run(run_dir, "chunk:2", "checkpoint.every_updates=0")
    _read_until(proc, "held")
    proc.send_signal(signal.SIGTERM)
    _read_until(proc, "finishing the chunk in flight")
    time.sleep(Signals.GRACE_S + 0.5)  # a repeat within the grace period is the same request
    proc.send_signal(signal.SIGTERM)  # the chunk is still held: only an abort ends the run
    code, out = _finish(proc)
    assert code == 143, out
    assert out.strip().splitlines()[-1] == (
        "SIGTERM again: aborted, the chunk in flight is lost; no checkpoint; "
        f"--resume {run_dir} starts from update 0"
    )
    assert _saved_steps(run_dir) == []


@pytest.mark.slow
def test_signal_during_compile_stops_at_once(tiny_config, tmp_path, two_runs):
    """SIGINT while the compile is held (as a long XLA compile holds a real run): exit 130
    at once with nothing saved, and the run directory the run created is gone. A run
    directory holding a config but no checkpoint (a run killed before its first one) trains
    from update 0 on ``--resume``."""
    run_dir = tmp_path / "early"
    proc = _held_run(run_dir, "compile")
    _read_until(proc, "held")
    proc.send_signal(signal.SIGINT)  # the compile is never released: only a prompt exit ends
    code, out = _finish(proc)
    assert code == 130, out
    assert out.strip().splitlines()[-1] == (
        f"SIGINT before training started: nothing trained, nothing saved; removed {run_dir}, "
        "which this run had created"
    )
    assert not run_dir.exists()
    run_dir.mkdir()
    save_config(tiny_config, run_dir / "config.yaml")
    result = train(run_dir=run_dir, resume=True, quiet=True)
    assert [row["update"] for row in result.history] == [8, 16, 24]
    assert _leaves_equal(result.runner.params, two_runs[0].runner.params)


def _failing_build(config):
    raise RuntimeError("the env failed to build")


def test_a_failure_before_the_first_update_removes_only_a_run_dir_it_created(
    tiny_config, tmp_path, monkeypatch
):
    """The env fails to build: a run directory the run created is removed; one that existed
    (empty, as ``mkdir`` leaves it) is kept, and so is a resumed run's."""
    from jaxrl.run import driver  # noqa: PLC0415

    monkeypatch.setattr(driver, "build_source", _failing_build)
    fresh = tmp_path / "runs" / "fresh"
    with pytest.raises(RuntimeError, match="failed to build"):
        train(tiny_config, fresh, quiet=True)
    assert not fresh.exists() and (tmp_path / "runs").is_dir()  # only the run's own folder
    kept = tmp_path / "kept"
    kept.mkdir()
    with pytest.raises(RuntimeError, match="failed to build"):
        train(tiny_config, kept, quiet=True)
    assert sorted(p.name for p in kept.iterdir()) == ["config.yaml"]
    with pytest.raises(RuntimeError, match="failed to build"):
        train(run_dir=kept, resume=True, quiet=True)
    assert (kept / "config.yaml").is_file()


def test_existing_run_dir_and_missing_resume_dir_exit_2_in_one_line(two_runs, tmp_path, capsys):
    """Bad input exits 2 (docs/reference/cli.md): a run directory that holds a run, a
    ``--resume`` folder that does not exist, a folder that is no run."""
    taken = ["--config", str(REPO / "configs" / "cartpole.yaml"), *TINY_CARTPOLE]
    assert train_main([*taken, "--run-dir", str(two_runs[0].run_dir), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already holds a run" in err and "--overwrite" in err
    missing = tmp_path / "no-such-run"
    assert train_main(["--resume", str(missing)]) == 2
    assert capsys.readouterr().err == f"error: cannot resume {missing}: no such directory\n"
    assert not missing.exists()
    assert train_main(["--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no config.yaml" in err


def test_quiet_prints_the_done_line_only(two_runs, tmp_path, capsys):
    """``--quiet``: no summary, no progress bar, one ``done:`` line on stdout."""
    run_dir = tmp_path / "quiet"
    argv = ["--config", str(REPO / "configs" / "cartpole.yaml"), *TINY_CARTPOLE]
    assert train_main([*argv, "train.total_steps=1024", "--run-dir", str(run_dir), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("done: 1,024 env steps, ") and out.count("\n") == 1, out
    assert out.strip().endswith(f"; run dir {run_dir}") and "env steps/s" not in err


def test_summary_says_how_to_stop_when_sigint_is_ignored(tiny_config, tmp_path):
    """A background job of a script ignores SIGINT: the summary names SIGTERM (and this pid),
    not Ctrl-C."""
    from jaxrl.run.summary import run_summary  # noqa: PLC0415

    setup = make_setup(tiny_config)
    handled = run_summary(tiny_config, setup, tmp_path, 0, {})
    assert "Ctrl-C or SIGTERM saves the chunk in flight" in handled
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ignored = run_summary(tiny_config, setup, tmp_path, 0, {})
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "Ctrl-C" not in ignored
    assert f"SIGINT is ignored here: kill -TERM {os.getpid()} saves the chunk in flight" in ignored


def test_a_config_error_is_reported_before_jax_is_imported():
    """A typo in a key is one line, exit 2, and JAX is never imported."""
    program = (
        "import sys\n"
        "from jaxrl.commands.train import main\n"
        "code = main(['--config', 'configs/cartpole.yaml', 'train.total_stepz=5'])\n"
        "print(code, 'jax' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stderr.count("\n") == 1 and "total_stepz" in done.stderr, done.stderr
    assert done.stdout.split() == ["2", "False"], done.stdout


def test_a_bad_resume_is_reported_before_jax_is_imported(tmp_path):
    """``--resume DIR`` of a folder that is no run, and an override that cannot change on
    resume, are one line each, exit 2, before JAX is imported."""
    (tmp_path / "plain").mkdir()
    cases = {
        "no such directory": [str(tmp_path / "missing")],
        "it has no config.yaml": [str(tmp_path / "plain")],
        "ppo.lr cannot change when resuming": [str(tmp_path / "missing"), "ppo.lr=0.1"],
    }
    program = (
        "import sys\n"
        "from jaxrl.commands.train import main\n"
        "code = main(['--resume', *sys.argv[1:]])\n"
        "print(code, 'jax' in sys.modules)\n"
    )
    for message, args in cases.items():
        done = subprocess.run(
            [sys.executable, "-c", program, *args],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
        assert done.stdout.split() == ["2", "False"], (message, done.stdout)


def _wandb_history(path: Path) -> list[dict]:
    """The history rows of an offline W&B run file (``run-<id>.wandb``).

    The file is a LevelDB-style log: a 7-byte header, then 32 KiB blocks of records, each
    with a 7-byte header (crc32, little-endian length, kind: 1 full, 2 first, 3 middle,
    4 last) and a piece of one serialised ``wandb.proto`` ``Record``.
    """
    import json  # noqa: PLC0415

    from wandb.proto import wandb_internal_pb2  # noqa: PLC0415

    data = path.read_bytes()
    block, pos, rows, pending = 32768, 7, [], b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            if record.WhichOneof("record_type") == "history":
                items = record.history.item  # the key is in key or nested_key
                rows.append(
                    {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items}
                )
    return rows


@pytest.mark.slow
def test_wandb_offline_logs_the_tensorboard_scalars_per_member(tmp_path):
    """``logger.wandb`` in offline mode: one W&B run per member, holding the same scalars at
    the same env steps as that member's TensorBoard run."""
    pytest.importorskip("wandb")
    from tensorboard.backend.event_processing import event_accumulator  # noqa: PLC0415

    overrides = [*TINY_CARTPOLE, "train.num_seeds=2", "logger.wandb.project=jaxrl-test"]
    config = load_config(
        REPO / "configs" / "cartpole.yaml", [*overrides, "logger.wandb.mode=offline"]
    )
    run_dir = tmp_path / "wb"
    train(config, run_dir, quiet=True)
    ids = json.loads((run_dir / "wandb_ids.json").read_text())
    assert sorted(ids) == ["seed0", "seed1"]
    for member, run_id in ids.items():
        (run_file,) = (run_dir / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")
        rows = _wandb_history(run_file)
        assert [row["env_steps"] for row in rows] == [0, 1024, 2048, 3072]
        assert rows[0]["perf/compile_s"] > 0
        board = event_accumulator.EventAccumulator(str(run_dir / member))
        board.Reload()
        for tag in ("train/policy_loss", "train/learning_rate", "perf/sps"):
            logged = [(e.step, e.value) for e in board.Scalars(tag)]
            assert [(row["env_steps"], row[tag]) for row in rows[1:]] == [
                (step, pytest.approx(value, rel=1e-6)) for step, value in logged
            ]


# ------------------------------------------------------------------------- train further


def test_resume_with_larger_total_steps_is_bit_exact(tmp_path, capsys):
    """16 updates, then ``--resume R train.total_steps=3072`` to 24 (in chunks of 4, not 8):
    the same params and optimizer state as one uninterrupted 24-update run (constant lr: with
    ppo.anneal_lr the schedule's horizon is total_steps, see docs/guide/checkpoints.md)."""
    constant = "ppo.anneal_lr=false"
    reference = train(make_tiny_config(constant), tmp_path / "long", quiet=True)
    run_dir = tmp_path / "further"
    train(make_tiny_config(constant, "train.total_steps=2048"), run_dir, quiet=True)
    assert _saved_steps(run_dir) == [8, 16]
    capsys.readouterr()
    further = ["train.total_steps=3072", "train.updates_per_chunk=4", "checkpoint.keep=5"]
    assert train_main(["--resume", str(run_dir), *further, "--quiet"]) == 0
    err = capsys.readouterr().err
    changes = (
        "train.total_steps 2048 -> 3072; train.updates_per_chunk 8 -> 4; checkpoint.keep 3 -> 5"
    )
    assert f"resume: {changes} (written to {run_dir / 'config.yaml'})" in err
    assert _saved_steps(run_dir) == [8, 16, 24]
    final = _final_state(make_tiny_config(constant), run_dir)
    assert int(final.update_step) == 24
    assert _leaves_equal(final.params, reference.runner.params)
    assert _leaves_equal(final.opt_state, reference.runner.opt_state)
    text = (run_dir / "config.yaml").read_text()
    assert load_config(run_dir / "config.yaml").train.total_steps == 3072
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d UTC"
    assert re.match(rf"# resumed at update 16 \({stamp}\): {changes}\n", text)


def test_resume_refuses_other_overrides_in_one_line(tmp_path, capsys):
    assert train_main(["--resume", str(tmp_path), "ppo.lr=0.1"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "config error: ppo.lr cannot change when resuming a run (it would change what an "
        "update computes); the keys that may: train.total_steps, train.updates_per_chunk, "
        "train.progress_bar, checkpoint.every_updates, checkpoint.keep\n"
    )


def test_python_resume_refuses_a_changed_config(tiny_config, two_runs):
    changed = make_tiny_config("ppo.num_steps=16", "train.total_steps=6144")
    with pytest.raises(ConfigError, match=r"^ppo.num_steps cannot change when resuming"):
        train(changed, two_runs[0].run_dir, resume=True, quiet=True)


def test_resume_further_with_anneal_lr_takes_the_longer_schedule(
    tiny_config, tmp_path, two_runs, capsys
):
    """With ppo.anneal_lr the resumed updates follow the new total's schedule to its end (the
    rate of the last step is that of the uninterrupted run), but the params differ: the first
    leg decayed sooner. docs/guide/checkpoints.md states both."""
    run_dir = tmp_path / "annealed"
    first = train(make_tiny_config("train.total_steps=2048"), run_dir, quiet=True)
    assert float(current_learning_rate(first.runner.opt_state)) == 1 - 15 / 16
    capsys.readouterr()
    result = train(tiny_config, run_dir, resume=True, quiet=True)  # to 3072: 24 updates
    assert (
        "resume: ppo.anneal_lr is on: the learning rate now decays to 0 at update 24, from "
        "0.333 x ppo.lr at update 16" in capsys.readouterr().err
    )
    reference = two_runs[0].runner.opt_state
    assert float(current_learning_rate(result.runner.opt_state)) == pytest.approx(1 / 24)
    assert current_learning_rate(result.runner.opt_state) == current_learning_rate(reference)
    assert not _leaves_equal(result.runner.params, two_runs[0].runner.params)
