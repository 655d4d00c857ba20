"""Static facts of CAGE-2 (CybORG 2.1, Scenario 2): hosts, actions, services, decoys, rewards.

Everything here is a constant of the scenario, indexed the way the env's arrays are:

- hosts ``h`` in CybORG's alphabetical order (the Blue table's row order);
- exploits ``e`` in Red's preference order (highest exploit weight first);
- decoys ``d`` in the order of CybORG's Blue action list (Apache ... Vsftpd).

Sources: ``Shared/Scenarios/Scenario2.yaml`` (hosts, subnets, confidentiality values),
``Shared/Actions/AbstractActions/ExploitRemoteService.py`` (exploit weights),
``Shared/Actions/ConcreteActions/Decoy*.py`` (decoy ports, OS constraints),
``Agents/Wrappers/EnumActionWrapper.py`` (Blue action order), and CybORG++'s appendix and
``mini_CAGE`` tables (services reachable per host, which exploits land as root/SYSTEM).
"""

from __future__ import annotations

import numpy as np

# ---- hosts ---------------------------------------------------------------------------------

HOSTS = (
    "Defender",
    "Enterprise0",
    "Enterprise1",
    "Enterprise2",
    "Op_Host0",
    "Op_Host1",
    "Op_Host2",
    "Op_Server0",
    "User0",
    "User1",
    "User2",
    "User3",
    "User4",
)
NUM_HOSTS = len(HOSTS)
(
    DEFENDER,
    ENTERPRISE0,
    ENTERPRISE1,
    ENTERPRISE2,
    OP_HOST0,
    OP_HOST1,
    OP_HOST2,
    OP_SERVER0,
    USER0,
    USER1,
    USER2,
    USER3,
    USER4,
) = range(NUM_HOSTS)

# Subnets in the order Red's action space lists them (CybORG's true state, Defender first):
# Meander sweeps the first known one it has not swept.
SUBNETS = ("Enterprise", "Operational", "User")
ENTERPRISE, OPERATIONAL, USER = range(3)
HOST_SUBNET = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2], np.int32)  # [13]

# Discovering a host's info reveals its next hop (Scenario2.yaml ``info``); -1 = nothing.
NEXT_HOP = np.full(NUM_HOSTS, -1, np.int32)  # [13]
NEXT_HOP[[USER1, USER2]] = ENTERPRISE1
NEXT_HOP[[USER3, USER4]] = ENTERPRISE0
NEXT_HOP[ENTERPRISE2] = OP_SERVER0

# Blue's loss per step while Red holds root/SYSTEM there (ConfidentialityValue Medium = 1.0,
# Low (the default) = 0.1, None = 0).
HOST_VALUE = np.array(
    [0.1, 1.0, 1.0, 1.0, 0.1, 0.1, 0.1, 1.0, 0.0, 0.1, 0.1, 0.1, 0.1], np.float32
)  # [13]
IMPACT_PENALTY = 10.0  # per step while Op_Server0's service is stopped
RESTORE_COST = 1.0  # per Restore action

# ---- exploits ------------------------------------------------------------------------------

EXPLOITS = (
    "FTPDirectoryTraversal",
    "HarakaRCE",
    "SQLInjection",
    "HTTPSRFI",
    "HTTPRFI",
    "EternalBlue",
    "BlueKeep",
    "SSHBruteForce",
)
NUM_EXPLOITS = len(EXPLOITS)
FTP, HARAKA, SQL, HTTPS_RFI, HTTP_RFI, ETERNAL_BLUE, BLUE_KEEP, SSH = range(NUM_EXPLOITS)
# ExploitRemoteService's weights; EXPLOITS is sorted by them, so the top choice is the lowest
# index among the options Red knows.
EXPLOIT_WEIGHT = np.array([7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.1], np.float32)  # [8]
EXPLOIT_DETECTION = np.array([0.95] * 7 + [1.0], np.float32)  # [8]; brute force is noisy


def _host_table(rows: dict[int, tuple[int, ...]], width: int) -> np.ndarray:
    table = np.zeros((NUM_HOSTS, width), bool)
    for host, columns in rows.items():
        table[host, list(columns)] = True
    return table


