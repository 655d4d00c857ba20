"""Probe environments: tiny tasks with a known answer that test one ability each.

- :class:`MemoryProbe`: recall a cue after a delay (a recurrent core).
- :class:`PixelProbe`: which half of a small image a bright pixel is in (a CNN on the JAX path).
- :class:`DictProbe`: an image leaf and a flag leaf of a structured observation, both needed.
- :class:`MaskedBandit`: an :class:`jaxrl.envs.protocols.ActionMaskEnv` whose illegal action pays
  more than any legal one: a learner that ignored the mask would learn to cheat.
- :class:`Nim`: a two-player turn-based game with legal moves (a
  :class:`jaxrl.envs.protocols.TwoTeamEnv`, :class:`~jaxrl.envs.protocols.TurnBasedEnv` and
  :class:`~jaxrl.envs.protocols.ActionMaskEnv`), small enough for a league test.
- :class:`CoopNim`: the same rules, both slots driven by one learner (a single-team
  turn-based env).
"""

from __future__ import annotations

import types
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl.envs.domains import Interval, param
from jaxrl.envs.protocols import ObsLeaf, ObsLeaves


@struct.dataclass
class MemoryProbeState(environment.EnvState):
    """Per-instance state."""

    cue: jax.Array  # () int32, the cue shown at the first step
    time: jax.Array  # () int32, steps taken in the episode


@struct.dataclass
class MemoryProbeParams(environment.EnvParams):
    """Episode settings (array leaves: changing them does not recompile)."""

    delay: int = param(8, Interval(0))  # blank steps between the cue and the query
    max_steps_in_episode: int = 1000  # never reached: the episode ends at the query


class MemoryProbe(environment.Environment[MemoryProbeState, MemoryProbeParams]):
    """Recall a cue after a delay: solvable only with memory.

    - Step 0 shows the cue: observation ``[one_hot(cue, num_cues), 0]``.
    - Steps ``1 .. delay`` show blanks: all zeros.
    - Step ``delay + 1`` shows the query: ``[0, ..., 0, 1]``.
    - Actions before the query are ignored. The action at the query ends the episode
      (terminated) with reward 1 if it equals the cue, else 0.

    A memoryless policy sees the same query observation whatever the cue, so it succeeds
    with probability ``1 / num_cues`` at best. Observation: float32 ``[num_cues + 1]``;
    action: ``Discrete(num_cues)``; reward: float32 in {0, 1}; episode length
    ``delay + 2``.
    """

    def __init__(self, num_cues: int = 2):
        super().__init__()
        self.num_cues = num_cues

    @property
    def default_params(self) -> MemoryProbeParams:
        return MemoryProbeParams()

    def _obs(self, state: MemoryProbeState, params: MemoryProbeParams) -> jax.Array:
        cue = jax.nn.one_hot(state.cue, self.num_cues) * (state.time == 0)
        query = (state.time == params.delay + 1).astype(jnp.float32)
        return jnp.concatenate([cue, query[None]]).astype(jnp.float32)

    def step_env(self, key: jax.Array, state: MemoryProbeState, action: Any, params):
        del key
        at_query = state.time == params.delay + 1
        reward = jnp.where(at_query & (action == state.cue), 1.0, 0.0).astype(jnp.float32)
        state = state.replace(time=state.time + 1)
        return self._obs(state, params), state, reward, at_query, {}

    def reset_env(self, key: jax.Array, params: MemoryProbeParams):
        cue = jax.random.randint(key, (), 0, self.num_cues)
        state = MemoryProbeState(cue=cue, time=jnp.zeros((), jnp.int32))
        return self._obs(state, params), state

    @property
    def name(self) -> str:
        return "MemoryProbe"

    @property
    def num_actions(self) -> int:
        return self.num_cues

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(self.num_cues)

    def observation_space(self, params) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (self.num_cues + 1,), jnp.float32)


@struct.dataclass
class PixelProbeState(environment.EnvState):
    """Per-instance state."""

    row: jax.Array  # () int32, the bright pixel's row
    col: jax.Array  # () int32, the bright pixel's column
    flag: jax.Array  # () int32 in {0, 1}, the flag leaf's hot index (DictProbe; 0 in PixelProbe)
    time: jax.Array  # () int32, steps taken in the episode


