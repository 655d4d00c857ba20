"""CAGE2 peer run: the scripted Blue baselines in real CybORG, the references of cyber_fidelity.

Runs in its own environment, never in jaxrl's (CybORG pins old gym/numpy APIs)::

    python -m venv /work/venvs/cage
    /work/venvs/cage/bin/pip install numpy pyyaml prettytable gym==0.26.2 gymnasium \\
        networkx paramiko
    # CybORG 2.1 as released (cage-challenge/cage-challenge-2 @ 26ce1c1)
    git -C <mirror of cage-challenge-2> archive HEAD CybORG | tar -x -C /work/venvs/src21
    # CybORG++'s debugged CybORG (alan-turing-institute/CAGE_2_Fixed @ f70ca2d)
    git -C <mirror of CAGE_2_Fixed> archive HEAD Debugged_CybORG | tar -x -C /work/venvs/src
    cd /work/venvs/src21/CybORG && PYTHONPATH=. /work/venvs/cage/bin/python \\
        /work/main/bench/cyber_peer.py --red B_line --blue react_restore --episodes 500 --tag 2.1

Each call builds one CybORG (Scenario2, GreenAgent asleep, the Red agent's own class) behind
the ``ChallengeWrapper`` and plays ``--episodes`` episodes of 100 steps in it, as CybORG's
``Evaluation/evaluation.py`` does, and prints one ``RESULT`` JSON line per length (30, 50,
100: the same episodes' returns after that many steps) with mean and standard error.

Blue baselines, written here from CybORG++'s ``mini_CAGE/test_agent.py`` definitions on the
52-bit table: ``react_restore`` (``React_restore_minimal``) remembers every host whose row
shows User or Privileged and restores the lowest-index remembered host, one per step;
``react_decoy`` (``Restore_decoys``) places the next decoy of its plan where that would sleep.

Blind Blues, which never read the table (``MIXES``: the chance of each action kind, the host
and decoy type then uniform, drawn from their own ``numpy`` generator seeded ``--seed``; jaxrl's
``envs.cyber.blue`` draws the same distribution): ``random`` is uniform over the 145 actions,
``remove_mix`` mostly Removes, ``decoy_mix`` mostly decoys; both restore rarely, so Red gets far.
Every reference (``bench/cage2_cyborg_reference.json``, read by ``bench.cyber_fidelity``) was
run as, e.g.::

    cd /work/venvs/src/Debugged_CybORG/CybORG && PYTHONPATH=. /work/venvs/cage/bin/python \
        /work/main/bench/cyber_peer.py --red Meander --blue decoy_mix --episodes 200 --tag fixed

CybORG is imported inside :func:`run` only, so jaxrl's tests can read ``MIXES`` without it.
"""

from __future__ import annotations

import argparse
import inspect
import json
import random

import numpy as np

LENGTHS = (30, 50, 100)
REDS = ("B_line", "Meander", "Sleep")
RESTORE, DECOY = 132, 28  # first Restore and Decoy action (EnumActionWrapper order)
DECOY_TYPES = ("Apache", "Femitter", "HarakaSMPT", "Smss", "SSHD", "Svchost", "Tomcat", "Vsftpd")
# Restore_decoys' host order (Enterprise2, Op_Server0, Enterprise1, Enterprise0, ...) and each
# host's decoys in mini_CAGE's HOST_DECOYS preference order.
DECOY_HOSTS = (3, 7, 2, 1, 7, 7, 1, 7, 1, 1)
HOST_DECOYS = {
    1: ("HarakaSMPT", "Tomcat", "Vsftpd", "Apache"),
    2: ("Femitter",),
    3: ("Femitter",),
    7: ("HarakaSMPT", "Apache", "Tomcat", "Vsftpd"),
}


# Blind Blues: the chance of each action kind, in the order Sleep, Monitor, Analyse, Remove,
# Decoy, Restore (the host, and the decoy type, then uniform). envs.cyber.blue.MIXES agrees.
KINDS = ("sleep", "monitor", "analyse", "remove", "decoy", "restore")
KIND_SIZES = (1, 1, 13, 13, 104, 13)  # actions of each kind, in the EnumActionWrapper order
MIXES = {
    "random": tuple(n / 145 for n in KIND_SIZES),  # uniform over the 145 actions
    "remove_mix": (0.2, 0.0, 0.1, 0.6, 0.05, 0.05),
    "decoy_mix": (0.1, 0.0, 0.05, 0.05, 0.78, 0.02),
}
BLUES = ("sleep", "react_restore", "react_decoy", *MIXES)


class MixBlue:
    """A blind Blue drawing each action from ``MIXES[name]``; ``seed`` seeds its generator."""

    def __init__(self, name: str, seed: int):
        self.weights = np.asarray(MIXES[name])
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        pass

    def act(self, obs: np.ndarray) -> int:
        del obs
        kind = self.rng.choice(len(KINDS), p=self.weights / self.weights.sum())
        first = sum(KIND_SIZES[:kind])
        return int(first + self.rng.integers(KIND_SIZES[kind]))


