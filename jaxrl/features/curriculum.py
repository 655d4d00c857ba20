"""Curriculum inside the compiled step: stages are env-param overrides, promotion in-graph.

A stage overrides some fields of the env's ``EnvParams`` (a struct field, such as Soccer's
``reward``, field by field); all stages' leaf values are stacked into arrays ``[S]`` so the
current stage's params are a gather by the traced stage index: switching stages never
retraces. Promotion: after each update, the stage's metric (e.g. mean episode return of the
episodes that ended in the update) enters a window; once the stage has run ``min_updates``
updates and the mean of the last ``window`` values reaches ``threshold``, the next stage
begins (every env is reset with the new params).

:class:`Curriculum` is the train-step feature around these functions. With
``curriculum.replay`` a fixed, evenly spread fraction of the training envs keeps playing
earlier stages (replay env ``j`` plays stage ``j mod stage``), so each env has its own stage
index and its own env params (the feature declares that the layout's env params are per
env: :func:`curriculum_layout`); promotion reads only the envs on the current stage. A
stage's ``features`` switch other features (``{selfplay: true}``) on for the envs playing
it: the curriculum's :meth:`Curriculum.view` (:class:`CurriculumView`) holds each
switchable feature's per-env switch, for the features that declare ``reads =
("curriculum",)``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.config import SWITCHABLE, CurriculumConfig
from jaxrl.core.layout import Layout
from jaxrl.core.match import MatchPlan
from jaxrl.core.metrics import MetricSpec, Scalar
from jaxrl.envs.params import flatten, get_path, replace_path
from jaxrl.features import (
    NO_READS,
    BuildContext,
    Feature,
    FeatureOutput,
    LayoutNeeds,
    Registration,
    UpdateResult,
    masked_sums,
    set_rows,
)

CURRICULUM = "curriculum"  # the feature's name: its runner features entry and checkpoint item


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


class CurriculumView(struct.PyTreeNode):
    """What the features that read the curriculum see of it (:meth:`Curriculum.view`)."""

    stage: jax.Array  # () int32, the current stage
    switches: dict  # {feature: [E] bool} training envs whose stage switches the feature on
    #                 (only features some stage names; a feature absent here is on everywhere)


@dataclasses.dataclass(frozen=True, eq=False)
class CurriculumSpec:
    """Static description of the stages, with per-stage values as arrays ``[S]``."""

    names: tuple[str, ...]
    metrics: tuple[str, ...]  # per stage: key of the update metric that promotes
    param_tables: dict[str, np.ndarray]  # env param dotted path (reward.touch) -> [S] values
    threshold: np.ndarray  # [S] float32
    window: np.ndarray  # [S] int32
    min_updates: np.ndarray  # [S] int32
    max_updates: np.ndarray  # [S] int32, 0 = no limit
    switches: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # name -> [S] bool

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
    overrides = [flatten(stage.env) for stage in config.stages]
    keys = sorted({k for stage in overrides for k in stage})
    tables = {}
    for key in keys:
        default = get_path(default_params, key)
        dtype = np.asarray(default).dtype
        if dtype == np.float64:
            dtype = np.float32
        if dtype == np.int64:
            dtype = np.int32
        tables[key] = np.asarray(
            [np.asarray(stage.get(key, default), dtype) for stage in overrides], dtype=dtype
        )
    return CurriculumSpec(
        names=tuple(s.name or f"stage{i}" for i, s in enumerate(config.stages)),
        metrics=tuple(s.metric for s in config.stages),
        param_tables=tables,
        threshold=np.asarray([s.threshold for s in config.stages], np.float32),
        window=np.asarray([s.window for s in config.stages], np.int32),
        min_updates=np.asarray([s.min_updates for s in config.stages], np.int32),
        max_updates=np.asarray([s.max_updates for s in config.stages], np.int32),
        switches={
            name: np.asarray([s.features.get(name, False) for s in config.stages], bool)
            for name in SWITCHABLE
            if any(name in s.features for s in config.stages)
        },
    )


def stage_params(spec: CurriculumSpec | None, base_params: Any, stage: jax.Array) -> Any:
    """The env params of ``stage`` (a traced int32): the base params with its overrides."""
    if spec is None:
        return base_params
    params = base_params
    for key, table in spec.param_tables.items():
        params = replace_path(params, key, jnp.asarray(table)[stage])
    return params


def env_params_at(spec: CurriculumSpec | None, params: Any, stage: jax.Array, rows: int) -> Any:
    """Per-env params (leaves ``[N, ...]``) with rows ``[0, len(stage))`` on ``stage [E]``."""
    if spec is None:
        return params
    for key, table in spec.param_tables.items():
        leaf = get_path(params, key)
        leaf = leaf.at[:rows].set(jnp.asarray(table)[stage])
        params = replace_path(params, key, leaf)
    return params


def window_mean(state: CurriculumState, length: jax.Array) -> jax.Array:
    """Mean of the last ``min(length, count)`` pushed values (nan if none)."""
    size = state.window.shape[0]
    back = jnp.arange(size)
    idx = (state.position - 1 - back) % size
    valid = back < jnp.minimum(length, state.count)
    total = jnp.where(valid, state.window[idx], 0.0).sum()
    n = valid.sum()
    return jnp.where(n > 0, total / jnp.maximum(n, 1), jnp.nan)


class Promotion(struct.PyTreeNode):
    """What :func:`advance` decided this update."""

    promoted: jax.Array  # () bool, the next stage begins
    capped: jax.Array  # () bool, promoted by ``max_updates`` with the metric rule unmet


def advance(
    spec: CurriculumSpec, state: CurriculumState, metrics: dict[str, jax.Array]
) -> tuple[CurriculumState, Promotion]:
    """Push this update's metric and promote if the stage's rule holds.

    The rule: at least ``min_updates`` in the stage and the mean of the last ``window``
    pushed values at or above ``threshold``; or, whatever the metric, ``max_updates`` in
    the stage when that is set (a warm-up that never reaches its threshold cannot hold
    the run). A promotion by the cap alone is ``capped``: the stage handed on a learner
    that never met its threshold, which a run reports (``curriculum/capped_promotions``).

    Args:
      spec: the stages.
      state: current curriculum state.
      metrics: ``{name: (value (), valid () bool)}`` for every metric a stage uses;
        invalid values (no episode ended this update) are not pushed.

    Returns:
      ``(state, Promotion)``.
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
    max_updates = jnp.asarray(spec.max_updates)[stage]
    not_last = stage < spec.num_stages - 1
    met = (
        (state.updates_in_stage >= jnp.asarray(spec.min_updates)[stage])
        & (state.count >= window)
        & (window_mean(state, window) >= jnp.asarray(spec.threshold)[stage])
    )
    at_cap = (max_updates > 0) & (state.updates_in_stage >= max_updates)
    ready = not_last & (met | at_cap)
    promoted_state = CurriculumState.create(size).replace(stage=stage + 1)
    state = jax.tree.map(lambda new, old: jnp.where(ready, new, old), promoted_state, state)
    return state, Promotion(promoted=ready, capped=ready & ~met)


