"""Domains of env parameters: the bounds or choices declared beside each ``EnvParams`` field.

A field declares its domain in its dataclass metadata, with :func:`param`::

    class EnvParams(struct.PyTreeNode):
        red_agent: int = param(1, Choices({-1: "drawn", 0: "Sleep", 1: "B_line", 2: "Meander"}))
        red_bline_prob: float = param(0.5, Interval(0.0, 1.0))

Every way a value enters (config ``env.kwargs``, curriculum stages, evaluation lanes, the
exploiters' env, ``--env-param`` of evaluate, tournament and render, sweeps and PBT bounds)
passes :func:`check_value`, through :func:`jaxrl.envs.params.override_params` or
:func:`jaxrl.envs.params.check_overrides`: a value outside is one line naming the key, the value
and the domain. A field without a declared domain takes any value of its kind (its dtype is
still checked). Domains are a :class:`jaxrl.envs.protocols.Domain`; env authors may write their own.
Params classes one cannot edit (gymnax's) get theirs from :func:`declare_domains`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from flax import struct

from jaxrl.envs.protocols import Domain

DOMAIN_KEY = "domain"  # the dataclass metadata key of a field's domain


@dataclasses.dataclass(frozen=True)
class Interval:
    """Numbers in ``[low, high]`` (either end may be open or absent); arrays element-wise."""

    low: float | None = None  # None: no lower bound
    high: float | None = None  # None: no upper bound
    low_open: bool = False  # True: low itself is excluded
    high_open: bool = False  # True: high itself is excluded

    def contains(self, value: Any) -> bool:
        """Whether every element of ``value`` lies in the interval (NaN never does)."""
        array = np.asarray(value, dtype=np.float64)
        ok = ~np.isnan(array)
        if self.low is not None:
            ok &= array > self.low if self.low_open else array >= self.low
        if self.high is not None:
            ok &= array < self.high if self.high_open else array <= self.high
        return bool(ok.all())

    def __str__(self) -> str:
        low = "-inf" if self.low is None else _number(self.low)
        high = "inf" if self.high is None else _number(self.high)
        left = "(" if self.low_open or self.low is None else "["
        right = ")" if self.high_open or self.high is None else "]"
        return f"{left}{low}, {high}{right}"


@dataclasses.dataclass(frozen=True)
class Choices:
    """One of a few values, each with a name (``{0: "idle", 1: "rule", 2: "random"}``)."""

    values: Mapping[Any, str]  # allowed value -> what it means

    def contains(self, value: Any) -> bool:
        """Whether ``value`` (every element of an array) is one of the choices."""
        array = np.asarray(value)
        if array.dtype.kind in "US":
            return all(str(v) in map(str, self.values) for v in array.ravel())
        allowed = [v for v in self.values if not isinstance(v, str)]
        return bool(np.isin(array, allowed).all())

    def __str__(self) -> str:
        return "one of " + ", ".join(
            f"{v!r}" if name == v else f"{v!r} ({name})" for v, name in self.values.items()
        )

    def __hash__(self) -> int:
        return hash(tuple(self.values.items()))


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and math.isfinite(x) else f"{x:g}"


POSITIVE = Interval(0.0, None, low_open=True)  # (0, inf)
NON_NEGATIVE = Interval(0.0, None)  # [0, inf)
UNIT = Interval(0.0, 1.0)  # [0, 1]: probabilities, restitution, blends


def param(default: Any = dataclasses.MISSING, domain: Domain | None = None, **kwargs: Any):
    """A ``flax.struct`` field with its domain in the metadata (:data:`DOMAIN_KEY`).

    ``default`` is the field's default (use ``default_factory=`` for an array); other keyword
    arguments go to :func:`flax.struct.field` (``pytree_node=False`` for a static field).
    """
    metadata = {DOMAIN_KEY: domain} if domain is not None else {}
    if default is not dataclasses.MISSING:
        kwargs["default"] = default
    return struct.field(metadata=metadata, **kwargs)


# Domains of params classes whose fields cannot carry metadata (gymnax's): class -> field ->
# domain, declared with :func:`declare_domains` and inherited by subclasses.
_DECLARED: dict[type, dict[str, Domain]] = {}


def declare_domains(params_type: type, domains: Mapping[str, Domain]) -> None:
    """Declare the domains of fields of a params class one cannot edit (gymnax's EnvParams).

    Subclasses inherit them; a field's own metadata (:func:`param`) takes precedence.
    """
    _DECLARED.setdefault(params_type, {}).update(domains)


def domain_of(params: Any, name: str) -> Domain | None:
    """The declared domain of field ``name`` of the dataclass ``params``, or None."""
    for f in dataclasses.fields(params):
        if f.name == name and f.metadata.get(DOMAIN_KEY) is not None:
            return f.metadata[DOMAIN_KEY]
    for cls in type(params).__mro__:
        if name in _DECLARED.get(cls, {}):
            return _DECLARED[cls][name]
    return None


def check_value(key: str, value: Any, domain: Domain | None) -> None:
    """Refuse ``value`` outside ``domain`` (None: any value).

    Raises:
      ValueError: one line, ``"<key>=<value> is out of range: allowed <domain>"``.
    """
    if domain is not None and not domain.contains(value):
        shown = np.asarray(value).tolist() if hasattr(value, "dtype") else value
        shown = repr(shown) if isinstance(shown, str) else str(shown)
        raise ValueError(f"{key}={shown} is out of range: allowed {domain}")
