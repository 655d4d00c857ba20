"""The one extension mechanism of the train step.

A :class:`Feature` (the curriculum, self-play, evaluation lanes, ...) plugs into every
update at two points and owns everything it needs:

- **state**: ``init`` returns a pytree container (a struct or a dict: Orbax saves no bare
  array as an item) that lives in ``RunnerState.features[name]``, is carried through the
  compiled chunk and is saved as its own checkpoint item ``name``;
- **plan**: before the rollout, ``plan(state, plan, reads)`` edits the :class:`MatchPlan`
  the update plays under (env params per env, opponents, sides, the
  :class:`~jaxrl.core.opponents.OpponentPlan` of the layout's lanes); features run one
  after another, each on the previous one's plan, in the order that :func:`order_features`
  derives from what each declares it must follow (``after`` and ``reads``);
- **reads**: a feature that needs another's state declares its name in ``reads`` (self-play
  reads the curriculum, which switches it per env): the step hands it, as ``reads``, exactly
  those features' :meth:`Feature.view` of their state as the update began, and nothing else
  (a declared feature the run does not have is absent);
- **update**: after the PPO update, ``after_update(state, result, reads)`` reads what
  happened (:class:`UpdateResult`) and returns its new state, its metrics and whether every
  env must start afresh under the next plan;
- **layout**: what a feature needs of the env batch's static layout (opponent groups, env
  params per env) it declares in its :class:`Registration`'s ``layout`` hook
  (:class:`LayoutNeeds`), read before any feature is built;
- **metrics**: ``metric_specs()`` declares its TensorBoard tags and reductions once;
  ``after_update`` returns one :class:`~jaxrl.core.metrics.Scalar` per declared tag;
- **summary**: lines for the printed run summary.

The train step knows none of the features by name: it folds ``plan`` over them, calls
``after_update`` on each, and reduces and logs whatever they declared.

Two sibling interfaces, declared the same way, serve what acts above one member's update:

- a :class:`LearnerFeature` (the league's exploiters) owns learners of its own: after the
  learner's whole update it reads the runner before and after, trains its own runners with
  the step's functions (:class:`LearnerOps`, handed in, so no feature imports the step) and
  may write the states of the features it declares in ``writes`` (a hand-off into the
  league's pool);
- a :class:`PopulationFeature` (population-based training, the population league) acts on
  the members ``[R]`` after every member's update: its state is carried beside theirs; it
  writes the member features it declares in ``writes``, or, declared ``owns_members``
  (PBT: a child copies its parent), rewrites the members whole.

Both keep their state in ``RunnerState.features[name]`` and checkpoint it as item ``name``,
declare their metrics once, and are called by the step in the order the run lists them. The
runners they are handed carry in ``features`` only their own state and those they declare
in ``reads`` and ``writes``; of what they hand back, the step keeps only those.

A run's features are listed once, one :class:`Registration` each, in
:data:`jaxrl.run.setup.FEATURES`: adding a feature is its module (the feature, its builder,
its ``REGISTRATION``), its config section under ``jaxrl/config/`` and that one line.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal

import jax
import jax.numpy as jnp
from flax import struct
from jax.sharding import PartitionSpec

from jaxrl.core.layout import OpponentGroups, sum_over_devices
from jaxrl.core.match import MatchPlan
from jaxrl.core.metrics import MetricSpec, Scalar
from jaxrl.core.types import EpisodeSums, RunningStats

NO_READS: Mapping[str, Any] = {}  # what a feature that declares no ``reads`` is handed


@dataclasses.dataclass(frozen=True)
class LayoutNeeds:
    """What a feature needs of the env batch's static layout
    (:func:`jaxrl.core.layout.make_layout`)."""

    per_env_params: bool = False  # env params differ per env (evaluation lanes, replay)
    opponents: OpponentGroups | None = None  # the training envs' network-opponent groups
    measured_envs: tuple[int, ...] = ()  # envs per measuring group after the training envs


@dataclasses.dataclass(frozen=True, eq=False)
class Registration:
    """One feature's line in the run's registry (:data:`jaxrl.run.setup.FEATURES`).

    ``build`` returns the feature or None (not configured); what it is given depends on
    ``kind``: ``"member"`` (:class:`Feature`) a :class:`BuildContext`; ``"learner"``
    (:class:`LearnerFeature`) the built run; ``"population"`` (:class:`PopulationFeature`)
    the built run and every metric tag one member's update packs. A learner feature's
    ``build`` is also handed the built member features it declares in ``reads`` (``{name:
    feature}``, a name absent when that feature is not configured): the assembler wires them,
    the feature never looks another up by name. ``layout(config, num_envs)`` (optional) says
    what the feature needs of one device's ``num_envs`` training envs' layout, before any
    feature is built.
    """

    build: Callable[..., Any]
    kind: Literal["member", "learner", "population"] = "member"
    layout: Callable[[Any, int], LayoutNeeds] | None = None
    reads: tuple[str, ...] = ()  # member features a learner feature's build is handed

    def __post_init__(self):
        """Refuse a kind the registry does not build."""
        if self.kind not in KINDS:
            raise ValueError(f"feature kind must be one of {', '.join(KINDS)}, got {self.kind!r}")


KINDS = ("member", "learner", "population")  # what a Registration's ``kind`` may be


def merge_needs(needs: Sequence[LayoutNeeds]) -> LayoutNeeds:
    """One layout's needs from every feature's: per-env params if any asks, the one
    feature's opponent groups and the one feature's measuring groups (two features filling
    either is a ValueError)."""
    groups = [need.opponents for need in needs if need.opponents is not None]
    if len(groups) > 1:
        raise ValueError(f"two features fill the opponent groups: {groups}")
    measured = [need.measured_envs for need in needs if need.measured_envs]
    if len(measured) > 1:
        raise ValueError(f"two features add measuring groups: {measured}")
    return LayoutNeeds(
        per_env_params=any(need.per_env_params for need in needs),
        opponents=groups[0] if groups else None,
        measured_envs=measured[0] if measured else (),
    )


@dataclasses.dataclass(frozen=True, eq=False)
class BuildContext:
    """What a feature's builder may read to decide whether and how it runs (static)."""

    config: Any  # the run's Config
    layout: Any  # jaxrl.core.layout.Layout of one device
    env: Any  # the wrapped env
    env_params: Any  # its base EnvParams
    outcome_names: tuple[str, ...]  # keys of the env's info["episode_outcome"]


