"""Tiny envs that each break one rule of the env contract, for tests/test_check_env.py.

Importable by path from the repository root (``env.name=tests.bad_envs:WrongObsShape``), as
a new user's own env is. :class:`Good` keeps every rule; each other env changes one thing.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces
from gymnax.wrappers.purerl import GymnaxWrapper


@struct.dataclass
class State(environment.EnvState):
    """A position on a line and the step count."""

    x: jax.Array  # () float32
    time: int  # () int32


@struct.dataclass
class Params(environment.EnvParams):
    """Episode length."""

    max_steps_in_episode: int = 10


class Good(environment.Environment):
    """Observations float32 ``[4]``, two actions moving ``x``; reward ``-|x|``."""

    @property
    def default_params(self) -> Params:
        return Params()

    def observe(self, state: State) -> jax.Array:
        return jnp.full((4,), state.x, jnp.float32)

    def reset_env(self, key: jax.Array, params: Params) -> tuple[jax.Array, State]:
        state = State(x=jax.random.uniform(key), time=0)
        return self.observe(state), state

    def step_env(self, key: jax.Array, state: State, action: Any, params: Params) -> tuple:
        x = state.x + jnp.where(action == 1, 0.1, -0.1)
        state = State(x=x, time=state.time + 1)
        terminated = jnp.abs(x) > 5.0
        return self.observe(state), state, -jnp.abs(x), terminated, {}

    def observation_space(self, params: Params) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (4,), jnp.float32)

    def action_space(self, params: Params) -> spaces.Discrete:
        return spaces.Discrete(2)


class WrongObsShape(Good):
    """Returns ``[3]`` observations; the space says ``[4]``."""

    def observe(self, state: State) -> jax.Array:
        return jnp.full((3,), state.x, jnp.float32)


class PythonIf(Good):
    """A Python ``if`` on a traced value in ``step_env``."""

    def step_env(self, key: jax.Array, state: State, action: Any, params: Params) -> tuple:
        if state.x > 0:  # the bug under test: jnp.where is the fix
            action = 1 - action
        return super().step_env(key, state, action, params)


class RaisingFactory(Good):
    """A constructor that raises."""

    def __init__(self):
        raise RuntimeError("map file maps/level1.txt not found")


class OldApi(Good):
    """``step`` returns the old gymnax API's 5 values (obs, state, reward, done, info)."""

    def step(self, key: jax.Array, state: State, action: Any, params: Params | None = None):
        obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs, state, reward, jnp.logical_or(terminated, truncated), info


class AdaptedOldApi(GymnaxWrapper):
    """:class:`OldApi` adapted to 6 values, as ``jaxrl.envs.make`` adapts an old-API env."""

    def __init__(self):
        super().__init__(OldApi())

    def reset(self, key: jax.Array, params: Params | None = None) -> tuple:
        return self._env.reset(key, params)

    def step(self, key: jax.Array, state: State, action: Any, params: Params | None = None):
        obs, state, reward, done, info = self._env.step(key, state, action, params)
        return obs, state, reward, done, jnp.zeros_like(done), info


class DoneOnTimeLimit(Good):
    """The old gymnax ``done`` in ``step_env``: the time limit terminates."""

    def step_env(self, key: jax.Array, state: State, action: Any, params: Params) -> tuple:
        obs, state, reward, terminated, info = super().step_env(key, state, action, params)
        return obs, state, reward, terminated | (state.time >= params.max_steps_in_episode), info


class IntObs(Good):
    """int32 observations."""

    def observe(self, state: State) -> jax.Array:
        return jnp.full((4,), state.time, jnp.int32)


class FloatDone(Good):
    """``terminated`` as a float."""

    def step_env(self, key: jax.Array, state: State, action: Any, params: Params) -> tuple:
        obs, state, reward, terminated, info = super().step_env(key, state, action, params)
        return obs, state, reward, terminated.astype(jnp.float32), info


class ForeignSpace(Good):
    """An action space of another library (here: a plain class named Discrete)."""

    def action_space(self, params: Params) -> Any:
        return ForeignDiscrete()


class ForeignDiscrete:
    """Not gymnax's ``Discrete``."""

    n = 2
    shape = ()


class WrongAgents(Good):
    """Declares 3 agent slots but observes one."""

    num_agents = 3


class WrongMask(Good):
    """An action mask of the wrong size."""

    def action_mask(self, state: State, params: Params) -> jax.Array:
        return jnp.ones((3,), bool)


class WrongTeams(Good):
    """Two teams of 2 on 2 agent slots (observations ``[2, 4]``, rewards ``[2]``)."""

    num_agents = 2
    num_teams = 2
    team_size = 2
    scripted_kinds = {"idle": 0}  # noqa: RUF012 - a class-level declaration

    def scripted_team_actions(self, key, team_obs, kind, skill) -> jax.Array:
        return jnp.zeros((self.team_size,), jnp.int32)

    def observe(self, state: State) -> jax.Array:
        return jnp.full((2, 4), state.x, jnp.float32)

    def step_env(self, key: jax.Array, state: State, action: Any, params: Params) -> tuple:
        obs, state, reward, terminated, info = super().step_env(key, state, action[0], params)
        return obs, state, jnp.stack([reward, reward]), terminated, info

    def observation_space(self, params: Params) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (2, 4), jnp.float32)
