"""``mesh:`` the devices the env batch is sharded over."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jaxrl.config.errors import require

if TYPE_CHECKING:
    from jaxrl.config.env import BuiltEnv
    from jaxrl.config.root import Config


@dataclass(frozen=True)
class MeshConfig:
    """Devices the env batch is sharded over (params replicated, gradients averaged)."""

    devices: Any = "all"  # "all" (every device of every process) or a number of devices


def mesh_size(config: Config) -> int:
    """Devices the env batch would be sharded over (``mesh.devices``, "all": every device)."""
    import jax  # noqa: PLC0415 - config stays importable without starting a backend

    available = jax.device_count()
    devices = config.mesh.devices
    return available if devices == "all" else int(devices)


def validate(config: Config) -> None:
    """The form of ``mesh.devices`` ("all" or a number >= 1; the devices here are checked by
    :func:`validate_env`)."""
    devices = config.mesh.devices
    require(
        devices == "all" or (isinstance(devices, int) and not isinstance(devices, bool)),
        f"mesh.devices must be 'all' or a number of devices, got {devices!r}",
    )
    require(devices == "all" or devices >= 1, f"mesh.devices must be >= 1, got {devices}")


def validate_env(config: Config, built: BuiltEnv) -> None:
    """``mesh.devices`` exists here, and the env batch and lanes divide over it (asks JAX, so
    it runs with the env checks, after every section's own values)."""
    del built  # the devices, not the env
    import jax  # noqa: PLC0415 - config stays importable without starting a backend

    devices = config.mesh.devices
    available = jax.device_count()
    require(
        devices == "all" or devices <= available,
        f"mesh.devices: {devices} devices asked for, {available} available",
    )
    count = mesh_size(config)
    if count == 1:
        return
    where = f"over {count} devices (mesh.devices={devices})"
    require(
        config.env.num_envs % count == 0,
        f"env.num_envs ({config.env.num_envs}) does not divide {where}",
    )
    for i, lane in enumerate(config.evaluation.lanes):
        require(
            lane.envs % count == 0,
            f"evaluation.lanes[{i}].envs ({lane.envs}) does not divide {where}",
        )
