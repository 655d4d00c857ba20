"""The sort-free minibatch permutation: a bijection, deterministic, and random-looking."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.core.permutation import permutation

# Cycle walking (the CPU's default) and packing (GPU and TPU): both must hold everything below.
methods = pytest.mark.parametrize("method", ["walk", "pack"])


@methods
@pytest.mark.parametrize("n", [1, 2, 3, 5, 16, 100, 512, 1000, 24576, 65536])
def test_is_a_permutation(n, method):
    perm = np.asarray(permutation(jax.random.key(n), n, method))
    assert perm.dtype == np.int32
    np.testing.assert_array_equal(np.sort(perm), np.arange(n))


@methods
def test_same_key_same_permutation_other_key_other(method):
    a = permutation(jax.random.key(0), 512, method)
    b = permutation(jax.random.key(0), 512, method)
    c = permutation(jax.random.key(1), 512, method)
    np.testing.assert_array_equal(a, b)
    assert (np.asarray(a) != np.asarray(c)).mean() > 0.9


@methods
def test_positions_are_uniform(method):
    """Over many keys, each element lands in each of 8 positions about equally often."""
    n, draws = 8, 4000
    perms = np.asarray(
        jax.jit(jax.vmap(lambda k: permutation(k, n, method)))(
            jax.random.split(jax.random.key(0), draws)
        )
    )
    counts = np.zeros((n, n))
    for position in range(n):
        counts[:, position] = np.bincount(perms[:, position], minlength=n)
    expected = draws / n
    chi2 = ((counts - expected) ** 2 / expected).sum()
    # 49 degrees of freedom: the 99.9% quantile is about 86.
    assert chi2 < 86, chi2


@methods
def test_neighbours_are_split_across_minibatches(method):
    """A rollout's neighbouring samples share a minibatch as often as random pairs would."""
    n, minibatches, draws = 512, 4, 200
    size = n // minibatches
    keys = jax.random.split(jax.random.key(1), draws)
    perms = np.asarray(jax.jit(jax.vmap(lambda k: permutation(k, n, method)))(keys))
    minibatch_of = np.empty_like(perms)
    rows = np.arange(draws)[:, None]
    minibatch_of[rows, perms] = np.arange(n)[None, :] // size  # sample -> its minibatch
    same = (minibatch_of[:, :-1] == minibatch_of[:, 1:]).mean()
    # Uniformly random: P(same) = (size - 1) / (n - 1) = 0.2485; the std of the mean is ~0.0014.
    assert abs(same - (size - 1) / (n - 1)) < 0.01, same
    # Every minibatch mixes samples from the whole rollout.
    first = perms[:, :size]
    assert np.all(first.min(axis=1) < n // 8) and np.all(first.max(axis=1) > n - n // 8)


def test_rejects_bad_length_and_method():
    with pytest.raises(ValueError, match="permutation length"):
        permutation(jax.random.key(0), 0)
    with pytest.raises(ValueError, match="method must be 'walk' or 'pack'"):
        permutation(jax.random.key(0), 8, "sort")


def test_pack_has_no_loop_of_its_own():
    """No data-dependent while loop, so a GPU never reads a trip count back to the host; the
    only loops are those of drawing the round keys (fixed trip count)."""

    def loops(fn) -> int:
        return jax.jit(fn).lower(jax.random.key(0)).as_text().count("stablehlo.while")

    keys_only = loops(lambda k: jax.random.bits(k, (8,), jnp.uint32))
    assert loops(lambda k: permutation(k, 512, "pack")) == keys_only
    assert loops(lambda k: permutation(k, 512, "walk")) == keys_only + 1
