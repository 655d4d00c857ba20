"""Host envs (gymnasium, EnvPool) side by side with CleanRL's PPO, and jaxrl's time split.

    python -m bench.host_throughput [--peer-python PY] [--peer-dir DIR] [--tiny] [--json FILE]

For each case (EnvPool ``Breakout-v5`` with 8 envs, gymnasium ``CartPole-v1`` with 4 envs)
it trains jaxrl (``jaxrl.commands.train`` on ``configs/breakout_envpool.yaml`` or
``configs/cartpole_gymnasium.yaml``, sync and async actors) and, when ``--peer-python`` is
given, CleanRL's ``ppo_atari_envpool.py`` / ``ppo.py`` as a subprocess in its own venv with
the same env count, rollout length and epochs, alternating jaxrl and the peer ``repeats``
times. Training env steps/s:

* jaxrl: env steps of the timed updates over their wall time (the first two updates, which
  compile, are left out), from the run's own per-update ``perf/*`` scalars, with the time
  split: host env steps, policy (jitted act, its transfers in and out), rollout transfer to the
  learner, learner update. In async mode the actor's and learner's times overlap.
* CleanRL: the last ``SPS:`` line it prints (env steps since its start over wall time).

Ratio = jaxrl / CleanRL (median over repeats). CleanRL's scripts are never copied here: the
peer directory holds the files of vwxyzjn/cleanrl as they are (see docs/results/non-jax-envs.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from jaxrl.config import load_config

SPLIT = ("env_s", "policy_s", "transfer_s", "update_s")
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Case:
    """One env measured on both sides."""

    name: str  # label
    config: str  # jaxrl config
    peer_script: str  # CleanRL script in the peer directory
    peer_args: tuple[str, ...]  # its flags (env id, env count, ...)
    updates: int  # jaxrl: timed updates (plus two that compile)
    peer_steps: int  # CleanRL: --total-timesteps


@dataclass(frozen=True)
class JaxrlRun:
    """One jaxrl measurement."""

    mode: str  # sync | async
    sps: float  # training env steps/s over the timed updates
    split: dict  # seconds per update: env_s, policy_s, transfer_s, update_s (means)


def cases(tiny: bool) -> tuple[Case, ...]:
    """Breakout (EnvPool, 8 envs) and CartPole (gymnasium, 4 envs); tiny: seconds each."""
    return (
        Case(
            name="envpool Breakout-v5, 8 envs",
            config="configs/breakout_envpool.yaml",
            peer_script="ppo_atari_envpool.py",
            peer_args=("--env-id", "Breakout-v5", "--num-envs", "8", "--num-steps", "128"),
            updates=1 if tiny else 6,
            peer_steps=1024 * (2 if tiny else 6),
        ),
        Case(
            name="gymnasium CartPole-v1, 4 envs",
            config="configs/cartpole_gymnasium.yaml",
            peer_script="ppo.py",
            peer_args=("--env-id", "CartPole-v1", "--num-envs", "4", "--num-steps", "128"),
            updates=2 if tiny else 60,
            peer_steps=512 * (4 if tiny else 100),
        ),
    )


def run_jaxrl(case: Case, mode: str, overrides: tuple[str, ...] = ()) -> JaxrlRun:
    """Train ``case.updates + 2`` updates in-process; steps/s and split of the timed ones."""
    from jaxrl.run.driver import train  # noqa: PLC0415 - after argument parsing

    base = load_config(case.config)
    total = (case.updates + 2) * base.batch_size
    config = load_config(
        case.config,
        [
            f"train.total_steps={total}",
            f"env.host_mode={mode}",
            "checkpoint.every_updates=0",
            "train.progress_bar=false",
            *overrides,
        ],
    )
    with tempfile.TemporaryDirectory() as run_dir:
        result = train(config, run_dir, quiet=True)
    rows = result.history[2:]
    wall = sum(config.batch_size / row["perf/sps"] for row in rows)
    split = {name: statistics.fmean(row[f"perf/{name}"] for row in rows) for name in SPLIT}
    return JaxrlRun(mode=mode, sps=len(rows) * config.batch_size / wall, split=split)


def run_peer(case: Case, python: str, peer_dir: Path, threads: int, timeout: float) -> float:
    """CleanRL's steps/s: the last ``SPS:`` line of its script (run in its own venv) with
    ``threads`` OpenMP threads for torch (on a loaded 2-core machine torch's default spins)."""
    command = [
        python,
        str(peer_dir / case.peer_script),
        *case.peer_args,
        "--total-timesteps",
        str(case.peer_steps),
        "--seed",
        "1",
    ]
    with tempfile.TemporaryDirectory() as cwd:  # its runs/ folder goes there
        done = subprocess.run(
            command,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "OMP_NUM_THREADS": str(threads)},
        )
    found = re.findall(r"^SPS: (\d+)", done.stdout, re.MULTILINE)
    if done.returncode != 0 or not found:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise RuntimeError(f"peer {case.peer_script} failed ({done.returncode}): {tail}")
    return float(found[-1])


