"""The env contract, written down as :class:`typing.Protocol`\\ s.

Every registered env is an :class:`Env` (gymnax 1.0: ``reset(key, params) -> (obs, state)``,
``step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)``).
What an env can do beyond that it declares with class attributes and methods, and the
trainer asks with ``isinstance`` against these protocols instead of probing attributes:

- :class:`MultiAgentEnv` (``num_agents``): one env instance steps ``A = num_agents`` agent
  slots; observations are ``[A, *obs]``, actions ``[A, *action]``, rewards float32 ``[A]``.
  A single-agent env (gymnax's, CAGE2) has no ``num_agents``: observations ``[*obs]``,
  actions ``[*action]``, a () float32 reward.
- :class:`TwoTeamEnv` (``num_teams == 2``, ``team_size``, ``scripted_kinds``,
  ``scripted_team_actions``): a multi-agent env whose slots ``[0, S)`` are team 0 and
  ``[S, 2S)`` team 1, both driven by the caller; a team can be driven by one of the env's
  scripted policies (``scripted_kinds``: name -> kind, e.g. ``{"rule": 1}``).
- :class:`VariableTeamSize` (``with_team_size``): a two-team env whose params fix how many
  slots of each team play (``1..team_size``).
- :class:`RenderableEnv` (``renderer``): the import path of a module that draws the env's
  states (:class:`Renderer`), imported only when a clip is rendered.
- :class:`Domain`: the values an ``EnvParams`` field allows, declared beside the field in
  its metadata (:func:`jaxrl.envs.domains.param`) and checked wherever a value enters.
- :class:`ActionMaskEnv` (``action_mask``): the legal discrete actions of a state; acting,
  the loss's log-probabilities and the entropy see only those.
- :class:`TurnBasedEnv` (``current_player``): a multi-agent env where one slot moves per
  step (a board game): only that slot's action is applied, and only its step is trained.
- :class:`StructuredObservation` (``observation_leaves``): a flat float32 observation row
  that packs named leaves of other shapes (a dict observation, an image beside a vector), so
  that a network can give each leaf its own encoder (:class:`ObsLeaves`).
- :class:`EntityObservation` (``entity_layout``): where an observation row lists other
  entities (cars, units) as equal-width blocks with a presence flag, so that a network can
  encode each block with shared weights and pool over the present ones
  (``network.entity_width``).

Soccer is a :class:`VariableTeamSize`, :class:`RenderableEnv` and
:class:`EntityObservation`; MettaArena a
:class:`MultiAgentEnv` and :class:`RenderableEnv`; CAGE2, MemoryProbe and gymnax's envs are
plain :class:`Env`\\ s. The wrappers of :mod:`jaxrl.envs.wrappers` (gymnax ``GymnaxWrapper``\\ s)
keep the contract of the env they wrap, so the helpers below look through them
(:func:`unwrapped`): with Python >= 3.12 ``isinstance`` reads attributes statically and would
not see the ones a wrapper forwards.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import jax
import numpy as np
from gymnax.wrappers.purerl import GymnaxWrapper


@runtime_checkable
class Env(Protocol):
    """A gymnax 1.0 environment; single-agent unless it is also a :class:`MultiAgentEnv`."""

    @property
    def name(self) -> str:
        """Environment name."""
        ...

    @property
    def default_params(self) -> Any:
        """The env's default ``EnvParams``."""
        ...

    def reset(self, key: jax.Array, params: Any) -> tuple[Any, Any]:
        """``(obs, state)`` of a new episode."""
        ...

    def step(
        self, key: jax.Array, state: Any, action: Any, params: Any
    ) -> tuple[Any, Any, jax.Array, jax.Array, jax.Array, dict[str, Any]]:
        """``(obs, state, reward, terminated, truncated, info)``, auto-resetting."""
        ...

    def action_space(self, params: Any) -> Any:
        """The action space (of one agent slot, for a multi-agent env)."""
        ...

    def observation_space(self, params: Any) -> Any:
        """The observation space (of the whole env: ``[A, *obs]`` for a multi-agent env)."""
        ...


