"""JaxMARL's environments as gymnax-1.x envs: ``env.name: jaxmarl:<env>`` (e.g. MPE spread).

An env whose agents share one observation space and one action space (MPE spread, SMAX,
Hanabi, Overcooked, coin game, MABrax's walker) becomes a :class:`JaxMarl`, a
:class:`jaxrl.envs.protocols.MultiAgentEnv` of ``A = len(env.agents)`` slots, every slot driven by
the caller:

- observation float32 ``[A, size]``, rows in ``env.agents`` order, each the agent's own
  observation flattened and declared as one leaf ``observation`` of its shape
  (:class:`jaxrl.envs.protocols.ObsLeaves`: Overcooked's ``(5, 4, 26)`` keeps its image shape);
- action ``[A]`` (int32 for ``Discrete``, float32 ``[A, d]`` for a ``Box``), reward float32 ``[A]``;
- ``dones["__all__"]`` ends the episode; JaxMARL does not say why, so the adapter calls it a
  time limit (``truncated``) where the env has a step counter that reached ``env.max_steps``
  (MPE, SMAX), else ``terminated``;
- where the env overrides ``get_avail_actions`` (SMAX) or has ``get_legal_moves`` (Hanabi),
  its masks are the action mask (:class:`jaxrl.envs.protocols.ActionMaskEnv`, bool ``[A, n]``).

The adapter steps JaxMARL's ``step_env`` (no auto-reset) and lets gymnax's base class reset,
so ``info["final_observation"]`` is the episode's last observation. Envs whose agents differ
(MPE tag, push, adversary, speaker-listener), dict observations (STORM), one-agent envs and
ones that need their own arguments refuse in one line. ``make_kwargs`` go to ``jaxmarl.make``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import jaxmarl
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces
from jaxmarl.environments import spaces as marl_spaces
from jaxmarl.environments.multi_agent_env import MultiAgentEnv as MarlBase

from jaxrl.envs.protocols import ObsLeaf, ObsLeaves


def names() -> list[str]:
    """JaxMARL's registered env names."""
    return sorted(jaxmarl.registered_envs)


class EnvState(struct.PyTreeNode):
    """JaxMARL's state with the episode-end reason of the step into it."""

    inner: Any  # the JaxMARL env's state
    truncated: jax.Array  # bool (): the step into this state ended at the env's step limit


class EnvParams(struct.PyTreeNode):
    """No array params: JaxMARL envs take their options at construction (``make_kwargs``)."""


def _space_key(space: Any) -> tuple:
    """What must agree between agents for one policy to serve them all."""
    if isinstance(space, marl_spaces.Discrete):
        return ("Discrete", int(space.n))
    if isinstance(space, marl_spaces.Box | marl_spaces.MultiDiscrete):
        shape = tuple(int(d) for d in np.shape(np.zeros(space.shape)))
        return (type(space).__name__, shape)
    return (type(space).__name__,)


def _homogeneous(env_id: str, env: Any) -> tuple[Any, Any]:
    """``(observation space, action space)`` shared by every agent; refuses otherwise."""
    agents = list(env.agents)
    if len(agents) < 2:
        raise ValueError(f"jaxmarl:{env_id}: one agent; use a single-agent env instead")
    obs = {a: _space_key(env.observation_space(a)) for a in agents}
    act = {a: _space_key(env.action_space(a)) for a in agents}
    if len(set(obs.values())) > 1 or len(set(act.values())) > 1:
        raise ValueError(
            f"jaxmarl:{env_id}: its agents differ (observations {sorted(set(obs.values()))}, "
            f"actions {sorted(set(act.values()))}); jaxrl plays envs whose agents share both"
        )
    obs_space, act_space = env.observation_space(agents[0]), env.action_space(agents[0])
    if obs[agents[0]][0] not in ("Box", "MultiDiscrete"):
        raise ValueError(f"jaxmarl:{env_id}: {obs[agents[0]][0]} observations are not supported")
    if act[agents[0]][0] not in ("Box", "Discrete"):
        raise ValueError(f"jaxmarl:{env_id}: {act[agents[0]][0]} actions are not supported")
    return obs_space, act_space


def _step_count(inner: Any) -> Any:
    """The env's step counter in its state (MPE, SMAX: ``step``; wrapped SMAX one level down)."""
    for state in (inner, getattr(inner, "state", None)):
        if state is not None and hasattr(state, "step"):
            return state.step
    return None


