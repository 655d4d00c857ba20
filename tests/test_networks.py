"""The entity encoder of :mod:`jaxrl.core.networks` (``network.entity_width``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import envs
from jaxrl.config import load_config
from jaxrl.core.networks import EntityEncoder
from jaxrl.envs.protocols import EntityGroup, EntityLayout
from jaxrl.run.setup import make_setup

# A row of 17: own features 0..2, three "others" blocks of 3 (flag first), own feature 12,
# one "mates" block of 4 (flag last).
LAYOUT = EntityLayout(
    size=17,
    groups=(EntityGroup("others", 3, 3, 3, presence=0), EntityGroup("mates", 13, 1, 4, 3)),
)
FLAGS = [3, 6, 9, 16]


def _rows(key, batch=16):
    """Random rows whose presence flags are 0 or 1."""
    key_x, key_flag = jax.random.split(key)
    x = np.array(jax.random.normal(key_x, (batch, LAYOUT.size)))
    flags = np.array(jax.random.bernoulli(key_flag, 0.6, (batch, 4)), np.float32)
    x[:, FLAGS] = flags
    return x


@pytest.fixture(scope="module")
def encoder():
    module = EntityEncoder(LAYOUT, width=4)
    params = module.init(jax.random.key(0), jnp.zeros((1, LAYOUT.size)))
    return jax.jit(module.apply), params


def test_encoder_by_hand(encoder):
    """Own features as they are; per group the mean of relu(block @ W + b) over present
    blocks (zeros if none), then the present fraction."""
    apply, params = encoder
    x = _rows(jax.random.key(1))
    x[0, FLAGS] = 0.0  # a row with no one present
    out = np.asarray(apply(params, jnp.asarray(x)))
    p = jax.tree.map(np.asarray, params["params"])
    assert LAYOUT.own_features.tolist() == [0, 1, 2, 12]
    assert out.shape == (16, 4 + (4 + 1) + (4 + 1))
    np.testing.assert_array_equal(out[:, :4], x[:, [0, 1, 2, 12]])
    for name, offset, count, width, flag, at in (
        ("others", 3, 3, 3, 0, 4),
        ("mates", 13, 1, 4, 3, 9),
    ):
        blocks = x[:, offset : offset + width * count].reshape(16, count, width)
        h = np.maximum(blocks @ p[f"{name}_kernel"] + p[f"{name}_bias"], 0.0)
        present = blocks[..., flag] > 0.5
        n = present.sum(-1)
        mean = (h * present[..., None]).sum(1) / np.maximum(n, 1)[:, None]
        np.testing.assert_allclose(out[:, at : at + 4], mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out[:, at + 4], n / count)
    np.testing.assert_array_equal(out[0, 4:], 0.0)


def test_encoder_ignores_block_order_and_absent_blocks(encoder):
    apply, params = encoder
    x = _rows(jax.random.key(2))
    out = apply(params, jnp.asarray(x))
    # Blocks of a group in another order: the same row.
    swapped = x.copy()
    swapped[:, 3:12] = x[:, 3:12].reshape(16, 3, 3)[:, [2, 0, 1]].reshape(16, 9)
    np.testing.assert_allclose(apply(params, jnp.asarray(swapped)), out, rtol=1e-6, atol=1e-6)
    # Whatever an absent block holds is never read.
    noisy = x.copy()
    for start, width, flag in ((3, 3, 3), (6, 3, 6), (9, 3, 9), (13, 4, 16)):
        absent = x[:, flag] == 0
        others = [i for i in range(start, start + width) if i != flag]
        noisy[np.ix_(absent, others)] = 99.0
    np.testing.assert_array_equal(apply(params, jnp.asarray(noisy)), out)


def test_soccer_policy_does_not_depend_on_the_order_of_cars():
    """With ``network.entity_width``, the soccer policy and value are the same whether an
    observation lists the other cars in slot order or nearest first (``nearest_first``)."""
    config = load_config(
        "configs/soccer_selfplay.yaml", ["network.entity_width=8", "network.hidden_sizes=[16]"]
    )
    setup = make_setup(config)
    env, params = envs.make("Soccer")
    params = env.with_team_size(params, 3)
    _, state = env.reset(jax.random.key(3), params)
    rows = {
        order: env.get_obs(state, params.replace(nearest_first=np.bool_(order)))
        for order in (False, True)
    }
    assert not np.array_equal(rows[False], rows[True])  # the orders differ in this kickoff
    net = setup.network
    obs = rows[False][None]  # [L=1, N=6, 65]
    first = jnp.zeros((1, 6), bool)
    weights = net.init(jax.random.key(4), net.initial_hidden(6), obs, first)
    outputs = [net.apply(weights, net.initial_hidden(6), rows[o][None], first) for o in rows]
    for a, b in zip(jax.tree.leaves(outputs[0]), jax.tree.leaves(outputs[1]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
