"""CAGE2 fidelity table: scripted Blue baselines vs each Red agent, next to CybORG's figures.

    python -m bench.cyber_fidelity [--episodes N] [--json FILE] [--seed S]

Each (Red, Blue) pair plays ``N`` vmapped episodes of 100 steps, once with CybORG 2.1's bugs
(``fix_bugs=False``) and once with CybORG++'s fixes; the 30- and 50-step scores are the same
episodes' returns after 30 and 50 steps (nothing in CAGE-2 depends on the episode length, so a
prefix of a 100-step episode is a 30-step episode). Prints mean +- standard error next to the
references of ``../shared/CAGE2.md``:

- the official leaderboard's Sleep-vs-B_line row (CybORG 2.1 as released) for ``2.1``;
- CybORG++'s 500-episode table for ``fixed``: its "CybORG" column was run on CybORG++'s debugged
  CybORG (its Sleep-vs-B_line -1141 is the fixed env's exact, deterministic score, while the
  released 2.1 scores -1134.03 on the leaderboard);
- 0 for a Blue that never restores against a sleeping Red, for both.

Exits 1 when a cell with a reference falls outside ``max(3 * SE, 3% of the reference)``, with
SE combining ours and the reference's.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs.cyber import blue as blue_policies
from envs.cyber import red as red_agents

LENGTHS = (30, 50, 100)
REDS = ("B_line", "Meander", "Sleep")
RED_INDEX = {"Sleep": red_agents.SLEEP_AGENT, "B_line": red_agents.BLINE_AGENT,
             "Meander": red_agents.MEANDER_AGENT}  # fmt: skip
BLUES = ("sleep", "random", "react_restore", "react_decoy")

BUGS = {"2.1": False, "fixed": True}  # label -> EnvParams.fix_bugs

# (bugs, red, blue, length) -> (CybORG mean, its standard error).
REFERENCE: dict[tuple[str, str, str, int], tuple[float, float]] = {
    ("2.1", "B_line", "sleep", 30): (-218.65, 0.0),
    ("2.1", "B_line", "sleep", 50): (-480.17, 0.0),
    ("2.1", "B_line", "sleep", 100): (-1134.03, 0.0),
    ("fixed", "B_line", "sleep", 100): (-1141.0, 1.0),
    ("fixed", "B_line", "react_restore", 100): (-159.0, 2.0),
    ("fixed", "B_line", "react_decoy", 100): (-69.0, 2.0),
    ("fixed", "Meander", "sleep", 100): (-1067.0, 2.0),
    ("fixed", "Meander", "react_restore", 100): (-69.0, 2.0),
    ("fixed", "Meander", "react_decoy", 100): (-61.0, 1.0),
}
for _bugs in BUGS:  # a Blue that never restores scores 0 against a sleeping Red
    for _blue in ("sleep", "react_restore", "react_decoy"):
        for _length in LENGTHS:
            REFERENCE[(_bugs, "Sleep", _blue, _length)] = (0.0, 0.0)


@functools.cache
def _player(blue_name: str, num_episodes: int, fix_bugs: bool):
    """Jitted ``play(key, red_agent) -> returns float32 [3, N]`` (after 30, 50, 100 steps)."""
    env, base_params = envs.make("CAGE2", max_steps_in_episode=max(LENGTHS), fix_bugs=fix_bugs)
    act = blue_policies.BASELINES[blue_name]

    def episode(key, params):
        key_reset, key_steps = jax.random.split(key)
        obs, state = env.reset(key_reset, params)

        def body(carry, key_t):
            obs, state, policy_state = carry
            key_act, key_step = jax.random.split(key_t)
            action, policy_state = act(policy_state, obs, key_act)
            obs, state, reward, _, _, _ = env.step(key_step, state, action, params)
            return (obs, state, policy_state), reward

        carry = (obs, state, blue_policies.init_policy_state())
        _, rewards = jax.lax.scan(body, carry, jax.random.split(key_steps, max(LENGTHS)))
        cumulative = jnp.cumsum(rewards)
        return jnp.stack([cumulative[n - 1] for n in LENGTHS])

    @jax.jit
    def play(key, red_agent):
        params = base_params.replace(red_agent=red_agent)
        keys = jax.random.split(key, num_episodes)
        return jax.vmap(episode, in_axes=(0, None))(keys, params).T

    return play


def within(mean: float, se: float, ref: float, ref_se: float) -> bool:
    """Whether ``mean`` is within ``max(3 * combined SE, 3% of |ref|)`` of ``ref``."""
    tolerance = max(3.0 * math.hypot(se, ref_se), 0.03 * abs(ref))
    return abs(mean - ref) <= tolerance + 1e-6


def run(num_episodes: int, seed: int) -> list[dict]:
    """Every (bugs, Red, Blue, length) cell: mean, standard error and the reference if any."""
    rows = []
    key = jax.random.key(seed)
    for bugs, fix_bugs in BUGS.items():
        for blue_name in BLUES:
            play = _player(blue_name, num_episodes, fix_bugs)
            for red_name in REDS:
                key, key_play = jax.random.split(key)
                returns = np.asarray(play(key_play, jnp.int32(RED_INDEX[red_name])), np.float64)
                for length, values in zip(LENGTHS, returns, strict=True):
                    mean = float(values.mean())
                    se = float(values.std(ddof=1) / math.sqrt(len(values)))
                    row = {"bugs": bugs, "red": red_name, "blue": blue_name, "steps": length,
                           "mean": mean, "se": se}  # fmt: skip
                    ref = REFERENCE.get((bugs, red_name, blue_name, length))
                    if ref is not None:
                        row.update(cyborg=ref[0], cyborg_se=ref[1], ok=within(mean, se, *ref))
                    rows.append(row)
    return rows


def format_table(rows: list[dict]) -> str:
    """Markdown table of the cells."""
    lines = [
        "| bugs | Red | Blue | steps | jaxrl CAGE2 | CybORG | within |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ref = f"{r['cyborg']:.2f} +- {r['cyborg_se']:.0f}" if "cyborg" in r else ""
        ok = ("yes" if r["ok"] else "**NO**") if "ok" in r else ""
        lines.append(
            f"| {r['bugs']} | {r['red']} | {r['blue']} | {r['steps']} "
            f"| {r['mean']:.1f} +- {r['se']:.1f} | {ref} | {ok} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per cell")
    parser.add_argument("--json", metavar="FILE", help="also write the cells as JSON")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    rows = run(args.episodes, args.seed)
    elapsed = time.perf_counter() - start
    print(format_table(rows))
    failed = [r for r in rows if r.get("ok") is False]
    print(
        f"\n{args.episodes} episodes per cell, {elapsed:.1f} s; "
        f"{sum('ok' in r for r in rows) - len(failed)}/{sum('ok' in r for r in rows)} "
        "reference cells within max(3 SE, 3%)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"episodes": args.episodes, "seed": args.seed, "cells": rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
