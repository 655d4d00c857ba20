"""TensorBoard scalars (tensorboardX), written by the host between compiled chunks."""

from __future__ import annotations

import math
from pathlib import Path

from tensorboardX import SummaryWriter

from jaxrl.types import ChunkMetrics

# ChunkMetrics field -> TensorBoard tag.
TAGS = {
    "episode_return": "rollout/episode_return",
    "episode_length": "rollout/episode_length",
    "policy_loss": "train/policy_loss",
    "value_loss": "train/value_loss",
    "entropy": "train/entropy",
    "approx_kl": "train/approx_kl",
    "clip_fraction": "train/clip_fraction",
    "explained_variance": "train/explained_variance",
    "grad_norm": "train/grad_norm",
    "learning_rate": "train/learning_rate",
    "nonfinite_updates": "train/nonfinite_updates",
}
CURRICULUM_TAGS = {
    "curriculum_stage": "curriculum/stage",
    "curriculum_metric": "curriculum/metric",
    "curriculum_promotions": "curriculum/promotions",
}


def chunk_scalars(metrics: ChunkMetrics, curriculum: bool = False) -> dict[str, float]:
    """``{tag: value}`` of a chunk's (host-side) metrics; curriculum tags only with stages."""
    tags = {**TAGS, **CURRICULUM_TAGS} if curriculum else TAGS
    scalars = {tag: float(getattr(metrics, name)) for name, tag in tags.items()}
    for name, value in metrics.outcomes.items():
        scalars[f"rollout/outcome/{name}"] = float(value)
    return scalars


class Logger:
    """Writes scalars to ``RUN_DIR`` as TensorBoard event files."""

    def __init__(self, run_dir: str | Path):
        self.writer = SummaryWriter(logdir=str(run_dir))

    def scalars(self, step: int, values: dict[str, float]) -> None:
        """Log ``{tag: value}`` at ``step`` (env steps); NaNs (no episode ended) are skipped."""
        for tag, value in values.items():
            if not math.isnan(value):
                self.writer.add_scalar(tag, value, global_step=step)

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.flush()
        self.writer.close()
