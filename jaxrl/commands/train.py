"""Training CLI and API: the host loop around the compiled chunk step.

    python -m jaxrl.train --config configs/cartpole.yaml [section.key=value ...] [--run-dir DIR]
    python -m jaxrl.train --resume DIR [train.total_steps=N ...]

``--resume DIR`` continues from the newest intact checkpoint and may change only the keys in
``jaxrl.config.loader.RESUMABLE_KEYS`` (train further with ``train.total_steps=N``); see
``docs/guide/checkpoints.md``.

The host loop only runs between compiled chunks: it reads the chunk's scalar metrics,
writes TensorBoard scalars, updates the progress bar and saves checkpoints.

Interrupts (SIGINT, i.e. Ctrl-C, or SIGTERM, as schedulers send): the first one lets the
chunk in flight finish, checkpoints it and exits ``128 + signal`` (130 for Ctrl-C) saying
which update was saved; a second one aborts at once. Before the first chunk starts (setup,
compile) an interrupt stops at once: nothing was trained, nothing is saved, and
``--resume DIR`` later starts the run from update 0 with its saved config. The compile and
each chunk run on a worker thread so that the main thread, where Python runs signal
handlers, is never stuck in XLA.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # join the other processes first: importing gymnax starts JAX
    from jaxrl.run.distributed import join_from_argv

    join_from_argv(sys.argv[1:])

import argparse
import dataclasses
import datetime
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from jaxrl.commands.cli import HelpFormatter, prog
from jaxrl.config import Config, ConfigError, load_config, save_config
from jaxrl.config.loader import (
    RESUMABLE_KEYS,
    config_history,
    load_resume_config,
    resume_changes,
)
from jaxrl.core.types import RunnerState
from jaxrl.run.checkpoint import Checkpointer, CheckpointError, extracted_from
from jaxrl.run.distributed import (
    DistributedError,
    add_process_flags,
    cluster_from_flags,
    is_main_process,
    join,
    sync,
)
from jaxrl.run.logger import (
    Logger,
    Loggers,
    NullLogger,
    WandbLogger,
    chunk_scalars,
    wandb_available,
    wandb_teardown,
)
from jaxrl.run.runner import init_run
from jaxrl.run.setup import Setup, make_setup
from jaxrl.run.summary import done_line, feature_status, nan_mean, progress_bar, run_summary
from jaxrl.run.train_step import make_train_step


class TrainingError(RuntimeError):
    """Training cannot go on (non-finite updates, a refused run directory, ...)."""


class TrainingInterrupted(KeyboardInterrupt):
    """A signal stopped training; :attr:`message` says what was saved and how to go on.

    A ``KeyboardInterrupt``, so that code catching Ctrl-C around :func:`train` still does.
    """

    def __init__(
        self, signum: int, run_dir: Path, saved: int | None, *, graceful: bool, trained: bool
    ):
        super().__init__(signum)
        self.signum = signum  # the signal that stopped the run (the exit status is 128 + it)
        self.run_dir = run_dir
        self.saved = saved  # newest checkpointed update, None: no checkpoint at all
        self.graceful = graceful  # True: the chunk in flight was finished and saved
        self.trained = trained  # False: stopped before any chunk of this process ran

    @property
    def message(self) -> str:
        """One line: what happened, what is on disk, the command that goes on."""
        name = signal.Signals(self.signum).name
        resume = f"resume with --resume {self.run_dir}"
        if self.graceful:
            return f"{name}: saved update {self.saved}; {resume}"
        if not self.trained and self.saved is None:
            return (
                f"{name} before training started: nothing trained, nothing saved; "
                f"--resume {self.run_dir} starts it from update 0 with its saved config, "
                f"or delete {self.run_dir}"
            )
        if not self.trained:
            return f"{name} before training went on: checkpoint update {self.saved} kept; {resume}"
        last = (
            f"last checkpoint update {self.saved}; {resume}"
            if self.saved is not None
            else f"no checkpoint; --resume {self.run_dir} starts from update 0"
        )
        return f"{name} again: aborted, the chunk in flight is lost; {last}"


class _Signals:
    """SIGINT/SIGTERM handlers for the time :func:`train` runs (main thread only).

    Before :attr:`training` is set (setup, compile) a signal raises ``KeyboardInterrupt`` at
    once. While training, the first one only sets :attr:`signum` (the loop stops after the
    chunk in flight) and a second raises, unless it comes within :attr:`GRACE_S` of the
    first: GNU ``timeout`` sends its signal to the command and then to the command's process
    group, so ``timeout -s INT`` delivers SIGINT twice at once (that abort lost a 60-minute
    run's last 4M env steps). A signal the process ignores (``nohup``, a background job)
    stays ignored.
    """

    GRACE_S = 1.0  # a repeat this soon after the first signal is the same request

    def __init__(self) -> None:
        self.signum: int | None = None  # first signal received
        self.first_at = 0.0  # time.monotonic() of the first signal
        self.training = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        del frame
        first = self.signum is None
        now = time.monotonic()
        if first:
            self.signum, self.first_at = signum, now
        elif self.training and now - self.first_at < self.GRACE_S:
            return  # the same stop request delivered twice (timeout: command, then group)
        if first and self.training:
            name = signal.Signals(signum).name
            notice = f"{name}: finishing the chunk in flight, then saving it; {name} again aborts"
            try:  # on its own line, the progress bar redrawn below it
                tqdm.write(notice, file=sys.stderr)
            except RuntimeError:  # the handler interrupted a write to stderr (reentrant call)
                os.write(2, f"\n{notice}\n".encode())
            return
        raise KeyboardInterrupt


def _in_worker(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a worker thread while the main thread waits, able to run handlers.

    Python runs a signal handler only when the main thread executes bytecode, and an XLA
    compile or a running chunk holds it in C++ for seconds to minutes. The main thread waits
    on an ``Event`` in 0.1-second polls, so a handler runs within 0.1 s whichever thread the
    kernel handed the signal to; if it raises, the worker is left to finish on its own (a
    daemon: it does not hold the exit).
    """
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as err:  # noqa: BLE001 - re-raised on the main thread
            box["error"] = err
        finally:
            done.set()

    threading.Thread(target=work, name="jaxrl-worker", daemon=True).start()
    # Poll: a signal the kernel hands to another thread (XLA's, the worker) does not interrupt
    # this wait, and its Python handler runs only when the main thread wakes. Without a timeout
    # a held chunk never woke it (a CI run hung until its timeout on a lost SIGINT).
    while not done.wait(0.1):
        pass
    if "error" in box:
        raise box["error"]
    return box["value"]


def worker_busy() -> bool:
    """Whether a compile or chunk abandoned by an interrupt still runs (exit with os._exit)."""
    return any(t.name == "jaxrl-worker" and t.is_alive() for t in threading.enumerate())


@dataclasses.dataclass
class TrainResult:
    """What a finished (or stopped) run returns to Python callers."""

    runner: RunnerState
    history: list[dict[str, float]]  # one row per chunk: env_steps, update, scalars
    compile_s: float  # seconds to compile the chunk step
    sps: float  # env steps per second of one member (perf/sps), after compile, whole run
    run_dir: Path


def default_run_dir(config_path: str | None) -> Path:
    """``runs/<config stem>-<UTC timestamp>``."""
    stem = Path(config_path).stem if config_path else "run"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stem}-{stamp}"


