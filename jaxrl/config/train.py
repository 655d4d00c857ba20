"""``train:`` length of training and the host loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jaxrl.config.errors import require

if TYPE_CHECKING:
    from jaxrl.config.root import Config


@dataclass(frozen=True)
class TrainConfig:
    """Length of training and the host loop."""

    total_steps: int = 500_000  # env steps summed over envs (one decision of each env's agents)
    updates_per_chunk: int = 32  # updates per compiled call; the host sees metrics between
    max_nonfinite_updates: int = 10  # stop after this many non-finite updates in a row
    progress_bar: bool = True  # tqdm progress bar on stderr
    num_seeds: int = 1  # independent runs (seeds seed .. seed+N-1) vmapped in one program


def validate(config: Config) -> None:
    """Values of ``train:``; the run must hold at least one batch."""
    train = config.train
    require(
        train.total_steps >= config.batch_size,
        f"train.total_steps ({train.total_steps}) is smaller than one batch "
        f"({config.batch_size} = env.num_envs x ppo.num_steps)",
    )
    require(
        train.updates_per_chunk >= 1,
        f"train.updates_per_chunk must be >= 1, got {train.updates_per_chunk}",
    )
    require(
        train.max_nonfinite_updates >= 1,
        f"train.max_nonfinite_updates must be >= 1, got {train.max_nonfinite_updates}",
    )
    require(train.num_seeds >= 1, f"train.num_seeds must be >= 1, got {train.num_seeds}")
