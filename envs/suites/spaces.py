"""A suite's own spaces as gymnax's: :func:`to_gymnax_space`.

Suites ship their own copies of gymnax's spaces (Craftax's ``craftax.environment_base.spaces``,
Kinetix's) or spaces of their own (Navix's ``Discrete``/``Continuous`` with ``minimum`` and
``maximum``). The trainer reads gymnax's (``gymnax.environments.spaces``): a ``Discrete`` action
space gets a categorical head, a ``Box`` a Gaussian one. Spaces are recognised by class name
and the fields that name implies, so no suite is imported here.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

GYMNAX_SPACES = (spaces.Discrete, spaces.Box, spaces.Dict, spaces.Tuple)


def to_gymnax_space(space: Any) -> Any:
    """A gymnax space equal to ``space`` (gymnax's own are returned as they are).

    - a ``Discrete`` with ``n`` (gymnax copies) or ``minimum``/``maximum`` (Navix) and shape
      ``()``: ``Discrete(n)``; with a non-scalar shape (a grid of categories, Navix's
      observations): a float32 ``Box(0, n - 1, shape)``;
    - a ``Box`` (``low``, ``high``) or ``Continuous`` (``minimum``, ``maximum``): a ``Box``
      of the same bounds, shape and dtype;
    - a ``Dict`` / ``Tuple`` of those: gymnax's ``Dict`` / ``Tuple`` of the converted spaces.

    Raises:
      ValueError: one line naming the space's class, if it is none of these.
    """
    if isinstance(space, GYMNAX_SPACES):
        return space
    kind = type(space).__name__
    if kind == "Discrete":
        return _discrete(space)
    if kind in ("Box", "Continuous"):
        low, high = (space.low, space.high) if kind == "Box" else (space.minimum, space.maximum)
        return spaces.Box(low, high, tuple(space.shape), space.dtype)
    if kind == "Dict":
        return spaces.Dict({k: to_gymnax_space(v) for k, v in dict(space.spaces).items()})
    if kind == "Tuple":
        return spaces.Tuple([to_gymnax_space(v) for v in space.spaces])
    raise ValueError(
        f"cannot map space {type(space).__module__}.{kind} to a gymnax space "
        "(known: Discrete, Box, Continuous, Dict, Tuple)"
    )


def _discrete(space: Any) -> Any:
    """gymnax ``Discrete`` (scalar) or float32 ``Box`` (a grid of categories)."""
    n = int(np.asarray(space.n).max())  # Navix's ``n`` is an array (``maximum + 1``)
    shape = tuple(space.shape)
    if shape == ():
        return spaces.Discrete(n)
    return spaces.Box(0.0, float(n - 1), shape, jnp.float32)


def float32_box(space: Any) -> Any:
    """``space`` (gymnax) with float32 dtype if it is a ``Box``: the adapters cast observations."""
    if isinstance(space, spaces.Box):
        return spaces.Box(space.low, space.high, tuple(space.shape), jnp.float32)
    return space
