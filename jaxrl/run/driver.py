"""The run driver: the one loop around a step source, for every backend.

    train(config, run_dir)                    # a new run, as python -m jaxrl.train does
    train(run_dir=run_dir, resume=True)       # go on from the newest intact checkpoint
    train_in_memory(config)                   # jaxrl.train(..., run_dir=None): nothing written

The driver alone owns logging, the checkpoint cadence and the refusal to save non-finite
params, signals (:mod:`jaxrl.run.signals`), resume and training further, the progress bar,
the summary and the ``done:`` line. It steps a :class:`jaxrl.run.step_source.StepSource`: the
compiled chunk of a JAX env (:mod:`jaxrl.run.chunk_source`) or the actor + learner of a host
env (:mod:`jaxrl.hostenv.source`, ``env.backend: gymnasium | envpool``).

A run that fails or is interrupted before its first update leaves no run directory behind if
this call created it (a directory that existed before, or one with checkpoints, is kept).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from jaxrl.config import Config, ConfigError, load_config, save_config
from jaxrl.config.loader import (
    config_history,
    resume_changes,
)
from jaxrl.core.hyper import Members
from jaxrl.core.types import RunnerState
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.distributed import is_main_process, sync
from jaxrl.run.errors import RunDirError, TrainingError
from jaxrl.run.logger import (
    Logger,
    Loggers,
    NullLogger,
    WandbLogger,
    wandb_available,
    wandb_teardown,
)
from jaxrl.run.run_dir import check_resumable
from jaxrl.run.signals import Signals, TrainingInterrupted, in_worker
from jaxrl.run.step_source import Advance, StepSource
from jaxrl.run.summary import done_line, nan_mean, progress_bar

__all__ = ["TrainResult", "TrainingError", "TrainingInterrupted", "train", "train_in_memory"]


@dataclasses.dataclass
class TrainResult:
    """What a finished (or stopped) run returns to Python callers."""

    runner: RunnerState
    history: list[dict[str, float]]  # one row per step: env_steps, update, scalars
    compile_s: float  # seconds to compile the step
    sps: float  # env steps per second of one member (perf/sps), after compile, whole run
    run_dir: Path | None  # None: trained in memory


def default_run_dir(config_path: str | None) -> Path:
    """``runs/<config stem>-<UTC timestamp>``."""
    stem = Path(config_path).stem if config_path else "run"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stem}-{stamp}"


def prepare_run_dir(run_dir: Path, overwrite: bool) -> bool:
    """Create ``run_dir``; refuse one that already holds a run unless ``overwrite``.

    With several processes every one checks, then process 0 alone creates the directory.
    Returns whether this call created it (it did not exist).
    """
    existed = run_dir.exists()
    held = existed and any(run_dir.iterdir())
    if held and not overwrite:
        raise RunDirError(
            f"run directory {run_dir} already holds a run; continue it with "
            f"--resume {run_dir} or replace it with --overwrite"
        )
    sync("jaxrl-run-dir-checked")
    if is_main_process():
        if held:
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
    sync("jaxrl-run-dir-created")
    return not existed


def saved_update(run_dir: str | Path) -> int | None:
    """The newest checkpointed update of a run directory, or None (no checkpoint yet)."""
    if not (Path(run_dir) / "checkpoints").is_dir():
        return None
    checkpointer = Checkpointer(run_dir, create=False)
    try:
        return checkpointer.latest_step()
    finally:
        checkpointer.close()


def build_source(config: Config) -> tuple[StepSource, RunnerState]:
    """The step source of ``config``'s backend and its initial runner state."""
    if config.env.backend == "jax":
        from jaxrl.run.chunk_source import build_chunk_source  # noqa: PLC0415

        return build_chunk_source(config)
    from jaxrl.hostenv.source import build_host_source  # noqa: PLC0415

    return build_host_source(config)


