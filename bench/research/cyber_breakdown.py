"""Where a CAGE2 defender loses its score: reward terms, hosts, and Blue's actions, per cell.

    python -m bench.research.cyber_breakdown --run-dir DIR[,DIR...] [--red B_line] [--length 100]
                                    [--episodes 500] [--seed 153] [--fix-bugs]
                                    [--opening A,B,...] [--restore-foothold STEP]
                                    [--stochastic] [--json FILE] [--trace FILE.npz]

Plays the defender (one run, or several as a :class:`bench.cyber_defender.Ensemble`) for
``--episodes`` vmapped episodes of one evaluation cell (Red agent, episode length, bug
setting; GreenAgent off) and reports, per episode on average:

- the return and its three reward terms (``access``, ``impact``, ``restore``);
- per host, the steps Red held a shell there, the steps the reward counted it (root/SYSTEM,
  or with ``--fix-bugs`` any shell) and what that cost (the host's value per counted step:
  these costs sum to the ``access`` term);
- Blue's actions by kind, and the hosts of its Analyse, Remove and Restore actions;
- the step Red first held a counted shell on a user host (User1-4, the foothold), the
  episodes where it holds one at the end, and Blue's most frequent actions in the first steps.

``--opening`` scripts Blue's first actions as ``bench.cyber_defender --opening`` does.
``--restore-foothold STEP`` (B_line only) is an oracle probe: at step STEP (0-based) Blue's
action is replaced by a Restore of the user host B_line drew for the episode (read from the
env's state, which no defender sees), to ask what removing the foothold once would be worth.
``--trace`` also writes every step of every episode (Red's action and outcome, Red's hold per
host, Blue's action, table and reward) in the format of
``bench/research/cyber_peer.py --trace``, which ``bench.research.cyber_trace`` compares step by
step.
Deterministic (the mode of each action distribution) unless ``--stochastic``. Exits 0 with
the report; 1 with one line on bad input (as ``bench.cyber_defender``, or an unknown Red, a
length below 1, a ``--restore-foothold`` step outside the episode or against Meander).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config import ConfigError
from jaxrl.core.acting import PolicyParams, act
from jaxrl.envs.cyber import blue as cyber_blue
from jaxrl.envs.cyber import env as cyber_env
from jaxrl.envs.cyber import red as cyber_red
from jaxrl.envs.cyber import tables as tb
from jaxrl.run.checkpoint import CheckpointError
from jaxrl.run.play import play_params
from jaxrl.run.setup import Setup

from ..cyber_defender import REDS, load_defender, parse_opening, with_opening
from .cyber_peer import TRACE_FIELDS

USER_HOSTS = (tb.USER1, tb.USER2, tb.USER3, tb.USER4)
OPENING_STEPS = 4  # steps whose most frequent actions are reported


@dataclasses.dataclass(frozen=True)
class HostCost:
    """One host's Red presence, per episode on average."""

    host: str
    shell_steps: float  # steps ending with a Red shell there
    counted_steps: float  # steps the reward counted it
    cost: float  # counted steps x the host's value (its share of the access term, positive)


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """One cell's losses, per episode on average."""

    runs: str  # the defender's runs and updates
    red: str
    length: int
    fix_bugs: bool
    episodes: int
    seed: int
    deterministic: bool
    mean: float  # return
    se: float  # its standard error
    terms: dict[str, float]  # reward term -> sum per episode
    hosts: tuple[HostCost, ...]  # hosts Red ever held, in host order
    kinds: dict[str, float]  # Blue action kind -> count per episode
    targets: dict[str, dict[str, float]]  # analyse/remove/restore -> host -> count per episode
    foothold_step: tuple[float, float, float] | None  # 10/50/90th percentile; None if never
    no_foothold: float  # fraction of episodes without a counted user-host shell
    foothold_at_end: float  # fraction of episodes with a counted user-host shell at the end
    opening: tuple[tuple[tuple[str, float], ...], ...]  # per step: (action name, fraction) x3
    scripted: tuple[int, ...] = ()  # Blue's scripted first actions (--opening), if any
    restore_foothold: int | None = None  # the step of the oracle foothold Restore, if any

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def play(
    setup: Setup,
    policy: PolicyParams,
    env_params,
    length: int,
    episodes: int,
    seed: int,
    deterministic: bool,
    restore_foothold: int | None = None,
):
    """``length`` steps of ``episodes`` fresh episodes (no auto-reset). Returns per step
    ``[T, E]`` arrays: Blue's CybORG actions (a reduced set's expanded), rewards, reward
    terms, Red's access and the counted hosts, and under ``"trace"`` the fields of
    ``bench.research.cyber_peer.TRACE_FIELDS`` (:func:`red_record`, Blue's table).
    ``restore_foothold``: at that step Blue restores B_line's user host instead
    (:func:`foothold_restore`)."""
    env = cyber_env.Cage2()
    network = setup.policy.network
    action_set = env_params.action_set
    key_reset, key_steps, key_act = jax.random.split(jax.random.key(seed), 3)

    @jax.jit
    def run(policy):
        obs, state = jax.vmap(env.reset_env, in_axes=(0, None))(
            jax.random.split(key_reset, episodes), env_params
        )

        def step(carry, keys):
            obs, state, hidden, is_first = carry
            key_env, key_policy = keys
            out = act(setup.policy, policy, hidden, obs, is_first, key_policy, deterministic)
            action = out.action  # [E]
            if restore_foothold is not None:
                probe = foothold_restore(state.bline_user, action_set)  # [E]
                action = jnp.where(state.time == restore_foothold, probe, action)
            keys_env = jax.random.split(key_env, episodes)
            red_before = jax.vmap(red_record)(keys_env, state)
            obs, state, reward, _, info = jax.vmap(env.step_env, in_axes=(0, 0, 0, None))(
                keys_env, state, action, env_params
            )
            counted = jax.vmap(cyber_env.privileged, in_axes=(0, None))(
                state, jnp.asarray(env_params.fix_bugs)
            )
            trace = {**red_before, "reward": reward, "blue_action": info["blue_action"],
                     "red_success": info["red_success"], "red_access": access_levels(state),
                     "table": obs[:, :52]}  # fmt: skip
            record = {"action": info["blue_action"], "reward": reward,
                      "terms": info["reward_terms"], "shell": state.access > 0,
                      "counted": counted, "trace": trace}  # fmt: skip
            return (obs, state, out.hidden, jnp.zeros(episodes, bool)), record

        keys = (jax.random.split(key_steps, length), jax.random.split(key_act, length))
        start = (obs, state, network.initial_hidden(episodes), jnp.ones(episodes, bool))
        return jax.lax.scan(step, start, keys)[1]

    return jax.device_get(run(policy))


