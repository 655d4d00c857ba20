"""``curriculum:`` stages switched inside the compiled step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jaxrl.config.errors import apply_env_overrides, require

if TYPE_CHECKING:
    from jaxrl.config.env import BuiltEnv
    from jaxrl.config.root import Config

SWITCHABLE = ("selfplay",)  # features a curriculum stage can switch on (off elsewhere)
CURRICULUM_METRICS = ("episode_return", "episode_length")


@dataclass(frozen=True)
class StageConfig:
    """One curriculum stage: env-param overrides and the rule that promotes out of it."""

    name: str = ""  # shown in logs
    env: dict[str, Any] = field(default_factory=dict)  # EnvParams overrides in this stage
    metric: str = "episode_return"  # update metric that promotes (see jaxrl/features/curriculum.py)
    threshold: float = 0.0  # promote when the window mean reaches this
    window: int = 10  # updates (with finished episodes) averaged
    min_updates: int = 0  # updates spent in the stage before promotion is possible
    max_updates: int = 0  # promote after N updates in the stage whatever the metric (0: no limit)
    features: dict[str, bool] = field(default_factory=dict)  # {selfplay: true} switches it on


@dataclass(frozen=True)
class CurriculumConfig:
    """Stages switched inside the compiled step (none by default)."""

    stages: tuple[StageConfig, ...] = ()  # in order; the last stage is never left
    replay: float = 0.0  # fraction of training envs kept on earlier stages (spread evenly)


def validate(config: Config) -> None:
    """Each stage's rule and features, and ``replay``."""
    for i, stage in enumerate(config.curriculum.stages):
        where = f"curriculum.stages[{i}]"
        require(
            stage.metric in CURRICULUM_METRICS or stage.metric.startswith("outcome/"),
            f"{where}.metric must be one of {', '.join(CURRICULUM_METRICS)} or "
            f"outcome/<name>, got {stage.metric!r}",
        )
        require(stage.window >= 1, f"{where}.window must be >= 1, got {stage.window}")
        require(
            stage.min_updates >= 0, f"{where}.min_updates must be >= 0, got {stage.min_updates}"
        )
        require(
            stage.max_updates == 0 or stage.max_updates >= max(stage.min_updates, 1),
            f"{where}.max_updates must be 0 (no limit) or >= min_updates "
            f"({stage.min_updates}), got {stage.max_updates}",
        )
        for name, on in stage.features.items():
            require(
                name in SWITCHABLE,
                f"{where}.features: unknown feature {name!r} (switchable: {', '.join(SWITCHABLE)})",
            )
            require(isinstance(on, bool), f"{where}.features.{name}: expected true or false")
            require(
                name != "selfplay" or config.selfplay.pool_size > 0,
                f"{where}.features.selfplay: self-play is not configured (selfplay.pool_size is 0)",
            )
    replay = config.curriculum.replay
    require(0.0 <= replay < 1.0, f"curriculum.replay must be in [0, 1), got {replay}")
    require(
        replay == 0.0 or len(config.curriculum.stages) >= 2,
        "curriculum.replay needs at least two curriculum.stages",
    )


def validate_env(config: Config, built: BuiltEnv) -> None:
    """Each stage's ``env`` overrides fit the run's params (array leaves only)."""
    for i, stage in enumerate(config.curriculum.stages):
        apply_env_overrides(f"curriculum.stages[{i}].env", stage.env, built.params)
