"""Env-only throughput: vmapped, auto-resetting env steps in one ``lax.scan`` (``--only env``)."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl import envs

from .figures import (
    Figure,
    Profile,
    available_bytes,
    compile_seconds,
    cost,
    rate,
    time_calls,
    tree_bytes,
)


class EnvBenchCarry(struct.PyTreeNode):
    """The env benchmark's scan carry."""

    env_state: Any  # [B] env states
    obs: jax.Array  # [B, *obs_shape] last observation (carried so XLA keeps computing it)
    reward_sum: jax.Array  # [B, *reward_shape] float32 summed reward (same reason)
    agent_steps: jax.Array  # () int32 active agent-steps, from info["agent_mask"] if present


def env_scan(env: Any, env_params: Any, carry: EnvBenchCarry, actions, keys) -> EnvBenchCarry:
    """``T`` vmapped, auto-resetting steps of ``B`` envs with pre-sampled inputs.

    Args:
      env: a gymnax-1.0 env (auto-resetting ``step``).
      env_params: its params.
      carry: the initial states and observations, zero sums.
      actions: ``[T, B, *agent_shape, *action_shape]`` pre-sampled actions.
      keys: ``[T, B]`` per-step env keys.
    """
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def body(c: EnvBenchCarry, inputs) -> tuple[EnvBenchCarry, None]:
        action, key = inputs
        obs, env_state, reward, _, _, info = step(key, c.env_state, action, env_params)
        agent_steps = c.agent_steps
        if "agent_mask" in info:  # trace time: a multi-agent env reporting its active slots
            agent_steps = agent_steps + info["agent_mask"].sum(dtype=jnp.int32)
        return EnvBenchCarry(
            env_state=env_state,
            obs=obs,
            reward_sum=c.reward_sum + reward.astype(jnp.float32),
            agent_steps=agent_steps,
        ), None

    carry, _ = jax.lax.scan(body, carry, (actions, keys))
    return carry


def env_scan_length(num_envs: int, profile: Profile) -> int:
    """Steps per timed call: about ``env_steps_target`` env steps, clamped."""
    lo, hi = profile.env_steps_range
    return int(min(hi, max(lo, profile.env_steps_target // num_envs)))


def env_fits(name: str, kwargs: dict[str, Any], num_envs: int, profile: Profile) -> bool:
    """Whether the env benchmark at ``num_envs`` should fit in half the free memory."""
    env, env_params = envs.make(name, **kwargs)
    obs, state = jax.eval_shape(env.reset, jax.random.key(0), env_params)
    agents = int(getattr(env, "num_agents", 1))
    # Step and reset branches, the select and the scan's double buffer: ~8 copies of
    # state and obs; plus the pre-sampled actions (<= 8 bytes each) and keys (8 bytes).
    need = num_envs * (
        8 * tree_bytes((obs, state)) + env_scan_length(num_envs, profile) * (8 * agents + 8)
    )
    return need < 0.5 * available_bytes()


def _env_inputs(
    env: Any, env_params: Any, num_envs: int, num_steps: int, agent_shape: tuple[int, ...]
) -> tuple[EnvBenchCarry, jax.Array, jax.Array, bool]:
    """The timed scan's inputs, ready on the device: ``(carry, actions, keys, reports_active)``.

    ``actions``: ``[num_steps, num_envs, *agent_shape, ...]``, uniform over the action space;
    ``keys``: ``[num_steps, num_envs]`` step keys; ``reports_active``: the env counts its
    active agents in ``info["agent_mask"]``.
    """
    key_reset, key_actions, key_steps = jax.random.split(jax.random.key(0), 3)
    obs, env_state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(key_reset, num_envs), env_params
    )
    space = env.action_space(env_params)
    shape = (num_steps, num_envs, *agent_shape)
    # Sampled outside the timed region: the figure is the env's speed, not the sampler's.
    actions = jax.jit(lambda k: jax.vmap(space.sample)(jax.random.split(k, math.prod(shape))))(
        key_actions
    )
    actions = actions.reshape(shape + actions.shape[1:])
    keys = jax.random.split(key_steps, (num_steps, num_envs))
    _, _, reward, _, _, info = jax.eval_shape(
        jax.vmap(env.step, in_axes=(0, 0, 0, None)), keys[0], env_state, actions[0], env_params
    )
    carry = EnvBenchCarry(
        env_state=env_state,
        obs=obs,
        reward_sum=jnp.zeros(reward.shape, jnp.float32),
        agent_steps=jnp.zeros((), jnp.int32),
    )
    jax.block_until_ready((carry, actions, keys))
    return carry, actions, keys, bool(agent_shape) and "agent_mask" in info


def _compile_env_scan(env: Any, env_params: Any, inputs: tuple, repeats: int):
    """``(compile seconds per repeat, the last compiled scan)`` of :func:`env_scan`."""
    compiles = []
    for _ in range(repeats):
        # A fresh jit per compile: a real trace, lowering and XLA compile.
        seconds, compiled = compile_seconds(
            jax.jit(functools.partial(env_scan, env, env_params)), *inputs
        )
        compiles.append(seconds)
    return compiles, compiled


def env_figures(name: str, kwargs: dict[str, Any], num_envs: int, profile: Profile) -> list[Figure]:
    """Raw env steps/s for ``num_envs`` envs (and agent-steps/s for multi-agent envs).

    Args:
      name: a registered env name.
      kwargs: overrides of its ``EnvParams``.
      num_envs: parallel (vmapped) env instances.
      profile: scan length, repeats.
    """
    env, env_params = envs.make(name, **kwargs)
    agent_shape = (int(env.num_agents),) if hasattr(env, "num_agents") else ()
    num_steps = env_scan_length(num_envs, profile)
    carry, actions, keys, reports_active = _env_inputs(
        env, env_params, num_envs, num_steps, agent_shape
    )
    compiles, compiled = _compile_env_scan(
        env, env_params, (carry, actions, keys), profile.compile_repeats
    )
    last: list[EnvBenchCarry] = []

    def call() -> None:
        last[:] = [jax.block_until_ready(compiled(carry, actions, keys))]

    seconds = time_calls(call, profile.repeats, profile.min_repeat_s)
    env_steps = num_steps * num_envs
    sps = [env_steps / s for s in seconds]
    tag = ",".join(f"{k}={v}" for k, v in sorted(kwargs.items()))
    prefix = f"env/{name}" + (f"[{tag}]" if tag else "") + f"/n={num_envs}"
    figures = [rate(f"{prefix}/sps", "steps/s", sps)]
    if agent_shape:
        # Active agents if the env reports them in info["agent_mask"], else every slot.
        if reports_active:
            per_step = int(last[0].agent_steps) / env_steps
        else:
            per_step = math.prod(agent_shape)
        figures.append(rate(f"{prefix}/agent_sps", "agent-steps/s", [s * per_step for s in sps]))
    figures.append(cost(f"{prefix}/compile", "s", compiles))
    return figures
