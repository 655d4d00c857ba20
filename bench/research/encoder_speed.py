"""Training throughput of an image env with a CNN encoder against the flattened MLP.

``python -m bench.research.encoder_speed --config configs/breakout_minatar.yaml [override ...]``
builds the run once per ``network.encoder`` (default ``mlp`` and ``auto``), compiles its
train chunk, then times the chunks alternately (``--repeats`` rounds, each call waited on
with ``block_until_ready``) and prints env steps per second (median) per encoder, with the
compile time apart.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import jax
import numpy as np

from jaxrl.config import load_config
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_run, make_train_step

QUIET = ["train.progress_bar=false", "checkpoint.every_updates=0"]


def compiled_chunk(config_path: str, overrides: Sequence[str], encoder: str):
    """``(call, env steps per call, compile seconds, encoder plan)`` of one encoder's run."""
    config = load_config(config_path, [*QUIET, *overrides, f"network.encoder={encoder}"])
    setup = make_setup(config)
    runner = init_run(setup)
    step = make_train_step(setup)
    start = time.perf_counter()
    runner, _ = step(runner)
    jax.block_until_ready(runner)
    compile_s = time.perf_counter() - start
    state = {"runner": runner}

    def call() -> None:
        state["runner"], metrics = step(state["runner"])
        jax.block_until_ready((state["runner"], metrics))

    steps = config.env.num_envs * config.ppo.num_steps * config.chunk_updates
    plan = setup.network.encoders
    kinds = "flat" if plan is None else "+".join(leaf.kind for leaf in plan)
    return call, steps, compile_s, kinds


def main(argv: Sequence[str] | None = None) -> int:
    """Print one row per encoder: env steps/s (median, min-max) and compile seconds."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True, help="the run's YAML")
    p.add_argument("--encoders", default="mlp,auto", help="network.encoder values, comma-separated")
    p.add_argument("--repeats", type=int, default=3, help="timed rounds (each encoder once)")
    p.add_argument("overrides", nargs="*", help="config overrides, key=value")
    args = p.parse_args(argv)
    encoders = args.encoders.split(",")
    chunks = {e: compiled_chunk(args.config, args.overrides, e) for e in encoders}
    seconds = {e: [] for e in encoders}
    for _ in range(args.repeats):  # alternate, so that a noisy neighbour hits both
        for encoder, (call, *_rest) in chunks.items():
            start = time.perf_counter()
            call()
            seconds[encoder].append(time.perf_counter() - start)
    print("| network.encoder | encoders | env steps/s (median, min-max) | compile + 1 chunk (s) |")
    print("| --- | --- | --- | --- |")
    for encoder, (_, steps, compile_s, kinds) in chunks.items():
        rates = steps / np.asarray(seconds[encoder])
        print(
            f"| {encoder} | {kinds} | {np.median(rates):,.0f} ({rates.min():,.0f}-"
            f"{rates.max():,.0f}) | {compile_s:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
