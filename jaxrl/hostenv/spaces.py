"""Observation and action spaces of a host env (:class:`jaxrl.envs.host.HostSpaces`), read from the
env, with the trainer's errors (:class:`ConfigError`, one line).

The config's checks of a host env (the refused features, the encoder against the spaces) are
:mod:`jaxrl.config.host`.
"""

from __future__ import annotations

from typing import Any

from jaxrl.config.host import host_encoder, host_errors
from jaxrl.envs.host import HostSpaces
from jaxrl.envs.host import read_spaces as _read_spaces

__all__ = ["HostSpaces", "host_encoder", "read_spaces"]


def read_spaces(observation_space: Any, action_space: Any, name: str) -> HostSpaces:
    """:func:`jaxrl.envs.host.read_spaces`: :class:`HostSpaces` of one env's gymnasium spaces.

    Raises:
      ConfigError: an unsupported space, in one line naming it.
    """
    with host_errors():
        return _read_spaces(observation_space, action_space, name)
