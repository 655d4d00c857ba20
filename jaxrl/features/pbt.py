"""Population-based training (Jaderberg et al. 2017) on the member axis, inside the compiled chunk.

The members of a run (``train.num_seeds`` x ``sweep``, :mod:`jaxrl.core.hyper`) are vmapped in one
program with their hyperparameters as traced values. PBT adds one step after every update of
the whole population, made of array operations on the member axis ``[R]``:

1. **smooth**: each member pushes this update's value of every ranking metric (a declared
   metric tag, e.g. ``rollout/episode_return``; several tags rank lexicographically, e.g.
   ``[curriculum/stage, curriculum/metric]``) into an EMA or a window of the last values;
2. every ``pbt.every_updates`` updates from ``pbt.burn_in_updates`` on, in a ``lax.cond``
   (no retrace, no host round trip):

   - **rank** the members on their smoothed metrics (best first; a member without a value
     yet, or stopped by non-finite updates, ranks last; ties go to the lower index);
   - **exploit**: each of the bottom ``n = int(R * fraction)`` members draws a parent
     uniformly from the top ``n`` (with ``min_gap`` or ``min_gap_se``: keeps its own line
     unless that parent is clearly ahead, :func:`clearly_ahead`) and copies its params,
     optimizer state, observation normaliser, every feature's per-member state (curriculum
     stage, self-play pool), its hyperparameters and its progress counters. Env states and
     RNG keys are never copied: the child goes on playing its own envs with its own random
     numbers;
   - **explore**: the child perturbs each explored hyperparameter (times a factor drawn from
     ``factors``, or one step along a ``values`` grid) or resamples it (from its grid, the
     sweep's list, or uniformly in its bounds), always within the bounds;
   - **lineage**: the child records its parent and its generation (the parent's plus one),
     and its smoothed metrics start afresh.

With members sharded over devices (``axis``: the mesh axis of the member dimension inside a
``shard_map``) the population arrays a decision needs are all-gathered, every device makes
the same decision and keeps its own members' rows; without a member axis every device holds
the whole population and computes the same thing.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.config.errors import ConfigError
from jaxrl.config.pbt import PBTConfig
from jaxrl.core.hyper import Hyper, get_value, set_value, value_tags
from jaxrl.core.metrics import MetricSpec, Scalar
from jaxrl.features import PopulationFeature, Registration

STREAM = 0x50425421  # fold_in constant of the PBT key stream (ASCII "PBT!")
PBT = "pbt"  # the runner's features entry of PBT's per-member state (and its checkpoint item)


# ---- the static spec of a run --------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class PBTSpec:
    """What the compiled PBT step needs, as static numbers and arrays ``[H]`` over the
    ``H`` explored hyperparameters."""

    every_updates: int
    burn_in_updates: int  # no event before this update
    num_updates: int
    num_members: int  # R, the whole population (all devices)
    selected: int  # n: members in the bottom and in the top quantile
    metric_tags: tuple[str, ...]  # [K] ranking tags, most significant first
    metric_index: tuple[int, ...]  # [K] their positions in the packed update metrics
    smoothing: str
    ema_decay: float
    window: int
    explore: str
    factors: np.ndarray  # [F] float32
    resample_probability: float
    keys: tuple[str, ...]  # [H] explored config keys
    low: np.ndarray  # [H] float32
    high: np.ndarray  # [H] float32
    log: np.ndarray  # [H] bool
    grid: np.ndarray  # [H, G] float32 sorted grid per key (padded with its last value)
    grid_size: np.ndarray  # [H] int32, 0: no grid
    draws: np.ndarray  # [H, D] float32 values a resample draws from (grid or sweep list)
    draw_size: np.ndarray  # [H] int32, 0: resample uniformly in [low, high]
    copied_features: tuple[str, ...]  # feature states a child copies from its parent
    max_nonfinite: int  # a member with this many non-finite updates in a row ranks last
    min_gap: np.ndarray | None  # [K] float32: a parent must lead by more (None: always copy)
    min_gap_se: np.ndarray | None  # [K] float32: ... and by more than this many standard errors
    # (name, merge(own, parent) -> child's state): runner features a child takes in part
    # from its parent (the league's exploiters: their weights, not their envs or keys)
    merged_features: tuple[tuple[str, Callable[[Any, Any], Any]], ...] = ()


def check_tags(wanted: Sequence[str], tags: Sequence[str]) -> None:
    """Raises ValueError (one line) for a ranking tag ``wanted`` that is not in ``tags``."""
    for tag in wanted:
        if tag not in tags:
            close = difflib.get_close_matches(tag, tags, n=1)
            hint = f" (did you mean {close[0]}?)" if close else f" (declared: {', '.join(tags)})"
            raise ValueError(f"pbt.metric: no update metric {tag!r}{hint}")


def _padded(rows: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """``(table [H, G] float32, sizes [H] int32)``: each row padded with its last value."""
    width = max(1, *(len(r) for r in rows))
    table = [list(r) + [r[-1] if r else 0.0] * (width - len(r)) for r in rows]
    return np.asarray(table, np.float32), np.asarray([len(r) for r in rows], np.int32)


def make_spec(
    config: PBTConfig,
    *,
    num_members: int,
    num_updates: int,
    metric_tags: Sequence[str],
    sweep: Mapping[str, Sequence[float]],
    copied_features: Sequence[str],
    max_nonfinite: int,
    merged_features: Sequence[tuple[str, Callable[[Any, Any], Any]]] = (),
) -> PBTSpec | None:
    """The spec of a validated ``pbt:`` section (None when PBT is off).

    Args:
      metric_tags: every tag of the packed update metrics, in declaration order.

    Raises:
      ValueError: a ranking tag that no part of the train step declares.
    """
    if not config.enabled:
        return None
    tags = list(metric_tags)
    check_tags(config.metric, tags)
    bounds = [config.hyperparameters[key] for key in config.keys]
    grid, grid_size = _padded([sorted(set(b.values)) for b in bounds])
    draws, draw_size = _padded(
        [
            sorted(set(b.values or sweep.get(key, ())))
            for key, b in zip(config.keys, bounds, strict=True)
        ]
    )
    return PBTSpec(
        every_updates=config.every_updates,
        burn_in_updates=config.burn_in_updates,
        num_updates=num_updates,
        num_members=num_members,
        selected=config.selected(num_members),
        metric_tags=tuple(config.metric),
        metric_index=tuple(tags.index(tag) for tag in config.metric),
        smoothing=config.smoothing,
        ema_decay=config.ema_decay,
        window=config.window,
        explore=config.explore,
        factors=np.asarray(config.factors, np.float32),
        resample_probability=config.resample_probability,
        keys=config.keys,
        low=np.asarray([b.min for b in bounds], np.float32),
        high=np.asarray([b.max for b in bounds], np.float32),
        log=np.asarray([b.log for b in bounds], bool),
        grid=grid,
        grid_size=grid_size,
        draws=draws,
        draw_size=draw_size,
        copied_features=tuple(copied_features),
        max_nonfinite=max_nonfinite,
        min_gap=np.asarray(config.min_gap, np.float32) if config.min_gap else None,
        min_gap_se=np.asarray(config.min_gap_se, np.float32) if config.min_gap_se else None,
        merged_features=tuple(merged_features),
    )


# ---- carried state ------------------------------------------------------------------------


class Smoothed(struct.PyTreeNode):
    """One member's smoothed ranking metrics (``K`` tags)."""

    ema: jax.Array  # [K] float32, exponential average of the values pushed (before correction)
    ema_sq: jax.Array  # [K] float32, the same average of the squared values
    ema_norm: jax.Array  # [K] float32, 1 - decay^count: divides ema into an unbiased mean
    ema_weight_sq: jax.Array  # [K] float32, sum of the squared EMA weights (effective count)
    window: jax.Array  # [W, K] float32, ring buffer: value i at row i % W
    count: jax.Array  # [K] int32, values pushed since the member began (or last copied)

    @classmethod
    def create(cls, num_tags: int, window: int) -> Smoothed:
        """Nothing pushed yet."""
        return cls(
            ema=jnp.zeros((num_tags,), jnp.float32),
            ema_sq=jnp.zeros((num_tags,), jnp.float32),
            ema_norm=jnp.zeros((num_tags,), jnp.float32),
            ema_weight_sq=jnp.zeros((num_tags,), jnp.float32),
            window=jnp.zeros((window, num_tags), jnp.float32),
            count=jnp.zeros((num_tags,), jnp.int32),
        )


