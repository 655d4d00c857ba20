"""Policy inference latency and throughput of one ``act`` call (``--only inference``)."""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.core.acting import PolicyParams, act
from jaxrl.run.setup import Setup
from jaxrl.run.train_step import init_runner_state

from .figures import Figure, Profile, compile_seconds, cost, rate

INFERENCE_QUANTITIES = ("p50", "p95", "p99", "actions_per_s", "compile")


def inference_figures(
    prefix: str, setup: Setup, batch: int, profile: Profile, quantities: Sequence[str]
) -> list[Figure]:
    """Latency percentiles and actions/s of jitted ``act`` (sampling) at ``batch``.

    Args:
      prefix: names the figures ``<prefix>/<quantity>``.
      setup: the run whose network acts; params are freshly initialised.
      batch: observations per call.
      profile: repeats and calls per repeat.
      quantities: any of ``p50``, ``p95``, ``p99`` (microseconds per call, percentiles of
        each repeat's calls), ``actions_per_s`` (batch x calls / seconds) and ``compile``.
    """
    key_params, key_obs, key_act = jax.random.split(jax.random.key(0), 3)
    runner = init_runner_state(setup, key_params)
    params = PolicyParams(params=runner.params, obs_stats=runner.obs_stats)
    hidden = setup.network.initial_hidden(batch)
    obs = jax.random.normal(key_obs, (batch, *setup.obs_shape), jnp.float32)
    is_first = jnp.zeros((batch,), bool)
    keys = list(jax.random.split(key_act, profile.infer_calls[1] + 10))  # split before timing
    compiles = []
    for _ in range(profile.compile_repeats):
        # A fresh jit per compile: a real trace, lowering and XLA compile.
        jitted = jax.jit(functools.partial(act, setup.policy), static_argnames="deterministic")
        seconds, compiled = compile_seconds(jitted, params, hidden, obs, is_first, keys[0])
        compiles.append(seconds)
    start = time.perf_counter()
    for key in keys[-10:]:  # warm-up, and a latency estimate to size the repeats
        jax.block_until_ready(compiled(params, hidden, obs, is_first, key))
    latency = (time.perf_counter() - start) / 10
    low, high = profile.infer_calls
    calls = int(min(high, max(low, profile.infer_repeat_s // latency)))
    keys = keys[:calls]

    samples: dict[str, list[float]] = {q: [] for q in ("p50", "p95", "p99", "actions_per_s")}
    for _ in range(profile.repeats):
        latencies = np.empty(calls)
        for i, key in enumerate(keys):
            start = time.perf_counter()
            jax.block_until_ready(compiled(params, hidden, obs, is_first, key))
            latencies[i] = time.perf_counter() - start
        for q in (50, 95, 99):
            samples[f"p{q}"].append(float(np.percentile(latencies, q)) * 1e6)
        samples["actions_per_s"].append(batch * calls / latencies.sum())

    figures = []
    for q in quantities:
        if q == "actions_per_s":
            figures.append(rate(f"{prefix}/actions_per_s", "actions/s", samples[q]))
        elif q == "compile":
            figures.append(cost(f"{prefix}/compile", "s", compiles))
        else:
            figures.append(cost(f"{prefix}/{q}", "us", samples[q]))
    return figures
