"""A faster CPU lowering of JAX's Threefry-2x32 hash: the same bits, no loop.

On CPU, JAX lowers every Threefry call (each ``jax.random.split``, ``uniform``,
``categorical``...) to a ``while`` loop of 5 iterations of 4 rounds, to keep compile times
down. Inside a rollout ``lax.scan`` that is a nested loop per random call per step: dozens of
loop-state copies and small kernels per env step, a large share of a small rollout's time
(figures: docs/results/speed.md#why-the-code-is-as-it-is). :func:`install` registers the
straight-line form (JAX's lowering on other platforms) for the CPU platform; XLA then fuses
each hash into one kernel.

The hash is the same function, so every random number is bit-for-bit what JAX's own
lowering gives (``tests/test_prng.py`` checks it against JAX's lowering and the Random123
known-answer vectors): seeds, checkpoints and results do not change. The registration is
process-wide and affects only how the hash is compiled, for jaxrl and any other code.
"""

from __future__ import annotations

import numpy as np
from jax.extend.random import threefry2x32_p
from jax.interpreters import mlir

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_installed = False


def _rotate_left(x, bits: int):
    return (x << np.uint32(bits)) | (x >> np.uint32(32 - bits))


def threefry2x32(key1, key2, x1, x2):
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011) on uint32 arrays, unrolled."""
    schedule = (key1, key2, key1 ^ key2 ^ np.uint32(0x1BD11BDA))
    x1 = x1 + schedule[0]
    x2 = x2 + schedule[1]
    for block in range(5):  # 5 blocks of 4 rounds, each followed by a key injection
        for bits in _ROTATIONS[block % 2]:
            x1 = x1 + x2
            x2 = _rotate_left(x2, bits) ^ x1
        x1 = x1 + schedule[(block + 1) % 3]
        x2 = x2 + schedule[(block + 2) % 3] + np.uint32(block + 1)
    return x1, x2


def install() -> None:
    """Register the unrolled lowering for CPU (idempotent); compile after calling this."""
    global _installed
    if _installed:
        return
    mlir.register_lowering(
        threefry2x32_p,
        mlir.lower_fun(threefry2x32, multiple_results=True),
        platform="cpu",
    )
    _installed = True
