"""Figures from a run's TensorBoard event files, as a PNG.

    python -m jaxrl.plot --run-dir DIR [DIR ...] [--tags rollout/episode_return,...]
        [--labels A,B,...] [--group] [--out FILE.png]
    python -m jaxrl.plot --run-dir DIR --figure schedule [--tags METRIC] [--out FILE.png]
    python -m jaxrl.plot --run-dir DIR --figure rewards [--out FILE.png]

- ``curves`` (the default): each run directory is one curve per tag, against env steps
  (TensorBoard's step). A run of several members (``train.num_seeds``, ``sweep``) gives one
  curve per sweep point: the mean over its seeds, with the min-max spread shaded. ``--group``
  does the same across the run directories given (seeds trained as separate runs). A
  curriculum run shades its stages (from ``curriculum/stage``), named from its config.
- ``schedule``: a population-based training run (``pbt:``): every member's metric (the first
  of ``--tags``) and each hyperparameter that differs between members (``hyper/<key>``) as
  one line per member, with every PBT copy marked where it happened (a dot on the child's
  line, labelled with the parent it copied) and each PBT event a dotted vertical line.
- ``rewards``: the reward breakdown of an env that reports ``info["reward_terms"]``: each
  term's per-episode sum (``rollout/reward/<term>``) stacked over training, positive terms
  up and negative ones down, one panel per member (a sweep point's seeds averaged).
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

from jaxrl.commands.cli import HelpFormatter, prog

DEFAULT_TAGS = ("rollout/episode_return",)
STAGE_TAG = "curriculum/stage"
FIGURES = ("curves", "schedule", "rewards")
HYPER_PREFIX = "hyper/"  # a member's hyperparameter values (PBT runs)
REPLACED_TAG = "pbt/replaced"  # copies a member received during a chunk
PARENT_TAG = "pbt/parent"  # the member it last copied
EVENTS_TAG = "pbt/events"  # PBT events during a chunk (the same for every member)
REWARD_PREFIX = "rollout/reward/"  # per-episode sums of each reward term
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
    plt = _pyplot()
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


# ---- PBT schedules ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Schedule:
    """What the schedule figure of a PBT run shows."""

    metric: str  # the ranking metric drawn in the top panel
    members: dict[str, dict[str, Series]]  # member name -> {tag: Series}
    hyper_tags: tuple[str, ...]  # hyper/<key> tags that differ between members or over time
    copies: dict[str, list[tuple[int, int]]]  # member -> [(env step, parent index)], in order
    events: np.ndarray  # [E] env steps of the chunks in which PBT fired


def schedule_of(run_dir: Path, metric: str) -> Schedule:
    """The members' metric, hyperparameters and PBT copies of a PBT run."""
    members = {m: read_scalars(p) for m, p in event_dirs(run_dir).items()}
    if len(members) < 2 or not all(REPLACED_TAG in series for series in members.values()):
        raise PlotError(
            f"--figure schedule: {run_dir} is not a PBT run (its members log no {REPLACED_TAG})"
        )
    for member, series in members.items():
        _require_tag(metric, series, run_dir / member)
    first = next(iter(members.values()))
    hyper_tags = tuple(
        tag
        for tag in sorted(first)
        if tag.startswith(HYPER_PREFIX)
        and len({v for series in members.values() for v in series[tag].values.tolist()}) > 1
    )
    copies = {}
    for member, series in members.items():
        replaced, parents = series[REPLACED_TAG], series[PARENT_TAG]
        copies[member] = [
            (int(step), int(np.interp(step, parents.steps, parents.values)))
            for step, count in zip(replaced.steps, replaced.values, strict=True)
            if count > 0
        ]
    events = first.get(EVENTS_TAG)
    steps = events.steps[events.values > 0] if events is not None else np.zeros(0, np.int64)
    return Schedule(
        metric=metric, members=members, hyper_tags=hyper_tags, copies=copies, events=steps
    )


def draw_schedule(schedule: Schedule, out: Path) -> None:
    """The metric, then one panel per hyperparameter; a line per member, copies marked."""
    plt = _pyplot()
    tags = (schedule.metric, *schedule.hyper_tags)
    fig, axes = plt.subplots(
        len(tags), 1, figsize=(9, 2.6 * len(tags) + 0.6), sharex=True, squeeze=False
    )
    colors = plt.get_cmap("tab10" if len(schedule.members) <= 10 else "tab20")
    for i, (member, series) in enumerate(schedule.members.items()):
        color = colors(i % colors.N)
        for ax, tag in zip(axes[:, 0], tags, strict=True):
            line = series[tag]
            if tag == schedule.metric:
                ax.plot(line.steps, line.values, color=color, lw=1.3, label=f"{i}: {member}")
            else:  # a value logged at a chunk's end held since the chunk began
                ax.step(line.steps, line.values, where="pre", color=color, lw=1.3)
            for step, parent in schedule.copies[member]:
                value = np.interp(step, line.steps, line.values)
                ax.plot([step], [value], "o", color=color, ms=5, mec="black", mew=0.6)
                if tag == schedule.metric:
                    ax.annotate(f"<-{parent}", (step, value), fontsize=6, xytext=(3, 3),
                                textcoords="offset points")  # fmt: skip
    for ax, tag in zip(axes[:, 0], tags, strict=True):
        for step in schedule.events:
            ax.axvline(step, color="grey", ls=":", lw=0.8)
        values = np.concatenate([s[tag].values for s in schedule.members.values()])
        if tag != schedule.metric and values.min() > 0 and values.max() / values.min() > 20:
            ax.set_yscale("log")
        ax.set_ylabel(tag.removeprefix(HYPER_PREFIX), fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="best", ncol=2)
    axes[0, 0].set_title(
        "PBT: dots mark a member copying another (<-parent); dotted lines, PBT events",
        fontsize=9,
    )
    axes[-1, 0].set_xlabel("env steps")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