@struct.dataclass
class PixelProbeParams(environment.EnvParams):
    """Episode settings."""

    max_steps_in_episode: int = 1  # every episode is one decision


class PixelProbe(environment.Environment[PixelProbeState, PixelProbeParams]):
    """Say which half of an image a bright pixel is in: a probe of the image encoder.

    Observation: float32 ``[size, size, 1]`` image, zeros except one 1.0 pixel at a uniform
    position. Action ``Discrete(2)``: 0 = left half (column < size / 2), 1 = right half.
    Reward 1.0 for the right half, else 0.0; every episode is that one step (terminated).
    A policy that ignores the image earns 0.5 on average.
    """

    def __init__(self, size: int = 12):
        super().__init__()
        self.size = size

    @property
    def default_params(self) -> PixelProbeParams:
        return PixelProbeParams()

    def _answer(self, state: PixelProbeState) -> jax.Array:
        return (state.col >= self.size // 2).astype(jnp.int32)

    def _image(self, state: PixelProbeState) -> jax.Array:
        """float32 ``[size, size, 1]``."""
        image = jnp.zeros((self.size, self.size, 1), jnp.float32)
        return image.at[state.row, state.col, 0].set(1.0)

    def get_obs(self, state: PixelProbeState, params=None, key=None) -> jax.Array:
        del params, key
        return self._image(state)

    def step_env(self, key: jax.Array, state: PixelProbeState, action: Any, params):
        del key
        reward = (action == self._answer(state)).astype(jnp.float32)
        state = state.replace(time=state.time + 1)
        return self.get_obs(state), state, reward, jnp.bool_(True), {}

    def reset_env(self, key: jax.Array, params: PixelProbeParams):
        key_row, key_col, key_flag = jax.random.split(key, 3)
        state = PixelProbeState(
            row=jax.random.randint(key_row, (), 0, self.size),
            col=jax.random.randint(key_col, (), 0, self.size),
            flag=self._flag(key_flag),
            time=jnp.zeros((), jnp.int32),
        )
        return self.get_obs(state), state

    def _flag(self, key: jax.Array) -> jax.Array:
        del key
        return jnp.zeros((), jnp.int32)

    @property
    def name(self) -> str:
        return "PixelProbe"

    @property
    def num_actions(self) -> int:
        return 2

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(2)

    def observation_space(self, params) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (self.size, self.size, 1), jnp.float32)


class DictProbe(PixelProbe):
    """A dict observation (:class:`jaxrl.envs.protocols.StructuredObservation`): image and flag.

    Observation: float32 ``[size * size + 2]``, the leaves ``grid`` (``[size, size, 1]``,
    :class:`PixelProbe`'s image) and ``flag`` (``[2]``, one-hot of a uniform bit). Action
    ``Discrete(4)``; reward 1.0 for action ``2 * half + flag`` (half: 0 left, 1 right), else
    0.0, in one step. A policy that reads one leaf only earns 0.5 at best, a random one 0.25:
    the network must read both.
    """

    def __init__(self, size: int = 6):
        super().__init__(size)
        self.observation_leaves = ObsLeaves(
            (ObsLeaf("grid", (size, size, 1), 0), ObsLeaf("flag", (2,), size * size))
        )

    def _answer(self, state: PixelProbeState) -> jax.Array:
        return 2 * super()._answer(state) + state.flag

    def _flag(self, key: jax.Array) -> jax.Array:
        return jax.random.randint(key, (), 0, 2)

    def get_obs(self, state: PixelProbeState, params=None, key=None) -> jax.Array:
        del params, key
        flag = jax.nn.one_hot(state.flag, 2, dtype=jnp.float32)
        return jnp.concatenate([self._image(state).reshape(-1), flag])

    @property
    def name(self) -> str:
        return "DictProbe"

    @property
    def num_actions(self) -> int:
        return 4

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(4)

    def observation_space(self, params) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (self.size * self.size + 2,), jnp.float32)