class PBTState(struct.PyTreeNode):
    """PBT's state of one member (leaves ``[R, ...]`` for the population)."""

    smoothed: Smoothed
    parent: jax.Array  # () int32, the member this one last copied; itself before any copy
    generation: jax.Array  # () int32, copies along this member's line of ancestors
    key: jax.Array  # typed PRNG key of this member's PBT draws (parent, explore)


def init_population(spec: PBTSpec, seeds: Sequence[int]) -> PBTState:
    """The state of every member at the start (leaves ``[R, ...]``).

    Member ``m``'s key is ``fold_in(key(seeds[m]), STREAM)``: a stream of its own beside the
    runner's (which splits ``key(seed)``), so turning PBT on changes no other random number.
    """
    count = len(seeds)
    keys = jnp.stack([jax.random.fold_in(jax.random.key(s), STREAM) for s in seeds])
    smoothed = Smoothed.create(len(spec.metric_tags), spec.window)
    return PBTState(
        smoothed=jax.tree.map(lambda x: jnp.broadcast_to(x, (count, *x.shape)), smoothed),
        parent=jnp.arange(count, dtype=jnp.int32),
        generation=jnp.zeros((count,), jnp.int32),
        key=keys,
    )


# ---- smoothing and ranking ----------------------------------------------------------------


