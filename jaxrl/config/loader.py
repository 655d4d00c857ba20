"""Reading a config: YAML files, ``section.key=value`` overrides, types and unknown keys.

:func:`config_from_dict` turns a nested dict into a :class:`Config` (keys and types checked
here, values by :func:`jaxrl.config.root.validate`).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import typing
from pathlib import Path
from typing import Any

import dacite
import yaml

from jaxrl.config.errors import ConfigError
from jaxrl.config.root import Config, validate


def _to_int(value: Any) -> Any:
    # "1e5" (a string to YAML 1.1) or 1e+5 (a float) for an int key: fine when whole.
    if isinstance(value, bool) or isinstance(value, int):
        return value
    number = _to_float(value)
    if isinstance(number, float) and number.is_integer():
        return int(number)
    return value  # dacite then refuses it, and _wrong_type names the key


def _to_float(value: Any) -> Any:
    # YAML 1.1 reads "1e-3" as a string and "1" as an int; both are fine for a float key.
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


_DACITE = dacite.Config(strict=True, cast=[tuple], type_hooks={float: _to_float, int: _to_int})


def _check_keys(cls: type, data: Any, prefix: str) -> None:
    """Reject keys that are not fields (and booleans given for numbers), naming the key."""
    if not isinstance(data, dict):
        where = prefix.rstrip(".") or "the config"
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__} {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in data.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
            raise ConfigError(f"unknown config key {prefix}{key}{hint}")
        sub = fields[key].type
        sub_name = sub if isinstance(sub, str) else getattr(sub, "__name__", "")
        sub_cls = _DATACLASSES.get(sub_name)
        item_cls = _DATACLASSES.get(sub_name.removeprefix("tuple[").split(",")[0])
        if sub_cls is not None:
            _check_keys(sub_cls, {} if value is None else value, f"{prefix}{key}.")
        elif sub_name.startswith("tuple[") and item_cls is not None:
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"config key {prefix}{key}: expected a list, got {value!r}")
            for i, item in enumerate(value):
                _check_keys(item_cls, item, f"{prefix}{key}[{i}].")
        elif sub_name.startswith("tuple[") and not isinstance(value, (list, tuple)):
            # dacite would cast a string to a tuple of its characters
            raise ConfigError(f"config key {prefix}{key}: expected a list, got {value!r}")
        elif _numeric(sub_name) and _has_bool(value):
            # YAML true/false are ints to Python (and to dacite); never a valid number here.
            raise ConfigError(f"config key {prefix}{key}: expected {sub_name}, got {value!r}")


def _numeric(type_name: str) -> bool:
    return type_name in ("int", "float") or type_name.startswith("tuple[int")


def _has_bool(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, bool) for v in value)
    return isinstance(value, bool)


def _dataclasses(cls: type) -> dict[str, type]:
    """Every config dataclass reachable from ``cls`` by field types, by class name."""
    found = {cls.__name__: cls}
    for tp in typing.get_type_hints(cls).values():
        for candidate in (tp, *getattr(tp, "__args__", ())):
            if dataclasses.is_dataclass(candidate) and candidate.__name__ not in found:
                found.update(_dataclasses(candidate))
    return found


_DATACLASSES = _dataclasses(Config)
# Sections: the top-level keys holding a mapping (a null section, all keys commented out,
# reads as empty).
_SECTIONS = tuple(
    f.name for f in dataclasses.fields(Config) if f.default_factory is not dataclasses.MISSING
)


def set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``section.key`` (dotted, sections created as needed) in a config mapping.

    Raises:
      ConfigError: a part of the path that holds a value, not a section.
    """
    node = data
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"override {dotted}: {part} is not a section")
        node = child
    node[parts[-1]] = value


def parse_overrides(overrides: list[str]) -> list[tuple[str, Any]]:
    """Parse ``section.key=value`` strings; values are read as YAML (``1e-3``, ``[64, 64]``)."""
    parsed = []
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not of the form section.key=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as err:
            raise ConfigError(
                f"override {item!r}: the value is not valid YAML ({_yaml_problem(err)}, at "
                f"column {_yaml_column(err)} of {raw!r})"
            ) from None
        parsed.append((key.strip(), value))
    return parsed


def config_from_dict(data: dict[str, Any] | None) -> Config:
    """Build and validate a :class:`Config` from a nested dict."""
    data = {} if data is None else data
    # A section whose keys are all commented out reads as null: treat it as empty.
    data = {k: ({} if v is None and k in _SECTIONS else v) for k, v in data.items()}
    _check_keys(Config, data, "")
    try:
        config = dacite.from_dict(Config, data, config=_DACITE)
    except dacite.WrongTypeError as err:
        expected = _type_name(err.field_type)
        if expected == "int" and isinstance(_to_float(err.value), float):
            expected = "a whole number"  # 1.5 or "1.5e0": a number, but not an int
        raise ConfigError(
            f"config key {err.field_path}: expected {expected}, got {err.value!r}"
        ) from None
    except dacite.DaciteError as err:
        raise ConfigError(f"invalid config: {err}") from None
    validate(config)
    return config


_YAML_KINDS = {"list": "a list", "int": "a number", "float": "a number", "str": "a string",
               "bool": "a boolean"}  # fmt: skip


