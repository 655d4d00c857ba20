"""Dotted paths into env params: the one place that walks ``EnvParams`` by field name.

Env params are (nested) ``flax.struct`` dataclasses; a field that is itself a struct (Soccer's
``reward``) is addressed as ``reward.touch`` on the command line and as a nested mapping in
YAML. Everything that reads, replaces or checks such paths lives here: overrides
(:func:`override_params`, :func:`nest_dotted`, :func:`flatten`), single leaves
(:func:`get_path`, :func:`replace_path`) and config validation (:func:`check_overrides`).
Both :func:`override_params` and :func:`check_overrides` check a value against the domain its
field declares (:mod:`jaxrl.envs.domains`), so every way a value enters is checked.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from jaxrl.envs.domains import check_value, domain_of


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
      ValueError: an unknown field, a mapping for a non-struct field, a scalar for a struct
        field, or a value that does not cast to the field's dtype without loss
        (:func:`cast_value`), named by its dotted path.
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
        else:  # 1 for a bool leaf, 10 for a float one (gravity=10): the leaf keeps its dtype
            value = cast_value(path, value, current)
            check_value(path, value, domain_of(params, key))
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


def check_leaf_values(key: str, dotted: str, values: list[Any], params: Any) -> None:
    """Each of ``values`` must lie in the declared domain of the leaf at ``dotted``.

    For values that vary per member (sweeps, PBT bounds), whose kinds are checked elsewhere.

    Raises:
      ValueError: one line naming ``key``, the value and the domain.
    """
    head, _, last = dotted.rpartition(".")
    domain = domain_of(get_path(params, head) if head else params, last)
    for value in values:
        check_value(key, value, domain)


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
            _check_value(path, value, default, domain_of(params, key))


def _check_value(key: str, value: Any, default: Any, domain: Any) -> None:
    """An env parameter override must cast to its default's kind without loss, in its domain."""
    check_value(key, cast_value(key, value, default), domain)


def cast_value(key: str, value: Any, default: Any) -> Any:
    """``value`` cast to the kind of ``default``: a Python bool, int or float, or an array's
    dtype and shape. Only casts that lose nothing: ``1`` or ``0`` for a bool, ``2.0`` or
    ``"1e3"`` for an int, an int for a float (rounded to its float width, as any float is).

    Any other default (a string, a tuple, ...) takes ``value`` unchanged: the env checks it.

    Raises:
      ValueError: one line naming ``key``: ``2`` for a bool, ``0.5`` for an int, ``true`` for
        a number, a number out of an integer dtype's range, a list of another shape.
    """
    dtype = getattr(default, "dtype", None)
    if isinstance(default, bool):
        dtype = np.dtype(bool)
    elif isinstance(default, int):
        dtype = np.dtype(np.int64)
    elif isinstance(default, float):
        dtype = np.dtype(np.float64)
    elif dtype is None:
        return value
    dtype = np.dtype(dtype)
    shape = tuple(getattr(default, "shape", ()))
    kind = {"b": "bool", "i": "int", "u": "int", "f": "number"}.get(dtype.kind)
    if kind is None:
        return value
    array = _numbers(value)
    if shape:  # an array parameter takes a (nested) list of numbers of its shape
        if array is None or array.shape != shape:
            raise ValueError(
                f"{key}: expected a list of numbers of shape {list(shape)}, got {value!r}"
            )
    elif array is None or array.shape != ():
        raise ValueError(f"{key}: expected {kind}, got {value!r}")
    problem = _cast_loss(array, dtype)
    if problem:
        what = f"a list of {kind}s of shape {list(shape)}" if shape else kind
        raise ValueError(f"{key}: expected {what}, got {value!r} ({problem})")
    cast = array.astype(dtype)
    if not hasattr(default, "dtype"):  # a Python scalar stays one
        return {"b": bool, "i": int, "u": int, "f": float}[dtype.kind](cast.item())
    if isinstance(default, np.generic):
        return cast[()]  # a numpy scalar
    if isinstance(default, np.ndarray):
        return cast
    return jnp.asarray(cast)  # a jax array leaf stays a jax array


def _numbers(value: Any) -> np.ndarray | None:
    """``value`` as a bool or numeric array (strings such as "1e3" read as numbers), or None."""
    try:
        array = np.asarray(value)
    except ValueError:  # a ragged list
        return None
    if array.dtype.kind in "US":
        try:
            array = array.astype(np.float64)
        except ValueError:
            return None
    return array if array.dtype.kind in "biuf" else None


def _cast_loss(array: np.ndarray, dtype: np.dtype) -> str:
    """Why casting ``array`` to ``dtype`` would lose information ("" if it would not)."""
    if dtype.kind == "b":
        if array.dtype.kind != "b" and not np.isin(array, (0, 1)).all():
            return "a bool takes true/false, 1 or 0"
        return ""
    if array.dtype.kind == "b":
        return "a bool is not a number here"
    if dtype.kind in "iu":
        if array.dtype.kind == "f" and not (np.isfinite(array).all() and (array % 1 == 0).all()):
            return "not a whole number"
        info = np.iinfo(dtype)
        if array.size and (array.min() < info.min or array.max() > info.max):
            return f"out of {dtype.name} range"
    return ""