@runtime_checkable
class MultiAgentEnv(Env, Protocol):
    """An env stepping several agent slots per instance, all driven by the caller.

    Observations ``[A, *obs]``, actions ``[A, *action]`` (one per slot; the action space is a
    slot's), rewards float32 ``[A]``; ``info["agent_mask"]`` bool ``[A]`` may mark slots
    that do not play.
    """

    num_agents: int  # A, agent slots per env instance


@runtime_checkable
class TwoTeamEnv(MultiAgentEnv, Protocol):
    """A multi-agent env of two teams: slots ``[0, S)`` team 0, ``[S, 2S)`` team 1.

    ``info["episode_outcome"]`` reports each slot's win/draw/loss where an episode ends.
    """

    num_teams: int  # 2
    team_size: int  # S, slots per team (num_agents = 2 S)
    scripted_kinds: Mapping[str, int]  # scripted policies a caller can put on a team

    def scripted_team_actions(
        self, key: jax.Array, team_obs: jax.Array, kind: jax.Array, skill: jax.Array
    ) -> jax.Array:
        """int32 ``[S]`` actions of scripted ``kind`` for one team's observation rows."""
        ...


@runtime_checkable
class ScriptedOpponentParams(Protocol):
    """``EnvParams`` that name the scripted policy of the opponent team (optional).

    A two-team env whose params have these fields lets a config or a curriculum stage pick
    the opponent (``env.kwargs.opponent_kind``); without them, a match whose opponent comes
    "from the params" plays the env's ``"rule"`` kind (else its first) at full skill.
    """

    opponent_kind: Any  # () int32, one of the env's scripted_kinds
    opponent_skill: Any  # () float32 in [0, 1], how well the scripted opponent plays


@runtime_checkable
class VariableTeamSize(TwoTeamEnv, Protocol):
    """A two-team env whose params set how many slots of each team play."""

    def with_team_size(self, params: Any, size: int) -> Any:
        """``params`` with ``size`` (``1..team_size``) players a side."""
        ...


@runtime_checkable
class RenderableEnv(Env, Protocol):
    """An env with a renderer: ``renderer`` is the import path of a :class:`Renderer`."""

    renderer: str  # e.g. "jaxrl.envs.soccer.render", imported on demand (it needs Pillow)


@dataclass(frozen=True)
class EntityGroup:
    """``count`` blocks of ``width`` features each, side by side in an observation row.

    The blocks describe entities of one kind (a car's teammates, its opponents) in the same
    features, so one encoder serves them all; the feature at ``presence`` in a block is 1 where
    the entity plays and 0 where the block is padding.
    """

    name: str  # e.g. "opponents"; names the group's encoder parameters
    offset: int  # index of the group's first feature in the row
    count: int  # blocks in the group
    width: int  # features per block
    presence: int = 0  # index, within a block, of its presence flag (1 present, 0 absent)

    @property
    def end(self) -> int:
        """One past the group's last feature in the row."""
        return self.offset + self.count * self.width


@dataclass(frozen=True)
class EntityLayout:
    """The entity groups of a flat observation row of ``size`` features.

    Features outside every group (the agent's own state, the ball) are the row's own.
    """

    size: int  # features per observation row
    groups: tuple[EntityGroup, ...]  # disjoint, each inside [0, size)

    def __post_init__(self):
        spans = sorted((g.offset, g.end) for g in self.groups)
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            if start < end:
                raise ValueError(f"entity groups overlap: {self.groups}")
        for g in self.groups:
            if g.offset < 0 or g.end > self.size or g.count < 1 or not 0 <= g.presence < g.width:
                raise ValueError(f"entity group {g.name!r} does not fit a row of {self.size}")

    @property
    def own_features(self) -> np.ndarray:
        """int [F_own]: the indices of the row's features outside every group."""
        inside = np.zeros(self.size, bool)
        for g in self.groups:
            inside[g.offset : g.end] = True
        return np.flatnonzero(~inside)


@runtime_checkable
class ActionMaskEnv(Env, Protocol):
    """An env with a discrete action space that says which actions are legal in a state."""

    def action_mask(self, state: Any, params: Any) -> jax.Array:
        """bool ``[num_actions]`` (``[A, num_actions]`` for a multi-agent env): True where the
        action is legal in ``state`` (the env's own state, not a wrapper's); at least one True
        per row. Called on the state an observation was made in, before acting on it."""
        ...


