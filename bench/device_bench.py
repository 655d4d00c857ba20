"""What the seeds measure of a trainer on an accelerator (``--only device``).

For each train config: the device's busy fraction during one timed train chunk, the kernels and
host<->device copies per update, and the split of an update's time between the rollout and the
rest (GAE and the PPO epochs). Peak device memory is the memory section's figure.

- Busy fraction, kernels and copies come from a ``jax.profiler`` trace of one warm chunk call:
  the union of the device's stream events (kernels and copies) over the call's wall time, and
  the events counted per update. A CPU has no device plane in the trace: those figures are
  reported as "n/a on cpu", never estimated.
- The time split times the rollout alone (the same compiled rollout the chunk runs, jitted on
  its own, from the same runner state) against the chunk: ``rollout_fraction`` is
  ``updates x rollout time / chunk time``. It is measured on every platform. A run sharded
  over several devices is not split (the rollout alone would need its own sharding).
- Peak device memory: the allocator's ``peak_bytes_in_use`` in this process (GPU/TPU).
"""

from __future__ import annotations

import glob
import tempfile
import time
from collections import Counter
from collections.abc import Iterable

import jax

from jaxrl.config import Config
from jaxrl.core.rollout import rollout
from jaxrl.core.types import RunnerState
from jaxrl.run.setup import Setup, make_setup
from jaxrl.run.train_step import init_run, make_plan, make_train_step

from .figures import Figure, Profile, cost, log, rate, time_calls

COPY_MARKERS = ("memcpy", "memset")


def busy_union_ns(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of ``[start, end)`` intervals (overlapping streams count once)."""
    busy, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        busy += end - max(start, reach)
        reach = end
    return busy


def trace_device_events(run, directory: str) -> tuple[float, dict[str, list]]:
    """Run ``run()`` inside a profiler trace; its wall seconds and the device planes' events.

    Returns ``{plane name: [(name, start_ns, end_ns), ...]}`` for every accelerator plane
    (``/device:GPU:0``, ``/device:TPU:0``...), stream events only (not the derived
    "XLA Ops"/"XLA Modules" lines, which repeat them).
    """
    from jax.profiler import ProfileData

    with jax.profiler.trace(directory):
        start = time.perf_counter()
        run()
        wall = time.perf_counter() - start
    paths = sorted(glob.glob(f"{directory}/**/*.xplane.pb", recursive=True))
    planes: dict[str, list] = {}
    if not paths:
        return wall, planes
    for plane in ProfileData.from_file(paths[-1]).planes:
        if not plane.name.startswith("/device:") or "CPU" in plane.name:
            continue
        events = []
        for line in plane.lines:
            if "stream" not in line.name.lower():
                continue
            events += [(e.name, e.start_ns, e.end_ns) for e in line.events]
        planes[plane.name] = events
    return wall, planes


def trace_figures(prefix: str, wall: float, planes: dict[str, list], updates: int) -> list[Figure]:
    """Busy fraction, kernels and copies per update of the first device plane."""
    if not planes:
        return []
    events = next(iter(planes.values()))
    copies = [e for e in events if any(m in e[0].lower() for m in COPY_MARKERS)]
    kernels = len(events) - len(copies)
    h2d = sum("h2d" in e[0].lower() or "htod" in e[0].lower() for e in copies)
    d2h = sum("d2h" in e[0].lower() or "dtoh" in e[0].lower() for e in copies)
    busy_s = busy_union_ns((start, end) for _, start, end in events) / 1e9
    return [
        rate(f"{prefix}/busy", "fraction", [busy_s / wall]),
        cost(f"{prefix}/kernels_per_update", "kernels", [kernels / updates]),
        cost(f"{prefix}/h2d_per_update", "copies", [h2d / updates]),
        cost(f"{prefix}/d2h_per_update", "copies", [d2h / updates]),
    ]


def top_ops(events: list, updates: int, count: int = 12) -> list[str]:
    """The ``count`` device ops that took the most time, per update: where to look next."""
    time_of, calls = Counter(), Counter()
    for name, start, end in events:
        time_of[name[:70]] += (end - start) / 1e3
        calls[name[:70]] += 1
    return [
        f"{us / updates:9.1f} us x{calls[name] / updates:7.1f}  {name}"
        for name, us in time_of.most_common(count)
    ]


def _rollout_only(setup: Setup):
    """The chunk's rollout alone, jitted: ``RunnerState -> (carry, RolloutOutput)``."""

    def run(runner: RunnerState):
        plan = make_plan(setup, runner.features)
        return rollout(setup, runner.params, runner.obs_stats, plan, runner.match, runner.key)

    if setup.members.count > 1:
        run = jax.vmap(run)
    return jax.jit(run)


def device_figures(prefix: str, config: Config, profile: Profile) -> tuple[list[Figure], str]:
    """The device section's figures for ``config`` and a note on what was not measured."""
    setup = make_setup(config)
    runner = init_run(setup)
    notes = []
    figures: list[Figure] = []
    if setup.mesh is None:
        # Before the chunk: the chunk donates (and so deletes) the runner it is given.
        rollout_fn = _rollout_only(setup)
        jax.block_until_ready(rollout_fn(runner))  # compile and warm up
        rollout_s = time_calls(
            lambda: jax.block_until_ready(rollout_fn(runner)), profile.repeats, 0.0
        )
    else:
        rollout_s = None
        notes.append("time split: n/a for a sharded run")
    step = make_train_step(setup)
    carried = {"runner": runner}

    def call() -> None:
        carried["runner"], _ = jax.block_until_ready(step(carried["runner"]))

    call()  # compile and warm up
    chunk_s = time_calls(call, profile.repeats, 0.0)
    if rollout_s is not None:
        updates = config.chunk_updates
        pairs = zip(sorted(rollout_s), sorted(chunk_s), strict=True)
        fractions = [updates * r / c for r, c in pairs]
        figures.append(rate(f"{prefix}/rollout_fraction", "fraction", fractions))
    with tempfile.TemporaryDirectory() as directory:
        wall, planes = trace_device_events(call, directory)
    traced = trace_figures(prefix, wall, planes, config.chunk_updates)
    for line in top_ops(next(iter(planes.values()), []), config.chunk_updates):
        log(f"  {prefix} top op per update: {line}")
    if not traced:
        notes.append(f"busy, kernels, copies: n/a on {jax.default_backend()}")
    # The allocator's peak over this process so far: the chunk, its inputs and the rollout
    # alone (smaller). The CPU client keeps no such statistic.
    stats = jax.local_devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        figures.append(cost(f"{prefix}/peak_memory", "GiB", [stats["peak_bytes_in_use"] / 2**30]))
    else:
        notes.append(f"peak memory: see --only memory on {jax.default_backend()}")
    return figures + traced, "; ".join(notes)
