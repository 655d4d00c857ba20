"""Probe environments: tiny tasks with a known answer that test one ability each."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from envs.domains import Interval, param
from envs.protocols import ObsLeaf, ObsLeaves


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
    """A dict observation (:class:`envs.protocols.StructuredObservation`): image and flag.

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
