"""CAGE2 fidelity table: scripted Blue baselines vs each Red agent, next to real CybORG's scores.

    python -m bench.research.cyber_fidelity [--episodes N] [--json FILE] [--seed S]
        [--blues B,...] [--table]

Blues: the scripted baselines (``sleep``, ``react_restore``, ``react_decoy``; ``hop_guard``, a
table-reading B_line guard that restores the Enterprise host B_line hops through and keeps its
decoys in place around Red's scans) and the blind mixes
of :data:`jaxrl.envs.cyber.blue.MIXES` (``random``: uniform over the 145 actions; ``remove_mix``,
``decoy_mix``), which exercise Remove, Analyse, decoys and Restore on any host at any time.
Each (Red, Blue) pair plays ``N`` vmapped episodes of 100 steps, once with CybORG 2.1's bugs
(``fix_bugs=False``) and once with CybORG++'s fixes; the 30- and 50-step scores are the same
episodes' returns after 30 and 50 steps (nothing in CAGE-2 depends on the episode length, so a
prefix of a 100-step episode is a 30-step episode). Prints mean +- standard error next to:

- ``cyborg``: the same Blues run in real CybORG by ``bench/research/cyber_peer.py``, committed
  in ``bench/research/cage2_cyborg_reference.json`` with each cell's episode count and seeds
  (500 episodes a scripted cell, seed 7; 200-800 a mix cell): CybORG 2.1 as released
  (cage-challenge/cage-challenge-2 @ 26ce1c1) for ``2.1``, CybORG++'s ``Debugged_CybORG``
  (alan-turing-institute/CAGE_2_Fixed @ f70ca2d) for ``fixed``; and 0 for a Blue that never
  restores against a sleeping Red. These gate the exit.
- ``published``: the official leaderboard's Sleep-vs-B_line row (2.1) and CybORG++'s README
  table (500 episodes, "CAGE 2 Score" column), shown for reference only. CybORG++'s own
  debugged CybORG with its own ``B_lineAgent``/``RedMeanderAgent`` and the README's baselines
  does not reproduce that table (peer run: -102.7 vs -159 for B_line/React-Restore, -983.3 vs
  -1067 for Meander/Sleep), so it cannot gate.

Exits 1 when a cell with a CybORG score falls outside its tolerance, with SE combining ours
and the reference's: ``max(3 * SE, 3% of the reference)`` for the scripted Blues,
``max(1.96 * SE, 5% of the reference)`` (the 95% interval or 5%) for the blind mixes and
``hop_guard`` against B_line and Meander (``ANY_BLUES``), whose references are 200-1000 CybORG
episodes a cell (``MIX_REFERENCE``; hop_guard's 500, 1000 against B_line in 2.1);
a mix against a sleeping Red is held to 3 SE of the exact mean of its restore costs.

``--policies`` also plays trained defenders (``bench/research/cage2_defenders/NAME.npz``, written by
``bench.cyber_export``) through ``bench.research.cyber_peer.PolicyBlue``, the same numpy player that
``cyber_peer.py --blue policy`` runs in real CybORG, against the CybORG scores committed in
``bench/research/cage2_cyborg_policy_reference.json`` (:func:`policy_fidelity`; 95% interval or
5%). A trained defender finds what no scripted or blind Blue exercises: the first such check found
one (a decoy hit where Blue placed a decoy in the same step reads as an Exploit).

``--table`` also compares Blue's table (:func:`table_fidelity`): how often each host's row shows
Scan, Exploit, Unknown, User or Privileged under three blind mixes, against real CybORG's
(``bench/research/cyber_peer.py --table``, committed in
``bench/research/cage2_cyborg_table_reference.json``).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
import zlib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import envs
from jaxrl.envs.cyber import blue as blue_policies
from jaxrl.envs.cyber import red as red_agents
from jaxrl.envs.cyber import tables as tb

from .cyber_peer import (  # numpy only (CybORG: inside its run())
    TABLE_STATES,
    PolicyBlue,
    table_rates,
)

LENGTHS = (30, 50, 100)
REDS = ("B_line", "Meander", "Sleep")
RED_INDEX = {"Sleep": red_agents.SLEEP_AGENT, "B_line": red_agents.BLINE_AGENT,
             "Meander": red_agents.MEANDER_AGENT}  # fmt: skip
SCRIPTED_BLUES = ("sleep", "react_restore", "react_decoy", "hop_guard")
MIX_BLUES = tuple(blue_policies.MIXES)  # random, remove_mix, decoy_mix
BLUES = SCRIPTED_BLUES + MIX_BLUES
# The Blues added for fidelity under any Blue (issue 20), gated at the 95% interval or 5%.
ANY_BLUES = MIX_BLUES + ("hop_guard",)

BUGS = {"2.1": False, "fixed": True}  # label -> EnvParams.fix_bugs

# Real CybORG's scores (bench/research/cyber_peer.py), committed as JSON so that CI, which has
# no CybORG, gates against them: one cell per (bugs, Red, Blue, length) with its mean, standard
# error, episode count and peer seeds (500 episodes at seed 7 for the scripted Blues; 500 for
# B_line/random, 800 for Meander/random (300 at seed 7 pooled with 500 at seed 8: -164.4 and
# -169.6 at 50 steps in 2.1) and 200 for the remove_mix and decoy_mix cells).
REFERENCE_JSON = Path(__file__).with_name("cage2_cyborg_reference.json")

Cell = tuple[str, str, str, int]  # (bugs, red, blue, length)


def load_reference(path: Path = REFERENCE_JSON) -> dict[Cell, tuple[float, float]]:
    """``(bugs, red, blue, length) -> (CybORG mean, its standard error)`` from the JSON file."""
    with open(path) as f:
        cells = json.load(f)["cells"]
    return {(c["bugs"], c["red"], c["blue"], c["steps"]): (c["mean"], c["se"]) for c in cells}


_CYBORG = load_reference()
REFERENCE: dict[Cell, tuple[float, float]] = {
    cell: value for cell, value in _CYBORG.items() if cell[2] in SCRIPTED_BLUES
}
for _bugs in BUGS:  # a Blue that never restores scores 0 against a sleeping Red
    for _blue in SCRIPTED_BLUES:
        for _length in LENGTHS:
            REFERENCE[(_bugs, "Sleep", _blue, _length)] = (0.0, 0.0)

# The blind mixes (bench/research/cyber_peer.py --blue random|remove_mix|decoy_mix) against
# B_line and Meander, from the JSON; against a sleeping Red, the exact mean of their restore costs.
MIX_REFERENCE: dict[Cell, tuple[float, float]] = {
    cell: value for cell, value in _CYBORG.items() if cell[2] in MIX_BLUES
}
for _bugs in BUGS:  # against a sleeping Red a blind mix scores minus its restores, on average
    for _blue in MIX_BLUES:
        for _length in LENGTHS:
            _restores = blue_policies.MIXES[_blue][-1] / sum(blue_policies.MIXES[_blue])
            MIX_REFERENCE[(_bugs, "Sleep", _blue, _length)] = (-_restores * _length, 0.0)
REFERENCE.update(MIX_REFERENCE)

# Published figures, shown next to ours but not gating (see the module docstring).
PUBLISHED: dict[Cell, tuple[float, float]] = {
    ("2.1", "B_line", "sleep", 30): (-218.65, 0.0),  # leaderboard, Sleep Blue
    ("2.1", "B_line", "sleep", 50): (-480.17, 0.0),
    ("2.1", "B_line", "sleep", 100): (-1134.03, 0.0),
    ("fixed", "B_line", "sleep", 100): (-1141.0, 1.0),  # CybORG++ README table
    ("fixed", "B_line", "react_restore", 100): (-159.0, 2.0),
    ("fixed", "B_line", "react_decoy", 100): (-69.0, 2.0),
    ("fixed", "Meander", "sleep", 100): (-1067.0, 2.0),
    ("fixed", "Meander", "react_restore", 100): (-69.0, 2.0),
    ("fixed", "Meander", "react_decoy", 100): (-61.0, 1.0),
}


def _cumulative(rewards: jax.Array) -> jax.Array:
    """Returns after each of LENGTHS steps, float32 [3], from ``rewards`` float32 [100]."""
    cumulative = jnp.cumsum(rewards)
    return jnp.stack([cumulative[n - 1] for n in LENGTHS])


@functools.cache
def _mix_player(num_episodes: int):
    """Jitted ``play(key, red_agent, fix_bugs, weights) -> (returns, tables)``.

    ``returns`` float32 [3, N] after 30, 50 and 100 steps; ``tables`` int8 [N, 100, 52], Blue's
    table after each step. One compile serves every blind mix (``weights`` float32 [6]), Red
    and bug setting, for the scores and the table-state rates alike.
    """
    env, base_params = envs.make("CAGE2", max_steps_in_episode=max(LENGTHS))

    def episode(key, params, weights):
        def act(state, obs, key_act):
            del obs
            return blue_policies.mix_action(weights, key_act), state

        played = blue_policies.play(env, act, key, params, max(LENGTHS))
        return _cumulative(played.reward), played.info["final_observation"].astype(jnp.int8)

    @jax.jit
    def play(key, red_agent, fix_bugs, weights):
        params = base_params.replace(red_agent=red_agent, fix_bugs=fix_bugs)
        keys = jax.random.split(key, num_episodes)
        returns, tables = jax.vmap(episode, in_axes=(0, None, None))(keys, params, weights)
        return returns.T, tables

    return play


@functools.cache
def _player(blue_name: str, num_episodes: int, fix_bugs: bool):
    """Jitted ``play(key, red_agent) -> returns float32 [3, N]`` (after 30, 50, 100 steps)."""
    env, base_params = envs.make("CAGE2", max_steps_in_episode=max(LENGTHS), fix_bugs=fix_bugs)
    act = blue_policies.BASELINES[blue_name]

    def episode(key, params):
        return _cumulative(blue_policies.play(env, act, key, params, max(LENGTHS)).reward)

    @jax.jit
    def play(key, red_agent):
        params = base_params.replace(red_agent=red_agent)
        keys = jax.random.split(key, num_episodes)
        return jax.vmap(episode, in_axes=(0, None))(keys, params).T

    return play


def within(
    mean: float, se: float, ref: float, ref_se: float, z: float = 3.0, rel: float = 0.03
) -> bool:
    """Whether ``mean`` is within ``max(z * combined SE, rel * |ref|)`` of ``ref``."""
    tolerance = max(z * math.hypot(se, ref_se), rel * abs(ref))
    return abs(mean - ref) <= tolerance + 1e-6


def _tolerance(blue_name: str, red_name: str) -> dict[str, float]:
    """``within``'s z and rel: 95% interval or 5% for a Blue of ``ANY_BLUES`` against a Red
    agent, else 3 SE or 3%.

    A mix against a sleeping Red is checked against the exact mean of its restore costs (no
    CybORG sample), so only our own sampling noise counts there: 3 SE, as for the scripted Blues.
    """
    if blue_name in ANY_BLUES and red_name != "Sleep":
        return {"z": 1.96, "rel": 0.05}
    return {"z": 3.0, "rel": 0.03}


def _returns(blue_name: str, num_episodes: int, fix_bugs: bool, key, red_name: str):
    """Returns after 30, 50 and 100 steps, float64 [3, N]."""
    red_agent = jnp.int32(RED_INDEX[red_name])
    if blue_name in MIX_BLUES:
        weights = jnp.asarray(blue_policies.MIXES[blue_name], jnp.float32)
        returns, _ = _mix_player(num_episodes)(key, red_agent, jnp.bool_(fix_bugs), weights)
    else:
        returns = _player(blue_name, num_episodes, fix_bugs)(key, red_agent)
    return np.asarray(returns, np.float64)


def run(num_episodes: int, seed: int, blues: tuple[str, ...] = BLUES) -> list[dict]:
    """Every (bugs, Red, Blue, length) cell: mean, standard error and the reference if any."""
    rows = []
    key = jax.random.key(seed)
    for bugs, fix_bugs in BUGS.items():
        for blue_name in blues:
            for red_name in REDS:
                key, key_play = jax.random.split(key)
                returns = _returns(blue_name, num_episodes, fix_bugs, key_play, red_name)
                for length, values in zip(LENGTHS, returns, strict=True):
                    mean = float(values.mean())
                    se = float(values.std(ddof=1) / math.sqrt(len(values)))
                    row = {"bugs": bugs, "red": red_name, "blue": blue_name, "steps": length,
                           "mean": mean, "se": se}  # fmt: skip
                    ref = REFERENCE.get((bugs, red_name, blue_name, length))
                    if ref is not None:
                        ok = within(mean, se, *ref, **_tolerance(blue_name, red_name))
                        row.update(cyborg=ref[0], cyborg_se=ref[1], ok=ok)
                    published = PUBLISHED.get((bugs, red_name, blue_name, length))
                    if published is not None:
                        row.update(published=published[0], published_se=published[1])
                    rows.append(row)
    return rows


# Blue's table in real CybORG under three blind mixes (bench/research/cyber_peer.py --table): how
# often each host's row shows each state. Scores can agree while the table a policy reads does not.
TABLE_REFERENCE_JSON = Path(__file__).with_name("cage2_cyborg_table_reference.json")


def table_fidelity(num_episodes: int, seed: int) -> list[dict]:
    """Each reference's table-state rates, ours beside CybORG's: float [13, 5] arrays per cell.

    ``ok`` holds where every (host, state) rate is within ``max(4 * combined SE, 0.02)``: the
    per-episode rates are skewed (most episodes never show a state on a host), so 4 SE, and
    0.02 of the steps for the states CybORG's sample never showed.
    """
    with open(TABLE_REFERENCE_JSON) as f:
        references = json.load(f)["cells"]
    key = jax.random.key(seed)
    rows = []
    for ref in references:
        key, key_play = jax.random.split(key)
        weights = jnp.asarray(blue_policies.MIXES[ref["blue"]], jnp.float32)
        _, tables = _mix_player(num_episodes)(
            key_play, jnp.int32(RED_INDEX[ref["red"]]), jnp.bool_(BUGS[ref["bugs"]]), weights
        )
        mean, se = table_rates(np.asarray(tables))
        ref_mean, ref_se = np.asarray(ref["mean"]), np.asarray(ref["se"])
        tolerance = np.maximum(4.0 * np.hypot(se, ref_se), 0.02)
        rows.append({"bugs": ref["bugs"], "red": ref["red"], "blue": ref["blue"], "mean": mean,
                     "se": se, "cyborg": ref_mean, "cyborg_se": ref_se,
                     "ok": bool(np.all(np.abs(mean - ref_mean) <= tolerance))})  # fmt: skip
    return rows


# Trained defenders in real CybORG (bench/research/cyber_peer.py --blue policy), one cell per (bugs,
# Red, defender, length); the defenders' weights are bench/research/cage2_defenders/NAME.npz.
POLICY_REFERENCE_JSON = Path(__file__).with_name("cage2_cyborg_policy_reference.json")
DEFENDERS_DIR = Path(__file__).with_name("cage2_defenders")


def policy_returns(path: Path, red_name: str, num_episodes: int, seed: int, fix_bugs: bool):
    """A defender's returns after 30, 50 and 100 steps in jaxrl's CAGE2, float64 [3, N].

    ``num_episodes`` vmapped envs step together (CybORG's actions, the table observation);
    one :class:`bench.research.cyber_peer.PolicyBlue` per episode reads each env's table and whether
    its last Decoy placed a decoy (CybORG's success flag), as it does in CybORG.
    """
    env, step = _cage2_and_step()
    params = envs.override_params(env.default_params, {
        "max_steps_in_episode": max(LENGTHS), "fix_bugs": fix_bugs,
        "red_agent": RED_INDEX[red_name],
    })  # fmt: skip
    key_reset, key_steps = jax.random.split(jax.random.key(seed))
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(key_reset, num_episodes), params
    )
    blues = [PolicyBlue(str(path), fix_bugs) for _ in range(num_episodes)]
    success = np.zeros(num_episodes, bool)
    rewards = np.zeros((max(LENGTHS), num_episodes))
    for t, key in enumerate(jax.random.split(key_steps, max(LENGTHS))):
        table = np.asarray(obs)
        actions = np.asarray([b.act(table[i], success[i]) for i, b in enumerate(blues)])
        before = state.decoys
        obs, state, reward, _, _, _ = step(jax.random.split(key, num_episodes), state,
                                           jnp.asarray(actions, jnp.int32), params)  # fmt: skip
        success = np.asarray(jnp.any(state.decoys & ~before, axis=(1, 2)))
        rewards[t] = np.asarray(reward)
    cumulative = np.cumsum(rewards, axis=0)
    return np.stack([cumulative[n - 1] for n in LENGTHS])


@functools.cache
def _cage2_and_step():
    """One CAGE2 env and its vmapped, jitted step for every (Red, bugs) cell: they differ
    only in the params' array leaves, so the step compiles once per episode count."""
    env, _ = envs.make("CAGE2")
    return env, jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))


