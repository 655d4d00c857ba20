"""Figures of a finished or interrupted run, read from its TensorBoard events, as one JSON line.

``python -m bench.research.run_report --run-dir R [--tags perf/sps,selfplay/elo,...] [--json FILE]``

For each tag: the number of points, the last value and its env step, the maximum, and the mean
over the last quarter of the points. With a curriculum, ``perf/sps`` is also given for the
chunks of the last stage reached (the league stage of ``configs/soccer_selfplay.yaml``).
Used by ``bench/gpu_suite.sh`` after a run cut by SIGINT (which saves the chunk in flight).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_TAGS = (
    "perf/sps",
    "rollout/episode_return",
    "curriculum/stage",
    "selfplay/elo",
    "eval/rule_1v1/win",
    "eval/rule_2v2/win",
    "eval/rule_3v3/win",
    "rollout/outcome/hearts",
)


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` of the run's top-level event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


def summarise(series: dict[str, list[tuple[int, float]]], tags) -> dict[str, Any]:
    """The figures of ``tags`` (those present) in ``series``."""
    out: dict[str, Any] = {}
    for tag in tags:
        points = series.get(tag)
        if not points:
            continue
        values = [v for _, v in points]
        tail = values[-max(1, len(values) // 4) :]
        out[tag] = {
            "n": len(values),
            "last": values[-1],
            "last_step": points[-1][0],
            "max": max(values),
            "tail_mean": sum(tail) / len(tail),
        }
    stages = dict(series.get("curriculum/stage", []))
    if stages and "perf/sps" in series:
        last = max(stages.values())
        sps = [v for step, v in series["perf/sps"] if stages.get(step) == last]
        if sps:
            out["perf/sps@last_stage"] = {"stage": last, "n": len(sps), "mean": sum(sps) / len(sps)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.research.run_report", description=__doc__
    )
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--tags", default=",".join(DEFAULT_TAGS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not args.run_dir.is_dir():
        print(f"run directory {args.run_dir} does not exist", file=sys.stderr)
        return 2
    report = summarise(scalars(args.run_dir), [t for t in args.tags.split(",") if t])
    line = json.dumps({"run_dir": str(args.run_dir), **report})
    print(line)
    if args.json:
        args.json.write_text(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