@struct.dataclass
class MaskedBanditState(environment.EnvState):
    """Per-instance state."""

    context: jax.Array  # () int32 in {0, 1}, drawn at reset
    time: jax.Array  # () int32, steps taken in the episode


class MaskedBandit(environment.Environment[MaskedBanditState, environment.EnvParams]):
    """One-step episodes with 4 actions, some of them illegal.

    - Observation: float32 ``[2]``, ``one_hot(context)``; context 0 or 1, drawn at reset.
    - Legal actions (:meth:`action_mask`): context 0: ``{0, 1, 2}``; context 1: ``{1, 2, 3}``.
    - Reward: 1 for action 3 in context 1 (the only rewarding legal move), 0 for the other
      legal actions, and 2 for an illegal action: a learner blind to the mask would learn to
      play 3 in context 0 and 0 in context 1. ``info["reward_terms"]["illegal"]`` is 1 where
      the action was illegal (``rollout/reward/illegal`` in training logs).
    - Every step terminates. The best legal return is 0.5 per episode.
    """

    num_actions = 4

    @property
    def default_params(self) -> environment.EnvParams:
        return environment.EnvParams(max_steps_in_episode=10)  # never reached

    def action_mask(self, state: MaskedBanditState, params) -> jax.Array:
        """bool ``[4]``: see the class docstring."""
        del params
        legal = jnp.asarray([[True, True, True, False], [False, True, True, True]])
        return legal[state.context]

    def step_env(self, key: jax.Array, state: MaskedBanditState, action: Any, params):
        del key
        legal = self.action_mask(state, params)[action]
        reward = jnp.where(legal, jnp.where(action == 3, 1.0, 0.0), 2.0).astype(jnp.float32)
        info = {"reward_terms": {"illegal": (~legal).astype(jnp.float32)}}
        state = state.replace(time=state.time + 1)
        return self._obs(state), state, reward, jnp.asarray(True), info

    def reset_env(self, key: jax.Array, params):
        state = MaskedBanditState(
            context=jax.random.randint(key, (), 0, 2), time=jnp.zeros((), jnp.int32)
        )
        return self._obs(state), state

    def _obs(self, state: MaskedBanditState) -> jax.Array:
        return jax.nn.one_hot(state.context, 2, dtype=jnp.float32)

    @property
    def name(self) -> str:
        return "MaskedBandit"

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(4)

    def observation_space(self, params) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (2,), jnp.float32)


@struct.dataclass
class NimState(environment.EnvState):
    """Per-instance state."""

    pile: jax.Array  # () int32, stones left (the game ends at 0)
    player: jax.Array  # () int32 in {0, 1}, the slot to move
    time: jax.Array  # () int32, moves made in the episode


@struct.dataclass
class NimParams(environment.EnvParams):
    """Episode settings (array leaves: changing them does not recompile)."""

    min_pile: int = param(3, Interval(1))  # the first pile is drawn in [min_pile, max_pile]
    max_steps_in_episode: int = 1000  # never reached: every move takes a stone


