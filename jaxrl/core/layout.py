"""The static layout of the env batch: which envs train, who drives the other team.

The trainer steps ``total_envs`` envs in one vmapped call. The first ``num_envs`` are the
training envs; a feature's measuring groups follow (they act with the learner but never train
it: the evaluation lanes).
In a two-team env (``num_teams == 2``) the learner drives one team of every env and an
opponent drives the other. A feature may cut the training envs into static
:class:`OpponentGroups` whose opponents are networks (the league does: current policy,
RulePolicy, pool lanes, sized by :func:`jaxrl.league.groups.group_sizes`); the layout holds
them without knowing which feature filled them. Without groups every env's opponent is the
scripted policy its env params name. Whether env params differ per env is a feature's
call too (evaluation lanes, a curriculum's replay): :func:`make_layout` takes both from the
features' :class:`~jaxrl.features.LayoutNeeds`.

Data-parallel over ``D`` devices, every size here is per device: device ``d`` steps the
global envs ``[d * total_envs, (d + 1) * total_envs)``, with the groups above in that slice.
Randomness is drawn for the global batch and sliced (:func:`shard_rows`), so a run on D
devices steps the same envs with the same random numbers as on one (the minibatch shuffle
excepted: each device shuffles its own rows).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config import Config
from jaxrl.envs import protocols


@dataclasses.dataclass(frozen=True)
class OpponentGroups:
    """Static groups of the training envs whose opponent may be a network, in this order::

        [0, current)                        the learner's current params (acting in the
                                            learner's own forward pass)
        [current, lanes_start)              no network: the scripted opponent the plan names
        [lanes_start, lanes_start + L * n)  L lanes of n envs; each lane plays one entry of
                                            the plan's :class:`~jaxrl.core.opponents.OpponentPlan`

    A feature fills them (all 0: no groups); the match step reads nothing else of it.
    """

    current_envs: int = 0  # training envs whose opponent is the current policy
    scripted_envs: int = 0  # training envs after those whose opponent is scripted
    lanes: int = 0  # L: lanes of envs playing an entry of the plan's opponents
    lane_envs: int = 0  # n: envs per lane
    start_entry: int = 0  # the entry every lane plays at the start (and entries - 1 by default)

    @property
    def lanes_start(self) -> int:
        """First env of the lanes."""
        return self.current_envs + self.scripted_envs

    @property
    def lane_total(self) -> int:
        """Envs in all lanes."""
        return self.lanes * self.lane_envs

    @property
    def envs(self) -> int:
        """Training envs in any group."""
        return self.lanes_start + self.lane_total


@dataclasses.dataclass(frozen=True)
class Layout:
    """Static sizes of the env batch (see the module docstring)."""

    num_envs: int  # training envs
    # envs of each measuring group after the training envs: they act with the learner and never
    # train it (a feature's: the evaluation lanes)
    measured_envs: tuple[int, ...]
    num_agents: int  # agent slots per env reported by the env (both teams for two-team envs)
    two_team: bool  # the env has two teams; the learner drives one of them
    team_size: int  # slots per team (two-team envs), else num_agents
    per_env_params: bool  # env params differ per env (a feature says so: LayoutNeeds)
    opponents: OpponentGroups = OpponentGroups()  # network-opponent groups a feature filled
    devices: int = 1  # devices the env batch is sharded over (every size above is per device)
    axis: str | None = None  # the mesh axis inside the sharded step (None on one device)

    @property
    def actors_per_env(self) -> int:
        """Learner actors per env: one team of a two-team env, else every agent slot."""
        return self.team_size if self.two_team else self.num_agents

    @property
    def num_measured_envs(self) -> int:
        """Envs in all measuring groups."""
        return sum(self.measured_envs)

    @property
    def total_envs(self) -> int:
        """Envs stepped per step: training envs then measuring groups."""
        return self.num_envs + self.num_measured_envs

    @property
    def grouped(self) -> bool:
        """The training envs are laid out per device in groups that differ: opponent groups
        or per-env params (another device count would put saved env states in other groups)."""
        return self.opponents.envs > 0 or self.per_env_params

    def measured_group_of_env(self) -> np.ndarray:
        """int32 [num_measured_envs]: the measuring group of each measured env."""
        return np.repeat(np.arange(len(self.measured_envs)), self.measured_envs).astype(np.int32)


def make_layout(
    config: Config,
    env,
    devices: int = 1,
    opponents: OpponentGroups = OpponentGroups(),
    per_env_params: bool = False,
    measured_envs: tuple[int, ...] = (),
) -> Layout:
    """The per-device layout of ``config`` for the (wrapped) ``env`` on ``devices`` devices.

    ``opponents``: the opponent groups of one device's training envs, and
    ``per_env_params``: whether env params differ per env, and ``measured_envs``: the
    measuring groups after the training envs (one device's), all as the run's features
    declare them (:class:`jaxrl.features.LayoutNeeds`). Sizes are checked by the config
    (they divide over the devices).
    """
    num_agents = protocols.num_agents(env)
    teams = protocols.two_team(env)
    team_size = int(teams.team_size) if teams is not None else num_agents
    return Layout(
        num_envs=config.env.num_envs // devices,
        measured_envs=tuple(measured_envs),
        num_agents=num_agents,
        two_team=teams is not None,
        team_size=team_size,
        per_env_params=per_env_params,
        opponents=opponents,
        devices=devices,
        axis=DATA_AXIS if devices > 1 else None,
    )


DATA_AXIS = "data"  # the 1-D mesh axis the env batch is sharded over


def sum_over_devices(x, axis: str | None):
    """``x`` summed over the devices of ``axis`` (itself on one device)."""
    return jax.lax.psum(x, axis) if axis else x


def device_index(axis: str | None) -> jax.Array:
    """This device's index along ``axis`` (0 on one device)."""
    return jax.lax.axis_index(axis) if axis else jnp.zeros((), jnp.int32)


def shard_rows(x: jax.Array, axis: str | None, rows: int) -> jax.Array:
    """This device's ``rows`` rows of ``x``, drawn for all devices (``[D * rows, ...]``)."""
    if not axis:
        return x
    start = device_index(axis) * rows
    return jax.lax.dynamic_slice_in_dim(x, start, rows, axis=0)
