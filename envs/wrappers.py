"""Wrappers that keep the gymnax 1.0 contract and add what the trainer needs.

Every wrapper has the same ``reset(key, params) -> (obs, state)`` and
``step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)``
signatures as the environment it wraps, so they compose in any order.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces
from gymnax.wrappers.purerl import GymnaxWrapper

from jaxrl.envs import protocols


def action_shape(env: Any, params: Any) -> tuple[int, ...]:
    """The shape of the action ``env.step`` takes: the action space's, led by [A] if multi-agent.

    A multi-agent env (a :class:`jaxrl.envs.protocols.MultiAgentEnv` with ``num_agents > 1``:
    Soccer, MettaArena) takes one action per agent slot.
    """
    shape = tuple(env.action_space(params).shape)
    num_agents = protocols.num_agents(env)
    return (num_agents, *shape) if num_agents > 1 else shape


def check_action_shape(env: Any, params: Any, action: Any) -> None:
    """Raise a one-line ValueError if ``action`` does not have :func:`action_shape`.

    Shapes are static, so this runs once, at trace time, and costs nothing in the compiled
    step; without it a wrong shape fails deep inside the env (an IndexError in its rules).
    """
    expected = action_shape(env, params)
    got = tuple(jnp.shape(action))
    if got != expected:
        raise ValueError(f"{env.name}: expected actions of shape {expected}, got {got}")


class Wrapper(GymnaxWrapper):
    """Base wrapper: forwards everything it does not override to the wrapped env.

    gymnax's ``GymnaxWrapper`` keeps the env (``self._env = env``) and forwards the attributes
    the wrapper itself lacks (spaces, name, default_params) through ``__getattr__``; this adds
    ``unwrapped`` and pass-through ``reset``/``step``, so a subclass overrides only what it
    changes. A wrapper keeps the contract of the env it wraps (:mod:`jaxrl.envs.protocols`: agent
    slots, teams, renderer): the protocol helpers look through it.
    """

    @property
    def unwrapped(self) -> environment.Environment:
        """The innermost gymnax environment."""
        return protocols.unwrapped(self)

    def reset(self, key: jax.Array, params: Any) -> tuple[Any, Any]:
        """Reset the wrapped env."""
        return self._env.reset(key, params)

    def step(self, key: jax.Array, state: Any, action: Any, params: Any):
        """Step the wrapped env."""
        return self._env.step(key, state, action, params)


class EpisodeStatsState(struct.PyTreeNode):
    """State of :class:`EpisodeStatistics`; every field is per env instance."""

    env_state: Any
    episode_return: jax.Array  # () float32 ([A] for multi-agent envs), current episode's return
    episode_length: jax.Array  # () int32, steps taken in the current episode


class EpisodeStatistics(Wrapper):
    """Tracks return and length of each episode in the state, not in Python.

    Adds to ``info``:
      ``episode_done``: () bool, an episode ended on this step (terminated or truncated);
      ``episode_return``: () float32, its undiscounted return (valid where ``episode_done``);
      ``episode_length``: () int32, its length in agent steps (valid where ``episode_done``).
    """

    def reset(self, key: jax.Array, params: Any) -> tuple[Any, EpisodeStatsState]:
        """Reset the env and zero the counters."""
        obs, env_state = self._env.reset(key, params)
        # Multi-agent envs reward each agent: one return per agent slot.
        num_agents = protocols.num_agents(self._env)
        state = EpisodeStatsState(
            env_state=env_state,
            episode_return=jnp.zeros((num_agents,) if num_agents > 1 else (), jnp.float32),
            episode_length=jnp.zeros((), jnp.int32),
        )
        return obs, state

    def step(self, key: jax.Array, state: EpisodeStatsState, action: Any, params: Any):
        """Step the env, accumulate the episode counters and report finished episodes.

        Raises:
          ValueError: at trace time, if ``action`` does not have :func:`action_shape`.
        """
        # The trainer's outermost wrapper, so every env it steps is checked here, once.
        check_action_shape(self._env, params, action)
        obs, env_state, reward, terminated, truncated, info = self._env.step(
            key, state.env_state, action, params
        )
        done = jnp.logical_or(terminated, truncated)
        episode_return = state.episode_return + reward.astype(jnp.float32)
        episode_length = state.episode_length + 1
        info = {
            **info,
            "episode_done": done,
            "episode_return": episode_return,
            "episode_length": episode_length,
        }
        # The env auto-resets on done, so the counters restart with it.
        new_state = EpisodeStatsState(
            env_state=env_state,
            episode_return=jnp.where(done, 0.0, episode_return),
            episode_length=jnp.where(done, 0, episode_length),
        )
        return obs, new_state, reward, terminated, truncated, info


class ActionRepeatState(struct.PyTreeNode):
    """State of :class:`ActionRepeat`: only the wrapped env's state."""

    env_state: Any


def unwrap_state(state: Any) -> Any:
    """The innermost env state under the states of these wrappers."""
    while isinstance(state, (EpisodeStatsState, ActionRepeatState)):
        state = state.env_state
    return state


