"""``env:`` which environment and how many instances; building it, once, for the checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jaxrl.config.errors import ConfigError, check_env_overrides, require, suggest
from jaxrl.config.host import HOST_BACKENDS, host_spaces, validate_host

if TYPE_CHECKING:
    from jaxrl.config.root import Config


BACKENDS = ("jax", *HOST_BACKENDS)


@dataclass(frozen=True)
class EnvConfig:
    """Which environment and how many instances."""

    name: str = "CartPole-v1"  # env name (gymnax, ours, a jaxrl.envs entry point) or module:attr
    # import path of the env's factory, recorded by train when a fresh process could not find
    # env.name by itself (an env registered from Python); "" for every other env
    source: str = ""
    num_envs: int = 4  # parallel env instances (vmapped)
    kwargs: dict[str, Any] = field(default_factory=dict)  # overrides of the env's EnvParams
    # keyword arguments of the env's factory (its constructor), e.g. a suite env's options
    make_kwargs: dict[str, Any] = field(default_factory=dict)
    action_repeat: int = 1  # env steps per agent decision; rewards summed
    normalize_obs: bool = False  # running mean/var observation normalisation
    # jax: a JAX env (the compiled train step); gymnasium | envpool: env.name is that
    # package's task id, stepped on the host by an actor (jaxrl.hostenv)
    backend: str = "jax"
    host_mode: str = "sync"  # gymnasium/envpool: sync (reproducible) | async (actor 1 update ahead)


@dataclass(frozen=True)
class BuiltEnv:
    """The run's env, built once from ``env.name`` and ``env.kwargs`` for env-dependent checks.

    Sections that check values against the env (curriculum stages, evaluation lanes,
    self-play's two teams) receive this in their ``validate_env`` instead of building it again.
    """

    env: Any  # the env as envs.make returns it (without the trainer's wrappers)
    params: Any  # its EnvParams with env.kwargs applied: what stages and lanes override


def build_env(config: Config) -> BuiltEnv:
    """Build ``config.env`` once: the name must be registered, ``env.kwargs`` must fit and the
    env must keep the contract (:func:`jaxrl.envs.check.check_once`: abstract, no compile).

    Raises:
      ConfigError: one line naming the env and what to change.
    """
    from jaxrl import envs  # noqa: PLC0415 - keep config importable without building envs
    from jaxrl.envs import check  # noqa: PLC0415

    env = config.env
    if env.backend != "jax":  # a host env: spaces read from one instance (jaxrl.envs.host)
        require(
            env.backend in BACKENDS,
            f"env.backend must be one of {', '.join(BACKENDS)}, got {env.backend!r}",
        )
        return BuiltEnv(env=host_spaces(config), params=None)
    close = suggest(env.name, envs.registered_envs())
    require(
        envs.is_known(env.name) or bool(env.source),
        f"env.name: unknown environment {env.name!r}"
        + (close or " (give an import path module:attr, install a jaxrl.envs plugin, or, for "
           "an env registered from Python, register it again or pass env= to the Python API)"),
    )  # fmt: skip
    try:
        base_env, default_params = check.make(
            env.name, source=env.source, make_kwargs=env.make_kwargs
        )
        if env.source and not envs.is_known(env.name):  # the recorded factory, for every
            envs.register(env.name, envs.resolve(env.name, env.source))  # later envs.make
    except ValueError as err:  # check.EnvCheckError too: a factory that raised, in one line
        raise ConfigError(f"env.name: {err}") from None
    check_env_overrides("env.kwargs", env.kwargs, default_params, staged=False)
    try:
        params = envs.override_params(default_params, env.kwargs)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"env.kwargs: {env.name}: {err}") from None
    try:  # the env contract, traced abstractly once per env in this process (jaxrl.envs.check)
        check.check_once(env.name, base_env, params)
    except check.EnvCheckError as err:
        raise ConfigError(f"env.name: {err}") from None
    return BuiltEnv(env=base_env, params=params)


def validate(config: Config) -> None:
    """Values of ``env:`` (the name and kwargs are checked by :func:`build_env`)."""
    env = config.env
    require(
        env.backend in BACKENDS,
        f"env.backend must be one of {', '.join(BACKENDS)}, got {env.backend!r}",
    )
    if env.backend != "jax":
        validate_host(config)
    require(env.num_envs >= 1, f"env.num_envs must be >= 1, got {env.num_envs}")
    require(env.action_repeat >= 1, f"env.action_repeat must be >= 1, got {env.action_repeat}")
