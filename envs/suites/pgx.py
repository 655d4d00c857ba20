"""Pgx's games as gymnax-1.x envs: ``env.name: pgx:<id>`` (e.g. ``tic_tac_toe``).

A two-player game (tic-tac-toe, connect four, othello, go, chess, ...) becomes a
:class:`PgxTwoPlayer`: two agent slots, one a team (:class:`jaxrl.envs.protocols.TwoTeamEnv`, so the
self-play league plays it), one of which moves per step (:class:`jaxrl.envs.protocols.TurnBasedEnv`,
``current_player`` = pgx's), with pgx's legal moves as the action mask
(:class:`jaxrl.envs.protocols.ActionMaskEnv`). Slot ``i`` is pgx's player ``i``; pgx draws which
player opens, so either slot moves first. A one-player game (2048, pgx's MinAtar) becomes a
plain masked env (:class:`PgxSinglePlayer`); games of three or more players are refused.

Observations are pgx's own egocentric views (``observe(state, player)``: "my stones, your
stones"), so one policy plays either side; each view is flattened to a float32 row and declared
as one leaf ``observation`` of pgx's shape (e.g. ``(3, 3, 2)``;
:class:`jaxrl.envs.protocols.ObsLeaves`). An illegal move ends the game with pgx's penalty (-1 to
the mover); the mask is there to avoid it. ``EnvParams.max_steps_in_episode`` truncates (pgx's own
``truncated`` too): the game is then scored a draw. Pgx's constructors take no arguments, so
``make_kwargs`` must be empty.
"""

from __future__ import annotations

import types
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pgx
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl.envs.domains import UNIT, Choices, Interval, param
from jaxrl.envs.protocols import ObsLeaf, ObsLeaves

RANDOM = 0  # the one scripted policy: uniform random actions (the trainer keeps them legal)
OPPONENT_KINDS = Choices({RANDOM: "random"})
NUM_PLAYERS = 2
DEFAULT_MAX_STEPS = 10_000  # pgx's board games end by their rules long before this


def names() -> list[str]:
    """Pgx's env ids (two-player and one-player games; others are refused at ``make``)."""
    return sorted(pgx.available_envs())


class EnvState(struct.PyTreeNode):
    """Pgx's state plus the adapter's step count."""

    inner: Any  # pgx.State of the game
    time: jax.Array  # int32 () steps taken this episode
    truncated: jax.Array  # bool (): the step into this state hit the step limit (or pgx's)


class EnvParams(struct.PyTreeNode):
    """Episode options, all array leaves.

    ``opponent_kind``/``opponent_skill`` are not read by ``step`` (the caller drives both
    slots): they name the scripted policy the league puts on the team it does not control
    (``scripted_team_actions``), as Soccer's do.
    """

    max_steps_in_episode: jax.Array = param(np.int32(DEFAULT_MAX_STEPS), Interval(1))  # ()
    opponent_kind: jax.Array = param(np.int32(RANDOM), OPPONENT_KINDS)  # () scripted opponent
    opponent_skill: jax.Array = param(np.float32(1.0), UNIT)  # () unused by "random"


def observe(env: Any, inner: Any, player: jax.Array | int) -> jax.Array:
    """float32 ``[size]``: pgx's view of ``inner`` for ``player``, flattened."""
    with warnings.catch_warnings():  # pgx 2.6 warns that player_id will go (at trace time)
        warnings.simplefilter("ignore", DeprecationWarning)
        view = env.observe(inner, jnp.asarray(player, jnp.int32))
    return jnp.ravel(view).astype(jnp.float32)


def episode_outcome(rewards: jax.Array, done: jax.Array) -> dict[str, jax.Array]:
    """``{win, draw, loss}``: float32 ``[2]`` per slot from pgx's final rewards, 0 until done.

    A slot wins where its reward is positive, loses where negative, draws at zero (a drawn
    game or a truncated one).
    """
    return {
        "win": (done & (rewards > 0)).astype(jnp.float32),
        "draw": (done & (rewards == 0)).astype(jnp.float32),
        "loss": (done & (rewards < 0)).astype(jnp.float32),
    }


class _Pgx(environment.Environment[EnvState, EnvParams]):
    """What both kinds of pgx env share: the game, its spaces, reset and the step limit."""

    def __init__(self, env_id: str, env: Any):
        super().__init__()
        self.env_id = env_id
        self.env = env  # the pgx env
        shape = tuple(int(d) for d in env.observation_shape)
        self.observation_leaves = ObsLeaves((ObsLeaf("observation", shape, 0),))

    @property
    def name(self) -> str:
        """Environment name."""
        return f"pgx:{self.env_id}"

    @property
    def default_params(self) -> EnvParams:
        """Random scripted opponent, no step limit short of the game's own end."""
        return EnvParams()

    @property
    def num_actions(self) -> int:
        """Pgx's actions (legal or not)."""
        return int(self.env.num_actions)

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        """``Discrete(num_actions)`` (of one slot)."""
        del params
        return spaces.Discrete(self.num_actions)

    def _advance(self, key: jax.Array, state: EnvState, move: jax.Array, params: EnvParams):
        """``(new state, terminated)`` after pgx's ``step`` with the mover's ``move``."""
        inner = self.env.step(state.inner, jnp.asarray(move, jnp.int32), key)
        time = state.time + 1
        terminated = inner.terminated
        truncated = (inner.truncated | (time >= params.max_steps_in_episode)) & ~terminated
        return EnvState(inner=inner, time=time, truncated=truncated), terminated

    def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """The step limit or pgx's ``truncated``, read off the last step."""
        del params
        return state.truncated

    def _fresh(self, key: jax.Array) -> EnvState:
        return EnvState(
            inner=self.env.init(key), time=jnp.zeros((), jnp.int32), truncated=jnp.zeros((), bool)
        )


