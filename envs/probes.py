"""Probe environments: tiny tasks with a known answer that test one ability each."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from envs.domains import Interval, param


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