class UpdateResult(struct.PyTreeNode):
    """What a feature sees of one update (data-parallel: this device's envs, global rest)."""

    params: Any  # the learner's params after the update
    obs_stats: RunningStats  # the learner's normaliser after the rollout
    sums: EpisodeSums  # [N] episodes that ended during the rollout, per env of this device
    tally: Any  # the match step's tally summed over the rollout and all devices (the league's
    #             LeagueTally with pool lanes), or None
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
    # Features whose plan edits this one reads: if configured, they plan (and update) first.
    after: ClassVar[tuple[str, ...]] = ()
    # Features whose state this one reads (their view, as the update began): handed in as
    # ``reads``; if configured, they plan (and update) first.
    reads: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def init(self, params: Any, obs_stats: RunningStats) -> Any:
        """The feature's state at the start of a run."""

    def plan(self, state: Any, plan: MatchPlan, reads: Mapping[str, Any] = NO_READS) -> MatchPlan:
        """Edit the plan the next rollout plays under (default: unchanged); ``reads``: the
        views of the features declared in ``reads`` (those the run has)."""
        del state, reads
        return plan

    @abc.abstractmethod
    def after_update(
        self, state: Any, result: UpdateResult, reads: Mapping[str, Any] = NO_READS
    ) -> tuple[Any, FeatureOutput]:
        """The feature's new state and its metrics after one update (``reads`` as in
        :meth:`plan`: the states the update began with)."""

    def view(self, state: Any) -> Any:
        """What the features that read this one are handed of its ``state`` (default: the
        state itself)."""
        return state

    @abc.abstractmethod
    def metric_specs(self) -> tuple[MetricSpec, ...]:
        """The metrics ``after_update`` returns, declared once."""

    def summary(self, state: Any) -> list[str]:
        """Lines for the run summary (default: none)."""
        del state
        return []


@dataclasses.dataclass(frozen=True, eq=False)
class LearnerOps:
    """The train step's functions on one learner's runner, handed to a :class:`LearnerFeature`
    that trains learners of its own (a feature never imports the step)."""

    update: Callable[..., Any]  # (setup, runner) -> (RunnerState, packed metrics Scalar [M])
    metric_specs: Callable[..., tuple[MetricSpec, ...]]  # (setup) -> what update packs


class LearnerFeature(abc.ABC):
    """A feature that acts after the learner's whole update and may write the states of the
    features it declares in ``writes``.

    Its state lives in ``RunnerState.features[name]`` (its checkpoint item ``name``).
    """

    name: ClassVar[str]
    reads: ClassVar[tuple[str, ...]] = ()  # other features' states it reads (raw)
    writes: ClassVar[tuple[str, ...]] = ()  # other features' states it may replace

    @abc.abstractmethod
    def init(
        self, init_learner: Callable[..., Any], key: jax.Array, hyper: Any, params: Any
    ) -> Any:
        """The feature's state at the start of a run seeded by ``key`` (the member's key);
        ``init_learner(setup, key, hyper, params)`` is the step's fresh runner state."""

    @abc.abstractmethod
    def after_learner(
        self, ops: LearnerOps, before: Any, after: Any
    ) -> tuple[Any, dict[str, Scalar]]:
        """``(after, metrics)``: the learner's runner once the feature has acted, given the
        runner as the update began (``before``) and after it (``after``, the feature's state
        still as in ``before``), and one Scalar per declared metric. Both runners' features
        hold only this feature's state and those it declares in ``reads`` and ``writes``; of
        the runner it returns, the step keeps those states only."""

    @abc.abstractmethod
    def metric_specs(self) -> tuple[MetricSpec, ...]:
        """The metrics ``after_learner`` returns, declared once."""

    def without_mesh(self, local: Callable[[Any], Any]) -> LearnerFeature:
        """This feature with every setup of its own as ``local(setup)`` makes it (one
        device's env batch, outside any mesh axis); default: itself."""
        del local
        return self

    def partition(self, state: Any, lead: tuple, axis: str | None) -> Any:
        """Partition specs of the feature's state (shapes ``state``) when the env batch is
        sharded over mesh axis ``axis`` (``lead``: ``(None,)`` for a member axis); default:
        replicated."""
        del lead, axis
        return jax.tree.map(lambda _: PartitionSpec(), state)

    def inherit(self, own: Any, parent: Any) -> Any:
        """A PBT child's state of this feature (one member's rows): default, its parent's."""
        del own
        return parent

    def summary(self, state: Any) -> list[str]:
        """Lines for the run summary (default: none)."""
        del state
        return []


