"""Checks of an env against the contract the trainer relies on, one line per failure.

gymnasium (``gymnasium.utils.env_checker``) and Stable-Baselines3 (``check_env``) ship an env
checker; this is the one for gymnax-1.x envs. Every failure is an :class:`EnvCheckError`
whose message is one line naming the env, what is wrong and what to change, instead of the
error the trainer would hit later (an 85-line flax ``ScopeParamShapeError`` for observations
that do not match the space, a 48-line ``TracerBoolConversionError`` for a Python ``if`` in
``step_env``).

- :func:`make` builds the env (:func:`jaxrl.envs.make`); a factory that raises is one line.
- :func:`check_abstract` traces ``reset`` and ``step`` under ``vmap`` with
  :func:`jax.eval_shape` (no compile, no compute): the gymnax version, the spaces' classes,
  the step's arity and return types, observations against the observation space, Python
  control flow on traced values, and the declarations of :mod:`jaxrl.envs.protocols`. The trainer
  runs it at every config load (``jaxrl.config.env.build_env``).
- :func:`check_running` steps the env for real, jitted and vmapped, once: finite values and
  the time limit (``max_steps_in_episode`` truncates, it does not terminate). ``jaxrl
  check-env NAME`` runs both.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable
from typing import Any

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces
from gymnax.wrappers.purerl import GymnaxWrapper

from jaxrl import envs
from jaxrl.envs import protocols
from jaxrl.envs.wrappers import action_shape, legal_actions

GYMNAX_PIN = "pip install --force-reinstall 'gymnax>=1.0,<2'"
TRACED_FLOW = (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError)
BATCH = 2  # envs in the vmapped traces and steps


class EnvCheckError(ValueError):
    """An env that breaks the contract: one line naming the env, the problem and the fix."""


@dataclasses.dataclass(frozen=True)
class EnvSummary:
    """What a passing env looks like (static), for ``ok: <env>: ...``."""

    name: str  # env.name as given
    obs_shape: tuple[int, ...]  # one env's observation ([A, *obs] for A agent slots)
    obs_dtype: str  # float32 (or uint8 for byte images)
    action_space: str  # e.g. "Discrete(2)", "Box(float32, (3,))"
    num_agents: int  # agent slots per env instance (1: single-agent)
    declares: tuple[str, ...] = ()  # protocols beyond the contract, e.g. ("action mask",)
    notes: tuple[str, ...] = ()  # what was adapted or not checked, in words

    def line(self) -> str:
        """``ok: NAME: observations float32 (4,), actions Discrete(2), ...``."""
        parts = [
            f"observations {self.obs_dtype} {self.obs_shape}",
            f"actions {self.action_space}",
            f"{self.num_agents} agent slot{'s' if self.num_agents > 1 else ''}",
            *self.declares,
            *self.notes,
        ]
        return f"ok: {self.name}: " + ", ".join(parts)


# ----------------------------------------------------------------------------- where


def _library_dirs() -> tuple[str, ...]:
    """Folders whose frames are not the user's code: Python's, JAX's, flax's, gymnax's."""
    import flax  # noqa: PLC0415

    dirs = [sysconfig.get_paths()["stdlib"], os.path.dirname(__file__)]
    for module in (jax, flax, np, gymnax, sys.modules.get("jaxlib")):
        if module is not None and getattr(module, "__file__", None):
            dirs.append(os.path.dirname(module.__file__))
    return tuple(os.path.realpath(d) + os.sep for d in dirs)


def user_frame(err: BaseException) -> str:
    """``file:line`` of the deepest frame of ``err``'s traceback in the user's code, or ``""``.

    Frames of Python, JAX, flax, gymnax and of this module are skipped; a path under the
    working directory is shown relative to it.
    """
    skip = _library_dirs()
    found = ""
    for frame in traceback.extract_tb(err.__traceback__):
        path = os.path.realpath(frame.filename)
        if frame.filename.startswith("<") or path.startswith(skip):
            continue
        shown = os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path
        found = f"{shown}:{frame.lineno}"
    return found


def _raised(name: str, what: str, err: BaseException) -> EnvCheckError:
    """``env NAME: WHAT raised Type: message (at file:line)``: the message's first line."""
    message = (str(err).strip().splitlines() or [""])[0]
    where = user_frame(err)
    at = f" (at {where})" if where else ""
    return EnvCheckError(f"env {name!r}: {what} raised {type(err).__name__}: {message}{at}")


