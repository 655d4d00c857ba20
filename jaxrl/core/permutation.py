"""Random permutations without sorting, for shuffling minibatches.

``jax.random.permutation`` sorts random keys (two or three sort passes over ``n``
elements), a large share of a CPU PPO update at many envs (docs/results/speed.md, "Why the
code is as it is").

:func:`permutation` instead maps every index through a keyed bijection: an 8-round balanced
Feistel network on ``2k``-bit integers (Luby and Rackoff: 4 rounds with pseudo-random round
functions already give a pseudo-random permutation) with a 32-bit integer hash as round function,
over a domain of ``4**k >= n`` (less than ``4n``) values. Two ways make it a permutation of
``[0, n)``, both a few elementwise passes with no sort:

- ``walk`` (on CPU): indices that land outside ``[0, n)`` go through the bijection again until
  they land inside ("cycle walking"). That is a ``while_loop`` of data-dependent trip count.
- ``pack`` (on GPU and TPU): the values below ``n`` in the order the bijection lists them
  over the whole domain, packed by a prefix sum and a scatter. No loop: XLA's GPU while
  loops read a data-dependent predicate back to the host at every iteration (a GPU profile
  showed about one device-to-host copy per cycle-walking iteration). On a CPU ``pack`` is
  slower than ``walk`` at large ``n`` (docs/results/speed.md).

The permutation is pseudo-random, not uniform over all ``n!`` orders; for cutting a rollout
into minibatches what matters is that which samples share a minibatch looks random, which
``tests/test_permutation.py`` checks.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np

ROUNDS = 8
# The platform whose method a default ``permutation`` picks; None: the default backend.
# ``bench.hlo_audit`` sets it to compile, on a CPU, the program a GPU would run.
_TARGET: contextvars.ContextVar[str | None] = contextvars.ContextVar("target", default=None)


@contextlib.contextmanager
def target_platform(platform: str) -> Iterator[None]:
    """Trace default permutations as for ``platform`` (``cpu``, ``gpu``, ``tpu``) inside."""
    token = _TARGET.set(platform)
    try:
        yield
    finally:
        _TARGET.reset(token)


def default_method() -> str:
    """``walk`` on a CPU, ``pack`` elsewhere (see the module docstring)."""
    platform = _TARGET.get() or jax.default_backend()
    return "walk" if platform == "cpu" else "pack"


def _hash32(x: jax.Array) -> jax.Array:
    """A well-mixing 32-bit integer hash (xorshift-multiply, "lowbias32"); uint32 -> uint32."""
    x = x ^ (x >> 16)
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> 16)


def _feistel(x: jax.Array, round_keys: jax.Array, half_bits: int) -> jax.Array:
    """The keyed bijection of ``[0, 4**half_bits)``; ``x`` uint32, ``round_keys`` uint32[R]."""
    mask = np.uint32((1 << half_bits) - 1)
    left, right = x >> np.uint32(half_bits), x & mask
    for r in range(ROUNDS):
        left, right = right, left ^ (_hash32(right ^ round_keys[r]) & mask)
    return (left << np.uint32(half_bits)) | right


def permutation(key: jax.Array, n: int, method: str | None = None) -> jax.Array:
    """A pseudo-random permutation of ``range(n)`` drawn from ``key``: int32 ``[n]``.

    Args:
      key: a PRNG key; the same key and method give the same permutation.
      n: static length, ``1 <= n < 2**30``.
      method: ``"walk"`` (cycle walking in a ``while_loop``: fastest on a CPU) or
        ``"pack"`` (no loop: for GPUs and TPUs, where a loop of data-dependent trip count
        reads its predicate back to the host every iteration). Default: ``"walk"`` when
        the default backend is the CPU, else ``"pack"``. The two give different orders.
    """
    if not 1 <= n < 2**30:
        raise ValueError(f"permutation length must be in [1, 2**30), got {n}")
    if method is None:
        method = default_method()
    if method not in ("walk", "pack"):
        raise ValueError(f"permutation method must be 'walk' or 'pack', got {method!r}")
    # 4**half_bits >= n; at least 256 values, since Feistel networks on tiny domains mix poorly.
    half_bits = max(4, (int(n - 1).bit_length() + 1) // 2)
    round_keys = jax.random.bits(key, (ROUNDS,), jnp.uint32)
    limit = np.uint32(n)
    if method == "pack":
        domain = 1 << (2 * half_bits)  # < 4n for n >= 64
        image = _feistel(jnp.arange(domain, dtype=jnp.uint32), round_keys, half_bits)
        # The values below n in the order the bijection lists them; a prefix sum gives each
        # its slot.
        inside = image < limit
        slot = jnp.where(inside, jnp.cumsum(inside, dtype=jnp.int32) - 1, n)
        out = jnp.zeros(n, jnp.int32)
        return out.at[slot].set(image.astype(jnp.int32), mode="drop", unique_indices=True)

    start = _feistel(jnp.arange(n, dtype=jnp.uint32), round_keys, half_bits)

    # Cycle walking: for n >= 64 the domain is at most 4n, so each step leaves an index
    # outside [0, n) with probability at most 3/4; a few dozen steps even for n = 2**20.
    def outside(x):
        return jnp.any(x >= limit)

    def walk(x):
        return jnp.where(x >= limit, _feistel(x, round_keys, half_bits), x)

    return jax.lax.while_loop(outside, walk, start).astype(jnp.int32)