def train(
    config: Config | None = None,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    config_path: str | None = None,
    quiet: bool = False,
    silent: bool = False,
) -> TrainResult:
    """Train (or resume) a run; the Python API behind ``python -m jaxrl.train``.

    Called on the main thread it handles SIGINT and SIGTERM (:mod:`jaxrl.run.signals`),
    raising :class:`TrainingInterrupted` once the step in flight is saved (or at once).

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
      quiet: no summary, no progress bar (the last line, ``done:`` or "complete", is printed).
      silent: print nothing at all, not even the last line (for a caller that prints its own
        output, e.g. ``jaxrl exploit --json``); implies ``quiet``.

    Raises:
      ConfigError, CheckpointError, TrainingError: with a one-line message (RunDirError: a
        run directory that cannot be used as asked).
      TrainingInterrupted: a signal stopped the run; its ``message`` is one line.
    """
    run_dir = _run_dir(run_dir, resume, config_path)
    made = _Made(run_dir)
    with Signals() as signals:
        try:
            return _train(
                config, made, resume, overwrite, signals, quiet=quiet or silent, silent=silent
            )
        except TrainingInterrupted:
            raise
        except KeyboardInterrupt:
            removed = made.remove_if_untrained()
            raise TrainingInterrupted(
                signals.signum or signal.SIGINT,
                run_dir,
                None if removed else saved_update(run_dir),
                graceful=False,
                trained=signals.training,
                removed=removed,
            ) from None
        except BaseException:
            made.remove_if_untrained()
            raise


def _run_dir(run_dir: str | Path | None, resume: bool, config_path: str | None) -> Path:
    """The run directory to train in: ``run_dir``, else a new ``runs/<config>-<time>``."""
    if run_dir is not None:
        return Path(run_dir)
    if resume:
        raise RunDirError("resume needs a run directory")
    if jax.process_count() > 1:
        raise RunDirError(
            "a run of several processes needs --run-dir (the same shared path on every process)"
        )
    return default_run_dir(config_path)