@runtime_checkable
class TurnBasedEnv(MultiAgentEnv, Protocol):
    """A multi-agent env where one agent slot moves per step (Pgx's board games).

    ``step`` applies the action of slot ``current_player(state)`` and ignores the others';
    rewards are still ``[A]`` (a slot is rewarded on the step that ends its game, whoever
    moved). The trainer trains each slot on the steps where it moved.
    """

    def current_player(self, state: Any, params: Any) -> jax.Array:
        """int32 ``()``: the slot whose action the next ``step`` from ``state`` applies."""
        ...


@dataclass(frozen=True)
class ObsLeaf:
    """One named leaf of a structured observation: ``shape`` values at ``offset`` of the row."""

    name: str  # e.g. "grid", "position"; names the leaf's encoder parameters
    shape: tuple[int, ...]  # the leaf's own shape, e.g. (10, 10, 5) for an image [H, W, C]
    offset: int  # index of the leaf's first value in the flat row (row-major)

    @property
    def size(self) -> int:
        """Values of the leaf in the row."""
        return int(np.prod(self.shape, dtype=int))

    @property
    def end(self) -> int:
        """One past the leaf's last value in the row."""
        return self.offset + self.size


@dataclass(frozen=True)
class ObsLeaves:
    """How a flat float32 observation row of ``size`` values splits into named leaves."""

    leaves: tuple[ObsLeaf, ...]  # back to back in the row, in order

    def __post_init__(self):
        offset = 0
        for leaf in self.leaves:
            if leaf.offset != offset or leaf.size < 1:
                raise ValueError(f"observation leaves are not back to back: {self.leaves}")
            offset = leaf.end

    @property
    def size(self) -> int:
        """Values in the whole row."""
        return self.leaves[-1].end if self.leaves else 0


@runtime_checkable
class StructuredObservation(Env, Protocol):
    """An env whose flat float32 observation row packs named leaves (:class:`ObsLeaves`)."""

    observation_leaves: ObsLeaves  # the leaves of one observation row (one agent's)


@runtime_checkable
class EntityObservation(Env, Protocol):
    """An env whose observation rows list other entities in blocks (:class:`EntityLayout`)."""

    entity_layout: EntityLayout  # the blocks of one observation row (one agent's, if multi-agent)


@runtime_checkable
class Renderer(Protocol):
    """Host-side drawing of an env's states (a module, e.g. :mod:`jaxrl.envs.soccer.render`)."""

    STEP_DT: float  # seconds of clip per env step at the natural pace

    def render_frames(self, states: Any, params: Any) -> list[np.ndarray]:
        """uint8 ``[H, W, 3]`` frames of stacked states ``[T, ...]`` of one env."""
        ...

    def save_gif(self, frames: Sequence[np.ndarray], path: Path, fps: int = 15) -> None:
        """Write ``frames`` to a looping GIF."""
        ...


@runtime_checkable
class Domain(Protocol):
    """The values an ``EnvParams`` field allows, declared in its metadata
    (:mod:`jaxrl.envs.domains`: ``Interval``, ``Choices``). Checked wherever a value enters:
    config, stages, lanes, flags."""

    def contains(self, value: Any) -> bool:
        """Whether ``value`` (every element of an array value) is allowed."""
        ...

    def __str__(self) -> str:
        """The domain in words for an error line, e.g. ``[0, 1]`` or ``one of 0 (idle), ...``."""
        ...


def unwrapped(env: Any) -> Any:
    """The innermost env under gymnax wrappers (which keep its contract)."""
    while isinstance(env, GymnaxWrapper):
        env = env._env
    return env


def num_agents(env: Any) -> int:
    """Agent slots per env instance: ``num_agents`` of a :class:`MultiAgentEnv`, else 1."""
    inner = unwrapped(env)
    return int(inner.num_agents) if isinstance(inner, MultiAgentEnv) else 1


def two_team(env: Any) -> TwoTeamEnv | None:
    """The (innermost) env if it is a :class:`TwoTeamEnv` with two teams, else None."""
    inner = unwrapped(env)
    return inner if isinstance(inner, TwoTeamEnv) and int(inner.num_teams) == 2 else None


