"""CybORG++'s scripted Blue baselines as pure-JAX policies on the 52-bit table.

Each policy is ``act(policy_state, obs [52+], key) -> (action int32, policy_state)`` with a
fresh :func:`init_policy_state` per episode (the fidelity bench plays whole episodes).

- ``sleep``: always Sleep.
- ``random``: a uniformly random action among the 145.
- ``react_restore`` (mini_CAGE's ``React_restore_minimal``): remembers every host whose table
  row shows it compromised (User or Privileged) and restores the lowest-index remembered host,
  one per step; sleeps when none is pending.
- ``react_decoy`` (mini_CAGE's ``Restore_decoys``): the same restores; on a step it would
  sleep it places the next decoy of a fixed greedy list (Enterprise2, Op_Server0, Enterprise1,
  Enterprise0, ...), each list entry tried once.
- ``hop_guard``: a B_line guard on the table alone. It opens with CardiffUni's Femitter and
  Tomcat decoys on User2 (before B_line's port scan of its user host at step 1), reads B_line's
  user host from the first activity on User1-4 and so the Enterprise host it hops through
  (``tables.NEXT_HOP``), restores an Enterprise host or Op_Server0 whose row shows User or
  Privileged, and the hop when Red shows on Enterprise2 or Op_Server0 (an exploit Monitor
  missed) unless it restored the hop in the last two steps, and otherwise fills the hop's
  decoys, then Enterprise2's and Op_Server0's (``GUARD_DECOYS``; a Restore clears its record).
- Blind mixes (``MIXES``, the same distributions as ``bench/research/cyber_peer.py``): each step an
action
  kind drawn with the mix's chances (Sleep, Monitor, Analyse, Remove, Decoy, Restore), then a
  uniform host (and decoy type). ``random`` is uniform over the 145 actions, ``remove_mix``
  mostly Removes and ``decoy_mix`` mostly decoys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.envs.cyber import env as cyber_env
from jaxrl.envs.cyber import tables as tb


class PolicyState(struct.PyTreeNode):
    """A scripted Blue's memory."""

    pending: jax.Array  # [13] bool, hosts seen compromised and not yet restored
    next_decoy: jax.Array  # () int32, index into DECOY_PLAN of the next decoy to place
    step: jax.Array  # () int32, actions taken this episode
    hop: jax.Array  # () int32, the Enterprise host B_line hops through (-1: not seen yet)
    placed: jax.Array  # [13, 8] bool, decoys this Blue placed and has not restored since
    restored_at: jax.Array  # () int32, the step it last restored the hop (-10: never)


def init_policy_state() -> PolicyState:
    """An empty memory for a new episode."""
    return PolicyState(
        pending=jnp.zeros(tb.NUM_HOSTS, bool),
        next_decoy=jnp.int32(0),
        step=jnp.int32(0),
        hop=jnp.int32(-1),
        placed=jnp.zeros((tb.NUM_HOSTS, tb.NUM_DECOYS), bool),
        restored_at=jnp.int32(-10),
    )


def decoy_action(decoy: int, host: int) -> int:
    """CybORG's Decoy action index for decoy type ``decoy`` on ``host``."""
    return tb.DECOY + tb.NUM_HOSTS * decoy + host


def first_decoy(wishes: list[tuple[jax.Array, int, int]]) -> jax.Array:
    """The Decoy action of the first wish ``(valid bool (), host, decoy type)`` that is valid,
    int32 (); -1 when none is."""
    action = jnp.int32(-1)
    for valid, host, decoy in reversed(wishes):
        action = jnp.where(valid, decoy_action(decoy, host), action)
    return action.astype(jnp.int32)


# mini_CAGE's Restore_decoys host order [3, 7, 2, 1, 7, 7, 1, 7, 1, 1] (Enterprise2,
# Op_Server0, Enterprise1, Enterprise0, ...), each host taking its next decoy in Cardiff's
# per-host preference (mini_CAGE HOST_DECOYS).
DECOY_PLAN = np.array(
    [
        decoy_action(tb.FEMITTER, tb.ENTERPRISE2),
        decoy_action(tb.HARAKA_SMTP, tb.OP_SERVER0),
        decoy_action(tb.FEMITTER, tb.ENTERPRISE1),
        decoy_action(tb.HARAKA_SMTP, tb.ENTERPRISE0),
        decoy_action(tb.APACHE, tb.OP_SERVER0),
        decoy_action(tb.TOMCAT, tb.OP_SERVER0),
        decoy_action(tb.TOMCAT, tb.ENTERPRISE0),
        decoy_action(tb.VSFTPD, tb.OP_SERVER0),
        decoy_action(tb.VSFTPD, tb.ENTERPRISE0),
        decoy_action(tb.APACHE, tb.ENTERPRISE0),
    ],
    np.int32,
)


def compromised_rows(obs: jax.Array) -> jax.Array:
    """Hosts whose table row shows User or Privileged (second compromised bit), bool [13]."""
    return obs[: 4 * tb.NUM_HOSTS].reshape(tb.NUM_HOSTS, 4)[:, 3] > 0.5


