"""Learning curves of jaxrl and the PureJaxRL-style reference, same hyperparameters and seeds.

``python -m bench.research.learning_curves [--envs 4] [--steps 500000] [--seeds 0,1,2]
[--chunk 64]``

Trains ``configs/cartpole.yaml`` (with ``env.num_envs`` and ``train.total_steps`` set) with
``jaxrl.run.driver.train`` and with ``bench.reference_ppo`` for each seed. It prints, per
``--chunk`` updates, the mean episode return over the episodes that ended in those updates
(the same statistic for both), averaged over seeds. It also prints each run's steps/s.
This is the check behind "identical learning" in ``docs/results/log.md``; speed claims come
from ``python -m bench.throughput``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxrl.config import load_config
from jaxrl.run.driver import train

from ..reference_ppo import time_reference

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "cartpole.yaml"


def ours(seed: int, envs: int, steps: int, chunk: int, run_dir: Path) -> tuple[float, list[float]]:
    """jaxrl: ``(steps/s, per-chunk mean return)``."""
    config = load_config(
        str(CONFIG),
        [
            f"seed={seed}",
            f"env.num_envs={envs}",
            f"train.total_steps={steps}",
            f"train.updates_per_chunk={chunk}",
            "checkpoint.every_updates=0",
        ],
    )
    result = train(config, run_dir, overwrite=True, quiet=True)
    return result.sps, [row["rollout/episode_return"] for row in result.history]


def reference(seed: int, envs: int, steps: int, chunk: int) -> tuple[float, list[float]]:
    """The reference: ``(steps/s, per-chunk mean return)``."""
    run = time_reference(seed, num_envs=envs, total_steps=steps)
    return_sums, episodes = run.return_sums, run.episodes
    curve = []
    for first in range(0, len(episodes), chunk):
        count = episodes[first : first + chunk].sum()
        curve.append(float(return_sums[first : first + chunk].sum() / count) if count else np.nan)
    return run.sps, curve


def main(argv: Sequence[str] | None = None) -> int:
    """Run both trainers for every seed and print the curves; ``--json FILE`` saves them."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", type=int, default=4)
    p.add_argument("--steps", type=int, default=500_000)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--chunk", type=int, default=64, help="updates per curve point")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    runs: dict[str, dict[int, tuple[float, list[float]]]] = {"jaxrl": {}, "reference": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            runs["jaxrl"][seed] = ours(
                seed, args.envs, args.steps, args.chunk, Path(tmp) / str(seed)
            )
            runs["reference"][seed] = reference(seed, args.envs, args.steps, args.chunk)
            for name in runs:
                print(f"seed {seed} {name}: {runs[name][seed][0]:,.0f} steps/s", flush=True)
    batch = args.envs * load_config(str(CONFIG), []).ppo.num_steps
    points = min(len(curve) for by_seed in runs.values() for _, curve in by_seed.values())
    print("steps      " + " ".join(f"{(i + 1) * args.chunk * batch:>9,}" for i in range(points)))
    for name, by_seed in runs.items():
        curves = np.array([curve[:points] for _, curve in by_seed.values()])
        means = np.nanmean(curves, axis=0)
        print(
            f"{name:10s} "
            + " ".join(f"{m:9.1f}" for m in means)
            + f"  mean {np.nanmean(curves):.1f}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({k: {s: v for s, v in d.items()} for k, d in runs.items()})
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
