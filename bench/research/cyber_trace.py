"""Where two CAGE2 runs part, step by step: real CybORG's trace against jaxrl's.

    python -m bench.research.cyber_trace CYBORG.npz JAXRL.npz [--z 4.5] [--top 20] [--json FILE]

Both files are per-step traces in ``bench.research.cyber_peer.TRACE_FIELDS``'s format, one from
``bench/research/cyber_peer.py --trace`` (a Blue in real CybORG), one from
``python -m bench.research.cyber_breakdown --trace`` (the same Blue in jaxrl's CAGE2), each
``[episodes, steps]``. Every step's record is turned into series, per episode and step: the
reward; Red's action (kind and target, and whether it succeeded), the exploit it chose, B_line's
stage; Red's hold on each host (a shell, root/SYSTEM); Blue's action; each host's table row
(``cyber_peer.TABLE_STATES``). For each series and step index it compares the two means (a
two-proportion z for indicators, Welch's for the reward) and reports:

- the first step index where some series differs by at least ``--z`` standard errors, with
  every series that does there (20k tests for 100 steps and ~200 series: at 4.5 SE, about 0.1
  false alarms expected without a real difference);
- the ``--top`` largest differences at any step;
- the ``--top`` largest differences in per-episode totals (steps in a state, actions taken),
  which say where a score gap accumulates.

Exits 0 with the report, 1 with one line on unreadable or mismatched traces.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from jaxrl.envs.cyber.tables import action_name

from .cyber_peer import (
    EXPLOITS,
    HOSTS,
    RED_ACTIONS,
    SUBNETS,
    TABLE_STATES,
    TRACE_FIELDS,
    table_states,
)


@dataclasses.dataclass(frozen=True)
class Divergence:
    """One series' means in both traces at one step (``step`` -1: per-episode totals)."""

    series: str
    step: int
    a: float  # mean in the first trace (CybORG's)
    b: float  # mean in the second (jaxrl's)
    z: float  # (a - b) in standard errors


def load(path: str | Path) -> dict[str, np.ndarray]:
    """A trace's arrays, checked against ``TRACE_FIELDS``.

    Raises:
      ValueError: a field is missing or its shape is not ``[episodes, steps, ...]``.
    """
    with np.load(path) as data:
        trace = {name: np.asarray(data[name]) for name in data.files}
    missing = set(TRACE_FIELDS) - set(trace)
    if missing:
        raise ValueError(f"{path}: no {sorted(missing)} (not a cyber_peer trace)")
    lead = trace["reward"].shape
    for name, (_, shape) in TRACE_FIELDS.items():
        if trace[name].shape != (*lead, *shape):
            raise ValueError(f"{path}: {name} has shape {trace[name].shape}, not {(*lead, *shape)}")
    return trace


def _red_label(kind: int, target: int) -> str:
    name = RED_ACTIONS[kind] if 0 <= kind < len(RED_ACTIONS) else "Other"
    if target < 0:
        return name
    where = SUBNETS[target] if name == "DiscoverRemoteSystems" else HOSTS[target]
    return f"{name} {where}"


