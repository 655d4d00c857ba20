"""Round-robin tournaments between checkpoints and scripted players, rated by Elo.

    python -m jaxrl.tournament --run-dir DIR [--run-dir DIR2 ...]
        [--players latest,all,UPDATE,...,rule,random] [--team-sizes 1,2,3] [--games N]
        [--seed S] [--actions sample|greedy] [--json FILE] [--plot FILE.png]

Players: ``latest`` (each run's newest checkpoint), ``all`` (every checkpoint of each run),
an update step ``UPDATE`` (that checkpoint of each run holding it), and the env's scripted
policies (``rule``, ``random``, ``idle``). Every pair of players plays ``--games`` matches
per team size, half with each player on team 0, all pairs of a batch vmapped in one
compiled function that plays through the shared match step (:mod:`jaxrl.core.match`). Network
players sample their actions from their policy, as they trained and as the league's in-graph
games play (``--actions greedy``: the mode of each policy).

Ratings are a maximum-likelihood Elo fit (Bradley-Terry, a draw is half a win) per team
size, anchored at ``rule`` = 1500, with 95% bootstrap intervals (:mod:`jaxrl.core.elo`).

Results are cached in ``RUN_DIR/tournament.json`` of the first run: pairs already played
(same players, team size, games, seed, env settings and action mode) are not replayed, so
a new checkpoint plays only its own games.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.commands.cli import HelpFormatter, prog
from jaxrl.config import ConfigError, load_run_config
from jaxrl.core.acting import PolicyParams
from jaxrl.core.elo import bootstrap_elo, fit_elo
from jaxrl.core.layout import OpponentGroups
from jaxrl.core.match import NETWORK, MatchPlan, MatchRecord
from jaxrl.core.opponents import OpponentPlan
from jaxrl.envs import protocols
from jaxrl.run import play
from jaxrl.run.checkpoint import Checkpointer, CheckpointError, error_line
from jaxrl.run.play import (
    add_actions_flag,
    eval_layout,
    eval_spec,
    greedy,
    play_first_episodes,
    policy_like,
)
from jaxrl.run.setup import Setup, make_setup

ANCHOR = "rule"
ANCHOR_ELO = 1500.0
PAIR_BATCH = 16  # pairs per compiled call (padded): one compile serves every batch
CACHE_NAME = "tournament.json"
RESULTS = ("win", "draw", "loss")


class UsageError(Exception):
    """Bad command-line input: one line, exit status 2."""


@dataclasses.dataclass(frozen=True)
class Player:
    """A tournament participant: a checkpoint or a scripted policy of the env."""

    name: str  # shown in tables and JSON: RUN/STEP, or rule, random, idle
    ident: str  # stable identity for the cache
    kind: int  # NETWORK, or the env's scripted kind
    run: str | None = None  # run directory name (checkpoints)
    step: int | None = None  # update step (checkpoints)
    env_steps: int | None = None  # env steps at the checkpoint


@dataclasses.dataclass(frozen=True)
class Rating:
    """One player's rating at one team size."""

    player: str
    team_size: int
    elo: float
    ci: tuple[float, float]
    games: int
    vs_rule: dict[str, float]  # win/draw/loss fractions against the anchor
    step: int | None = None
    env_steps: int | None = None


# ----------------------------------------------------------------------------- players


def _network_signature(setup: Setup) -> tuple:
    config = setup.config
    return (
        config.env.name,
        dataclasses.astuple(config.network),
        config.env.normalize_obs,
        setup.obs_shape,
        setup.compute_dtype.name,
    )