def measure(
    case: Case,
    peer_python: str | None,
    peer_dir: Path,
    repeats: int,
    modes: tuple[str, ...],
    overrides: tuple[str, ...] = (),
    peer_threads: tuple[int, ...] = (1,),
) -> dict:
    """Alternate jaxrl (each mode) and the peer (each thread count) ``repeats`` times; medians,
    and the ratio against the peer's best thread count."""
    runs: dict[str, list[JaxrlRun]] = {mode: [] for mode in modes}
    peer: dict[int, list[float]] = {n: [] for n in peer_threads}
    for i in range(repeats):
        for mode in modes:
            run = run_jaxrl(case, mode, overrides)
            runs[mode].append(run)
            log(f"[{case.name}] jaxrl {mode} #{i}: {run.sps:,.0f} env steps/s, split {run.split}")
        for threads in peer_threads if peer_python else ():
            peer[threads].append(run_peer(case, peer_python, peer_dir, threads, timeout=1800))
            log(f"[{case.name}] CleanRL {threads} thr #{i}: {peer[threads][-1]:,.0f} env steps/s")
    result: dict = {"case": case.name, "config": case.config, "jaxrl": {}}
    for mode, mode_runs in runs.items():
        best = statistics.median(r.sps for r in mode_runs)
        split = {k: statistics.fmean(r.split[k] for r in mode_runs) for k in SPLIT}
        result["jaxrl"][mode] = {
            "sps": best,
            "split_s": split,
            "runs": [asdict(r) for r in mode_runs],
        }
    if peer_python:
        medians = {n: statistics.median(v) for n, v in peer.items()}
        best = max(medians, key=medians.get)
        result["cleanrl"] = {"sps": medians[best], "threads": best, "runs": peer}
        result["ratio"] = {
            mode: result["jaxrl"][mode]["sps"] / result["cleanrl"]["sps"] for mode in modes
        }
    return result


def log(text: str) -> None:
    """Progress on stderr."""
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def report(results: list[dict]) -> str:
    """The table printed at the end."""
    lines = []
    for r in results:
        for mode, j in r["jaxrl"].items():
            split = ", ".join(f"{k[:-2]} {v * 1e3:,.0f} ms" for k, v in j["split_s"].items())
            ratio = f", ratio {r['ratio'][mode]:.2f}x CleanRL" if "ratio" in r else ""
            lines.append(
                f"{r['case']}: jaxrl {mode} {j['sps']:,.0f} env steps/s{ratio} "
                f"(per update: {split})"
            )
        if "cleanrl" in r:
            runs = "; ".join(
                f"{n} thr: " + ", ".join(f"{v:,.0f}" for v in vs)
                for n, vs in r["cleanrl"]["runs"].items()
            )
            lines.append(
                f"{r['case']}: CleanRL {r['cleanrl']['sps']:,.0f} env steps/s "
                f"(best: OMP_NUM_THREADS={r['cleanrl']['threads']}; runs {runs})"
            )
    return "\n".join(lines)


def run(
    tiny: bool,
    peer_python: str | None,
    peer_dir: str = "/work/peers/cleanrl",
    repeats: int = 2,
    modes: tuple[str, ...] = ("sync", "async"),
) -> list[dict]:
    """Both cases (``bench.throughput --only host`` calls this); tiny: one repeat."""
    return [
        measure(c, peer_python, Path(peer_dir), 1 if tiny else repeats, modes) for c in cases(tiny)
    ]


def ratios(results: list[dict]) -> dict[str, float]:
    """``{host/<case>/<mode> jaxrl/CleanRL: ratio}`` for bench.throughput's summary."""
    return {
        f"host/{r['case']}/{mode} jaxrl/CleanRL": value
        for r in results
        for mode, value in r.get("ratio", {}).items()
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: measure, print the table, optionally write JSON."""
    p = argparse.ArgumentParser(prog="python -m bench.host_throughput", description=__doc__)
    p.add_argument("--peer-python", help="python of CleanRL's venv (torch, envpool, gym)")
    p.add_argument(
        "--peer-dir", default="/work/peers/cleanrl", help="folder with CleanRL's scripts"
    )
    p.add_argument("--tiny", action="store_true", help="seconds: checks the instrument")
    p.add_argument("--repeats", type=int, default=2, help="alternating repeats (default 2)")
    p.add_argument("--only", choices=("atari", "cartpole"), help="one case only")
    p.add_argument("--modes", default="sync,async", help="jaxrl actor modes, comma-separated")
    p.add_argument(
        "--peer-threads", default="1,2", help="OMP_NUM_THREADS values for the peer (best wins)"
    )
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("override", nargs="*", help="jaxrl config overrides (section.key=value)")
    args = p.parse_args(argv)
    chosen = cases(args.tiny)
    if args.only:
        chosen = chosen[:1] if args.only == "atari" else chosen[1:]
    modes = tuple(args.modes.split(","))
    results = [
        measure(
            c,
            args.peer_python,
            Path(args.peer_dir),
            args.repeats,
            modes,
            tuple(args.override),
            tuple(int(n) for n in args.peer_threads.split(",")),
        )
        for c in chosen
    ]
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