@dataclasses.dataclass
class _Made:
    """The run directory; removed on a failure before the first update if this call made it."""

    path: Path
    created: bool = False  # this call created it (it did not exist)
    updated: bool = False  # an update finished (from then on it is kept, whatever happens)

    def remove_if_untrained(self) -> bool:
        """Remove the directory if this call created it and no update finished; whether it did."""
        if not self.created or self.updated or not is_main_process():
            return False
        if saved_update(self.path) is not None:
            return False
        shutil.rmtree(self.path, ignore_errors=True)
        return True


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
    metrics of every step. A signal (Ctrl-C) stops it with a ``KeyboardInterrupt``; nothing
    is kept.
    """
    try:
        with Signals() as signals:
            source, runner = in_worker(build_source, config)
            run = _Run(
                config, source, _NoCheckpoints(), None, signals, _Made(None),
                quiet=quiet, main=True, silent=False,
            )  # fmt: skip
            try:
                if not quiet:  # the summary less its checkpoint line: nothing is saved
                    lines = source.summary(Path("none: in memory"), 0, runner).splitlines()
                    print("\n".join(x for x in lines if not x.startswith("  checkpoints")))
                run.loggers = [NullLogger() for _ in source.members.names]
                return _loop(run, runner)
            finally:
                source.close()
    except TrainingInterrupted as stop:
        raise KeyboardInterrupt(
            f"training in memory stopped by signal {stop.signum}: nothing is kept (give "
            "run_dir= to checkpoint and resume)"
        ) from None


@dataclasses.dataclass
class _Run:
    """What the loop works with (host side)."""

    config: Config
    source: StepSource
    checkpointer: Checkpointer | _NoCheckpoints
    run_dir: Path | None  # None: in memory
    signals: Signals
    made: _Made
    quiet: bool  # no summary, no progress bar
    main: bool  # this process prints the last line and writes logs
    silent: bool  # not even the last line
    loggers: list = dataclasses.field(default_factory=list)


def _train(
    config: Config | None, made: _Made, resume: bool, overwrite: bool, signals: Signals,
    *, quiet: bool, silent: bool,
) -> TrainResult:  # fmt: skip
    """:func:`train` in its run directory (``made``), under ``signals``."""
    run_dir = made.path
    saved, changes = None, []
    if resume:
        config, changes = _resume_config(config, run_dir)
        saved = saved_update(run_dir)
    else:
        config = config or Config()
        made.created = prepare_run_dir(run_dir, overwrite)
        if is_main_process():
            save_config(config, run_dir / "config.yaml")
    source, runner = in_worker(build_source, config)
    main = is_main_process()
    # A run interrupted before its first checkpoint resumes from update 0 (nothing to restore).
    checkpointer = Checkpointer(run_dir, keep=config.checkpoint.keep, create=saved is None)
    run = _Run(
        config, source, checkpointer, run_dir, signals, made,
        quiet=quiet or not main, main=main, silent=silent,
    )  # fmt: skip
    try:
        if saved is not None:
            runner = _restore_intact(checkpointer, source, runner)
        start = int(np.max(jax.device_get(runner.update_step)))
        if resume and main:
            _record_resume(config, run_dir, changes, start)
        if saved is not None and start >= config.num_updates:
            if main and not silent:
                print(complete_message(run_dir, start, config), flush=True)
            return TrainResult(runner=runner, history=[], compile_s=0.0, sps=0.0, run_dir=run_dir)
        if not run.quiet:
            print(source.summary(run_dir, start, runner), flush=True)
            if resume and saved is None:
                print(f"  (no checkpoint in {run_dir} yet: starting at update 0)", flush=True)
        return _logged_loop(run, runner)
    finally:
        source.close()
        checkpointer.close()


def _logged_loop(run: _Run, runner: RunnerState) -> TrainResult:
    """:func:`_loop` with the run's loggers open (closed, W&B torn down, at the end)."""
    config = run.config
    try:
        run.loggers = make_loggers(config, run.source.members, run.run_dir) if run.main else []
        run.loggers = run.loggers or [NullLogger() for _ in run.source.members.names]
        return _loop(run, runner)
    finally:
        for logger in run.loggers:
            logger.close()
        if run.main and config.logger.wandb.project and wandb_available():
            wandb_teardown()  # the offline files complete on disk before train returns


def _resume_config(wanted: Config | None, run_dir: Path) -> tuple[Config, list[str]]:
    """The config a resumed run trains with, and what it changes (``key old -> new``).

    ``wanted`` (None: the saved config as it is) may differ from the saved one only in
    :data:`jaxrl.config.loader.RESUMABLE_KEYS`.
    """
    check_resumable(run_dir)
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


def _restore_intact(
    checkpointer: Checkpointer, source: StepSource, runner: RunnerState
) -> RunnerState:
    """The newest intact checkpoint; unreadable newer ones are set aside (kept) and reported.

    They must leave Orbax's sight: training saves their steps again, and Orbax refuses to save
    a step that exists (and would garbage-collect them as old checkpoints).
    """
    runner, meta, bad = checkpointer.restore_intact(runner)
    source.check_resume(meta.get("devices"))
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


def make_loggers(config: Config, members: Members, run_dir: Path) -> list[Logger | Loggers]:
    """One logger per member: TensorBoard, and W&B too when ``logger.wandb.project`` is set.

    One member writes TensorBoard events into ``run_dir``, several into ``run_dir/<member>``
    (each a TensorBoard run of its own); each member is its own W&B run, grouped by run dir.

    Raises:
      ConfigError: a W&B project is named but the ``wandb`` package is not installed.
    """
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


def _any_process(flag: bool) -> bool:
    """``flag`` of any process: a signal to one process stops all of them at the same step."""
    if jax.process_count() == 1:
        return flag
    from jax.experimental import multihost_utils  # noqa: PLC0415

    return bool(np.any(multihost_utils.process_allgather(np.asarray(flag))))


