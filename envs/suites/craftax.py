"""Craftax (``pip install 'jaxrl[craftax]'``) as gymnax-1.x envs: ``env.name: craftax:<id>``.

Craftax 1.6 ships gymnax < 1.0's base class (a five-value ``step`` whose ``done`` folds in the
time limit). :class:`Craftax` wraps the suite's no-auto-reset env on gymnax 1.x's
``Environment``, which auto-resets and reports ``info["final_observation"]``:

- observation: float32, ``[1345]`` (Classic symbolic), ``[8268]`` (symbolic), images
  ``[H, W, 3]`` in ``[0, 1]`` (pixels: ``[63, 63, 3]`` Classic, ``[130, 110, 3]`` Craftax);
- action: ``Discrete(17)`` (Classic) or ``Discrete(43)``;
- reward: float32 ``()`` (achievements unlocked, health change / 10);
- terminated: the game is over for a reason other than time (death, lava, the final boss);
- truncated: ``state.timestep >= params.max_timesteps`` (10,000 Classic, 100,000 Craftax;
  ``env.kwargs.max_timesteps`` changes it);
- info: Craftax's achievement flags (``Achievements/<name>``) and ``discount``.
"""

from __future__ import annotations

import importlib
from typing import Any

import jax
import jax.numpy as jnp
from gymnax.environments import environment

from jaxrl.envs.suites.spaces import float32_box, to_gymnax_space

# env id -> (module, no-auto-reset class) of the craftax package.
_ENVS = {
    "Craftax-Classic-Symbolic-v1": (
        "craftax.craftax_classic.envs.craftax_symbolic_env",
        "CraftaxClassicSymbolicEnvNoAutoReset",
    ),
    "Craftax-Classic-Pixels-v1": (
        "craftax.craftax_classic.envs.craftax_pixels_env",
        "CraftaxClassicPixelsEnvNoAutoReset",
    ),
    "Craftax-Symbolic-v1": (
        "craftax.craftax.envs.craftax_symbolic_env",
        "CraftaxSymbolicEnvNoAutoReset",
    ),
    "Craftax-Pixels-v1": ("craftax.craftax.envs.craftax_pixels_env", "CraftaxPixelsEnvNoAutoReset"),
}


def names() -> list[str]:
    """The Craftax env ids."""
    return list(_ENVS)


class Craftax(environment.Environment):
    """One Craftax env on gymnax 1.x (see the module docstring for the spaces and flags).

    State: Craftax's own ``EnvState`` (its ``timestep`` counts steps); params: Craftax's
    ``EnvParams`` (``max_timesteps``, ``day_length``, ...).
    """

    def __init__(self, env_id: str, inner: Any):
        super().__init__()
        self.env_id = env_id
        self.inner = inner  # craftax's EnvironmentNoAutoReset subclass instance
        # jaxrl.envs.protocols.RenderableEnv: Craftax's own pixel renderer (jaxrl render)
        full = not env_id.startswith("Craftax-Classic")
        self.renderer = "jaxrl.envs.suites.craftax_render" + ("_full" if full else "")

    @property
    def name(self) -> str:
        """``craftax:<id>``."""
        return f"craftax:{self.env_id}"

    @property
    def default_params(self) -> Any:
        """Craftax's default ``EnvParams``."""
        return self.inner.default_params

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        """A new world; float32 observation."""
        obs, state = self.inner.reset_env(key, params)
        return obs.astype(jnp.float32), state

    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any):
        """One Craftax step: ``(obs, state, reward, terminated, info)`` (no time limit)."""
        obs, state, reward, _, info = self.inner.step_env(key, state, action, params)
        # Craftax's game-over test includes the time limit; with the clock at 0 it is only
        # death, lava or the boss: the time limit is truncation (is_truncated).
        terminated = self.inner.is_terminal(state.replace(timestep=0), params)
        return obs.astype(jnp.float32), state, jnp.float32(reward), terminated, info

    def is_truncated(self, state: Any, params: Any) -> jax.Array:
        """Craftax's time limit."""
        return (state.timestep >= params.max_timesteps).astype(bool)

    def action_space(self, params: Any = None) -> Any:
        """gymnax ``Discrete(17)`` (Classic) or ``Discrete(43)``."""
        return to_gymnax_space(self.inner.action_space(params))

    def observation_space(self, params: Any) -> Any:
        """gymnax float32 ``Box`` (a vector, or an image ``[H, W, 3]``)."""
        return float32_box(to_gymnax_space(self.inner.observation_space(params)))

    @property
    def num_actions(self) -> int:
        """17 (Classic) or 43."""
        return int(self.inner.num_actions)


def make(env_id: str, **make_kwargs: Any) -> Craftax:
    """Craftax env ``env_id``; ``make_kwargs`` go to its constructor (``static_env_params``)."""
    module, cls = _ENVS[env_id]
    inner = getattr(importlib.import_module(module), cls)(**make_kwargs)
    return Craftax(env_id, inner)
