"""CAGE-2 (CybORG 2.1 Scenario 2) as a pure-JAX gymnax environment for the Blue defender.

Network: 13 hosts in 3 subnets (:mod:`jaxrl.envs.cyber.tables`). Red starts with SYSTEM on User0
and walks User -> Enterprise -> Op_Server0, whose service it stops (Impact). Blue acts first
in each step, then Red (CybORG's agent order); Blue's Monitor runs after every step.

Blue actions, ``Discrete(145)`` in CybORG's order (``EnumActionWrapper``): 0 Sleep, 1 Monitor,
2-14 Analyse(host), 15-27 Remove(host), 28-131 Decoy(type, host) with ``28 + 13 * type + host``
for the types Apache, Femitter, HarakaSMPT, Smss, SSHD, Svchost, Tomcat, Vsftpd, and
132-144 Restore(host); hosts in alphabetical order. ``action_set="reduced"`` plays the 36
actions of CardiffUni's winning entry instead (Analyse, Remove, a decoy macro and Restore on
Enterprise0-2, Op_Server0, User1-4 and the Defender; :func:`expand_action` turns each into the
CybORG action above, the macro into the host's next free decoy in Cardiff's greedy order).

- Analyse finds a file Red dropped (exploits other than SSH brute force, and escalations of a
  user shell; density 0.9): the host shows Privileged. An escalation where Red already holds
  root/SYSTEM (User0, a root-landing exploit) drops none.
- Remove (before Red acts) kills Red's user-level shells whose process Blue's Monitor flagged:
  a detected exploit's reverse shell. A root/SYSTEM shell survives (StopProcess refuses it),
  and so do an SSH brute-force shell (its connection event carries no pid) and an exploit Blue
  did not detect. A shell escalated in an earlier step is root and survives; Red's escalation
  in the same step comes too late (Blue acts first).
- Decoy places the decoy service if the host accepts it and its port is free. An exploit
  aimed at a decoy fails (and shows as a scan); where a genuine service holds the decoy's
  port (2.1's Vsftpd opens 80 on User3/User4), the exploit hits the genuine one.
- Restore (cost 1) resets the host: Red's access, its files, the decoys and (on Op_Server0)
  the Impact. Red keeps User0. CybORG's host backup loses the pid of Op_Server0's OT service,
  so once Op_Server0 has been restored, Red's Impact still succeeds but stops nothing: no
  -10 for the rest of the episode (CybORG 2.1 and CybORG++ alike, ``Host.create_backup``).

Red: B_line, Meander or Sleep (:mod:`jaxrl.envs.cyber.red`), chosen by ``EnvParams.red_agent``.
An exploit picks among the services Red saw when it last port-scanned the host (a rescan
replaces what it knew, so a decoy placed after the scan is not chosen, and one removed by a
Restore is forgotten only at the next scan): the highest-weight one 75% of the time, otherwise
a random other one. An exploit aimed at a decoy a Restore has since removed finds no process on
the port: it fails and shows nothing (mini_CAGE's "femitter stuck" is this stale port).
Some exploits land as root/SYSTEM and count as privileged at once; a privilege escalation
needs a live shell there and reveals the host's next hop.

Observation (``obs_mode="table"``), float32 [52]: per host (alphabetical) 2 activity bits
(None 00, Scan 10, Exploit 11; this step only) and 2 compromised bits (No 00, Unknown 10,
User 01, Privileged 11; kept until changed). A port scan always shows; a successful exploit
shows as Exploit with probability 0.95 (SSHBruteForce: always), else as Scan; a detected
exploit marks the host User. An SSH brute force that reaches an SSH process shows as Exploit
(and marks User) even when it fails (the Defender's SSH, an SSHD decoy).
``obs_mode="extended"`` appends, float32 [79]: per host the scan history (0 never, 0.5 before,
1 this step), per host the number of decoys in place / 4, and the step / 100.
``obs_mode="history"`` appends to that, float32 [151], what a Blue agent knows of its own
record and the entries fed their networks: the kind of Blue's last CybORG action (one-hot:
Sleep or Monitor, Analyse, Remove, Decoy, Restore; zeros before the first) and its host
(one-hot [13], zeros for Sleep and Monitor), which decoy types are in place (one bit per
compatible host and type, [41] in ``tables.DECOY_COMPATIBLE``'s row-major order), and the host
of the latest Red activity Blue's table showed (one-hot [13], kept until activity shows
elsewhere; CardiffUni's persistent scan marker).

Reward (Blue), float32, rounded to 0.1: minus the sum over hosts where Red holds root/SYSTEM
(with ``fix_bugs``: any shell) (1.0 for Enterprise0-2 and Op_Server0, 0.1 for User1-4,
Op_Host0-2 and Defender, 0 for User0),
minus 10 while Op_Server0 is impacted, minus 1 per Restore (User0's too, which only clears
its decoys). ``info["reward_terms"]`` holds the three terms (``access``, ``impact``, ``restore``).
No termination; the episode is cut at its length (truncated).

Bugs (``fix_bugs``). ``False`` keeps the score-changing bugs of CybORG 2.1 as released (the
official leaderboard's env): the Vsftpd decoy opens port 80 (an Apache look-alike), User3's
SQL service hides behind the 3389 typo and BlueKeep fails there, EternalBlue fails on
Enterprise1/2, and the Blue table reads an exploit as a scan when GreenAgent scans the same
host. ``True`` is CybORG++'s debugged CybORG (``Debugged_CybORG``), which also fixes the reward
to count the sessions of every username Red's exploits run as, so every Red shell counts.

GreenAgent (``green_agent``): off by default, as in Scenario2 and the official evaluation.
On, it port-scans one of User0-4 and Enterprise0-2 half the time (Scan activity, and the
2.1 masking above).

Simplifications (``bench.research.cyber_fidelity`` checks the scores that follow from them):

- No IP addresses, ports, processes, files or sessions: a host is Red's access level (none,
  shell, escalated), whether the shell runs as root/SYSTEM, a dropped-file flag, the decoys in
  place and the exploits Red learned from port scans. Services per host, root-landing
  exploits and decoy compatibility are the tables in :mod:`jaxrl.envs.cyber.tables` (CybORG++'s
  appendix and mini_CAGE).
- Routing is one rule: the Operational subnet refuses traffic from User0 (where Red's actions
  start) unless Red holds a session on some Enterprise host (CybORG's
  ``check_for_enterprise_sessions``). Without one, a sweep of that subnet fails, an exploit
  there fails unseen, and a port scan there succeeds but learns nothing and shows nothing.
  Red discovers Enterprise hosts through a user host and Op_Server0 through Enterprise2.
- Red's action space (the IPs, hostnames and subnets it knows) is kept only as far as Meander
  reads it (:class:`jaxrl.envs.cyber.red.MeanderBelief`); B_line's cached actions need none of it.
- Impact needs root on Op_Server0 (CybORG: any Red session there once an escalation found the
  OT service; the scripted Reds only impact after escalating there).
- Detection of a failed exploit: a brute force that reaches an SSH process shows as Exploit,
  another decoy hit as Scan (not an FTP exploit at CybORG++'s Vsftpd decoy, a web server on
  port 21 that the exploit does not find); any other failure shows nothing. CybORG's table
  reads a host's new processes of the step together, Blue's own new decoy among them: a decoy
  hit on a host where Blue placed a decoy in the same step shows as Exploit and marks the host
  User (three items on one port), and a missed exploit there shows nothing (the decoy's service
  first), nor does a port scan of a host left with two open ports (Enterprise0, Op_Host0-2 or
  Op_Server0 with its first decoy: a Scan needs three ports). Impact and privilege escalation
  show nothing.
- Decoy compatibility is the host's initial one; a decoy also refuses a port another decoy
  already holds (Femitter/Vsftpd on 21 when fixed, Apache/Vsftpd on 80 in 2.1).
- Remove's reported success and Analyse/Monitor's raw observations are not modelled: Blue sees
  only the table.

Episode settings are array leaves of :class:`EnvParams`, so one compiled step serves every
Red agent, length, bug and Green setting: ``red_agent=-1`` draws Red per episode (B_line with
probability ``red_bline_prob``, else Meander) and ``max_steps_in_episode<=0`` draws the
length per episode among 30, 50 and 100 (the evaluation lengths).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl.envs.cyber import red
from jaxrl.envs.cyber import tables as tb
from jaxrl.envs.domains import UNIT, Choices, param

OBS_MODES = ("table", "extended", "history")
ACTION_SETS = ("full", "reduced")  # CybORG's 145 actions | CardiffUni's 36 (tables.REDUCED_*)
RED_AGENTS = Choices({-1: "drawn per episode", 0: "Sleep", 1: "B_line", 2: "Meander"})
TABLE_DIM = 4 * tb.NUM_HOSTS  # 52
EXTENDED_DIM = TABLE_DIM + 2 * tb.NUM_HOSTS + 1  # 79
# Blue's last action: kinds (Sleep/Monitor, Analyse, Remove, Decoy, Restore) and host.
LAST_KINDS = 5
DECOY_SLOTS = np.nonzero(np.asarray(tb.DECOY_COMPATIBLE))  # (host, type) pairs, row-major: 41
HISTORY_DIM = EXTENDED_DIM + LAST_KINDS + 2 * tb.NUM_HOSTS + len(DECOY_SLOTS[0])  # 151
OBS_DIMS = {"table": TABLE_DIM, "extended": EXTENDED_DIM, "history": HISTORY_DIM}
EPISODE_LENGTHS = np.array([30, 50, 100], np.int32)  # drawn when max_steps_in_episode <= 0

# Blue table codes (int32) and their bits.
ACT_NONE, ACT_SCAN, ACT_EXPLOIT = 0, 1, 2
COMP_NO, COMP_UNKNOWN, COMP_USER, COMP_PRIVILEGED = 0, 1, 2, 3

REWARD_TERMS = ("access", "impact", "restore")


class EnvParams(struct.PyTreeNode):
    """Episode settings. Every field but ``obs_mode`` is an array leaf (no recompiles)."""

    red_agent: int = param(1, RED_AGENTS)  # 0 Sleep, 1 B_line, 2 Meander, -1 drawn per episode
    red_bline_prob: float = param(0.5, UNIT)  # red_agent=-1: probability of B_line (else Meander)
    max_steps_in_episode: int = 100  # episode length; <= 0 draws 30, 50 or 100 per episode
    fix_bugs: bool = False  # False keeps CybORG 2.1's score-changing bugs
    green_agent: bool = False  # True: CybORG's GreenAgent port-scans half the time
    obs_mode: str = param("table", Choices({m: m for m in OBS_MODES}), pytree_node=False)
    action_set: str = param("full", Choices({a: a for a in ACTION_SETS}), pytree_node=False)

    def __post_init__(self):
        if self.obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {self.obs_mode!r}")
        if self.action_set not in ACTION_SETS:
            raise ValueError(f"action_set must be one of {ACTION_SETS}, got {self.action_set!r}")


class EnvState(struct.PyTreeNode):
    """Per-instance state: the true network, Red's knowledge and Blue's table."""

    time: jax.Array  # () int32, steps taken
    max_steps: jax.Array  # () int32, this episode's length
    red_agent: jax.Array  # () int32, this episode's Red (0 Sleep, 1 B_line, 2 Meander)
    access: jax.Array  # [13] int32, Red's access per host: 0 none, 1 shell, 2 escalated
    root_shell: jax.Array  # [13] bool, Red's shell there runs as root/SYSTEM (reward counts it)
    malware: jax.Array  # [13] bool, a file Red dropped (density 0.9: Analyse finds it)
    decoys: jax.Array  # [13, 8] bool, decoy services in place
    impacted: jax.Array  # () bool, Op_Server0's service stopped
    ot_lost: jax.Array  # () bool, Op_Server0 was restored: Impact no longer stops its service
    hidden_shell: jax.Array  # [13] bool, Red has a user shell there that Remove cannot kill
    known: jax.Array  # [13] bool, hosts Red has discovered
    scanned: jax.Array  # [13] bool, hosts Red has port-scanned
    red_ports: jax.Array  # [13, 8] bool, exploits Red saw offered in its port scans
    bline_stage: jax.Array  # () int32, B_line's next stage
    bline_user: jax.Array  # () int32, B_line's user-subnet target (User1-4)
    meander: red.MeanderBelief  # Meander's lists and Red's known hostnames and subnets
    activity: jax.Array  # [13] int32, Blue table activity this step (ACT_*)
    compromised: jax.Array  # [13] int32, Blue table compromised column (COMP_*)
    scan_history: jax.Array  # [13] int32, 0 never scanned, 1 before, 2 this step
    last_action: jax.Array  # () int32, Blue's last CybORG action (-1 before the first)
    last_seen: jax.Array  # [13] bool, where Blue's table last showed Red activity


class RedOutcome(struct.PyTreeNode):
    """What Red's action did (internal to one step)."""

    state: EnvState  # state after Red's action
    success: jax.Array  # () bool
    exploit_seen: jax.Array  # [13] bool, a detected successful exploit (Blue marks User)
    brute_force: jax.Array  # () bool, the exploit was SSHBruteForce
    decoy_hit: jax.Array  # [13] bool, an exploit ran into a decoy (two connections, one port)
    unseen_exploit: jax.Array  # [13] bool, a successful exploit Monitor missed (one connection)
    port_scan: jax.Array  # [13] bool, a routed port scan (one connection per open port)


