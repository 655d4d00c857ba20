"""``network:`` the actor-critic network."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jaxrl.config.errors import require

if TYPE_CHECKING:
    from jaxrl.config.env import BuiltEnv
    from jaxrl.config.root import Config

ACTIVATIONS = ("tanh", "relu", "elu", "gelu", "silu")
CORES = ("none", "gru", "lstm")


@dataclass(frozen=True)
class NetworkConfig:
    """Actor-critic network."""

    hidden_sizes: tuple[int, ...] = (64, 64)  # MLP torso widths
    activation: str = "tanh"  # tanh | relu | elu | gelu | silu (ACTIVATIONS)
    shared_torso: bool = False  # one torso for actor and critic, or one each
    core: str = "none"  # recurrent core between torso and heads: none | gru | lstm
    core_size: int = 128  # recurrent core width
    core_unroll: int = 0  # core scan steps per loop iteration; 0: 1 on CPU, a sequence on GPU/TPU
    # > 0: encode the env's entity blocks (envs.protocols.EntityObservation: soccer's teammates
    # and opponents) with one shared layer of this width per group, pooled over the present
    # ones, before each torso; 0: the observation row goes to the torso as it is
    entity_width: int = 0


def validate(config: Config) -> None:
    """Values of ``network:``."""
    net = config.network
    require(
        net.activation in ACTIVATIONS,
        f"network.activation must be one of {', '.join(ACTIVATIONS)}, got {net.activation!r}",
    )
    require(
        len(net.hidden_sizes) >= 1 and all(h >= 1 for h in net.hidden_sizes),
        f"network.hidden_sizes must be positive widths, got {list(net.hidden_sizes)}",
    )
    require(net.core in CORES, f"network.core must be one of {', '.join(CORES)}, got {net.core!r}")
    require(net.core_size >= 1, f"network.core_size must be >= 1, got {net.core_size}")
    require(net.core_unroll >= 0, f"network.core_unroll must be >= 0, got {net.core_unroll}")
    require(net.entity_width >= 0, f"network.entity_width must be >= 0, got {net.entity_width}")


def validate_env(config: Config, built: BuiltEnv) -> None:
    """``network.entity_width`` needs an env whose rows have entity blocks."""
    from envs import protocols  # noqa: PLC0415 - keep config importable without building envs

    require(
        not config.network.entity_width or protocols.entity_layout(built.env) is not None,
        f"network.entity_width: {config.env.name} declares no entity blocks in its observation "
        "(envs.protocols.EntityObservation); set it to 0",
    )