class ScriptedBlue:
    """React-Restore, or React-Decoy when ``decoys``; call :meth:`reset` per episode."""

    def __init__(self, name: str):
        self.name = name
        self.reset()

    def reset(self) -> None:
        self.pending = np.zeros(13, bool)
        self.plan = list(DECOY_HOSTS)
        self.placed = dict.fromkeys(HOST_DECOYS, 0)

    def act(self, obs: np.ndarray) -> int:
        if self.name == "sleep":
            return 0
        self.pending |= np.asarray(obs[:52]).reshape(13, 4)[:, 3] == 1
        if self.pending.any():
            host = int(np.argmax(self.pending))
            self.pending[host] = False
            return RESTORE + host
        if self.name == "react_decoy" and self.plan:
            host = self.plan.pop(0)
            options = HOST_DECOYS[host]
            self.placed[host] += 1
            if self.placed[host] <= len(options):
                return DECOY + 13 * DECOY_TYPES.index(options[self.placed[host] - 1]) + host
        return 0


TABLE_STATES = ("scan", "exploit", "unknown", "user", "privileged")  # table_rates' columns


def table_rates(tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How often each host's row shows each of ``TABLE_STATES``: mean and SE over episodes.

    Args:
      tables: Blue's 52-bit table after each step, [episodes, steps, 52] (13 hosts x 4 bits:
        activity Scan 10 / Exploit 11, compromised Unknown 10 / User 01 / Privileged 11).

    Returns:
      ``(mean, se)``, float64 [13, 5] each: per episode the fraction of steps in that state,
      then its mean over episodes and the standard error of that mean.
    """
    bits = np.asarray(tables).reshape(*np.shape(tables)[:2], 13, 4) == 1
    states = np.stack(
        [bits[..., 0] & ~bits[..., 1], bits[..., 0] & bits[..., 1],
         bits[..., 2] & ~bits[..., 3], ~bits[..., 2] & bits[..., 3], bits[..., 2] & bits[..., 3]],
        axis=-1,
    )  # fmt: skip
    per_episode = states.mean(axis=1)  # [episodes, 13, 5]
    se = per_episode.std(axis=0, ddof=1) / np.sqrt(len(per_episode))
    return per_episode.mean(axis=0), se


def run(
    red: str, blue: str, episodes: int, seed: int, tables: np.ndarray | None = None
) -> np.ndarray:
    """Blue's returns after 30, 50 and 100 steps, float [episodes, 3].

    ``tables``, int8 [episodes, 100, 52] if given, receives Blue's table after every step.
    """
    from CybORG import CybORG  # noqa: I001 (only in the peer's environment)
    from CybORG.Agents import B_lineAgent, RedMeanderAgent, SleepAgent
    from CybORG.Agents.Wrappers import ChallengeWrapper

    agents = {"B_line": B_lineAgent, "Meander": RedMeanderAgent, "Sleep": SleepAgent}
    random.seed(seed)
    np.random.seed(seed)
    path = str(inspect.getfile(CybORG))[:-10] + "/Shared/Scenarios/Scenario2.yaml"
    wrapper = ChallengeWrapper(env=CybORG(path, "sim", agents={"Red": agents[red]}),
                               agent_name="Blue")  # fmt: skip
    agent = MixBlue(blue, seed) if blue in MIXES else ScriptedBlue(blue)
    returns = np.zeros((episodes, len(LENGTHS)))
    for episode in range(episodes):
        obs = wrapper.reset()
        obs = obs[0] if isinstance(obs, tuple) else obs  # 2.1 returns obs, the fixed one a pair
        agent.reset()
        total = 0.0
        for t in range(max(LENGTHS)):
            obs, reward = wrapper.step(agent.act(obs))[:2]
            total += reward
            if tables is not None:
                tables[episode, t] = np.asarray(obs[:52])
            if t + 1 in LENGTHS:
                returns[episode, LENGTHS.index(t + 1)] = total
    return returns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--red", choices=REDS, required=True)
    parser.add_argument("--blue", choices=BLUES, required=True)
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--tag", default="", help="label for the CybORG version (2.1, fixed)")
    parser.add_argument(
        "--table", action="store_true", help="also print how often each table state shows"
    )
    args = parser.parse_args()
    tables = np.zeros((args.episodes, max(LENGTHS), 52), np.int8) if args.table else None
    returns = run(args.red, args.blue, args.episodes, args.seed, tables)
    if tables is not None:
        mean, se = table_rates(tables)
        row = {"bugs": args.tag, "red": args.red, "blue": args.blue, "episodes": args.episodes,
               "seed": args.seed, "mean": np.round(mean, 4).tolist(),
               "se": np.round(se, 4).tolist()}  # fmt: skip
        print("TABLE", json.dumps(row), flush=True)
    for i, length in enumerate(LENGTHS):
        values = returns[:, i]
        row = {"bugs": args.tag, "red": args.red, "blue": args.blue, "steps": length,
               "episodes": args.episodes, "mean": round(float(values.mean()), 2),
               "se": round(float(values.std(ddof=1) / np.sqrt(len(values))), 2)}  # fmt: skip
        print("RESULT", json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
