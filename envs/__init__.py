"""Pure-JAX environments and the registry that serves them by name.

``make(name, **overrides)`` returns ``(env, env_params)`` for every gymnax environment
(by its gymnax name, e.g. ``"CartPole-v1"``), for the environments registered here or with
:func:`register`, for an import path ``"my_pkg.my_module:MyEnv"`` (a class or factory, as
gymnasium's entry points) and for the entry points of group ``jaxrl.envs`` that installed
packages declare (``[project.entry-points."jaxrl.envs"] MyEnv-v0 = "my_pkg.envs:MyEnv"``).
:func:`resolve` is the one lookup; every command (train, evaluate, tournament, render,
exploit) reaches it through the config's ``env.name`` (and ``env.source``, the import path a
run records so that a fresh process finds a registered env again).
Keyword overrides replace fields of the env's default ``EnvParams``; a field that is itself a
struct (e.g. Soccer's ``reward``) takes a mapping of its own fields (:func:`override_params`).
What an env can do beyond the gymnax contract (agent slots, two teams, a renderer) it
declares as in :mod:`jaxrl.envs.protocols`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from collections.abc import Callable
from typing import Any

import gymnax
import jax
import jax.numpy as jnp

from jaxrl.envs import protocols, suites
from jaxrl.envs.domains import Interval, declare_domains
from jaxrl.envs.params import nest_dotted, override_params
from jaxrl.envs.probes import MemoryProbe
from jaxrl.envs.suites import legacy
from jaxrl.envs.wrappers import (
    ActionRepeat,
    EpisodeStatistics,
    Float32,
    MaskObservation,
    Wrapper,
    action_shape,
    check_action_shape,
    unwrap_state,
)

__all__ = [
    "ActionRepeat",
    "EpisodeStatistics",
    "Float32",
    "MaskObservation",
    "MemoryProbe",
    "Wrapper",
    "abstract_step",
    "action_shape",
    "check_action_shape",
    "ENTRY_POINT_GROUP",
    "import_path",
    "is_builtin",
    "is_known",
    "make",
    "nest_dotted",
    "override_params",
    "register",
    "registered_envs",
    "resolve",
    "source",
    "unwrap_state",
]

# Environments registered in this process: name -> factory returning an env instance.
_OWN_ENVS: dict[str, Callable[[], Any]] = {}
# Names registered by this package itself (a fresh process knows them without help).
_BUILTIN: set[str] = set()
# Factories found by import path or entry point, loaded once per name.
_LOADED: dict[str, Callable[[], Any]] = {}

ENTRY_POINT_GROUP = "jaxrl.envs"  # [project.entry-points."jaxrl.envs"] Name = "pkg.mod:Factory"


def register(name: str, factory: Callable[[], Any], *, overwrite: bool = False) -> None:
    """Register an environment factory (a class or function returning an env) under ``name``.

    Registering the same factory again under the same name does nothing (a re-run notebook
    cell); another factory under a taken name needs ``overwrite=True``. gymnax's names and
    import paths (``module:attr``) cannot be registered.

    Raises:
      ValueError: ``name`` is a gymnax name or an import path, or it is taken by another
        factory and ``overwrite`` is False.
    """
    if name in gymnax.registered_envs or ":" in name:
        kind = "a gymnax environment" if ":" not in name else "an import path (module:attr)"
        raise ValueError(f"cannot register {name!r}: it is {kind}")
    held = _OWN_ENVS.get(name)
    if name in _BUILTIN and held != factory:
        raise ValueError(f"cannot register {name!r}: it is one of jaxrl's own environments")
    if held is not None and held != factory and not overwrite:
        raise ValueError(
            f"environment {name!r} is already registered to {_describe(held)}; "
            "pass overwrite=True to replace it"
        )
    _OWN_ENVS[name] = factory


def _describe(factory: Any) -> str:
    return import_path(factory) or repr(factory)


def import_path(obj: Any) -> str:
    """``"module:qualname"`` of ``obj`` if a fresh process can import it back, else ``""``.

    Functions and classes defined in ``__main__``, in a function or as lambdas have none.
    """
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return ""
    path = f"{module}:{qualname}"
    try:
        return path if _load_import_path(path) is obj else ""
    except (ImportError, AttributeError, ValueError):
        return ""


def _load_import_path(path: str) -> Any:
    """The object ``"pkg.module:attr.sub"`` names (as gymnasium's entry points)."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{path!r} is not an import path of the form module:attr")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """The ``jaxrl.envs`` entry points of the installed distributions, by name."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _load(name: str) -> Callable[[], Any]:
    """The factory of an import path or an entry point ``name``, loaded once."""
    if name not in _LOADED:
        if ":" in name:
            what = "import path"
            try:
                _LOADED[name] = _load_import_path(name)
            except (ImportError, AttributeError) as err:
                raise ValueError(f"env {what} {name!r}: {type(err).__name__}: {err}") from None
        else:
            point = _entry_points()[name]
            dist = point.dist.name if point.dist is not None else "an installed package"
            try:
                _LOADED[name] = point.load()
            except (ImportError, AttributeError) as err:
                raise ValueError(
                    f"env {name!r} (entry point {point.value} of {dist}): "
                    f"{type(err).__name__}: {err}"
                ) from None
        if not callable(_LOADED[name]):
            factory = _LOADED.pop(name)
            raise ValueError(f"env {name!r}: {factory!r} is not a class or factory")
    return _LOADED[name]


def is_builtin(name: str) -> bool:
    """Whether ``name`` is gymnax's or one of this package's envs (it cannot be replaced)."""
    return name in _BUILTIN or name in gymnax.registered_envs


def is_known(name: str) -> bool:
    """Whether :func:`make` can find ``name`` (without importing anything)."""
    return (
        name in _OWN_ENVS
        or name in gymnax.registered_envs
        or ":" in name
        or name in _entry_points()
    )


def source(name: str) -> str:
    """What a fresh process needs to find env ``name`` again: an import path, or ``""``.

    ``""`` for the envs of this package and gymnax's, and for a factory registered from
    ``__main__`` or a notebook (nothing to import: register it again, or pass it to the
    Python API). An import path ``name`` is its own source; an entry point gives its value.
    """
    if name in _BUILTIN or name in gymnax.registered_envs or suites.split(name):
        return ""
    if name in _OWN_ENVS:
        return import_path(_OWN_ENVS[name])
    if ":" in name:
        return name
    point = _entry_points().get(name)
    return point.value if point is not None else ""


def resolve(name: str, fallback: str = "") -> Callable[[], Any]:
    """The factory of env ``name``: the one lookup every command goes through.

    Looked up in order: envs registered in this process (ours included), gymnax's names,
    a suite's env ``"<suite>:<env id>"`` (:mod:`jaxrl.envs.suites`), an import path
    ``"pkg.module:Factory"``, the ``jaxrl.envs`` entry points of installed packages, and
    finally ``fallback`` (a run's recorded ``env.source``, an import path).

    Raises:
      ValueError: one line: an unknown name, or an import that fails.
    """
    if name in _OWN_ENVS:
        return _OWN_ENVS[name]
    if name in gymnax.registered_envs:
        return functools.partial(_gymnax_env, name)
    if suites.split(name):
        return suites.factory(name)
    if ":" in name or name in _entry_points():
        return _load(name)
    if fallback:
        try:
            return _load(fallback)
        except ValueError as err:
            raise ValueError(f"unknown environment {name!r}; its recorded {err}") from None
    raise ValueError(
        f"unknown environment {name!r}; known: {', '.join(registered_envs())}, or an import "
        "path module:attr"
    )


def _masked_cartpole() -> MaskObservation:
    # Cart position and pole angle only: the velocities must be inferred from history.
    env, _ = gymnax.make("CartPole-v1")
    return MaskObservation(env, keep=(0, 2))


def abstract_step(env: Any, params: Any) -> tuple[Any, tuple]:
    """Shapes and dtypes of ``(reset obs, step outputs)``, traced abstractly (no compute).

    A multi-agent env (``num_agents > 1``) gets one sampled action per agent slot.
    """

    def one_step(key):
        obs, state = env.reset(key, params)
        action = env.action_space(params).sample(key)
        action = jnp.broadcast_to(action, action_shape(env, params))
        return obs, env.step(key, state, action, params)

    return jax.eval_shape(one_step, jax.random.key(0))


@functools.cache
def _gymnax_needs_float32(name: str) -> bool:
    """Whether gymnax env ``name`` returns non-float32 observations or rewards (once per name)."""
    env, params = gymnax.make(name)
    obs, (_, _, reward, *_) = abstract_step(env, params)
    return obs.dtype != jnp.float32 or reward.dtype != jnp.float32


def registered_envs() -> list[str]:
    """All names ``make`` accepts: gymnax's, ours, those registered here and entry points."""
    return sorted(set(gymnax.registered_envs) | set(_OWN_ENVS) | set(_entry_points()))


def _gymnax_env(name: str) -> Any:
    env, _ = gymnax.make(name)
    return Float32(env) if _gymnax_needs_float32(name) else env


def make(
    name: str, *, source: str = "", make_kwargs: dict[str, Any] | None = None, **overrides: Any
) -> tuple[Any, Any]:
    """Build an environment and its params.

    Args:
      name: a gymnax environment name, one registered with :func:`register`, an import path
        ``"pkg.module:Factory"`` or the name of a ``jaxrl.envs`` entry point (:func:`resolve`).
      source: an import path to fall back on when ``name`` is not found (a run's
        recorded ``env.source``).
      make_kwargs: keyword arguments of the env's factory (constructor arguments, the
        config's ``env.make_kwargs``), e.g. Navix's ``observation_fn`` or a Jumanji
        generator's size; None or empty: the factory is called with none.
      **overrides: replacements for fields of the env's default params
        (e.g. ``max_steps_in_episode=200``); a struct field takes a mapping of its own
        fields (``reward={"touch": 0.1}``), see :func:`override_params`.

    Returns:
      ``(env, env_params)``.

    Raises:
      ValueError: unknown name, a factory that does not return an env, or an override that
        does not fit the params.
    """
    factory = resolve(name, source)
    env = _call_factory(name, factory, make_kwargs or {})
    if not (name in _BUILTIN or name in gymnax.registered_envs or suites.split(name)):
        env = _adapt_step(name, env)  # a user's env: gymnax < 1.0 (five values) is wrapped
    found = name in _OWN_ENVS or name in gymnax.registered_envs  # else imported just now
    if not found and not isinstance(env, protocols.Env):
        raise ValueError(
            f"env {name!r}: its factory returned {type(env).__name__}, not a gymnax-1.x env "
            "(reset, step, action_space, observation_space, default_params; "
            "see jaxrl.envs.protocols.Env)"
        )
    params = env.default_params
    try:
        return env, override_params(params, overrides)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None


def _call_factory(name: str, factory: Callable[..., Any], make_kwargs: dict[str, Any]) -> Any:
    """``factory(**make_kwargs)``; a TypeError (arguments that do not fit) as one line."""
    try:
        return factory(**make_kwargs)
    except TypeError as err:  # a constructor's arguments that do not fit
        if not make_kwargs:
            raise ValueError(
                f"env {name!r}: its factory needs arguments, none were given (set them in "
                f"env.make_kwargs): {err}"
            ) from None
        raise ValueError(
            f"env {name!r}: its factory does not take the arguments given (env.make_kwargs: "
            f"{', '.join(sorted(make_kwargs))}): {err}"
        ) from None


# (name, env class) -> whether its step returns gymnax < 1.0's five values (traced once).
_LEGACY_STEP: dict[tuple[str, type], bool] = {}


def _adapt_step(name: str, env: Any) -> Any:
    """``env``, or :class:`jaxrl.envs.suites.legacy.LegacyStep` if its step returns five values.

    The step's arity is traced once per name (``jax.eval_shape``: no compute). An object that
    is not an env is left to :func:`make`'s own check, and so is a step that fails to trace
    (a Python ``if`` on a traced value, a foreign space, wrong shapes): the env checker
    (:mod:`jaxrl.envs.check`, run before every training) names the cause in one line.
    """
    if not isinstance(env, protocols.Env):
        return env
    key = (name, type(env))
    if key not in _LEGACY_STEP:
        try:
            _LEGACY_STEP[key] = legacy.adapt(env, name) is not env
        except legacy.StepArityError:
            raise
        except Exception:  # noqa: BLE001 - a step that does not trace: jaxrl.envs.check says why
            return env
    return legacy.LegacyStep(env) if _LEGACY_STEP[key] else env


def is_discrete(env: Any, params: Any) -> bool:
    """Whether the env's action space is discrete (``gymnax.environments.spaces.Discrete``)."""
    return isinstance(env.action_space(params), gymnax.environments.spaces.Discrete)


# gymnax's envs (and every env on its EnvParams base: MemoryProbe, a plugin's) run >= 1 step.
declare_domains(gymnax.environments.environment.EnvParams, {"max_steps_in_episode": Interval(1)})


def _register_builtin(name: str, factory: Callable[[], Any]) -> None:
    register(name, factory)
    _BUILTIN.add(name)


_register_builtin("CartPole-masked-v1", _masked_cartpole)
_register_builtin("MemoryProbe", MemoryProbe)

from jaxrl.envs.soccer import Soccer  # noqa: E402 - registered after the registry is defined

_register_builtin("Soccer", Soccer)

from jaxrl.envs.cyber import Cage2  # noqa: E402 - registered after the registry is defined

_register_builtin("CAGE2", Cage2)

from jaxrl.envs.grid import MettaArena  # noqa: E402

_register_builtin("MettaArena", MettaArena)
