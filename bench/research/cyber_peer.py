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
        /work/main/bench/research/cyber_peer.py --red B_line --blue react_restore \\
        --episodes 500 --tag 2.1

Each call builds one CybORG (Scenario2, GreenAgent asleep, the Red agent's own class) behind
the ``ChallengeWrapper`` and plays ``--episodes`` episodes of 100 steps in it, as CybORG's
``Evaluation/evaluation.py`` does, and prints one ``RESULT`` JSON line per length (30, 50,
100: the same episodes' returns after that many steps) with mean and standard error.

Blue baselines, written here from CybORG++'s ``mini_CAGE/test_agent.py`` definitions on the
52-bit table: ``react_restore`` (``React_restore_minimal``) remembers every host whose row
shows User or Privileged and restores the lowest-index remembered host, one per step;
``react_decoy`` (``Restore_decoys``) places the next decoy of its plan where that would sleep.
``hop_guard`` (:class:`HopGuardBlue`) is jaxrl's ``jaxrl.envs.cyber.blue.hop_guard`` on the same
table: a B_line guard that restores the Enterprise host B_line hops through and times its decoys
there around Red's scans (``tests/test_cyber.py`` checks the two pick the same action at every
step).

Blind Blues, which never read the table (``MIXES``: the chance of each action kind, the host
and decoy type then uniform, drawn from their own ``numpy`` generator seeded ``--seed``; jaxrl's
``jaxrl.envs.cyber.blue`` draws the same distribution): ``random`` is uniform over the 145 actions,
``remove_mix`` mostly Removes, ``decoy_mix`` mostly decoys; both restore rarely, so Red gets far.
Every reference (``bench/research/cage2_cyborg_reference.json``, read by
``bench.research.cyber_fidelity``) was run as, e.g.::

    cd /work/venvs/src/Debugged_CybORG/CybORG && PYTHONPATH=. /work/venvs/cage/bin/python \
        /work/main/bench/research/cyber_peer.py --red Meander --blue decoy_mix \
        --episodes 200 --tag fixed

``--blue policy --policy D.npz`` plays a trained defender (``bench.cyber_export``'s ``.npz``,
:class:`PolicyBlue`); with ``--meander-policy M.npz`` as well, one defender per Red behind the
Red fingerprint (:class:`PairBlue`, as ``bench.cyber_defender --b-line-run B --meander-run M``).

``--trace FILE.npz`` also records every step of every episode (``TRACE_FIELDS``: the reward,
Blue's action and table, Red's action, exploit, success and B_line stage, and Red's hold on
each host); ``python -m bench.research.cyber_breakdown --trace`` writes the same for jaxrl's
CAGE2 and ``python -m bench.research.cyber_trace`` finds where the two part.

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
# Decoy, Restore (the host, and the decoy type, then uniform). jaxrl.envs.cyber.blue.MIXES agrees.
KINDS = ("sleep", "monitor", "analyse", "remove", "decoy", "restore")
KIND_SIZES = (1, 1, 13, 13, 104, 13)  # actions of each kind, in the EnumActionWrapper order
MIXES = {
    "random": tuple(n / 145 for n in KIND_SIZES),  # uniform over the 145 actions
    "remove_mix": (0.2, 0.0, 0.1, 0.6, 0.05, 0.05),
    "decoy_mix": (0.1, 0.0, 0.05, 0.05, 0.78, 0.02),
}
BLUES = ("sleep", "react_restore", "react_decoy", "hop_guard", *MIXES, "policy")

# hop_guard (jaxrl.envs.cyber.blue.hop_guard, the same rules on the 52-bit table): host indices in
# the table's alphabetical order, decoys as (host, type).
ENTERPRISE0, ENTERPRISE1, ENTERPRISE2, OP_SERVER0, USER2 = 1, 2, 3, 7, 10
GUARD_USERS = (9, 10, 11, 12)  # User1-4
GUARD_NEXT_HOP = {9: ENTERPRISE1, 10: ENTERPRISE1, 11: ENTERPRISE0, 12: ENTERPRISE0}
GUARD_OPENING = ((USER2, "Femitter"), (USER2, "Tomcat"))
GUARDED = (OP_SERVER0, ENTERPRISE2, ENTERPRISE1, ENTERPRISE0)
HOP_DECOYS = {
    ENTERPRISE1: ((ENTERPRISE1, "Femitter"),),
    ENTERPRISE0: ((ENTERPRISE0, "HarakaSMPT"), (ENTERPRISE0, "Tomcat"), (ENTERPRISE0, "Apache")),
}
GUARD_DECOYS = ((ENTERPRISE2, "Femitter"), (OP_SERVER0, "HarakaSMPT"), (OP_SERVER0, "Apache"),
                (OP_SERVER0, "Tomcat"))  # fmt: skip
RESTORE_QUIET = 2


def decoy_action(host: int, decoy: str) -> int:
    """CybORG's Decoy action index for ``decoy`` on ``host``."""
    return DECOY + 13 * DECOY_TYPES.index(decoy) + host


class HopGuardBlue:
    """jaxrl's ``hop_guard`` (``envs/cyber/blue.py``) on CybORG's table; :meth:`reset` per
    episode."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.step, self.hop, self.restored_at = 0, -1, -10
        self.placed: set[tuple[int, str]] = set()

    def act(self, obs: np.ndarray, success: bool | None = None) -> int:
        del success
        rows = np.asarray(obs[:52]).reshape(13, 4) > 0.5
        active, compromised = rows[:, 0], rows[:, 3]
        if self.hop < 0:
            seen = [host for host in GUARD_USERS if active[host]]
            if seen:
                self.hop = GUARD_NEXT_HOP[seen[0]]
        beyond = active[ENTERPRISE2] or active[OP_SERVER0]
        quiet = self.step - self.restored_at <= RESTORE_QUIET
        need = [h for h in GUARDED if compromised[h] or (h == self.hop and beyond and not quiet)]
        hop_busy = (self.hop >= 0 and active[self.hop]) or self.step == self.restored_at + 1
        if need:
            host = need[0]
            self.placed = {(h, d) for h, d in self.placed if h != host}
            if host == self.hop:
                self.restored_at = self.step
            action = RESTORE + host
        elif self.step < len(GUARD_OPENING):
            self.placed.add(GUARD_OPENING[self.step])
            action = decoy_action(*GUARD_OPENING[self.step])
        else:
            wish = [*HOP_DECOYS.get(self.hop, ()), *GUARD_DECOYS]
            wish = [w for w in wish if w not in self.placed and not (w[0] == self.hop and hop_busy)]
            action = 0
            if wish:
                self.placed.add(wish[0])
                action = decoy_action(*wish[0])
        self.step += 1
        return action


class MixBlue:
    """A blind Blue drawing each action from ``MIXES[name]``; ``seed`` seeds its generator."""

    def __init__(self, name: str, seed: int):
        self.weights = np.asarray(MIXES[name])
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        pass

    def act(self, obs: np.ndarray, success: bool | None = None) -> int:
        del obs, success
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

    def act(self, obs: np.ndarray, success: bool | None = None) -> int:
        del success
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


class PolicyBlue:
    """A trained jaxrl defender (``bench.cyber_export``'s ``.npz``), played with numpy only.

    It rebuilds jaxrl's observation (``jaxrl.envs.cyber.env.observe``) from what a Blue agent has in
    CybORG: the 52-bit table, its own actions and their success (a decoy is in place once
    CybORG reports its Decoy action succeeded, until a Restore of the host), and the step. It
    runs the network (MLP torso, GRU, actor head) and takes the most probable action, as
    ``bench.cyber_defender`` does; a reduced-set decoy macro places the host's first decoy in
    the exported greedy order that is not in place and whose port no decoy in place holds.
    Call :meth:`reset` per episode and :meth:`act` with each observation and whether the
    previous action succeeded.
    """

    HOSTS, DECOYS = 13, 8
    SLEEP, ANALYSE, REMOVE, DECOY, RESTORE, ACTIONS = 0, 2, 15, 28, 132, 145

    def __init__(self, path: str, fix_bugs: bool = False):
        data = np.load(path)
        self.params = {k[len("params/") :]: data[k] for k in data.files if k.startswith("params/")}
        self.obs_mode = str(data["obs_mode"])
        self.action_set = str(data["action_set"])
        self.activation = {"tanh": np.tanh, "relu": lambda x: np.maximum(x, 0.0)}[
            str(data["activation"])
        ]
        self.core = str(data["core"])
        self.core_name = "core" if bool(data["shared_torso"]) else "actor_core"
        self.torso_layers = int(data["torso_layers"])
        self.reduced_first = data["reduced_first"]
        self.reduced_hosts = data["reduced_hosts"]
        self.decoy_order = data["decoy_order"]
        self.compatible = data["decoy_compatible"]
        self.decoy_exploit = data["decoy_exploit_fixed" if fix_bugs else "decoy_exploit_2_1"]
        self.slots = np.nonzero(self.compatible)
        self.reset()

    def reset(self) -> None:
        gru = self.core == "gru"
        size = self.params[f"{self.core_name}/input/bias"].shape[0] // 3 if gru else 0
        self.hidden = np.zeros(size, np.float32)
        self.time = 0
        self.scan_history = np.zeros(self.HOSTS, np.int64)  # 0 never, 1 before, 2 this step
        self.decoys = np.zeros((self.HOSTS, self.DECOYS), bool)
        self.last_action = -1
        self.last_seen = np.zeros(self.HOSTS, bool)

    def _record(self, table: np.ndarray, success: bool | None) -> None:
        """The previous action's outcome and the table's activity into the bookkeeping."""
        a = self.last_action
        if self.DECOY <= a < self.RESTORE and success:
            self.decoys[(a - self.DECOY) % self.HOSTS, (a - self.DECOY) // self.HOSTS] = True
        if a >= self.RESTORE:
            self.decoys[a - self.RESTORE] = False
        seen = np.asarray(table[:52]).reshape(self.HOSTS, 4)[:, 0] == 1
        self.scan_history = np.where(seen, 2, np.minimum(self.scan_history, 1))
        if seen.any():
            self.last_seen = seen

    def observation(self, table: np.ndarray) -> np.ndarray:
        """jaxrl's observation, float32 [52], [79] or [151], from the bookkeeping."""
        parts = [np.asarray(table[:52], np.float32)]
        if self.obs_mode != "table":
            parts += [
                self.scan_history / 2.0,
                self.decoys.sum(axis=1) / 4.0,
                [self.time / 100.0],
            ]
        if self.obs_mode == "history":
            a = self.last_action
            first = [self.SLEEP, self.ANALYSE, self.REMOVE, self.DECOY, self.RESTORE, self.ACTIONS]
            kinds = [first[k] <= a < first[k + 1] for k in range(5)]
            hosts = (np.arange(self.HOSTS) == (a - self.ANALYSE) % self.HOSTS) & (a >= self.ANALYSE)
            parts += [kinds, hosts, self.decoys[self.slots], self.last_seen]
        return np.concatenate([np.asarray(p, np.float32) for p in parts])

    def _dense(self, name: str, x: np.ndarray) -> np.ndarray:
        return x @ self.params[f"{name}/kernel"] + self.params[f"{name}/bias"]

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """One step of the network from the carried GRU state (which it advances)."""
        x = obs
        for i in range(self.torso_layers):
            x = self.activation(self._dense(f"actor_torso/Dense_{i}", x))
        if self.core == "gru":
            h = self.hidden
            xr, xz, xn = np.split(self._dense(f"{self.core_name}/input", x), 3)
            hr, hz, hn = np.split(self._dense(f"{self.core_name}/cell/hidden", h), 3)
            r = 1.0 / (1.0 + np.exp(-(xr + hr)))
            z = 1.0 / (1.0 + np.exp(-(xz + hz)))
            n = np.tanh(xn + r * hn)
            self.hidden = x = (1.0 - z) * n + z * h
        return self._dense("actor_head", x)

    def cyborg_action(self, action: int) -> int:
        """CybORG's action id for the network's ``action``
        (``jaxrl.envs.cyber.env.expand_action``)."""
        if self.action_set == "full":
            return int(action)
        kind, slot = divmod(int(action), len(self.reduced_hosts))
        host = int(self.reduced_hosts[slot])
        offset = 0
        if self.reduced_first[kind] == self.DECOY:
            held = set(self.decoy_exploit[self.decoys[host]].tolist())  # lured exploits (ports)
            order = [d for d in self.decoy_order[host] if d >= 0]
            free = [
                d for d in order if self.compatible[host, d] and self.decoy_exploit[d] not in held
            ]
            offset = self.HOSTS * (free[0] if free else order[0])
        return int(self.reduced_first[kind] + offset + host)

    def act(self, obs: np.ndarray, success: bool | None = None) -> int:
        self._record(obs, success)
        action = int(np.argmax(self.logits(self.observation(obs))))
        self.last_action = self.cyborg_action(action)
        self.time += 1
        return self.last_action


class PairBlue:
    """One defender per Red behind the Red fingerprint, as ``bench.cyber_defender --b-line-run B
    --meander-run M`` plays them (``jaxrl.envs.cyber.fingerprint``, restated here without jax).

    Both :class:`PolicyBlue` players read every observation and advance their GRU states; the
    B_line defender's action is played until the observation of step :attr:`DECIDE_AT` shows
    Red activity on two hosts or more (Meander port-scans the user IPs one by one), from then on
    the Meander defender's, for the rest of the episode. Both keep the action played as their
    own (the decoys placed and the last action are the episode's, whichever network chose).
    """

    UNDECIDED, BLINE, MEANDER = -1, 1, 2  # the verdicts, jaxrl.envs.cyber.red's Red indices
    DECIDE_AT = 3  # fingerprint.DECIDE_AT

    def __init__(self, b_line: str, meander: str, fix_bugs: bool = False):
        self.players = (PolicyBlue(b_line, fix_bugs), PolicyBlue(meander, fix_bugs))
        for player in self.players:
            if player.obs_mode == "table":
                raise ValueError("a pair needs the extended or history observation (scan history)")
        self.reset()

    def reset(self) -> None:
        for player in self.players:
            player.reset()
        self.verdict = self.UNDECIDED

    def update_verdict(self) -> int:
        """The verdict after the observation just recorded (``fingerprint.update_verdict``)."""
        b_line = self.players[0]
        if self.verdict == self.UNDECIDED and b_line.time >= self.DECIDE_AT:
            touched = int(np.sum(b_line.scan_history > 0))
            self.verdict = self.MEANDER if touched >= 2 else self.BLINE
        return self.verdict

    def act(self, obs: np.ndarray, success: bool | None = None) -> int:
        actions = []
        for player in self.players:
            player._record(obs, success)
            actions.append(int(np.argmax(player.logits(player.observation(obs)))))
        chosen = 1 if self.update_verdict() == self.MEANDER else 0
        played = self.players[chosen].cyborg_action(actions[chosen])
        for player in self.players:
            player.last_action = played
            player.time += 1
        return played


# ---- per-step traces (--trace; compared with jaxrl's by bench.research.cyber_trace) ---------

# jaxrl.envs.cyber.tables' HOSTS, SUBNETS and EXPLOITS, and jaxrl.envs.cyber.red's RED_* kinds, in
# order.
HOSTS = ("Defender", "Enterprise0", "Enterprise1", "Enterprise2", "Op_Host0", "Op_Host1",
         "Op_Host2", "Op_Server0", "User0", "User1", "User2", "User3", "User4")  # fmt: skip
SUBNETS = ("Enterprise", "Operational", "User")
RED_ACTIONS = ("Sleep", "DiscoverRemoteSystems", "DiscoverNetworkServices",
               "ExploitRemoteService", "PrivilegeEscalate", "Impact")  # fmt: skip
EXPLOITS = ("FTPDirectoryTraversal", "HarakaRCE", "SQLInjection", "HTTPSRFI", "HTTPRFI",
            "EternalBlue", "BlueKeep", "SSHBruteForce")  # fmt: skip
# What a trace holds per episode and step: name -> (dtype, trailing shape). Codes: red_kind
# indexes RED_ACTIONS (-1 another action); red_target is a host (HOSTS) or, for a subnet scan,
# a subnet (SUBNETS), -1 none; red_exploit the concrete exploit (EXPLOITS), -1 none; red_stage
# B_line's stage of the action (-1 another Red); red_access per host 0 no Red session, 1 a user
# shell, 2 root/SYSTEM (what CybORG 2.1's reward counts); table Blue's 52 bits after the step.
TRACE_FIELDS = {
    "reward": (np.float32, ()),
    "blue_action": (np.int16, ()),
    "red_kind": (np.int8, ()),
    "red_target": (np.int8, ()),
    "red_success": (np.bool_, ()),
    "red_exploit": (np.int8, ()),
    "red_stage": (np.int8, ()),
    "red_access": (np.int8, (len(HOSTS),)),
    "table": (np.int8, (52,)),
}


def new_trace(episodes: int, steps: int) -> dict[str, np.ndarray]:
    """Empty trace arrays, each ``[episodes, steps, ...]`` (``TRACE_FIELDS``)."""
    return {
        name: np.zeros((episodes, steps, *shape), dtype)
        for name, (dtype, shape) in TRACE_FIELDS.items()
    }


def record_red(trace: dict[str, np.ndarray], episode: int, t: int, cyborg) -> None:
    """Red's action, its outcome and Red's sessions after step ``t`` of a CybORG episode."""
    controller = cyborg.environment_controller
    state = controller.state
    action = cyborg.get_last_action("Red")
    name = type(action).__name__
    kind = RED_ACTIONS.index(name) if name in RED_ACTIONS else -1
    target = -1
    if hasattr(action, "ip_address"):
        target = HOSTS.index(state.ip_addresses[action.ip_address])
    elif getattr(action, "hostname", None) in HOSTS:
        target = HOSTS.index(action.hostname)
    elif hasattr(action, "subnet"):
        names = {cidr: subnet for subnet, cidr in state.subnet_name_to_cidr.items()}
        target = SUBNETS.index(names[action.subnet])
    # A cached ExploitRemoteService keeps its last sub-action: read it once, then clear it.
    sub = type(getattr(action, "sub_action", None)).__name__
    if hasattr(action, "sub_action"):
        action.sub_action = None
    agent = controller.agent_interfaces["Red"].agent
    access = np.zeros(len(HOSTS), np.int8)
    for session in state.sessions["Red"].values():
        level = 2 if session.username in ("root", "SYSTEM") else 1
        access[HOSTS.index(session.host)] = max(access[HOSTS.index(session.host)], level)
    trace["red_kind"][episode, t] = kind
    trace["red_target"][episode, t] = target
    trace["red_success"][episode, t] = str(cyborg.get_observation("Red")["success"]) == "TRUE"
    trace["red_exploit"][episode, t] = EXPLOITS.index(sub) if sub in EXPLOITS else -1
    trace["red_stage"][episode, t] = agent.action if type(agent).__name__ == "B_lineAgent" else -1
    trace["red_access"][episode, t] = access


TABLE_STATES = ("scan", "exploit", "unknown", "user", "privileged")  # table_rates' columns


def table_states(tables: np.ndarray) -> np.ndarray:
    """Each host's row as ``TABLE_STATES`` indicators, bool [episodes, steps, 13, 5], from
    Blue's 52-bit tables [episodes, steps, 52] (13 hosts x 4 bits: activity Scan 10 / Exploit
    11, compromised Unknown 10 / User 01 / Privileged 11)."""
    bits = np.asarray(tables).reshape(*np.shape(tables)[:2], 13, 4) == 1
    return np.stack(
        [bits[..., 0] & ~bits[..., 1], bits[..., 0] & bits[..., 1],
         bits[..., 2] & ~bits[..., 3], ~bits[..., 2] & bits[..., 3], bits[..., 2] & bits[..., 3]],
        axis=-1,
    )  # fmt: skip


def table_rates(tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How often each host's row shows each of ``TABLE_STATES``: mean and SE over episodes.

    Args:
      tables: Blue's 52-bit table after each step, [episodes, steps, 52] (13 hosts x 4 bits:
        activity Scan 10 / Exploit 11, compromised Unknown 10 / User 01 / Privileged 11).

    Returns:
      ``(mean, se)``, float64 [13, 5] each: per episode the fraction of steps in that state,
      then its mean over episodes and the standard error of that mean.
    """
    per_episode = table_states(tables).mean(axis=1)  # [episodes, 13, 5]
    se = per_episode.std(axis=0, ddof=1) / np.sqrt(len(per_episode))
    return per_episode.mean(axis=0), se


def make_blue(
    blue: str,
    seed: int,
    policy: str | None = None,
    fix_bugs: bool = False,
    meander_policy: str | None = None,
):
    """The Blue named ``blue`` (``policy``: the ``.npz`` of ``bench.cyber_export``; with
    ``meander_policy`` too, the pair of :class:`PairBlue`, ``policy`` playing B_line)."""
    if blue == "policy":
        if not policy:
            raise ValueError("--blue policy needs --policy FILE.npz (bench.cyber_export)")
        if meander_policy:
            return PairBlue(policy, meander_policy, fix_bugs)
        return PolicyBlue(policy, fix_bugs)
    if meander_policy:
        raise ValueError("--meander-policy needs --blue policy")
    if blue == "hop_guard":
        return HopGuardBlue()
    return MixBlue(blue, seed) if blue in MIXES else ScriptedBlue(blue)


def run(
    red: str,
    blue: str,
    episodes: int,
    seed: int,
    tables: np.ndarray | None = None,
    policy: str | None = None,
    fix_bugs: bool = False,
    trace: dict[str, np.ndarray] | None = None,
    meander_policy: str | None = None,
) -> np.ndarray:
    """Blue's returns after 30, 50 and 100 steps, float [episodes, 3].

    ``tables``, int8 [episodes, 100, 52] if given, receives Blue's table after every step;
    ``trace`` (:func:`new_trace` of ``episodes`` x 100) every step's record.
    ``policy`` and ``fix_bugs``: the ``--blue policy`` defender and the bug setting its decoy
    macro assumes (the CybORG on the path decides the rules); ``meander_policy`` makes
    ``policy`` the B_line half of a :class:`PairBlue`.
    """
    from CybORG import CybORG  # noqa: I001 (only in the peer's environment)
    from CybORG.Agents import B_lineAgent, RedMeanderAgent, SleepAgent
    from CybORG.Agents.Wrappers import ChallengeWrapper

    agents = {"B_line": B_lineAgent, "Meander": RedMeanderAgent, "Sleep": SleepAgent}
    random.seed(seed)
    np.random.seed(seed)
    path = str(inspect.getfile(CybORG))[:-10] + "/Shared/Scenarios/Scenario2.yaml"
    cyborg = CybORG(path, "sim", agents={"Red": agents[red]})
    wrapper = ChallengeWrapper(env=cyborg, agent_name="Blue")
    agent = make_blue(blue, seed, policy, fix_bugs, meander_policy)
    returns = np.zeros((episodes, len(LENGTHS)))
    for episode in range(episodes):
        obs = wrapper.reset()
        obs = obs[0] if isinstance(obs, tuple) else obs  # 2.1 returns obs, the fixed one a pair
        agent.reset()
        total, success = 0.0, None
        for t in range(max(LENGTHS)):
            action = agent.act(obs, success)
            obs, reward = wrapper.step(action)[:2]
            success = str(wrapper.get_observation("Blue").get("success")) == "TRUE"
            total += reward
            if tables is not None:
                tables[episode, t] = np.asarray(obs[:52])
            if trace is not None:
                trace["reward"][episode, t] = reward
                trace["blue_action"][episode, t] = action
                trace["table"][episode, t] = np.asarray(obs[:52])
                record_red(trace, episode, t, cyborg)
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
    parser.add_argument("--policy", help="--blue policy: a bench.cyber_export .npz")
    parser.add_argument(
        "--meander-policy",
        help="--blue policy: the Meander defender's .npz; --policy then plays B_line (PairBlue)",
    )
    parser.add_argument(
        "--trace", help="also write every step's record to this .npz (bench.research.cyber_trace)"
    )
    parser.add_argument(
        "--fix-bugs", action="store_true", help="--blue policy: its decoy macro's bug setting"
    )
    args = parser.parse_args()
    if args.blue == "policy" and not args.policy:
        parser.error("--blue policy needs --policy FILE.npz (bench.cyber_export)")
    if args.meander_policy and args.blue != "policy":
        parser.error("--meander-policy needs --blue policy")
    tables = np.zeros((args.episodes, max(LENGTHS), 52), np.int8) if args.table else None
    trace = new_trace(args.episodes, max(LENGTHS)) if args.trace else None
    returns = run(args.red, args.blue, args.episodes, args.seed, tables, args.policy, args.fix_bugs,
                  trace, args.meander_policy)  # fmt: skip
    if trace is not None:
        np.savez_compressed(args.trace, **trace)
    if tables is not None:
        mean, se = table_rates(tables)
        row = {"bugs": args.tag, "red": args.red, "blue": args.blue, "episodes": args.episodes,
               "seed": args.seed, "mean": np.round(mean, 4).tolist(),
               "se": np.round(se, 4).tolist()}  # fmt: skip
        print("TABLE", json.dumps(row), flush=True)
    meander = {"meander_policy": args.meander_policy} if args.meander_policy else {}
    for i, length in enumerate(LENGTHS):
        values = returns[:, i]
        row = {"bugs": args.tag, "red": args.red, "blue": args.blue, "steps": length,
               "policy": args.policy, **meander, "episodes": args.episodes,
               "mean": round(float(values.mean()), 2),
               "se": round(float(values.std(ddof=1) / np.sqrt(len(values))), 2)}  # fmt: skip
        print("RESULT", json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
