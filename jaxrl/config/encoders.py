"""Which encoder reads which leaf of an observation under ``network.encoder`` (pure Python).

The plan is part of the config's check of the env (``network.encoder`` must fit the env's
observations, at load) and what :class:`jaxrl.core.encoders.ObsEncoder` builds its layers
from; it needs no JAX, so the config checks it without the networks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jaxrl.envs.protocols import ObsLeaf, ObsLeaves

NATURE_MIN_SIZE = 36  # smallest side the Nature CNN's three VALID layers leave one pixel of


@dataclass(frozen=True)
class LeafEncoding:
    """How one leaf of an observation row is encoded (static)."""

    name: str  # the leaf's name: its encoder's parameters are ``<name>/...``
    shape: tuple[int, ...]  # the leaf's shape, e.g. (7, 7, 3)
    offset: int  # its first value in the flat row
    kind: str  # "flat" (its values as they are) | "nature" | "small"

    @property
    def end(self) -> int:
        """One past the leaf's last value in the row."""
        return self.offset + int(np.prod(self.shape, dtype=int))


def nature_fits(shape: Sequence[int]) -> bool:
    """Whether an ``[H, W, C]`` image is large enough for the Nature CNN."""
    return min(shape[0], shape[1]) >= NATURE_MIN_SIZE


def _shape(shape: Sequence[int]) -> str:
    return "x".join(str(n) for n in shape)


def _image_kind(encoder: str, leaf: ObsLeaf, what: str) -> str:
    if len(leaf.shape) != 3:
        return "flat"
    if encoder == "nature" and not nature_fits(leaf.shape):
        raise ValueError(
            f"nature needs images of at least {NATURE_MIN_SIZE}x{NATURE_MIN_SIZE}; "
            f"{what} {_shape(leaf.shape)}: use small or auto"
        )
    if encoder == "auto":
        return "nature" if nature_fits(leaf.shape) else "small"
    return encoder


def plan_encoders(
    encoder: str, obs_shape: Sequence[int], leaves: ObsLeaves | None = None, source: str = "the"
) -> tuple[LeafEncoding, ...] | None:
    """The encoding of one observation of ``obs_shape`` under ``network.encoder``.

    ``leaves``: the env's :class:`jaxrl.envs.protocols.ObsLeaves` (a structured observation), else
    the observation is one leaf ``obs``. ``auto``: each ``[H, W, C]`` leaf gets ``nature`` if
    it is at least 36x36, else ``small``; other leaves pass flat. None: no leaf is an image
    (or ``mlp``): the flattened row goes to the torso as it is.

    Raises:
      ValueError: the encoder does not fit the observation (one line; ``source`` names the env).
    """
    if encoder == "mlp":
        return None
    parts = leaves.leaves if leaves is not None else (ObsLeaf("obs", tuple(obs_shape), 0),)
    size = int(np.prod(obs_shape, dtype=int))
    if leaves is not None and leaves.size != size:
        raise ValueError(f"{source} observation leaves hold {leaves.size} values, its rows {size}")
    if not any(len(leaf.shape) == 3 for leaf in parts):
        if encoder == "auto":
            return None
        shapes = ", ".join(_shape(leaf.shape) for leaf in parts)
        raise ValueError(
            f"{encoder} needs image observations [H, W, C]; {source} observations are {shapes}: "
            "use mlp or auto"
        )
    what = lambda leaf: (  # noqa: E731 - the leaf in an error line
        f"{source} observations are" if leaves is None else f"{source} leaf {leaf.name!r} is"
    )
    return tuple(
        LeafEncoding(
            leaf.name, tuple(leaf.shape), leaf.offset, _image_kind(encoder, leaf, what(leaf))
        )
        for leaf in parts
    )
