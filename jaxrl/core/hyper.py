"""Traced hyperparameters and the members of a run (seeds and sweep points).

A run trains ``R = len(sweep points) x train.num_seeds`` independent members in one
compiled program: every leaf of the runner state gets a leading ``[R]`` axis and the chunk
function is ``jax.vmap``ped over it. Member ``m`` is sweep point ``m // num_seeds`` with seed
``seed + m % num_seeds``; with one member there is no leading axis at all.

The values a sweep (or population-based training, :mod:`jaxrl.features.pbt`) may vary per member are
array leaves of :class:`Hyper`, carried in the runner state, so every member traces the same
function: no recompile per value. They are addressed by their config key:

- ``ppo.<field>`` for the PPO member values (``ppo.lr``, ``ppo.ent_coef``, ...): the fields
  ``jaxrl/config/ppo.py`` declares with ``member_value``. :class:`Hyper` has one leaf per
  such field, derived from that one declaration, so a new loss coefficient is a field there
  and its use in the loss (``hp.values.<name>``), and sweeps and PBT take it as they are;
- ``env.kwargs.<path>`` for a numeric scalar array leaf of the env's ``EnvParams``, e.g.
  ``env.kwargs.reward.touch``. :func:`member_env_params` writes the member's values into the
  env params the member's rollouts play under, so a sweep over a reward weight is one compile
  for every weight.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.config.ppo import MEMBER_VALUES
from jaxrl.config.sweep import check_env_values, env_leaf_kind  # noqa: F401 - the checks, pure

if TYPE_CHECKING:
    from jaxrl.config import Config

ENV_PREFIX = "env.kwargs."  # config keys of env parameters: env.kwargs.<path in EnvParams>
KINDS = ("float", "int", "bool")  # what an env leaf holds (ppo values are all float)


def _hyper_class() -> type:
    """The :class:`Hyper` pytree: a frozen flax struct with one float32 leaf per PPO member
    value (``jaxrl.config.ppo.MEMBER_VALUES``, in declaration order), then ``env``.

    Built once at import from that static declaration (never from a run's config), so the
    leaves, their checkpoint paths (``hyper.lr``, ...) and attribute access are those of a
    hand-written struct, and a new member value needs no edit here.
    """
    annotations = {name: jax.Array for name in MEMBER_VALUES}
    annotations["env"] = dict
    namespace = {
        "__annotations__": annotations,
        "__doc__": "The traced per-member values of one member (float32 scalars ``()``, or "
        "``[R]`` stacked): the PPO member values by name, then ``env``.",
        "__module__": __name__,
        "__qualname__": "Hyper",
        # {path in EnvParams (reward.touch): () float32}: the env parameters that vary per
        # member (swept or explored by PBT); empty otherwise, so runs without them keep the
        # runner state (and checkpoints) they always had.
        "env": struct.field(default_factory=dict),
    }
    return struct.dataclass(type("Hyper", (), namespace))


Hyper = _hyper_class()


# ppo.<field> -> Hyper field (the same names as config.SWEEPABLE; a test keeps them equal).
PPO_KEYS = {f"ppo.{f.name}": f.name for f in dataclasses.fields(Hyper) if f.name != "env"}


@dataclasses.dataclass(frozen=True)
class Members:
    """Who the ``R`` members of a run are (static)."""

    names: tuple[str, ...]  # TensorBoard run names: seed3, or lr=0.001-seed3 for sweeps
    seeds: tuple[int, ...]  # [R] seed of each member
    points: tuple[dict[str, float], ...]  # [R] the member's swept values (empty without sweep)
    hyper: Hyper  # leaves [R] float32 (numpy)

    @property
    def count(self) -> int:
        """``R``."""
        return len(self.names)


# ---- addressing values by config key ------------------------------------------------------


def is_env_key(key: str) -> bool:
    """Whether ``key`` names an env parameter (``env.kwargs.<path>``)."""
    return key.startswith(ENV_PREFIX)


def env_path(key: str) -> str:
    """``env.kwargs.reward.touch`` -> ``reward.touch`` (the path inside ``EnvParams``)."""
    return key[len(ENV_PREFIX) :]


def member_keys(hyper: Hyper) -> tuple[str, ...]:
    """Config keys of every value of ``hyper``: the PPO fields, then its env parameters."""
    return (*PPO_KEYS, *(ENV_PREFIX + path for path in hyper.env))


def get_value(hyper: Hyper, key: str) -> jax.Array:
    """The value of config key ``key`` in ``hyper``."""
    if is_env_key(key):
        return hyper.env[env_path(key)]
    return getattr(hyper, PPO_KEYS[key])


def set_value(hyper: Hyper, key: str, value: Any) -> Hyper:
    """``hyper`` with the value of config key ``key`` replaced."""
    if is_env_key(key):
        return hyper.replace(env={**hyper.env, env_path(key): value})
    return hyper.replace(**{PPO_KEYS[key]: value})


def value_tags(hyper: Hyper) -> dict[str, jax.Array]:
    """``{hyper/<config key>: value}``: the member's values as TensorBoard scalars."""
    return {f"hyper/{key}": get_value(hyper, key) for key in member_keys(hyper)}


# ---- env parameters as member values ------------------------------------------------------


def member_env_params(env_params: Any, hyper: Hyper) -> Any:
    """``env_params`` with the member's env values (``hyper.env``) written in.

    Each value is cast to its leaf's dtype: rounded for an integer leaf, ``!= 0`` for a bool
    (values are checked at load to cast without loss). Traced per member, so every member of
    a vmapped run plays under its own values in the one compiled program.
    """
    from jaxrl.envs.params import get_path, replace_path  # noqa: PLC0415 - see base_hyper

    for path, value in hyper.env.items():
        # A Python int leaf reads as int64: JAX's own width (int32 without x64).
        dtype = jax.dtypes.canonicalize_dtype(np.asarray(get_path(env_params, path)).dtype)
        value = jnp.asarray(value, jnp.float32)
        if dtype.kind == "b":
            cast = value != 0
        elif dtype.kind in "iu":
            cast = jnp.round(value).astype(dtype)
        else:
            cast = value.astype(dtype)
        env_params = replace_path(env_params, path, cast)
    return env_params


def varied_env_keys(config: Config) -> tuple[str, ...]:
    """The env keys that vary per member: the swept ones, then those PBT explores."""
    keys = [key for key in config.sweep if is_env_key(key)]
    explored = config.pbt.keys if config.pbt.enabled else ()
    keys += [key for key in explored if is_env_key(key) and key not in keys]
    return tuple(keys)


# ---- the members --------------------------------------------------------------------------


def base_hyper(config: Config) -> Hyper:
    """The config's own values (float32 numpy scalars), env ones read from its env params.

    Every env parameter that varies per member (swept, or explored by PBT) gets an entry in
    ``Hyper.env``, so every runner state of the run has the same structure.
    """
    value = lambda x: np.float32(x)  # noqa: E731
    env = {}
    keys = varied_env_keys(config)
    if keys:
        # Local: hyper is imported by the config's validation, which keeps envs lazy.
        from jaxrl import envs  # noqa: PLC0415
        from jaxrl.envs.params import get_path  # noqa: PLC0415

        _, env_params = envs.make(
            config.env.name, make_kwargs=config.env.make_kwargs, **config.env.kwargs
        )
        env = {env_path(key): value(get_path(env_params, env_path(key))) for key in keys}
    return Hyper(**{name: value(getattr(config.ppo, name)) for name in MEMBER_VALUES}, env=env)


def make_members(config: Config) -> Members:
    """Seeds ``seed .. seed + num_seeds - 1`` for every sweep point, point-major."""
    seeds = config.train.num_seeds
    sweep = config.sweep
    points_count = len(next(iter(sweep.values()))) if sweep else 1
    base = base_hyper(config)
    names, member_seeds, points, hypers = [], [], [], []
    for p in range(points_count):
        point = {key: float(values[p]) for key, values in sweep.items()}
        hyper = base
        for key, value in point.items():
            hyper = set_value(hyper, key, np.float32(value))
        label = "-".join(f"{key.split('.')[-1]}={value:g}" for key, value in point.items())
        for s in range(seeds):
            seed = config.seed + s
            names.append(f"{label}-seed{seed}" if label else f"seed{seed}")
            member_seeds.append(seed)
            points.append(point)
            hypers.append(hyper)
    stacked = jax.tree.map(lambda *xs: np.stack(xs).astype(np.float32), *hypers)
    return Members(
        names=tuple(names), seeds=tuple(member_seeds), points=tuple(points), hyper=stacked
    )
