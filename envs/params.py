"""Dotted paths into env params: the one place that walks ``EnvParams`` by field name.

Env params are (nested) ``flax.struct`` dataclasses; a field that is itself a struct (Soccer's
``reward``) is addressed as ``reward.touch`` on the command line and as a nested mapping in
YAML. Everything that reads, replaces or checks such paths lives here: overrides
(:func:`override_params`, :func:`nest_dotted`, :func:`flatten`), single leaves
(:func:`get_path`, :func:`replace_path`) and config validation (:func:`check_overrides`).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

import numpy as np


def is_struct(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def override_params(params: Any, overrides: Mapping[str, Any], prefix: str = "") -> Any:
    """``params`` with fields replaced; a mapping given for a struct field replaces its fields.

    ``override_params(p, {"max_steps": 200, "reward": {"touch": 0.1}})`` sets ``p.max_steps``
    and ``p.reward.touch`` and keeps every other field of ``p.reward``, at any depth.

    Args:
      params: a dataclass pytree (``flax.struct``), e.g. an env's ``EnvParams``.
      overrides: field name -> new value, or -> a mapping of overrides for a struct field.
      prefix: dotted path of ``params`` inside the outer params, for error messages.

    Returns:
      The new params (``params`` is not modified).

    Raises:
      ValueError: an unknown field, a mapping for a non-struct field or a scalar for a struct
        field, named by its dotted path.
    """
    fields = {f.name for f in dataclasses.fields(params)}
    changes = {}
    for key, value in overrides.items():
        path = f"{prefix}{key}"
        if key not in fields:
            raise ValueError(f"no parameter {path!r}; known: {', '.join(sorted(fields))}")
        current = getattr(params, key)
        if isinstance(value, Mapping):
            if not is_struct(current):
                raise ValueError(f"parameter {path!r} is not a struct: got a mapping {value!r}")
            value = override_params(current, value, f"{path}.")
        elif is_struct(current) and not isinstance(value, type(current)):
            raise ValueError(
                f"parameter {path!r} is a {type(current).__name__}: give a mapping of its "
                f"fields, got {value!r}"
            )
        elif isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)  # an int for a float parameter (gravity=10) keeps it a float
        changes[key] = value
    return params.replace(**changes)


def nest_dotted(items: list[tuple[str, Any]]) -> dict[str, Any]:
    """Dotted override pairs as the nested mapping :func:`make` takes.

    ``[("reward.touch", 0.1), ("blue_size", 2)]`` -> ``{"reward": {"touch": 0.1}, "blue_size": 2}``.
    The nested form is what :func:`make` and :func:`override_params` take.

    Raises:
      ValueError: a key given both as a value and as a struct (``reward=1`` and ``reward.touch``).
    """
    nested: dict[str, Any] = {}
    for key, value in items:
        *heads, last = key.split(".")
        target = nested
        for head in heads:
            target = target.setdefault(head, {})
            if not isinstance(target, dict):
                raise ValueError(f"{key}: {head} is given both as a value and a mapping")
        if isinstance(target.get(last), dict):
            raise ValueError(f"{key}: {last} is given both as a value and a mapping")
        target[last] = value
    return nested


def flatten(overrides: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"reward": {"touch": 0.1}, "opponent_kind": 1}`` -> ``{"reward.touch": 0.1, ...}``."""
    flat = {}
    for key, value in overrides.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def get_path(params: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        params = getattr(params, name)
    return params


def replace_path(params: Any, dotted: str, value: Any) -> Any:
    """``params`` with the leaf at ``dotted`` (a path through struct fields) replaced."""
    head, _, rest = dotted.partition(".")
    if rest:
        value = replace_path(getattr(params, head), rest, value)
    return params.replace(**{head: value})


def check_overrides(where: str, overrides: Any, params: Any, *, staged: bool) -> None:
    """Check EnvParams overrides against ``params``, recursing into struct fields.

    A struct field (a dataclass, e.g. Soccer's ``reward``) takes a mapping of its own fields;
    any other field takes a value of its default's kind. ``staged``: curriculum overrides,
    which become array leaves gathered by the stage index, so a static field is refused.
    """
    if not isinstance(overrides, dict):
        raise ValueError(f"{where}: expected a mapping, got {overrides!r}")
    fields = {f.name: f for f in dataclasses.fields(params)}
    for key, value in overrides.items():
        path = f"{where}.{key}"
        if "." in str(key):  # dotted paths are for command-line overrides; YAML nests
            *heads, last = str(key).split(".")
            nested = f"{last}: ..."
            for head in reversed(heads):
                nested = f"{head}: {{{nested}}}"
            raise ValueError(f"{where}: dotted key {key!r} in a mapping; write {nested}")
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            if close:
                hint = f" (did you mean {where}.{close[0]}?)"
            else:
                hint = f" (known: {', '.join(sorted(fields))})"
            raise ValueError(f"unknown env parameter {path}{hint}")
        if staged and not fields[key].metadata.get("pytree_node", True):
            raise ValueError(
                f"{path}: static field (pytree_node=False) of {type(params).__name__}, it "
                f"cannot change between curriculum stages; set it in env.kwargs"
            )
        default = getattr(params, key)
        if dataclasses.is_dataclass(default) and not isinstance(default, type):
            if not isinstance(value, dict):
                raise ValueError(
                    f"{path}: expected a mapping of {type(default).__name__} fields, got {value!r}"
                )
            check_overrides(path, value, default, staged=staged)
        elif isinstance(value, dict):
            raise ValueError(f"{path}: not a struct, expected a single value, got {value!r}")
        elif staged and not (isinstance(default, (bool, int, float)) or hasattr(default, "dtype")):
            raise ValueError(
                f"{path}: a {type(default).__name__} parameter cannot change between curriculum "
                f"stages (only numbers and bools stack into per-stage arrays)"
            )
        else:
            _check_value(path, value, default)


def _check_value(key: str, value: Any, default: Any) -> None:
    """An env parameter override must have the kind of value its default has."""
    shape = tuple(getattr(default, "shape", ()))
    if shape:  # an array parameter takes a (nested) list of numbers of its shape
        try:
            array = np.asarray(value)
        except ValueError:
            array = None
        if array is None or array.shape != shape or array.dtype.kind not in "biuf":
            raise ValueError(
                f"{key}: expected a list of numbers of shape {list(shape)}, got {value!r}"
            )
        if str(default.dtype) != "bool" and array.dtype.kind == "b":
            raise ValueError(f"{key}: expected numbers, got {value!r}")
        return
    if isinstance(default, bool) or str(getattr(default, "dtype", "")) == "bool":
        ok = isinstance(value, bool)
        kind = "bool"
    elif isinstance(default, int) or "int" in str(getattr(default, "dtype", "")):
        ok = isinstance(value, int) and not isinstance(value, bool)
        kind = "int"
    elif isinstance(default, float) or "float" in str(getattr(default, "dtype", "")):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        kind = "number"
    else:
        return  # arrays or other structures: checked by the env itself
    if not ok:
        raise ValueError(f"{key}: expected {kind}, got {value!r}")
