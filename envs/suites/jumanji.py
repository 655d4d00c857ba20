"""Jumanji's environments as gymnax-1.x envs: ``env.name: jumanji:<id>`` (e.g. ``Snake-v1``).

Jumanji's API is ``reset(key) -> (state, timestep)`` and ``step(state, action) -> (state,
timestep)``; its observations are NamedTuples of arrays (a grid, a step count, an action mask).
The adapter:

- flattens every observation leaf but the action mask into one float32 row, in the order of
  the env's observation spec, and declares the leaves (:class:`jaxrl.envs.protocols.ObsLeaves`,
  a leaf keeps its own shape, e.g. Snake's ``grid`` ``(12, 12, 5)``, so a CNN can use it;
  nested fields are named ``outer_inner``);
- gives the action mask through :class:`jaxrl.envs.protocols.ActionMaskEnv` (``action_mask``),
  where the env's observation has one;
- maps a ``DiscreteArray`` action to ``Discrete(n)``, a small ``MultiDiscreteArray`` to one
  ``Discrete`` of the product (row-major: ``a = ((a0 * n1) + a1) * n2 + a2``; the joint mask
  is the mask itself where it has the shape ``num_values``, else the AND of per-component rows)
  and a float ``BoundedArray`` to a ``Box``;
- reads ``timestep.step_type``/``discount``: LAST with discount 0 is ``terminated``, LAST with
  a non-zero discount is ``truncated``; so is LAST where the state's ``step_count`` reached the
  env's ``time_limit`` (Snake, Maze, PacMan, ... end a timed-out episode with discount 0; an
  episode that ends by its rules on exactly that step is then called truncated too); a vector
  reward (a cooperative multi-agent env) is summed;
- leaves the auto-reset to gymnax's base class (``info["final_observation"]``).

``make_kwargs`` go to ``jumanji.make`` (e.g. ``generator`` or ``time_limit`` arguments).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import jumanji
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces
from jumanji import specs
from jumanji.types import StepType

from jaxrl.envs.protocols import ObsLeaf, ObsLeaves

MASK = "action_mask"  # the observation field jumanji keeps its legal actions in
MAX_JOINT_ACTIONS = 10_000  # largest product of a MultiDiscreteArray flattened to one Discrete


def names() -> list[str]:
    """Jumanji's registered env ids."""
    return sorted(jumanji.registered_environments())


@dataclass(frozen=True)
class Layout:
    """How one jumanji env's observation and action map onto ours (fixed at ``make``)."""

    paths: tuple[tuple[str, ...], ...]  # attribute paths of the row's leaves, in row order
    leaves: ObsLeaves  # the row's leaves (names and shapes)
    low: np.ndarray  # float32 [size] lower bounds of the row
    high: np.ndarray  # float32 [size] upper bounds of the row
    nvec: tuple[int, ...]  # values per action component; () for a Discrete or Box action
    num_actions: int  # Discrete actions (the product of nvec); 0 for a Box action
    mask_shape: tuple[int, ...]  # the shape of the observation's action mask; () if none


class EnvState(struct.PyTreeNode):
    """The jumanji state with what the adapter reads off its last timestep."""

    inner: Any  # the jumanji env's own state
    mask: jax.Array  # bool [num_actions]: legal actions in this state (all True if none given)
    truncated: jax.Array  # bool (): the step into this state ended at jumanji's time limit


class EnvParams(struct.PyTreeNode):
    """No array params: jumanji envs take their options at construction (``make_kwargs``)."""