def _yaml_problem(err: yaml.YAMLError) -> str:
    """What PyYAML found wrong, without its multi-line excerpt of the text."""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context, mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and mark is not None:
        context += f" that starts at line {mark.line + 1}, column {mark.column + 1}"
    return f"{problem} ({context})" if context else problem


def _yaml_column(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    return str(mark.column + 1) if mark is not None else "?"


def _type_name(tp: Any) -> str:
    args = getattr(tp, "__args__", None)
    if getattr(tp, "__origin__", None) is tuple and args:
        return f"a list of {_type_name(args[0])}"  # tuple[int, ...]: a YAML list of ints
    return getattr(tp, "__name__", str(tp))


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Read a YAML config file (or the defaults when ``path`` is None) and apply overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else f"{path}"
            raise ConfigError(f"{where}: not valid YAML: {_yaml_problem(err)}") from None
        if data is None:
            raise ConfigError(
                f"config file {path} is empty; give at least one section (e.g. env:), or "
                "copy one from configs/"
            )
        if not isinstance(data, dict):
            raise ConfigError(
                f"config file {path}: the top level must be a mapping of sections (env:, "
                f"ppo:, ...), got {_YAML_KINDS.get(type(data).__name__, type(data).__name__)}"
            )
    return config_with_overrides(data, overrides or [])


def config_with_overrides(data: dict[str, Any], overrides: list[str]) -> Config:
    """The :class:`Config` of a nested mapping with ``section.key=value`` overrides applied
    (to a copy: ``data`` is left as it is)."""
    data = copy.deepcopy(data)
    for key, value in parse_overrides(overrides):
        set_path(data, key, value)
    return config_from_dict(data)


def load_run_config(run_dir: str | Path) -> Config:
    """The saved config of a run, set to play its policy on one device here.

    Evaluation, rendering and tournaments read only the replicated policy item, so a run
    trained on any number of devices or processes restores on this one.
    """
    return load_config(Path(run_dir) / "config.yaml", ["mesh.devices=1"])


def save_config(config: Config, path: str | Path, history: tuple[str, ...] = ()) -> None:
    """Write the resolved config as YAML (loadable by :func:`load_config`), with ``history``
    as ``# `` comment lines at its top (what resuming changed, see :func:`config_history`).

    An env a fresh process would not find by its name (one registered from Python) gets its
    factory's import path recorded as ``env.source`` (:func:`jaxrl.envs.source`).
    """
    data = config.to_dict()
    if not config.env.source:
        from jaxrl import envs  # noqa: PLC0415 - keep config importable without building envs

        data["env"]["source"] = envs.source(config.env.name)
    header = "".join(f"# {line}\n" for line in history)
    Path(path).write_text(header + yaml.safe_dump(data, sort_keys=False))


def config_history(path: str | Path) -> tuple[str, ...]:
    """The ``# `` comment lines at the top of a run's ``config.yaml`` (oldest first)."""
    lines = []
    for line in Path(path).read_text().splitlines():
        if not line.startswith("# "):
            break
        lines.append(line[2:])
    return tuple(lines)


# The keys that may change when a run is resumed: how long it trains and how the host loop
# logs and checkpoints. None of them changes an update's computation or its random stream
# (see docs/guide/checkpoints.md; with ppo.anneal_lr the schedule's horizon is total_steps).
RESUMABLE_KEYS = (
    "train.total_steps",  # train a finished run further (or stop an unfinished one sooner)
    "train.updates_per_chunk",  # how often the host logs, checks for Ctrl-C and may save
    "train.progress_bar",
    "checkpoint.every_updates",
    "checkpoint.keep",
)


def _refuse_on_resume(key: str) -> ConfigError:
    return ConfigError(
        f"{key} cannot change when resuming a run (it would change what an update computes); "
        f"the keys that may: {', '.join(RESUMABLE_KEYS)}"
    )


def check_resume_overrides(overrides: list[str]) -> None:
    """Refuse an override of a key resuming may not change (one line naming those it may).

    Raises:
      ConfigError: an override of a key outside :data:`RESUMABLE_KEYS`.
    """
    for key, _ in parse_overrides(overrides):
        if key not in RESUMABLE_KEYS:
            raise _refuse_on_resume(key)


def load_resume_config(run_dir: str | Path, overrides: list[str]) -> Config:
    """A run's saved config with the overrides resuming allows (:data:`RESUMABLE_KEYS`).

    Raises:
      ConfigError: an override of another key (one line naming the allowed keys), or a
        missing ``config.yaml``.
    """
    check_resume_overrides(overrides)
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"cannot resume {run_dir}: it has no config.yaml")
    return load_config(path, overrides)


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix.rstrip("."): data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(_flat(value, f"{prefix}{key}."))
    return out


def resume_changes(saved: Config, wanted: Config) -> list[str]:
    """``key old -> new`` for each key ``wanted`` changes in a run's ``saved`` config.

    Raises:
      ConfigError: a changed key outside :data:`RESUMABLE_KEYS`.
    """
    old, new = _flat(saved.to_dict()), _flat(wanted.to_dict())
    changed = [key for key in new if old.get(key, object()) != new[key]]
    changed += [key for key in old if key not in new]
    for key in changed:
        if key not in RESUMABLE_KEYS:
            raise _refuse_on_resume(key)
    return [f"{key} {old[key]} -> {new[key]}" for key in changed]
