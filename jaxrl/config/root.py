"""The whole run's :class:`Config`, its derived sizes, its sections and :func:`validate`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from jaxrl.config import (
    checkpoint,
    curriculum,
    env,
    evaluation,
    logger,
    mesh,
    network,
    pbt,
    ppo,
    selfplay,
    sweep,
    train,
)
from jaxrl.config.checkpoint import CheckpointConfig
from jaxrl.config.curriculum import CurriculumConfig
from jaxrl.config.env import BuiltEnv, EnvConfig, build_env
from jaxrl.config.errors import require
from jaxrl.config.evaluation import EvaluationConfig
from jaxrl.config.logger import LoggerConfig
from jaxrl.config.mesh import MeshConfig
from jaxrl.config.network import NetworkConfig
from jaxrl.config.pbt import PBTConfig
from jaxrl.config.ppo import PPOConfig
from jaxrl.config.selfplay import SelfPlayConfig
from jaxrl.config.train import TrainConfig

PRECISIONS = ("float32", "bfloat16", "auto")


@dataclass(frozen=True)
class Config:
    """A whole run."""

    seed: int = 0  # master seed; same seed, same bits
    precision: str = "float32"  # float32 | bfloat16 | auto (bf16 on GPU/TPU, f32 on CPU)
    env: EnvConfig = field(default_factory=EnvConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    sweep: dict[str, list[float]] = field(default_factory=dict)  # {ppo.lr: [1e-4, 3e-4]}
    pbt: PBTConfig = field(default_factory=PBTConfig)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)

    # ---- derived sizes -------------------------------------------------------------------
    @property
    def num_members(self) -> int:
        """Runs trained together: sweep points x seeds."""
        points = len(next(iter(self.sweep.values()))) if self.sweep else 1
        return points * self.train.num_seeds

    @property
    def batch_size(self) -> int:
        """Env steps per update: ``num_envs * num_steps`` (x actors per env transitions)."""
        return self.env.num_envs * self.ppo.num_steps

    @property
    def minibatch_size(self) -> int:
        """Transitions per minibatch."""
        return self.batch_size // self.ppo.num_minibatches

    @property
    def sequence_length(self) -> int:
        """Time steps per training sequence: 1 without a core (samples shuffle freely)."""
        if self.network.core == "none":
            return 1
        return self.ppo.sequence_length or self.ppo.num_steps

    @property
    def num_sequences(self) -> int:
        """Training sequences per update; minibatches shuffle whole sequences."""
        return self.batch_size // self.sequence_length

    @property
    def num_updates(self) -> int:
        """Updates in the whole run: ``total_steps // batch_size``."""
        return self.train.total_steps // self.batch_size

    @property
    def num_chunks(self) -> int:
        """Compiled calls in the whole run (the last may be partly idle)."""
        return -(-self.num_updates // self.chunk_updates)

    @property
    def chunk_updates(self) -> int:
        """Updates per compiled call, never more than the run has."""
        return min(self.train.updates_per_chunk, self.num_updates)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (tuples as lists), as written to ``config.yaml``."""
        return _plain(dataclasses.asdict(self))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class Section(NamedTuple):
    """One section's checks, run in this order by :func:`validate`.

    ``validate_env`` (optional) checks values against the run's env, built once; ``validate``
    checks the rest. Both raise :class:`ConfigError` on the first bad value.
    """

    name: str
    validate: Callable[[Config], None]
    validate_env: Callable[[Config, BuiltEnv], None] | None = None


def _validate_top(config: Config) -> None:
    require(
        config.precision in PRECISIONS,
        f"precision must be one of {', '.join(PRECISIONS)}, got {config.precision!r}",
    )


# In the order they are checked; the first bad value is reported.
SECTIONS = (
    Section("env", env.validate),
    Section("precision", _validate_top),
    Section("network", network.validate, network.validate_env),
    Section("ppo", ppo.validate),
    Section("train", train.validate),
    Section("checkpoint", checkpoint.validate),
    Section("curriculum", curriculum.validate, curriculum.validate_env),
    Section("logger", logger.validate),
    Section("mesh", mesh.validate, mesh.validate_env),
    Section("selfplay", selfplay.validate, selfplay.validate_env),
    Section("evaluation", evaluation.validate, evaluation.validate_env),
    Section("sweep", sweep.validate, sweep.validate_env),
    Section("pbt", pbt.validate, pbt.validate_env),
)


def validate(config: Config) -> None:
    """Check every section, in :data:`SECTIONS` order; raise :class:`ConfigError` on the first.

    Two passes: first each section's own values (pure Python: a typo or a bad value is
    reported before JAX, gymnax or an env is imported), then the env is built once (the name
    must be registered and ``env.kwargs`` must fit) and each section's env-dependent checks
    receive it.
    """
    for section in SECTIONS:
        section.validate(config)
    built = build_env(config)
    for section in SECTIONS:
        if section.validate_env is not None:
            section.validate_env(config, built)
