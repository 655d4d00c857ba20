"""CAGE-2's scripted Red agents as pure functions of the env state: B_line and Meander.

A Red action is a pair ``(kind, target)`` of int32 scalars: ``kind`` is one of ``RED_SLEEP``,
``RED_SUBNET_SCAN`` (target: a subnet, :data:`envs.cyber.tables.SUBNETS`), ``RED_SCAN``,
``RED_EXPLOIT``, ``RED_PRIVESC`` or ``RED_IMPACT`` (target: a host).

- **B_line** (``Agents/SimpleAgents/B_line.py``) walks 15 stages toward Op_Server0 and then
  impacts it forever; after a failed action stage ``i`` falls back to ``BLINE_JUMPS[i]``.
  Its user-subnet target is drawn once per episode among User1-4 (CybORG caches the action of
  each stage, so the first draw holds for the whole episode).
- **Meander** picks, by priority: Impact once it holds root on Op_Server0; sweep a subnet
  where it holds root and still has unknown hosts (Enterprise, then Operational, then User);
  port-scan a random known unscanned host; escalate its lowest-index user-level host; exploit
  a random scanned host without root (never the Defender). It reads its access from the true
  state (mini_CAGE's model of Meander's belief roll-back after a failure).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from envs.cyber import tables as tb

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


def meander_action(
    uniform_scan: jax.Array,
    uniform_exploit: jax.Array,
    access: jax.Array,
    known: jax.Array,
    scanned: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Meander's action from Red's access (int32 [13]: 0 none, 1 user, 2 root) and knowledge.

    Args:
      uniform_scan: float [13] uniforms for the random scan target.
      uniform_exploit: float [13] uniforms for the random exploit target.
      access: Red's true access per host, int32 [13].
      known: hosts Red has discovered, bool [13].
      scanned: hosts Red has port-scanned, bool [13].

    Returns:
      ``(kind, target)`` int32 scalars.
    """
    root = access == 2
    subnet_of = jnp.asarray(tb.HOST_SUBNET)
    in_subnet = subnet_of[None, :] == jnp.arange(len(tb.SUBNETS))[:, None]  # [3, 13]
    sweepable = jnp.any(in_subnet & ~known, axis=1) & jnp.any(in_subnet & root, axis=1)  # [3]
    to_scan = known & ~scanned
    to_escalate = access == 1
    to_exploit = scanned & ~root & (jnp.arange(tb.NUM_HOSTS) != tb.DEFENDER)

    candidates = [
        (root[tb.OP_SERVER0], RED_IMPACT, jnp.int32(tb.OP_SERVER0)),
        (jnp.any(sweepable), RED_SUBNET_SCAN, jnp.argmax(sweepable)),
        (jnp.any(to_scan), RED_SCAN, random_pick(uniform_scan, to_scan)),
        (jnp.any(to_escalate), RED_PRIVESC, jnp.argmax(to_escalate)),
        (jnp.any(to_exploit), RED_EXPLOIT, random_pick(uniform_exploit, to_exploit)),
    ]
    kind, target = jnp.int32(RED_SLEEP), jnp.int32(0)
    for valid, option_kind, option_target in reversed(candidates):  # first valid one wins
        kind = jnp.where(valid, option_kind, kind)
        target = jnp.where(valid, option_target, target).astype(jnp.int32)
    return kind, target