def _open_runs(run_dirs: list[str]) -> list[tuple[Setup, Path, Checkpointer, list[int]]]:
    """Setup, path, checkpointer and saved steps of every run."""
    if not run_dirs:
        raise UsageError("give at least one --run-dir")
    runs = []
    for run_dir in run_dirs:
        path = Path(run_dir)
        if not (path / "config.yaml").is_file():
            raise UsageError(f"--run-dir {run_dir}: not a run directory (no config.yaml)")
        try:
            play.refuse_host(path, "the tournament plays two-team JAX envs")
            setup = make_setup(load_run_config(path))
            checkpointer = Checkpointer(path, create=False)
        except (ConfigError, CheckpointError, play.HostRunError) as err:
            raise UsageError(f"--run-dir {err}" if isinstance(err, play.HostRunError) else
                             f"--run-dir {run_dir}: {err}") from None  # fmt: skip
        if setup.members.count > 1:
            raise UsageError(
                f"--run-dir {run_dir}: a run of {setup.members.count} members (seeds or sweep "
                "points); the tournament plays single-member runs"
            )
        steps = checkpointer.steps()
        if not steps:
            raise UsageError(f"--run-dir {run_dir}: no checkpoints in {checkpointer.directory}")
        runs.append((setup, path, checkpointer, steps))
    setup = runs[0][0]
    if not setup.layout.two_team:
        raise UsageError(f"{setup.config.env.name} is not a two-team env: nothing to play")
    for other, path, _, _ in runs[1:]:
        if _network_signature(other) != _network_signature(setup):
            raise UsageError(
                f"--run-dir {path}: incompatible networks (env, network or normalisation "
                f"differ from {run_dirs[0]})"
            )
    return runs


def _select(runs, selectors: list[str], kinds: dict) -> dict[str, tuple[Path, int] | str]:
    """Player name -> (run path, step) or a scripted kind's name."""
    chosen: dict[str, tuple[Path, int] | str] = {}
    for selector in selectors:
        if selector in kinds:
            chosen[selector] = selector
            continue
        if selector in ("latest", "all"):
            for _, path, _, steps in runs:
                for step in steps if selector == "all" else steps[-1:]:
                    chosen[f"{path.name}/{step}"] = (path, step)
            continue
        try:
            step = int(selector)
        except ValueError:
            raise UsageError(
                f"--players: unknown player {selector!r} (latest, all, an update step, or "
                f"{', '.join(kinds)})"
            ) from None
        found = [path for _, path, _, steps in runs if step in steps]
        if not found:
            names = ", ".join(str(path) for _, path, _, _ in runs)
            raise UsageError(f"--players: no checkpoint at update {step} in {names}")
        for path in found:
            chosen[f"{path.name}/{step}"] = (path, step)
    if len(chosen) < 2:
        raise UsageError("--players: a tournament needs at least two players")
    return chosen


def load_players(
    run_dirs: list[str], selectors: list[str]
) -> tuple[Setup, list[Player], PolicyParams]:
    """The players and their stacked policies ``[P, ...]`` (scripted players: dummy params).

    Raises:
      UsageError: an unknown selector or step, a run without checkpoints, incompatible
        networks or an env without two teams.
    """
    runs = _open_runs(run_dirs)
    setup = runs[0][0]
    kinds = protocols.scripted_kinds(setup.env)  # _open_runs: a two-team env; "rule" the anchor
    chosen = _select(runs, selectors, kinds)
    like = policy_like(setup)
    managers = {path: checkpointer for _, path, checkpointer, _ in runs}
    players, policies = [], []
    try:
        for name, source in sorted(chosen.items(), key=lambda item: _order(item[1])):
            if isinstance(source, str):
                players.append(Player(name=name, ident=name, kind=int(kinds[name])))
                policies.append(like)
                continue
            path, step = source
            try:
                policy, _ = managers[path].restore_policy(like, step)
                meta = managers[path].meta(step)
            except CheckpointError as err:
                raise UsageError(error_line(err, "--players")[0]) from None
            players.append(
                Player(
                    name=name if len(runs) > 1 else str(step),
                    ident=f"{path.resolve()}:{step}",
                    kind=NETWORK,
                    run=path.name,
                    step=step,
                    env_steps=int(meta.get("env_steps", 0)),
                )
            )
            policies.append(policy)
    finally:
        for checkpointer in managers.values():
            checkpointer.close()
    return setup, players, jax.tree.map(lambda *xs: jnp.stack(xs), *policies)


def _order(source) -> tuple:
    if isinstance(source, str):
        return (1, source, 0)
    path, step = source
    return (0, str(path), step)


# ----------------------------------------------------------------------------- play


