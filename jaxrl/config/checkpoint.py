"""``checkpoint:`` Orbax checkpointing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jaxrl.config.errors import require

if TYPE_CHECKING:
    from jaxrl.config.root import Config


@dataclass(frozen=True)
class CheckpointConfig:
    """Orbax checkpointing."""

    every_updates: int = 100  # save at the first chunk end after every N updates; 0: end only
    keep: int = 3  # keep the last k checkpoints


def validate(config: Config) -> None:
    """Values of ``checkpoint:``."""
    ckpt = config.checkpoint
    require(
        ckpt.every_updates >= 0,
        f"checkpoint.every_updates must be >= 0, got {ckpt.every_updates}",
    )
    require(ckpt.keep >= 1, f"checkpoint.keep must be >= 1, got {ckpt.keep}")