def push(spec: PBTSpec, smoothed: Smoothed, values: jax.Array, valid: jax.Array) -> Smoothed:
    """One member's smoothed metrics with ``values [K]`` pushed where ``valid [K]``."""
    decay = jnp.float32(spec.ema_decay)
    values = values.astype(jnp.float32)
    row = smoothed.count % spec.window  # [K]
    window = smoothed.window.at[row, jnp.arange(values.shape[0])].set(values)
    pushed = Smoothed(
        ema=decay * smoothed.ema + (1 - decay) * values,
        ema_sq=decay * smoothed.ema_sq + (1 - decay) * values * values,
        ema_norm=decay * smoothed.ema_norm + (1 - decay),
        ema_weight_sq=decay * decay * smoothed.ema_weight_sq + (1 - decay) ** 2,
        window=window,
        count=smoothed.count + 1,
    )
    keep = lambda new, old: jnp.where(valid, new, old)  # noqa: E731 - [K] columns
    return Smoothed(
        ema=keep(pushed.ema, smoothed.ema),
        ema_sq=keep(pushed.ema_sq, smoothed.ema_sq),
        ema_norm=keep(pushed.ema_norm, smoothed.ema_norm),
        ema_weight_sq=keep(pushed.ema_weight_sq, smoothed.ema_weight_sq),
        window=jnp.where(valid[None, :], pushed.window, smoothed.window),
        count=keep(pushed.count, smoothed.count),
    )


def _ema_mean(smoothed: Smoothed) -> jax.Array:
    """float32 [K]: the bias-corrected EMA (garbage where nothing was pushed)."""
    return smoothed.ema / jnp.maximum(smoothed.ema_norm, 1e-30)


def _window_values(smoothed: Smoothed) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(used [W, K] bool, n [K] float32, mean [K])`` of the values in the window."""
    size = smoothed.window.shape[0]
    used = jnp.arange(size)[:, None] < jnp.minimum(smoothed.count, size)[None, :]
    n = used.sum(0).astype(jnp.float32)
    mean = jnp.where(used, smoothed.window, 0.0).sum(0) / jnp.maximum(n, 1.0)
    return used, n, mean


def score(spec: PBTSpec, smoothed: Smoothed) -> jax.Array:
    """float32 [K]: one member's smoothed metrics (nan where nothing was pushed)."""
    value = _ema_mean(smoothed) if spec.smoothing == "ema" else _window_values(smoothed)[2]
    return jnp.where(smoothed.count > 0, value, jnp.nan)


def standard_error(spec: PBTSpec, smoothed: Smoothed) -> jax.Array:
    """float32 [K]: the standard error of each of one member's smoothed metrics.

    Window: ``s / sqrt(n)`` over the ``n`` values in the window (``s`` the sample standard
    deviation). EMA: the weighted variance of the values (from the EMA of their squares,
    with the unbiased correction for weights) over the effective count ``n_eff =
    (sum w)^2 / sum w^2``, which tends to ``(1 + decay) / (1 - decay)``. 0 where nothing was
    pushed (a member without a value trails any other, see :func:`clearly_ahead`); inf with a
    single value (its noise is unknown).
    """
    if spec.smoothing == "ema":
        mean = _ema_mean(smoothed)
        second = smoothed.ema_sq / jnp.maximum(smoothed.ema_norm, 1e-30)
        n_eff = smoothed.ema_norm**2 / jnp.maximum(smoothed.ema_weight_sq, 1e-30)
        spread = jnp.maximum(second - mean * mean, 0.0)
        variance = spread * n_eff / jnp.maximum(n_eff - 1.0, 1e-6)
        several = n_eff > 1.0 + 1e-3
    else:
        used, n_eff, mean = _window_values(smoothed)
        squares = jnp.where(used, (smoothed.window - mean) ** 2, 0.0).sum(0)
        variance = squares / jnp.maximum(n_eff - 1.0, 1.0)
        several = n_eff >= 2
    se = jnp.where(several, jnp.sqrt(variance / jnp.maximum(n_eff, 1.0)), jnp.inf)
    return jnp.where(smoothed.count > 0, se, 0.0).astype(jnp.float32)