def _traced(name: str, fn: str, err: BaseException) -> EnvCheckError:
    """The one line for Python control flow (or ``int()``) on a traced value in ``fn``."""
    where = user_frame(err)
    at = f" at {where}" if where else ""
    return EnvCheckError(
        f"env {name!r}: {type(err).__name__}{at}: no Python if/while on traced values in "
        f"{fn}: use jnp.where or lax.cond"
    )


def _trace(name: str, fn: str, call: Callable[..., Any], *args: Any) -> Any:
    """``jax.eval_shape(call, *args)``; a failure as one line naming ``fn``."""
    try:
        return jax.eval_shape(call, *args)
    except TRACED_FLOW as err:
        raise _traced(name, fn, err) from None
    except jax.errors.TracerArrayConversionError as err:
        where = user_frame(err)
        raise EnvCheckError(
            f"env {name!r}: NumPy on a traced value in {fn}" + (f" at {where}" if where else "")
            + ": use jax.numpy (jnp) inside reset_env/step_env"
        ) from None  # fmt: skip
    except EnvCheckError:
        raise
    except Exception as err:  # noqa: BLE001 - any failure of the user's code, in one line
        raise _raised(name, fn, err) from None


# ----------------------------------------------------------------------------- build


@functools.cache
def gymnax_step_arity() -> int:
    """How many values the installed gymnax's ``Environment.step`` returns (6 for 1.x)."""
    env = gymnax.environments.classic_control.CartPole()
    params = env.default_params

    def one_step(key):
        _, state = env.reset(key, params)
        return env.step(key, state, 0, params)

    return len(jax.eval_shape(one_step, jax.random.key(0)))


def check_gymnax() -> None:
    """The installed gymnax is the 1.x API (a 6-value ``step``).

    Raises:
      EnvCheckError: an old gymnax replaced it (popgym-arcade's ``stable-gymnax`` installs
        into the same ``gymnax`` folder).
    """
    if gymnax_step_arity() != 6:
        raise EnvCheckError(
            "the installed gymnax is not 1.x (an old gymnax replaced it, e.g. popgym-arcade's "
            f"stable-gymnax): {GYMNAX_PIN}"
        )


def make(
    name: str, *, source: str = "", make_kwargs: dict[str, Any] | None = None, **overrides: Any
) -> tuple[Any, Any]:
    """:func:`jaxrl.envs.make`, with any failure of the env's factory as one line.

    Raises:
      EnvCheckError: an unknown name, a factory that raises (its exception's type, message
        and the line of the user's code), or overrides that do not fit.
    """
    try:
        return envs.make(name, source=source, make_kwargs=make_kwargs, **overrides)
    except ValueError as err:
        raise EnvCheckError(str(err)) from None
    except Exception as err:  # noqa: BLE001 - a user's factory may raise anything
        raise _raised(name, "its factory", err) from None


# ----------------------------------------------------------------------------- spaces


def _space_name(space: Any) -> str:
    cls = type(space)
    return f"{cls.__module__}.{cls.__qualname__}"


def check_spaces(name: str, env: Any, params: Any) -> tuple[Any, Any]:
    """``(observation_space, action_space)``: gymnax's ``Box`` (or ``Discrete``, a scalar
    observation) and ``Discrete``/``Box``.

    Raises:
      EnvCheckError: a space of another library (not mapped to gymnax's), a ``Dict`` or
        ``Tuple`` observation, or an action space the policy heads do not cover.
    """
    obs_space = _call(name, "observation_space", env.observation_space, params)
    act_space = _call(name, "action_space", env.action_space, params)
    for what, space in (("observation_space", obs_space), ("action_space", act_space)):
        if not isinstance(space, (spaces.Discrete, spaces.Box, spaces.Dict, spaces.Tuple)):
            raise EnvCheckError(
                f"env {name!r}: its {what} is {_space_name(space)}, not a gymnax space: return "
                "gymnax.environments.spaces.Box / Discrete (map the suite's space to gymnax's)"
            )
    if isinstance(obs_space, (spaces.Dict, spaces.Tuple)):
        raise EnvCheckError(
            f"env {name!r}: its observation_space is gymnax's {type(obs_space).__name__}; the "
            "trainer takes one array per observation: flatten it into a float32 Box row and "
            "declare its leaves (jaxrl.envs.protocols.StructuredObservation)"
        )
    if not isinstance(act_space, (spaces.Discrete, spaces.Box)):
        raise EnvCheckError(
            f"env {name!r}: its action_space is gymnax's {type(act_space).__name__}; the policy "
            "heads take Discrete (categorical) or Box (Gaussian) actions"
        )
    return obs_space, act_space


