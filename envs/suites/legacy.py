"""Envs on the gymnax < 1.0 contract as gymnax-1.x envs: :class:`LegacyStep`.

Before gymnax 1.0 ``step`` returned five values, ``(obs, state, reward, done, info)``, with the
time limit folded into ``done``; Craftax (1.6) and Kinetix still ship that base class.
:func:`jaxrl.envs.make` traces an imported env's step once (``jax.eval_shape``, no compute) and
wraps a five-value one in :class:`LegacyStep` (:func:`adapt`), so that
``env.name=craftax.craftax_classic.envs.craftax_symbolic_env:CraftaxClassicSymbolicEnv``
trains as it is.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxrl.envs.suites.spaces import float32_box, to_gymnax_space
from jaxrl.envs.wrappers import Wrapper, action_shape


def _float32(tree: Any) -> Any:
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), tree)


class LegacyStep(Wrapper):
    """A five-value env (gymnax < 1.0) on the gymnax 1.x contract.

    - ``done`` becomes ``terminated``; ``truncated`` is always False: a legacy env does not say
      whether ``done`` came from its time limit, so an episode cut by the limit is not
      bootstrapped (what a gymnax < 1.0 trainer did with it too);
    - the legacy env auto-resets in its own ``step``, so the pre-reset observation is lost:
      ``info["final_observation"]`` is the returned observation (only ever read where
      ``truncated``, which is never);
    - observations (every leaf) and rewards become float32; ``done`` a bool ``()``;
    - the env's own spaces (a copy of gymnax's, Craftax's) become gymnax's
      (:func:`jaxrl.envs.suites.spaces.to_gymnax_space`).
    """

    def action_space(self, params: Any) -> Any:
        """The env's action space as a gymnax space."""
        return to_gymnax_space(self._env.action_space(params))

    def observation_space(self, params: Any) -> Any:
        """The env's observation space as a gymnax space (a Box: float32)."""
        return float32_box(to_gymnax_space(self._env.observation_space(params)))

    def reset(self, key: jax.Array, params: Any) -> tuple[Any, Any]:
        """Reset; float32 observation."""
        obs, state = self._env.reset(key, params)
        return _float32(obs), state

    def step(self, key: jax.Array, state: Any, action: Any, params: Any):
        """Step the legacy env; ``(obs, state, reward, terminated, truncated, info)``."""
        obs, state, reward, done, info = self._env.step(key, state, action, params)
        obs = _float32(obs)
        terminated = jnp.asarray(done, bool)
        info = {**info, "final_observation": obs}
        reward = jnp.asarray(reward, jnp.float32)
        return obs, state, reward, terminated, jnp.zeros_like(terminated), info


def step_arity(env: Any, params: Any) -> int:
    """How many values ``env.step`` returns, traced abstractly (no compute); -1: not a tuple."""

    def one_step(key: jax.Array) -> Any:
        key_reset, key_action, key_step = jax.random.split(key, 3)
        _, state = env.reset(key_reset, params)
        action = to_gymnax_space(env.action_space(params)).sample(key_action)
        action = jnp.broadcast_to(action, action_shape(env, params))
        return env.step(key_step, state, action, params)

    out = jax.eval_shape(one_step, jax.random.key(0))
    return len(out) if isinstance(out, tuple) else -1


class StepArityError(ValueError):
    """A step that returns neither gymnax 1.x's six values nor gymnax < 1.0's five."""


def adapt(env: Any, name: str) -> Any:
    """``env`` if its step returns six values, :class:`LegacyStep` ``(env)`` if five.

    Raises:
      StepArityError: one line naming the env and what its step returned, for any other
        arity.
    """
    arity = step_arity(env, env.default_params)
    if arity == 6:
        return env
    if arity == 5:
        return LegacyStep(env)
    got = f"{arity} values" if arity >= 0 else "no tuple"
    raise StepArityError(
        f"env {name!r}: its step returned {got}; expected 6 (obs, state, reward, terminated, "
        "truncated, info; gymnax >= 1.0) or 5 (obs, state, reward, done, info; gymnax < 1.0)"
    )