class _NimRules(environment.Environment[NimState, NimParams]):
    """Nim of one pile for two slots: they take 1, 2 or 3 stones in turn (action ``a`` takes
    ``a + 1``, legal while the pile holds that many); whoever takes the last stone ends the
    game. The first pile is drawn in ``[min_pile, max_pile]``, the first mover at random.

    Observation: float32 ``[2, max_pile + 2]``, per slot ``[one_hot(pile), my_turn]``.
    Action: ``Discrete(3)`` per slot (only the mover's is applied; an illegal take is cut
    to the pile). Rewards float32 ``[2]`` on the game's last step (see the subclasses).
    """

    num_agents = 2
    cooperative = False  # static: the rewards' rule (see _rewards)

    def __init__(self, max_pile: int = 7):
        super().__init__()
        self.max_pile = int(max_pile)  # static: it fixes the observation's shape

    @property
    def default_params(self) -> NimParams:
        return NimParams()

    def current_player(self, state: NimState, params) -> jax.Array:
        """int32 ``()``: the slot that moves next."""
        del params
        return state.player

    def action_mask(self, state: NimState, params) -> jax.Array:
        """bool ``[2, 3]``: take ``a + 1`` stones while the pile holds them (both rows)."""
        del params
        legal = jnp.arange(1, 4) <= state.pile
        return jnp.broadcast_to(legal, (2, 3))

    def _rewards(self, winner: jax.Array) -> jax.Array:
        """float32 ``[2]`` on the last step: +1 to ``winner``, -1 to the other; cooperative
        (:class:`CoopNim`): 1 to both when slot 0 took the last stone, else 0."""
        if self.cooperative:
            return jnp.broadcast_to(jnp.where(winner == 0, 1.0, 0.0), (2,))
        return jnp.where(jnp.arange(2) == winner, 1.0, -1.0)

    def step_env(self, key: jax.Array, state: NimState, action: Any, params):
        del key
        take = jnp.minimum(jnp.asarray(action)[state.player] + 1, state.pile)
        pile = state.pile - take
        over = pile == 0
        reward = jnp.where(over, self._rewards(state.player), 0.0).astype(jnp.float32)
        won = (jnp.arange(2) == state.player) & over
        info = {
            "episode_outcome": {
                "win": won.astype(jnp.float32),
                "draw": jnp.zeros((2,), jnp.float32),
                "loss": (over & ~won).astype(jnp.float32),
            }
        }
        state = NimState(pile=pile, player=1 - state.player, time=state.time + 1)
        return self._obs(state), state, reward, over, info

    def reset_env(self, key: jax.Array, params: NimParams):
        key_pile, key_player = jax.random.split(key)
        state = NimState(
            pile=jax.random.randint(key_pile, (), params.min_pile, self.max_pile + 1),
            player=jax.random.randint(key_player, (), 0, 2),
            time=jnp.zeros((), jnp.int32),
        )
        return self._obs(state), state

    def _obs(self, state: NimState) -> jax.Array:
        pile = jax.nn.one_hot(state.pile, self.max_pile + 1, dtype=jnp.float32)
        mine = (jnp.arange(2) == state.player).astype(jnp.float32)
        return jnp.concatenate([jnp.broadcast_to(pile, (2, pile.shape[0])), mine[:, None]], 1)

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(3)

    def observation_space(self, params) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (2, self.max_pile + 2), jnp.float32)


NIM_RANDOM, NIM_RULE = 0, 1  # Nim's scripted kinds


class Nim(_NimRules):
    """Two-player Nim (see :class:`_NimRules`): the slot that takes the last stone wins (+1,
    the other -1: rewarded on the winner's move). Team 0 is slot 0, team 1 slot 1.

    Scripted kinds: ``random`` (any take; the match step redraws illegal ones among the
    legal) and ``rule``: perfect play (leave a multiple of 4) with probability ``skill``.
    ``info["episode_outcome"]``: win/draw/loss per slot.
    """

    num_teams = 2
    team_size = 1
    scripted_kinds = types.MappingProxyType({"random": NIM_RANDOM, "rule": NIM_RULE})

    def scripted_team_actions(
        self, key: jax.Array, team_obs: jax.Array, kind: jax.Array, skill: jax.Array
    ) -> jax.Array:
        """int32 ``[1]``: see the class docstring (``team_obs [1, max_pile + 2]``)."""
        key_random, key_skill = jax.random.split(key)
        random = jax.random.randint(key_random, (1,), 0, 3)
        pile = jnp.argmax(team_obs[:, : self.max_pile + 1], axis=-1)
        winning = pile % 4 != 0  # a winning take exists
        perfect = jnp.where(winning, pile % 4 - 1, random)
        skilled = jax.random.uniform(key_skill) < skill
        rule = jnp.where(skilled, perfect, random)
        return jnp.where(kind == NIM_RULE, rule, random).astype(jnp.int32)

    @property
    def name(self) -> str:
        return "Nim"


class CoopNim(_NimRules):
    """One-learner Nim (see :class:`_NimRules`): both slots score 1 when slot 0 takes the
    last stone, 0 when slot 1 does. A single-team turn-based env: each slot trains on its
    own moves, and slot 1 must learn to leave slot 0 a pile of at most 3."""

    cooperative = True

    @property
    def name(self) -> str:
        return "CoopNim"