def pair_gaps(spec: PBTSpec, parent_se: jax.Array, child_se: jax.Array) -> jax.Array:
    """float32 [R, K]: the lead each parent needs over its child on each tag: the larger of
    ``min_gap`` (0 when unset) and ``min_gap_se`` standard errors of the difference."""
    zeros = np.zeros(len(spec.metric_tags), np.float32)
    fixed = jnp.asarray(spec.min_gap if spec.min_gap is not None else zeros)
    sigmas = jnp.asarray(spec.min_gap_se if spec.min_gap_se is not None else zeros)
    noise = jnp.sqrt(parent_se**2 + child_se**2)  # [R, K]
    relative = jnp.where(sigmas > 0, sigmas * noise, 0.0)  # 0 x inf would be nan
    return jnp.maximum(fixed, relative)


def ranking(scores: jax.Array, eligible: jax.Array) -> jax.Array:
    """int32 [R]: the members best first.

    Args:
      scores: float32 [R, K], compared lexicographically (column 0 first); higher is better.
      eligible: bool [R]; a member that is not, or has a nan score, ranks after all others.

    Ties go to the lower member index (the order is a stable sort: the same on every device).
    """
    count = scores.shape[0]
    usable = eligible[:, None] & ~jnp.isnan(scores)
    keyed = jnp.where(usable, -scores, jnp.inf)  # ascending sort of -score: best first
    # lexsort: the last key is the primary one; the member index breaks ties.
    sort_keys = (jnp.arange(count), *(keyed[:, k] for k in reversed(range(scores.shape[1]))))
    return jnp.lexsort(sort_keys).astype(jnp.int32)


def member_scores(spec: PBTSpec, smoothed: Smoothed) -> np.ndarray:
    """float32 ``[R, K]``: every member's smoothed ranking metrics (host side; nan where
    nothing was pushed), from a population's :class:`Smoothed` (leaves ``[R, ...]``)."""
    smoothed = jax.tree.map(jnp.asarray, smoothed)
    return np.asarray(jax.vmap(lambda one: score(spec, one))(smoothed))


def select_sources(order: jax.Array, draws: jax.Array, selected: int) -> jax.Array:
    """int32 [R]: the member each member copies (itself unless it is in the bottom quantile).

    Args:
      order: int32 [R], members best first (:func:`ranking`).
      draws: int32 [R] in ``[0, selected)``: the parent each member would take from the top.
      selected: ``n``, members in each quantile.
    """
    count = order.shape[0]
    rank = jnp.zeros((count,), jnp.int32).at[order].set(jnp.arange(count, dtype=jnp.int32))
    bottom = rank >= count - selected
    return jnp.where(bottom, order[draws], jnp.arange(count, dtype=jnp.int32))


def clearly_ahead(parent: jax.Array, child: jax.Array, gap: jax.Array) -> jax.Array:
    """bool [R]: each parent's smoothed metrics are clearly ahead of its child's.

    Clearly ahead: at the first tag (most significant first) where the two differ by more
    than that tag's gap, the parent's value is the higher. A child without a value (nan)
    trails any parent with one; a parent without one is never ahead.

    Args:
      parent, child: float32 [R, K] smoothed metrics (:func:`score`).
      gap: float32 [K] or [R, K] >= 0 (inf: that tag never decides).
    """
    child = jnp.where(jnp.isnan(child), -jnp.inf, child)
    diff = jnp.where(jnp.isnan(parent), -jnp.inf, parent - child)  # [R, K]
    decides = jnp.abs(diff) > gap  # [R, K]
    first = jnp.argmax(decides, axis=1)  # the first deciding tag (0 when none decides)
    ahead = jnp.take_along_axis(diff, first[:, None], axis=1)[:, 0] > 0
    return decides.any(axis=1) & ahead


