"""Training of a host run (``env.backend: gymnasium | envpool``).

``env.host_mode``:

* ``sync``: the actor steps a rollout with the newest params, then the learner updates on
  it; repeat. Bit-reproducible for a seed (tested).
* ``async``: the actor runs in its own thread one update ahead: rollout ``k + 1`` is stepped
  with the params of update ``k - 1`` while the learner runs update ``k``. The behaviour
  log-probs are those of the acting params, so PPO's ratio corrects for the lag. The hand-over
  is fixed (a rollout always acts with the params of two updates before), so it repeats too,
  but env stepping and learning overlap.

Checkpoints save the params, optimiser state, keys and counters (a
:class:`jaxrl.core.types.RunnerState` without env state); the host envs are not saved: a resumed
run restarts them from a new seed (``seed`` folded with the update it resumes at).
"""

from __future__ import annotations

import dataclasses
import math
import queue
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxrl.config import Config, build_env
from jaxrl.core.acting import PolicyParams
from jaxrl.core.hyper import make_members
from jaxrl.core.types import RunnerState
from jaxrl.hostenv.actor import Actor, Rollout
from jaxrl.hostenv.learner import HostSpec, init_runner, learn, make_host_spec, policy_of
from jaxrl.hostenv.vecenv import make_vec
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.summary import progress_bar

ENV_SEED_STRIDE = 1_000_003  # a resumed run's envs: seed + stride * update (a new seed)


@dataclass(frozen=True)
class HostSetup:
    """What :func:`jaxrl.commands.train.make_loggers` reads of a run (its members: one)."""

    members: Any


def env_seed(config: Config, start_update: int) -> int:
    """The host envs' seed: ``seed`` for a new run, a new one for each resume point."""
    return (config.seed + ENV_SEED_STRIDE * start_update) % 2**31


def actor_key(config: Config, update: int) -> jax.Array:
    """The key of the rollout that feeds update ``update`` (independent of the learner's)."""
    base = jax.random.fold_in(jax.random.key(config.seed), 0x4A0)
    return jax.random.fold_in(base, update)


def build(config: Config) -> tuple[HostSpec, RunnerState]:
    """Spec (spaces read from one env) and a fresh runner for ``config``."""
    spaces = build_env(config).env
    spec = make_host_spec(config, spaces)
    key = jax.random.key(config.seed)
    # Committed to the device as the learner's outputs are, so its second call hits the cache.
    return spec, jax.device_put(init_runner(spec, key), jax.devices()[0])


class SyncRollouts:
    """Rollouts stepped on the learner's thread with the newest params (``host_mode: sync``)."""

    def __init__(self, actor: Actor, config: Config):
        self.actor, self.config = actor, config

    def next(self, runner: RunnerState, update: int) -> Rollout:
        """The rollout that feeds update ``update + 1``."""
        return self.actor.rollout(policy_of(runner), actor_key(self.config, update))

    def updated(self, runner: RunnerState, done: int) -> None:
        """Update ``done`` finished with ``runner`` (nothing to hand over)."""
        del runner, done

    def stop(self) -> None:
        """Nothing runs in the background."""


class AsyncRollouts:
    """The actor on its own thread, one update ahead (``host_mode: async``).

    It takes params from one queue and hands rollouts to another: rollout ``k`` acts with the
    params of update ``max(k - 1, 0)`` (the first two with the starting params).
    """

    def __init__(self, actor: Actor, config: Config, runner: RunnerState, total: int):
        self.actor, self.config, self.total = actor, config, total
        self.params: queue.Queue = queue.Queue()
        self.rollouts: queue.Queue = queue.Queue(maxsize=1)
        self.update = int(runner.update_step)
        self.params.put(_copy(policy_of(runner)))
        self.params.put(_copy(policy_of(runner)))
        self.thread = threading.Thread(target=self._run, daemon=True, name="jaxrl-host-actor")
        self.thread.start()

    def _run(self) -> None:
        while True:
            policy = self.params.get()
            if policy is None:
                return
            try:
                rollout = self.actor.rollout(policy, actor_key(self.config, self.update))
            except Exception as err:  # handed to the learner, which raises it
                self.rollouts.put(err)
                return
            self.update += 1
            self.rollouts.put(rollout)

    def next(self, runner: RunnerState, update: int) -> Rollout:
        """The rollout that feeds update ``update + 1`` (stepped while the learner worked)."""
        del runner, update
        item = self.rollouts.get()
        if isinstance(item, Exception):
            raise item
        return item

    def updated(self, runner: RunnerState, done: int) -> None:
        """Hand update ``done``'s params to the rollout after the one in flight."""
        if done + 1 < self.total:
            self.params.put(_copy(policy_of(runner)))

    def stop(self) -> None:
        """End the thread (it may be blocked handing over a rollout nobody will take)."""
        self.params.put(None)
        while self.thread.is_alive():
            try:
                self.rollouts.get(timeout=0.05)
            except queue.Empty:
                pass
        self.thread.join()


