"""Metrics declared once: each update emits ``{tag: Scalar}``; a chunk reduces them by spec.

A metric is a :class:`MetricSpec` (its TensorBoard tag and how a chunk of updates reduces
it). Every part of the train step (the PPO core and each feature) declares its specs and
returns one :class:`Scalar` per tag from every update; the train step packs them in
declaration order (:func:`pack`), :func:`reduce_packed` turns the ``[K, M]`` values of a
compiled chunk into one number per tag, and the logger writes every tag it gets. Adding a
metric therefore means declaring it and returning it, nothing else.

Reductions (``weight`` is the Scalar's weight, 0 for an update that did not produce it):
  ``mean``: ``sum(value * weight) / sum(weight)`` (nan when no weight), e.g. a loss
      (weight 1 per update that ran) or an episode return (value = mean return of the
      update's episodes, weight = their number: the mean over all episodes of the chunk);
  ``sum``: ``sum(value * weight)``, e.g. promotions or skipped updates;
  ``last``: the value of the last update with a non-zero weight (nan when none), e.g. the
      curriculum stage at the end of the chunk.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

REDUCTIONS = ("mean", "sum", "last")


@dataclasses.dataclass(frozen=True)
class MetricSpec:
    """A metric's TensorBoard tag and its chunk reduction (one of :data:`REDUCTIONS`)."""

    tag: str
    reduce: str = "mean"

    def __post_init__(self):
        """Reject unknown reductions at declaration time."""
        if self.reduce not in REDUCTIONS:
            raise ValueError(f"metric {self.tag}: reduce must be one of {REDUCTIONS}")


class Scalar(struct.PyTreeNode):
    """One update's value of a metric and its weight in the chunk reduction."""

    value: jax.Array  # () float32
    weight: jax.Array  # () float32, 0 = not produced by this update

    @classmethod
    def of(cls, value, weight=1.0) -> Scalar:
        """A float32 scalar with a float32 weight."""
        return cls(value=jnp.asarray(value, jnp.float32), weight=jnp.asarray(weight, jnp.float32))


def mean_of(total, count) -> Scalar:
    """The mean ``total / count`` weighted by ``count`` (0 when ``count`` is 0)."""
    count = jnp.asarray(count, jnp.float32)
    return Scalar.of(jnp.asarray(total, jnp.float32) / jnp.maximum(count, 1.0), count)


def pack(specs: tuple[MetricSpec, ...], scalars: dict[str, Scalar]) -> Scalar:
    """One update's metrics as two arrays ``[M]`` in declaration order (``[..., M]`` for
    stacked scalars).

    A compiled chunk stacks what each update returns; two ``[M]`` arrays cost the scan two
    buffer writes per update instead of ``2 M``.

    Raises:
      KeyError: a declared metric was not produced, or a produced one was not declared
        (caught at trace time, so a forgotten declaration never silently drops a metric).
    """
    declared = {spec.tag for spec in specs}
    missing = declared - set(scalars)
    extra = set(scalars) - declared
    if missing or extra:
        raise KeyError(
            f"metrics declared but not produced: {sorted(missing)}; "
            f"produced but not declared: {sorted(extra)}"
        )
    return Scalar(
        value=jnp.stack([scalars[spec.tag].value for spec in specs], axis=-1),
        weight=jnp.stack([scalars[spec.tag].weight for spec in specs], axis=-1),
    )


def idle_packed(specs: tuple[MetricSpec, ...]) -> Scalar:
    """The packed metrics of an update that did not run (zero weights)."""
    zeros = jnp.zeros((len(specs),), jnp.float32)
    return Scalar(value=zeros, weight=zeros)


def reduce_packed(specs: tuple[MetricSpec, ...], packed: Scalar) -> dict[str, jax.Array]:
    """``{tag: ()}`` from a chunk's stacked packed metrics ``[K, M]``."""
    return {
        spec.tag: reduce_one(spec, Scalar(value=packed.value[..., i], weight=packed.weight[..., i]))
        for i, spec in enumerate(specs)
    }


def reduce_one(spec: MetricSpec, scalar: Scalar) -> jax.Array:
    """Reduce a metric's ``[K]`` values over a chunk (see the module docstring)."""
    value, weight = scalar.value, scalar.weight
    total = jnp.sum(weight)
    if spec.reduce == "sum":
        return jnp.sum(value * weight)
    if spec.reduce == "last":
        produced = weight > 0
        last = jnp.max(jnp.where(produced, jnp.arange(value.shape[0]), -1))
        return jnp.where(last >= 0, value[jnp.maximum(last, 0)], jnp.nan)
    return jnp.where(total > 0, jnp.sum(value * weight) / jnp.maximum(total, 1e-30), jnp.nan)


def reduce_chunk(specs: tuple[MetricSpec, ...], scalars: dict[str, Scalar]) -> dict[str, jax.Array]:
    """``{tag: ()}`` from ``{tag: Scalar[K]}`` (the unpacked form of :func:`reduce_packed`)."""
    return reduce_packed(specs, pack(specs, scalars))
