"""TensorBoard scalars (tensorboardX), written by the host between compiled chunks."""

from __future__ import annotations

import math
from pathlib import Path

from tensorboardX import SummaryWriter


def chunk_scalars(metrics: dict) -> dict[str, float]:
    """``{tag: float}`` of a chunk's (host-side) metrics, as declared by the train step."""
    return {tag: float(value) for tag, value in metrics.items()}


class Logger:
    """Writes scalars to ``RUN_DIR`` as TensorBoard event files."""

    def __init__(self, run_dir: str | Path):
        self.writer = SummaryWriter(logdir=str(run_dir))

    def scalars(self, step: int, values: dict[str, float]) -> None:
        """Log ``{tag: value}`` at ``step`` (env steps); NaNs (nothing to report) are skipped."""
        for tag, value in values.items():
            if not math.isnan(value):
                self.writer.add_scalar(tag, value, global_step=step)

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.flush()
        self.writer.close()


class NullLogger:
    """A logger that writes nothing (the processes other than 0 of a multi-process run)."""

    def scalars(self, step: int, values: dict[str, float]) -> None:
        """Drop the values."""

    def close(self) -> None:
        """Nothing to close."""