def _copy(policy: PolicyParams) -> PolicyParams:
    """Buffers of the actor's own: the learner donates the runner's to the next update."""
    return jax.tree.map(lambda x: x.copy(), policy)


def _update(
    source: SyncRollouts | AsyncRollouts, learn_fn: Any, runner: RunnerState, update: int
) -> tuple[Rollout, RunnerState, dict, float]:
    """The next rollout and the update on it, finished on the device; also when the rollout
    was in hand (``time.perf_counter()``)."""
    rollout = source.next(runner, update)
    t1 = time.perf_counter()
    runner, metrics = jax.block_until_ready(learn_fn(runner, rollout.traj))
    return rollout, runner, metrics, t1


def _row(metrics: dict, rollout: Rollout, update_s: float, wall_s: float, batch: int) -> dict:
    """The update's scalars as floats: the learner's, the episodes', the time split."""
    row = {tag: float(value) for tag, value in jax.device_get(metrics).items()}
    episodes = rollout.episodes
    count = len(episodes.returns)
    row["rollout/episode_return"] = float(np.mean(episodes.returns)) if count else math.nan
    row["rollout/episode_length"] = float(np.mean(episodes.lengths)) if count else math.nan
    row["rollout/episodes"] = float(count)
    row["perf/env_s"] = rollout.env_s
    row["perf/policy_s"] = rollout.policy_s
    row["perf/transfer_s"] = rollout.transfer_s
    row["perf/update_s"] = update_s
    row["perf/sps"] = batch / wall_s if wall_s > 0 else 0.0
    return row


def header(config: Config, start: int, run_dir: Path) -> str:
    """The line a host run prints before training."""
    env, total = config.env, config.num_updates
    restart = f" (envs restart from seed {env_seed(config, start)})" if start else ""
    return (
        f"host run: {env.backend} {env.name}, {env.num_envs} envs x {config.ppo.num_steps} "
        f"steps, {env.host_mode} actor, updates {start} -> {total} "
        f"({total * config.batch_size:,} env steps), run dir {run_dir}{restart}"
    )


@dataclasses.dataclass
class _Progress:
    """What the host loop has done so far (host-side, mutated as updates finish)."""

    update: int  # updates done
    last_saved: int  # the update of the newest checkpoint
    t_start: float = dataclasses.field(default_factory=time.perf_counter)
    compile_s: float = 0.0  # the first update's time (it compiles the learner)
    trained: int = 0  # env steps trained after the first update (for env steps/s)
    recent: float = math.nan  # the latest rollout's mean finished-episode return
    history: list = dataclasses.field(default_factory=list)


def _record(progress: _Progress, row: dict, loggers: list, bar: Any, batch: int) -> None:
    """Log one update's row, add it to the history and move the progress bar."""
    update = progress.update
    for logger in loggers:
        logger.scalars(update * batch, row)
    progress.history.append({"env_steps": update * batch, "update": update, **row})
    if not math.isnan(row["rollout/episode_return"]):
        progress.recent = row["rollout/episode_return"]
    bar.update(batch)
    bar.set_postfix_str(f"{row['perf/sps']:,.0f} env steps/s, return {progress.recent:.4g}")


def _save_if_due(
    progress: _Progress, checkpointer: Checkpointer, runner: Any, config: Config, stop: bool
) -> None:
    """Save at the checkpoint cadence, at the end of training and when stopping."""
    update, every = progress.update, config.checkpoint.every_updates
    at_end = update >= config.num_updates
    due = every > 0 and update // every > progress.last_saved // every
    if (due or at_end or stop) and update != progress.last_saved:
        wall = time.perf_counter() - progress.t_start
        meta = {"env_steps": update * config.batch_size, "wall_s": wall, "devices": 1}
        checkpointer.save(runner, meta, step=update)
        progress.last_saved = update


