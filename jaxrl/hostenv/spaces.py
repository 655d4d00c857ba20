"""Observation and action spaces of a host env, read from the env; the config checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from jaxrl.config.errors import ConfigError, require

if TYPE_CHECKING:
    from jaxrl.config.env import BuiltEnv
    from jaxrl.config.root import Config

HOST_BACKENDS = ("gymnasium", "envpool")
HOST_MODES = ("sync", "async")


@dataclass(frozen=True)
class HostSpaces:
    """What the trainer needs of a host env's spaces (static).

    Supported: observations a ``Box`` of any shape (``[C, H, W]`` uint8 images go through a
    Nature CNN, see :mod:`jaxrl.hostenv.networks`); actions ``Discrete(n)`` or a 1-D ``Box``.
    """

    obs_shape: tuple[int, ...]  # one env's observation
    obs_dtype: str  # numpy dtype name of the observations (float32, uint8, ...)
    discrete: bool  # Discrete actions (else a 1-D Box)
    action_dim: int  # number of discrete actions, or the Box's size
    action_low: Any = None  # [A] float32 bounds the env clips to (Box actions), else None
    action_high: Any = None

    @property
    def image(self) -> bool:
        """Three-axis uint8 observations (``[C, H, W]``): the CNN encoder reads them."""
        return len(self.obs_shape) == 3 and self.obs_dtype == "uint8"


def host_encoder(encoder: str, spaces: HostSpaces, name: str) -> str | None:
    """The CNN (``nature`` | ``small``) of ``network.encoder`` for a host env's images, or None:
    the observations go flattened to the MLP (vectors, or ``mlp``). ``auto`` on images: the
    Nature CNN from 36x36 up (Atari's 84x84, as always), the small one below.

    Raises:
      ConfigError: the encoder does not fit the observations (one line).
    """
    from jaxrl.core.encoders import plan_encoders  # noqa: PLC0415 - keep the config free of flax

    shape = spaces.obs_shape
    if not spaces.image:  # float or vector observations: flattened, as always
        require(
            encoder in ("auto", "mlp"),
            f"network.encoder: {encoder} needs uint8 [C, H, W] images from a host env; {name} "
            f"observations are {'x'.join(map(str, shape))} {spaces.obs_dtype}: use mlp or auto",
        )
        return None
    try:
        plan = plan_encoders(encoder, (shape[1], shape[2], shape[0]), source=name)
    except ValueError as err:
        raise ConfigError(f"network.encoder: {err}") from None
    return None if plan is None else plan[0].kind


def read_spaces(observation_space: Any, action_space: Any, name: str) -> HostSpaces:
    """:class:`HostSpaces` of one env's gymnasium spaces.

    Raises:
      ConfigError: an unsupported space, in one line naming it.
    """
    import gymnasium  # noqa: PLC0415 - optional dependency

    box, discrete = gymnasium.spaces.Box, gymnasium.spaces.Discrete
    require(
        isinstance(observation_space, box),
        f"env.name: {name} has observation space {observation_space}; "
        "the gymnasium/envpool backends support Box observations only",
    )
    if isinstance(action_space, discrete):
        require(
            int(action_space.start) == 0,
            f"env.name: {name} has action space {action_space}; Discrete actions must start at 0",
        )
        action = {"discrete": True, "action_dim": int(action_space.n)}
    else:
        require(
            isinstance(action_space, box) and len(action_space.shape) == 1,
            f"env.name: {name} has action space {action_space}; "
            "the gymnasium/envpool backends support Discrete or 1-D Box actions only",
        )
        action = {
            "discrete": False,
            "action_dim": int(action_space.shape[0]),
            "action_low": tuple(np.asarray(action_space.low, np.float32).tolist()),
            "action_high": tuple(np.asarray(action_space.high, np.float32).tolist()),
        }
    return HostSpaces(
        obs_shape=tuple(int(n) for n in observation_space.shape),
        obs_dtype=np.dtype(observation_space.dtype).name,
        **action,
    )


def build_host_env(config: Config) -> BuiltEnv:
    """Build one instance of the host env for the config checks; its spaces as ``BuiltEnv.env``.

    Raises:
      ConfigError: the backend is not installed, the task id is unknown, or a space is not
        supported.
    """
    from jaxrl.config.env import BACKENDS, BuiltEnv  # noqa: PLC0415
    from jaxrl.hostenv.vecenv import make_vec  # noqa: PLC0415

    require(
        config.env.backend in BACKENDS,
        f"env.backend must be one of {', '.join(BACKENDS)}, got {config.env.backend!r}",
    )
    vec = make_vec(config.env.backend, config.env.name, 1, seed=0, kwargs=config.env.kwargs)
    try:
        spaces = vec.spaces
    finally:
        vec.close()
    return BuiltEnv(env=spaces, params=None)


def validate_host(config: Config) -> None:
    """What a host backend refuses: the JAX-only features and settings (one line each)."""
    env = config.env
    require(
        env.host_mode in HOST_MODES,
        f"env.host_mode must be one of {', '.join(HOST_MODES)}, got {env.host_mode!r}",
    )
    unsupported = {
        "curriculum.stages": bool(config.curriculum.stages),
        "selfplay.pool_size": config.selfplay.pool_size > 0,
        "selfplay.exploiters": config.selfplay.exploiters > 0,
        "evaluation.lanes": bool(config.evaluation.lanes),
        "sweep": bool(config.sweep),
        "pbt.every_updates": config.pbt.every_updates > 0,
        "train.num_seeds": config.train.num_seeds > 1,
        "env.normalize_obs": env.normalize_obs,
        "env.action_repeat": env.action_repeat > 1,
        "env.make_kwargs": bool(env.make_kwargs),  # a host env's arguments are env.kwargs
    }
    for key, used in unsupported.items():
        if used:
            raise ConfigError(
                f"{key}: not supported with env.backend={env.backend} (JAX envs only); "
                "remove it or use a JAX env"
            )