LEAGUE_ANCHOR = "rule"  # the scripted kind the league plays as its RulePolicy and rates at 1500
ANCHOR_FALLBACK = "random"  # what "rule" stands for in an env without a rule policy (Pgx)


def scripted_kinds(env: Any) -> dict[str, int]:
    """The (wrapped) two-team env's scripted kinds by name; ``{}`` for other envs.

    ``"rule"`` (:data:`LEAGUE_ANCHOR`: the league's RulePolicy group, the Elo anchor of its
    rating and of the tournaments) is always there when the env has a rule policy or a
    ``"random"`` kind: an env without a rule policy (a board game of a suite) is anchored at
    its random mover, which the trainer keeps to legal moves where the env declares a mask.
    """
    teams = two_team(env)
    if teams is None:
        return {}
    kinds = {name: int(kind) for name, kind in teams.scripted_kinds.items()}
    if LEAGUE_ANCHOR not in kinds and ANCHOR_FALLBACK in kinds:
        kinds[LEAGUE_ANCHOR] = kinds[ANCHOR_FALLBACK]
    return kinds


def league_problem(env: Any) -> str | None:
    """What keeps the self-play league from running the (wrapped) ``env``, or None.

    The league needs a :class:`TwoTeamEnv` whose ``scripted_kinds`` include
    :data:`LEAGUE_ANCHOR` (its RulePolicy group, the Elo anchor of its rating and of the
    tournaments) or, failing that, :data:`ANCHOR_FALLBACK` (a random mover, which then plays
    the anchor: :func:`scripted_kinds`). Optional: :class:`ScriptedOpponentParams` (else the
    anchor plays where the params would name the opponent), ``info["agent_mask"]`` (else every
    slot plays), :class:`VariableTeamSize` (else tournaments take only the env's own team
    size), :class:`ActionMaskEnv` and :class:`TurnBasedEnv`. Its ``info["episode_outcome"]``
    must report win/draw/loss per slot; the built run checks that (it needs a traced step).
    """
    teams = two_team(env)
    if teams is None:
        return "is not a two-team env (self-play needs num_teams = 2)"
    if LEAGUE_ANCHOR not in scripted_kinds(env):
        kinds = ", ".join(teams.scripted_kinds) or "none"
        return (
            f"has no scripted kind {LEAGUE_ANCHOR!r} or {ANCHOR_FALLBACK!r} (the league's "
            f"RulePolicy and Elo anchor; scripted_kinds: {kinds})"
        )
    return None


def variable_team_size(env: Any) -> VariableTeamSize | None:
    """The (innermost) env if it is a :class:`VariableTeamSize`, else None."""
    inner = two_team(env)
    return inner if isinstance(inner, VariableTeamSize) else None


def entity_layout(env: Any) -> EntityLayout | None:
    """The observation's entity blocks if the (innermost) env is an :class:`EntityObservation`."""
    inner = unwrapped(env)
    return inner.entity_layout if isinstance(inner, EntityObservation) else None


def action_masked(env: Any) -> ActionMaskEnv | None:
    """The (innermost) env if it is an :class:`ActionMaskEnv`, else None."""
    inner = unwrapped(env)
    return inner if isinstance(inner, ActionMaskEnv) else None


def turn_based(env: Any) -> TurnBasedEnv | None:
    """The (innermost) env if it is a :class:`TurnBasedEnv`, else None."""
    inner = unwrapped(env)
    return inner if isinstance(inner, TurnBasedEnv) else None


def observation_leaves(env: Any) -> ObsLeaves | None:
    """The observation's leaves if the (innermost) env is a :class:`StructuredObservation`."""
    inner = unwrapped(env)
    return inner.observation_leaves if isinstance(inner, StructuredObservation) else None


def renderer(env: Any) -> Renderer | None:
    """The renderer module of a :class:`RenderableEnv` (imported now), else None.

    Raises:
      TypeError: the module named by ``env.renderer`` is not a :class:`Renderer`.
    """
    inner = unwrapped(env)
    if not isinstance(inner, RenderableEnv):
        return None
    module = importlib.import_module(inner.renderer)
    if not isinstance(module, Renderer):
        raise TypeError(
            f"{inner.name}: {inner.renderer} is not a renderer (see jaxrl.envs.protocols)"
        )
    return module
