"""The vectorised host env of :mod:`jaxrl.envs.host`, its errors as :class:`ConfigError` (one line,
exit 2) for the trainer.
"""

from __future__ import annotations

from typing import Any

from jaxrl.config.host import host_errors
from jaxrl.envs.host import (  # noqa: F401 - the trainer's names for the host env, as before
    EnvPoolVec,
    GymnasiumVec,
    HostEnvError,
    HostStep,
    HostVecEnv,
)
from jaxrl.envs.host import make_vec as _make_vec


def make_vec(
    backend: str, name: str, num_envs: int, seed: int, kwargs: dict[str, Any]
) -> HostVecEnv:
    """:func:`jaxrl.envs.host.make_vec`: ``num_envs`` envs of task ``name`` from ``backend``,
    seeded.

    Raises:
      ConfigError: the backend's package is not installed, or it cannot make ``name``.
    """
    with host_errors():
        return _make_vec(backend, name, num_envs, seed, kwargs)
