"""MuJoCo Playground (``pip install 'jaxrl[playground]'``) as gymnax-1.x envs:
``env.name: playground:<env>``.

The DM Control Suite envs of MuJoCo Playground (``CartpoleBalance``, ``PendulumSwingup``,
``CheetahRun``, ...; their MJCF files ship in the wheel, nothing is downloaded) on
:class:`jaxrl.envs.suites.physics.PhysicsEnv`: float32 observations, ``Box(-1, 1)`` actions, the
env's ``done`` as termination, the config's ``episode_length`` (1000) as the time limit
(truncation). ``env.make_kwargs`` are Playground config overrides (``config_overrides``);
``impl`` defaults to ``jax`` (MJX in JAX, which runs on a CPU) instead of ``warp``.
Playground's locomotion and manipulation envs need the MuJoCo Menagerie, which Playground
clones from GitHub at run time: they are not offered.
"""

from __future__ import annotations

from typing import Any

from jaxrl.envs.suites.physics import PhysicsEnv

DEFAULT_OVERRIDES = {"impl": "jax"}  # Playground's default "warp" needs NVIDIA Warp's kernels


def names() -> list[str]:
    """The DM Control Suite envs of MuJoCo Playground."""
    from mujoco_playground import dm_control_suite  # noqa: PLC0415 - imported when made

    return list(dm_control_suite.ALL_ENVS)


def make(env_id: str, **make_kwargs: Any) -> PhysicsEnv:
    """Playground env ``env_id``; ``make_kwargs`` are config overrides (``impl``, ...)."""
    from mujoco_playground import dm_control_suite  # noqa: PLC0415

    config = dm_control_suite.get_default_config(env_id)
    overrides = {**DEFAULT_OVERRIDES, **make_kwargs}
    inner = dm_control_suite.load(env_id, config_overrides=overrides)
    max_steps = int(overrides.get("episode_length", config.episode_length))
    return PhysicsEnv(f"playground:{env_id}", inner, max_steps)
