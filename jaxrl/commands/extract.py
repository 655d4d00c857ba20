"""One member of a population run as a run of its own: to evaluate, render, play in a
tournament or exploit like any single-member run.

    python -m jaxrl.extract --run-dir R [--member best|NAME|INDEX] [--step S ...]
        [--out DIR] [--overwrite]

A run of several members (``train.num_seeds``, ``sweep:``, PBT, the population league)
saves every member's policy in one checkpoint; :mod:`jaxrl.commands.tournament` and
:mod:`jaxrl.commands.exploit` play single-member runs. This command writes ``--out`` (default
``R/members/<name>``) with

- ``config.yaml``: the source's config for one member: ``train.num_seeds: 1``, the member's
  seed, its sweep point's values, PBT off and ``selfplay.cross_member: 0``; where PBT ran,
  the member's explored values at the last extracted step (learning rate, loss
  coefficients, env parameters such as reward weights) replace the config's;
- ``checkpoints/<step>/``: the member's policy (params and normaliser) at each extracted
  step (default: every saved step), with the source's ``meta`` item;
- ``member.json``: the source run, the member, the steps, and how it was chosen.

``--member best`` (the default) takes the member PBT ranks first at the last extracted step
(its ``pbt.metric``, smoothed as PBT smooths it: for the population league the curriculum
stage, then the league's rating, then the stage's metric), or without PBT the highest rating
of the population league; in a run with neither, name the member (``seed2``, or its
index). The extracted run holds policies only: ``--resume`` refuses it in one line (resume
the source run). Bad input is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.commands.cli import HelpFormatter, prog
from jaxrl.config import ConfigError, load_run_config
from jaxrl.config.loader import config_from_dict, save_config, set_path
from jaxrl.core.hyper import Hyper, get_value
from jaxrl.features.pbt import PBT, Smoothed, member_scores, ranking
from jaxrl.league.population import LEAGUE
from jaxrl.run.checkpoint import Checkpointer, CheckpointError, error_line
from jaxrl.run.play import HostRunError, members_policy_like, refuse_host
from jaxrl.run.run_dir import MEMBER_FILE
from jaxrl.run.setup import Setup, make_setup


class UsageError(Exception):
    """Bad input: one line, exit status 2."""


@dataclass(frozen=True)
class Extracted:
    """What :func:`extract` wrote."""

    out: Path  # the new run directory
    member: str  # the member's name in the source run (seed2, lr=0.001-seed0, ...)
    index: int  # its index in the source run
    steps: tuple[int, ...]  # the checkpoints written (update steps)
    chosen_by: str  # "named", or the league ratings that made it the best
    hyper: dict[str, float]  # the member's explored values written to config.yaml (PBT)


def _open(run_dir: Path) -> tuple[Setup, Checkpointer]:
    if not (run_dir / "config.yaml").is_file():
        raise UsageError(f"--run-dir {run_dir}: not a run directory (no config.yaml)")
    try:
        refuse_host(run_dir, "it has one member, nothing to extract")
    except HostRunError as err:
        raise UsageError(f"--run-dir {err}") from None
    setup = make_setup(load_run_config(run_dir))
    if setup.members.count == 1:
        raise UsageError(f"--run-dir {run_dir}: a run of one member; nothing to extract")
    return setup, Checkpointer(run_dir, create=False)


def _steps(checkpointer: Checkpointer, wanted: list[int] | None) -> list[int]:
    saved = checkpointer.steps()
    if not saved:
        raise UsageError(f"no checkpoints in {checkpointer.directory}")
    missing = sorted(set(wanted or ()) - set(saved))
    if missing:
        raise UsageError(f"--step {missing[0]}: no such checkpoint; saved steps: {saved}")
    return sorted(set(wanted)) if wanted else saved


def _choose(setup: Setup, checkpointer: Checkpointer, member: str, step: int) -> tuple[int, str]:
    """The member's index and how it was chosen."""
    names = setup.members.names
    if member != "best":
        if member in names:
            return names.index(member), "named"
        if member.isdigit() and int(member) < len(names):
            return int(member), "named"
        raise UsageError(f"--member {member}: no such member; the run's: {', '.join(names)}")
    features = {feature.name: feature for feature in setup.population_features}
    if PBT in features:  # PBT's own ranking (its pbt.metric, smoothed) at that step
        spec = features[PBT].spec
        saved = checkpointer.restore_saved(PBT, step)["smoothed"]
        scores = member_scores(spec, Smoothed(**saved))
        best = int(np.asarray(ranking(jnp.asarray(scores), jnp.ones(len(names), bool)))[0])
        tags = ", ".join(spec.metric_tags)
        table = "; ".join(
            f"{n} {' / '.join(f'{v:.4g}' for v in row)}"
            for n, row in zip(names, scores, strict=True)
        )
        return best, f"ranked first by PBT at update {step} on {tags}: {table}"
    if LEAGUE in features:
        ratings = np.asarray(checkpointer.restore_saved(LEAGUE, step)["ratings"], np.float64)
        best = int(np.argmax(ratings))
        table = ", ".join(f"{n} {r:.0f}" for n, r in zip(names, ratings, strict=True))
        return best, f"best league rating at update {step} ({table})"
    raise UsageError(
        "--member best needs PBT's ranking or the population league's ratings; "
        f"name a member: {', '.join(names)}"
    )


