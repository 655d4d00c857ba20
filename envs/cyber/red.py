"""CAGE-2's scripted Red agents as pure functions of the env state: B_line and Meander.

A Red action is a pair ``(kind, target)`` of int32 scalars: ``kind`` is one of ``RED_SLEEP``,
``RED_SUBNET_SCAN`` (target: a subnet, :data:`jaxrl.envs.cyber.tables.SUBNETS`), ``RED_SCAN``,
``RED_EXPLOIT``, ``RED_PRIVESC`` or ``RED_IMPACT`` (target: a host).

- **B_line** (``Agents/SimpleAgents/B_line.py``) walks 15 stages toward Op_Server0 and then
  impacts it forever; after a failed action stage ``i`` falls back to ``BLINE_JUMPS[i]``.
  Its user-subnet target is drawn once per episode among User1-4 (CybORG caches the action of
  each stage, so the first draw holds for the whole episode).
- **Meander** (``Agents/SimpleAgents/Meander.py``, ``RedMeanderAgent``) acts on its own
  beliefs (:class:`MeanderBelief`), not on the true state. By priority: Impact while it
  believes it holds Op_Server0 escalated; sweep the first known subnet it has not swept;
  port-scan a random known IP it has not scanned; escalate a random known hostname it has not
  escalated, unless it mapped that host to an IP it no longer believes exploited; exploit a
  random known IP it has not exploited (User0 and the Defender included); else sleep (CybORG
  raises). Each choice is recorded as done when it is made. After a failure it rolls back
  (``_process_success``): a failed escalation or impact forgets that host (escalated and
  exploited); a failed exploit forgets that IP and, if it believes it holds Op hosts escalated,
  forgets all of those, else all its escalated Enterprise hosts (``_process_failed_ip``).
  So Meander notices a Restore only when an escalation or impact there fails.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.envs.cyber import tables as tb

RED_SLEEP, RED_SUBNET_SCAN, RED_SCAN, RED_EXPLOIT, RED_PRIVESC, RED_IMPACT = range(6)
RED_KINDS = ("Sleep", "DiscoverRemoteSystems", "DiscoverNetworkServices", "Exploit",
             "PrivilegeEscalate", "Impact")  # fmt: skip

SLEEP_AGENT, BLINE_AGENT, MEANDER_AGENT = 0, 1, 2
RED_AGENTS = ("Sleep", "B_line", "Meander")

# B_line's stages: the action kind and its target. Targets >= 0 are a subnet (for subnet
# scans) or a host; _USER is the episode's user host, _HOP the Enterprise host it reveals.
_USER, _HOP = -1, -2
BLINE_KIND = np.array(
    [RED_SUBNET_SCAN, RED_SCAN, RED_EXPLOIT, RED_PRIVESC]
    + [RED_SCAN, RED_EXPLOIT, RED_PRIVESC]
    + [RED_SUBNET_SCAN, RED_SCAN, RED_EXPLOIT, RED_PRIVESC]
    + [RED_SCAN, RED_EXPLOIT, RED_PRIVESC, RED_IMPACT],
    np.int32,
)  # [15]
BLINE_TARGET = np.array(
    [tb.USER, _USER, _USER, _USER, _HOP, _HOP, _HOP]
    + [tb.ENTERPRISE, tb.ENTERPRISE2, tb.ENTERPRISE2, tb.ENTERPRISE2]
    + [tb.OP_SERVER0] * 4,
    np.int32,
)  # [15]
BLINE_JUMPS = np.array([0, 1, 2, 2, 2, 2, 5, 5, 5, 5, 9, 9, 9, 12, 13], np.int32)  # [15]
BLINE_LAST = 14
BLINE_USERS = np.array([tb.USER1, tb.USER2, tb.USER3, tb.USER4], np.int32)


def bline_action(stage: jax.Array, user: jax.Array) -> tuple[jax.Array, jax.Array]:
    """B_line's action at ``stage`` (int32 in [0, 15)) with user host ``user``."""
    kind = jnp.asarray(BLINE_KIND)[stage]
    code = jnp.asarray(BLINE_TARGET)[stage]
    hop = jnp.asarray(tb.NEXT_HOP)[user]
    target = jnp.where(code == _USER, user, jnp.where(code == _HOP, hop, code))
    return kind, target


def bline_next_stage(stage: jax.Array, success: jax.Array) -> jax.Array:
    """The stage after an action at ``stage``: one on after a success, else the jump back."""
    return jnp.where(success, jnp.minimum(stage + 1, BLINE_LAST), jnp.asarray(BLINE_JUMPS)[stage])


def random_pick(uniform: jax.Array, mask: jax.Array) -> jax.Array:
    """A random index among the True entries of ``mask`` (bool [n]) from ``uniform`` float [n].

    With i.i.d. uniforms the pick is uniform over the True entries; 0 if there are none.
    """
    return jnp.argmax(jnp.where(mask, uniform + 1.0, 0.0))