def prepare_run_dir(run_dir: Path, overwrite: bool) -> None:
    """Create ``run_dir``; refuse one that already holds a run unless ``overwrite``.

    With several processes every one checks, then process 0 alone creates the directory.
    """
    held = run_dir.exists() and any(run_dir.iterdir())
    if held and not overwrite:
        raise TrainingError(
            f"run directory {run_dir} already holds a run; continue it with "
            f"--resume {run_dir} or replace it with --overwrite"
        )
    sync("jaxrl-run-dir-checked")
    if is_main_process():
        if held:
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
    sync("jaxrl-run-dir-created")


def _params_finite(runner: RunnerState) -> bool:
    leaves = jax.tree.leaves(runner.params)
    return bool(jnp.all(jnp.array([jnp.isfinite(x).all() for x in leaves])))


def saved_update(run_dir: str | Path) -> int | None:
    """The newest checkpointed update of a run directory, or None (no checkpoint yet)."""
    if not (Path(run_dir) / "checkpoints").is_dir():
        return None
    checkpointer = Checkpointer(run_dir, create=False)
    try:
        return checkpointer.latest_step()
    finally:
        checkpointer.close()


def train(
    config: Config | None = None,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    config_path: str | None = None,
    quiet: bool = False,
) -> TrainResult:
    """Train (or resume) a run; the Python API behind ``python -m jaxrl.train``.

    Called on the main thread it handles SIGINT and SIGTERM as the module docstring says,
    raising :class:`TrainingInterrupted` once the chunk in flight is saved (or at once).

    Args:
      config: the run's config. When resuming: None continues with the saved
        ``config.yaml``; a config that differs from it only in ``RESUMABLE_KEYS``
        (``train.total_steps`` to train further, logging and checkpoint cadence) continues
        under it and is written to ``config.yaml`` (the old values kept as a comment line).
      run_dir: where config, TensorBoard events and checkpoints go.
      resume: continue the run in ``run_dir`` from its latest intact checkpoint (from update
        0 if it has none yet); unreadable newer checkpoints are reported on stderr and moved
        to ``checkpoints/<step>.corrupt``. A run already complete is restored and returned
        untrained.
      overwrite: replace an existing run in ``run_dir``.
      config_path: only used to name a default run directory.
      quiet: no summary, no progress bar.

    Raises:
      ConfigError, CheckpointError, TrainingError: with a one-line message.
      TrainingInterrupted: a signal stopped the run; its ``message`` is one line.
    """
    if run_dir is None:
        if resume:
            raise TrainingError("resume needs a run directory")
        if jax.process_count() > 1:
            raise TrainingError(
                "a run of several processes needs --run-dir (the same shared path on every process)"
            )
        run_dir = default_run_dir(config_path)
    run_dir = Path(run_dir)
    with _Signals() as signals:
        try:
            return _train(config, run_dir, resume, overwrite, quiet, signals)
        except TrainingInterrupted:
            raise
        except KeyboardInterrupt:
            raise TrainingInterrupted(
                signals.signum or signal.SIGINT,
                run_dir,
                saved_update(run_dir),
                graceful=False,
                trained=signals.training,
            ) from None


