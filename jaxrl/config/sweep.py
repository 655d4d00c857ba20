"""``sweep:`` hyperparameter lists trained together (``{ppo.lr: [1e-4, 3e-4]}``, zipped).

Env parameters sweep too: ``env.kwargs.<path>`` of a numeric scalar array leaf
(``{env.kwargs.reward.touch: [0.0, 0.05, 0.2]}``), checked against the env by ``validate_env``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from jaxrl.config.errors import ConfigError, require, suggest
from jaxrl.config.ppo import MEMBER_VALUES

if TYPE_CHECKING:
    from jaxrl.config.env import BuiltEnv
    from jaxrl.config.root import Config

ENV_PREFIX = "env.kwargs."  # env parameters sweep as env.kwargs.<path> (checked by validate_env)

# Hyperparameters a sweep may vary (traced: no recompile per value) -> Hyper field: the PPO
# member values (jaxrl.config.ppo.member_value), each with the rule of its ppo field.
SWEEPABLE = {f"ppo.{name}": name for name in MEMBER_VALUES}
_SWEEP_RULES = {f"ppo.{name}": rule for name, rule in MEMBER_VALUES.items()}


def validate(config: Config) -> None:
    """Sweepable keys, valid values, and lists of one length."""
    lengths = set()
    for key, values in config.sweep.items():
        require(
            key in SWEEPABLE or str(key).startswith(ENV_PREFIX),
            f"sweep: {key!r} cannot be swept (sweepable: {', '.join(SWEEPABLE)}, or an env "
            f"parameter as {ENV_PREFIX}<parameter>)" + suggest(str(key), list(SWEEPABLE)),
        )
        require(
            isinstance(values, (list, tuple)) and len(values) >= 1,
            f"sweep.{key}: expected a non-empty list of numbers, got {values!r}",
        )
        for value in values:
            require(
                isinstance(value, (int, float)) and not isinstance(value, bool),
                f"sweep.{key}: expected numbers, got {value!r}",
            )
            if key in SWEEPABLE:
                rule, text = _SWEEP_RULES[key]
                require(rule(float(value)), f"sweep.{key}: every value must be {text}, got {value}")
        lengths.add(len(values))
    require(
        len(lengths) <= 1,
        "sweep: every list must have the same length (values are zipped), got lengths "
        f"{sorted(lengths)}",
    )


def validate_env(config: Config, built: BuiltEnv) -> None:
    """Swept env parameters: numeric scalar array leaves, values that fit them, not staged."""
    keys = [key for key in config.sweep if str(key).startswith(ENV_PREFIX)]
    for key in keys:
        values = config.sweep[key]
        if isinstance(values, (list, tuple)):  # else validate reports it
            member_kind(f"sweep.{key}", key, list(values), built.params)
    check_not_staged(config, keys, "sweep")


def member_kind(where: str, key: str, values: list[float], env_params: Any) -> str:
    """The kind (``float``, ``int`` or ``bool``) of ``key``, with ``values`` allowed for it.

    Raises:
      ConfigError: ``key`` cannot vary per member, or a value does not fit it; the message
        starts with ``where``.
    """
    if key in SWEEPABLE:
        rule, text = _SWEEP_RULES[key]
        for value in values:
            require(rule(float(value)), f"{where}: every value must be {text}, got {value}")
        return "float"
    if key.startswith(ENV_PREFIX):
        from jaxrl.envs.params import check_leaf_values  # noqa: PLC0415 - envs imports gymnax

        try:
            kind = check_env_values(key, values, env_params)
        except ValueError as err:
            raise ConfigError(f"{where}: {str(err).removeprefix(f'{key}: ')}") from None
        try:  # the env's declared domain (jaxrl.envs.domains), as for env.kwargs
            shown = [int(v) for v in values] if kind == "int" else values  # 7, not 7.0
            check_leaf_values(where, key[len(ENV_PREFIX) :], shown, env_params)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        return kind
    raise ConfigError(
        f"{where}: {key!r} cannot vary per member (one of {', '.join(SWEEPABLE)}, or an env "
        f"parameter as {ENV_PREFIX}<parameter>)" + suggest(key, list(SWEEPABLE))
    )


def check_not_staged(config: Config, keys: list[str], where: str) -> None:
    """Env keys that vary per member must not be set by a curriculum stage as well (a stage's
    value would overwrite the member's)."""
    from jaxrl.envs.params import flatten  # noqa: PLC0415 - envs imports gymnax (a backend)

    staged = {path for stage in config.curriculum.stages for path in flatten(stage.env)}
    for key in keys:
        path = key[len(ENV_PREFIX) :]
        require(
            not key.startswith(ENV_PREFIX) or path not in staged,
            f"{where}: {key} varies per member and a curriculum stage sets {path} too; "
            "vary it in one place",
        )


def env_leaf_kind(key: str, env_params: Any) -> str:
    """The kind (``float``, ``int`` or ``bool``) of the env parameter ``key`` names.

    Raises:
      ValueError: (one line, naming ``key``) not an ``env.kwargs.`` key, no such parameter, a
        struct, a static field (``pytree_node=False``), or not a numeric scalar.
    """
    if not key.startswith(ENV_PREFIX):
        raise ValueError(f"{key}: env parameters are given as {ENV_PREFIX}<parameter>")
    path = key[len(ENV_PREFIX) :]
    node = env_params
    for name in path.split("."):
        if not (dataclasses.is_dataclass(node) and not isinstance(node, type)):
            raise ValueError(f"{key}: {type(node).__name__} has no parameter {name!r}")
        fields = {f.name: f for f in dataclasses.fields(node)}
        if name not in fields:
            raise ValueError(
                f"{key}: no parameter {name!r} in {type(node).__name__} "
                f"(known: {', '.join(sorted(fields))})"
            )
        if not fields[name].metadata.get("pytree_node", True):
            raise ValueError(
                f"{key}: static field (pytree_node=False) of {type(node).__name__}; it shapes "
                "the compiled program and cannot differ between members"
            )
        node = getattr(node, name)
    if dataclasses.is_dataclass(node):
        raise ValueError(f"{key}: a struct; name one of its fields ({key}.<field>)")
    dtype = np.asarray(node).dtype
    if np.shape(node) != () or dtype.kind not in "biuf":
        raise ValueError(
            f"{key}: only numeric scalar parameters vary per member, got {type(node).__name__} "
            f"of shape {list(np.shape(node))}"
        )
    return {"b": "bool", "i": "int", "u": "int", "f": "float"}[dtype.kind]


def check_env_values(key: str, values: list[float], env_params: Any) -> str:
    """The kind of the env parameter ``key`` (:func:`env_leaf_kind`), with ``values`` checked
    to cast to it without loss: 0 or 1 for a bool, whole numbers for an int.

    Raises:
      ValueError: one line naming ``key``.
    """
    kind = env_leaf_kind(key, env_params)
    for value in values:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"{key}: expected numbers, got {value!r}")
        if kind == "bool" and value not in (0, 1):
            raise ValueError(f"{key}: a bool parameter takes 0 or 1, got {value}")
        if kind == "int" and float(value) % 1:
            raise ValueError(f"{key}: an int parameter takes whole numbers, got {value}")
        if kind == "float" and not np.isfinite(value):
            raise ValueError(f"{key}: expected finite numbers, got {value}")
    return kind
