"""Pure-JAX environments and the registry that serves them by name.

``make(name, **overrides)`` returns ``(env, env_params)`` for every gymnax environment
(by its gymnax name, e.g. ``"CartPole-v1"``) and for the environments registered here.
Keyword overrides replace fields of the env's default ``EnvParams``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import gymnax

from envs.probes import MemoryProbe
from envs.wrappers import ActionRepeat, EpisodeStatistics, MaskObservation, Wrapper

__all__ = [
    "ActionRepeat",
    "EpisodeStatistics",
    "MaskObservation",
    "MemoryProbe",
    "Wrapper",
    "make",
    "register",
    "registered_envs",
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


def registered_envs() -> list[str]:
    """All names ``make`` accepts: gymnax's and ours."""
    return sorted(set(gymnax.registered_envs) | set(_OWN_ENVS))


def make(name: str, **overrides: Any) -> tuple[Any, Any]:
    """Build an environment and its params.

    Args:
      name: a gymnax environment name or one registered with :func:`register`.
      **overrides: replacements for fields of the env's default params
        (e.g. ``max_steps_in_episode=200``).

    Returns:
      ``(env, env_params)``.

    Raises:
      ValueError: unknown name, or an override that is not a field of the params.
    """
    if name in _OWN_ENVS:
        env = _OWN_ENVS[name]()
        params = env.default_params
    elif name in gymnax.registered_envs:
        env, params = gymnax.make(name)
    else:
        raise ValueError(f"unknown environment {name!r}; known: {', '.join(registered_envs())}")
    fields = {f.name for f in dataclasses.fields(params)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(
            f"{name} has no parameter {unknown[0]!r}; its parameters: {', '.join(sorted(fields))}"
        )
    # An int given for a float parameter (gravity=10) keeps the parameter a float.
    overrides = {
        k: float(v)
        if isinstance(getattr(params, k), float) and isinstance(v, int) and not isinstance(v, bool)
        else v
        for k, v in overrides.items()
    }
    return env, params.replace(**overrides)


def is_discrete(env: Any, params: Any) -> bool:
    """Whether the env's action space is discrete (``gymnax.environments.spaces.Discrete``)."""
    return isinstance(env.action_space(params), gymnax.environments.spaces.Discrete)


register("CartPole-masked-v1", _masked_cartpole)
register("MemoryProbe", MemoryProbe)

from envs.soccer import Soccer  # noqa: E402 - registered after the registry is defined

register("Soccer", Soccer)