class MeanderBelief(struct.PyTreeNode):
    """RedMeanderAgent's lists, and the parts of Red's action space it reads.

    Red's known IPs and Meander's port-scanned IPs are ``EnvState.known`` and
    ``EnvState.scanned`` (one IP per host).
    """

    swept: jax.Array  # [3] bool, subnets it has swept (scanned_subnets)
    exploited: jax.Array  # [13] bool, IPs it believes exploited (exploited_ips)
    escalated: jax.Array  # [13] bool, hosts it believes escalated (escalated_hosts)
    mapped: jax.Array  # [13] bool, hosts a successful exploit tied to their IP (host_ip_map)
    hostnames: jax.Array  # [13] bool, hostnames Red knows (a successful exploit shows one)
    subnets: jax.Array  # [3] bool, subnets Red knows (an escalated host shows its own)


def initial_belief() -> MeanderBelief:
    """Red knows User0 (hostname, IP, subnet) and nothing else; Meander's lists are empty."""
    no_hosts = jnp.zeros(tb.NUM_HOSTS, bool)
    return MeanderBelief(
        swept=jnp.zeros(len(tb.SUBNETS), bool),
        exploited=no_hosts,
        escalated=no_hosts,
        mapped=no_hosts,
        hostnames=jnp.arange(tb.NUM_HOSTS) == tb.USER0,
        subnets=jnp.arange(len(tb.SUBNETS)) == tb.USER,
    )


def meander_action(
    uniform_scan: jax.Array,
    uniform_pick: jax.Array,
    belief: MeanderBelief,
    known: jax.Array,
    scanned: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """RedMeanderAgent's action from its beliefs.

    Args:
      uniform_scan: float [13] uniforms for the random port-scan target.
      uniform_pick: float [13] uniforms for the random escalation or exploit target (a step
        chooses at most one of the two, so they share the draw).
      belief: Meander's lists and Red's known hostnames and subnets.
      known: IPs Red knows, bool [13].
      scanned: IPs Meander has port-scanned, bool [13].

    Returns:
      ``(kind, target)`` int32 scalars.
    """
    to_sweep = belief.subnets & ~belief.swept  # [3], in the action space's order (SUBNETS)
    to_scan = known & ~scanned
    to_escalate = belief.hostnames & ~belief.escalated & ~(belief.mapped & ~belief.exploited)
    to_exploit = known & ~belief.exploited

    candidates = [
        (belief.escalated[tb.OP_SERVER0], RED_IMPACT, jnp.int32(tb.OP_SERVER0)),
        (jnp.any(to_sweep), RED_SUBNET_SCAN, jnp.argmax(to_sweep)),
        (jnp.any(to_scan), RED_SCAN, random_pick(uniform_scan, to_scan)),
        (jnp.any(to_escalate), RED_PRIVESC, random_pick(uniform_pick, to_escalate)),
        (jnp.any(to_exploit), RED_EXPLOIT, random_pick(uniform_pick, to_exploit)),
    ]
    kind, target = jnp.int32(RED_SLEEP), jnp.int32(0)
    for valid, option_kind, option_target in reversed(candidates):  # first valid one wins
        kind = jnp.where(valid, option_kind, kind)
        target = jnp.where(valid, option_target, target).astype(jnp.int32)
    return kind, target


_OP_HOSTS = np.array(["Op" in name for name in tb.HOSTS])  # [13] Meander's `'Op' in x` test
_ENT_HOSTS = np.array(["Ent" in name for name in tb.HOSTS])  # [13] and its `'Ent' in x`


def update_belief(
    belief: MeanderBelief, kind: jax.Array, target: jax.Array, success: jax.Array
) -> MeanderBelief:
    """Beliefs after Red's action ``(kind, target)`` with outcome ``success`` (bool ()).

    Red's knowledge (hostnames, subnets) grows whichever agent acts; the lists follow
    Meander's ``get_action`` bookkeeping, then its next ``_process_success``.
    """
    at = jnp.arange(tb.NUM_HOSTS) == target
    is_exploit = kind == RED_EXPLOIT
    is_privesc = kind == RED_PRIVESC

    swept = belief.swept | ((kind == RED_SUBNET_SCAN) & (jnp.arange(len(tb.SUBNETS)) == target))
    # A choice is recorded when it is made.
    exploited = belief.exploited | (is_exploit & at)
    escalated = belief.escalated | (is_privesc & at)
    # A successful exploit ties the host to its IP; a failed one forgets the IP, then every
    # escalated Op host (with none, every escalated Enterprise host) and its IP.
    mapped = belief.mapped | (is_exploit & success & at)
    exploit_failed = is_exploit & ~success
    op_held = escalated & _OP_HOSTS
    forget = exploit_failed & jnp.where(jnp.any(op_held), op_held, escalated & _ENT_HOSTS)
    exploited = exploited & ~(exploit_failed & at) & ~forget
    escalated = escalated & ~forget
    # A failed escalation or impact forgets that host, and its IP if mapped.
    host_failed = (is_privesc | (kind == RED_IMPACT)) & ~success & at
    exploited = exploited & ~(host_failed & mapped)
    escalated = escalated & ~host_failed

    own_subnet = jnp.asarray(tb.HOST_SUBNET)[jnp.clip(target, 0, tb.NUM_HOSTS - 1)]
    shows_subnet = is_privesc & success & (jnp.arange(len(tb.SUBNETS)) == own_subnet)
    return MeanderBelief(
        swept=swept,
        exploited=exploited,
        escalated=escalated,
        mapped=mapped,
        hostnames=belief.hostnames | (is_exploit & success & at),
        subnets=belief.subnets | shows_subnet,
    )