def policy_fidelity(num_episodes: int, seed: int, z: float = 1.96) -> list[dict]:
    """Every trained-defender reference cell, ours beside CybORG's (max(z SE, 5%))."""
    with open(POLICY_REFERENCE_JSON) as f:
        references = json.load(f)["cells"]
    runs = sorted({(c["bugs"], c["red"], c["blue"]) for c in references})
    cells = {(c["bugs"], c["red"], c["blue"], c["steps"]): c for c in references}
    rows = []
    for bugs, red_name, blue_name in runs:
        path = DEFENDERS_DIR / f"{blue_name.removeprefix('policy:')}.npz"
        # Each run's episodes depend on the run alone, not on which other defenders there are.
        run_seed = seed + zlib.crc32(f"{bugs}/{red_name}/{blue_name}".encode()) % 2**16
        returns = policy_returns(path, red_name, num_episodes, run_seed, BUGS[bugs])
        for length, values in zip(LENGTHS, returns, strict=True):
            mean = float(values.mean())
            se = float(values.std(ddof=1) / math.sqrt(len(values)))
            ref = cells[(bugs, red_name, blue_name, length)]
            ok = within(mean, se, ref["mean"], ref["se"], z, 0.05)
            rows.append({"bugs": bugs, "red": red_name, "blue": blue_name, "steps": length,
                         "mean": mean, "se": se, "cyborg": ref["mean"],
                         "cyborg_se": ref["se"], "ok": ok})  # fmt: skip
    return rows


