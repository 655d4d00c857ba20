"""The one extension mechanism of the train step.

A :class:`Feature` (the curriculum, self-play, evaluation lanes, ...) plugs into every
update at two points and owns everything it needs:

- **state**: ``init`` returns a pytree that lives in ``RunnerState.features[name]``, is
  carried through the compiled chunk and is saved as its own checkpoint item ``name``;
- **plan**: before the rollout, ``plan(state, plan)`` edits the :class:`MatchPlan` the
  update plays under (env params per env, opponents, sides, per-env feature switches);
  features run in order, each on the previous one's plan;
- **update**: after the PPO update, ``after_update(state, result)`` reads what happened
  (:class:`UpdateResult`) and returns its new state, its metrics and whether every env
  must start afresh under the next plan;
- **metrics**: ``metric_specs()`` declares its TensorBoard tags and reductions once;
  ``after_update`` returns one :class:`~jaxrl.metrics.Scalar` per declared tag;
- **summary**: lines for the printed run summary.

The train step knows none of the features by name: it folds ``plan`` over them, calls
``after_update`` on each, and reduces and logs whatever they declared.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.layout import sum_over_devices
from jaxrl.match import MatchPlan
from jaxrl.metrics import MetricSpec, Scalar
from jaxrl.types import EpisodeSums, RunningStats


class UpdateResult(struct.PyTreeNode):
    """What a feature sees of one update (data-parallel: this device's envs, global rest)."""

    params: Any  # the learner's params after the update
    obs_stats: RunningStats  # the learner's normaliser after the rollout
    sums: EpisodeSums  # [N] episodes that ended during the rollout, per env of this device
    slot_results: Any  # [K + 1, 3] pure pool matches per slot, all devices, or None
    plan: MatchPlan  # the plan the rollout played under
    update_step: jax.Array  # () int32, updates done including this one


class FeatureOutput(struct.PyTreeNode):
    """A feature's answer to one update."""

    metrics: dict  # {tag: Scalar}, one per declared metric
    reset: jax.Array  # () bool, start every env afresh under the next plan

    @classmethod
    def of(cls, metrics: dict[str, Scalar], reset=False) -> FeatureOutput:
        """Metrics and a reset flag (default: no reset)."""
        return cls(metrics=metrics, reset=jnp.asarray(reset, bool))


class Feature(abc.ABC):
    """A part of the train step with its own state, plan edits, update and metrics."""

    name: ClassVar[str]
    resets: ClassVar[bool] = False  # after_update may ask for every env to start afresh

    @abc.abstractmethod
    def init(self, params: Any, obs_stats: RunningStats) -> Any:
        """The feature's state at the start of a run."""

    def plan(self, state: Any, plan: MatchPlan) -> MatchPlan:
        """Edit the plan the next rollout plays under (default: unchanged)."""
        del state
        return plan

    @abc.abstractmethod
    def after_update(self, state: Any, result: UpdateResult) -> tuple[Any, FeatureOutput]:
        """The feature's new state and its metrics after one update."""

    @abc.abstractmethod
    def metric_specs(self) -> tuple[MetricSpec, ...]:
        """The metrics ``after_update`` returns, declared once."""

    def summary(self, state: Any) -> list[str]:
        """Lines for the run summary (default: none)."""
        del state
        return []


def masked_sums(sums: EpisodeSums, mask: jax.Array, axis: str | None = None) -> EpisodeSums:
    """Scalar totals of the envs where ``mask [N]`` is set, over every device of ``axis``.

    Data-parallel, every device gets the same totals, so every decision made from them (a
    promotion, an Elo update) is the same on all devices.
    """
    weight = mask.astype(jnp.float32)
    return jax.tree.map(lambda x: sum_over_devices(jnp.sum(x * weight), axis), sums)


def set_rows(tree: Any, start: int, rows: Any) -> Any:
    """``tree`` (leaves ``[N, ...]``) with rows ``[start, start + len(rows))`` replaced."""
    return jax.tree.map(
        lambda full, part: full.at[start : start + part.shape[0]].set(part), tree, rows
    )