def _spec_leaves(spec: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """``(attribute path, primitive spec)`` of every array in a (nested) jumanji spec."""
    if isinstance(spec, specs.Array):
        return [(path, spec)]
    out = []
    for name, child in spec._specs.items():  # noqa: SLF001 - jumanji keeps its children here
        out.extend(_spec_leaves(child, (*path, name)))
    return out


def _bounds(spec: Any) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``(low, high)`` of a primitive spec, flattened (unbounded: +-inf)."""
    shape = tuple(spec.shape)
    if isinstance(spec, specs.BoundedArray):
        low, high = np.asarray(spec.minimum, np.float32), np.asarray(spec.maximum, np.float32)
    else:
        low, high = np.float32(-np.inf), np.float32(np.inf)
    return np.broadcast_to(low, shape).ravel(), np.broadcast_to(high, shape).ravel()


def _action_layout(env_id: str, spec: Any) -> tuple[tuple[int, ...], int]:
    """``(nvec, num_actions)`` of an action spec; refuses what one Discrete or Box cannot say."""
    if isinstance(spec, specs.DiscreteArray):
        return (), int(spec.num_values)
    if isinstance(spec, specs.MultiDiscreteArray):
        nvec = tuple(int(n) for n in np.asarray(spec.num_values).ravel())
        if math.prod(nvec) > MAX_JOINT_ACTIONS:
            raise ValueError(
                f"jumanji:{env_id}: its MultiDiscrete action {nvec} has {math.prod(nvec)} joint "
                f"actions, more than one Discrete of at most {MAX_JOINT_ACTIONS} can hold"
            )
        return nvec, math.prod(nvec)
    if isinstance(spec, specs.BoundedArray) and np.issubdtype(spec.dtype, np.floating):
        return (), 0
    raise ValueError(
        f"jumanji:{env_id}: its action spec {type(spec).__name__} {spec.dtype} "
        f"{tuple(spec.shape)} is neither discrete nor a float box"
    )


def _check_mask(env_id: str, mask_shape: tuple[int, ...], nvec: tuple[int, ...], n: int):
    """Refuse an action mask that cannot become a joint mask of ``n`` actions."""
    per_component = (
        len(mask_shape) == 2 and mask_shape[0] == len(nvec) and set(nvec) == {mask_shape[1]}
    )
    fits = mask_shape == (n,) if not nvec else mask_shape == nvec or per_component
    if n and not fits:
        raise ValueError(
            f"jumanji:{env_id}: its action mask {mask_shape} does not fit its actions "
            f"{nvec or (n,)}"
        )


def make_layout(env_id: str, env: Any) -> Layout:
    """The :class:`Layout` of jumanji env ``env`` (its observation and action specs)."""
    found = _spec_leaves(env.observation_spec)
    kept = [(path, spec) for path, spec in found if path[-1] != MASK]
    masks = [spec for path, spec in found if path == (MASK,)]
    leaves, offset = [], 0
    for path, spec in kept:
        leaf = ObsLeaf(name="_".join(path), shape=tuple(int(d) for d in spec.shape), offset=offset)
        leaves.append(leaf)
        offset = leaf.end
    bounds = [_bounds(spec) for _, spec in kept]
    nvec, num_actions = _action_layout(env_id, env.action_spec)
    mask_shape = tuple(int(d) for d in masks[0].shape) if masks else ()
    if masks:
        _check_mask(env_id, mask_shape, nvec, num_actions)
    return Layout(
        paths=tuple(path for path, _ in kept),
        leaves=ObsLeaves(tuple(leaves)),
        low=np.concatenate([low for low, _ in bounds]).astype(np.float32),
        high=np.concatenate([high for _, high in bounds]).astype(np.float32),
        nvec=nvec,
        num_actions=num_actions,
        mask_shape=mask_shape,
    )


def _leaf(obs: Any, path: tuple[str, ...]) -> jax.Array:
    """The observation field at attribute ``path``."""
    return functools.reduce(getattr, path, obs)


def flat_observation(layout: Layout, obs: Any) -> jax.Array:
    """float32 ``[size]``: the observation's leaves but the action mask, back to back."""
    return jnp.concatenate(
        [jnp.ravel(_leaf(obs, path)).astype(jnp.float32) for path in layout.paths]
    )


def joint_mask(layout: Layout, obs: Any) -> jax.Array:
    """bool ``[num_actions]`` legal (joint) actions of an observation; all True without a mask.

    A row with no legal action becomes all True (the protocol asks for one; jumanji's episode
    has ended there anyway).
    """
    if not layout.mask_shape:
        return jnp.ones((layout.num_actions,), bool)
    mask = jnp.asarray(getattr(obs, MASK), bool)
    if layout.nvec and mask.shape != layout.nvec:  # one row per component: their AND
        joint = mask[0]
        for row in mask[1:]:
            joint = joint[..., None] & row
        mask = joint
    mask = mask.reshape(-1)
    return mask | ~jnp.any(mask)


def decode_action(layout: Layout, action: jax.Array) -> jax.Array:
    """The jumanji action of our action: int32 ``[k]`` components of a joint Discrete one."""
    if not layout.nvec:
        return action if layout.num_actions == 0 else jnp.asarray(action, jnp.int32)
    return jnp.stack(jnp.unravel_index(jnp.asarray(action, jnp.int32), layout.nvec)).astype(
        jnp.int32
    )


class Jumanji(environment.Environment[EnvState, EnvParams]):
    """One jumanji env behind the gymnax-1.x contract.

    Observation: float32 ``[size]`` (``observation_leaves``); action: int32 ``()`` of
    ``Discrete(num_actions)`` or float32 of the env's ``Box``; reward: float32 ``()`` (summed
    over agents); terminated: LAST with discount 0; truncated: LAST with a non-zero discount or
    at the env's ``time_limit``.
    """

    def __init__(self, env_id: str, env: Any):
        super().__init__()
        self.env_id = env_id
        self.env = env  # the jumanji env
        self.layout = make_layout(env_id, env)
        self.observation_leaves = self.layout.leaves  # jaxrl.envs.protocols.StructuredObservation

    @property
    def name(self) -> str:
        """Environment name."""
        return f"jumanji:{self.env_id}"

    @property
    def default_params(self) -> EnvParams:
        """No params (options go to ``jumanji.make``)."""
        return EnvParams()

    @property
    def num_actions(self) -> int:
        """Discrete (joint) actions; 0 for a Box action."""
        return self.layout.num_actions

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete | spaces.Box:
        """``Discrete(num_actions)``, or the float ``Box`` of the env's action spec."""
        del params
        if self.layout.num_actions:
            return spaces.Discrete(self.layout.num_actions)
        spec = self.env.action_spec
        low = jnp.broadcast_to(jnp.asarray(spec.minimum, jnp.float32), spec.shape)
        high = jnp.broadcast_to(jnp.asarray(spec.maximum, jnp.float32), spec.shape)
        return spaces.Box(low, high, tuple(spec.shape), jnp.float32)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """float32 ``[size]`` with the specs' bounds (+-inf where a leaf has none)."""
        del params
        layout = self.layout
        return spaces.Box(
            jnp.asarray(layout.low), jnp.asarray(layout.high), (layout.leaves.size,), jnp.float32
        )

    def _time_up(self, inner: Any) -> jax.Array | bool:
        """Whether ``inner`` is at the env's ``time_limit`` (where it has one and a
        ``step_count``): most jumanji envs end a timed-out episode with discount 0."""
        limit = getattr(self.env, "time_limit", None)
        count = getattr(inner, "step_count", None)
        return False if limit is None or count is None else count >= limit

    def _wrap(self, inner: Any, timestep: Any) -> tuple[jax.Array, EnvState]:
        last = timestep.step_type == StepType.LAST
        cut = jnp.any(jnp.asarray(timestep.discount) != 0) | self._time_up(inner)
        state = EnvState(
            inner=inner,
            mask=joint_mask(self.layout, timestep.observation),
            truncated=last & cut,
        )
        return flat_observation(self.layout, timestep.observation), state

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """jumanji's ``reset(key)``; returns ``(obs float32 [size], state)``."""
        del params
        inner, timestep = self.env.reset(key)
        return self._wrap(inner, timestep)

    def step_env(
        self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict[str, Any]]:
        """jumanji's ``step(state, action)`` (its randomness lives in its state)."""
        del key, params
        inner, timestep = self.env.step(state.inner, decode_action(self.layout, action))
        obs, new_state = self._wrap(inner, timestep)
        last = timestep.step_type == StepType.LAST
        terminated = last & ~new_state.truncated
        reward = jnp.sum(jnp.asarray(timestep.reward, jnp.float32))
        return obs, new_state, reward, terminated, {}

    def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Jumanji's time limit (LAST with a non-zero discount), read off the last step."""
        del params
        return state.truncated


class MaskedJumanji(Jumanji):
    """A :class:`Jumanji` env whose observation has an action mask
    (:class:`jaxrl.envs.protocols.ActionMaskEnv`)."""

    def action_mask(self, state: EnvState, params: EnvParams) -> jax.Array:
        """bool ``[num_actions]``: jumanji's ``action_mask`` of ``state`` (joint if multi)."""
        del params
        return state.mask


def make(env_id: str, **make_kwargs: Any) -> Jumanji:
    """Jumanji env ``env_id`` (``jumanji.make(env_id, **make_kwargs)``) behind gymnax 1.x.

    Raises:
      ValueError: one line: the env's actions or mask cannot be expressed (a huge
        MultiDiscrete, an integer box), or its constructor fails.
    """
    try:
        env = jumanji.make(env_id, **make_kwargs)
    except TypeError as err:
        given = ", ".join(sorted(make_kwargs)) or "none"
        raise ValueError(
            f"jumanji:{env_id}: its constructor refuses make_kwargs ({given}): {err}"
        ) from None
    layout = make_layout(env_id, env)
    masked = bool(layout.mask_shape) and layout.num_actions > 0
    return (MaskedJumanji if masked else Jumanji)(env_id, env)