def _run_updates(
    trainer: Any, config: Config, spec: HostSpec, runner: Any, checkpointer: Checkpointer,
    progress: _Progress, signals: Any, run_dir: Path, quiet: bool,
) -> Any:  # fmt: skip
    """The updates from ``progress.update`` to the end; returns the final runner."""
    env, batch, total = config.env, config.batch_size, config.num_updates
    vec = make_vec(
        env.backend, env.name, env.num_envs, env_seed(config, progress.update), env.kwargs
    )
    loggers = trainer.make_loggers(config, HostSetup(members=make_members(config)), run_dir)
    learn_fn = jax.jit(lambda r, t: learn(spec, r, t), donate_argnums=0)
    bar = progress_bar(config, progress.update, quiet)
    actor = Actor(spec, vec)
    source = (
        AsyncRollouts(actor, config, runner, total)
        if env.host_mode == "async"
        else SyncRollouts(actor, config)
    )
    first, limit = progress.update, config.train.max_nonfinite_updates
    try:
        signals.training = True
        while progress.update < total:
            # On a worker thread, as the JAX path's chunks: the main thread stays free to run
            # signal handlers (timeout -s INT's second SIGINT is then seen as the same request).
            t0 = time.perf_counter()
            rollout, runner, metrics, t1 = trainer._in_worker(
                _update, source, learn_fn, runner, progress.update
            )
            t2 = time.perf_counter()
            progress.update += 1
            source.updated(runner, progress.update)
            if progress.update == first + 1:
                progress.compile_s = t2 - t1  # the first call compiles
            else:
                progress.trained += batch
            _record(progress, _row(metrics, rollout, t2 - t1, t2 - t0, batch), loggers, bar, batch)
            if int(runner.nonfinite_streak) >= limit:
                raise trainer.TrainingError(
                    f"training stopped: {int(runner.nonfinite_streak)} non-finite updates in a "
                    f"row at update {progress.update} (train.max_nonfinite_updates={limit}); "
                    f"last good checkpoint: {checkpointer.latest_step()}"
                )
            stop = progress.update < total and signals.signum is not None
            _save_if_due(progress, checkpointer, runner, config, stop)
            if stop:
                bar.close()
                raise trainer.TrainingInterrupted(
                    signals.signum or signal.SIGINT, run_dir, progress.update,
                    graceful=True, trained=True,
                )  # fmt: skip
    finally:
        bar.close()
        source.stop()
        vec.close()
        for logger in loggers:
            logger.close()
    return runner


def train_host(config: Config, run_dir: Path, saved: int | None, quiet: bool, signals: Any) -> Any:
    """Train (or resume) a host run; called by :func:`jaxrl.commands.train._train` for its backends.

    Returns a :class:`jaxrl.commands.train.TrainResult`. Raises what :func:`jaxrl.commands.train.train` raises.
    """
    # The jaxrl.commands.train module that called: under `python -m jaxrl.train` it is __main__, whose
    # exception classes its main() catches (an import here would give a second copy).
    trainer = sys.modules[type(signals).__module__]
    spec, runner = build(config)
    checkpointer = Checkpointer(run_dir, keep=config.checkpoint.keep, create=saved is None)
    try:
        if saved is not None:
            runner, _ = checkpointer.restore(runner)
        start = int(runner.update_step)
        if saved is not None and start >= config.num_updates:
            if not quiet:
                print(trainer.complete_message(run_dir, start, config), flush=True)
            return trainer.TrainResult(
                runner=runner, history=[], compile_s=0.0, sps=0.0, run_dir=run_dir
            )
        if not quiet:
            print(header(config, start, run_dir), flush=True)
        progress = _Progress(update=start, last_saved=checkpointer.latest_step() or 0)
        runner = _run_updates(
            trainer, config, spec, runner, checkpointer, progress, signals, run_dir, quiet
        )
    finally:
        checkpointer.close()
    wall = time.perf_counter() - progress.t_start - progress.compile_s
    sps = progress.trained / wall if wall > 0 else 0.0
    if not quiet:
        print(
            f"done: {progress.update * config.batch_size:,} env steps, {sps:,.0f} env steps/s "
            f"after {progress.compile_s:.1f} s compile, last episode return "
            f"{progress.recent:.4g}; run dir {run_dir}",
            flush=True,
        )
    return trainer.TrainResult(
        runner=runner, history=progress.history, compile_s=progress.compile_s, sps=sps,
        run_dir=run_dir,
    )  # fmt: skip