class PopulationFeature(abc.ABC):
    """A feature that acts on every member ``[R]`` after every member's update (PBT).

    Its state (leaves ``[R, ...]``) lives in ``RunnerState.features[name]``; the members'
    update never sees it. The members it is handed carry in ``features`` only those it
    declares in ``reads`` and ``writes``, and the step keeps of the members it returns only
    the states of ``writes``; a feature declared ``owns_members`` (PBT: a child copies its
    parent whole) is handed the members whole and returns them whole.
    """

    name: ClassVar[str]
    reads: ClassVar[tuple[str, ...]] = ()  # member features' states it reads
    writes: ClassVar[tuple[str, ...]] = ()  # member features' states it may replace
    owns_members: ClassVar[bool] = False  # reads and rewrites the members whole

    @abc.abstractmethod
    def init(self, seeds: Sequence[int]) -> Any:
        """The state of every member (leaves ``[R, ...]``) of the members seeded ``seeds``."""

    @abc.abstractmethod
    def after_members(
        self, state: Any, members: Any, ran: jax.Array, packed: Scalar, replica_axis: str | None
    ) -> tuple[Any, Any, dict[str, Scalar]]:
        """``(state, members, metrics)`` after every member's update; ``metrics`` holds one
        Scalar per declared tag with value and weight ``[R]`` (weight 0 for a member that
        did not train).

        Args:
          members: the members' RunnerState (leaves ``[R, ...]``), without this state.
          ran: bool [R], the member trained in this update.
          packed: Scalar [R, M], the update's metrics packed in the members' declared order.
          replica_axis: the mesh axis the members are replicated over, or None.
        """

    @abc.abstractmethod
    def metric_specs(self, hyper: Any) -> tuple[MetricSpec, ...]:
        """The metrics ``after_members`` returns for members whose values are ``hyper``."""

    def summary(self, state: Any) -> list[str]:
        """Lines for the run summary (default: none)."""
        del state
        return []


def order_features(features: Sequence[Feature]) -> tuple[Feature, ...]:
    """``features`` in an order where each comes after those it declares in ``after`` or
    ``reads``.

    Among features free to go, the earlier in ``features`` goes first, so the order is
    deterministic (it fixes the order of the metrics too). A declared feature that is not
    configured constrains nothing.

    Raises:
      ValueError: two features of one name, or the declarations form a cycle.
    """
    names = [feature.name for feature in features]
    if len(set(names)) != len(names):
        raise ValueError(f"features of the same name: {names}")
    waiting = list(features)
    ordered: list[Feature] = []
    while waiting:
        placed = {feature.name for feature in ordered}
        ready = [
            feature
            for feature in waiting
            if all(dep in placed or dep not in names for dep in (*feature.after, *feature.reads))
        ]
        if not ready:
            cycle = {feature.name: (*feature.after, *feature.reads) for feature in waiting}
            raise ValueError(f"features declare a cycle in their order: {cycle}")
        ordered.append(ready[0])
        waiting.remove(ready[0])
    return tuple(ordered)


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


def reads_of(feature: Any, views: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``views`` (``{name: view}``) that ``feature`` declares in ``reads``."""
    return {name: views[name] for name in feature.reads if name in views}


def visible(runner: Any, feature: Any, own: Any) -> Any:
    """``runner`` as a learner or population feature is handed it: its ``features`` hold
    ``own`` (this feature's state, when not None) and the states ``feature`` declares in
    ``reads`` and ``writes``, nothing else."""
    names = (*feature.reads, *feature.writes)
    features = {name: runner.features[name] for name in names if name in runner.features}
    if own is not None:
        features[feature.name] = own
    return runner.replace(features=features)


def written(runner: Any, returned: Any, names: Sequence[str]) -> Any:
    """``runner`` with the feature states ``names`` taken from ``returned`` (those present)."""
    taken = {name: returned.features[name] for name in names if name in returned.features}
    return runner.replace(features={**runner.features, **taken})