class JaxMarl(environment.Environment[EnvState, EnvParams]):
    """A JaxMARL env of ``A`` alike agents behind gymnax 1.x (see the module docstring).

    Observation float32 ``[A, size]``; action ``[A]`` (``[A, d]`` for a Box); reward float32
    ``[A]``; terminated/truncated from ``dones["__all__"]``; ``info["agent_mask"]`` all True.
    """

    def __init__(self, env_id: str, env: Any):
        super().__init__()
        self.env_id = env_id
        self.env = env  # the JaxMARL env
        self.agents = tuple(env.agents)
        self.num_agents = len(self.agents)  # jaxrl.envs.protocols.MultiAgentEnv
        obs_space, self._action = _homogeneous(env_id, env)
        shape = tuple(int(d) for d in np.shape(np.zeros(obs_space.shape)))
        self.observation_leaves = ObsLeaves((ObsLeaf("observation", shape, 0),))

    @property
    def name(self) -> str:
        """Environment name."""
        return f"jaxmarl:{self.env_id}"

    @property
    def default_params(self) -> EnvParams:
        """No params (options go to ``jaxmarl.make``)."""
        return EnvParams()

    @property
    def num_actions(self) -> int:
        """Discrete actions per agent (0 for a Box action)."""
        return int(self._action.n) if isinstance(self._action, marl_spaces.Discrete) else 0

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete | spaces.Box:
        """One agent's action space (``step`` takes one action per agent)."""
        del params
        if self.num_actions:
            return spaces.Discrete(self.num_actions)
        low, high = jnp.asarray(self._action.low), jnp.asarray(self._action.high)
        return spaces.Box(low, high, tuple(self._action.shape), jnp.float32)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """float32 ``[A, size]``."""
        del params
        size = self.observation_leaves.size
        return spaces.Box(-jnp.inf, jnp.inf, (self.num_agents, size), jnp.float32)

    def _rows(self, obs: dict[str, jax.Array]) -> jax.Array:
        return jnp.stack([jnp.ravel(obs[a]).astype(jnp.float32) for a in self.agents])

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """JaxMARL's ``reset(key)``; returns ``(obs [A, size], state)``."""
        del params
        obs, inner = self.env.reset(key)
        return self._rows(obs), EnvState(inner=inner, truncated=jnp.zeros((), bool))

    def step_env(
        self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict[str, Any]]:
        """JaxMARL's ``step_env`` (no auto-reset) with ``action[i]`` for ``env.agents[i]``."""
        del params
        actions = {a: action[i] for i, a in enumerate(self.agents)}
        obs, inner, rewards, dones, _ = self.env.step_env(key, state.inner, actions)
        done = jnp.asarray(dones["__all__"], bool)
        count, limit = _step_count(inner), getattr(self.env, "max_steps", None)
        over = jnp.asarray(count >= limit) if count is not None and limit is not None else False
        truncated = done & over
        reward = jnp.stack([jnp.asarray(rewards[a], jnp.float32) for a in self.agents])
        info = {"agent_mask": jnp.ones((self.num_agents,), bool)}
        new_state = EnvState(inner=inner, truncated=truncated)
        return self._rows(obs), new_state, reward, done & ~truncated, info

    def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """The env's step limit, read off the last step."""
        del params
        return state.truncated


class MaskedJaxMarl(JaxMarl):
    """A :class:`JaxMarl` env with JaxMARL's ``get_avail_actions``
    (:class:`jaxrl.envs.protocols.ActionMaskEnv`)."""

    def __init__(self, env_id: str, env: Any, masks: str):
        super().__init__(env_id, env)
        self.masks = masks  # the env's method giving {agent: mask}

    def action_mask(self, state: EnvState, params: EnvParams) -> jax.Array:
        """bool ``[A, num_actions]``: JaxMARL's available actions (a row with none: all True)."""
        del params
        avail = getattr(self.env, self.masks)(state.inner)
        mask = jnp.stack([jnp.asarray(avail[a], bool) for a in self.agents])
        return mask | ~jnp.any(mask, axis=-1, keepdims=True)


def make(env_id: str, **make_kwargs: Any) -> JaxMarl:
    """JaxMARL env ``env_id`` (``jaxmarl.make(env_id, **make_kwargs)``) behind gymnax 1.x.

    Raises:
      ValueError: one line: agents that differ, unsupported spaces, one agent, or a
        constructor that fails.
    """
    try:
        env = jaxmarl.make(env_id, **make_kwargs)
    except TypeError as err:
        given = ", ".join(sorted(make_kwargs)) or "none"
        raise ValueError(
            f"jaxmarl:{env_id}: its constructor refuses make_kwargs ({given}): {err}"
        ) from None
    if not isinstance(_homogeneous(env_id, env)[1], marl_spaces.Discrete):
        return JaxMarl(env_id, env)
    if type(env).get_avail_actions is not MarlBase.get_avail_actions:
        return MaskedJaxMarl(env_id, env, "get_avail_actions")
    if hasattr(env, "get_legal_moves"):  # Hanabi names its masks so
        return MaskedJaxMarl(env_id, env, "get_legal_moves")
    return JaxMarl(env_id, env)
