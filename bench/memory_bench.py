"""Peak memory of one update, each figure in a fresh child process (``--only memory``)."""

from __future__ import annotations

import concurrent.futures
import json
import math
import os
import resource
import sys
from collections.abc import Sequence
from typing import Any

import jax

from jaxrl.config import Config
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_runner_state, make_train_step

from .figures import (
    MIB,
    ConfigSpec,
    Figure,
    Profile,
    available_bytes,
    cost,
    proc_kib,
    run_child,
)


def peak_rss_bytes() -> int:
    """This process's peak resident set size.

    Linux's ``VmHWM`` (``/proc/self/status``) where available: ``ru_maxrss`` survives
    ``exec``, so in a child it is at least the parent's RSS when it forked (measured: a
    13 MiB child of a 327 MiB parent reports 327 MiB). Elsewhere ``ru_maxrss``.
    """
    peak = proc_kib("/proc/self/status", "VmHWM")
    if peak is not None:
        return peak * 1024
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: KiB on Linux, bytes on macOS
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def memory_child() -> None:
    """Child process entry: build a run, train one update, print peak memory as JSON.

    ``sys.argv[1]`` is ``{"path", "overrides", "num_envs"}``.
    """
    spec = json.loads(sys.argv[1])
    device = jax.devices()[0]  # start the backend before the baseline
    baseline = peak_rss_bytes()
    config = ConfigSpec("child", spec["path"], tuple(spec["overrides"])).load(
        [f"env.num_envs={spec['num_envs']}", "train.updates_per_chunk=1"]
    )
    setup = make_setup(config)
    runner = init_runner_state(setup, jax.random.key(config.seed))
    compiled = make_train_step(setup).lower(runner).compile()
    analysis = compiled.memory_analysis()
    runner, metrics = jax.block_until_ready(compiled(runner))
    assert int(metrics["train/updates"]) == 1
    stats = (device.memory_stats() or {}) if device.platform != "cpu" else {}
    xla_buffers = None
    if analysis is not None:
        # What XLA allocates for one call: live arguments, outputs that do not reuse a
        # donated argument, and scratch. Deterministic, unlike RSS.
        xla_buffers = (
            analysis.argument_size_in_bytes
            + analysis.output_size_in_bytes
            - analysis.alias_size_in_bytes
            + analysis.temp_size_in_bytes
        )
    print(
        json.dumps(
            {
                "platform": device.platform,
                "baseline_rss": baseline,
                "peak_rss": peak_rss_bytes(),
                "peak_device": stats.get("peak_bytes_in_use"),
                "xla_buffers": xla_buffers,
            }
        )
    )


def _run_memory_child(path: str, overrides: Sequence[str], num_envs: int) -> dict[str, Any]:
    spec = {"path": path, "overrides": list(overrides), "num_envs": num_envs}
    return run_child(f"{__name__}.memory_child", spec)


def train_fits(config: Config) -> bool:
    """Whether one update of ``config`` should fit in half the free memory (estimated)."""
    setup = make_setup(config)
    obs_bytes = 4 * math.prod(setup.obs_shape)
    # The rollout's Transition (obs + ~12 scalars per step), GAE and the shuffled
    # minibatch copies: ~6 copies of [T, B] transitions.
    need = 6 * config.batch_size * (obs_bytes + 64)
    return need < 0.5 * available_bytes()


def memory_figures(jobs: Sequence[tuple[str, ConfigSpec, int]], profile: Profile) -> list[Figure]:
    """Peak memory of one update per ``(label, spec, num_envs)``, in fresh child processes.

    The children run concurrently, one per CPU: their peak memory does not depend on timing.
    """
    runs = [job for job in jobs for _ in range(profile.memory_repeats)]
    workers = max(1, min(len(runs), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        outputs = list(
            pool.map(lambda job: _run_memory_child(job[1].path, job[1].overrides, job[2]), runs)
        )
    figures = []
    for label, spec, num_envs in jobs:
        mine = [
            out for job, out in zip(runs, outputs, strict=True) if job == (label, spec, num_envs)
        ]
        prefix = f"memory/{label}/n={num_envs}"
        if mine[0]["peak_device"] is not None:
            samples = [out["peak_device"] / MIB for out in mine]
            figures.append(cost(f"{prefix}/peak_device", "MiB", samples))
        else:
            samples = [out["peak_rss"] / MIB for out in mine]
            figures.append(cost(f"{prefix}/peak_rss", "MiB", samples))
        if mine[0]["xla_buffers"] is not None:
            samples = [out["xla_buffers"] / MIB for out in mine]
            figures.append(cost(f"{prefix}/xla_buffers", "MiB", samples))
    if outputs and outputs[0]["peak_device"] is None:
        # What a child holds before building anything: python, jax, jaxrl and the XLA client.
        samples = [out["baseline_rss"] / MIB for out in outputs]
        figures.append(cost("memory/baseline_rss", "MiB", samples))
    return figures