# ---- reward breakdown ------------------------------------------------------------------


def reward_breakdown(run_dir: Path) -> dict[str, dict[str, Curve]]:
    """``{panel: {term: curve}}``: each reward term's per-episode sum, one panel per member
    (a sweep point's seeds averaged into one)."""
    members = {m: read_scalars(p) for m, p in event_dirs(run_dir).items()}
    terms = sorted(
        tag.removeprefix(REWARD_PREFIX)
        for tag in next(iter(members.values()))
        if tag.startswith(REWARD_PREFIX)
    )
    if not terms:
        raise PlotError(
            f"--figure rewards: {run_dir} logs no {REWARD_PREFIX}<term> (its env reports no "
            "info['reward_terms'])"
        )
    points: dict[str, list[dict[str, Series]]] = {}
    for member, series in members.items():
        points.setdefault(point_of(member) or run_dir.name, []).append(series)
    return {
        point: {
            term: combine(term, [_require_tag(REWARD_PREFIX + term, s, run_dir) for s in runs])
            for term in terms
        }
        for point, runs in points.items()
    }


_POINT_PART = re.compile(r"-(?=[A-Za-z_][\w.]*=)")  # the dash before each ``key=`` of a point


def panel_title(point: str, width: int = 48) -> str:
    """A sweep point's name (``touch=0.5-vel_to_ball=0``) as ``key=value`` parts joined by
    ``", "`` and wrapped at whole parts into lines of about ``width`` characters."""
    lines: list[str] = []
    for part in _POINT_PART.split(point):
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += ", " + part
        else:
            lines.append(part)
    return "\n".join(lines)


def draw_rewards(breakdown: dict[str, dict[str, Curve]], out: Path) -> None:
    """One panel per member: the terms stacked (positive up, negative down), their sum a line."""
    plt = _pyplot()
    count = len(breakdown)
    columns = min(count, 3)
    rows = -(-count // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(4.6 * columns, 3.5 * rows + 0.8), squeeze=False, sharey=True
    )
    terms = list(next(iter(breakdown.values())))
    colors = plt.get_cmap("tab10" if len(terms) <= 10 else "tab20")
    for ax, (point, curves) in zip(axes.flat, breakdown.items(), strict=False):
        steps = curves[terms[0]].steps
        up = np.zeros(len(steps))
        down = np.zeros(len(steps))
        for i, term in enumerate(terms):
            mean = np.interp(steps, curves[term].steps, curves[term].mean)
            positive, negative = np.maximum(mean, 0.0), np.minimum(mean, 0.0)
            color = colors(i % colors.N)
            ax.fill_between(steps, up, up + positive, color=color, lw=0, label=term)
            ax.fill_between(steps, down + negative, down, color=color, lw=0)
            up, down = up + positive, down + negative
        ax.plot(steps, up + down, color="black", lw=1.2, label="sum")
        ax.axhline(0.0, color="black", lw=0.5)
        ax.set_title(panel_title(point), fontsize=8)
        ax.grid(alpha=0.3)
        ax.set_xlabel("env steps")
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    axes[0, 0].set_ylabel("reward per episode")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _pyplot():
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def build_parser() -> argparse.ArgumentParser:
    """Command line of ``python -m jaxrl.plot``."""
    parser = argparse.ArgumentParser(
        prog=prog("jaxrl.commands.plot"),
        description=__doc__.split("\n")[0],
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--run-dir", nargs="+", required=True, help="run directories")
    parser.add_argument(
        "--tags",
        default=",".join(DEFAULT_TAGS),
        help="comma-separated TensorBoard tags, one subplot each",
    )
    parser.add_argument("--labels", help="comma-separated curve labels, one per run directory")
    parser.add_argument(
        "--group", action="store_true", help="one mean curve over all run directories"
    )
    parser.add_argument(
        "--figure",
        choices=FIGURES,
        default="curves",
        help="curves, schedule (a PBT run: members, hyperparameters, copies) or "
        "rewards (each reward term stacked, one panel per member)",
    )
    parser.add_argument("--out", default="curves.png", help="PNG path")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m jaxrl.plot``."""
    args = build_parser().parse_args(argv)
    try:
        out = Path(args.out)
        if not out.parent.is_dir():
            raise PlotError(f"--out: directory {out.parent} does not exist")
        tags = [t.strip() for t in args.tags.split(",") if t.strip()]
        if not tags:
            raise PlotError("--tags: give at least one tag")
        labels = [x.strip() for x in args.labels.split(",")] if args.labels else None
        run_dirs = [Path(d) for d in args.run_dir]
        if args.figure != "curves" and len(run_dirs) != 1:
            raise PlotError(f"--figure {args.figure}: give one --run-dir, got {len(run_dirs)}")
        if args.figure == "schedule":
            draw_schedule(schedule_of(run_dirs[0], tags[0]), out)
        elif args.figure == "rewards":
            draw_rewards(reward_breakdown(run_dirs[0]), out)
        else:
            curves, stages, names = curves_for(run_dirs, tags, labels, args.group)
            draw(curves, out, stages, names)
    except PlotError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