def _call(name: str, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as err:  # noqa: BLE001 - one line for whatever the user's method raises
        raise _raised(name, what, err) from None


def describe_action_space(space: Any) -> str:
    """``Discrete(n)`` or ``Box(dtype, shape)``."""
    if isinstance(space, spaces.Discrete):
        return f"Discrete({int(space.n)})"
    return f"Box({jnp.dtype(space.dtype).name}, {tuple(space.shape)})"


# ----------------------------------------------------------------------------- traces


def sample_actions(env: Any, params: Any, space: Any, keys: jax.Array) -> jax.Array:
    """``[len(keys), *action_shape]`` sampled actions (one per agent slot of a multi-agent env)."""
    shape = action_shape(env, params)
    return jax.vmap(lambda k: jnp.broadcast_to(space.sample(k), shape))(keys)


def trace_reset(name: str, env: Any, params: Any) -> tuple[Any, Any]:
    """``(obs, state)`` of ``BATCH`` envs' ``reset`` under ``vmap``, traced abstractly.

    ``params`` are traced as arguments, as in the train step (a curriculum switch changes
    their values, never the program).

    Raises:
      EnvCheckError: Python control flow on a traced value, or any failure, in one line.
    """
    return _trace(name, "reset_env", jax.vmap(env.reset, in_axes=(0, None)), _keys(), params)


def trace_step(name: str, env: Any, params: Any, act_space: Any, state: Any) -> Any:
    """What ``BATCH`` envs' ``step`` from ``state`` returns under ``vmap``, traced abstractly
    (a 6-tuple of ``jax.ShapeDtypeStruct`` leaves ``[BATCH, ...]`` if the env keeps the API).

    Raises:
      EnvCheckError: Python control flow on a traced value, or any failure, in one line.
    """

    def step(keys, state, params):
        actions = sample_actions(env, params, act_space, keys)
        return jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, state, actions, params)

    return _trace(name, "step_env", step, _keys(), state, params)


def _keys() -> jax.ShapeDtypeStruct:
    """``BATCH`` abstract PRNG keys (made without running anything)."""
    return jax.eval_shape(lambda: jax.random.split(jax.random.key(0), BATCH))


# ----------------------------------------------------------------------------- outputs


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape[1:])  # without the BATCH axis


def _dtype(x: Any) -> str:
    return jnp.dtype(x.dtype).name


def check_arity(name: str, out: Any) -> None:
    """``step`` returns gymnax 1.x's 6 values.

    Raises:
      EnvCheckError: 5 values (the old gymnax API), or anything else.
    """
    if isinstance(out, tuple) and len(out) == 6:
        return
    if isinstance(out, tuple) and len(out) == 5:
        raise EnvCheckError(
            f"env {name!r}: step returns 5 values (obs, state, reward, done, info), the old "
            "gymnax API; gymnax 1.x's step returns 6 (obs, state, reward, terminated, "
            "truncated, info): subclass gymnax>=1.0's Environment and return (obs, state, "
            "reward, terminated, info) from step_env"
        )
    got = f"{len(out)} values" if isinstance(out, tuple) else type(out).__name__
    raise EnvCheckError(
        f"env {name!r}: step returns {got}; gymnax 1.x's step returns 6 (obs, state, reward, "
        "terminated, truncated, info)"
    )


def check_observation(name: str, where: str, obs: Any, space: Any) -> None:
    """``obs [BATCH, *space.shape]`` is one float32 array (uint8 where the space says uint8).

    Raises:
      EnvCheckError: a pytree observation, a shape the space does not give (the network is
        built from the space: flax's ScopeParamShapeError at the first update otherwise), or
        another dtype.
    """
    if not isinstance(obs, jax.ShapeDtypeStruct):
        raise EnvCheckError(
            f"env {name!r}: {where} returns a {type(obs).__name__} observation; the trainer "
            "takes one float32 array: flatten it (declare its leaves with "
            "jaxrl.envs.protocols.StructuredObservation)"
        )
    space_shape, space_dtype = tuple(space.shape), jnp.dtype(space.dtype).name
    if _shape(obs) != space_shape:
        raise EnvCheckError(
            f"env {name!r}: {where} returns observations of shape {_shape(obs)} but its "
            f"observation_space has shape {space_shape}: make observation_space(params) "
            "describe what reset_env/step_env return (the network is built from the space; "
            "else flax's ScopeParamShapeError)"
        )
    if _dtype(obs) != "float32" and not (_dtype(obs) == space_dtype == "uint8"):
        raise EnvCheckError(
            f"env {name!r}: {where} returns {_dtype(obs)} observations (observation_space: "
            f"{space_dtype}): return float32 (obs.astype(jnp.float32)), or uint8 images "
            "with a uint8 observation_space"
        )


