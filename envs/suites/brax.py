"""Brax (``pip install 'jaxrl[brax]'``) as gymnax-1.x envs: ``env.name: brax:<env>``.

Brax's bundled envs (``ant``, ``halfcheetah``, ``hopper``, ``inverted_pendulum``, ``reacher``,
...; their MJCF assets ship in the wheel) on :class:`jaxrl.envs.suites.physics.PhysicsEnv`: float32
observations, ``Box(-1, 1)`` actions, Brax's ``done`` as termination, a time limit
(``params.max_steps_in_episode``, 1000) as truncation. ``env.make_kwargs`` go to the env's
constructor; ``backend`` defaults to ``positional`` (the fastest of Brax's pipelines to compile
and run on a CPU) instead of Brax's ``generalized``.
"""

from __future__ import annotations

from typing import Any

from jaxrl.envs.suites.physics import PhysicsEnv

DEFAULT_BACKEND = "positional"  # Brax's default is "generalized": slower on a CPU


def names() -> list[str]:
    """Brax's registered envs."""
    from brax import envs as brax_envs  # noqa: PLC0415 - imported when an env is made

    return sorted(brax_envs._envs)  # noqa: SLF001 - Brax keeps its registry there


def make(env_id: str, **make_kwargs: Any) -> PhysicsEnv:
    """Brax env ``env_id``; ``make_kwargs`` to its constructor (``backend``, ...)."""
    from brax import envs as brax_envs  # noqa: PLC0415

    kwargs = {"backend": DEFAULT_BACKEND, **make_kwargs}
    return PhysicsEnv(f"brax:{env_id}", brax_envs.get_environment(env_id, **kwargs))