# Genuine services Red's port scan reveals, as the exploit each one offers [13, 8] (the
# listening ports of each host's image in ``Shared/Scenarios/images``).
# User3's MySQL listens on 3389 in CybORG 2.1 (a typo for 3390): Red sees BlueKeep, not SQL.
# User4 (linux_user_host2) runs sshd on 22 and nothing on 3389: SSH brute force, no BlueKeep.
# User0 runs User1's image (Meander exploits it although it holds it already).
SERVICES_BUGGY = _host_table(
    {
        DEFENDER: (SSH,),
        USER0: (SSH, FTP),
        ENTERPRISE0: (SSH,),
        ENTERPRISE1: (SSH, ETERNAL_BLUE, BLUE_KEEP, HTTP_RFI, HTTPS_RFI),
        ENTERPRISE2: (SSH, ETERNAL_BLUE, BLUE_KEEP, HTTP_RFI, HTTPS_RFI),
        OP_HOST0: (SSH,),
        OP_HOST1: (SSH,),
        OP_HOST2: (SSH,),
        OP_SERVER0: (SSH,),
        USER1: (SSH, FTP),
        USER2: (ETERNAL_BLUE, BLUE_KEEP),
        USER3: (BLUE_KEEP, HTTPS_RFI, HTTP_RFI, HARAKA),
        USER4: (SSH, HTTPS_RFI, HTTP_RFI, HARAKA, SQL),
    },
    NUM_EXPLOITS,
)
# CybORG++ moves User3's MySQL to 3390: SQL on offer, and nothing listens on 3389 (no BlueKeep).
SERVICES_FIXED = SERVICES_BUGGY.copy()
SERVICES_FIXED[USER3, SQL] = True
SERVICES_FIXED[USER3, BLUE_KEEP] = False

# Ports each host's image listens on [13] (Defender 22/53/68; Enterprise1/2 seven; User0/1
# 21/22; User2 four; User3 four; User4 five; the rest sshd alone). A port scan logs one
# connection per open port, and Blue's table needs three ports for a Scan.
OPEN_PORTS = np.array([3, 1, 7, 7, 1, 1, 1, 1, 2, 2, 4, 4, 5], np.int32)

# Exploits that fail although the service is there [13, 8]: the Defender cannot be exploited;
# in CybORG 2.1 EternalBlue finds no SMB process on Enterprise1/2 (missing Process Type) and
# BlueKeep always fails on User3 (the port typo above).
BROKEN_ALWAYS = _host_table({DEFENDER: (SSH,)}, NUM_EXPLOITS)
BROKEN_BUGGY = _host_table(
    {ENTERPRISE1: (ETERNAL_BLUE,), ENTERPRISE2: (ETERNAL_BLUE,), USER3: (BLUE_KEEP,)},
    NUM_EXPLOITS,
)
BROKEN_BUGGY |= BROKEN_ALWAYS

# Exploits whose vulnerable process runs as root/SYSTEM: Red's new shell already counts as
# privileged for the reward (CybORG's reward reads session usernames) [13, 8].
ROOT_EXPLOITS = _host_table(
    {
        ENTERPRISE1: (BLUE_KEEP, ETERNAL_BLUE),
        ENTERPRISE2: (BLUE_KEEP, ETERNAL_BLUE),
        USER0: (FTP,),
        USER1: (FTP,),
        USER2: (ETERNAL_BLUE,),
        USER3: (BLUE_KEEP, HARAKA, SQL),  # SQL (MySQL runs as root) only with CybORG++'s 3390
        USER4: (SQL, HARAKA),
    },
    NUM_EXPLOITS,
)

# ---- decoys --------------------------------------------------------------------------------

DECOYS = ("Apache", "Femitter", "HarakaSMPT", "Smss", "SSHD", "Svchost", "Tomcat", "Vsftpd")
NUM_DECOYS = len(DECOYS)
APACHE, FEMITTER, HARAKA_SMTP, SMSS, SSHD, SVCHOST, TOMCAT, VSFTPD = range(NUM_DECOYS)

# The exploit a decoy service lures [8]. CybORG 2.1's Vsftpd decoy opens port 80 as a web
# server (an Apache look-alike); the fixed one opens FTP port 21.
DECOY_EXPLOIT_BUGGY = np.array(
    [HTTP_RFI, FTP, HARAKA, ETERNAL_BLUE, SSH, BLUE_KEEP, HTTPS_RFI, HTTP_RFI], np.int32
)
DECOY_EXPLOIT_FIXED = DECOY_EXPLOIT_BUGGY.copy()
DECOY_EXPLOIT_FIXED[VSFTPD] = FTP

# Which decoys a host accepts in its initial state (port free, OS matches) [13, 8]
# (CybORG++ "Decoy Deployment Strategy" table). User0 runs User1's image and takes its decoys.
DECOY_COMPATIBLE = _host_table(
    {
        DEFENDER: (APACHE, HARAKA_SMTP, TOMCAT, VSFTPD),
        ENTERPRISE0: (APACHE, TOMCAT, VSFTPD, HARAKA_SMTP),
        ENTERPRISE1: (FEMITTER,),
        ENTERPRISE2: (FEMITTER,),
        OP_HOST0: (APACHE, HARAKA_SMTP, TOMCAT, VSFTPD),
        OP_HOST1: (APACHE, HARAKA_SMTP, TOMCAT, VSFTPD),
        OP_HOST2: (APACHE, HARAKA_SMTP, TOMCAT, VSFTPD),
        OP_SERVER0: (APACHE, HARAKA_SMTP, TOMCAT, VSFTPD),
        USER0: (APACHE, SMSS, SVCHOST, TOMCAT),
        USER1: (APACHE, SMSS, SVCHOST, TOMCAT),
        USER2: (APACHE, SSHD, TOMCAT, FEMITTER),
        USER3: (SSHD, VSFTPD),
        USER4: (VSFTPD,),
    },
    NUM_DECOYS,
)