def check_step_types(name: str, out: tuple) -> None:
    """reward float, terminated and truncated bool ``()``, info a dict.

    Raises:
      EnvCheckError: the first value of the wrong type, in one line.
    """
    _, _, reward, terminated, truncated, info = out
    if not isinstance(reward, jax.ShapeDtypeStruct) or not jnp.issubdtype(
        reward.dtype, jnp.floating
    ):
        got = _dtype(reward) if isinstance(reward, jax.ShapeDtypeStruct) else type(reward).__name__
        raise EnvCheckError(
            f"env {name!r}: step's reward is {got}, not float: return a float32 reward "
            "(jnp.float32(...) or .astype(jnp.float32))"
        )
    for what, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, jax.ShapeDtypeStruct) or flag.dtype != jnp.bool_:
            got = f"{_dtype(flag)} {_shape(flag)}" if hasattr(flag, "dtype") else type(flag)
            raise EnvCheckError(
                f"env {name!r}: step's {what} is {got}, not bool (): return a bool scalar "
                "(a comparison, or jnp.bool_)"
            )
        if _shape(flag) != ():
            raise EnvCheckError(
                f"env {name!r}: step's {what} has shape {_shape(flag)}, not (): one flag per "
                "env instance (per-agent flags go in info)"
            )
    if not isinstance(info, dict):
        raise EnvCheckError(
            f"env {name!r}: step's info is {type(info).__name__}, not a dict: return a dict "
            "(may be empty)"
        )


# ----------------------------------------------------------------------------- protocols


def check_slots(name: str, env: Any, obs: Any) -> None:
    """Observations ``[A, ...]`` for ``A = num_agents`` of a multi-agent env.

    Raises:
      EnvCheckError: a declared ``num_agents`` the observations do not lead with.
    """
    agents = protocols.num_agents(env)
    if agents > 1 and _shape(obs)[:1] != (agents,):
        raise EnvCheckError(
            f"env {name!r}: declares num_agents = {agents} but its observations have shape "
            f"{_shape(obs)}: a multi-agent env returns [num_agents, *obs] (one row per slot)"
        )


def check_agents(name: str, env: Any, reward: Any) -> tuple[str, ...]:
    """Rewards ``[A]`` for ``A = num_agents`` (``()`` single-agent); two teams of S.

    Returns:
      What the env declares, in words (e.g. ``("two teams of 3",)``).

    Raises:
      EnvCheckError: a declaration the returned values do not match.
    """
    agents = protocols.num_agents(env)
    want = (agents,) if agents > 1 else ()
    if _shape(reward) != want:
        slots = f"num_agents = {agents}" if agents > 1 else "a single-agent env"
        raise EnvCheckError(
            f"env {name!r}: step's reward has shape {_shape(reward)}, expected {want} for "
            f"{slots} (jaxrl.envs.protocols.MultiAgentEnv declares num_agents)"
        )
    teams = protocols.two_team(env)
    if teams is None:
        return ()
    if agents != 2 * int(teams.team_size):
        raise EnvCheckError(
            f"env {name!r}: declares two teams of team_size = {teams.team_size} but "
            f"num_agents = {agents}: num_agents must be 2 * team_size"
        )
    return (f"two teams of {teams.team_size}",)


