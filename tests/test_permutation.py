"""The sort-free minibatch permutation: a bijection, deterministic, and random-looking."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxrl.permutation import permutation


@pytest.mark.parametrize("n", [1, 2, 3, 5, 16, 100, 512, 1000, 24576, 65536])
def test_is_a_permutation(n):
    perm = np.asarray(permutation(jax.random.key(n), n))
    assert perm.dtype == np.int32
    np.testing.assert_array_equal(np.sort(perm), np.arange(n))


def test_same_key_same_permutation_other_key_other():
    a = permutation(jax.random.key(0), 512)
    b = permutation(jax.random.key(0), 512)
    c = permutation(jax.random.key(1), 512)
    np.testing.assert_array_equal(a, b)
    assert (np.asarray(a) != np.asarray(c)).mean() > 0.9


def test_positions_are_uniform():
    """Over many keys, each element lands in each of 8 positions about equally often."""
    n, draws = 8, 4000
    perms = np.asarray(
        jax.jit(jax.vmap(lambda k: permutation(k, n)))(jax.random.split(jax.random.key(0), draws))
    )
    counts = np.zeros((n, n))
    for position in range(n):
        counts[:, position] = np.bincount(perms[:, position], minlength=n)
    expected = draws / n
    chi2 = ((counts - expected) ** 2 / expected).sum()
    # 49 degrees of freedom: the 99.9% quantile is about 86.
    assert chi2 < 86, chi2


def test_neighbours_are_split_across_minibatches():
    """A rollout's neighbouring samples share a minibatch as often as random pairs would."""
    n, minibatches, draws = 512, 4, 200
    size = n // minibatches
    keys = jax.random.split(jax.random.key(1), draws)
    perms = np.asarray(jax.jit(jax.vmap(lambda k: permutation(k, n)))(keys))
    minibatch_of = np.empty_like(perms)
    rows = np.arange(draws)[:, None]
    minibatch_of[rows, perms] = np.arange(n)[None, :] // size  # sample -> its minibatch
    same = (minibatch_of[:, :-1] == minibatch_of[:, 1:]).mean()
    # Uniformly random: P(same) = (size - 1) / (n - 1) = 0.2485; the std of the mean is ~0.0014.
    assert abs(same - (size - 1) / (n - 1)) < 0.01, same
    # Every minibatch mixes samples from the whole rollout.
    first = perms[:, :size]
    assert np.all(first.min(axis=1) < n // 8) and np.all(first.max(axis=1) > n - n // 8)


def test_rejects_bad_length():
    with pytest.raises(ValueError, match="permutation length"):
        permutation(jax.random.key(0), 0)