def sleep(state: PolicyState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, PolicyState]:
    """Always Sleep."""
    del obs, key
    return jnp.int32(tb.SLEEP), state


def random(state: PolicyState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, PolicyState]:
    """A uniformly random action."""
    del obs
    return jax.random.randint(key, (), 0, tb.NUM_ACTIONS, jnp.int32), state


# Action kinds in CybORG's order, their sizes, and each blind mix's chance of each kind.
KINDS = ("sleep", "monitor", "analyse", "remove", "decoy", "restore")
KIND_FIRST = np.array([tb.SLEEP, tb.MONITOR, tb.ANALYSE, tb.REMOVE, tb.DECOY, tb.RESTORE])  # [6]
KIND_SIZES = np.diff(np.append(KIND_FIRST, tb.NUM_ACTIONS))  # [6]: 1, 1, 13, 13, 104, 13
MIXES: dict[str, tuple[float, ...]] = {
    "random": tuple(float(n) / tb.NUM_ACTIONS for n in KIND_SIZES),
    "remove_mix": (0.2, 0.0, 0.1, 0.6, 0.05, 0.05),
    "decoy_mix": (0.1, 0.0, 0.05, 0.05, 0.78, 0.02),
}


def mix_action(weights: jax.Array, key: jax.Array) -> jax.Array:
    """An action drawn from a mix: kind by ``weights`` (float [6]), then uniform within it."""
    key_kind, key_index = jax.random.split(key)
    weights = jnp.asarray(weights, jnp.float32)
    kind = jax.random.choice(key_kind, len(KINDS), p=weights / jnp.sum(weights))
    offset = jnp.floor(jax.random.uniform(key_index) * jnp.asarray(KIND_SIZES)[kind])
    return (jnp.asarray(KIND_FIRST)[kind] + offset.astype(jnp.int32)).astype(jnp.int32)


def mix_policy(name: str) -> Callable:
    """The blind Blue ``MIXES[name]`` as a policy."""
    weights = np.asarray(MIXES[name], np.float32)

    def act(state: PolicyState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, PolicyState]:
        del obs
        return mix_action(weights, key), state

    act.__name__ = name
    return act


def react_restore(
    state: PolicyState, obs: jax.Array, key: jax.Array
) -> tuple[jax.Array, PolicyState]:
    """Restore the lowest-index host ever seen compromised and not restored since."""
    del key
    pending = state.pending | compromised_rows(obs)
    host = jnp.argmax(pending)
    any_pending = jnp.any(pending)
    action = jnp.where(any_pending, tb.RESTORE + host, tb.SLEEP).astype(jnp.int32)
    pending = pending & ~(any_pending & (jnp.arange(tb.NUM_HOSTS) == host))
    return action, state.replace(pending=pending)


def react_decoy(
    state: PolicyState, obs: jax.Array, key: jax.Array
) -> tuple[jax.Array, PolicyState]:
    """React-Restore, placing the next planned decoy where it would sleep."""
    action, state = react_restore(state, obs, key)
    idle = action == tb.SLEEP
    has_plan = state.next_decoy < len(DECOY_PLAN)
    plan = jnp.asarray(DECOY_PLAN)[jnp.minimum(state.next_decoy, len(DECOY_PLAN) - 1)]
    place = idle & has_plan
    return (
        jnp.where(place, plan, action).astype(jnp.int32),
        state.replace(next_decoy=state.next_decoy + place.astype(jnp.int32)),
    )


# hop_guard's plan. The opening: CardiffUni's first two decoys on User2, in place before
# B_line's port scan at step 1 (only there can decoys turn its first exploit away).
GUARD_OPENING_DECOYS = ((tb.USER2, tb.FEMITTER), (tb.USER2, tb.TOMCAT))  # (host, type)
GUARD_OPENING = np.array([decoy_action(d, h) for h, d in GUARD_OPENING_DECOYS], np.int32)
GUARDED = np.array([tb.OP_SERVER0, tb.ENTERPRISE2, tb.ENTERPRISE1, tb.ENTERPRISE0], np.int32)
# Decoys to keep in place, first the hop's (by hop), then Enterprise2's and Op_Server0's.
# Enterprise1 and Enterprise2 take only Femitter; on Enterprise0 HarakaSMPT lures B_line's
# top exploit and Tomcat and Apache two of the others (2.1's Vsftpd shares Apache's port 80).
HOP_DECOYS = {
    tb.ENTERPRISE1: ((tb.ENTERPRISE1, tb.FEMITTER),),
    tb.ENTERPRISE0: (
        (tb.ENTERPRISE0, tb.HARAKA_SMTP),
        (tb.ENTERPRISE0, tb.TOMCAT),
        (tb.ENTERPRISE0, tb.APACHE),
    ),
}
GUARD_DECOYS = (
    (tb.ENTERPRISE2, tb.FEMITTER),
    (tb.OP_SERVER0, tb.HARAKA_SMTP),
    (tb.OP_SERVER0, tb.APACHE),
    (tb.OP_SERVER0, tb.TOMCAT),
)
GUARD_USERS = np.array([tb.USER1, tb.USER2, tb.USER3, tb.USER4], np.int32)
RESTORE_QUIET = 2  # steps after restoring the hop in which Red on Enterprise2/Op is expected