# ---- exploit and explore ------------------------------------------------------------------


def copy_members(tree: Any, source: jax.Array) -> Any:
    """``tree`` (leaves ``[R, ...]``) with row ``m`` replaced by row ``source[m]``, bit for bit."""
    return jax.tree.map(lambda x: jnp.take(x, source, axis=0), tree)


def inherit(spec: PBTSpec, runner: Any, population: Any, source: jax.Array) -> Any:
    """The runner (local rows) after each member copied its source's row of ``population``.

    Copied: params, optimizer state, observation normaliser, the states of
    ``spec.copied_features``, the hyperparameters and the progress counters (update step and
    non-finite streak follow the weights, so a member stopped by non-finite updates resumes
    in step with the others). Kept: env states (``match``), the RNG key and the member's own
    count of non-finite updates.

    Args:
      runner: RunnerState, leaves ``[R_local, ...]``.
      population: the same fields, leaves ``[R, ...]`` (all members; ``runner`` itself
        without a sharded member axis).
      source: int32 [R_local] rows of ``population``.
    """
    take = lambda tree: copy_members(tree, source)  # noqa: E731
    merged = dict(spec.merged_features)
    features = {}
    for name, state in runner.features.items():
        if name in merged:
            features[name] = merged[name](state, take(population.features[name]))
        elif name in spec.copied_features:
            features[name] = take(population.features[name])
        else:
            features[name] = state
    return runner.replace(
        params=take(population.params),
        opt_state=take(population.opt_state),
        obs_stats=take(population.obs_stats),
        features=features,
        hyper=take(population.hyper),
        update_step=take(population.update_step),
        nonfinite_streak=take(population.nonfinite_streak),
    )


def explore_values(spec: PBTSpec, values: jax.Array, key: jax.Array) -> jax.Array:
    """float32 [H]: one member's explored values after a perturbation or a resample.

    Perturb: a value with a grid moves one step up or down it (staying at its ends), any
    other is multiplied by a factor drawn from ``spec.factors`` and clipped to its bounds; each
    value is resampled instead with ``spec.resample_probability``. Resample: a draw from the
    value's list (its grid, else the sweep's values), else uniform in its bounds (log-uniform
    with ``log``).
    """
    key_factor, key_step, key_coin, key_uniform, key_pick = jax.random.split(key, 5)
    del key
    count = values.shape[0]
    low, high = jnp.asarray(spec.low), jnp.asarray(spec.high)
    grid, grid_size = jnp.asarray(spec.grid), jnp.asarray(spec.grid_size)

    factors = jnp.asarray(spec.factors)
    factor = factors[jax.random.randint(key_factor, (count,), 0, factors.shape[0])]
    scaled = values * factor
    # The grid point nearest the value, then a step up or down (padding repeats the last point).
    nearest = jnp.argmin(jnp.abs(grid - values[:, None]), axis=1)
    step = jnp.where(jax.random.bernoulli(key_step, 0.5, (count,)), 1, -1)
    moved = jnp.clip(nearest + step, 0, jnp.maximum(grid_size - 1, 0))
    stepped = jnp.take_along_axis(grid, moved[:, None], axis=1)[:, 0]
    perturbed = jnp.where(grid_size > 0, stepped, scaled)

    draws, draw_size = jnp.asarray(spec.draws), jnp.asarray(spec.draw_size)
    pick = jax.random.randint(key_pick, (count,), 0, jnp.maximum(draw_size, 1))
    drawn = jnp.take_along_axis(draws, pick[:, None], axis=1)[:, 0]
    u = jax.random.uniform(key_uniform, (count,), jnp.float32)
    log = jnp.asarray(spec.log)
    safe_low = jnp.where(log, low, 1.0)  # log of a bound only where log is set (min > 0)
    safe_high = jnp.where(log, high, 1.0)
    log_uniform = jnp.exp(jnp.log(safe_low) + u * (jnp.log(safe_high) - jnp.log(safe_low)))
    uniform = jnp.where(log, log_uniform, low + u * (high - low))
    resampled = jnp.where(draw_size > 0, drawn, uniform)

    if spec.explore == "resample":
        new = resampled
    else:
        coin = jax.random.uniform(key_coin, (count,)) < spec.resample_probability
        new = jnp.where(coin, resampled, perturbed)
    return jnp.clip(new, low, high).astype(jnp.float32)


