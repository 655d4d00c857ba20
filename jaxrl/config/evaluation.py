"""``evaluation:`` in-graph evaluation lanes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jaxrl.config.errors import apply_env_overrides, require

if TYPE_CHECKING:
    from jaxrl.config.env import BuiltEnv
    from jaxrl.config.root import Config


@dataclass(frozen=True)
class EvalLaneConfig:
    """One evaluation lane: envs that measure the learner and never train it."""

    name: str = ""  # logged as eval/<name>/win, .../elo, ...
    envs: int = 8  # envs in the lane
    env: dict[str, Any] = field(default_factory=dict)  # EnvParams overrides over env.kwargs


@dataclass(frozen=True)
class EvaluationConfig:
    """In-graph evaluation lanes (none by default)."""

    lanes: tuple[EvalLaneConfig, ...] = ()  # e.g. the RulePolicy at each team size
    every_updates: int = 10  # report (and restart) each lane's counts every N updates
    deterministic: bool = True  # lanes play the mode of the policy


def validate(config: Config) -> None:
    """Values of ``evaluation:``: lane names, sizes and the reporting period."""
    ev = config.evaluation
    require(ev.every_updates >= 1, f"evaluation.every_updates must be >= 1, got {ev.every_updates}")
    names = [lane.name for lane in ev.lanes]
    for i, lane in enumerate(ev.lanes):
        where = f"evaluation.lanes[{i}]"
        require(
            re.fullmatch(r"[A-Za-z0-9_]+", lane.name) is not None,
            f"{where}.name must be letters, digits or _, got {lane.name!r}",
        )
        require(names.count(lane.name) == 1, f"{where}.name {lane.name!r} is used twice")
        require(lane.envs >= 1, f"{where}.envs must be >= 1, got {lane.envs}")


def validate_env(config: Config, built: BuiltEnv) -> None:
    """Each lane's ``env`` overrides fit the run's params (array leaves only, like stages)."""
    for i, lane in enumerate(config.evaluation.lanes):
        apply_env_overrides(f"evaluation.lanes[{i}].env", lane.env, built.params)
