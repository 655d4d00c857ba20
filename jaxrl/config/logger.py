"""``logger:`` where scalars go besides TensorBoard."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jaxrl.config.errors import require

if TYPE_CHECKING:
    from jaxrl.config.root import Config

WANDB_MODES = ("online", "offline")


@dataclass(frozen=True)
class WandbConfig:
    """Weights & Biases logging beside TensorBoard: off unless a project is named."""

    project: str = ""  # W&B project; "" = no W&B logging (needs pip install '.[wandb]')
    mode: str = "online"  # online | offline (kept in RUN_DIR/wandb; wandb sync later)


@dataclass(frozen=True)
class LoggerConfig:
    """Where scalars go besides TensorBoard (which is always written)."""

    wandb: WandbConfig = field(default_factory=WandbConfig)


def validate(config: Config) -> None:
    """Values of ``logger:``."""
    mode = config.logger.wandb.mode
    require(
        mode in WANDB_MODES,
        f"logger.wandb.mode must be one of {', '.join(WANDB_MODES)}, got {mode!r}",
    )