class PgxTwoPlayer(_Pgx):
    """A two-player pgx game: two slots (slot ``i`` = pgx player ``i``), one team each.

    Observation float32 ``[2, size]`` (row ``i``: player ``i``'s view); action int32 ``[2]``
    (``step`` applies ``action[current_player]``); reward float32 ``[2]`` (pgx's ``rewards``,
    e.g. +1/-1 on the move that ends a game); ``info["episode_outcome"]`` win/draw/loss float32
    ``[2]`` where the episode ends; ``info["agent_mask"]`` all True.
    """

    num_agents = NUM_PLAYERS  # jaxrl.envs.protocols.MultiAgentEnv
    num_teams = 2  # jaxrl.envs.protocols.TwoTeamEnv: slot 0 is team 0, slot 1 team 1
    team_size = 1
    scripted_kinds = types.MappingProxyType({"random": RANDOM})

    def scripted_team_actions(
        self, key: jax.Array, team_obs: jax.Array, kind: jax.Array, skill: jax.Array
    ) -> jax.Array:
        """int32 ``[1]`` uniform random actions (the caller replaces illegal ones)."""
        del team_obs, kind, skill
        return jax.random.randint(key, (1,), 0, self.num_actions, jnp.int32)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """float32 ``[2, size]``: each player's view."""
        del params
        size = self.observation_leaves.size
        return spaces.Box(-jnp.inf, jnp.inf, (NUM_PLAYERS, size), jnp.float32)

    def _views(self, inner: Any) -> jax.Array:
        return jnp.stack([observe(self.env, inner, p) for p in range(NUM_PLAYERS)])

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """A new game (pgx draws who opens); returns ``(obs [2, size], state)``."""
        del params
        state = self._fresh(key)
        return self._views(state.inner), state

    def step_env(
        self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict[str, Any]]:
        """One move: ``action[current_player]`` (int32 ``[2]``); the other slot's is ignored."""
        move = jnp.asarray(action, jnp.int32)[state.inner.current_player]
        new_state, terminated = self._advance(key, state, move, params)
        rewards = new_state.inner.rewards.astype(jnp.float32)
        info = {
            "agent_mask": jnp.ones((NUM_PLAYERS,), bool),
            "episode_outcome": episode_outcome(rewards, terminated | new_state.truncated),
        }
        return self._views(new_state.inner), new_state, rewards, terminated, info

    def current_player(self, state: EnvState, params: EnvParams) -> jax.Array:
        """int32 ``()``: pgx's ``current_player`` (the slot whose action ``step`` applies)."""
        del params
        return jnp.asarray(state.inner.current_player, jnp.int32)

    def action_mask(self, state: EnvState, params: EnvParams) -> jax.Array:
        """bool ``[2, num_actions]``: pgx's ``legal_action_mask`` in both rows."""
        del params
        return jnp.broadcast_to(state.inner.legal_action_mask, (NUM_PLAYERS, self.num_actions))


class PgxSinglePlayer(_Pgx):
    """A one-player pgx game (2048, MinAtar): obs float32 ``[size]``, action int32 ``()``,
    reward float32 ``()``, pgx's legal moves as the action mask."""

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """float32 ``[size]``."""
        del params
        return spaces.Box(-jnp.inf, jnp.inf, (self.observation_leaves.size,), jnp.float32)

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """A new game; returns ``(obs [size], state)``."""
        del params
        state = self._fresh(key)
        return observe(self.env, state.inner, 0), state

    def step_env(
        self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict[str, Any]]:
        """One move with ``action`` int32 ``()``."""
        new_state, terminated = self._advance(key, state, action, params)
        reward = new_state.inner.rewards[0].astype(jnp.float32)
        return observe(self.env, new_state.inner, 0), new_state, reward, terminated, {}

    def action_mask(self, state: EnvState, params: EnvParams) -> jax.Array:
        """bool ``[num_actions]``: pgx's ``legal_action_mask``."""
        del params
        return state.inner.legal_action_mask


def make(env_id: str) -> PgxTwoPlayer | PgxSinglePlayer:
    """Pgx game ``env_id`` behind gymnax 1.x (pgx's constructors take no arguments).

    Raises:
      ValueError: one line: a game of more than two players, or one pgx cannot build.
    """
    try:
        env = pgx.make(env_id)
    except (ValueError, ImportError, ModuleNotFoundError) as err:
        raise ValueError(f"pgx:{env_id}: pgx cannot build it: {err}") from None
    players = int(env.num_players)
    if players == NUM_PLAYERS:
        return PgxTwoPlayer(env_id, env)
    if players == 1:
        return PgxSinglePlayer(env_id, env)
    raise ValueError(
        f"pgx:{env_id}: a game of {players} players; jaxrl plays pgx games of one or two players"
    )
