"""What every benchmark section shares: figures, profiles, timing, configs and child processes."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxrl.config import Config, load_config

REPO = Path(__file__).resolve().parents[1]


MIB = 2**20


BENCH_UPDATES = 2**30  # updates in a benchmark "run": never reached, fits the int32 counter


@dataclasses.dataclass(frozen=True)
class Figure:
    """One measured quantity: a sample per repeat, its unit and which direction is good."""

    name: str  # "<section>/<subject>/<quantity>", e.g. "train/cartpole/sps"
    unit: str  # "steps/s", "us", "s", "MiB", ...
    higher_is_better: bool  # rates: True; latency, compile time, memory: False
    samples: tuple[float, ...]  # one value per repeat

    @property
    def median(self) -> float:
        """Median over repeats."""
        return float(np.median(self.samples))

    @property
    def min(self) -> float:
        """Smallest repeat."""
        return float(np.min(self.samples))

    @property
    def max(self) -> float:
        """Largest repeat."""
        return float(np.max(self.samples))

    def to_json(self) -> dict[str, Any]:
        """The record written by ``--json`` under ``results[name]``."""
        return {
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "repeats": len(self.samples),
        }


def rate(name: str, unit: str, samples: Sequence[float]) -> Figure:
    """A higher-is-better figure."""
    return Figure(name, unit, True, tuple(float(s) for s in samples))


def cost(name: str, unit: str, samples: Sequence[float]) -> Figure:
    """A lower-is-better figure."""
    return Figure(name, unit, False, tuple(float(s) for s in samples))


@dataclasses.dataclass(frozen=True)
class Profile:
    """How much work each sub-benchmark does."""

    name: str
    repeats: int  # timed repeats of every throughput and latency figure
    min_repeat_s: float  # a repeat times back-to-back calls for at least this long
    compile_repeats: int  # fresh compiles behind a compile-time figure
    env_counts: tuple[int, ...]  # env: numbers of parallel envs
    env_steps_target: int  # env: about this many env steps per timed call, ...
    env_steps_range: tuple[int, int]  # ... the scan length clamped to [lo, hi]
    recurrent: bool  # train, inference: also the recurrent variant of the first config
    train_overrides: tuple[str, ...]  # appended to every config's overrides
    infer_batches: tuple[int, ...]  # inference: batch sizes
    infer_calls: tuple[int, int]  # inference: [min, max] timed act() calls per repeat, ...
    infer_repeat_s: float  # ... as many as take about this long (percentiles are per repeat)
    memory_envs: tuple[int, ...]  # memory: numbers of envs
    memory_recurrent: bool  # memory: also the recurrent variant
    memory_repeats: int  # memory: fresh child processes per figure
    reference_repeats: int  # --reference: reference runs (each compiles)


PROFILES = {
    "tiny": Profile(
        name="tiny",
        repeats=3,
        min_repeat_s=0.0,
        compile_repeats=1,
        env_counts=(1, 64),
        env_steps_target=2**10,
        env_steps_range=(8, 64),
        recurrent=False,
        train_overrides=("ppo.num_steps=32", "train.updates_per_chunk=1"),
        infer_batches=(1, 64),
        infer_calls=(100, 100),
        infer_repeat_s=0.0,
        memory_envs=(4,),
        memory_recurrent=False,
        memory_repeats=1,
        reference_repeats=1,
    ),
    "default": Profile(
        name="default",
        repeats=5,
        min_repeat_s=0.2,
        compile_repeats=1,
        env_counts=(1, 64, 1024, 8192),
        env_steps_target=2**20,
        env_steps_range=(64, 1000),
        recurrent=True,
        # Shorter chunks than cartpole.yaml's 64 updates: the same work per update, fewer
        # seconds per timed call (a GRU chunk of 64 updates takes seconds on 2 cores).
        train_overrides=("train.updates_per_chunk=16",),
        infer_batches=(1, 4096),
        infer_calls=(50, 200),
        infer_repeat_s=0.5,
        memory_envs=(4, 512, 4096),
        memory_recurrent=False,
        memory_repeats=1,
        reference_repeats=2,
    ),
    "full": Profile(
        name="full",
        repeats=10,
        min_repeat_s=0.5,
        compile_repeats=3,
        env_counts=(1, 64, 1024, 8192, 65536),
        env_steps_target=2**22,
        env_steps_range=(64, 1000),
        recurrent=True,
        train_overrides=(),
        infer_batches=(1, 256, 4096),
        infer_calls=(200, 1000),
        infer_repeat_s=2.0,
        memory_envs=(4, 512, 4096, 65536),
        memory_recurrent=True,
        memory_repeats=3,
        reference_repeats=3,
    ),
}


def time_calls(run: Callable[[], Any], repeats: int, min_repeat_s: float) -> list[float]:
    """Seconds per call of ``run``, which must block until its result is ready.

    The first call warms up and calibrates how many back-to-back calls make a repeat of at
    least ``min_repeat_s``; it is not part of the result.

    Returns:
      The mean seconds per call of each of ``repeats`` repeats.
    """
    start = time.perf_counter()
    run()
    first = time.perf_counter() - start
    calls = max(1, math.ceil(min_repeat_s / max(first, 1e-9)))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        times.append((time.perf_counter() - start) / calls)
    return times


def compile_seconds(jitted: Any, *args: Any) -> tuple[float, Any]:
    """Trace, lower and compile ``jitted`` for ``args``: ``(seconds, executable)``."""
    start = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    return time.perf_counter() - start, compiled


def available_bytes() -> int:
    """Memory a benchmark may take: free device memory on GPU/TPU, available RAM on CPU."""
    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    available = proc_kib("/proc/meminfo", "MemAvailable")
    if available is not None:
        return available * 1024
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def proc_kib(path: str, field: str) -> int | None:
    """The ``field: N kB`` line of a Linux ``/proc`` file, in KiB; None where there is none."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def tree_bytes(tree: Any) -> int:
    """Bytes of all array leaves (works on ``jax.eval_shape`` results)."""
    return sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class ConfigSpec:
    """A config to benchmark: a label, its YAML file and overrides."""

    label: str  # names the figures: "train/<label>/sps"
    path: str
    overrides: tuple[str, ...]

    def load(self, extra: Sequence[str] = ()) -> Config:
        """The config with overrides, its ``train.total_steps`` raised out of reach."""
        # Any total that passes validation gives the batch size; then the real one.
        config = load_config(self.path, [*self.overrides, *extra, f"train.total_steps={2**62}"])
        steps = f"train.total_steps={config.batch_size * BENCH_UPDATES}"
        return load_config(self.path, [*self.overrides, *extra, steps])

    def load_as_written(self, extra: Sequence[str] = ()) -> Config:
        """The config with overrides and nothing else changed."""
        return load_config(self.path, [*self.overrides, *extra])


def run_child(
    entry: str, spec: dict[str, Any], extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run ``<module>.<function>()`` in a fresh Python with ``spec`` as its argument; returns its
    last line of stdout, parsed. ``entry`` is ``f"{__name__}.memory_child"``, so that it names the
    module as imported (``bench.*`` from a clone, ``jaxrl.bench.*`` installed)."""
    env = {**os.environ, **(extra_env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from {entry.rpartition('.')[0]} import {entry.rpartition('.')[2]} as main; main()",
            json.dumps(spec),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{entry} ({spec}) failed: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""