def explored(spec: PBTSpec, hyper: Hyper) -> jax.Array:
    """float32 [..., H]: the explored values of ``hyper`` (leaves ``[...]``)."""
    return jnp.stack([get_value(hyper, key) for key in spec.keys], axis=-1).astype(jnp.float32)


def with_explored(spec: PBTSpec, hyper: Hyper, values: jax.Array) -> Hyper:
    """``hyper`` with the explored values ``[..., H]`` written in."""
    for i, key in enumerate(spec.keys):
        hyper = set_value(hyper, key, values[..., i])
    return hyper


# ---- the population step ------------------------------------------------------------------


def all_members(tree: Any, axis: str | None) -> Any:
    """``tree`` (leaves ``[R_local, ...]``) with every device's members (``[R, ...]``)."""
    if axis is None:
        return tree
    return jax.tree.map(lambda x: jax.lax.all_gather(x, axis, axis=0, tiled=True), tree)


def my_rows(x: jax.Array, axis: str | None, local: int) -> jax.Array:
    """This device's ``local`` rows of a population array ``[R, ...]``."""
    if axis is None:
        return x
    return jax.lax.dynamic_slice_in_dim(x, jax.lax.axis_index(axis) * local, local, axis=0)


class PBTEvent(struct.PyTreeNode):
    """What one exploit-and-explore did, per member (local rows)."""

    source: jax.Array  # [R_local] int32, the member each copied (itself if not replaced)
    replaced: jax.Array  # [R_local] bool


def exploit_explore(
    spec: PBTSpec, state: PBTState, runner: Any, axis: str | None = None
) -> tuple[PBTState, Any, PBTEvent]:
    """Rank, copy, perturb and record lineage (members on the leading axis, see module doc).

    Args:
      state: PBTState, leaves ``[R_local, ...]``.
      runner: RunnerState, leaves ``[R_local, ...]``.
      axis: the mesh axis the member dimension is sharded over (None: not sharded).
    """
    local = state.parent.shape[0]
    split = jax.vmap(lambda k: jax.random.split(k, 3))(state.key)
    key, key_parent, key_explore = split[:, 0], split[:, 1], split[:, 2]
    draws = jax.vmap(lambda k: jax.random.randint(k, (), 0, spec.selected))(key_parent)
    scores = jax.vmap(lambda s: score(spec, s))(state.smoothed)
    alive = runner.nonfinite_streak < spec.max_nonfinite
    every = all_members((scores, alive, draws, state.generation), axis)
    order = ranking(every[0], every[1])
    sources = select_sources(order, every[2], spec.selected)  # [R]
    members = jnp.arange(spec.num_members, dtype=jnp.int32)  # [R]
    if spec.min_gap_se is not None:  # the standard errors only where a gate reads them
        errors = all_members(jax.vmap(lambda s: standard_error(spec, s))(state.smoothed), axis)
        gaps = pair_gaps(spec, jnp.take(errors, sources, axis=0), errors)
    else:
        gaps = spec.min_gap
    if gaps is not None:  # keep its own line unless the parent is clearly ahead
        ahead = clearly_ahead(jnp.take(every[0], sources, axis=0), every[0], gaps)
        sources = jnp.where(ahead | ~every[1], sources, members)  # a stopped member copies
    source = my_rows(sources, axis, local)
    own = my_rows(members, axis, local)
    replaced = source != own

    population = runner if axis is None else all_members(_copied_fields(runner), axis)
    child = inherit(spec, runner, population, source)
    inherited = explored(spec, child.hyper)  # [R_local, H]
    new_values = jax.vmap(lambda v, k: explore_values(spec, v, k))(inherited, key_explore)
    values = jnp.where(replaced[:, None], new_values, inherited)
    child = child.replace(hyper=with_explored(spec, child.hyper, values))

    fresh = Smoothed.create(len(spec.metric_tags), spec.window)
    smoothed = jax.tree.map(
        lambda old, new: jnp.where(replaced.reshape((-1,) + (1,) * (old.ndim - 1)), new, old),
        state.smoothed,
        jax.tree.map(lambda x: jnp.broadcast_to(x, (local, *x.shape)), fresh),
    )
    state = PBTState(
        smoothed=smoothed,
        parent=jnp.where(replaced, source, state.parent),
        generation=jnp.where(replaced, jnp.take(every[3], source) + 1, state.generation),
        key=key,
    )
    return state, child, PBTEvent(source=source, replaced=replaced)


def _copied_fields(runner: Any) -> Any:
    """The fields :func:`inherit` reads from the population (no env states, no keys)."""
    return runner.replace(match=None, key=None)