def _bug_tables(fix_bugs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(services [13, 8], broken [13, 8], decoy_exploit [8])`` for the bug setting."""
    services = jnp.where(fix_bugs, tb.SERVICES_FIXED, tb.SERVICES_BUGGY)
    broken = jnp.where(fix_bugs, tb.BROKEN_ALWAYS, tb.BROKEN_BUGGY)
    decoy_exploit = jnp.where(fix_bugs, tb.DECOY_EXPLOIT_FIXED, tb.DECOY_EXPLOIT_BUGGY)
    return services, broken, decoy_exploit


def decoy_offers(decoys: jax.Array, decoy_exploit: jax.Array) -> jax.Array:
    """Exploits the decoys in place lure, bool [13, 8] from ``decoys`` bool [13, 8]."""
    lure = decoy_exploit[:, None] == jnp.arange(tb.NUM_EXPLOITS)[None, :]  # [decoy, exploit]
    return jnp.any(decoys[:, :, None] & lure[None], axis=1)


class StepDraws(struct.PyTreeNode):
    """The step's random numbers, all uniform in [0, 1), one slice per consumer.

    One ``jax.random.uniform`` call per step (threefry calls dominate a step this small on CPU).
    """

    meander_scan: jax.Array  # [13] Meander's random port-scan target
    meander_exploit: jax.Array  # [13] Meander's random escalation or exploit target
    exploit_top: jax.Array  # () whether the exploit is the top-weight one (p = 0.75)
    exploit_other: jax.Array  # [8] which other exploit otherwise
    detection: jax.Array  # () whether a successful exploit is seen (p = 0.95)
    green_acts: jax.Array  # () whether GreenAgent port-scans (p = 0.5)
    green_host: jax.Array  # () which host it scans


NUM_STEP_DRAWS = 2 * tb.NUM_HOSTS + tb.NUM_EXPLOITS + 4  # uniforms per step
NUM_RESET_DRAWS = 3  # uniforms per reset: B_line's user host, Red agent, episode length


def draw_step(key: jax.Array) -> StepDraws:
    """All of a step's uniforms from one key."""
    return step_draws(jax.random.uniform(key, (NUM_STEP_DRAWS,)))


def step_draws(u: jax.Array) -> StepDraws:
    """Name the slices of ``u`` (float [NUM_STEP_DRAWS], uniform in [0, 1))."""
    n = tb.NUM_HOSTS
    e = 2 * n + 1
    return StepDraws(
        meander_scan=u[:n],
        meander_exploit=u[n : 2 * n],
        exploit_top=u[2 * n],
        exploit_other=u[e : e + tb.NUM_EXPLOITS],
        detection=u[e + tb.NUM_EXPLOITS],
        green_acts=u[e + tb.NUM_EXPLOITS + 1],
        green_host=u[e + tb.NUM_EXPLOITS + 2],
    )


def choose_exploit(
    uniform_top: jax.Array, uniform_other: jax.Array, options: jax.Array
) -> jax.Array:
    """ExploitRemoteService's choice among ``options`` (bool [8]); -1 if there are none.

    With several options the top-weight one (lowest index) is taken 75% of the time, otherwise
    a uniformly random other option.
    """
    top = jnp.argmax(options)
    others = options & (jnp.arange(tb.NUM_EXPLOITS) != top)
    other = red.random_pick(uniform_other, others)
    take_top = (uniform_top < 0.75) | ~jnp.any(others)
    return jnp.where(jnp.any(options), jnp.where(take_top, top, other), -1).astype(jnp.int32)


# ---- Blue's action ------------------------------------------------------------------------


class BlueAction(struct.PyTreeNode):
    """A decoded Blue action: one-hot host masks per kind."""

    analyse: jax.Array  # [13] bool
    remove: jax.Array  # [13] bool
    restore: jax.Array  # [13] bool
    decoy: jax.Array  # [13, 8] bool


def decode_blue(action: jax.Array) -> BlueAction:
    """Split a Blue action index (int32 in [0, 145)) into per-kind host masks."""
    hosts = jnp.arange(tb.NUM_HOSTS)
    decoy_index = action - tb.DECOY
    in_decoys = (decoy_index >= 0) & (action < tb.RESTORE)
    decoy = (
        in_decoys
        & (hosts[:, None] == decoy_index % tb.NUM_HOSTS)
        & (jnp.arange(tb.NUM_DECOYS)[None, :] == decoy_index // tb.NUM_HOSTS)
    )
    return BlueAction(
        analyse=hosts == action - tb.ANALYSE,
        remove=hosts == action - tb.REMOVE,
        restore=hosts == action - tb.RESTORE,
        decoy=decoy,
    )


def decoy_room(decoys: jax.Array, fix_bugs: jax.Array) -> jax.Array:
    """The decoys each host accepts now, bool [13, 8]: compatible with the host and their
    port (the exploit they lure) not held by a decoy in ``decoys`` (bool [13, 8])."""
    _, _, decoy_exploit = _bug_tables(fix_bugs)
    port_taken = decoy_offers(decoys, decoy_exploit)  # [13, 8] per lured exploit
    return jnp.asarray(tb.DECOY_COMPATIBLE) & ~port_taken[:, decoy_exploit]


def apply_blue(state: EnvState, blue: BlueAction, fix_bugs: jax.Array) -> EnvState:
    """Blue's Decoy, Remove and Restore take effect (before Red acts). Analyse only reads."""
    placed = blue.decoy & decoy_room(state.decoys, fix_bugs)

    # Remove stops the flagged processes of user-level shells; root/SYSTEM ones and shells
    # Blue never flagged (SSH brute force, undetected exploits) survive.
    removed = blue.remove & (state.access == 1) & ~state.root_shell & ~state.hidden_shell
    restore = blue.restore
    keep_user0 = jnp.arange(tb.NUM_HOSTS) == tb.USER0
    access = jnp.where(removed, 0, state.access)
    return state.replace(
        decoys=(state.decoys | placed) & ~restore[:, None],
        access=jnp.where(restore & ~keep_user0, 0, access),
        root_shell=state.root_shell & ~restore,
        hidden_shell=state.hidden_shell & ~restore,
        malware=state.malware & ~restore,
        impacted=state.impacted & ~restore[tb.OP_SERVER0],
        ot_lost=state.ot_lost | restore[tb.OP_SERVER0],
    )


def next_decoy(state: EnvState, host: jax.Array, fix_bugs: jax.Array) -> jax.Array:
    """The decoy type the reduced set's macro places on ``host`` (int32 ()).

    The first type of ``tables.DECOY_ORDER[host]`` the host accepts now (:func:`decoy_room`,
    as :func:`apply_blue` places; a decoy in place holds its own port); when none is left, the
    first type (placing nothing).
    """
    order = jnp.asarray(tb.DECOY_ORDER)[host]  # [4], -1 pads
    decoy = jnp.maximum(order, 0)  # [4]
    placeable = (order >= 0) & decoy_room(state.decoys, fix_bugs)[host, decoy]
    return jnp.where(jnp.any(placeable), decoy[jnp.argmax(placeable)], decoy[0]).astype(jnp.int32)


def expand_action(
    state: EnvState, action: jax.Array, action_set: str, fix_bugs: jax.Array
) -> jax.Array:
    """The CybORG action (int32 in [0, 145)) that ``action`` of ``action_set`` plays now.

    ``"full"`` actions are CybORG's already; a ``"reduced"`` one (int32 in [0, 36)) names a
    kind and a host of ``tables.REDUCED_HOSTS``, its decoy macro the type :func:`next_decoy`
    picks in ``state``.
    """
    action = jnp.asarray(action, jnp.int32)
    if action_set == "full":
        return action
    kind, slot = jnp.divmod(action, len(tb.REDUCED_HOSTS))
    host = jnp.asarray(tb.REDUCED_HOSTS)[slot]
    decoy = next_decoy(state, host, fix_bugs)
    offset = jnp.where(kind == tb.REDUCED_KINDS.index("decoy"), tb.NUM_HOSTS * decoy, 0)
    return (jnp.asarray(tb.REDUCED_FIRST)[kind] + offset + host).astype(jnp.int32)


# ---- Red's action -------------------------------------------------------------------------


def red_policy_action(draws: StepDraws, state: EnvState) -> tuple[jax.Array, jax.Array]:
    """The episode's Red agent's action ``(kind, target)`` for the state at the step's start."""
    bline_kind, bline_target = red.bline_action(state.bline_stage, state.bline_user)
    meander_kind, meander_target = red.meander_action(
        draws.meander_scan, draws.meander_exploit, state.meander, state.known, state.scanned
    )
    is_bline = state.red_agent == red.BLINE_AGENT
    is_meander = state.red_agent == red.MEANDER_AGENT
    kind = jnp.where(is_bline, bline_kind, jnp.where(is_meander, meander_kind, red.RED_SLEEP))
    target = jnp.where(is_bline, bline_target, jnp.where(is_meander, meander_target, 0))
    return kind.astype(jnp.int32), target.astype(jnp.int32)


def apply_red(
    draws: StepDraws, state: EnvState, kind: jax.Array, target: jax.Array, fix_bugs: jax.Array
) -> RedOutcome:
    """Red's action ``(kind, target)`` on the state Blue has just acted on.

    Args:
      draws: the step's uniforms (exploit choice and detection).
      state: state after Blue's action.
      kind: a ``red.RED_*`` action kind, int32 ().
      target: subnet (subnet scan) or host, int32 ().
      fix_bugs: bool (), the bug setting.

    Returns:
      The new state (Blue's activity column set for this step) and Red's success.
    """
    services, broken, decoy_exploit = _bug_tables(fix_bugs)
    hosts = jnp.arange(tb.NUM_HOSTS)
    at = hosts == target  # [13] one-hot target host (unused for subnet scans and sleep)
    row = jnp.clip(target, 0, tb.NUM_HOSTS - 1)
    host_access = state.access[row]
    # The Operational subnet takes traffic from the User subnet only while Red holds a session
    # on an Enterprise host.
    enterprise_session = jnp.any(
        (state.access >= 1) & (jnp.asarray(tb.HOST_SUBNET) == tb.ENTERPRISE)
    )
    host_routed = (jnp.asarray(tb.HOST_SUBNET)[row] != tb.OPERATIONAL) | enterprise_session
    subnet_routed = (target != tb.OPERATIONAL) | enterprise_session

    # Subnet scan: every host of the subnet becomes known.
    is_sweep = kind == red.RED_SUBNET_SCAN
    swept = is_sweep & subnet_routed
    known = state.known | (swept & (jnp.asarray(tb.HOST_SUBNET) == target))

    # Port scan: Red's ports for the host become the services on offer now, decoys included
    # (DiscoverNetworkServices clears what it knew first); Blue sees a scan.
    offers = services | decoy_offers(state.decoys, decoy_exploit)  # [13, 8]
    is_scan = kind == red.RED_SCAN
    scan_at = is_scan & at
    scan_seen = scan_at & host_routed  # unrouted: succeeds, learns and shows nothing
    red_ports = jnp.where(scan_seen[:, None], offers, state.red_ports)
    scanned = state.scanned | scan_at

    # Exploit: pick among the services seen in earlier scans; decoys and bugs make it fail.
    is_exploit = kind == red.RED_EXPLOIT
    choice = choose_exploit(draws.exploit_top, draws.exploit_other, state.red_ports[row])
    pick = jnp.arange(tb.NUM_EXPLOITS) == choice  # [8] (all False when there is no option)
    # An exploit takes the first process serving its port, and a genuine service comes before
    # any decoy: CybORG 2.1's Vsftpd decoy (port 80) on User3/User4 lures nothing. A port Red
    # learned from a decoy a Restore has since removed has no process: no decoy hit, no event.
    lures = decoy_offers(state.decoys, decoy_exploit)[row] & ~services[row]
    lured = jnp.any(pick & lures)
    # CybORG++'s Vsftpd decoy listens on 21 as a web server, a process FTPDirectoryTraversal
    # (a femitter on 21) does not find: the exploit fails there and logs no connection.
    ghost = fix_bugs & state.decoys[row, tb.VSFTPD] & (choice == tb.FTP)
    hits_decoy = lured & host_routed & ~ghost
    works = jnp.any(pick & services[row] & ~broken[row]) & ~lured & host_routed
    exploited = is_exploit & works
    lands_root = jnp.any(pick & jnp.asarray(tb.ROOT_EXPLOITS)[row])
    detected = draws.detection < jnp.sum(pick * tb.EXPLOIT_DETECTION)
    # SSHBruteForce logs its ten tries on port 22 before it learns whether a user gives way, so
    # Blue's table reads every brute force that reaches an SSH process (genuine or decoy) as an
    # Exploit, failed ones included (the Defender has no brute-forceable user).
    ssh_process = services[row, tb.SSH] | decoy_offers(state.decoys, decoy_exploit)[row, tb.SSH]
    brute_force_seen = is_exploit & (choice == tb.SSH) & ssh_process & host_routed

    # Privilege escalation: needs a shell on the host; reveals the next hop. Where Red already
    # holds root/SYSTEM (User0 from the start, a root-landing exploit, an earlier escalation)
    # it succeeds at once and runs no escalation, so it drops no file.
    is_privesc = kind == red.RED_PRIVESC
    escalated = is_privesc & (host_access >= 1)
    already_root = (host_access == 2) | state.root_shell[row]
    hop = jnp.asarray(tb.NEXT_HOP)[row]
    known = known | (escalated & (hosts == hop)) | (exploited & at)

    # Impact: needs root on Op_Server0; after a Restore there it stops nothing (ot_lost).
    is_impact = kind == red.RED_IMPACT
    impacted_now = is_impact & (host_access == 2) & (target == tb.OP_SERVER0)

    new_access = jnp.where(exploited, jnp.maximum(host_access, 1), host_access)
    new_access = jnp.where(escalated, 2, new_access)
    access = jnp.where(at & (exploited | escalated), new_access, state.access)
    root_shell = state.root_shell | (at & exploited & lands_root)

    exploit_shows = (exploited & detected) | brute_force_seen
    activity = jnp.where(
        at & exploit_shows,
        ACT_EXPLOIT,
        jnp.where(at & (scan_seen | (is_exploit & (exploited | hits_decoy))), ACT_SCAN, ACT_NONE),
    ).astype(jnp.int32)
    success = swept | is_scan | exploited | escalated | impacted_now | (kind == red.RED_SLEEP)
    new_state = state.replace(
        access=access,
        root_shell=root_shell,
        # Exploits drop cmd.exe/cmd.sh and escalations escalate.*; brute force leaves no file.
        malware=state.malware
        | (at & ((exploited & (choice != tb.SSH)) | (escalated & ~already_root))),
        impacted=state.impacted | (impacted_now & ~state.ot_lost),
        # Blue's Monitor flags a new shell's process only from a detected reverse-shell
        # connection; brute force's events carry no pid.
        hidden_shell=state.hidden_shell | (at & exploited & (~detected | (choice == tb.SSH))),
        known=known,
        scanned=scanned,
        red_ports=red_ports,
        activity=activity,
    )
    return RedOutcome(
        state=new_state,
        success=success,
        exploit_seen=at & exploit_shows,
        brute_force=is_exploit & (choice == tb.SSH),
        decoy_hit=at & is_exploit & hits_decoy,
        unseen_exploit=at & exploited & ~exploit_shows,
        port_scan=scan_seen,
    )


# ---- Blue's table, reward, observation ------------------------------------------------------


def update_table(before: EnvState, blue: BlueAction, exploit_seen: jax.Array) -> jax.Array:
    """Blue table's compromised column (int32 [13]) after the step (BlueTableWrapper's order).

    Restore clears, Remove makes a compromised host Unknown, a detected exploit marks User,
    and Analyse marks Privileged where it found Red's file (read before Red acted: ``before``
    is the state after Blue's own action).
    """
    comp = before.compromised
    comp = jnp.where(blue.restore, COMP_NO, comp)
    comp = jnp.where(blue.remove & (comp != COMP_NO), COMP_UNKNOWN, comp)
    comp = jnp.where(exploit_seen, COMP_USER, comp)
    comp = jnp.where(blue.analyse & before.malware, COMP_PRIVILEGED, comp)
    return comp.astype(jnp.int32)


def privileged(state: EnvState, fix_bugs: jax.Array) -> jax.Array:
    """Hosts whose Red shell the reward counts, bool [13].

    CybORG 2.1 counts root/SYSTEM shells only: escalated, or a shell that landed as root.
    CybORG++ fixed its reward to count every username Red's exploits run as
    (``RedRewardCalculator.py``: NetworkService, vagrant, root, SYSTEM, pi, www-data), so there
    every Red shell counts.
    """
    root = (state.access == 2) | ((state.access == 1) & state.root_shell)
    return jnp.where(fix_bugs, state.access >= 1, root)


def reward_terms(
    state: EnvState, blue: BlueAction, fix_bugs: jax.Array = False
) -> dict[str, jax.Array]:
    """Blue's reward terms (float32 scalars) for the state after the step."""
    counted = privileged(state, jnp.asarray(fix_bugs))
    access = -jnp.sum(jnp.where(counted, jnp.asarray(tb.HOST_VALUE), 0.0))
    impact = -tb.IMPACT_PENALTY * state.impacted.astype(jnp.float32)
    restore = -tb.RESTORE_COST * jnp.any(blue.restore).astype(jnp.float32)
    return {"access": access, "impact": impact, "restore": restore}


def last_action_bits(action: jax.Array) -> jax.Array:
    """Blue's last CybORG action ``action`` (int32 (), -1 for none) as float32 [5 + 13]: its
    kind one-hot (Sleep or Monitor, Analyse, Remove, Decoy, Restore) and its host one-hot."""
    first = jnp.asarray([tb.SLEEP, tb.ANALYSE, tb.REMOVE, tb.DECOY, tb.RESTORE, tb.NUM_ACTIONS])
    kinds = (action >= first[:-1]) & (action < first[1:])  # [5]
    # Analyse, Remove, each decoy type and Restore are blocks of 13 from Analyse's first id.
    host = (action - tb.ANALYSE) % tb.NUM_HOSTS
    hosts = (action >= tb.ANALYSE) & (jnp.arange(tb.NUM_HOSTS) == host)
    return jnp.concatenate([kinds, hosts]).astype(jnp.float32)


def observe(state: EnvState, params: EnvParams) -> jax.Array:
    """Blue's observation: float32 [52] (table), [79] (extended) or [151] (history), see the
    module docstring."""
    # Activity None 00 / Scan 10 / Exploit 11, compromised No 00 / Unknown 10 / User 01 /
    # Privileged 11, computed from the codes.
    act, comp = state.activity, state.compromised
    bits = [act != ACT_NONE, act == ACT_EXPLOIT, (comp & 1) == 1, comp >= COMP_USER]
    table = jnp.stack(bits, axis=1).astype(jnp.float32).reshape(-1)
    if params.obs_mode == "table":
        return table
    extra = [
        state.scan_history.astype(jnp.float32) / 2.0,
        jnp.sum(state.decoys, axis=1).astype(jnp.float32) / 4.0,
        (state.time.astype(jnp.float32) / 100.0)[None],
    ]
    if params.obs_mode == "history":
        extra += [
            last_action_bits(state.last_action),
            state.decoys[DECOY_SLOTS].astype(jnp.float32),
            state.last_seen.astype(jnp.float32),
        ]
    return jnp.concatenate([table, *extra])


def initial_state(key: jax.Array, params: EnvParams) -> EnvState:
    """A fresh episode: Red holds User0 and knows only it; Red agent and length drawn."""
    return initial_state_from(jax.random.uniform(key, (NUM_RESET_DRAWS,)), params)


def initial_state_from(u: jax.Array, params: EnvParams) -> EnvState:
    """:func:`initial_state` from its uniforms ``u`` (float [3]: user, Red agent, length)."""
    u_user, u_red, u_length = u[0], u[1], u[2]
    hosts = jnp.arange(tb.NUM_HOSTS)
    drawn_red = jnp.where(u_red < params.red_bline_prob, red.BLINE_AGENT, red.MEANDER_AGENT)
    red_agent = jnp.where(params.red_agent < 0, drawn_red, params.red_agent)
    drawn_length = jnp.asarray(EPISODE_LENGTHS)[_index(u_length, len(EPISODE_LENGTHS))]
    max_steps = jnp.where(
        params.max_steps_in_episode > 0, params.max_steps_in_episode, drawn_length
    )
    zeros = jnp.zeros(tb.NUM_HOSTS, jnp.int32)
    no_hosts = jnp.zeros(tb.NUM_HOSTS, bool)
    return EnvState(
        time=jnp.int32(0),
        max_steps=jnp.asarray(max_steps, jnp.int32),
        red_agent=jnp.asarray(red_agent, jnp.int32),
        access=jnp.where(hosts == tb.USER0, 2, 0).astype(jnp.int32),
        root_shell=no_hosts,
        malware=no_hosts,
        decoys=jnp.zeros((tb.NUM_HOSTS, tb.NUM_DECOYS), bool),
        impacted=jnp.bool_(False),
        ot_lost=jnp.bool_(False),
        hidden_shell=no_hosts,
        known=hosts == tb.USER0,
        scanned=no_hosts,
        red_ports=jnp.zeros((tb.NUM_HOSTS, tb.NUM_EXPLOITS), bool),
        bline_stage=jnp.int32(0),
        bline_user=jnp.asarray(red.BLINE_USERS)[_index(u_user, len(red.BLINE_USERS))],
        meander=red.initial_belief(),
        activity=zeros,
        compromised=zeros,
        scan_history=zeros,
        last_action=jnp.int32(-1),
        last_seen=no_hosts,
    )


GREEN_HOSTS = np.array(
    [tb.USER0, tb.USER1, tb.USER2, tb.USER3, tb.USER4, tb.ENTERPRISE0, tb.ENTERPRISE1,
     tb.ENTERPRISE2],
    np.int32,
)  # fmt: skip


def _index(uniform: jax.Array, n: int) -> jax.Array:
    """A uniform index in [0, n) from a uniform float in [0, 1)."""
    return jnp.minimum((uniform * n).astype(jnp.int32), n - 1)


def green_scan_target(draws: StepDraws, active: jax.Array) -> jax.Array:
    """GreenAgent's port scan this step, bool [13]: half the time one of GREEN_HOSTS."""
    scans = active & (draws.green_acts < 0.5)
    host = jnp.asarray(GREEN_HOSTS)[_index(draws.green_host, len(GREEN_HOSTS))]
    return scans & (jnp.arange(tb.NUM_HOSTS) == host)


def transition(
    key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
) -> tuple[EnvState, dict[str, jax.Array], jax.Array]:
    """One step: Blue acts (decoys, Remove, Restore), Red acts, Monitor fills Blue's table.

    Returns:
      ``(state, reward_terms, red_success)``.
    """
    return transition_with(draw_step(key), state, action, params)


def transition_with(
    draws: StepDraws, state: EnvState, action: jax.Array, params: EnvParams
) -> tuple[EnvState, dict[str, jax.Array], jax.Array]:
    """:func:`transition` with the step's uniforms already drawn."""
    fix_bugs = jnp.asarray(params.fix_bugs)
    blue = decode_blue(jnp.asarray(action, jnp.int32))
    kind, target = red_policy_action(draws, state)

    after_blue = apply_blue(state, blue, fix_bugs)
    outcome = apply_red(draws, after_blue, kind, target, fix_bugs)
    after_red = outcome.state

    # CybORG's Blue table classifies a host's new processes of the step together, and a decoy
    # Blue placed this step is one of them (a service, listed first, no connection): with a
    # decoy hit's two connections on one port that makes three on one port, read as an Exploit
    # (the host marked User); before a missed exploit's single connection it reads as None.
    # A port scan's connections (one per open port) read as a Scan only on three ports or more:
    # behind the new decoy, a host with one genuine port and that decoy reads as None.
    placed_now = jnp.any(after_blue.decoys & ~state.decoys, axis=1)  # [13]
    lure_seen = outcome.decoy_hit & placed_now
    red_seen = outcome.exploit_seen | lure_seen
    open_ports = jnp.asarray(tb.OPEN_PORTS) + jnp.sum(after_blue.decoys, axis=1)  # [13]
    unread = outcome.unseen_exploit | (outcome.port_scan & (open_ports < 3))
    red_activity = jnp.where(
        lure_seen,
        ACT_EXPLOIT,
        jnp.where(unread & placed_now, ACT_NONE, after_red.activity),
    )
    green_scan = green_scan_target(draws, params.green_agent)
    # A green scan on the host Red exploits makes CybORG 2.1's table read the exploit as a
    # scan (its scan test comes first); brute force stays visible (one port).
    hidden = green_scan & ~fix_bugs & ~outcome.brute_force
    exploit_seen = red_seen & ~hidden
    activity = jnp.where(
        green_scan & (red_activity != ACT_EXPLOIT) | (red_seen & hidden),
        ACT_SCAN,
        red_activity,
    ).astype(jnp.int32)
    after_red = after_red.replace(activity=activity)
    compromised = update_table(after_blue, blue, exploit_seen)
    seen = after_red.activity != ACT_NONE
    scan_history = jnp.where(seen, 2, jnp.minimum(state.scan_history, 1)).astype(jnp.int32)
    is_bline = state.red_agent == red.BLINE_AGENT
    bline_stage = jnp.where(
        is_bline, red.bline_next_stage(state.bline_stage, outcome.success), state.bline_stage
    )
    new_state = after_red.replace(
        time=state.time + 1,
        compromised=compromised,
        scan_history=scan_history,
        last_action=jnp.asarray(action, jnp.int32),
        last_seen=jnp.where(jnp.any(seen), seen, state.last_seen),
        bline_stage=bline_stage.astype(jnp.int32),
        meander=red.update_belief(state.meander, kind, target, outcome.success),
    )
    return new_state, reward_terms(new_state, blue, fix_bugs), outcome.success


class Cage2(environment.Environment[EnvState, EnvParams]):
    """CAGE-2 Blue defender (see the module docstring for the rules).

    A single-agent :class:`jaxrl.envs.protocols.Env` (one Blue agent; no renderer).

    - Observation: float32 [52] (``obs_mode="table"``), [79] (``"extended"``) or [151]
      (``"history"``).
    - Action: ``Discrete(145)``, CybORG's Blue action order; ``Discrete(36)`` with
      ``action_set="reduced"`` (:func:`expand_action`).
    - Reward: float32 (), Blue's CAGE-2 reward rounded to 0.1; terms in ``info["reward_terms"]``.
    - Termination: never; truncated at the episode's length (``EnvState.max_steps``).
    - ``info`` also holds ``red_success`` (bool), ``red_agent`` (int32) and ``blue_action``
      (int32, the CybORG action Blue played) for logs.
    """

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    @property
    def name(self) -> str:
        return "CAGE2"

    @property
    def num_actions(self) -> int:
        """CybORG's 145 (the default ``action_set``; ``action_space(params).n`` in general)."""
        return tb.NUM_ACTIONS

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        params = self.default_params if params is None else params
        full = params.action_set == "full"
        return spaces.Discrete(tb.NUM_ACTIONS if full else tb.NUM_REDUCED_ACTIONS)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        params = self.default_params if params is None else params
        return spaces.Box(0.0, 1.0, (OBS_DIMS[params.obs_mode],), jnp.float32)

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        state = initial_state(key, params)
        return observe(state, params), state

    @functools.partial(jax.jit, static_argnames=("self",))
    def step(
        self, key: jax.Array, state: EnvState, action: Any, params: EnvParams | None = None
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, jax.Array, dict[str, Any]]:
        """gymnax 1.0's auto-resetting step, drawing the step's and the reset's uniforms at once.

        Same contract as ``gymnax.environments.environment.Environment.step`` (the reset state
        replaces the stepped one where ``terminated | truncated``; ``info`` gains
        ``terminated``, ``truncated`` and ``final_observation``), one PRNG call instead of three.
        """
        params = self.default_params if params is None else params
        u = jax.random.uniform(key, (NUM_STEP_DRAWS + NUM_RESET_DRAWS,))
        obs_st, state_st, reward, terminated, info = self._step_with(
            step_draws(u[:NUM_STEP_DRAWS]), state, action, params
        )
        truncated = self.is_truncated(state_st, params)
        done = terminated | truncated
        state_re = initial_state_from(u[NUM_STEP_DRAWS:], params)
        state = jax.tree.map(lambda r, s: jax.lax.select(done, r, s), state_re, state_st)
        obs = jax.lax.select(done, observe(state_re, params), obs_st)
        info = {
            **info,
            "terminated": terminated,
            "truncated": truncated,
            "final_observation": obs_st,
        }
        return obs, state, reward, terminated, truncated, info

    def step_env(
        self, key: jax.Array, state: EnvState, action: Any, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict[str, Any]]:
        return self._step_with(draw_step(key), state, action, params)

    def _step_with(
        self, draws: StepDraws, state: EnvState, action: Any, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict[str, Any]]:
        blue_action = expand_action(state, action, params.action_set, params.fix_bugs)
        state, terms, red_success = transition_with(draws, state, blue_action, params)
        reward = jnp.round(sum(terms.values()) * 10.0) / 10.0
        info = {
            "reward_terms": terms,
            "red_success": red_success,
            "red_agent": state.red_agent,
            "blue_action": blue_action,
        }
        return observe(state, params), state, reward.astype(jnp.float32), jnp.bool_(False), info

    def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """The episode's own length (drawn at reset when ``max_steps_in_episode <= 0``)."""
        del params
        return state.time >= state.max_steps

    def get_obs(self, state: EnvState, params: EnvParams | None = None, key=None) -> jax.Array:
        del key
        return observe(state, self.default_params if params is None else params)