def format_table(rows: list[dict]) -> str:
    """Markdown table of the cells."""
    lines = [
        "| bugs | Red | Blue | steps | jaxrl CAGE2 | CybORG (peer run) | within | published |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        d = 2 if abs(r["mean"]) < 100 else 1  # a defender's cells: two decimals
        ref = f"{r['cyborg']:.{d}f} +- {r['cyborg_se']:.{d}f}" if "cyborg" in r else ""
        ok = ("yes" if r["ok"] else "**NO**") if "ok" in r else ""
        pub = f"{r['published']:g} +- {r['published_se']:g}" if "published" in r else ""
        lines.append(
            f"| {r['bugs']} | {r['red']} | {r['blue']} | {r['steps']} "
            f"| {r['mean']:.{d}f} +- {r['se']:.{d}f} | {ref} | {ok} | {pub} |"
        )
    return "\n".join(lines)


def format_table_states(rows: list[dict]) -> str:
    """Markdown table of :func:`table_fidelity`'s cells: the largest gap of each."""
    lines = [
        "| bugs | Red | Blue | largest gap (host, state): jaxrl vs CybORG | within |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        gap = np.abs(r["mean"] - r["cyborg"])
        host, state = np.unravel_index(int(gap.argmax()), gap.shape)
        lines.append(
            f"| {r['bugs']} | {r['red']} | {r['blue']} | {tb.HOSTS[host]} "
            f"{TABLE_STATES[state]}: {r['mean'][host, state]:.3f} +- {r['se'][host, state]:.3f}"
            f" vs {r['cyborg'][host, state]:.3f} +- {r['cyborg_se'][host, state]:.3f} "
            f"| {'yes' if r['ok'] else '**NO**'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per cell")
    parser.add_argument("--json", metavar="FILE", help="also write the cells as JSON")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed")
    parser.add_argument("--blues", default=",".join(BLUES), help="comma-separated Blues")
    parser.add_argument(
        "--table", action="store_true", help="also check the table-state rates (blind mixes)"
    )
    parser.add_argument(
        "--policies", action="store_true", help="also check the trained defenders' cells"
    )
    args = parser.parse_args(argv)
    blues = tuple(args.blues.split(","))
    unknown = sorted(set(blues) - set(BLUES))
    if unknown:
        parser.error(f"unknown Blue(s) {unknown}; choose from {BLUES}")

    start = time.perf_counter()
    rows = run(args.episodes, args.seed, blues)
    elapsed = time.perf_counter() - start
    print(format_table(rows))
    failed = [r for r in rows if r.get("ok") is False]
    print(
        f"\n{args.episodes} episodes per cell, {elapsed:.1f} s; "
        f"{sum('ok' in r for r in rows) - len(failed)}/{sum('ok' in r for r in rows)} "
        "reference cells within tolerance (mixes and hop_guard vs B_line/Meander: "
        "max(1.96 SE, 5%); others: max(3 SE, 3%))"
    )
    if args.table:
        table_rows = table_fidelity(args.episodes, args.seed)
        print(format_table_states(table_rows))
        failed += [r for r in table_rows if not r["ok"]]
    if args.policies:
        policy_rows = policy_fidelity(args.episodes, args.seed)
        print("\ntrained defenders (bench/research/cage2_defenders), max(1.96 SE, 5%):")
        print(format_table(policy_rows))
        failed += [r for r in policy_rows if not r["ok"]]
        rows += policy_rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"episodes": args.episodes, "seed": args.seed, "cells": rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
