"""The step source of a JAX env: one compiled chunk of ``train.chunk_updates`` updates.

:class:`ChunkSource` is what :mod:`jaxrl.run.driver` runs for ``env.backend: jax``: the setup
(env, network, features), the chunk step compiled once for the runner's shapes, and one
device-to-host transfer of the chunk's metrics.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxrl.config import Config
from jaxrl.core.hyper import Members
from jaxrl.core.types import RunnerState
from jaxrl.run.errors import TrainingError
from jaxrl.run.logger import chunk_scalars
from jaxrl.run.runner import init_run
from jaxrl.run.setup import Setup, make_setup
from jaxrl.run.step_source import Advance
from jaxrl.run.summary import feature_status, run_summary
from jaxrl.run.train_step import make_train_step


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


def host_ints(updates: Any, streaks: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-member update counts and non-finite streaks as int arrays ``[R]``."""
    return np.atleast_1d(updates).astype(int), np.atleast_1d(streaks).astype(int)


def member_rows(metrics: dict, count: int) -> list[dict[str, float]]:
    """Per member ``{tag: float}`` from the chunk's metrics (``[R]`` leaves when R > 1)."""
    if count == 1:
        return [chunk_scalars(metrics)]
    return [chunk_scalars({tag: value[i] for tag, value in metrics.items()}) for i in range(count)]


def check_resume_devices(setup: Setup, saved: int | None) -> None:
    """Refuse to resume on another device count a run whose env groups are per device.

    Opponent groups (self-play), evaluation lanes and curriculum replay envs are laid out in
    every device's slice of the env batch, so on another device count the saved env states
    would land in other groups. Runs with one kind of env resume on any device count, and
    evaluation always works.
    """
    layout = setup.layout  # grouped: opponent groups, evaluation lanes, curriculum replay
    if saved is None or saved == layout.devices or not layout.grouped:
        return
    raise TrainingError(
        f"this run was trained on {saved} devices with env groups (self-play, evaluation lanes "
        "or curriculum replay) "
        f"laid out per device; resume it on {saved} devices (mesh.devices={saved}), not "
        f"{layout.devices} (evaluation restores on any device count)"
    )


@dataclasses.dataclass
class ChunkSource:
    """Compiled chunks of a JAX-env run (a :class:`jaxrl.run.step_source.StepSource`)."""

    setup: Setup
    step_fn: Callable | None = None  # the compiled chunk step, after start()

    @property
    def members(self) -> Members:
        """The run's members (vmapped in one program)."""
        return self.setup.members

    @property
    def devices(self) -> int:
        """Devices of the mesh (the env batch is sharded over them)."""
        return self.setup.layout.devices

    def check_resume(self, devices: int | None) -> None:
        """:func:`check_resume_devices`."""
        check_resume_devices(self.setup, devices)

    def summary(self, run_dir: Path, start: int, runner: RunnerState) -> str:
        """:func:`jaxrl.run.summary.run_summary`."""
        return run_summary(self.setup.config, self.setup, run_dir, start, runner.features)

    def start(self, runner: RunnerState) -> float:
        """Compile the chunk step for ``runner``'s shapes; the seconds it took."""
        t0 = time.perf_counter()
        self.step_fn = _compile(self.setup, runner)
        return time.perf_counter() - t0

    def advance(self, runner: RunnerState) -> Advance:
        """One compiled chunk, its metrics on the host."""
        t0 = time.perf_counter()
        runner, metrics, updates, streaks = _run_chunk(self.step_fn, runner)
        seconds = time.perf_counter() - t0
        updates, streaks = host_ints(updates, streaks)
        rows = member_rows(metrics, self.setup.members.count)
        return Advance(runner, rows, updates, streaks, seconds)

    def status(self, rows: list[dict[str, float]]) -> str:
        """:func:`jaxrl.run.summary.feature_status`."""
        return feature_status(self.setup, rows)

    def close(self) -> None:
        """Nothing runs between chunks."""


def build_chunk_source(config: Config) -> tuple[ChunkSource, RunnerState]:
    """The source and the initial runner state of a JAX-env run (compiles the init)."""
    setup, runner = _build(config)
    return ChunkSource(setup), runner