def legal_actions(env: Any, state: Any, params: Any) -> jax.Array | None:
    """bool ``[num_actions]`` (``[A, num_actions]``) legal actions of a (wrapped) env's
    ``state``, or None if the env declares none (:class:`jaxrl.envs.protocols.ActionMaskEnv`)."""
    inner = protocols.action_masked(env)
    return None if inner is None else inner.action_mask(unwrap_state(state), params)


def player_to_move(env: Any, state: Any, params: Any) -> jax.Array | None:
    """int32 ``()`` slot to move in a (wrapped) turn-based env's ``state``, or None if the env
    is not turn-based (:class:`jaxrl.envs.protocols.TurnBasedEnv`)."""
    inner = protocols.turn_based(env)
    return None if inner is None else inner.current_player(unwrap_state(state), params)


class ActionRepeat(Wrapper):
    """Repeats each action ``repeat`` times, summing rewards and stopping at episode end.

    Once a sub-step ends the episode, the remaining sub-steps are not applied: the
    returned observation is the auto-reset one and ``info["final_observation"]`` the
    last observation of the finished episode, exactly as a single gymnax step reports it.
    The ``info`` of the last applied sub-step is returned.
    """

    def __init__(self, env: Any, repeat: int):
        super().__init__(env)
        if repeat < 1:
            raise ValueError(f"action repeat must be >= 1, got {repeat}")
        self.repeat = int(repeat)

    def reset(self, key: jax.Array, params: Any) -> tuple[Any, ActionRepeatState]:
        """Reset the wrapped env."""
        obs, env_state = self._env.reset(key, params)
        return obs, ActionRepeatState(env_state=env_state)

    def step(self, key: jax.Array, state: ActionRepeatState, action: Any, params: Any):
        """Apply ``action`` up to ``repeat`` times; see the class docstring."""
        keys = jax.random.split(key, self.repeat)
        first = self._env.step(keys[0], state.env_state, action, params)

        def sub_step(carry, key_step):
            obs, env_state, reward, terminated, truncated, info = carry
            done = jnp.logical_or(terminated, truncated)
            nxt = self._env.step(key_step, env_state, action, params)
            n_obs, n_state, n_reward, n_term, n_trunc, n_info = nxt
            # After the episode ended keep everything as it was; otherwise take the new step.
            stepped = (n_obs, n_state, reward + n_reward, n_term, n_trunc, n_info)
            kept = (obs, env_state, reward, terminated, truncated, info)
            out = jax.tree.map(lambda k, s: jnp.where(done, k, s), kept, stepped)
            return out, None

        out, _ = jax.lax.scan(sub_step, first, keys[1:])
        obs, env_state, reward, terminated, truncated, info = out
        return obs, ActionRepeatState(env_state=env_state), reward, terminated, truncated, info


class MaskObservation(Wrapper):
    """Keeps only some features of a flat observation (e.g. CartPole without velocities).

    Both the returned observation and ``info["final_observation"]`` are masked.
    """

    def __init__(self, env: Any, keep: tuple[int, ...]):
        super().__init__(env)
        self.keep = tuple(int(i) for i in keep)

    def _mask(self, obs: jax.Array) -> jax.Array:
        return obs[..., jnp.asarray(self.keep)]

    def observation_space(self, params: Any):
        """A Box over the kept features."""
        space = self._env.observation_space(params)
        idx = jnp.asarray(self.keep)
        low = jnp.broadcast_to(jnp.asarray(space.low), space.shape)[idx]
        high = jnp.broadcast_to(jnp.asarray(space.high), space.shape)[idx]
        return spaces.Box(low, high, (len(self.keep),), space.dtype)

    def reset(self, key: jax.Array, params: Any):
        """Reset and mask."""
        obs, state = self._env.reset(key, params)
        return self._mask(obs), state

    def step(self, key: jax.Array, state: Any, action: Any, params: Any):
        """Step and mask the observation and the final observation."""
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        info = {**info, "final_observation": self._mask(info["final_observation"])}
        return self._mask(obs), state, reward, terminated, truncated, info


class Float32(Wrapper):
    """Observations (and ``info["final_observation"]``) and rewards as float32.

    A few gymnax envs return integer observations (``FourRooms-misc``, ``FrozenLake-misc``)
    or rewards (``BernoulliBandit-misc``, ``UmbrellaChain-bsuite``); :func:`jaxrl.envs.make` wraps
    those so that every registered env meets the same contract (float32 rewards, float32
    observations or, for byte grids that say so in their observation space, uint8).
    """

    def reset(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        """Reset; float32 observation."""
        obs, state = self._env.reset(key, params)
        return obs.astype(jnp.float32), state

    def step(self, key: jax.Array, state: Any, action: Any, params: Any):
        """Step; float32 observation, final observation and reward."""
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        if "final_observation" in info:
            info = {**info, "final_observation": info["final_observation"].astype(jnp.float32)}
        return (
            obs.astype(jnp.float32),
            state,
            jnp.asarray(reward, jnp.float32),
            terminated,
            truncated,
            info,
        )