def play_pair(
    setup: Setup,
    games: int,
    deterministic: bool,
    policies: PolicyParams,
    kinds: jax.Array,
    first: jax.Array,
    second: jax.Array,
    env_params: Any,
    key: jax.Array,
) -> jax.Array:
    """``games`` matches of player ``first`` against ``second``; float32 [3] W/D/L of first.

    The first ``games // 2`` envs have ``first`` on team 0, the rest on team 1. ``first``
    acts as the match step's learner (its network, or its scripted kind), ``second`` as a
    one-lane pool (or its scripted kind); each env's first match counts.
    """
    layout = dataclasses.replace(
        eval_layout(setup, games), opponents=OpponentGroups(lanes=1, lane_envs=games, start_entry=1)
    )
    spec = eval_spec(setup, layout, deterministic)
    mine = jax.tree.map(lambda x: x[first], policies)
    theirs = jax.tree.map(lambda x: jnp.stack([x[second], x[second]]), policies)
    plan = MatchPlan(
        env_params=env_params,
        opponent_kind=jnp.full((games,), kinds[second], jnp.int32),
        random_side=jnp.zeros((games,), bool),
        opponents=OpponentPlan(params=theirs, probs=jnp.asarray([0.5, 0.5], jnp.float32)),
        learner_kind=jnp.full((games,), kinds[first], jnp.int32),
        side=(jnp.arange(games) >= games // 2).astype(jnp.int32),
    )

    def fold(result: jax.Array, record: MatchRecord, finished: jax.Array) -> jax.Array:
        outcome = jnp.stack([record.outcome[name] for name in RESULTS], -1)  # [games, 3]
        return result + jnp.where(finished[:, None], outcome, 0.0).sum(0)

    result = jnp.zeros((len(RESULTS),), jnp.float32)
    return play_first_episodes(spec, setup.network.initial_hidden, mine, plan, key, result, fold)


def make_play_batch(setup: Setup, games: int, deterministic: bool):
    """Jitted ``(policies, kinds, first [B], second [B], env_params, keys [B]) -> [B, 3]``."""

    def play_batch(policies, kinds, first, second, env_params, keys):
        return jax.vmap(
            lambda a, b, k: play_pair(
                setup, games, deterministic, policies, kinds, a, b, env_params, k
            )
        )(first, second, keys)

    return jax.jit(play_batch)


def pair_key(seed: int, first: Player, second: Player, team_size: int) -> jax.Array:
    """A key of its own for every pairing: results do not depend on how pairs are batched."""
    key = jax.random.key(seed)
    for part in (first.ident, second.ident, str(team_size)):
        key = jax.random.fold_in(key, zlib.crc32(part.encode()) & 0x7FFFFFFF)
    return key


def with_team_size(setup: Setup, size: int) -> Any:
    """The first run's env params with ``size`` cars a side."""
    try:
        return play.with_team_size(setup, setup.env_params, size, flag="--team-sizes")
    except ValueError as err:
        raise UsageError(str(err)) from None


# ----------------------------------------------------------------------------- cache


def settings_hash(setup: Setup, games: int, seed: int, deterministic: bool) -> str:
    """What a cached result depends on besides the two players and the team size."""
    text = json.dumps(
        {
            "env": setup.config.env.name,
            "kwargs": setup.config.env.kwargs,
            "games": games,
            "seed": seed,
            "deterministic": deterministic,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_key(first: Player, second: Player, size: int, settings: str) -> str:
    """One pairing at one team size under one set of settings."""
    return f"{first.ident}|{second.ident}|{size}|{settings}"


def read_cache(path: Path) -> dict[str, list[float]]:
    """Cached results ``{key: [W, D, L]}`` (empty if missing or unreadable)."""
    try:
        data = json.loads(path.read_text())
        return {k: [float(x) for x in v] for k, v in data.get("results", {}).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def write_cache(path: Path, results: dict[str, list[float]]) -> None:
    """Write atomically (a temporary file, then a rename)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": 1, "results": results}, indent=0, sort_keys=True))
    tmp.replace(path)


# ----------------------------------------------------------------------------- run


def play_all(
    setup: Setup,
    players: list[Player],
    policies: PolicyParams,
    team_sizes: list[int],
    games: int,
    seed: int,
    deterministic: bool,
    cache_path: Path,
    log=print,
    wanted: Callable[[int, int, int], bool] | None = None,
) -> dict[tuple[int, int, int], np.ndarray]:
    """``{(i, j, size): [W, D, L] of i against j}`` for every pair ``i < j`` and size.

    ``wanted(i, j, size)``: only the pairings it accepts are played (default: all).
    """
    settings = settings_hash(setup, games, seed, deterministic)
    cache = read_cache(cache_path)
    kinds = jnp.asarray([p.kind for p in players], jnp.int32)
    play = None
    results: dict[tuple[int, int, int], np.ndarray] = {}
    for size in team_sizes:
        env_params = with_team_size(setup, size)
        todo = []
        pairings = [
            (i, j)
            for i in range(len(players))
            for j in range(i + 1, len(players))
            if wanted is None or wanted(i, j, size)
        ]
        for i, j in pairings:
            key = cache_key(players[i], players[j], size, settings)
            if key in cache:
                results[i, j, size] = np.asarray(cache[key])
            else:
                todo.append((i, j))
        log(f"{size}v{size}: {len(todo)} pairings to play, {len(pairings) - len(todo)} cached")
        for start in range(0, len(todo), PAIR_BATCH):
            batch = todo[start : start + PAIR_BATCH]
            padded = batch + [batch[0]] * (PAIR_BATCH - len(batch))
            first = jnp.asarray([i for i, _ in padded], jnp.int32)
            second = jnp.asarray([j for _, j in padded], jnp.int32)
            keys = jnp.stack([pair_key(seed, players[i], players[j], size) for i, j in padded])
            if play is None:
                play = make_play_batch(setup, games, deterministic)
            out = np.asarray(jax.device_get(play(policies, kinds, first, second, env_params, keys)))
            for (i, j), wdl in zip(batch, out[: len(batch)], strict=True):
                results[i, j, size] = wdl
                cache[cache_key(players[i], players[j], size, settings)] = [float(x) for x in wdl]
            write_cache(cache_path, cache)
    return results


def rate(
    players: list[Player],
    results: dict[tuple[int, int, int], np.ndarray],
    team_sizes: list[int],
    samples: int,
    seed: int,
) -> list[Rating]:
    """Elo per team size, anchored at ``rule`` = 1500, with bootstrap intervals."""
    anchor = [p.name for p in players].index(ANCHOR)
    ratings = []
    count = len(players)
    for size in team_sizes:
        wins = np.zeros((count, count))
        draws = np.zeros((count, count))
        for (i, j, s), (won, drew, lost) in results.items():
            if s != size:
                continue
            wins[i, j] += won
            wins[j, i] += lost
            draws[i, j] += drew
            draws[j, i] += drew
        elo = fit_elo(wins, draws, anchor, ANCHOR_ELO)
        ci = bootstrap_elo(wins, draws, anchor, samples=samples, seed=seed, anchor_elo=ANCHOR_ELO)
        games = wins.sum(1) + wins.sum(0) + draws.sum(1)
        for i, player in enumerate(players):
            played = wins[i, anchor] + wins[anchor, i] + draws[i, anchor]
            vs_rule = {
                "win": float(wins[i, anchor] / played) if played else float("nan"),
                "draw": float(draws[i, anchor] / played) if played else float("nan"),
                "loss": float(wins[anchor, i] / played) if played else float("nan"),
            }
            ratings.append(
                Rating(
                    player=player.name,
                    team_size=size,
                    elo=float(elo[i]),
                    ci=(float(ci[i, 0]), float(ci[i, 1])),
                    games=int(games[i]),
                    vs_rule=vs_rule,
                    step=player.step,
                    env_steps=player.env_steps,
                )
            )
    return ratings


def table(ratings: list[Rating]) -> str:
    """A plain-text table: player, team size, Elo and interval, W/D/L against rule, games."""
    header = (
        f"{'player':<24} {'size':>4} {'elo':>7} {'95% interval':>17} "
        f"{'vs rule W/D/L':>17} {'games':>6}"
    )
    lines = [header, "-" * len(header)]
    for r in ratings:
        wdl = "/".join(f"{r.vs_rule[k]:.2f}" for k in RESULTS) if r.player != ANCHOR else "-"
        lines.append(
            f"{r.player:<24} {r.team_size:>4} {r.elo:>7.0f} "
            f"{f'[{r.ci[0]:.0f}, {r.ci[1]:.0f}]':>17} {wdl:>17} {r.games:>6}"
        )
    return "\n".join(lines)


def to_json(ratings: list[Rating]) -> dict[str, Any]:
    """The ``--json`` document."""
    return {
        "anchor": ANCHOR,
        "ratings": [
            {
                "player": r.player,
                "team_size": r.team_size,
                "elo": r.elo,
                "ci": list(r.ci),
                "games": r.games,
                "vs_rule": r.vs_rule,
                "update": r.step,
                "env_steps": r.env_steps,
            }
            for r in ratings
        ],
    }


def plot(ratings: list[Rating], path: Path) -> None:
    """Elo against training env steps, one line per run and team size (rule at 1500)."""
    import matplotlib  # noqa: PLC0415 - only for --plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    series: dict[tuple[str, int], list[Rating]] = {}
    for r in ratings:
        if r.step is None:
            continue
        run = r.player.rsplit("/", 1)[0] if "/" in r.player else ""
        series.setdefault((run, r.team_size), []).append(r)
    for (run, size), points in sorted(series.items()):
        points.sort(key=lambda r: r.env_steps or 0)
        x = np.asarray([p.env_steps or 0 for p in points], float) / 1e6
        y = np.asarray([p.elo for p in points])
        lo = np.asarray([p.ci[0] for p in points])
        hi = np.asarray([p.ci[1] for p in points])
        label = f"{run + ' ' if run else ''}{size}v{size}"
        (line,) = ax.plot(x, y, marker="o", ms=3, label=label)
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.15, lw=0)
    ax.axhline(ANCHOR_ELO, color="k", ls="--", lw=1, label="RulePolicy (1500)")
    ax.set_xlabel("training env steps (millions)")
    ax.set_ylabel("Elo (RulePolicy = 1500)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _csv_ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise UsageError(f"expected comma-separated integers, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    """Command line of ``python -m jaxrl.tournament``."""
    parser = argparse.ArgumentParser(
        prog=prog("jaxrl.commands.tournament"),
        description=__doc__.split("\n")[0],
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--run-dir", action="append", default=[], help="a run (repeatable)")
    parser.add_argument(
        "--players",
        default="all,rule,random",
        help="comma-separated: latest, all, update steps, rule, random, idle",
    )
    parser.add_argument("--team-sizes", default="1,2,3", help="comma-separated team sizes")
    parser.add_argument("--games", type=int, default=64, help="matches per pair and team size")
    parser.add_argument("--seed", type=int, default=0, help="tournament seed")
    add_actions_flag(parser)
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap samples")
    parser.add_argument("--json", help="write the ratings as JSON to FILE")
    parser.add_argument("--plot", help="draw Elo against training steps to FILE.png")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit 2 on bad input with a one-line message."""
    args = build_parser().parse_args(argv)
    try:
        if args.games < 1:
            raise UsageError(f"--games must be >= 1, got {args.games}")
        if args.bootstrap < 1:
            raise UsageError(f"--bootstrap must be >= 1, got {args.bootstrap}")
        sizes = _csv_ints(args.team_sizes)
        selectors = [s.strip() for s in args.players.split(",") if s.strip()]
        if ANCHOR not in selectors:
            raise UsageError(f"--players must include {ANCHOR}: the Elo scale is anchored at it")
        for out in (args.json, args.plot):
            if out and not Path(out).resolve().parent.is_dir():
                raise UsageError(f"the directory of {out} does not exist")
        setup, players, policies = load_players(args.run_dir, selectors)
        for size in sizes:
            with_team_size(setup, size)
        cache_path = Path(args.run_dir[0]) / CACHE_NAME
        results = play_all(
            setup,
            players,
            policies,
            sizes,
            args.games,
            args.seed,
            greedy(args.actions),
            cache_path,
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    ratings = rate(players, results, sizes, args.bootstrap, args.seed)
    print(table(ratings))
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(ratings), indent=1))
    if args.plot:
        plot(ratings, Path(args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
