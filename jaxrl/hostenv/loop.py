"""Playing a host run's checkpointed policy (``env.backend: gymnasium | envpool``).

Training a host run is :mod:`jaxrl.run.driver` over :class:`jaxrl.hostenv.source.HostSource`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxrl.config.loader import load_run_config
from jaxrl.core.acting import PolicyParams
from jaxrl.hostenv.learner import HostSpec, policy_of
from jaxrl.hostenv.source import build
from jaxrl.hostenv.vecenv import make_vec
from jaxrl.run.checkpoint import Checkpointer, CheckpointError


def restore_host_policy(run_dir: str | Path, step: int | None) -> tuple[Any, Any, int]:
    """``(spec, policy, step)``: a host run's built spec and its policy at ``step`` (None: the
    latest checkpoint)."""
    config = load_run_config(run_dir)
    spec, runner = build(config)
    checkpointer = Checkpointer(run_dir, keep=config.checkpoint.keep, create=False)
    try:
        policy, step = checkpointer.restore_policy(policy_of(runner), step)
    finally:
        checkpointer.close()
    return spec, policy, int(step)


def evaluate_host(
    run_dir: str | Path,
    episodes: int,
    step: int | None,
    seed: int,
    deterministic: bool,
    result: Callable[..., Any],
) -> Any:
    """``episodes`` episodes of a host run's checkpointed policy on fresh host envs.

    Returns ``result(mean_return=..., std_return=..., mean_length=..., returns=..., step=...,
    episodes=..., actions=...)`` (:class:`jaxrl.commands.evaluate.EvalResult`, which the
    caller hands in: hostenv imports no command) of the first ``episodes`` episodes to end,
    on ``min(episodes, env.num_envs)`` envs seeded with ``seed``.
    """
    spec, policy, step = restore_host_policy(run_dir, step)
    config = spec.config
    num_envs = min(episodes, config.env.num_envs)
    vec = make_vec(config.env.backend, config.env.name, num_envs, seed, config.env.kwargs)
    try:
        returns, lengths = play_episodes(spec, vec, policy, episodes, seed, deterministic)
    finally:
        vec.close()
    returns_arr = np.asarray(returns, np.float64)
    return result(
        mean_return=float(returns_arr.mean()),
        std_return=float(returns_arr.std()),
        mean_length=float(np.mean(lengths)),
        returns=tuple(returns),
        step=int(step),
        episodes=episodes,
        actions="greedy" if deterministic else "sample",
    )


def play_episodes(
    spec: HostSpec, vec: Any, policy: PolicyParams, episodes: int, seed: int, deterministic: bool
) -> tuple[list[float], list[int]]:
    """Returns and lengths of the first ``episodes`` episodes ``vec`` finishes under ``policy``."""
    from jaxrl.core.acting import act  # noqa: PLC0415

    step_fn = jax.jit(
        lambda p, h, o, f, k: act(spec.policy, p, h, o, f, k, deterministic=deterministic)
    )
    key = jax.random.key(seed)
    obs, is_first = vec.reset(), np.ones(vec.num_envs, bool)
    hidden = spec.network.initial_hidden(vec.num_envs)
    ret, length = np.zeros(vec.num_envs), np.zeros(vec.num_envs, int)
    returns: list[float] = []
    lengths: list[int] = []
    t = 0
    while len(returns) < episodes:
        out = step_fn(policy, hidden, obs, is_first, jax.random.fold_in(key, t))
        action = np.asarray(out.action)
        if not spec.spaces.discrete:
            action = np.clip(action, spec.spaces.action_low, spec.spaces.action_high)
        step = vec.step(action)
        ret += step.raw_reward
        length += 1
        done = step.terminated | step.truncated
        for i in np.nonzero(done)[0]:
            returns.append(float(ret[i]))
            lengths.append(int(length[i]))
        ret[done], length[done] = 0.0, 0
        obs, is_first, hidden, t = step.obs, done, out.hidden, t + 1
    if not returns:
        raise CheckpointError("no episode finished")
    return returns[:episodes], lengths[:episodes]