def population_step(
    spec: PBTSpec,
    state: PBTState,
    runner: Any,
    ran: jax.Array,
    packed: Scalar,
    axis: str | None = None,
    replica_axis: str | None = None,
) -> tuple[PBTState, Any, dict[str, Scalar]]:
    """PBT after one update of every member: smooth, and every ``every_updates`` updates
    exploit and explore (in a ``lax.cond``: the same compiled program whether it fires or not).

    Args:
      state: PBTState, leaves ``[R_local, ...]``.
      runner: RunnerState after the update, leaves ``[R_local, ...]``.
      ran: bool [R_local], the member trained in this update (not past its end or stopped).
      packed: Scalar [R_local, M], the update's packed metrics (:func:`jaxrl.core.metrics.pack`).
      axis: the mesh axis of the member dimension (None: not sharded).
      replica_axis: a mesh axis the members are replicated over (the env batch's, when the
        envs are sharded): the ranking metrics are averaged over it (weighted), so every
        replica makes the same decision even from a metric a device computes on its own.

    Returns:
      ``(state, runner, metrics)``, metrics ``{tag: Scalar [R_local]}`` as :func:`metric_specs`.
    """
    values, weights = ranking_values(spec, packed, replica_axis)
    valid = (weights > 0) & ran[:, None]
    state = state.replace(
        smoothed=jax.vmap(lambda s, v, ok: push(spec, s, v, ok))(state.smoothed, values, valid)
    )
    fire = fires(spec, runner.update_step, ran, axis)

    def skip(state, runner):
        local = state.parent.shape[0]
        own = my_rows(jnp.arange(spec.num_members, dtype=jnp.int32), axis, local)
        return state, runner, PBTEvent(source=own, replaced=jnp.zeros((local,), bool))

    # Env states and keys stay out of the cond: never copied, they need not pass through it.
    copied = _copied_fields(runner)
    state, copied, event = jax.lax.cond(
        fire, lambda s, r: exploit_explore(spec, s, r, axis), skip, state, copied
    )
    runner = copied.replace(match=runner.match, key=runner.key)
    return state, runner, step_metrics(spec, state, runner, event, fire, ran)


def ranking_values(
    spec: PBTSpec, packed: Scalar, replica_axis: str | None
) -> tuple[jax.Array, jax.Array]:
    """``(values, weights)`` ``[R_local, K]``: this update's ranking metrics, their weighted
    mean over ``replica_axis`` when set (the same on every replica)."""
    index = jnp.asarray(spec.metric_index)
    values, weights = packed.value[:, index], packed.weight[:, index]
    if replica_axis is not None:
        total = jax.lax.psum(values * weights, replica_axis)
        weights = jax.lax.psum(weights, replica_axis)
        values = total / jnp.maximum(weights, 1e-30)
    return values, weights


def fires(spec: PBTSpec, update_step: jax.Array, ran: jax.Array, axis: str | None) -> jax.Array:
    """() bool: PBT exploits and explores after this update (the same on every device)."""
    update = update_step.max()
    any_ran = ran.any()
    if axis is not None:
        update = jax.lax.pmax(update, axis)
        any_ran = jax.lax.pmax(any_ran.astype(jnp.int32), axis) > 0
    return (
        any_ran
        & (update % spec.every_updates == 0)
        & (update >= spec.burn_in_updates)
        & (update < spec.num_updates)
    )


def step_metrics(
    spec: PBTSpec,
    state: PBTState,
    runner: Any,
    event: PBTEvent,
    fire: jax.Array,
    ran: jax.Array,
) -> dict[str, Scalar]:
    """The declared metrics (:func:`metric_specs`) of one population step, per member."""
    weight = ran.astype(jnp.float32)
    of = lambda x: Scalar(value=jnp.asarray(x, jnp.float32), weight=weight)  # noqa: E731
    first = jax.vmap(lambda s: score(spec, s))(state.smoothed)[:, 0]
    return {
        "pbt/parent": of(state.parent),
        "pbt/generation": of(state.generation),
        "pbt/replaced": of(event.replaced),
        "pbt/events": of(jnp.broadcast_to(fire, ran.shape)),
        "pbt/score": of(first),
        **{tag: of(value) for tag, value in value_tags(runner.hyper).items()},
    }