@dataclasses.dataclass
class _Tally:
    """The loop's bookkeeping between steps (host values only, never traced)."""

    updates: np.ndarray  # [R] int, updates each member has done
    streaks: np.ndarray  # [R] int, each member's non-finite updates in a row
    last_saved: int  # the newest checkpointed update (0: none)
    compile_s: float  # seconds compiling (up front, or in a host run's first update)
    history: list[dict] = dataclasses.field(default_factory=list)  # one row per step
    stopped: dict[str, int] = dataclasses.field(default_factory=dict)  # member -> its NaN stop
    train_s: float = 0.0  # seconds spent in steps, compile left out
    trained_steps: int = 0  # env steps of one member trained by this process, compile left out
    recent_return: float = math.nan  # newest step's mean episode return that is not NaN
    status: str = ""  # the features' status after the newest step (stage, self-play)

    @property
    def update(self) -> int:
        """The update the run has reached (the furthest member)."""
        return int(self.updates.max())


def _start_tally(run: _Run, runner: RunnerState, compile_s: float) -> _Tally:
    """The tally at the loop's start; logs an up-front compile's time at each member's step."""
    updates, streaks = jax.device_get((runner.update_step, runner.nonfinite_streak))
    updates, streaks = np.atleast_1d(updates).astype(int), np.atleast_1d(streaks).astype(int)
    if compile_s > 0:
        for logger, done in zip(run.loggers, updates, strict=True):
            logger.scalars(int(done) * run.config.batch_size, {"perf/compile_s": compile_s})
    saved = run.checkpointer.latest_step() or 0
    return _Tally(updates=updates, streaks=streaks, last_saved=saved, compile_s=compile_s)


def _record(run: _Run, tally: _Tally, step: Advance) -> int:
    """Log one step's scalars per member (with ``perf/sps``), append its history row and
    count its speed; returns the env steps of one member it trained."""
    batch = run.config.batch_size
    rows = step.rows
    members = zip(run.loggers, rows, step.updates, tally.updates, strict=True)
    for logger, row, done, before in members:
        steps = int(done - before) * batch
        row["perf/sps"] = steps / step.seconds if steps else 0.0
        logger.scalars(int(done) * batch, row)
    update = int(step.updates.max())
    merged = rows[0] if len(rows) == 1 else {tag: [row[tag] for row in rows] for tag in rows[0]}
    tally.history.append({"env_steps": update * batch, "update": update, **merged})
    returns = [row["rollout/episode_return"] for row in rows]
    if not all(math.isnan(r) for r in returns):
        tally.recent_return = float(np.nanmean(returns))
    member_steps = int((step.updates - tally.updates).max()) * batch
    if step.compile_s > 0:  # a step that compiled: its time is the compile's, not training's
        tally.compile_s += step.compile_s
    else:
        tally.train_s += step.seconds
        tally.trained_steps += member_steps
    return member_steps


def _train_step(run: _Run, runner: RunnerState, tally: _Tally, bar: tqdm) -> RunnerState:
    """Run one step of the source; log it, update the tally and the progress bar."""
    step = in_worker(run.source.advance, runner)
    member_steps = _record(run, tally, step)
    tally.status = run.source.status(step.rows)
    bar.update((int(step.updates.max()) - tally.update) * run.config.batch_size)
    per_member = " per member" if len(step.rows) > 1 else ""
    speed = _si(member_steps / step.seconds) if step.seconds > 0 else "0"
    bar.set_postfix_str(
        f"{speed} env steps/s{per_member}, return {tally.recent_return:.4g}"
        + (f", {tally.status}" if tally.status else "")
    )
    tally.updates, tally.streaks = step.updates, step.streaks
    run.made.updated = True
    return step.runner


