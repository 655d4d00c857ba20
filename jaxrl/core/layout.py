"""The static layout of the env batch: which envs train, who drives the other team.

The trainer steps ``total_envs`` envs in one vmapped call. The first ``num_envs`` are the
training envs; the evaluation lanes follow (they act with the learner but never train it).
In a two-team env (``num_teams == 2``) the learner drives one team of every env and an
opponent drives the other. With self-play configured, the training envs are cut into the
league's opponent groups (current policy, RulePolicy, pool lanes): the layout stores their
sizes, which :func:`jaxrl.league.groups.group_sizes` computes and :mod:`jaxrl.league` reads.
Without self-play every env's opponent is the scripted policy its env params name.

Data-parallel over ``D`` devices, every size here is per device: device ``d`` steps the
global envs ``[d * total_envs, (d + 1) * total_envs)``, with the groups above in that slice.
Randomness is drawn for the global batch and sliced (:func:`shard_rows`), so a run on D
devices steps the same envs with the same random numbers as on one (the minibatch shuffle
excepted: each device shuffles its own rows).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config import Config
from jaxrl.envs import protocols


@dataclasses.dataclass(frozen=True)
class Layout:
    """Static sizes of the env batch (see the module docstring)."""

    num_envs: int  # training envs
    eval_lane_envs: tuple[int, ...]  # envs of each evaluation lane, after the training envs
    num_agents: int  # agent slots per env reported by the env (both teams for two-team envs)
    two_team: bool  # the env has two teams; the learner drives one of them
    team_size: int  # slots per team (two-team envs), else num_agents
    # The league's opponent groups (jaxrl.league.groups; all 0 without self-play).
    latest_envs: int  # training envs playing the current policy
    rule_envs: int  # training envs playing the RulePolicy
    pool_lanes: int  # lanes of envs playing pool snapshots
    lane_envs: int  # envs per pool lane
    pool_size: int  # snapshots kept (0 without self-play)
    per_env_params: bool  # env params differ per env (replay or evaluation lanes)
    devices: int = 1  # devices the env batch is sharded over (every size above is per device)
    axis: str | None = None  # the mesh axis inside the sharded step (None on one device)

    @property
    def actors_per_env(self) -> int:
        """Learner actors per env: one team of a two-team env, else every agent slot."""
        return self.team_size if self.two_team else self.num_agents

    @property
    def num_eval_envs(self) -> int:
        """Envs in all evaluation lanes."""
        return sum(self.eval_lane_envs)

    @property
    def total_envs(self) -> int:
        """Envs stepped per step: training envs then evaluation lanes."""
        return self.num_envs + self.num_eval_envs

    @property
    def pool_start(self) -> int:
        """First env of the pool lanes."""
        return self.latest_envs + self.rule_envs

    @property
    def pool_envs(self) -> int:
        """Envs in all pool lanes."""
        return self.pool_lanes * self.lane_envs

    @property
    def selfplay(self) -> bool:
        """Self-play is configured."""
        return self.pool_size > 0

    def eval_lane_of_env(self) -> np.ndarray:
        """int32 [num_eval_envs]: the evaluation lane of each evaluation env."""
        return np.repeat(np.arange(len(self.eval_lane_envs)), self.eval_lane_envs).astype(np.int32)


def make_layout(config: Config, env, groups: Any, devices: int = 1) -> Layout:
    """The per-device layout of ``config`` for the (wrapped) ``env`` on ``devices`` devices.

    ``groups``: the league's opponent group sizes on one device (a
    :class:`jaxrl.league.groups.GroupSizes`, all 0 without self-play). Sizes are checked by
    the config (they divide over the devices).
    """
    num_agents = protocols.num_agents(env)
    teams = protocols.two_team(env)
    team_size = int(teams.team_size) if teams is not None else num_agents
    eval_lanes = tuple(lane.envs // devices for lane in config.evaluation.lanes)
    return Layout(
        num_envs=config.env.num_envs // devices,
        eval_lane_envs=eval_lanes,
        num_agents=num_agents,
        two_team=teams is not None,
        team_size=team_size,
        latest_envs=groups.latest_envs,
        rule_envs=groups.rule_envs,
        pool_lanes=groups.pool_lanes,
        lane_envs=groups.lane_envs,
        pool_size=groups.pool_size,
        per_env_params=bool(eval_lanes) or config.curriculum.replay > 0,
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