def foothold_restore(user: jax.Array, action_set: str) -> jax.Array:
    """Blue's action (int32, in ``action_set``) that restores user host ``user`` (int32 host
    indices of User1-4, any shape): CybORG's Restore, or the reduced set's Restore slot."""
    if action_set == "full":
        return (tb.RESTORE + user).astype(jnp.int32)
    slot = jnp.argmax(jnp.asarray(tb.REDUCED_HOSTS) == user[..., None], axis=-1)
    restore = tb.REDUCED_KINDS.index("restore") * len(tb.REDUCED_HOSTS)
    return (restore + slot).astype(jnp.int32)


def red_record(key: jax.Array, state: cyber_env.EnvState) -> dict[str, jax.Array]:
    """Red's action in the step ``Cage2.step_env(key, state, ...)`` plays, int32 scalars in
    ``bench.research.cyber_peer``'s trace codes: ``red_kind``, ``red_target`` (-1 for Sleep),
    ``red_exploit`` (the exploit chosen, -1 for none) and ``red_stage`` (B_line's, else -1).

    Red's choice reads only the state at the step's start and the step's draws (Blue's action
    changes neither Red's stage nor the ports it learned), so it is recomputed here.
    """
    draws = cyber_env.draw_step(key)
    kind, target = cyber_env.red_policy_action(draws, state)
    ports = state.red_ports[jnp.clip(target, 0, tb.NUM_HOSTS - 1)]
    choice = cyber_env.choose_exploit(draws.exploit_top, draws.exploit_other, ports)
    return {
        "red_kind": kind,
        "red_target": jnp.where(kind == cyber_red.RED_SLEEP, -1, target),
        "red_exploit": jnp.where(kind == cyber_red.RED_EXPLOIT, choice, -1),
        "red_stage": jnp.where(state.red_agent == cyber_red.BLINE_AGENT, state.bline_stage, -1),
    }


def access_levels(state: cyber_env.EnvState) -> jax.Array:
    """Red's hold per host, int32 [..., 13]: 0 none, 1 a user shell, 2 root/SYSTEM."""
    root = (state.access == 2) | ((state.access == 1) & state.root_shell)
    return jnp.where(state.access == 0, 0, jnp.where(root, 2, 1))


def write_trace(path: str | Path, rec: dict) -> None:
    """``play``'s ``"trace"`` (``[T, E]`` leaves) as a ``cyber_peer`` trace ``.npz``."""
    arrays = {}
    for name, (dtype, _) in TRACE_FIELDS.items():
        arrays[name] = np.swapaxes(np.asarray(rec["trace"][name]), 0, 1).astype(dtype)
    np.savez_compressed(path, **arrays)


