"""``env.backend: gymnasium | envpool``: what the host path refuses, and its env checks.

A host env (:mod:`jaxrl.envs.host`) is stepped in NumPy by the actor of :mod:`jaxrl.hostenv`; the
features of the compiled step do not ride on it. Every key of :class:`Config` is either
honoured by the host path (:data:`HOST_SUPPORTED`), refused with it (:data:`HOST_UNSUPPORTED`),
or part of a section that acts only once a refused key switches it on (:data:`HOST_IDLE`):
``tests/test_hostenv.py`` fails on a key that is none of these, so a new section or key
says here what the host path does with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from jaxrl.config.errors import ConfigError, require

if TYPE_CHECKING:
    from jaxrl.config.root import Config

HOST_BACKENDS = ("gymnasium", "envpool")
HOST_MODES = ("sync", "async")

# Keys (a whole section, or section.key) the host path honours as the JAX path does.
HOST_SUPPORTED = (
    "seed",
    "precision",
    "env.name",
    "env.source",
    "env.num_envs",
    "env.kwargs",  # the host env's constructor arguments
    "env.backend",
    "env.host_mode",
    "network",  # entity_width and the encoders are checked against the spaces (network.py)
    "ppo",
    "train.total_steps",
    "train.updates_per_chunk",
    "train.max_nonfinite_updates",
    "train.progress_bar",
    "checkpoint",
    "logger",
)

# The JAX-only features and settings: key -> whether the config uses it (refused, one line).
HOST_UNSUPPORTED: dict[str, Callable[[Config], bool]] = {
    "curriculum.stages": lambda c: bool(c.curriculum.stages),
    "selfplay.pool_size": lambda c: c.selfplay.pool_size > 0,
    "selfplay.exploiters": lambda c: c.selfplay.exploiters > 0,
    "evaluation.lanes": lambda c: bool(c.evaluation.lanes),
    "sweep": lambda c: bool(c.sweep),
    "pbt.every_updates": lambda c: c.pbt.every_updates > 0,
    "train.num_seeds": lambda c: c.train.num_seeds > 1,
    "env.normalize_obs": lambda c: c.env.normalize_obs,
    "env.action_repeat": lambda c: c.env.action_repeat > 1,
    "env.make_kwargs": lambda c: bool(c.env.make_kwargs),  # a host env's arguments: env.kwargs
    # the host learner runs on one device ("all", the default, is read as that one)
    "mesh.devices": lambda c: c.mesh.devices not in ("all", 1),
}

# Sections whose other keys act only while one of their refused keys switches them on
# (curriculum.replay needs stages, selfplay.* a pool, evaluation.* lanes, pbt.* every_updates).
HOST_IDLE = ("curriculum", "selfplay", "evaluation", "pbt")


def validate_host(config: Config) -> None:
    """What a host backend refuses: the JAX-only features and settings (one line each)."""
    env = config.env
    require(
        env.host_mode in HOST_MODES,
        f"env.host_mode must be one of {', '.join(HOST_MODES)}, got {env.host_mode!r}",
    )
    for key, used in HOST_UNSUPPORTED.items():
        if used(config):
            raise ConfigError(
                f"{key}: not supported with env.backend={env.backend} (JAX envs only); "
                "remove it or use a JAX env"
            )


@contextlib.contextmanager
def host_errors() -> Iterator[None]:
    """A host env's errors (:class:`jaxrl.envs.host.HostEnvError`, from ``envs/``, which imports
    no jaxrl) as the trainer's :class:`ConfigError`: the same one line, exit 2."""
    from jaxrl.envs.host import HostEnvError  # noqa: PLC0415 - gymnasium/envpool, optional

    try:
        yield
    except HostEnvError as err:
        raise ConfigError(str(err)) from None


def host_spaces(config: Config) -> Any:
    """Build one instance of the host env for the config checks and read its spaces
    (:class:`jaxrl.envs.host.HostSpaces`).

    Raises:
      ConfigError: the backend is not installed, the task id is unknown, or a space is not
        supported.
    """
    from jaxrl.envs.host import make_vec  # noqa: PLC0415 - gymnasium/envpool, optional

    with host_errors():
        vec = make_vec(config.env.backend, config.env.name, 1, seed=0, kwargs=config.env.kwargs)
    try:
        return vec.spaces
    finally:
        vec.close()


def host_encoder(encoder: str, spaces: Any, name: str) -> str | None:
    """The CNN (``nature`` | ``small``) of ``network.encoder`` for a host env's images
    (``spaces``: :class:`jaxrl.envs.host.HostSpaces`), or None: the observations go flattened to the
    MLP (vectors, or ``mlp``). ``auto`` on images: the Nature CNN from 36x36 up (Atari's
    84x84, as always), the small one below.

    Raises:
      ConfigError: the encoder does not fit the observations (one line).
    """
    from jaxrl.config.encoders import plan_encoders  # noqa: PLC0415 - imports envs (gymnax)

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