def check_mask(name: str, env: Any, params: Any, state: Any, act_space: Any) -> tuple[str, ...]:
    """The action mask of an :class:`jaxrl.envs.protocols.ActionMaskEnv`: bool ``[n]`` or
    ``[A, n]``.

    Raises:
      EnvCheckError: a mask on a non-discrete action space, or of another shape or dtype.
    """
    if protocols.action_masked(env) is None:
        return ()
    if not isinstance(act_space, spaces.Discrete):
        raise EnvCheckError(
            f"env {name!r}: declares action_mask but its action space is not Discrete"
        )
    n, agents = int(act_space.n), protocols.num_agents(env)
    want = (agents, n) if agents > 1 else (n,)
    masks = jax.vmap(lambda s, p: legal_actions(env, s, p), in_axes=(0, None))
    mask = _trace(name, "action_mask", masks, state, params)
    if _shape(mask) != want or mask.dtype != jnp.bool_:
        raise EnvCheckError(
            f"env {name!r}: action_mask returns {_dtype(mask)} {_shape(mask)}; expected bool "
            f"{want} (True where the action is legal)"
        )
    return ("action mask",)


def check_leaves(name: str, env: Any, obs: Any) -> tuple[str, ...]:
    """The leaves of a :class:`jaxrl.envs.protocols.StructuredObservation` fill its flat row.

    Raises:
      EnvCheckError: the leaves' sizes do not sum to the observation row's size.
    """
    leaves = protocols.observation_leaves(env)
    if leaves is None:
        return ()
    agents = protocols.num_agents(env)
    row = _shape(obs)[1:] if agents > 1 else _shape(obs)
    if len(row) != 1 or row[0] != leaves.size:
        names = ", ".join(f"{leaf.name} {leaf.shape}" for leaf in leaves.leaves)
        raise EnvCheckError(
            f"env {name!r}: its observation_leaves ({names}) hold {leaves.size} values but an "
            f"observation row has shape {row}: the leaves must fill one flat row"
        )
    return (f"structured observation ({len(leaves.leaves)} leaves)",)


# ----------------------------------------------------------------------------- running


def _play(env: Any, act_space: Any) -> Callable[[jax.Array, Any], tuple]:
    """Jitted ``(key, params) -> step outputs`` of ``BATCH`` vmapped envs after a reset."""

    @jax.jit
    def play(key, params):
        key_reset, key_act, key_step = jax.random.split(key, 3)
        reset = jax.vmap(env.reset, in_axes=(0, None))
        _, state = reset(jax.random.split(key_reset, BATCH), params)
        actions = sample_actions(env, params, act_space, jax.random.split(key_act, BATCH))
        keys = jax.random.split(key_step, BATCH)
        return jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, state, actions, params)

    return play


def check_running(name: str, env: Any, params: Any, act_space: Any) -> tuple[str, ...]:
    """Step ``BATCH`` envs for real (jitted, vmapped): finite values and the time limit.

    Where the params have ``max_steps_in_episode``, one step with it set to 1 must truncate
    (``truncated``), not terminate: a terminated end is not bootstrapped.

    Returns:
      Notes for the summary, e.g. ``("jit and vmap ran",)``.

    Raises:
      EnvCheckError: NaN/inf observations or rewards, or a time limit that terminates.
    """
    play = _play(env, act_space)
    try:
        obs, _, reward, terminated, *_ = jax.device_get(play(jax.random.key(0), params))
    except Exception as err:  # noqa: BLE001 - a compile or runtime failure, one line
        raise _raised(name, "a jitted, vmapped step", err) from None
    for what, value in (("observations", obs), ("reward", reward)):
        if not np.all(np.isfinite(np.asarray(value, np.float32))):
            raise EnvCheckError(f"env {name!r}: step returned non-finite {what} (NaN or inf)")
    is_struct = dataclasses.is_dataclass(params)
    fields = {f.name for f in dataclasses.fields(params)} if is_struct else set()
    if "max_steps_in_episode" not in fields:
        return ("jit and vmap ran", "no max_steps_in_episode: time limit not checked")
    short = envs.override_params(params, {"max_steps_in_episode": 1})
    _, _, _, ended, truncated, _ = jax.device_get(play(jax.random.key(0), short))
    if not np.all(truncated):
        stop = "terminated, not truncated" if np.all(ended) else "did not end"
        raise EnvCheckError(
            f"env {name!r}: with max_steps_in_episode = 1 the first step {stop}: the time "
            "limit is a truncation (gymnax 1.x's step sets truncated from is_truncated, "
            "state.time >= max_steps_in_episode); count steps in state.time"
        )
    if np.all(ended) and not np.all(terminated):
        raise EnvCheckError(
            f"env {name!r}: max_steps_in_episode ends episodes as terminated as well as "
            "truncated: return only natural ends as step_env's terminated (the old gymnax "
            "done included the time limit; a terminated step is not bootstrapped)"
        )
    return ("jit and vmap ran", "time limit truncates")


