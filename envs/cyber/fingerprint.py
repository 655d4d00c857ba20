"""Which scripted Red is attacking, read from Blue's extended observation.

The CAGE-2 entries that led the leaderboard (CardiffUni, Keeping it RL) played one defender per
Red agent and told the Reds apart from what Blue sees in the first steps. The two Reds open
differently (:mod:`jaxrl.envs.cyber.red`): both sweep the User subnet first (Blue sees nothing),
then

- B_line port-scans its one user host and exploits that same host (steps 2 and 3);
- Meander port-scans every user IP it knows, one a step, before it exploits anything.

A port scan always shows on Blue's table, and an exploit shows as Exploit or Scan (both count
in the extended observation's per-host scan history). So after :data:`DECIDE_AT` steps B_line
has touched exactly one host and Meander two. Blue's actions cannot change that: a decoy or a
Restore on B_line's host still shows the exploit's attempt on that host or nothing at all.
With CybORG's GreenAgent on, its own port scans would blur the count; the challenge's
evaluation runs without it, as does :mod:`bench.cyber_defender`.

:func:`update_verdict` keeps the verdict per env row: ``UNDECIDED`` until the observation at
step :data:`DECIDE_AT`, then ``red.BLINE_AGENT`` or ``red.MEANDER_AGENT`` (the env's own Red
indices) for the rest of the episode; a new episode starts undecided.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.envs.cyber import red
from jaxrl.envs.cyber import tables as tb
from jaxrl.envs.cyber.env import EXTENDED_DIM, TABLE_DIM

UNDECIDED = -1  # no verdict yet (not a Red index)
DECIDE_AT = 3  # the step whose observation decides: sweep, scan, then exploit or a second scan
_HISTORY = slice(TABLE_DIM, TABLE_DIM + tb.NUM_HOSTS)  # per host: 0 never, 0.5 before, 1 now
_TIME = EXTENDED_DIM - 1  # step / 100


def hosts_touched(obs: jax.Array) -> jax.Array:
    """Hosts with Red activity seen so far, int32 ``[...]``, of extended obs ``[..., 79]``."""
    return jnp.sum(obs[..., _HISTORY] > 0, axis=-1).astype(jnp.int32)


def step_of(obs: jax.Array) -> jax.Array:
    """The env step an extended observation was made at, int32 ``[...]``."""
    return jnp.round(obs[..., _TIME] * 100.0).astype(jnp.int32)


def update_verdict(verdict: jax.Array, obs: jax.Array, is_first: jax.Array) -> jax.Array:
    """The verdict after one more observation.

    Args:
      verdict: int32 ``[N]``, ``UNDECIDED`` or a Red index, per env row.
      obs: float32 ``[N, 79]`` extended observations (``obs_mode="extended"``; ``"history"``'s
        ``[N, 151]`` begin with the same 79).
      is_first: bool ``[N]``, the row starts an episode (its old verdict is dropped).

    Returns:
      int32 ``[N]``.
    """
    verdict = jnp.where(is_first, UNDECIDED, verdict)
    guess = jnp.where(hosts_touched(obs) >= 2, red.MEANDER_AGENT, red.BLINE_AGENT)
    decide = (verdict == UNDECIDED) & (step_of(obs) >= DECIDE_AT)
    return jnp.where(decide, guess, verdict).astype(jnp.int32)
