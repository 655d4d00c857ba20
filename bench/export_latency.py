"""Size and per-call latency of exported policies beside jaxrl's jitted ``act``.

    python -m bench.export_latency --run-dir runs/cartpole [--batches 1 1024] [--calls 200]

For each batch size: the median wall time of one call of jaxrl's ``jax.jit(policy.act)``
(``jaxrl.load_policy``), of the StableHLO file (``jax.export.deserialize``, jitted) and of the
ONNX file (onnxruntime, CPU provider), on random observations of the run's shape; outputs
fetched to the host (``block_until_ready`` / NumPy) in every call. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np


def median_s(call: Callable[[], object], calls: int) -> float:
    """Median seconds of ``call()`` after 5 warm-up calls."""
    for _ in range(5):
        call()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def callers(run_dir: str, files: dict[str, Path], obs: np.ndarray) -> dict[str, Callable]:
    """``{name: call}`` for jaxrl's act and each exported file, on the batch ``obs``."""
    import jaxrl  # noqa: PLC0415

    policy = jaxrl.load_policy(run_dir)
    act = jax.jit(policy.act)
    key = jax.random.key(0)
    out = {"jaxrl act (jit)": lambda: act(policy.params, obs, key).block_until_ready()}
    if "stablehlo" in files:
        exported = jax.export.deserialize(bytearray(files["stablehlo"].read_bytes()))
        call = jax.jit(exported.call)
        out["StableHLO file (jit)"] = lambda: jax.block_until_ready(call({"obs": obs}))
    if "onnx" in files:
        import onnxruntime as ort  # noqa: PLC0415

        session = ort.InferenceSession(str(files["onnx"]), providers=["CPUExecutionProvider"])
        out["ONNX file (onnxruntime)"] = lambda: session.run(["action"], {"obs": obs})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, help="a feed-forward run")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 1024])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--formats", nargs="+", default=["onnx", "stablehlo"])
    args = parser.parse_args()
    import jaxrl  # noqa: PLC0415

    tmp = Path(tempfile.mkdtemp(prefix="export-bench-"))
    files, shape = {}, None
    for fmt in args.formats:
        result = jaxrl.export(args.run_dir, tmp / f"policy.{fmt}", fmt)
        files[fmt] = result.path
        shape = result.recording.obs.shape[2:]
    print(f"machine: {platform.processor() or platform.machine()}, jax {jax.__version__}")
    print("| file | bytes |\n| --- | --- |")
    for path in files.values():
        print(f"| {path.name} | {path.stat().st_size:,} |")
    print("\n| batch | call | median per call |")
    print("| --- | --- | --- |")
    rng = np.random.default_rng(0)
    for batch in args.batches:
        obs = rng.standard_normal((batch, *shape)).astype(np.float32)
        for name, call in callers(args.run_dir, files, obs).items():
            print(f"| {batch:,} | {name} | {median_s(call, args.calls) * 1e6:,.0f} us |")


if __name__ == "__main__":
    main()
