"""The league's static opponent groups of the training envs.

With self-play configured, the ``E`` training envs of a device are cut into fixed groups,
in this order::

    [0, latest)                      the current policy (batched with the learner's pass)
    [latest, latest + rule)          the env's RulePolicy
    [pool_start, pool_start + L*n)   L pool lanes of n envs; each lane plays one snapshot

Groups are static, so every opponent's forward pass runs on a static slice with its own
params: there is no per-env copy of params, and changing who is in the pool never retraces.
The league declares them as the layout's generic
:class:`~jaxrl.core.layout.OpponentGroups` (``current_envs`` = latest, ``scripted_envs`` =
rule, ``lanes``, ``lane_envs``, ``start_entry`` = K, the pool's entry of the current policy)
through its layout hook (:func:`selfplay_layout`); this module sizes them and reads them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config import SelfPlayConfig
from jaxrl.core.layout import Layout, OpponentGroups
from jaxrl.core.match import NETWORK
from jaxrl.features import LayoutNeeds


def group_sizes(config: SelfPlayConfig, num_envs: int) -> OpponentGroups:
    """The groups of ``num_envs`` training envs (one device's) under ``config`` (all 0
    without self-play).

    ``latest_fraction`` and ``rule_fraction`` of the envs (rounded), the rest in
    ``config.lanes`` equal lanes (the config checks that they divide); the lanes start on
    entry K (``pool_size``), the current policy.
    """
    if config.pool_size == 0:
        return OpponentGroups()
    latest, rule, pool = config.split(num_envs)
    return OpponentGroups(
        current_envs=latest,
        scripted_envs=rule,
        lanes=config.lanes if pool > 0 else 0,
        lane_envs=pool // config.lanes if pool > 0 else 0,
        start_entry=config.pool_size,
    )


def selfplay_layout(config, num_envs: int) -> LayoutNeeds:
    """The league's opponent groups of one device's ``num_envs`` training envs (none
    without self-play)."""
    if config.selfplay.pool_size == 0:
        return LayoutNeeds()
    return LayoutNeeds(opponents=group_sizes(config.selfplay, num_envs))


def group_kinds(layout: Layout, rule_kind: int) -> np.ndarray:
    """int32 [E]: each training env's opponent kind with self-play on (``NETWORK`` or rule)."""
    groups = layout.opponents
    kinds = np.full(layout.num_envs, NETWORK, np.int32)
    kinds[groups.current_envs : groups.lanes_start] = rule_kind
    return kinds


def group_mask(layout: Layout, start: int, stop: int, on: jax.Array) -> jax.Array:
    """[N] bool: envs ``[start, stop)`` where self-play is on (``on [E]``, training envs)."""
    mask = np.zeros(layout.total_envs, bool)
    mask[start:stop] = True
    switched = jnp.zeros((layout.total_envs,), bool).at[: on.shape[0]].set(on)
    return jnp.asarray(mask) & switched
