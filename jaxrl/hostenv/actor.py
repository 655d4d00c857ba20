"""The actor of a host run: steps the host envs in NumPy with the policy jitted on its device.

Per rollout it records how its time split: ``env_s`` (host env steps and resets), ``policy_s``
(the jitted policy step, its inputs and outputs), and ``transfer_s`` (the stacked rollout put
on the learner's device).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.core.acting import ActOutput, PolicyParams, PolicySpec, act, value_of
from jaxrl.hostenv.learner import HostSpec, Trajectory
from jaxrl.hostenv.vecenv import HostVecEnv


@dataclass
class Episodes:
    """Episodes that ended during one rollout (host counters)."""

    returns: list[float] = field(default_factory=list)  # unclipped game returns
    lengths: list[int] = field(default_factory=list)  # in agent steps


@dataclass(frozen=True)
class Rollout:
    """What the actor hands to the learner, and its own accounting."""

    traj: Trajectory  # on the learner's device
    episodes: Episodes
    env_s: float  # seconds in the host envs
    policy_s: float  # seconds in the policy step (dispatch, compute, action to host)
    transfer_s: float  # seconds putting the rollout on the learner's device


@functools.partial(jax.jit, static_argnums=0)
def policy_step(
    spec: PolicySpec,
    policy: PolicyParams,
    hidden: Any,
    obs: jax.Array,
    is_first: jax.Array,
    key: jax.Array,
    step: jax.Array,
) -> ActOutput:
    """:func:`jaxrl.core.acting.act` with the step's key folded from the rollout's key."""
    return act(spec, policy, hidden, obs, is_first, jax.random.fold_in(key, step))


@functools.partial(jax.jit, static_argnums=0)
def final_values(
    spec: PolicySpec, params: Any, hidden: Any, final_obs: jax.Array, truncated: jax.Array
) -> jax.Array:
    """``[B]`` float32: V(final obs) where ``truncated`` (after the step's carry), else 0."""
    value = value_of(spec, params, hidden, final_obs, jnp.zeros(truncated.shape, bool))
    return jnp.where(truncated, value, 0.0)


class Actor:
    """Steps ``B`` host envs for ``ppo.num_steps`` steps per rollout.

    It carries the envs' current observations, episode starts, recurrent carry and episode
    counters from one rollout to the next (host state: not checkpointed).
    """

    def __init__(self, spec: HostSpec, vec: HostVecEnv, device: Any = None):
        self.spec = spec
        self.vec = vec
        self.device = device or jax.devices()[0]
        self.obs = vec.reset()
        self.is_first = np.ones(vec.num_envs, bool)
        self.hidden = spec.network.initial_hidden(vec.num_envs)
        self.episode_return = np.zeros(vec.num_envs, np.float64)
        self.episode_length = np.zeros(vec.num_envs, np.int64)

    def _act(self, policy: PolicyParams, key: jax.Array, t: int) -> tuple[ActOutput, np.ndarray]:
        out = policy_step(
            self.spec.policy, policy, self.hidden, self.obs, self.is_first, key, np.int32(t)
        )
        action = np.asarray(out.action)
        if not self.spec.spaces.discrete:
            spaces = self.spec.spaces
            action = np.clip(action, spaces.action_low, spaces.action_high)
        return out, action

    def rollout(self, policy: PolicyParams, key: jax.Array) -> Rollout:
        """One rollout acting with ``policy``; ``key`` is this rollout's own key."""
        spec, vec = self.spec, self.vec
        num_steps, length = spec.config.ppo.num_steps, spec.sequence_length
        shape = (num_steps, vec.num_envs)
        obs = np.empty(shape + spec.spaces.obs_shape, spec.spaces.obs_dtype)
        is_first = np.empty(shape, bool)
        reward = np.empty(shape, np.float32)
        terminated, truncated = np.empty(shape, bool), np.empty(shape, bool)
        outs, final_value, start_hidden = [], np.zeros(shape, np.float32), []
        episodes = Episodes()
        env_s = policy_s = 0.0
        for t in range(num_steps):
            if t % length == 0:
                start_hidden.append(self.hidden)
            obs[t], is_first[t] = self.obs, self.is_first
            t0 = time.perf_counter()
            out, action = self._act(policy, key, t)
            t1 = time.perf_counter()
            step = vec.step(action)
            t2 = time.perf_counter()
            policy_s += t1 - t0
            env_s += t2 - t1
            outs.append(out)
            reward[t], terminated[t], truncated[t] = step.reward, step.terminated, step.truncated
            if step.truncated.any():  # bootstrap from the pre-reset observation
                final_value[t] = np.asarray(
                    final_values(
                        spec.policy, policy.params, out.hidden, step.final_obs, step.truncated
                    )
                )
            done = step.terminated | step.truncated
            self._count(step.raw_reward, done, episodes)
            self.obs, self.is_first, self.hidden = step.obs, done, out.hidden
            policy_s += time.perf_counter() - t2
        t0 = time.perf_counter()
        traj = self._stack(outs, obs, is_first, reward, terminated, truncated, final_value)
        traj = traj.replace(start_hidden=jax.tree.map(lambda *h: jnp.stack(h), *start_hidden))
        traj = jax.block_until_ready(jax.device_put(traj, self.device))
        return Rollout(
            traj=traj,
            episodes=episodes,
            env_s=env_s,
            policy_s=policy_s,
            transfer_s=time.perf_counter() - t0,
        )

    def _count(self, raw_reward: np.ndarray, done: np.ndarray, episodes: Episodes) -> None:
        self.episode_return += raw_reward
        self.episode_length += 1
        for i in np.nonzero(done)[0]:
            episodes.returns.append(float(self.episode_return[i]))
            episodes.lengths.append(int(self.episode_length[i]))
        self.episode_return[done] = 0.0
        self.episode_length[done] = 0

    def _stack(self, outs, obs, is_first, reward, terminated, truncated, final_value) -> Trajectory:
        return Trajectory(
            obs=obs,
            is_first=is_first,
            action=jnp.stack([o.action for o in outs]),
            log_prob=jnp.stack([o.log_prob for o in outs]),
            value=jnp.stack([o.value for o in outs]),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_value=final_value,
            start_hidden=(),
            last_obs=self.obs,
            last_is_first=self.is_first,
            last_hidden=self.hidden,
        )