def adapted_note(name: str, env: Any, params: Any, act_space: Any) -> tuple[str, ...]:
    """A note if the raw env under ``env``'s wrappers returns the old 5 values from ``step``."""
    raw = protocols.unwrapped(env)
    if raw is env:
        return ()
    try:
        _, state = trace_reset(name, raw, params)
        out = trace_step(name, raw, params, act_space, state)
    except EnvCheckError:
        return ()
    if isinstance(out, tuple) and len(out) == 5:
        return ("its step returns the old gymnax API's 5 values: envs.make adapts it to 6",)
    return ()


# ----------------------------------------------------------------------------- all


def check(name: str, env: Any, params: Any, *, running: bool = False) -> EnvSummary:
    """Check env ``name`` (built by :func:`make`) against the contract; its summary.

    Abstract (:func:`jax.eval_shape`) unless ``running``, which adds one real jitted,
    vmapped step (and one with ``max_steps_in_episode = 1``) and a note on adaptation.

    Raises:
      EnvCheckError: the first problem, in one line.
    """
    check_gymnax()
    if not isinstance(env, protocols.Env):
        raise EnvCheckError(
            f"env {name!r}: {type(env).__name__} is not a gymnax-1.x env (reset, step, "
            "action_space, observation_space, default_params; see jaxrl.envs.protocols.Env)"
        )
    obs_space, act_space = check_spaces(name, env, params)
    reset_obs, state = trace_reset(name, env, params)
    check_observation(name, "reset", reset_obs, obs_space)
    check_slots(name, env, reset_obs)
    out = trace_step(name, env, params, act_space, state)
    check_arity(name, out)
    obs, _, reward, *_ = out
    check_observation(name, "step", obs, obs_space)
    check_step_types(name, out)
    declares = (
        *check_agents(name, env, reward),
        *check_mask(name, env, params, state, act_space),
        *check_leaves(name, env, obs),
    )
    notes = ()
    if running:
        notes = (
            *adapted_note(name, env, params, act_space),
            *check_running(name, env, params, act_space),
        )
    return EnvSummary(
        name=name,
        obs_shape=_shape(obs),
        obs_dtype=_dtype(obs),
        action_space=describe_action_space(act_space),
        num_agents=protocols.num_agents(env),
        declares=declares,
        notes=notes,
    )


# Summaries of envs checked in this process, by what fixes the outcome of the abstract checks.
_CHECKED: dict[Any, EnvSummary] = {}


def fingerprint(env: Any, params: Any) -> Any:
    """What the abstract checks' outcome depends on: the env's classes (its wrappers'
    included), spaces and declarations, and the params' structure and leaf shapes; None if
    a space is not gymnax's (never cached).

    Params are traced as arguments, so their values do not change the outcome.
    """
    chain, inner = [type(env)], env
    while isinstance(inner, GymnaxWrapper):
        inner = inner._env
        chain.append(type(inner))
    try:
        described = tuple(
            _describe_space(s) for s in (env.observation_space(params), env.action_space(params))
        )
    except Exception:  # noqa: BLE001 - the check itself reports a space that raises
        return None
    if None in described:
        return None
    leaves, treedef = jax.tree.flatten(params)
    shapes = tuple((np.shape(x), np.result_type(x).name) for x in leaves)
    declared = (protocols.num_agents(env), repr(protocols.observation_leaves(env)))
    return (tuple(chain), described, declared, treedef, shapes)


def _describe_space(space: Any) -> tuple | None:
    """``(class, shape, dtype, n)`` of a gymnax ``Box`` or ``Discrete``, else None."""
    if isinstance(space, spaces.Discrete):
        return (spaces.Discrete, int(space.n), jnp.dtype(space.dtype).name)
    if isinstance(space, spaces.Box):
        return (spaces.Box, tuple(space.shape), jnp.dtype(space.dtype).name)
    return None


def check_once(name: str, env: Any, params: Any) -> EnvSummary:
    """:func:`check` (abstract), once per :func:`fingerprint` in this process.

    Raises:
      EnvCheckError: as :func:`check` (a failing env is checked again every time).
    """
    key = fingerprint(env, params)
    if key is not None and key in _CHECKED:
        return dataclasses.replace(_CHECKED[key], name=name)
    summary = check(name, env, params)
    if key is not None:
        _CHECKED[key] = summary
    return summary
