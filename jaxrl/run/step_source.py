"""What the run driver (:mod:`jaxrl.run.driver`) runs: a step source behind a small Protocol.

Two sources exist: the compiled chunk of a JAX env (:class:`jaxrl.run.chunk_source.ChunkSource`)
and the actor + learner of a host env (:class:`jaxrl.hostenv.source.HostSource`,
``env.backend: gymnasium | envpool``). The driver owns everything around a step: logging,
checkpoint cadence and the refusal to save non-finite params, signals, resume, the progress
bar, the summary and the ``done:`` line. A source only builds, steps and describes its run.
Imports no JAX (the sources do).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from jaxrl.core.hyper import Members
    from jaxrl.core.types import RunnerState


@dataclasses.dataclass(frozen=True)
class Advance:
    """What one step of a source did (host values, read after the step finished)."""

    runner: RunnerState  # the runner state after the step
    rows: list[dict[str, float]]  # per member: the step's scalars (perf/sps is the driver's)
    updates: np.ndarray  # [R] int, updates each member has done after the step
    streaks: np.ndarray  # [R] int, each member's non-finite updates in a row
    seconds: float  # wall seconds of the step (perf/sps = new env steps / seconds)
    compile_s: float = 0.0  # seconds of it spent compiling (a host run's first update)


class StepSource(Protocol):
    """A run's steps: a compiled chunk of updates, or one host update (actor + learner)."""

    @property
    def members(self) -> Members:
        """The run's members (one logger and one row each)."""

    @property
    def devices(self) -> int:
        """The device count written with each checkpoint (checked on resume)."""

    def check_resume(self, devices: int | None) -> None:
        """Refuse to resume a checkpoint written on ``devices`` devices if it cannot."""

    def summary(self, run_dir: Path, start: int, runner: RunnerState) -> str:
        """The lines printed before training (``run_dir`` the run's, ``start`` its update)."""

    def start(self, runner: RunnerState) -> float:
        """Get ready to step from ``runner`` (compile, start envs); seconds spent compiling."""

    def advance(self, runner: RunnerState) -> Advance:
        """One step from ``runner`` (run on the driver's worker thread)."""

    def status(self, rows: list[dict[str, float]]) -> str:
        """The features' status after a step (stage, self-play), or ``""``."""

    def close(self) -> None:
        """Stop what :meth:`start` started (threads, envs)."""
