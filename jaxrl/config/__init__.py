"""The one typed, frozen run configuration.

YAML files in ``configs/`` map 1:1 onto :class:`Config`. :func:`load_config` reads a file,
applies ``section.key=value`` overrides, rejects unknown keys, wrong types and impossible
values with a one-line :class:`ConfigError` naming the key, and never writes back:
derived sizes are properties.

Layout (one module per section, each with its frozen dataclass and its own ``validate``):

- ``errors.py``: :class:`ConfigError` and the helpers every section uses (``require``).
- ``env.py``, ``network.py``, ``ppo.py``, ``train.py``, ``checkpoint.py``, ``curriculum.py``,
  ``selfplay.py``, ``evaluation.py``, ``sweep.py``, ``mesh.py``, ``logger.py``: the sections.
  ``validate(config)`` checks the section's own keys (and cross-section sizes it names, such
  as ``ppo.num_minibatches`` against the batch); an optional ``validate_env(config, built)``
  checks values against the run's env.
- ``root.py``: :class:`Config` (the sections as fields, the derived sizes), ``SECTIONS`` (the
  order of the checks) and :func:`validate`, the one place that builds the env, once
  (``env.build_env``: name registered, ``env.kwargs`` fit), and hands it to every
  ``validate_env``.
- ``loader.py``: YAML files, overrides, key and type checks (dacite); :func:`load_config`,
  :func:`config_from_dict`, :func:`save_config`.

Adding a section (e.g. ``league:``):

1. ``jaxrl/config/league.py``: ``@dataclass(frozen=True) class LeagueConfig`` (every field a
   one-line comment), ``def validate(config: Config) -> None`` using ``require(ok, message)``
   with messages that start with the key (``league.size must be >= 1, got 0``), and, only if
   a value depends on the env, ``def validate_env(config: Config, built: BuiltEnv) -> None``.
2. ``root.py``: a field ``league: LeagueConfig = field(default_factory=LeagueConfig)`` on
   :class:`Config`, and ``Section("league", league.validate[, league.validate_env])`` in
   ``SECTIONS``.
3. This file: re-export ``LeagueConfig``; a commented ``league:`` block in the configs that
   use it. The loader finds the new dataclasses and section by itself.
"""

from jaxrl.config.checkpoint import CheckpointConfig
from jaxrl.config.curriculum import (
    CURRICULUM_METRICS,
    SWITCHABLE,
    CurriculumConfig,
    StageConfig,
)
from jaxrl.config.env import BuiltEnv, EnvConfig, build_env
from jaxrl.config.errors import ConfigError
from jaxrl.config.evaluation import EvalLaneConfig, EvaluationConfig
from jaxrl.config.loader import (
    config_from_dict,
    load_config,
    load_run_config,
    parse_overrides,
    save_config,
)
from jaxrl.config.logger import WANDB_MODES, LoggerConfig, WandbConfig
from jaxrl.config.mesh import MeshConfig, mesh_size
from jaxrl.config.network import ACTIVATIONS, CORES, NetworkConfig
from jaxrl.config.pbt import BoundsConfig, PBTConfig
from jaxrl.config.ppo import PPOConfig
from jaxrl.config.root import PRECISIONS, SECTIONS, Config, Section, validate
from jaxrl.config.selfplay import PFSP, SIDES, SelfPlayConfig
from jaxrl.config.sweep import SWEEPABLE
from jaxrl.config.train import TrainConfig

__all__ = [
    "ACTIVATIONS",
    "CORES",
    "CURRICULUM_METRICS",
    "PFSP",
    "PRECISIONS",
    "SECTIONS",
    "SIDES",
    "SWEEPABLE",
    "SWITCHABLE",
    "WANDB_MODES",
    "BoundsConfig",
    "BuiltEnv",
    "CheckpointConfig",
    "Config",
    "ConfigError",
    "CurriculumConfig",
    "EnvConfig",
    "EvalLaneConfig",
    "EvaluationConfig",
    "LoggerConfig",
    "MeshConfig",
    "NetworkConfig",
    "PBTConfig",
    "PPOConfig",
    "Section",
    "SelfPlayConfig",
    "StageConfig",
    "TrainConfig",
    "WandbConfig",
    "build_env",
    "config_from_dict",
    "load_config",
    "load_run_config",
    "mesh_size",
    "parse_overrides",
    "save_config",
    "validate",
]