def _member_hyper(setup: Setup, checkpointer: Checkpointer, index: int, step: int) -> dict:
    """``{config key: value}`` of what PBT explored, the member's values at ``step``."""
    if not setup.config.pbt.enabled:
        return {}
    hyper = Hyper(**checkpointer.restore_saved("state", step)["hyper"])
    return {
        key: float(np.asarray(get_value(hyper, key))[index])
        for key in setup.config.pbt.hyperparameters
    }


def member_config(setup: Setup, index: int, hyper: dict[str, float]):
    """The source config for member ``index`` alone (one seed, no sweep, PBT and the
    population league off), with ``hyper``'s values."""
    data = setup.config.to_dict()
    data["seed"] = int(setup.members.seeds[index])
    data["train"]["num_seeds"] = 1
    data["sweep"] = {}
    data.pop("pbt", None)  # the defaults: off
    data["selfplay"]["cross_member"] = 0.0
    for key, value in {**setup.members.points[index], **hyper}.items():
        set_path(data, key, value)
    return config_from_dict(data)


def extract(
    run_dir: str | Path,
    member: str = "best",
    steps: list[int] | None = None,
    out: str | Path | None = None,
    overwrite: bool = False,
) -> Extracted:
    """Write member ``member`` of the population run ``run_dir`` as a run of its own.

    Raises:
      UsageError: not a population run, an unknown member or step, ``best`` without a
        league, or ``out`` taken (without ``overwrite``).
      CheckpointError: a checkpoint that does not restore.
    """
    run_dir = Path(run_dir)
    setup, source = _open(run_dir)
    try:
        chosen_steps = _steps(source, steps)
        index, chosen_by = _choose(setup, source, member, chosen_steps[-1])
        name = setup.members.names[index]
        target = Path(out) if out else run_dir / "members" / name
        if target.exists():
            if not overwrite:
                raise UsageError(f"--out {target} exists; choose another or pass --overwrite")
            shutil.rmtree(target)
        hyper = _member_hyper(setup, source, index, chosen_steps[-1])
        config = member_config(setup, index, hyper)
        target.mkdir(parents=True)
        save_config(config, target / "config.yaml", (f"member {name} of {run_dir.resolve()}",))
        like = members_policy_like(setup)
        sink = Checkpointer(target, keep=len(chosen_steps))
        try:
            for step in chosen_steps:
                policy, _ = source.restore_policy(like, step)
                own = jax.tree.map(lambda x: np.asarray(x)[index], policy)
                sink.save_policy(own, {**source.meta(step), "member": name}, step)
        finally:
            sink.close()
    finally:
        source.close()
    result = Extracted(target, name, index, tuple(chosen_steps), chosen_by, hyper)
    record = {"source": str(run_dir.resolve()), **dataclasses.asdict(result)}
    record.pop("out")
    (target / MEMBER_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return result


def build_parser() -> argparse.ArgumentParser:
    """Command line of ``python -m jaxrl.extract``."""
    parser = argparse.ArgumentParser(
        prog=prog("jaxrl.commands.extract"),
        description="Write one member of a population run as a run of its own.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--run-dir", required=True, help="a run of several members")
    parser.add_argument(
        "--member",
        default="best",
        help="best (PBT's first, else the top league rating), a member's name (seed2) or its index",
    )
    parser.add_argument(
        "--step",
        type=int,
        action="append",
        help="a checkpoint to extract, repeatable (default: every saved step)",
    )
    parser.add_argument("--out", help="the new run directory (default: RUN_DIR/members/NAME)")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m jaxrl.extract``."""
    args = build_parser().parse_args(argv)
    try:
        result = extract(args.run_dir, args.member, args.step, args.out, args.overwrite)
    except (UsageError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except CheckpointError as err:
        line, status = error_line(err, "--step")
        print(f"error: {line}", file=sys.stderr)
        return status
    hyper = ", ".join(f"{k}={v:.4g}" for k, v in result.hyper.items())
    print(
        f"member {result.member} ({result.chosen_by}) -> {result.out}: "
        f"{len(result.steps)} checkpoints (updates {result.steps[0]}..{result.steps[-1]})"
        + (f"; PBT values: {hyper}" if hyper else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
