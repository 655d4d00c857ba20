"""Training curves from a run's TensorBoard event files, as a PNG.

    python -m jaxrl.plot --run-dir DIR [DIR ...] [--tags rollout/episode_return,...]
        [--labels A,B,...] [--group] [--out FILE.png]

- Each run directory is one curve per tag, against env steps (TensorBoard's step). A run of
  several members (``train.num_seeds``, ``sweep``) gives one curve per sweep point: the mean
  over its seeds, with the min-max spread shaded. ``--group`` does the same across the run
  directories given (seeds trained as separate runs).
- A curriculum run shades its stages (from ``curriculum/stage``), named from its config.
- Bad input (a missing run directory, a directory with no events, an unknown tag) ends with
  one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

DEFAULT_TAGS = ("rollout/episode_return",)
STAGE_TAG = "curriculum/stage"
_SEED_SUFFIX = re.compile(r"(^|-)seed\d+$")


class PlotError(ValueError):
    """Bad input: reported as one line, exit status 2."""


@dataclasses.dataclass(frozen=True)
class Series:
    """One scalar tag of one TensorBoard run."""

    steps: np.ndarray  # [N] int64 env steps (TensorBoard's step)
    values: np.ndarray  # [N] float64


@dataclasses.dataclass(frozen=True)
class Curve:
    """What one line of a plot shows: the mean over ``count`` runs and their spread."""

    label: str
    steps: np.ndarray  # [N]
    mean: np.ndarray  # [N]
    low: np.ndarray  # [N] min over runs
    high: np.ndarray  # [N] max over runs
    count: int  # runs behind the line


def event_dirs(run_dir: Path) -> dict[str, Path]:
    """``{member: directory}`` of a run: ``{"": run_dir}``, or one entry per member dir."""
    if not run_dir.is_dir():
        raise PlotError(f"--run-dir {run_dir}: no such directory")
    if any(run_dir.glob("events.out.tfevents.*")):
        return {"": run_dir}
    members = {d.name: d for d in sorted(run_dir.iterdir()) if any(d.glob("events.out.tfevents.*"))}
    if not members:
        raise PlotError(f"--run-dir {run_dir}: no TensorBoard event files in it")
    return members


def read_scalars(directory: Path) -> dict[str, Series]:
    """Every scalar tag of the event files in ``directory`` (the last value per step)."""
    from tensorboard.backend.event_processing import event_accumulator  # noqa: PLC0415

    acc = event_accumulator.EventAccumulator(str(directory), size_guidance={"scalars": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["scalars"]:
        by_step = {e.step: e.value for e in acc.Scalars(tag)}  # a resumed run may repeat steps
        steps = np.array(sorted(by_step), dtype=np.int64)
        out[tag] = Series(steps, np.array([by_step[s] for s in steps], dtype=np.float64))
    return out


def combine(label: str, runs: Sequence[Series]) -> Curve:
    """Mean and min-max of ``runs`` on the steps of the first, within the common range."""
    steps = runs[0].steps
    end = min(r.steps[-1] for r in runs)
    start = max(r.steps[0] for r in runs)
    steps = steps[(steps >= start) & (steps <= end)]
    stacked = np.stack([np.interp(steps, r.steps, r.values) for r in runs])
    return Curve(
        label=label,
        steps=steps,
        mean=stacked.mean(axis=0),
        low=stacked.min(axis=0),
        high=stacked.max(axis=0),
        count=len(runs),
    )


def point_of(member: str) -> str:
    """The sweep point of a member name: ``lr=0.001-seed3`` -> ``lr=0.001``, ``seed3`` -> ``""``."""
    return _SEED_SUFFIX.sub("", member)


def stage_names(run_dir: Path) -> list[str]:
    """Curriculum stage names from the run's ``config.yaml`` (empty without a curriculum)."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        return []
    config = yaml.safe_load(path.read_text()) or {}
    stages = (config.get("curriculum") or {}).get("stages") or []
    return [str(s.get("name") or f"stage {i}") for i, s in enumerate(stages)]


def _require_tag(tag: str, series: dict[str, Series], where: Path) -> Series:
    if tag not in series:
        known = ", ".join(sorted(t for t in series if not t.startswith("perf/")))
        raise PlotError(f"unknown tag {tag!r} in {where}; it has: {known}")
    return series[tag]


