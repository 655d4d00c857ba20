"""The population league against single runs of the shipped soccer league, at equal wall time.

    python -m bench.league_population --out DIR [--runs 4] [--hour 3600] [--games 256]
        [--exploit-steps 20000000] [--dud-below 0.05] [--arms single,population] [--tiny]

Two arms, ``--runs`` runs each, every run alone on the machine for ``--hour`` seconds of
wall time (``timeout -s INT``: the run saves and stops):

- ``single``: ``configs/soccer_selfplay.yaml`` with ``seed=0..runs-1``;
- ``population``: ``configs/soccer_league_population.yaml`` (4 members that play each other,
  PBT on the league's Elo) with ``seed=0..runs-1``.

Then each run's final agent (a single run's last checkpoint; a population's member
ranked first by PBT, taken out with :mod:`jaxrl.commands.extract`) is measured:

- one :mod:`jaxrl.commands.tournament` of every final agent and the RulePolicy at 1v1, 2v2 and 3v3
  (``--games`` matches per pair and size): Elo and win rate against the RulePolicy;
- a dud: a final agent that wins under ``--dud-below`` of its 2v2 matches against the
  RulePolicy;
- :mod:`jaxrl.commands.exploit` at 2v2 against each final agent (``--exploit-steps`` env steps from
  the agent's own weights): the best response's win fraction.

Every step is resumable: a run's wall time so far is kept in ``RUN/bench.json`` and an
interrupted run goes on with ``--resume`` for what is left of its hour; finished steps are
skipped. The tournament and the exploits start once every run of both arms has trained. The
whole measurement is about ``2 x runs`` hours of training plus the exploits, more than one
session, so run the same command again until the report is complete; it
prints the table so far (``DIR/report.md``). ``--tiny`` checks the plumbing in minutes
(small envs and networks, seconds per run): not a measurement.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ARMS = {
    "single": "configs/soccer_selfplay.yaml",
    "population": "configs/soccer_league_population.yaml",
}
SIZES = (1, 2, 3)
EXPLOIT_SIZE = 2
# --tiny: the plumbing in minutes (each config's shape kept: curriculum, league, PBT).
TINY = (
    "env.num_envs=8",
    "ppo.num_steps=16",
    "ppo.num_minibatches=2",
    "network.hidden_sizes=[16]",
    "train.updates_per_chunk=2",
    "checkpoint.every_updates=2",
    "train.progress_bar=false",
    "evaluation.every_updates=4",
)
TINY_POPULATION = ("pbt.every_updates=4", "pbt.burn_in_updates=4")


@dataclass(frozen=True)
class Plan:
    """What to measure and where."""

    out: Path  # every run, the tournament and the report
    runs: int  # runs per arm
    hour: float  # wall seconds per run
    games: int  # tournament matches per pair and team size
    exploit_steps: int  # env steps of each best response
    dud_below: float  # a final agent under this 2v2 win rate vs the RulePolicy is a dud
    tiny: bool  # plumbing check
    arms: tuple[str, ...] = tuple(ARMS)  # the arms to train now (a session may do one)

    def run_dir(self, arm: str, seed: int) -> Path:
        """Where run ``seed`` of ``arm`` trains."""
        return self.out / f"{arm}_s{seed}"

    def agent_dir(self, arm: str, seed: int) -> Path:
        """The run directory of the run's final agent (a population's best member)."""
        run = self.run_dir(arm, seed)
        return run.with_name(run.name + "_best") if arm == "population" else run


def log(text: str) -> None:
    """Progress on stderr."""
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def _call(args: list[str], timeout: float | None = None) -> int:
    command = ["timeout", "-k", "60", "-s", "INT", str(int(timeout))] if timeout else []
    command += [sys.executable, "-m", *args]
    log(" ".join(command))
    return subprocess.run(command, check=False).returncode


def _state(run: Path) -> dict:
    path = run / "bench.json"
    return json.loads(path.read_text()) if path.is_file() else {"seconds": 0.0, "done": False}


def train_run(plan: Plan, arm: str, seed: int) -> None:
    """Train (or go on with) one run until its hour is spent or it finishes."""
    run = plan.run_dir(arm, seed)
    state = _state(run)
    left = plan.hour - state["seconds"]
    if state["done"] or left < 30:
        return
    overrides = [*TINY, *(TINY_POPULATION if arm == "population" else ())] if plan.tiny else []
    if (run / "checkpoints").is_dir() and any((run / "checkpoints").iterdir()):
        args = ["jaxrl.train", "--resume", str(run)]
    else:
        args = [
            "jaxrl.train",
            "--config",
            ARMS[arm],
            f"seed={seed}",
            "--run-dir",
            str(run),
        ]
        args += ["--overwrite", *overrides]
    t0 = time.monotonic()
    status = _call(args, timeout=left)
    state["seconds"] += time.monotonic() - t0
    state["done"] = status == 0 or state["seconds"] >= plan.hour - 30
    run.mkdir(parents=True, exist_ok=True)
    (run / "bench.json").write_text(json.dumps(state) + "\n")
    log(f"{run.name}: {state['seconds']:.0f} s of {plan.hour:.0f} (exit {status})")


def extract_best(plan: Plan, seed: int) -> None:
    """A population run's best member (PBT's first) as a run of its own."""
    agent = plan.agent_dir("population", seed)
    if not agent.is_dir():
        run = str(plan.run_dir("population", seed))
        _call(["jaxrl.extract", "--run-dir", run, "--member", "best", "--out", str(agent)])


def agents(plan: Plan) -> dict[str, Path]:
    """``{label: run directory}`` of every final agent that exists so far."""
    found = {}
    for arm in ARMS:
        for seed in range(plan.runs):
            path = plan.agent_dir(arm, seed)
            if (path / "checkpoints").is_dir():
                found[f"{arm}_s{seed}"] = path
    return found


def tournament(plan: Plan, found: dict[str, Path]) -> dict | None:
    """Every final agent and the RulePolicy at each size (cached by the tournament)."""
    path = plan.out / "tournament.json"
    if len(found) < 2 * plan.runs:
        return None
    if not path.is_file():
        args = ["jaxrl.tournament", "--players", "latest,rule", "--games", str(plan.games)]
        args += ["--team-sizes", ",".join(map(str, SIZES)), "--json", str(path)]
        for run in found.values():
            args += ["--run-dir", str(run)]
        _call(args)
    return json.loads(path.read_text()) if path.is_file() else None


def exploit(plan: Plan, agent: Path) -> float | None:
    """The 2v2 best response's win fraction against ``agent`` (trained once, then cached)."""
    path = agent / f"exploit_{EXPLOIT_SIZE}v{EXPLOIT_SIZE}.json"
    if not path.is_file():
        args = ["jaxrl.exploit", "--run-dir", str(agent), "--team-size", str(EXPLOIT_SIZE)]
        args += ["--budget", str(plan.exploit_steps), "--json"]
        args += ["--games", str(plan.games), "--out", str(agent / "exploit")]
        log(" ".join(args))
        done = subprocess.run(
            [sys.executable, "-m", *args], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            log(f"exploit of {agent} failed: {done.stderr.strip().splitlines()[-1:]}")
            return None
        path.write_text(done.stdout)
    return json.loads(path.read_text())["exploitability"][str(EXPLOIT_SIZE)]


def table(plan: Plan, found: dict[str, Path], ratings: dict | None, exploits: dict) -> str:
    """The report: one row per final agent, then each arm's duds and means."""
    elo = {}
    for row in (ratings or {}).get("ratings", []):
        label = next((k for k, p in found.items() if row["player"].startswith(p.name + "/")), None)
        if label is not None:
            elo[(label, row["team_size"])] = row
    head = "| agent | Elo 1v1 / 2v2 / 3v3 | vs RulePolicy win 1v1 / 2v2 / 3v3 | dud | exploit 2v2 |"
    lines = [head, "| --- | --- | --- | --- | --- |"]
    for label in found:
        rows = [elo.get((label, size)) for size in SIZES]
        elos = " / ".join(f"{r['elo']:.0f}" if r else "-" for r in rows)
        wins = " / ".join(f"{r['vs_rule']['win']:.3f}" if r else "-" for r in rows)
        two = rows[SIZES.index(EXPLOIT_SIZE)]
        dud = "-" if two is None else ("yes" if two["vs_rule"]["win"] < plan.dud_below else "no")
        ex = exploits.get(label)
        ex_text = "-" if ex is None else f"{ex:.3f}"
        lines.append(f"| {label} | {elos} | {wins} | {dud} | {ex_text} |")
    return "\n".join(lines) + "\n"


def _progress(plan: Plan) -> str:
    """Each run's training so far (wall seconds of its hour)."""
    lines = ["", "| run | trained (s) | done |", "| --- | --- | --- |"]
    for arm in ARMS:
        for seed in range(plan.runs):
            state = _state(plan.run_dir(arm, seed))
            lines.append(f"| {arm}_s{seed} | {state['seconds']:.0f} | {state['done']} |")
    return "\n".join(lines) + "\n"


def measure(plan: Plan) -> str:
    """Every step not done yet, in order; the report so far."""
    plan.out.mkdir(parents=True, exist_ok=True)
    for arm in plan.arms:  # each arm's runs one after another: alone on the machine
        for seed in range(plan.runs):
            train_run(plan, arm, seed)
    for seed in range(plan.runs):
        if _state(plan.run_dir("population", seed))["done"]:
            extract_best(plan, seed)
    found = agents(plan)
    trained = all(
        _state(plan.run_dir(arm, seed))["done"] for arm in ARMS for seed in range(plan.runs)
    )
    ratings = tournament(plan, found) if trained else None  # every final agent at once
    exploits = {label: exploit(plan, path) for label, path in found.items()} if ratings else {}
    report = table(plan, found, ratings, exploits) + _progress(plan)
    (plan.out / "report.md").write_text(report)
    return report


def build_parser() -> argparse.ArgumentParser:
    """Command line of ``python -m bench.league_population``."""
    p = argparse.ArgumentParser(
        prog="python -m bench.league_population",
        description="Population league against single soccer league runs, equal wall time.",
    )
    p.add_argument("--out", required=True, help="directory of the runs and the report")
    p.add_argument("--runs", type=int, default=4, help="runs per arm (default 4)")
    p.add_argument("--hour", type=float, default=3600, help="wall seconds per run (default 3600)")
    p.add_argument("--games", type=int, default=256, help="matches per pair and size (default 256)")
    p.add_argument(
        "--exploit-steps",
        type=int,
        default=20_000_000,
        help="env steps of each 2v2 best response (default 20000000)",
    )
    p.add_argument(
        "--dud-below",
        type=float,
        default=0.05,
        help="2v2 win rate vs the RulePolicy under which a final agent is a dud (default 0.05)",
    )
    p.add_argument(
        "--arms",
        default=",".join(ARMS),
        help="comma-separated arms to train now: single, population (default: both)",
    )
    p.add_argument("--tiny", action="store_true", help="plumbing check in minutes, no measurement")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = build_parser().parse_args(argv)
    plan = Plan(
        out=Path(args.out),
        runs=args.runs,
        hour=args.hour,
        games=args.games,
        exploit_steps=args.exploit_steps,
        dud_below=args.dud_below,
        tiny=args.tiny,
        arms=tuple(args.arms.split(",")),
    )
    unknown = sorted(set(plan.arms) - set(ARMS))
    if unknown:
        print(f"error: --arms {unknown[0]}: not one of {', '.join(ARMS)}", file=sys.stderr)
        return 2
    print(measure(plan), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