def breakdown(
    runs: str | Path | Sequence[str | Path],
    red: str = "B_line",
    length: int = 100,
    fix_bugs: bool = False,
    episodes: int = 500,
    seed: int = 153,
    deterministic: bool = True,
    opening: Sequence[int] = (),
    trace: str | Path | None = None,
    restore_foothold: int | None = None,
) -> Breakdown:
    """One cell of the defender, broken down (see the module docstring); ``trace``: also
    write every step's record there (:func:`write_trace`); ``restore_foothold``: the oracle
    probe's step (B_line only).

    Raises:
      CheckpointError, ValueError: as :func:`bench.cyber_defender.load_defender`, an unknown
        ``red``, ``length`` or ``episodes`` below 1, a ``restore_foothold`` outside the
        episode or against another Red.
    """
    _check_cell(red, length, episodes, restore_foothold)
    setup, policy, _, label = load_defender(runs)
    if opening:
        setup, policy = with_opening(setup, policy, opening)
    overrides = {"red_agent": REDS[red], "max_steps_in_episode": length, "fix_bugs": fix_bugs,
                 "green_agent": False}  # fmt: skip
    rec = play(setup, policy, play_params(setup, overrides=overrides), length, episodes, seed,
               deterministic, restore_foothold)  # fmt: skip
    if trace is not None:
        write_trace(trace, rec)
    returns = rec["reward"].astype(np.float64).sum(0)  # [E]
    action = rec["action"]  # [T, E]
    return Breakdown(
        runs=label,
        red=red,
        length=length,
        fix_bugs=fix_bugs,
        episodes=episodes,
        seed=seed,
        deterministic=deterministic,
        mean=float(returns.mean()),
        se=float(returns.std() / np.sqrt(episodes)),
        terms={
            name: float(np.asarray(v, np.float64).sum(0).mean()) for name, v in rec["terms"].items()
        },  # fmt: skip
        hosts=_host_costs(rec),
        kinds=_action_kinds(action),
        targets=_action_targets(action),
        **_foothold(rec),
        opening=_top_actions(action, min(OPENING_STEPS, length), episodes),
        scripted=tuple(opening),
        restore_foothold=restore_foothold,
    )


def _foothold(rec: dict) -> dict[str, Any]:
    """``Breakdown``'s foothold fields: when Red first held a counted shell on a user host
    (10th, 50th, 90th percentiles; None if never), how often never, and held at the end."""
    foothold = rec["counted"][:, :, list(USER_HOSTS)].any(-1)  # [T, E]
    held = foothold.any(0)
    first_step = foothold.argmax(0)[held]
    return {
        "foothold_step": (
            tuple(float(p) for p in np.percentile(first_step, [10, 50, 90])) if held.any() else None
        ),
        "no_foothold": float(1.0 - held.mean()),
        "foothold_at_end": float(foothold[-1].mean()),
    }


def _check_cell(red: str, length: int, episodes: int, restore_foothold: int | None) -> None:
    """Raise ``ValueError`` on a cell :func:`breakdown` cannot play (its one-line message)."""
    if red not in REDS:
        raise ValueError(f"--red must be one of {sorted(REDS)}, got {red!r}")
    if length < 1 or episodes < 1:
        raise ValueError(f"--length and --episodes must be >= 1, got {length} and {episodes}")
    if restore_foothold is not None:
        if red != "B_line":
            raise ValueError(f"--restore-foothold probes B_line's user host, not {red}'s")
        if not 0 <= restore_foothold < length:
            raise ValueError(
                f"--restore-foothold needs a step in [0, {length}), got {restore_foothold}"
            )


def _host_costs(rec: dict) -> tuple[HostCost, ...]:
    """Per host Red ever held a shell on: the steps held, counted, and their cost (per episode)."""
    return tuple(
        HostCost(
            host=tb.HOSTS[h],
            shell_steps=float(rec["shell"][:, :, h].sum(0).mean()),
            counted_steps=float(rec["counted"][:, :, h].sum(0).mean()),
            cost=float(rec["counted"][:, :, h].sum(0).mean() * tb.HOST_VALUE[h]),
        )
        for h in range(tb.NUM_HOSTS)
        if rec["shell"][:, :, h].any()
    )


def _action_kinds(action: np.ndarray) -> dict[str, float]:
    """Blue's actions ``[T, E]`` by kind: the steps per episode of each kind."""
    kind = np.searchsorted(cyber_blue.KIND_FIRST, action, side="right") - 1  # [T, E]
    return {name: float((kind == k).sum(0).mean()) for k, name in enumerate(cyber_blue.KINDS)}


