"""The step source of a host run (``env.backend: gymnasium | envpool``): actor + learner.

:class:`HostSource` is what :mod:`jaxrl.run.driver` runs for a host env, one update a step.
``env.host_mode``:

* ``sync``: the actor steps a rollout with the newest params, then the learner updates on
  it; repeat. Bit-reproducible for a seed (tested).
* ``async``: the actor runs in its own thread one update ahead: rollout ``k + 1`` is stepped
  with the params of update ``k - 1`` while the learner runs update ``k``. The behaviour
  log-probs are those of the acting params, so PPO's ratio corrects for the lag. The hand-over
  is fixed (a rollout always acts with the params of two updates before), so it repeats too,
  but env stepping and learning overlap.

Checkpoints (written by the driver) save the params, optimiser state, keys and counters (a
:class:`jaxrl.core.types.RunnerState` without env state); the host envs are not saved: a resumed
run restarts them from a new seed (``seed`` folded with the update it resumes at).
"""

from __future__ import annotations

import math
import queue
import threading
import time
from pathlib import Path

import jax
import numpy as np

from jaxrl.config import Config
from jaxrl.core.acting import PolicyParams
from jaxrl.core.hyper import Members, make_members
from jaxrl.core.types import RunnerState
from jaxrl.hostenv.actor import Actor, Rollout
from jaxrl.hostenv.learner import HostSpec, host_spec, init_runner, learn, policy_of
from jaxrl.hostenv.vecenv import HostVecEnv, make_vec
from jaxrl.run.step_source import Advance

ENV_SEED_STRIDE = 1_000_003  # a resumed run's envs: seed + stride * update (a new seed)


def env_seed(config: Config, start_update: int) -> int:
    """The host envs' seed: ``seed`` for a new run, a new one for each resume point."""
    return (config.seed + ENV_SEED_STRIDE * start_update) % 2**31


def actor_key(config: Config, update: int) -> jax.Array:
    """The key of the rollout that feeds update ``update`` (independent of the learner's)."""
    base = jax.random.fold_in(jax.random.key(config.seed), 0x4A0)
    return jax.random.fold_in(base, update)


def build(config: Config) -> tuple[HostSpec, RunnerState]:
    """Spec (spaces read from one env) and a fresh runner for ``config``."""
    spec = host_spec(config)
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


def _row(metrics: dict, rollout: Rollout, update_s: float) -> dict[str, float]:
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


class HostSource:
    """One host update a step: a rollout from the actor, the compiled learner on it (a
    :class:`jaxrl.run.step_source.StepSource`)."""

    def __init__(self, spec: HostSpec):
        self.spec, self.config = spec, spec.config
        self.learn_fn = jax.jit(lambda r, t: learn(spec, r, t), donate_argnums=0)
        self.update = 0  # updates done (set by start())
        self.first = 0  # the update this process started at (its first update compiles)
        self.vec: HostVecEnv | None = None
        self.rollouts: SyncRollouts | AsyncRollouts | None = None

    @property
    def members(self) -> Members:
        """One member (a host run trains one seed)."""
        return make_members(self.config)

    @property
    def devices(self) -> int:
        """The learner's one device."""
        return 1

    def check_resume(self, devices: int | None) -> None:
        """Any checkpoint resumes (the envs are not saved)."""
        del devices

    def summary(self, run_dir: Path, start: int, runner: RunnerState) -> str:
        """:func:`header`."""
        del runner
        return header(self.config, start, run_dir)

    def start(self, runner: RunnerState) -> float:
        """Start the host envs (seeded for the update resumed at) and the actor; the learner
        compiles in the first update (0 s here)."""
        env = self.config.env
        self.update = self.first = int(runner.update_step)
        seed = env_seed(self.config, self.update)
        self.vec = make_vec(env.backend, env.name, env.num_envs, seed, env.kwargs)
        actor = Actor(self.spec, self.vec)
        self.rollouts = (
            AsyncRollouts(actor, self.config, runner, self.config.num_updates)
            if env.host_mode == "async"
            else SyncRollouts(actor, self.config)
        )
        return 0.0

    def advance(self, runner: RunnerState) -> Advance:
        """The next rollout and the update on it, finished on the device."""
        t0 = time.perf_counter()
        rollout = self.rollouts.next(runner, self.update)
        t1 = time.perf_counter()
        runner, metrics = jax.block_until_ready(self.learn_fn(runner, rollout.traj))
        t2 = time.perf_counter()
        self.update += 1
        self.rollouts.updated(runner, self.update)
        compile_s = t2 - t1 if self.update == self.first + 1 else 0.0  # the first call compiles
        return Advance(
            runner=runner,
            rows=[_row(metrics, rollout, t2 - t1)],
            updates=np.array([self.update]),
            streaks=np.array([int(runner.nonfinite_streak)]),
            seconds=t2 - t0,
            compile_s=compile_s,
        )

    def status(self, rows: list[dict[str, float]]) -> str:
        """No feature reports a status on the host path."""
        del rows
        return ""

    def close(self) -> None:
        """Stop the actor thread and close the envs."""
        if self.rollouts is not None:
            self.rollouts.stop()
        if self.vec is not None:
            self.vec.close()


def build_host_source(config: Config) -> tuple[HostSource, RunnerState]:
    """The source and the initial runner of a host run (spaces read from one env)."""
    spec, runner = build(config)
    return HostSource(spec), runner
