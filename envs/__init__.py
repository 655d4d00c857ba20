"""Pure-JAX environments and the registry that serves them by name.

``make(name, **overrides)`` returns ``(env, env_params)`` for every gymnax environment
(by its gymnax name, e.g. ``"CartPole-v1"``) and for the environments registered here.
Keyword overrides replace fields of the env's default ``EnvParams``; a field that is itself a
struct (e.g. Soccer's ``reward``) takes a mapping of its own fields (:func:`override_params`).
What an env can do beyond the gymnax contract (agent slots, two teams, a renderer) it
declares as in :mod:`envs.protocols`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnax
import jax
import jax.numpy as jnp

from envs.params import nest_dotted, override_params
from envs.probes import MemoryProbe
from envs.wrappers import (
    ActionRepeat,
    EpisodeStatistics,
    Float32,
    MaskObservation,
    Wrapper,
    action_shape,
    check_action_shape,
    unwrap_state,
)

__all__ = [
    "ActionRepeat",
    "EpisodeStatistics",
    "Float32",
    "MaskObservation",
    "MemoryProbe",
    "Wrapper",
    "abstract_step",
    "action_shape",
    "check_action_shape",
    "make",
    "nest_dotted",
    "override_params",
    "register",
    "registered_envs",
    "unwrap_state",
]

# Our own environments: name -> factory returning an un-parametrised env instance.
_OWN_ENVS: dict[str, Callable[[], Any]] = {}


def register(name: str, factory: Callable[[], Any]) -> None:
    """Register an environment factory under ``name`` (must not shadow a gymnax name)."""
    if name in _OWN_ENVS or name in gymnax.registered_envs:
        raise ValueError(f"environment {name!r} is already registered")
    _OWN_ENVS[name] = factory


def _masked_cartpole() -> MaskObservation:
    # Cart position and pole angle only: the velocities must be inferred from history.
    env, _ = gymnax.make("CartPole-v1")
    return MaskObservation(env, keep=(0, 2))


def abstract_step(env: Any, params: Any) -> tuple[Any, tuple]:
    """Shapes and dtypes of ``(reset obs, step outputs)``, traced abstractly (no compute).

    A multi-agent env (``num_agents > 1``) gets one sampled action per agent slot.
    """

    def one_step(key):
        obs, state = env.reset(key, params)
        action = env.action_space(params).sample(key)
        action = jnp.broadcast_to(action, action_shape(env, params))
        return obs, env.step(key, state, action, params)

    return jax.eval_shape(one_step, jax.random.key(0))


@functools.cache
def _gymnax_needs_float32(name: str) -> bool:
    """Whether gymnax env ``name`` returns non-float32 observations or rewards (once per name)."""
    env, params = gymnax.make(name)
    obs, (_, _, reward, *_) = abstract_step(env, params)
    return obs.dtype != jnp.float32 or reward.dtype != jnp.float32


def registered_envs() -> list[str]:
    """All names ``make`` accepts: gymnax's and ours."""
    return sorted(set(gymnax.registered_envs) | set(_OWN_ENVS))


def make(name: str, **overrides: Any) -> tuple[Any, Any]:
    """Build an environment and its params.

    Args:
      name: a gymnax environment name or one registered with :func:`register`.
      **overrides: replacements for fields of the env's default params
        (e.g. ``max_steps_in_episode=200``); a struct field takes a mapping of its own
        fields (``reward={"touch": 0.1}``), see :func:`override_params`.

    Returns:
      ``(env, env_params)``.

    Raises:
      ValueError: unknown name, or an override that does not fit the params.
    """
    if name in _OWN_ENVS:
        env = _OWN_ENVS[name]()
        params = env.default_params
    elif name in gymnax.registered_envs:
        env, params = gymnax.make(name)
        if _gymnax_needs_float32(name):
            env = Float32(env)
    else:
        raise ValueError(f"unknown environment {name!r}; known: {', '.join(registered_envs())}")
    try:
        return env, override_params(params, overrides)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None


def is_discrete(env: Any, params: Any) -> bool:
    """Whether the env's action space is discrete (``gymnax.environments.spaces.Discrete``)."""
    return isinstance(env.action_space(params), gymnax.environments.spaces.Discrete)


register("CartPole-masked-v1", _masked_cartpole)
register("MemoryProbe", MemoryProbe)

from envs.soccer import Soccer  # noqa: E402 - registered after the registry is defined

register("Soccer", Soccer)

from envs.cyber import Cage2  # noqa: E402 - registered after the registry is defined

register("CAGE2", Cage2)

from envs.grid import MettaArena  # noqa: E402

register("MettaArena", MettaArena)
