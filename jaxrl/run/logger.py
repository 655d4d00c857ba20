"""Scalars written by the host between compiled chunks: TensorBoard (tensorboardX), and
optionally Weights & Biases (``logger.wandb`` in the config)."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path
from typing import Any

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


class WandbLogger:
    """The same scalars as :class:`Logger`, to one W&B run (one per member, like TensorBoard).

    The x axis is ``env_steps`` (as TensorBoard's step), declared as the step metric of every
    scalar, so a resumed run, whose first chunk repeats env steps W&B already saw, still logs.
    The run id is kept in ``RUN_DIR/wandb_ids.json``, so ``--resume`` continues the same run.
    """

    def __init__(
        self,
        run_dir: str | Path,
        member: str,
        project: str,
        mode: str,
        config: dict[str, Any],
    ):
        import wandb  # noqa: PLC0415 - an optional extra: pip install '.[wandb]'

        run_dir = Path(run_dir)
        ids_path = run_dir / "wandb_ids.json"
        ids = json.loads(ids_path.read_text()) if ids_path.is_file() else {}
        key = member or "run"
        if key not in ids:
            ids[key] = uuid.uuid4().hex[:12]  # W&B run ids: [a-z0-9]
            ids_path.write_text(json.dumps(ids, indent=1))
        self.run = wandb.init(
            project=project,
            mode=mode,
            dir=str(run_dir),
            id=ids[key],
            resume="allow",
            name=f"{run_dir.name}/{member}" if member else run_dir.name,
            group=run_dir.name,
            config=config,
            reinit="create_new",  # several members: several runs open in one process
        )
        self.run.define_metric("env_steps")
        self.run.define_metric("*", step_metric="env_steps")

    def scalars(self, step: int, values: dict[str, float]) -> None:
        """Log ``{tag: value}`` at ``env_steps = step``; NaNs are skipped as in TensorBoard."""
        row = {tag: value for tag, value in values.items() if not math.isnan(value)}
        self.run.log({"env_steps": step, **row})

    def close(self) -> None:
        """Finish the run (offline: its files under ``RUN_DIR/wandb`` are complete)."""
        self.run.finish()


class Loggers:
    """Several loggers behind the one interface (TensorBoard, then W&B)."""

    def __init__(self, *loggers: Any):
        self.loggers = loggers

    def scalars(self, step: int, values: dict[str, float]) -> None:
        """Log to each."""
        for logger in self.loggers:
            logger.scalars(step, values)

    def close(self) -> None:
        """Close each."""
        for logger in self.loggers:
            logger.close()


def wandb_teardown() -> None:
    """Shut the process's W&B service down once its runs are finished.

    A finished offline run's ``.wandb`` file can still sit in the service's write buffer when
    ``run.finish()`` returns (seen once in CI: a two-member run's file held no history row
    yet); the teardown waits for the service, so the files are complete on disk when training
    returns. It also finishes any other W&B run of the process left open.
    """
    import wandb  # noqa: PLC0415 - only called after WandbLogger, which imported it

    wandb.teardown()


def wandb_available() -> bool:
    """Whether the optional ``wandb`` package is installed."""
    import importlib.util  # noqa: PLC0415

    return importlib.util.find_spec("wandb") is not None