def _action_targets(action: np.ndarray) -> dict[str, dict[str, float]]:
    """Blue's Analyse, Remove and Restore actions ``[T, E]`` per target host (per episode)."""
    targets = {}
    for name, first in (("analyse", tb.ANALYSE), ("remove", tb.REMOVE), ("restore", tb.RESTORE)):
        counts = {
            tb.HOSTS[h]: float((action == first + h).sum(0).mean()) for h in range(tb.NUM_HOSTS)
        }
        targets[name] = {host: n for host, n in counts.items() if n > 0}
    return targets


def _top_actions(action: np.ndarray, steps: int, episodes: int) -> tuple:
    """Blue's three most frequent actions ``(name, fraction of episodes)`` at each first step."""
    top_actions = []
    for t in range(steps):
        values, counts = np.unique(action[t], return_counts=True)
        top = np.argsort(-counts)[:3]
        top_actions.append(
            tuple((tb.action_name(int(values[i])), float(counts[i] / episodes)) for i in top)
        )
    return tuple(top_actions)


def report(b: Breakdown) -> str:
    """The breakdown as text."""
    bugs = "fixed bugs" if b.fix_bugs else "CybORG 2.1 bugs"
    mode = "deterministic" if b.deterministic else "stochastic"
    scripted = f", opening {','.join(map(str, b.scripted))}" if b.scripted else ""
    if b.restore_foothold is not None:
        scripted += f", oracle Restore of B_line's user host at step {b.restore_foothold}"
    lines = [
        f"{b.runs}: {b.red} {b.length} steps, {bugs}, {b.episodes} episodes, seed {b.seed}, "
        f"{mode}{scripted}",
        f"return {b.mean:.2f} +- {b.se:.2f} per episode = "
        + " + ".join(f"{name} {value:.2f}" for name, value in b.terms.items()),
        "",
        "| host | steps with a Red shell | steps counted | cost |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {h.host} | {h.shell_steps:.1f} | {h.counted_steps:.1f} | {h.cost:.2f} |"
        for h in b.hosts
    ]
    lines += [
        "",
        "Blue's actions per episode: "
        + ", ".join(f"{name} {n:.1f}" for name, n in b.kinds.items()),
    ]
    for name, per_host in b.targets.items():
        shown = ", ".join(f"{host} {n:.2f}" for host, n in per_host.items()) or "none"
        lines.append(f"  {name}: {shown}")
    if b.foothold_step is None:
        lines.append("Red never held a counted shell on a user host")
    else:
        p10, p50, p90 = b.foothold_step
        lines.append(
            f"first counted user-host shell (the foothold): step {p10:.0f} / {p50:.0f} / "
            f"{p90:.0f} (10th / 50th / 90th percentile, 0-based), none in "
            f"{b.no_foothold:.1%} of episodes; held at the end in {b.foothold_at_end:.1%}"
        )
    for t, top in enumerate(b.opening):
        lines.append(f"  step {t}: " + ", ".join(f"{name} {p:.2f}" for name, p in top))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.research.cyber_breakdown``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.research.cyber_breakdown",
        description="Where a CAGE2 defender loses its score in one evaluation cell.",
    )
    parser.add_argument("--run-dir", required=True, help="a CAGE2 run (DIR,DIR,...: an ensemble)")
    parser.add_argument("--red", default="B_line", help="B_line or Meander")
    parser.add_argument("--length", type=int, default=100, help="steps per episode")
    parser.add_argument("--episodes", type=int, default=500, help="episodes (vmapped)")
    parser.add_argument("--seed", type=int, default=153, help="evaluation seed")
    parser.add_argument("--fix-bugs", action="store_true", help="CybORG++'s fixes, not 2.1's bugs")
    parser.add_argument(
        "--opening", help="Blue's first actions, scripted: A,B,... (0-144; 0-35 reduced)"
    )
    parser.add_argument(
        "--restore-foothold",
        type=int,
        metavar="STEP",
        help="oracle probe (B_line): at STEP Blue restores B_line's user host instead",
    )
    parser.add_argument("--stochastic", action="store_true", help="sample actions, not the mode")
    parser.add_argument("--json", type=Path, help="also write the breakdown to this JSON file")
    parser.add_argument(
        "--trace", type=Path, help="also write every step's record to this .npz (cyber_trace)"
    )
    args = parser.parse_args(argv)
    for flag, path in (("--json", args.json), ("--trace", args.trace)):
        if path and not path.parent.is_dir():
            print(f"error: {flag} {path}: no directory {path.parent}", file=sys.stderr)
            return 2
    try:
        opening = parse_opening(args.opening) if args.opening is not None else ()
        result = breakdown(
            args.run_dir, args.red, args.length, args.fix_bugs, args.episodes, args.seed,
            not args.stochastic, opening, args.trace, args.restore_foothold,
        )  # fmt: skip
    except (CheckpointError, ConfigError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result.to_json(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