def series(trace: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The trace as named series, each float32 ``[episodes, steps]`` (indicators are 0/1)."""
    out = {"reward": trace["reward"].astype(np.float32)}
    kind, target, ok = trace["red_kind"], trace["red_target"], trace["red_success"]
    for k, t in sorted(set(zip(kind.ravel().tolist(), target.ravel().tolist(), strict=True))):
        label = _red_label(k, t)
        at = (kind == k) & (target == t)
        out[f"red {label}"] = at
        out[f"red {label} succeeded"] = at & ok
    exploit = trace["red_exploit"]
    for e in np.unique(exploit[exploit >= 0]).tolist():
        out[f"red exploit {EXPLOITS[e]}"] = exploit == e
    stage = trace["red_stage"]
    for s in np.unique(stage[stage >= 0]).tolist():
        out[f"red B_line stage {s}"] = stage == s
    for h, host in enumerate(HOSTS):
        out[f"access {host} shell"] = trace["red_access"][..., h] >= 1
        out[f"access {host} root"] = trace["red_access"][..., h] == 2
    for a in np.unique(trace["blue_action"]).tolist():
        out[f"blue {action_name(a)}"] = trace["blue_action"] == a
    states = table_states(trace["table"])  # [episodes, steps, 13, 5]
    for s, state in enumerate(TABLE_STATES):
        for h, host in enumerate(HOSTS):
            out[f"table {host} {state}"] = states[..., h, s]
    return {name: np.asarray(v, np.float32) for name, v in out.items()}


def z_scores(a: np.ndarray, b: np.ndarray, indicator: bool) -> np.ndarray:
    """``(mean a - mean b) / SE`` over the first axis of ``a`` [n, ...] and ``b`` [m, ...].

    Indicators take the pooled two-proportion SE (defined when one side never shows the
    state); other series Welch's. Where the SE is 0: 0 for equal means, else +-inf.
    """
    n, m = len(a), len(b)
    diff = a.mean(0, dtype=np.float64) - b.mean(0, dtype=np.float64)
    if indicator:
        p = (a.sum(0, dtype=np.float64) + b.sum(0, dtype=np.float64)) / (n + m)
        se = np.sqrt(p * (1 - p) * (1 / n + 1 / m))
    else:
        se = np.sqrt(
            a.var(0, ddof=1, dtype=np.float64) / n + b.var(0, ddof=1, dtype=np.float64) / m
        )
    # A difference with no spread on either side (a deterministic step) is infinitely sure.
    sure = np.where(diff == 0, 0.0, np.copysign(np.inf, diff))
    return np.divide(diff, se, out=sure, where=se > 0)


def _welch(a: np.ndarray, b: np.ndarray) -> float:
    return float(z_scores(a[:, None], b[:, None], indicator=False)[0])


def compare(
    a: dict[str, np.ndarray], b: dict[str, np.ndarray]
) -> tuple[list[Divergence], list[Divergence]]:
    """Per step and per episode total, every series of traces ``a`` and ``b`` compared.

    Returns:
      ``(steps, totals)``: one :class:`Divergence` per (series, step) and per series.

    Raises:
      ValueError: the traces have different numbers of steps.
    """
    if a["reward"].shape[1] != b["reward"].shape[1]:
        raise ValueError(f"the traces have {a['reward'].shape[1]} and {b['reward'].shape[1]} steps")
    sa, sb = series(a), series(b)
    steps, totals = [], []
    for name in sorted(set(sa) | set(sb)):
        x = sa.get(name, np.zeros_like(a["reward"], np.float32))
        y = sb.get(name, np.zeros_like(b["reward"], np.float32))
        z = z_scores(x, y, indicator=name != "reward")
        mx, my = x.mean(0), y.mean(0)
        steps += [
            Divergence(name, t, float(mx[t]), float(my[t]), float(z[t])) for t in range(len(z))
        ]
        tx, ty = x.sum(1), y.sum(1)
        totals.append(Divergence(name, -1, float(tx.mean()), float(ty.mean()), _welch(tx, ty)))
    return steps, totals


def first_divergence(steps: list[Divergence], threshold: float) -> list[Divergence]:
    """The series at or beyond ``threshold`` SE at the earliest step where any is; [] if none."""
    over = [d for d in steps if abs(d.z) >= threshold]
    if not over:
        return []
    first = min(d.step for d in over)
    return sorted((d for d in over if d.step == first), key=lambda d: -abs(d.z))


def report(
    steps: list[Divergence],
    totals: list[Divergence],
    threshold: float,
    top: int,
    names: tuple[str, str],
) -> str:
    """The comparison as text (see the module docstring)."""
    a, b = names

    def row(d: Divergence) -> str:
        where = "total" if d.step < 0 else f"step {d.step}"
        return f"  {where}: {d.series}: {a} {d.a:.4f} vs {b} {d.b:.4f} (z {d.z:+.1f})"

    first = first_divergence(steps, threshold)
    rewards = [d for d in steps if d.series == "reward"]
    gap = np.cumsum([d.a - d.b for d in rewards])
    marks = [t for t in (9, 29, 49, 99) if t < len(gap)]
    lines = [
        f"{a} - {b}, cumulative reward gap after "
        + ", ".join(f"{t + 1} steps {gap[t]:+.3f}" for t in marks),
        "",
        f"first step with a series at |z| >= {threshold}:"
        + ("" if first else f" none in {len(rewards)} steps"),
        *map(row, first),
        "",
        f"largest {top} per-step differences:",
        *map(row, sorted(steps, key=lambda d: -abs(d.z))[:top]),
        "",
        f"largest {top} differences in per-episode totals:",
        *map(row, sorted(totals, key=lambda d: -abs(d.z))[:top]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.research.cyber_trace``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.research.cyber_trace",
        description="Where two CAGE2 traces (CybORG's, jaxrl's) part, step by step.",
    )
    parser.add_argument(
        "a", type=Path, help="the first trace (bench/research/cyber_peer.py --trace)"
    )
    parser.add_argument(
        "b", type=Path, help="the second (python -m bench.research.cyber_breakdown --trace)"
    )
    parser.add_argument("--z", type=float, default=4.5, help="divergence threshold in SE")
    parser.add_argument("--top", type=int, default=20, help="rows in each largest-first list")
    parser.add_argument("--names", default="cyborg,jaxrl", help="labels of the two traces")
    parser.add_argument("--json", type=Path, help="also write every comparison to this file")
    args = parser.parse_args(argv)
    names = tuple(args.names.split(","))
    try:
        if len(names) != 2:
            raise ValueError(f"--names takes two labels, got {args.names!r}")
        steps, totals = compare(load(args.a), load(args.b))
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(report(steps, totals, args.z, args.top, names))
    if args.json:
        rows = [dataclasses.asdict(d) for d in steps + totals]
        args.json.write_text(json.dumps({"names": names, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