def metric_specs(hyper: Hyper) -> tuple[MetricSpec, ...]:
    """The metrics :func:`population_step` returns, for members whose values are ``hyper``.

    Lineage and values at the end of a chunk; replacements and events counted over it.
    """
    return (
        MetricSpec("pbt/parent", "last"),
        MetricSpec("pbt/generation", "last"),
        MetricSpec("pbt/replaced", "sum"),
        MetricSpec("pbt/events", "sum"),
        MetricSpec("pbt/score", "last"),
        *(MetricSpec(tag, "last") for tag in value_tags(hyper)),
    )


def summary(spec: PBTSpec) -> list[str]:
    """Lines for the run summary: the schedule and the bounds of what the members explore."""
    tags = ", ".join(spec.metric_tags)
    smoothing = f"EMA {spec.ema_decay:g}" if spec.smoothing == "ema" else f"window {spec.window}"
    if spec.explore == "perturb":
        how = "perturb x{" + ", ".join(f"{f:g}" for f in spec.factors) + "}"
        if spec.resample_probability:
            how += f", resample with p {spec.resample_probability:g}"
    else:
        how = "resample"
    bounds = []
    for i, key in enumerate(spec.keys):
        text = f"{key} in [{spec.low[i]:g}, {spec.high[i]:g}]" + (" log" if spec.log[i] else "")
        if spec.grid_size[i]:
            text += " grid {" + ", ".join(f"{v:g}" for v in spec.grid[i, : spec.grid_size[i]]) + "}"
        bounds.append(text)
    gates = []
    if spec.min_gap is not None:
        gates.append("gaps " + ", ".join(f"{g:g}" for g in spec.min_gap))
    if spec.min_gap_se is not None:
        gates.append("standard errors " + ", ".join(f"{g:g}" for g in spec.min_gap_se))
    gate = f" when clearly ahead ({'; '.join(gates)})" if gates else ""
    start = f" from update {spec.burn_in_updates}" if spec.burn_in_updates else ""
    return [
        f"pbt          every {spec.every_updates} updates{start} the bottom {spec.selected} of "
        f"{spec.num_members} members copy the top {spec.selected}{gate} (ranked on {tags}, "
        f"{smoothing}); explore: {how}",
        f"             {'; '.join(bounds)}",
    ]


# ---- the population feature ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class PopulationBasedTraining(PopulationFeature):
    """PBT as the run's population feature (``features["pbt"]``, its checkpoint item). It
    owns the members: a child copies its parent whole (params, optimiser, feature states)."""

    name = PBT
    owns_members = True
    spec: PBTSpec

    def init(self, seeds: Sequence[int]) -> PBTState:
        """Every member's state (:func:`init_population`)."""
        return init_population(self.spec, seeds)

    def after_members(
        self, state: PBTState, members: Any, ran: jax.Array, packed: Scalar, replica_axis=None
    ) -> tuple[PBTState, Any, dict[str, Scalar]]:
        """Smooth, and on schedule exploit and explore (:func:`population_step`)."""
        return population_step(self.spec, state, members, ran, packed, replica_axis=replica_axis)

    def metric_specs(self, hyper: Hyper) -> tuple[MetricSpec, ...]:
        """Lineage, events and values (:func:`metric_specs`)."""
        return metric_specs(hyper)

    def summary(self, state: Any) -> list[str]:
        """The schedule and bounds (:func:`summary`)."""
        del state
        return summary(self.spec)


def make_pbt(setup: Any, metric_tags: Sequence[str]) -> PopulationBasedTraining | None:
    """The run's PBT (None without ``pbt:``) for a built run ``setup`` whose members' update
    packs ``metric_tags``: a child copies every feature's state, and takes each learner
    feature's as that feature inherits it.

    Raises:
      ConfigError: ``pbt.metric`` names a tag no part of the train step declares.
    """
    config = setup.config
    try:
        spec = make_spec(
            config.pbt,
            num_members=setup.members.count,
            num_updates=config.num_updates,
            metric_tags=metric_tags,
            sweep=config.sweep,
            copied_features=tuple(feature.name for feature in setup.features),
            max_nonfinite=config.train.max_nonfinite_updates,
            merged_features=tuple((f.name, f.inherit) for f in setup.learner_features),
        )
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return None if spec is None else PopulationBasedTraining(spec=spec)


def pbt_spec(setup: Any) -> PBTSpec | None:
    """The PBT spec of a built run (None without PBT), for host-side tools and tests."""
    for feature in setup.population_features:
        if isinstance(feature, PopulationBasedTraining):
            return feature.spec
    return None


REGISTRATION = Registration(build=make_pbt, kind="population")
