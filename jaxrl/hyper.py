"""Traced hyperparameters and the members of a run (seeds and sweep points).

A run trains ``R = len(sweep points) x train.num_seeds`` independent members in one
compiled program: every leaf of the runner state gets a leading ``[R]`` axis and the chunk
function is ``jax.vmap``ped over it. Member ``m`` is sweep point ``m // num_seeds`` with seed
``seed + m % num_seeds``; with one member there is no leading axis at all.

The hyperparameters a sweep may vary are array leaves of :class:`Hyper`, carried in the
runner state, so every member traces the same function: no recompile per value.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from flax import struct

from jaxrl.config import SWEEPABLE, Config


class Hyper(struct.PyTreeNode):
    """The traced PPO hyperparameters of one member (float32 scalars)."""

    lr: jax.Array  # Adam learning rate before annealing
    ent_coef: jax.Array  # entropy bonus weight
    clip_eps: jax.Array  # ratio (and value) clip
    gamma: jax.Array  # discount
    gae_lambda: jax.Array  # GAE lambda
    vf_coef: jax.Array  # value loss weight


@dataclasses.dataclass(frozen=True)
class Members:
    """Who the ``R`` members of a run are (static)."""

    names: tuple[str, ...]  # TensorBoard run names: seed3, or lr=0.001-seed3 for sweeps
    seeds: tuple[int, ...]  # [R] seed of each member
    points: tuple[dict[str, float], ...]  # [R] the member's swept values (empty without sweep)
    hyper: Hyper  # leaves [R] float32 (numpy)

    @property
    def count(self) -> int:
        """``R``."""
        return len(self.names)


def base_hyper(config: Config) -> Hyper:
    """The config's own hyperparameters (float32 numpy scalars)."""
    ppo = config.ppo
    value = lambda x: np.float32(x)  # noqa: E731
    return Hyper(
        lr=value(ppo.lr),
        ent_coef=value(ppo.ent_coef),
        clip_eps=value(ppo.clip_eps),
        gamma=value(ppo.gamma),
        gae_lambda=value(ppo.gae_lambda),
        vf_coef=value(ppo.vf_coef),
    )


def make_members(config: Config) -> Members:
    """Seeds ``seed .. seed + num_seeds - 1`` for every sweep point, point-major."""
    seeds = config.train.num_seeds
    sweep = config.sweep
    points_count = len(next(iter(sweep.values()))) if sweep else 1
    base = base_hyper(config)
    names, member_seeds, points, hypers = [], [], [], []
    for p in range(points_count):
        point = {key: float(values[p]) for key, values in sweep.items()}
        changes = {SWEEPABLE[key]: np.float32(value) for key, value in point.items()}
        hyper = base.replace(**changes)
        label = "-".join(f"{key.split('.')[-1]}={value:g}" for key, value in point.items())
        for s in range(seeds):
            seed = config.seed + s
            names.append(f"{label}-seed{seed}" if label else f"seed{seed}")
            member_seeds.append(seed)
            points.append(point)
            hypers.append(hyper)
    stacked = jax.tree.map(lambda *xs: np.stack(xs).astype(np.float32), *hypers)
    return Members(
        names=tuple(names), seeds=tuple(member_seeds), points=tuple(points), hyper=stacked
    )
