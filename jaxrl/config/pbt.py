"""``pbt:`` population-based training over the members (the compiled part:
``jaxrl/features/pbt.py``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jaxrl.config.errors import require
from jaxrl.config.sweep import check_not_staged, member_kind

if TYPE_CHECKING:
    from jaxrl.config.env import BuiltEnv
    from jaxrl.config.root import Config

SMOOTHINGS = ("ema", "window")
EXPLORES = ("perturb", "resample")


@dataclass(frozen=True)
class BoundsConfig:
    """The range PBT keeps one hyperparameter in."""

    min: float = 0.0  # lowest value a perturbation or a resample may give
    max: float = 1.0  # highest value
    log: bool = False  # resample log-uniformly in [min, max] (learning rates); needs min > 0
    values: tuple[float, ...] = ()  # a grid: perturb steps to a neighbour, resample draws one


@dataclass(frozen=True)
class PBTConfig:
    """Population-based training over the members (off while ``every_updates`` is 0)."""

    every_updates: int = 0  # exploit and explore every N updates; 0: PBT off
    # No event before this update: until then every member trains as in the grid sweep, so a
    # slow starter (the grid's eventual best, found on Breakout seed 2) is not copied over
    # while the returns are far apart (Ray Tune's burn_in_period). 0: from the first event.
    burn_in_updates: int = 0
    metric: tuple[str, ...] = ("rollout/episode_return",)  # tags ranked on, first decides first
    smoothing: str = "ema"  # ema | window: how each member's per-update values are smoothed
    ema_decay: float = 0.9  # ema: weight of the past at each update that reports the metric
    window: int = 8  # window: mean of the last N reported values
    fraction: float = 0.25  # the bottom fraction of the members copies the top fraction
    # A bottom member copies its drawn parent only when the parent is clearly ahead: at the
    # first ranking tag where their smoothed values differ by more than its gap, the parent's
    # is the higher. One gap per tag of `metric`; empty: always copy (truncation selection).
    min_gap: tuple[float, ...] = ()
    # Or relative to the noise: the gap of a tag is also at least min_gap_se[k] standard
    # errors of the difference, sqrt(se_parent^2 + se_child^2), each member's standard error
    # of its smoothed value (window: the sample's; ema: from the EMA of squares and its
    # effective count). 2 is close to Jaderberg et al.'s Welch t-test at p = 0.05.
    min_gap_se: tuple[float, ...] = ()
    explore: str = "perturb"  # perturb: scale by a factor (or step a grid); resample: draw anew
    factors: tuple[float, ...] = (0.8, 1.25)  # perturb: one factor drawn uniformly per value
    resample_probability: float = 0.0  # perturb: chance that a value is resampled instead
    hyperparameters: dict[str, BoundsConfig] = field(default_factory=dict)  # explored: bounds

    @property
    def enabled(self) -> bool:
        """PBT is configured."""
        return self.every_updates > 0

    @property
    def keys(self) -> tuple[str, ...]:
        """Config keys of the explored values (``ppo.lr``, ``env.kwargs.reward.touch``)."""
        return tuple(self.hyperparameters)

    @property
    def first_event(self) -> int:
        """The first update PBT fires at: a multiple of ``every_updates``, past the burn-in."""
        every = self.every_updates
        return max(every, -(-self.burn_in_updates // every) * every)

    def selected(self, num_members: int) -> int:
        """Members in the bottom (and in the top) quantile: ``int(R * fraction)``."""
        return int(num_members * self.fraction)

    def validate(self, num_members: int, num_updates: int, sweep: dict) -> None:
        """The section's own values against the run's size; :class:`ConfigError` on the first.

        Args:
          num_members: ``R``, the members trained together.
          num_updates: updates in the whole run.
          sweep: the config's ``sweep`` (swept values must lie in an explored key's bounds).
        """
        require(
            self.every_updates >= 0, f"pbt.every_updates must be >= 0, got {self.every_updates}"
        )
        if not self.enabled:
            return
        self._validate_schedule(num_members, num_updates)
        self._validate_ranking()
        self._validate_explore()
        self._validate_bounds(sweep)

    def _validate_schedule(self, num_members: int, num_updates: int) -> None:
        """Members, quantiles and when PBT fires."""
        require(
            num_members >= 2,
            f"pbt needs at least 2 members (train.num_seeds x sweep points), got {num_members}",
        )
        require(
            0 < self.fraction <= 0.5 and self.selected(num_members) >= 1,
            f"pbt.fraction must be in (0, 0.5] and leave at least one of the {num_members} "
            f"members in each quantile (int(R * fraction) >= 1), got {self.fraction}",
        )
        require(
            self.every_updates < num_updates,
            f"pbt.every_updates ({self.every_updates}) must be below the run's {num_updates} "
            "updates (PBT would never fire)",
        )
        require(
            self.burn_in_updates >= 0,
            f"pbt.burn_in_updates must be >= 0, got {self.burn_in_updates}",
        )
        require(
            self.first_event < num_updates,
            f"pbt.burn_in_updates ({self.burn_in_updates}) leaves no event in the run's "
            f"{num_updates} updates (the first would be at update {self.first_event})",
        )

    def _validate_ranking(self) -> None:
        """The ranking metrics, their gates and their smoothing."""
        require(
            len(self.metric) >= 1 and all(isinstance(t, str) and t for t in self.metric),
            f"pbt.metric must be a non-empty list of metric tags, got {list(self.metric)}",
        )
        require(
            len(self.min_gap) in (0, len(self.metric))
            and all(math.isfinite(g) and g >= 0 for g in self.min_gap),
            f"pbt.min_gap must be empty or one finite gap >= 0 per pbt.metric tag "
            f"({len(self.metric)}), got {list(self.min_gap)}",
        )
        require(
            len(self.min_gap_se) in (0, len(self.metric))
            and all(math.isfinite(g) and g >= 0 for g in self.min_gap_se),
            f"pbt.min_gap_se must be empty or one finite number >= 0 per pbt.metric tag "
            f"({len(self.metric)}), got {list(self.min_gap_se)}",
        )
        require(
            self.smoothing in SMOOTHINGS,
            f"pbt.smoothing must be one of {', '.join(SMOOTHINGS)}, got {self.smoothing!r}",
        )
        require(0 <= self.ema_decay < 1, f"pbt.ema_decay must be in [0, 1), got {self.ema_decay}")
        require(self.window >= 1, f"pbt.window must be >= 1, got {self.window}")

    def _validate_explore(self) -> None:
        """How a child explores, and what."""
        require(
            self.explore in EXPLORES,
            f"pbt.explore must be one of {', '.join(EXPLORES)}, got {self.explore!r}",
        )
        require(
            len(self.factors) >= 1 and all(0 < f < math.inf for f in self.factors),
            f"pbt.factors must be a non-empty list of finite numbers > 0, got {list(self.factors)}",
        )
        require(
            0 <= self.resample_probability <= 1,
            f"pbt.resample_probability must be in [0, 1], got {self.resample_probability}",
        )
        require(
            len(self.hyperparameters) >= 1,
            "pbt.hyperparameters: name at least one hyperparameter to explore, e.g. "
            "{ppo.lr: {min: 1e-5, max: 1e-2, log: true}}",
        )

    def _validate_bounds(self, sweep: dict) -> None:
        """Each explored key's bounds, with its grid and swept values inside them."""
        for key, bounds in self.hyperparameters.items():
            where = f"pbt.hyperparameters.{key}"
            low, high = bounds.min, bounds.max
            require(
                math.isfinite(low) and math.isfinite(high) and low <= high,
                f"{where}: expected finite min <= max, got min {low}, max {high}",
            )
            require(not bounds.log or low > 0, f"{where}: log needs min > 0, got {low}")
            outside = [v for v in (*bounds.values, *sweep.get(key, ())) if not low <= v <= high]
            require(
                not outside,
                f"{where}: values and swept values must lie in [{low}, {high}]: {outside}",
            )


def validate(config: Config) -> None:
    """The ``pbt:`` values against the number of members and updates."""
    config.pbt.validate(config.num_members, config.num_updates, config.sweep)


def validate_env(config: Config, built: BuiltEnv) -> None:
    """Each explored key varies per member (a PPO hyperparameter or a numeric scalar env
    leaf) and its bounds fit it; int and bool parameters explore along a grid."""
    pbt = config.pbt
    if not pbt.enabled:
        return
    for key, bounds in pbt.hyperparameters.items():
        where = f"pbt.hyperparameters.{key}"
        kind = member_kind(where, key, [bounds.min, bounds.max, *bounds.values], built.params)
        require(
            kind == "float" or len(bounds.values) >= 2,
            f"{where}: a{'n' if kind == 'int' else ''} {kind} parameter is explored along a "
            "grid: give values (at least 2)",
        )
    check_not_staged(config, list(pbt.keys), "pbt.hyperparameters")
