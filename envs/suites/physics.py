"""Brax-style physics envs (``reset(rng) -> State``, ``step(state, action) -> State``) as
gymnax-1.x envs: :class:`PhysicsEnv`, shared by the ``brax`` and ``playground`` suites.

Brax's and MuJoCo Playground's envs have no time limit of their own (their training wrappers
add one) and no auto-reset; gymnax 1.x's ``Environment`` adds both:

- observation: float32 ``[obs_size]`` (the env's ``obs``);
- action: float32 ``Box(-1, 1, [action_size])`` (both suites scale actions to ``[-1, 1]``);
- reward: float32 ``()``;
- terminated: the env's ``done`` (a fall, for the locomotion envs; never, for most);
- truncated: ``time >= params.max_steps_in_episode`` (1000 by default, as both suites train);
- state: :class:`PhysicsState` (the suite's ``State`` and the step count).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


class PhysicsState(struct.PyTreeNode):
    """State of :class:`PhysicsEnv`."""

    inner: Any  # the suite's State (pipeline or MJX data, obs, reward, done, metrics, info)
    time: jax.Array  # () int32, steps taken in this episode


class PhysicsEnv(environment.Environment):
    """A Brax or Playground env on gymnax 1.x (see the module docstring)."""

    def __init__(self, name: str, inner: Any, max_steps: int = 1000):
        super().__init__()
        self._name = name
        self.inner = inner  # brax.envs.Env or mujoco_playground.MjxEnv
        self.max_steps = int(max_steps)

    @property
    def name(self) -> str:
        """``<suite>:<id>``."""
        return self._name

    @property
    def default_params(self) -> environment.EnvParams:
        """Only the time limit."""
        return environment.EnvParams(max_steps_in_episode=self.max_steps)

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, PhysicsState]:
        """A new episode."""
        del params
        inner = self.inner.reset(key)
        return inner.obs.astype(jnp.float32), PhysicsState(inner=inner, time=jnp.int32(0))

    def step_env(self, key: jax.Array, state: PhysicsState, action: Any, params: Any):
        """One step of the suite's env; its ``done`` is termination."""
        del key, params  # the physics is deterministic; the suites keep their own keys
        inner = self.inner.step(state.inner, action)
        nxt = PhysicsState(inner=inner, time=state.time + 1)
        reward = jnp.asarray(inner.reward, jnp.float32)
        return inner.obs.astype(jnp.float32), nxt, reward, inner.done > 0.5, {}

    def is_truncated(self, state: PhysicsState, params: Any) -> jax.Array:
        """The time limit ``params.max_steps_in_episode``."""
        return state.time >= params.max_steps_in_episode

    def action_space(self, params: Any = None) -> spaces.Box:
        """float32 ``Box(-1, 1, [action_size])``."""
        return spaces.Box(-1.0, 1.0, (int(self.inner.action_size),), jnp.float32)

    def observation_space(self, params: Any) -> spaces.Box:
        """float32 ``Box(-inf, inf, [obs_size])``.

        Raises:
          ValueError: the env's observation is a dict (not supported).
        """
        size = self.inner.observation_size
        if not isinstance(size, int):
            raise ValueError(f"{self._name}: dict observations ({size}) are not supported")
        return spaces.Box(-jnp.inf, jnp.inf, (size,), jnp.float32)