def curves_for(
    run_dirs: Sequence[Path], tags: Sequence[str], labels: Sequence[str] | None, group: bool
) -> tuple[dict[str, list[Curve]], Series | None, list[str]]:
    """``({tag: curves}, stage series of the first curriculum run, its stage names)``."""
    if labels is not None and len(labels) != (1 if group else len(run_dirs)):
        want = 1 if group else len(run_dirs)
        raise PlotError(f"--labels: {len(labels)} labels for {want} curve(s)")
    read = [(d, {m: read_scalars(p) for m, p in event_dirs(d).items()}) for d in run_dirs]
    stages, names = None, []
    for run_dir, members in read:
        first = next(iter(members.values()))
        if STAGE_TAG in first:
            stages, names = first[STAGE_TAG], stage_names(run_dir)
            break
    out: dict[str, list[Curve]] = {}
    for tag in tags:
        curves = []
        if group:
            runs = [
                _require_tag(tag, series, run_dir / member)
                for run_dir, members in read
                for member, series in members.items()
            ]
            label = labels[0] if labels else f"mean of {len(runs)} runs"
            curves.append(combine(label, runs))
        else:
            for i, (run_dir, members) in enumerate(read):
                points: dict[str, list[Series]] = {}
                for member, series in members.items():
                    points.setdefault(point_of(member), []).append(
                        _require_tag(tag, series, run_dir / member)
                    )
                base = labels[i] if labels else run_dir.name
                for point, runs in points.items():
                    label = f"{base} {point}".strip()
                    if len(runs) > 1:
                        label += f" (mean of {len(runs)} seeds)"
                    curves.append(combine(label, runs))
        out[tag] = curves
    return out, stages, names


def draw(
    curves: dict[str, list[Curve]],
    out: Path,
    stages: Series | None = None,
    stage_labels: Sequence[str] = (),
) -> None:
    """One subplot per tag: mean lines, min-max bands, curriculum stages shaded."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(len(curves), 1, figsize=(8, 3.2 * len(curves)), squeeze=False)
    for ax, (tag, lines) in zip(axes[:, 0], curves.items(), strict=True):
        if stages is not None:
            _shade_stages(ax, stages, stage_labels)
        for curve in lines:
            (line,) = ax.plot(curve.steps, curve.mean, label=curve.label, lw=1.6)
            if curve.count > 1:
                ax.fill_between(
                    curve.steps, curve.low, curve.high, color=line.get_color(), alpha=0.2, lw=0
                )
        ax.set_ylabel(tag)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    axes[-1, 0].set_xlabel("env steps")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _shade_stages(ax, stages: Series, names: Sequence[str]) -> None:
    values = stages.values.astype(int)
    starts = [0] + [i for i in range(1, len(values)) if values[i] != values[i - 1]]
    for n, i in enumerate(starts):
        left = stages.steps[i - 1] if i else 0
        right = stages.steps[starts[n + 1] - 1] if n + 1 < len(starts) else stages.steps[-1]
        stage = values[i]
        ax.axvspan(left, right, color="grey" if stage % 2 else "white", alpha=0.12, lw=0)
        name = names[stage] if stage < len(names) else f"stage {stage}"
        ax.text(
            (left + right) / 2,
            1.0,
            name,
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize=7,
            color="dimgrey",
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m jaxrl.plot``."""
    parser = argparse.ArgumentParser(
        prog="python -m jaxrl.plot", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--run-dir", nargs="+", required=True, help="run directories")
    parser.add_argument(
        "--tags",
        default=",".join(DEFAULT_TAGS),
        help="comma-separated TensorBoard tags, one subplot each (default %(default)s)",
    )
    parser.add_argument("--labels", help="comma-separated curve labels, one per run directory")
    parser.add_argument(
        "--group", action="store_true", help="one mean curve over all run directories"
    )
    parser.add_argument("--out", default="curves.png", help="PNG path (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        out = Path(args.out)
        if not out.parent.is_dir():
            raise PlotError(f"--out: directory {out.parent} does not exist")
        tags = [t.strip() for t in args.tags.split(",") if t.strip()]
        if not tags:
            raise PlotError("--tags: give at least one tag")
        labels = [x.strip() for x in args.labels.split(",")] if args.labels else None
        curves, stages, names = curves_for(
            [Path(d) for d in args.run_dir], tags, labels, args.group
        )
        draw(curves, out, stages, names)
    except PlotError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
