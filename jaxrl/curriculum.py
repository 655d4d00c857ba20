"""Curriculum inside the compiled step: stages are env-param overrides, promotion in-graph.

A stage overrides some fields of the env's ``EnvParams`` (a struct field, such as Soccer's
``reward``, field by field); all stages' leaf values are stacked into arrays ``[S]`` so the
current stage's params are a gather by the traced stage index: switching stages never
retraces. Promotion: after each update, the stage's metric (e.g. mean episode return of the
episodes that ended in the update) enters a window; once the stage has run ``min_updates``
updates and the mean of the last ``window`` values reaches ``threshold``, the next stage
begins (every env is reset with the new params).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.config import CurriculumConfig


class CurriculumState(struct.PyTreeNode):
    """Carried in the runner state and checkpointed."""

    stage: jax.Array  # () int32, current stage
    updates_in_stage: jax.Array  # () int32, updates run since the stage began
    window: jax.Array  # [W] float32, ring buffer of the stage metric (W = largest window)
    count: jax.Array  # () int32, values pushed since the stage began
    position: jax.Array  # () int32, next write index into ``window``

    @classmethod
    def create(cls, max_window: int) -> CurriculumState:
        """Stage 0, empty window."""
        zero = lambda: jnp.zeros((), jnp.int32)  # noqa: E731  (distinct buffers: donated)
        return cls(
            stage=zero(),
            updates_in_stage=zero(),
            window=jnp.zeros((max(max_window, 1),), jnp.float32),
            count=zero(),
            position=zero(),
        )


@dataclasses.dataclass(frozen=True, eq=False)
class CurriculumSpec:
    """Static description of the stages, with per-stage values as arrays ``[S]``."""

    names: tuple[str, ...]
    metrics: tuple[str, ...]  # per stage: key of the update metric that promotes
    param_tables: dict[str, np.ndarray]  # env param dotted path (reward.touch) -> [S] values
    threshold: np.ndarray  # [S] float32
    window: np.ndarray  # [S] int32
    min_updates: np.ndarray  # [S] int32

    @property
    def num_stages(self) -> int:
        """Number of stages."""
        return len(self.names)


def make_spec(config: CurriculumConfig, default_params: Any) -> CurriculumSpec | None:
    """Stack the stages' overrides; a stage that does not set a field keeps the default.

    A mapping given for a struct field (``reward: {touch: 0.1}``) is staged leaf by leaf:
    its table is keyed by the dotted path (``"reward.touch"``).
    """
    if not config.stages:
        return None
    overrides = [_flatten(stage.env) for stage in config.stages]
    keys = sorted({k for stage in overrides for k in stage})
    tables = {}
    for key in keys:
        default = _get_path(default_params, key)
        dtype = np.asarray(default).dtype
        if dtype == np.float64:
            dtype = np.float32
        if dtype == np.int64:
            dtype = np.int32
        tables[key] = np.asarray([stage.get(key, default) for stage in overrides], dtype=dtype)
    return CurriculumSpec(
        names=tuple(s.name or f"stage{i}" for i, s in enumerate(config.stages)),
        metrics=tuple(s.metric for s in config.stages),
        param_tables=tables,
        threshold=np.asarray([s.threshold for s in config.stages], np.float32),
        window=np.asarray([s.window for s in config.stages], np.int32),
        min_updates=np.asarray([s.min_updates for s in config.stages], np.int32),
    )


def stage_params(spec: CurriculumSpec | None, base_params: Any, stage: jax.Array) -> Any:
    """The env params of ``stage`` (a traced int32): the base params with its overrides."""
    if spec is None:
        return base_params
    params = base_params
    for key, table in spec.param_tables.items():
        params = _replace_path(params, key.split("."), jnp.asarray(table)[stage])
    return params


def _flatten(overrides: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"reward": {"touch": 0.1}, "opponent_kind": 1}`` -> ``{"reward.touch": 0.1, ...}``."""
    flat = {}
    for key, value in overrides.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _get_path(params: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        params = getattr(params, name)
    return params


def _replace_path(params: Any, names: list[str], value: Any) -> Any:
    """``params`` with the leaf at ``names`` (a path through struct fields) replaced."""
    head, *rest = names
    if rest:
        value = _replace_path(getattr(params, head), rest, value)
    return params.replace(**{head: value})


def window_mean(state: CurriculumState, length: jax.Array) -> jax.Array:
    """Mean of the last ``min(length, count)`` pushed values (nan if none)."""
    size = state.window.shape[0]
    back = jnp.arange(size)
    idx = (state.position - 1 - back) % size
    valid = back < jnp.minimum(length, state.count)
    total = jnp.where(valid, state.window[idx], 0.0).sum()
    n = valid.sum()
    return jnp.where(n > 0, total / jnp.maximum(n, 1), jnp.nan)


def advance(
    spec: CurriculumSpec, state: CurriculumState, metrics: dict[str, jax.Array]
) -> tuple[CurriculumState, jax.Array]:
    """Push this update's metric and promote if the stage's rule holds.

    Args:
      spec: the stages.
      state: current curriculum state.
      metrics: ``{name: (value (), valid () bool)}`` for every metric a stage uses;
        invalid values (no episode ended this update) are not pushed.

    Returns:
      ``(state, promoted () bool)``.
    """
    stage = state.stage
    # Each stage may use its own metric: evaluate all, pick the current one.
    values = jnp.stack([metrics[name][0] for name in spec.metrics])[stage]
    valid = jnp.stack([metrics[name][1] for name in spec.metrics])[stage]
    size = state.window.shape[0]
    pushed = state.replace(
        window=state.window.at[state.position].set(values.astype(jnp.float32)),
        position=(state.position + 1) % size,
        count=state.count + 1,
    )
    state = jax.tree.map(lambda new, old: jnp.where(valid, new, old), pushed, state)
    state = state.replace(updates_in_stage=state.updates_in_stage + 1)

    window = jnp.asarray(spec.window)[stage]
    ready = (
        (stage < spec.num_stages - 1)
        & (state.updates_in_stage >= jnp.asarray(spec.min_updates)[stage])
        & (state.count >= window)
        & (window_mean(state, window) >= jnp.asarray(spec.threshold)[stage])
    )
    promoted_state = CurriculumState.create(size).replace(stage=stage + 1)
    state = jax.tree.map(lambda new, old: jnp.where(ready, new, old), promoted_state, state)
    return state, ready
