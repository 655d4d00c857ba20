"""Navix (``pip install 'jaxrl[navix]'``) as gymnax-1.x envs: ``env.name: navix:<id>``.

Navix's envs step a ``Timestep`` (``env.step(timestep, action)``, auto-resetting on the next
call). :class:`Navix` runs Navix's transition (``_step``, no auto-reset) inside gymnax 1.x's
``Environment``, which auto-resets and reports ``info["final_observation"]``:

- observation: float32 of Navix's ``observation_fn`` (``env.make_kwargs.observation_fn``, a
  function of ``navix.observations`` given by import path or object): the default
  ``symbolic`` is ``[H, W, 3]`` (object, colour, state per cell), ``rgb`` an image
  ``[H*32, W*32, 3]`` in ``[0, 255]``, ``*_first_person`` a 7x7 view;
- action: ``Discrete(7)`` (Navix's action set; MiniGrid's actions);
- reward: float32 ``()``, Navix's reward function (1 at the goal for most tasks);
- terminated: Navix's ``termination_fn`` (goal reached, lava, ...);
- truncated: ``timestep.t >= params.max_steps_in_episode`` (default: Navix's ``max_steps``,
  100 unless ``env.make_kwargs.max_steps`` says otherwise);
- state: Navix's ``Timestep``; params: gymnax ``EnvParams`` (only the time limit).
"""

from __future__ import annotations

import importlib
from typing import Any

import jax
import jax.numpy as jnp
from gymnax.environments import environment

from jaxrl.envs.suites.spaces import float32_box, to_gymnax_space


def names() -> list[str]:
    """Navix's registered env ids."""
    import navix  # noqa: PLC0415 - the suite is imported only when one of its envs is made

    return sorted(navix.registry())


def _resolve(value: Any) -> Any:
    """An import path ``"pkg.mod:attr"`` (a YAML value) as the object it names."""
    if isinstance(value, str) and ":" in value:
        module, _, attr = value.partition(":")
        return getattr(importlib.import_module(module), attr)
    return value


class Navix(environment.Environment):
    """One Navix env on gymnax 1.x (see the module docstring for spaces and flags)."""

    def __init__(self, env_id: str, inner: Any):
        super().__init__()
        self.env_id = env_id
        self.inner = inner  # navix.Environment
        # Converted here, outside any trace: Navix's sizes are jax arrays (n = maximum + 1).
        self._action_space = to_gymnax_space(inner.action_space)
        self._observation_space = float32_box(to_gymnax_space(inner.observation_space))

    @property
    def name(self) -> str:
        """``navix:<id>``."""
        return f"navix:{self.env_id}"

    @property
    def default_params(self) -> environment.EnvParams:
        """Only the time limit: Navix's ``max_steps``."""
        return environment.EnvParams(max_steps_in_episode=int(self.inner.max_steps))

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        """A new episode; the state is Navix's ``Timestep``."""
        del params
        timestep = self.inner.reset(key)
        return timestep.observation.astype(jnp.float32), timestep

    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any):
        """Navix's transition, without its time limit or auto-reset."""
        del key, params  # Navix keeps its key in the state
        nxt = self.inner._step(state, action)  # noqa: SLF001 - the step without auto-reset
        terminated = self.inner.termination_fn(state.state, action, nxt.state)
        reward = jnp.asarray(nxt.reward, jnp.float32)
        return nxt.observation.astype(jnp.float32), nxt, reward, terminated.astype(bool), {}

    def is_truncated(self, state: Any, params: Any) -> jax.Array:
        """The time limit ``params.max_steps_in_episode``."""
        return (state.t >= params.max_steps_in_episode).astype(bool)

    def action_space(self, params: Any = None) -> Any:
        """gymnax ``Discrete(7)``."""
        return self._action_space

    def observation_space(self, params: Any) -> Any:
        """gymnax float32 ``Box`` of the observation function's shape."""
        return self._observation_space

    @property
    def num_actions(self) -> int:
        """Size of Navix's action set."""
        return len(self.inner.action_set)


def make(env_id: str, **make_kwargs: Any) -> Navix:
    """Navix env ``env_id``; ``make_kwargs`` go to ``navix.make`` (e.g. ``observation_fn``,
    ``max_steps``); a string ``"pkg.mod:attr"`` value is imported (so YAML can name one)."""
    import navix  # noqa: PLC0415

    kwargs = {k: _resolve(v) for k, v in make_kwargs.items()}
    return Navix(env_id, navix.make(env_id, **kwargs))
