"""``network:`` the actor-critic network."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jaxrl.config.errors import ConfigError, require

if TYPE_CHECKING:
    from jaxrl.config.env import BuiltEnv
    from jaxrl.config.root import Config

ACTIVATIONS = ("tanh", "relu", "elu", "gelu", "silu")
CORES = ("none", "gru", "lstm")
ENCODERS = ("auto", "mlp", "nature", "small")


@dataclass(frozen=True)
class NetworkConfig:
    """Actor-critic network."""

    hidden_sizes: tuple[int, ...] = (64, 64)  # MLP torso widths
    activation: str = "tanh"  # tanh | relu | elu | gelu | silu (ACTIVATIONS)
    shared_torso: bool = False  # one torso for actor and critic, or one each
    core: str = "none"  # recurrent core between torso and heads: none | gru | lstm
    core_size: int = 128  # recurrent core width
    core_unroll: int = 0  # core scan steps per loop iteration; 0: 1 on CPU, a sequence on GPU/TPU
    # > 0: encode the env's entity blocks (jaxrl.envs.protocols.EntityObservation: soccer's
    # teammates and opponents) with one shared layer of this width per group, pooled over the
    # present ones, before each torso; 0: the observation row goes to the torso as it is
    entity_width: int = 0
    # image observations [H, W, C] (also such leaves of a StructuredObservation env) go through
    # a CNN before each torso: auto | mlp | nature | small (ENCODERS); auto: the Nature CNN
    # (8x8/4, 4x4/2, 3x3/1) on images of at least 36x36, the small CNN below; mlp: flattened
    # into the torso; vector observations: always straight into the torso
    encoder: str = "auto"
    # the small CNN: one 3x3 stride-1 SAME conv per entry, of that many channels; [16] is
    # MinAtar's network (Young & Tian 2019); each layer costs a CPU run dearly (speed.md)
    cnn_channels: tuple[int, ...] = (16,)


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
    require(
        net.encoder in ENCODERS,
        f"network.encoder must be one of {', '.join(ENCODERS)}, got {net.encoder!r}",
    )
    require(
        len(net.cnn_channels) >= 1 and all(c >= 1 for c in net.cnn_channels),
        f"network.cnn_channels must be positive channel counts, got {list(net.cnn_channels)}",
    )


def validate_env(config: Config, built: BuiltEnv) -> None:
    """``network.entity_width`` needs an env whose rows have entity blocks; ``network.encoder``
    must fit the env's observations."""
    from jaxrl.envs import protocols  # noqa: PLC0415 - keep config importable without building envs

    net = config.network
    require(
        net.encoder in ENCODERS,
        f"network.encoder must be one of {', '.join(ENCODERS)}, got {net.encoder!r}",
    )
    if config.env.backend != "jax":  # a host env: BuiltEnv.env holds its spaces
        from jaxrl.config.host import host_encoder  # noqa: PLC0415 - imports envs (gymnax)

        host_encoder(net.encoder, built.env, config.env.name)
    # auto fits every observation: the observation space is read only when something may not
    # fit (a forced CNN, entity blocks, declared leaves whose size must match the rows)
    elif net.encoder != "auto" or net.entity_width or protocols.observation_leaves(built.env):
        require(
            encoder_plan(config, built.env, built.params) is None or not net.entity_width,
            f"network.entity_width: {config.env.name} has image observations, which go through "
            "network.encoder; set entity_width to 0 or network.encoder to mlp",
        )
    require(
        not net.entity_width or protocols.entity_layout(built.env) is not None,
        f"network.entity_width: {config.env.name} declares no entity blocks in its observation "
        "(jaxrl.envs.protocols.EntityObservation); set it to 0",
    )


def encoder_plan(config: Config, env: Any, env_params: Any) -> Any:
    """The leaves' encoders (:func:`jaxrl.config.encoders.plan_encoders`) of one actor's
    observation of a JAX env under ``network.encoder``; None: the flattened rows go to the torso.

    Raises:
      ConfigError: the encoder does not fit the observations (one line).
    """
    from jaxrl.config.encoders import plan_encoders  # noqa: PLC0415 - imports envs (gymnax)
    from jaxrl.envs import protocols  # noqa: PLC0415

    obs_shape = tuple(env.observation_space(env_params).shape)
    if protocols.num_agents(env) > 1:
        obs_shape = obs_shape[1:]  # [A, *obs_shape] per env: one row per agent
    try:
        return plan_encoders(
            config.network.encoder, obs_shape, protocols.observation_leaves(env), config.env.name
        )
    except ValueError as err:
        raise ConfigError(f"network.encoder: {err}") from None