# ---- Blue's action layout (Discrete(145), CybORG's EnumActionWrapper order) ----------------

SLEEP = 0
MONITOR = 1
ANALYSE = 2  # + host
REMOVE = ANALYSE + NUM_HOSTS  # 15 + host
DECOY = REMOVE + NUM_HOSTS  # 28 + NUM_HOSTS * decoy + host
RESTORE = DECOY + NUM_DECOYS * NUM_HOSTS  # 132 + host
NUM_ACTIONS = RESTORE + NUM_HOSTS  # 145


# ---- the reduced action set (EnvParams.action_set="reduced") -------------------------------
# The 36 actions CardiffUni's winning entry played (csle's CAGE-2 wrapper has the same list):
# Analyse, Remove, one decoy macro and Restore on each of 9 hosts, in CybORG's kind order;
# no Sleep or Monitor (Analyse only reads), nothing on User0 or Op_Host0-2. Reduced action
# ``9 * kind + k`` acts on REDUCED_HOSTS[k]. The decoy macro places the host's first decoy in
# DECOY_ORDER that is not in place and whose port is free (Cardiff's greedy order per host);
# when none is left it plays the first one, which places nothing.
REDUCED_HOSTS = np.array(
    [ENTERPRISE0, ENTERPRISE1, ENTERPRISE2, OP_SERVER0, USER1, USER2, USER3, USER4, DEFENDER],
    np.int32,
)  # [9]
REDUCED_KINDS = ("analyse", "remove", "decoy", "restore")
REDUCED_FIRST = np.array([ANALYSE, REMOVE, DECOY, RESTORE], np.int32)  # [4] full index of host 0
NUM_REDUCED_ACTIONS = len(REDUCED_KINDS) * len(REDUCED_HOSTS)  # 36
DECOY_ORDER = np.full((NUM_HOSTS, 4), -1, np.int32)  # [13, 4] decoy types, -1 pads
for _host, _order in {
    ENTERPRISE0: (HARAKA_SMTP, TOMCAT, VSFTPD, APACHE),
    ENTERPRISE1: (FEMITTER,),
    ENTERPRISE2: (FEMITTER,),
    OP_SERVER0: (HARAKA_SMTP, APACHE, TOMCAT, VSFTPD),
    USER1: (APACHE, TOMCAT, SMSS, SVCHOST),
    USER2: (FEMITTER, TOMCAT, APACHE, SSHD),
    USER3: (VSFTPD, SSHD),
    USER4: (VSFTPD,),
    DEFENDER: (HARAKA_SMTP, TOMCAT, APACHE, VSFTPD),
}.items():
    DECOY_ORDER[_host, : len(_order)] = _order


def reduced_action_name(action: int) -> str:
    """A reduced action's name, e.g. ``"Decoy Enterprise0"`` (the macro) or ``"Remove User1"``."""
    if not 0 <= action < NUM_REDUCED_ACTIONS:
        raise ValueError(f"no reduced Blue action {action}; there are {NUM_REDUCED_ACTIONS}")
    kind, slot = divmod(action, len(REDUCED_HOSTS))
    return f"{REDUCED_KINDS[kind].capitalize()} {HOSTS[REDUCED_HOSTS[slot]]}"


def action_name(action: int) -> str:
    """CybORG's name for a Blue action index, e.g. ``"DecoyApache Enterprise0"``."""
    if action == SLEEP:
        return "Sleep"
    if action == MONITOR:
        return "Monitor"
    if ANALYSE <= action < REMOVE:
        return f"Analyse {HOSTS[action - ANALYSE]}"
    if REMOVE <= action < DECOY:
        return f"Remove {HOSTS[action - REMOVE]}"
    if DECOY <= action < RESTORE:
        decoy, host = divmod(action - DECOY, NUM_HOSTS)
        return f"Decoy{DECOYS[decoy]} {HOSTS[host]}"
    if RESTORE <= action < NUM_ACTIONS:
        return f"Restore {HOSTS[action - RESTORE]}"
    raise ValueError(f"no Blue action {action}; there are {NUM_ACTIONS}")