def hop_guard(state: PolicyState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, PolicyState]:
    """The B_line guard of the module docstring (deterministic; ``key`` unused)."""
    del key
    rows = obs[: 4 * tb.NUM_HOSTS].reshape(tb.NUM_HOSTS, 4) > 0.5  # [13, 4]
    active, compromised = rows[:, 0], rows[:, 3]
    users_active = active[GUARD_USERS]  # [4]
    first_user = jnp.asarray(GUARD_USERS)[jnp.argmax(users_active)]
    hop = jnp.where(
        (state.hop < 0) & jnp.any(users_active), jnp.asarray(tb.NEXT_HOP)[first_user], state.hop
    )
    hosts = jnp.arange(tb.NUM_HOSTS)

    # Restores: a guarded host marked User or Privileged; the hop when Red shows beyond it.
    beyond = active[tb.ENTERPRISE2] | active[tb.OP_SERVER0]
    quiet = state.step - state.restored_at <= RESTORE_QUIET
    need = compromised | ((hosts == hop) & beyond & ~quiet)  # [13]
    need_guarded = need[GUARDED]  # [4], in GUARDED's priority
    restore_host = jnp.asarray(GUARDED)[jnp.argmax(need_guarded)]
    restoring = jnp.any(need_guarded)

    # Decoys: the opening, then the hop's, then the rest, each the first one not in place.
    # None on the hop while it is busy: Red active there this step (after a port scan its next
    # action is the exploit, which would meet a decoy placed now unseen by that scan, and a
    # decoy hit where Blue places a decoy in the same step reads as an Exploit, a false User
    # mark), or right after this Blue restored it (Red's escalation failed; its next action is
    # an exploit of the hop with the ports it saw before the Restore).
    hop_busy = active[jnp.clip(hop, 0, tb.NUM_HOSTS - 1)] | (state.step == state.restored_at + 1)
    wish = [(hop == hop_host, h, d) for hop_host, pairs in HOP_DECOYS.items() for h, d in pairs]
    wish += [(jnp.bool_(True), h, d) for h, d in GUARD_DECOYS]
    decoy = first_decoy(
        [(valid & ~state.placed[h, d] & ~((h == hop) & hop_busy), h, d) for valid, h, d in wish]
    )
    opening_step = jnp.minimum(state.step, len(GUARD_OPENING) - 1)
    decoy = jnp.where(
        state.step < len(GUARD_OPENING), jnp.asarray(GUARD_OPENING)[opening_step], decoy
    )
    action = jnp.where(restoring, tb.RESTORE + restore_host, jnp.where(decoy >= 0, decoy, tb.SLEEP))
    action = action.astype(jnp.int32)

    played = cyber_env.decode_blue(action)
    placed = (state.placed | played.decoy) & ~played.restore[:, None]
    restored_at = jnp.where(restoring & (restore_host == hop), state.step, state.restored_at)
    return action, state.replace(
        step=state.step + 1, hop=hop.astype(jnp.int32), placed=placed,
        restored_at=restored_at.astype(jnp.int32),
    )  # fmt: skip


class Played(struct.PyTreeNode):
    """What each step of :func:`play` gave, stacked over the steps ``[T]``."""

    reward: jax.Array  # [T] float32
    terminated: jax.Array  # [T] bool
    truncated: jax.Array  # [T] bool
    info: dict[str, Any]  # the env's info, each leaf [T, ...]
    state: Any  # env states after each step, each leaf [T, ...]


def play(env: Any, policy: Callable, key: jax.Array, params: Any, num_steps: int) -> Played:
    """``num_steps`` auto-resetting steps of ``env`` with the scripted Blue ``policy``.

    The policy's memory starts empty with the first episode (the callers play episodes of
    ``num_steps`` or fewer). Vmap over ``key`` for a batch.
    """
    key_reset, key_steps = jax.random.split(key)
    obs, state = env.reset(key_reset, params)

    def body(carry, key_t):
        obs, state, policy_state = carry
        key_act, key_step = jax.random.split(key_t)
        action, policy_state = policy(policy_state, obs, key_act)
        obs, state, reward, terminated, truncated, info = env.step(key_step, state, action, params)
        return (obs, state, policy_state), Played(reward, terminated, truncated, info, state)

    carry = (obs, state, init_policy_state())
    return jax.lax.scan(body, carry, jax.random.split(key_steps, num_steps))[1]


BASELINES: dict[str, Callable] = {
    "sleep": sleep,
    "random": random,
    "react_restore": react_restore,
    "react_decoy": react_decoy,
    "hop_guard": hop_guard,
    "remove_mix": mix_policy("remove_mix"),
    "decoy_mix": mix_policy("decoy_mix"),
}
