"""The league's static opponent groups of the training envs.

With self-play configured, the ``E`` training envs of a device are cut into fixed groups,
in this order::

    [0, latest)                      the current policy (batched with the learner's pass)
    [latest, latest + rule)          the env's RulePolicy
    [pool_start, pool_start + L*n)   L pool lanes of n envs; each lane plays one snapshot

Groups are static, so every opponent's forward pass runs on a static slice with its own
params: there is no per-env copy of params, and changing who is in the pool never retraces.
The sizes are stored in the :class:`~jaxrl.core.layout.Layout` (``latest_envs``, ``rule_envs``,
``pool_lanes``, ``lane_envs``, ``pool_size``); this module sizes them and reads them.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config import SelfPlayConfig
from jaxrl.core.layout import Layout
from jaxrl.core.match import NETWORK


@dataclasses.dataclass(frozen=True)
class GroupSizes:
    """Static sizes of the opponent groups on one device (all 0 without self-play)."""

    latest_envs: int = 0  # training envs playing the current policy
    rule_envs: int = 0  # training envs playing the RulePolicy
    pool_lanes: int = 0  # lanes of envs playing pool snapshots
    lane_envs: int = 0  # envs per pool lane
    pool_size: int = 0  # snapshots kept (0 without self-play)


def group_sizes(config: SelfPlayConfig, num_envs: int) -> GroupSizes:
    """The groups of ``num_envs`` training envs (one device's) under ``config``.

    ``latest_fraction`` and ``rule_fraction`` of the envs (rounded), the rest in
    ``config.lanes`` equal lanes (the config checks that they divide).
    """
    if config.pool_size == 0:
        return GroupSizes()
    latest, rule, pool = config.split(num_envs)
    return GroupSizes(
        latest_envs=latest,
        rule_envs=rule,
        pool_lanes=config.lanes if pool > 0 else 0,
        lane_envs=pool // config.lanes if pool > 0 else 0,
        pool_size=config.pool_size,
    )


def group_kinds(layout: Layout, rule_kind: int) -> np.ndarray:
    """int32 [E]: each training env's opponent kind with self-play on (``NETWORK`` or rule)."""
    kinds = np.full(layout.num_envs, NETWORK, np.int32)
    kinds[layout.latest_envs : layout.pool_start] = rule_kind
    return kinds


def group_mask(layout: Layout, start: int, stop: int, on: jax.Array) -> jax.Array:
    """[N] bool: envs ``[start, stop)`` where self-play is on (``on [E]``, training envs)."""
    mask = np.zeros(layout.total_envs, bool)
    mask[start:stop] = True
    switched = jnp.zeros((layout.total_envs,), bool).at[: on.shape[0]].set(on)
    return jnp.asarray(mask) & switched