class _NoCheckpoints:
    """The checkpointer of a run trained in memory: nothing is saved."""

    directory = "nowhere (trained in memory)"

    def latest_step(self) -> None:
        return None

    def save(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs  # nothing is written

    def close(self) -> None:
        pass


def train_in_memory(config: Config, quiet: bool = False) -> TrainResult:
    """Train ``config`` writing nothing: no run directory, TensorBoard events or checkpoints.

    Behind ``jaxrl.train(..., run_dir=None)``; returns the trained runner state and the
    metrics of every chunk. A signal (Ctrl-C) stops it with a ``KeyboardInterrupt``; nothing
    is kept.
    """
    try:
        with _Signals() as signals:
            setup, runner = _in_worker(_build, config)
            if not quiet:  # the summary less its checkpoint line: nothing is saved
                summary = run_summary(config, setup, Path("none: in memory"), 0, runner.features)
                lines = summary.splitlines()
                print("\n".join(x for x in lines if not x.startswith("  checkpoints")), flush=True)
            loggers = [NullLogger() for _ in setup.members.names]
            return _loop(config, setup, runner, _NoCheckpoints(), loggers, None, quiet, signals)
    except TrainingInterrupted as stop:
        raise KeyboardInterrupt(
            f"training in memory stopped by signal {stop.signum}: nothing is kept (give "
            "run_dir= to checkpoint and resume)"
        ) from None


def _train(
    config: Config | None,
    run_dir: Path,
    resume: bool,
    overwrite: bool,
    quiet: bool,
    signals: _Signals,
) -> TrainResult:
    saved, changes = None, []
    if resume:
        config, changes = _resume_config(config, run_dir)
        saved = saved_update(run_dir)
    else:
        config = config or Config()
        prepare_run_dir(run_dir, overwrite)
        if is_main_process():
            save_config(config, run_dir / "config.yaml")
    if config.env.backend != "jax":  # gymnasium / EnvPool: the actor-learner loop
        from jaxrl.hostenv.loop import train_host  # noqa: PLC0415

        return train_host(config, run_dir, saved, quiet, signals)

    setup, runner = _in_worker(_build, config)
    # A run interrupted before its first checkpoint resumes from update 0 (nothing to restore).
    checkpointer = Checkpointer(run_dir, keep=config.checkpoint.keep, create=saved is None)
    if saved is not None:
        runner = _restore_intact(checkpointer, setup, runner)
    start_update = int(np.max(jax.device_get(runner.update_step)))
    main = is_main_process()
    if resume and main:
        _record_resume(config, run_dir, changes, start_update)
    quiet = quiet or not main  # the other processes train silently
    if saved is not None and start_update >= config.num_updates:
        checkpointer.close()
        if not quiet:
            print(complete_message(run_dir, start_update, config), flush=True)
        return TrainResult(runner=runner, history=[], compile_s=0.0, sps=0.0, run_dir=run_dir)
    if not quiet:
        print(run_summary(config, setup, run_dir, start_update, runner.features), flush=True)
        if resume and saved is None:
            print(f"  (no checkpoint in {run_dir} yet: starting at update 0)", flush=True)

    loggers = []
    try:
        loggers = make_loggers(config, setup, run_dir) if main else []
        loggers = loggers or [NullLogger() for _ in setup.members.names]
        return _loop(config, setup, runner, checkpointer, loggers, run_dir, quiet, signals)
    finally:
        for logger in loggers:
            logger.close()
        if main and config.logger.wandb.project and wandb_available():
            wandb_teardown()  # the offline files complete on disk before train returns
        checkpointer.close()


def _resume_config(wanted: Config | None, run_dir: Path) -> tuple[Config, list[str]]:
    """The config a resumed run trains with, and what it changes (``key old -> new``).

    ``wanted`` (None: the saved config as it is) may differ from the saved one only in
    :data:`RESUMABLE_KEYS`.
    """
    if not (run_dir / "config.yaml").is_file():
        raise CheckpointError(f"cannot resume {run_dir}: it has no config.yaml")
    member = extracted_from(run_dir)
    if member is not None:
        raise ConfigError(
            f"cannot resume {run_dir}: it is member {member['member']} extracted from "
            f"{member['source']} (policies only); resume that run instead"
        )
    saved = load_config(run_dir / "config.yaml")
    if wanted is None:
        return saved, []
    return wanted, resume_changes(saved, wanted)


def _record_resume(config: Config, run_dir: Path, changes: list[str], update: int) -> None:
    """Write the changed config, the old values kept as a comment line, and say so."""
    if not changes:
        return
    path = run_dir / "config.yaml"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    line = f"resumed at update {update} ({stamp}): {'; '.join(changes)}"
    save_config(config, path, (*config_history(path), line))
    print(f"resume: {'; '.join(changes)} (written to {path})", file=sys.stderr, flush=True)
    if config.ppo.anneal_lr and any(c.startswith("train.total_steps ") for c in changes):
        print(
            f"resume: ppo.anneal_lr is on: the learning rate now decays to 0 at update "
            f"{config.num_updates}, from {1 - update / config.num_updates:.3g} x ppo.lr at "
            f"update {update} (see docs/guide/checkpoints.md)",
            file=sys.stderr,
            flush=True,
        )


def _restore_intact(checkpointer: Checkpointer, setup: Setup, runner: RunnerState) -> RunnerState:
    """The newest intact checkpoint; unreadable newer ones are set aside (kept) and reported.

    They must leave Orbax's sight: training saves their steps again, and Orbax refuses to save
    a step that exists (and would garbage-collect them as old checkpoints).
    """
    runner, meta, bad = checkpointer.restore_intact(runner)
    _check_resume_devices(setup, meta.get("devices"))
    if bad is None:
        return runner
    step = int(meta["update_step"])
    newer = [s for s in checkpointer.steps() if s > step]
    sync("jaxrl-corrupt-found")
    if is_main_process():
        moved = [checkpointer.set_aside(s).name for s in newer]
        print(
            f"warning: {bad}; resuming from update {step}, the newest intact one (kept as "
            f"{', '.join(f'checkpoints/{m}' for m in moved)})",
            file=sys.stderr,
            flush=True,
        )
    sync("jaxrl-corrupt-set-aside")
    checkpointer.manager.reload()
    return runner


def make_loggers(config: Config, setup: Setup, run_dir: Path) -> list[Logger | Loggers]:
    """One logger per member: TensorBoard, and W&B too when ``logger.wandb.project`` is set.

    One member writes TensorBoard events into ``run_dir``, several into ``run_dir/<member>``
    (each a TensorBoard run of its own); each member is its own W&B run, grouped by run dir.

    Raises:
      ConfigError: a W&B project is named but the ``wandb`` package is not installed.
    """
    members = setup.members
    single = members.count == 1
    boards = [Logger(run_dir if single else run_dir / name) for name in members.names]
    wandb = config.logger.wandb
    if not wandb.project:
        return boards
    if not wandb_available():
        for board in boards:
            board.close()
        raise ConfigError(
            "logger.wandb.project is set but wandb is not installed: pip install -e '.[wandb]'"
        )
    loggers = []
    for i, board in enumerate(boards):
        member = {"member": members.names[i], "seed": members.seeds[i], **members.points[i]}
        runs = WandbLogger(
            run_dir,
            "" if single else members.names[i],
            wandb.project,
            wandb.mode,
            {**config.to_dict(), **({} if single else member)},
        )
        loggers.append(Loggers(board, runs))
    return loggers


def complete_message(run_dir: Path, update: int, config: Config) -> str:
    """The one line ``--resume`` prints for a run that has nothing left to train."""
    return (
        f"run {run_dir} is complete: update {update} of {config.num_updates} "
        f"({update * config.batch_size:,} env steps) is saved; nothing to train"
    )


def _check_resume_devices(setup: Setup, saved: int | None) -> None:
    """Refuse to resume on another device count a run whose env groups are per device.

    Opponent groups (self-play), evaluation lanes and curriculum replay envs are laid out in
    every device's slice of the env batch, so on another device count the saved env states
    would land in other groups. Runs with one kind of env resume on any device count, and
    evaluation always works.
    """
    layout = setup.layout
    if saved is None or saved == layout.devices or not layout.grouped:
        return
    raise TrainingError(
        f"this run was trained on {saved} devices with env groups (self-play, evaluation lanes "
        "or curriculum replay) "
        f"laid out per device; resume it on {saved} devices (mesh.devices={saved}), not "
        f"{layout.devices} (evaluation restores on any device count)"
    )


def _member_rows(metrics: dict, count: int) -> list[dict[str, float]]:
    """Per member ``{tag: float}`` from the chunk's metrics (``[R]`` leaves when R > 1)."""
    if count == 1:
        return [chunk_scalars(metrics)]
    return [chunk_scalars({tag: value[i] for tag, value in metrics.items()}) for i in range(count)]


def _build(config: Config) -> tuple[Setup, RunnerState]:
    """Env, network and the initial runner state (run on the worker thread: it compiles)."""
    setup = make_setup(config)
    return setup, init_run(setup)


def _compile(setup: Setup, runner: RunnerState) -> Callable:
    """The chunk step compiled for ``runner``'s shapes (run on the worker thread)."""
    return make_train_step(setup).lower(runner).compile()


def _run_chunk(step_fn: Callable, runner: RunnerState) -> tuple[RunnerState, Any, Any, Any]:
    """One compiled chunk and its one device-to-host transfer (run on the worker thread).

    Returns ``(runner, metrics, update_step, nonfinite_streak)``, the last three on the host.
    """
    runner, metrics = step_fn(runner)
    metrics, updates, streaks = jax.device_get(
        (metrics, runner.update_step, runner.nonfinite_streak)
    )
    return runner, metrics, updates, streaks


def _any_process(flag: bool) -> bool:
    """``flag`` of any process: a signal to one process stops all of them at the same chunk."""
    if jax.process_count() == 1:
        return flag
    from jax.experimental import multihost_utils  # noqa: PLC0415

    return bool(np.any(multihost_utils.process_allgather(np.asarray(flag))))


@dataclasses.dataclass
class _Tally:
    """The host loop's bookkeeping between chunks (host values only, never traced)."""

    updates: np.ndarray  # [R] int, updates each member has done
    streaks: np.ndarray  # [R] int, each member's non-finite updates in a row
    last_saved: int  # the newest checkpointed update (0: none)
    history: list[dict] = dataclasses.field(default_factory=list)  # one row per chunk
    stopped: dict[str, int] = dataclasses.field(default_factory=dict)  # member -> its NaN stop
    train_s: float = 0.0  # seconds spent in chunks
    trained_steps: int = 0  # env steps of one member trained by this process
    recent_return: float = math.nan  # newest chunk's mean episode return that is not NaN
    status: str = ""  # the features' status after the newest chunk (stage, self-play)

    @property
    def update(self) -> int:
        """The update the run has reached (the furthest member)."""
        return int(self.updates.max())


def _host_ints(updates: Any, streaks: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-member update counts and non-finite streaks as int arrays ``[R]``."""
    return np.atleast_1d(updates).astype(int), np.atleast_1d(streaks).astype(int)


def _start_tally(
    config: Config, runner: RunnerState, loggers: list[Logger], compile_s: float, saved: int
) -> _Tally:
    """The tally at the loop's start; logs the compile time at each member's step."""
    updates, streaks = _host_ints(*jax.device_get((runner.update_step, runner.nonfinite_streak)))
    for logger, done in zip(loggers, updates, strict=True):
        logger.scalars(int(done) * config.batch_size, {"perf/compile_s": compile_s})
    return _Tally(updates=updates, streaks=streaks, last_saved=saved)


def _record_chunk(
    config: Config, loggers: list[Logger], tally: _Tally, metrics: Any, new: np.ndarray, secs: float
) -> list[dict[str, float]]:
    """Log one chunk's scalars per member (with ``perf/sps``) and append its history row."""
    batch = config.batch_size
    rows = _member_rows(metrics, len(loggers))
    for logger, row, done, before in zip(loggers, rows, new, tally.updates, strict=True):
        steps = int(done - before) * batch
        row["perf/sps"] = steps / secs if steps else 0.0
        logger.scalars(int(done) * batch, row)
    update = int(new.max())
    merged = rows[0] if len(rows) == 1 else {tag: [row[tag] for row in rows] for tag in rows[0]}
    tally.history.append({"env_steps": update * batch, "update": update, **merged})
    returns = [row["rollout/episode_return"] for row in rows]
    if not all(math.isnan(r) for r in returns):
        tally.recent_return = float(np.nanmean(returns))
    return rows


def _train_chunk(
    config: Config,
    setup: Setup,
    step_fn: Callable,
    runner: RunnerState,
    loggers: list[Logger],
    tally: _Tally,
    bar: tqdm,
) -> RunnerState:
    """Run one compiled chunk; log it, update the tally and the progress bar."""
    t_chunk = time.perf_counter()
    runner, metrics, new_updates, streaks = _in_worker(_run_chunk, step_fn, runner)
    new_updates, streaks = _host_ints(new_updates, streaks)
    chunk_s = time.perf_counter() - t_chunk
    member_steps = int((new_updates - tally.updates).max()) * config.batch_size
    tally.train_s += chunk_s
    tally.trained_steps += member_steps
    rows = _record_chunk(config, loggers, tally, metrics, new_updates, chunk_s)
    tally.status = feature_status(setup, rows)
    bar.update((int(new_updates.max()) - tally.update) * config.batch_size)
    per_member = " per member" if len(rows) > 1 else ""
    bar.set_postfix_str(
        f"{_si(member_steps / chunk_s)} env steps/s{per_member}, return "
        f"{tally.recent_return:.4g}" + (f", {tally.status}" if tally.status else "")
    )
    tally.updates, tally.streaks = new_updates, streaks
    return runner


def _check_nonfinite(config: Config, names: list[str], tally: _Tally, directory: Path) -> None:
    """Note members whose non-finite streak reached the limit; raise when all have."""
    limit = config.train.max_nonfinite_updates
    for name, streak, done in zip(names, tally.streaks, tally.updates, strict=True):
        if streak >= limit and name not in tally.stopped:
            tally.stopped[name] = int(done)
            if len(names) > 1:
                tqdm.write(
                    f"warning: member {name} stopped after {streak} non-finite updates "
                    f"in a row at update {int(done)}; the other members go on",
                    file=sys.stderr,
                )
    if len(tally.stopped) == len(names):
        where = f"step {tally.last_saved} in {directory}" if tally.last_saved else "none"
        raise TrainingError(
            f"training stopped: {int(tally.streaks.max())} non-finite updates in a row at "
            f"update {tally.update} (train.max_nonfinite_updates={limit}); last good "
            f"checkpoint: {where}"
        )


def _save(
    checkpointer: Checkpointer, setup: Setup, runner: RunnerState, update: int, wall_s: float
) -> None:
    """Checkpoint ``runner`` at ``update`` (refused when its params are not finite)."""
    if not _params_finite(runner):
        raise TrainingError(f"refusing to checkpoint non-finite params at update {update}")
    meta = {"env_steps": update * setup.config.batch_size, "wall_s": wall_s}
    checkpointer.save(runner, {**meta, "devices": setup.layout.devices}, step=update)


def _loop(
    config: Config,
    setup: Setup,
    runner: RunnerState,
    checkpointer: Checkpointer,
    loggers: list[Logger],
    run_dir: Path,
    quiet: bool,
    signals: _Signals,
) -> TrainResult:
    """Compile, then run chunks to the end (or a signal), checkpointing as configured."""
    every, names = config.checkpoint.every_updates, setup.members.names
    t0 = time.perf_counter()
    step_fn = _in_worker(_compile, setup, runner)
    compile_s = time.perf_counter() - t0
    signals.training = True  # from here a first signal lets the chunk in flight finish
    tally = _start_tally(config, runner, loggers, compile_s, checkpointer.latest_step() or 0)
    bar = progress_bar(config, tally.update, quiet)
    try:
        while tally.update < config.num_updates:
            runner = _train_chunk(config, setup, step_fn, runner, loggers, tally, bar)
            _check_nonfinite(config, names, tally, checkpointer.directory)
            finished = len(tally.stopped) + (tally.updates >= config.num_updates).sum()
            at_end = tally.update >= config.num_updates or finished >= len(names)
            stop = not at_end and _any_process(signals.signum is not None)
            due = every > 0 and tally.update // every > tally.last_saved // every
            if (due or at_end or stop) and tally.update != tally.last_saved:
                _save(checkpointer, setup, runner, tally.update, time.perf_counter() - t0)
                tally.last_saved = tally.update
            if stop:
                signum = signals.signum or signal.SIGINT
                raise TrainingInterrupted(
                    signum, run_dir, tally.update, graceful=True, trained=True
                )
            if at_end:
                break
    finally:
        bar.close()  # a message raised above goes on its own line, after the bar's
    return _finish(config, setup, runner, tally, compile_s, run_dir, quiet)


def _finish(
    config: Config,
    setup: Setup,
    runner: RunnerState,
    tally: _Tally,
    compile_s: float,
    run_dir: Path,
    quiet: bool,
) -> TrainResult:
    """Print the ``done:`` line; report members stopped by non-finite updates."""
    jax.block_until_ready(runner)
    sps = tally.trained_steps / tally.train_s if tally.train_s > 0 else 0.0
    members = setup.members.count
    if not quiet:
        final = nan_mean(tally.history[-1]["rollout/episode_return"]) if tally.history else math.nan
        steps = tally.update * config.batch_size
        print(done_line(steps, members, sps, compile_s, final, tally.status, run_dir), flush=True)
    if tally.stopped:
        raise TrainingError(
            "members stopped by non-finite updates (train.max_nonfinite_updates="
            f"{config.train.max_nonfinite_updates}): "
            + ", ".join(f"{n} at update {u}" for n, u in tally.stopped.items())
            + "; the others trained to the end"
            + (f"; checkpoints in {run_dir / 'checkpoints'}" if run_dir is not None else "")
        )
    return TrainResult(
        runner=runner, history=tally.history, compile_s=compile_s, sps=sps, run_dir=run_dir
    )


def _si(value: float) -> str:
    """``213456.0`` -> ``213k`` (three significant digits, SI prefix)."""
    return tqdm.format_sizeof(value).strip()


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``python -m jaxrl.train``."""
    parser = argparse.ArgumentParser(
        prog=prog("jaxrl.commands.train"),
        description="Train a PPO agent with one compiled JAX train step.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--config", help="YAML config file (see configs/)")
    parser.add_argument(
        "overrides", nargs="*", metavar="section.key=value", help="config overrides"
    )
    parser.add_argument("--run-dir", help="output directory (default runs/<config>-<time>)")
    parser.add_argument("--resume", metavar="DIR", help="continue the run in DIR")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing run in --run-dir"
    )
    parser.add_argument("--quiet", action="store_true", help="no summary or progress bar")
    add_process_flags(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status (``128 + signal`` when interrupted)."""
    args = build_parser().parse_intermixed_args(argv)  # overrides before or after flags
    try:
        join(cluster_from_flags(args.coordinator, args.num_processes, args.process_id))
        if args.resume:
            if args.config or args.run_dir:
                raise ConfigError(
                    "--resume DIR continues a run with its saved config.yaml; it takes no "
                    "--config or --run-dir (overrides only of " + ", ".join(RESUMABLE_KEYS) + ")"
                )
            run_dir = Path(args.resume)
            config = load_resume_config(run_dir, args.overrides) if args.overrides else None
            result = train(config, run_dir, resume=True, quiet=args.quiet)
            if args.quiet and not result.history and is_main_process():  # nothing left to train
                update = int(np.max(jax.device_get(result.runner.update_step)))
                print(complete_message(run_dir, update, load_config(run_dir / "config.yaml")))
        else:
            if not args.config and not args.overrides:
                raise ConfigError("give --config FILE (see configs/) or --resume DIR")
            config = load_config(args.config, args.overrides)
            train(
                config,
                args.run_dir,
                overwrite=args.overwrite,
                config_path=args.config,
                quiet=args.quiet,
            )
    except (ConfigError, DistributedError) as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    except (CheckpointError, TrainingError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except TrainingInterrupted as stop:
        return interrupted_exit(stop)
    except KeyboardInterrupt:  # before train() took over the signals (argument parsing, join)
        print("interrupted before training started: nothing saved", file=sys.stderr)
        return 130
    return 0


def interrupted_exit(stop: TrainingInterrupted) -> int:
    """Report an interrupted run; its exit status (``128 + signal``) for a command line."""
    print(stop.message, file=sys.stderr, flush=True)
    if worker_busy():  # an abandoned compile or chunk would hold up the interpreter's exit
        sys.stdout.flush()
        os._exit(128 + stop.signum)
    return 128 + stop.signum