# ----------------------------------------------------------------------------- feature


def replay_ranks(num_envs: int, fraction: float) -> np.ndarray:
    """int32 [E]: ``-1`` for envs on the current stage, else the env's replay rank ``j``.

    ``round(E * fraction)`` replay envs, spread evenly over the training envs (so every
    opponent group of the layout gives up the same share).
    """
    count = round(num_envs * fraction)
    ranks = np.full(num_envs, -1, np.int32)
    if count:
        picks = np.floor((np.arange(count) + 0.5) * num_envs / count).astype(int)
        ranks[picks] = np.arange(count)
    return ranks


@dataclasses.dataclass(frozen=True, eq=False)
class Curriculum(Feature):
    """Stages switched in-graph (see the module docstring); checkpointed as ``curriculum``."""

    name = CURRICULUM
    resets = True  # a promotion starts every env afresh under the new stage
    spec: CurriculumSpec
    layout: Layout
    ranks: np.ndarray  # [E] int32, replay rank of each training env (-1: current stage)

    def init(self, params, obs_stats) -> CurriculumState:
        """Stage 0, empty window."""
        del params, obs_stats
        return CurriculumState.create(int(self.spec.window.max()))

    def env_stages(self, stage: jax.Array) -> jax.Array:
        """int32 [E]: the stage each training env plays while the curriculum is at ``stage``."""
        ranks = jnp.asarray(self.ranks)
        replay = jnp.where(stage > 0, ranks % jnp.maximum(stage, 1), 0)
        return jnp.where(ranks >= 0, replay, stage).astype(jnp.int32)

    def plan(
        self, state: CurriculumState, plan: MatchPlan, reads: Mapping[str, Any] = NO_READS
    ) -> MatchPlan:
        """Every training env's stage params."""
        del reads
        layout = self.layout
        if layout.per_env_params:
            stages = self.env_stages(state.stage)
            env_params = env_params_at(self.spec, plan.env_params, stages, layout.num_envs)
        else:
            env_params = stage_params(self.spec, plan.env_params, state.stage)
        return plan.replace(env_params=env_params)

    def view(self, state: CurriculumState) -> CurriculumView:
        """The stage, and the per-env switch of every feature a stage switches."""
        layout = self.layout
        if layout.per_env_params:
            stages = self.env_stages(state.stage)
        else:
            stages = jnp.broadcast_to(state.stage, (layout.num_envs,))
        switches = {name: jnp.asarray(table)[stages] for name, table in self.spec.switches.items()}
        return CurriculumView(stage=state.stage, switches=switches)

    def after_update(
        self, state: CurriculumState, result: UpdateResult, reads: Mapping[str, Any] = NO_READS
    ) -> tuple[CurriculumState, FeatureOutput]:
        """Push the stage metric of the envs on the current stage; promote if ready."""
        del reads
        layout = self.layout
        on_stage = jnp.zeros((layout.total_envs,), bool)
        on_stage = set_rows(on_stage, 0, self.env_stages(state.stage) == state.stage)
        sums = masked_sums(result.sums, on_stage, layout.axis)
        per_episode = jnp.maximum(sums.episodes, 1.0)
        per_match = jnp.maximum(sums.matches, 1.0)
        stage_metrics = {
            "episode_return": (sums.return_sum / per_episode, sums.episodes > 0),
            "episode_length": (sums.length_sum / per_episode, sums.episodes > 0),
            **{
                f"outcome/{name}": (outcome_sum / per_match, sums.matches > 0)
                for name, outcome_sum in sums.outcome_sums.items()
            },
        }
        state, promotion = advance(self.spec, state, stage_metrics)
        window = jnp.asarray(self.spec.window)[state.stage]
        metrics = {
            "curriculum/stage": Scalar.of(state.stage),
            "curriculum/metric": Scalar.of(window_mean(state, window)),
            "curriculum/promotions": Scalar.of(promotion.promoted),
            "curriculum/capped_promotions": Scalar.of(promotion.capped),
        }
        return state, FeatureOutput.of(metrics, reset=promotion.promoted)

    def metric_specs(self) -> tuple[MetricSpec, ...]:
        """Stage and window mean at the end of a chunk; promotions (and capped ones) in it."""
        return (
            MetricSpec("curriculum/stage", "last"),
            MetricSpec("curriculum/metric", "last"),
            MetricSpec("curriculum/promotions", "sum"),
            MetricSpec("curriculum/capped_promotions", "sum"),
        )

    def status(self, metrics: Mapping[str, float]) -> str:
        """``stage 2/3 (league)`` from the chunk's ``curriculum/stage`` (a switched feature
        reports itself); see :class:`jaxrl.run.summary.ReportsStatus`."""
        value = metrics.get("curriculum/stage", math.nan)
        if math.isnan(value):
            return ""
        stage = int(value)
        return f"stage {stage + 1}/{self.spec.num_stages} ({self.spec.names[stage]})"

    def summary(self, state: CurriculumState) -> list[str]:
        """Stages and replay."""
        replayed = int((self.ranks >= 0).sum())
        names = ", ".join(self.spec.names)
        stages = np.asarray(state.stage).reshape(-1)  # [] or [members]
        at = (
            f"stage {int(stages[0])}" if stages.size == 1 else f"stages {stages.tolist()} (members)"
        )
        line = f"{self.spec.num_stages} stages ({names}), at {at}"
        if replayed:
            line += f"; {replayed} envs replay earlier stages"
        return [f"curriculum   {line}"]


def curriculum_layout(config: Any, num_envs: int) -> LayoutNeeds:
    """Replay gives every training env its own stage, so env params differ per env."""
    del num_envs
    return LayoutNeeds(per_env_params=config.curriculum.replay > 0)


def make_curriculum(context: BuildContext) -> Curriculum | None:
    """The curriculum feature of the run (None without stages)."""
    config, layout = context.config, context.layout
    spec = make_spec(config.curriculum, context.env_params)
    if spec is None:
        return None
    return Curriculum(
        spec=spec,
        layout=layout,
        ranks=replay_ranks(layout.num_envs, config.curriculum.replay),
    )


REGISTRATION = Registration(build=make_curriculum, layout=curriculum_layout)