def _check_nonfinite(run: _Run, tally: _Tally) -> None:
    """Note members whose non-finite streak reached the limit; raise when all have."""
    names = run.source.members.names
    limit = run.config.train.max_nonfinite_updates
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
        where = f"step {tally.last_saved} in {run.checkpointer.directory}"
        raise TrainingError(
            f"training stopped: {int(tally.streaks.max())} non-finite updates in a row at "
            f"update {tally.update} (train.max_nonfinite_updates={limit}); last good "
            f"checkpoint: {where if tally.last_saved else 'none'}"
        )


def _params_finite(runner: RunnerState) -> bool:
    leaves = jax.tree.leaves(runner.params)
    return bool(jnp.all(jnp.array([jnp.isfinite(x).all() for x in leaves])))


def _save(run: _Run, runner: RunnerState, update: int, wall_s: float) -> None:
    """Checkpoint ``runner`` at ``update`` (refused when its params are not finite)."""
    if not _params_finite(runner):
        raise TrainingError(f"refusing to checkpoint non-finite params at update {update}")
    meta = {"env_steps": update * run.config.batch_size, "wall_s": wall_s}
    run.checkpointer.save(runner, {**meta, "devices": run.source.devices}, step=update)


def _loop(run: _Run, runner: RunnerState) -> TrainResult:
    """Start the source (compile), then step to the end (or a signal), checkpointing as
    configured."""
    config, signals = run.config, run.signals
    every, count = config.checkpoint.every_updates, run.source.members.count
    t0 = time.perf_counter()
    compile_s = in_worker(run.source.start, runner)
    signals.training = True  # from here a first signal lets the step in flight finish
    tally = _start_tally(run, runner, compile_s)
    bar = progress_bar(config, tally.update, run.quiet)
    try:
        while tally.update < config.num_updates:
            runner = _train_step(run, runner, tally, bar)
            _check_nonfinite(run, tally)
            finished = len(tally.stopped) + (tally.updates >= config.num_updates).sum()
            at_end = tally.update >= config.num_updates or finished >= count
            stop = not at_end and _any_process(signals.signum is not None)
            due = every > 0 and tally.update // every > tally.last_saved // every
            if (due or at_end or stop) and tally.update != tally.last_saved:
                _save(run, runner, tally.update, time.perf_counter() - t0)
                tally.last_saved = tally.update
            if stop:
                signum = signals.signum or signal.SIGINT
                raise TrainingInterrupted(
                    signum, run.run_dir, tally.update, graceful=True, trained=True
                )
            if at_end:
                break
    finally:
        bar.close()  # a message raised above goes on its own line, after the bar's
    return _finish(run, runner, tally)


def _finish(run: _Run, runner: RunnerState, tally: _Tally) -> TrainResult:
    """Print the ``done:`` line (also when quiet); report members stopped by non-finite
    updates."""
    config = run.config
    jax.block_until_ready(runner)
    sps = tally.trained_steps / tally.train_s if tally.train_s > 0 else 0.0
    if run.main and not run.silent:
        final = nan_mean(tally.history[-1]["rollout/episode_return"]) if tally.history else math.nan
        steps, members = tally.update * config.batch_size, run.source.members.count
        line = done_line(steps, members, sps, tally.compile_s, final, tally.status, run.run_dir)
        print(line, flush=True)
    if tally.stopped:
        raise TrainingError(
            "members stopped by non-finite updates (train.max_nonfinite_updates="
            f"{config.train.max_nonfinite_updates}): "
            + ", ".join(f"{n} at update {u}" for n, u in tally.stopped.items())
            + "; the others trained to the end"
            + (f"; checkpoints in {run.run_dir / 'checkpoints'}" if run.run_dir else "")
        )
    return TrainResult(
        runner=runner, history=tally.history, compile_s=tally.compile_s, sps=sps,
        run_dir=run.run_dir,
    )  # fmt: skip


def _si(value: float) -> str:
    """``213456.0`` -> ``213k`` (three significant digits, SI prefix)."""
    return tqdm.format_sizeof(value).strip()
