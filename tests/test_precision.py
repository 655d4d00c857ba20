"""bfloat16 mixed precision: f32 params/optimizer, bf16 layers, f32 outputs and losses."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.config import load_config
from jaxrl.core.losses import Minibatch, ppo_loss
from jaxrl.core.precision import compute_dtype
from jaxrl.run.driver import train
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_runner_state

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("precision", "backend", "want"),
    [
        ("auto", "cpu", jnp.float32),
        ("auto", "gpu", jnp.bfloat16),
        ("auto", "cuda", jnp.bfloat16),
        ("auto", "tpu", jnp.bfloat16),
        ("float32", "gpu", jnp.float32),
        ("bfloat16", "cpu", jnp.bfloat16),
    ],
)
def test_auto_precision(precision, backend, want):
    assert compute_dtype(precision, backend) == want


def test_auto_on_this_machine():
    want = jnp.float32 if jax.default_backend() == "cpu" else jnp.bfloat16
    assert compute_dtype("auto") == want


@pytest.fixture(scope="module", params=["none", "gru", "lstm"])
def bf16_setup(request):
    config = load_config(
        REPO / "configs" / "cartpole.yaml",
        [
            "precision=bfloat16",
            f"network.core={request.param}",
            "network.core_size=16",
            "network.hidden_sizes=[16]",
            "ppo.num_steps=8",
            "ppo.num_minibatches=2",
        ],
    )
    setup = make_setup(config)
    runner = jax.eval_shape(lambda k: init_runner_state(setup, k), jax.random.key(0))
    return setup, runner


def _float_leaves(tree):
    return [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.floating)]


def test_params_and_optimizer_state_are_float32(bf16_setup):
    _, runner = bf16_setup
    assert _float_leaves(runner.params)
    for leaf in _float_leaves(runner.params) + _float_leaves(runner.opt_state):
        assert leaf.dtype == jnp.float32
    for leaf in jax.tree.leaves(runner.match.hidden):
        assert leaf.dtype == jnp.float32


def test_layers_compute_in_bf16_and_outputs_are_float32(bf16_setup):
    setup, runner = bf16_setup
    obs = jnp.zeros((3, 4) + setup.obs_shape, jnp.float32)
    is_first = jnp.zeros((3, 4), bool)
    hidden = setup.network.initial_hidden(4)
    fn = lambda p: setup.network.apply(p, hidden, obs, is_first)  # noqa: E731
    jaxpr = jax.make_jaxpr(fn)(runner.params)

    def dots(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "dot_general":
                yield eqn
            for param in eqn.params.values():
                inner = getattr(param, "jaxpr", None)
                if inner is not None:
                    yield from dots(getattr(inner, "jaxpr", inner))

    found = list(dots(jaxpr.jaxpr))
    # Torso + heads, plus the core's input and (inside the scan) hidden matmuls.
    assert len(found) >= (2 if setup.config.network.core == "none" else 4), found
    for eqn in found:
        assert all(v.aval.dtype == jnp.bfloat16 for v in eqn.invars), eqn
    new_hidden, policy_params, value = jax.eval_shape(fn, runner.params)
    assert policy_params.dtype == jnp.float32
    assert value.dtype == jnp.float32 and value.shape == (3, 4)
    for leaf in jax.tree.leaves(new_hidden):
        assert leaf.dtype == jnp.float32


def test_loss_and_grads_are_float32(bf16_setup):
    setup, runner = bf16_setup
    n, length = 4, 3
    batch = Minibatch(
        obs=jnp.zeros((length, n) + setup.obs_shape, jnp.float32),
        is_first=jnp.zeros((length, n), bool),
        hidden=setup.network.initial_hidden(n),
        action=jnp.zeros((length, n), jnp.int32),
        log_prob=jnp.zeros((length, n), jnp.float32),
        value=jnp.zeros((length, n), jnp.float32),
        advantage=jnp.ones((length, n), jnp.float32),
        target=jnp.ones((length, n), jnp.float32),
    )
    fn = jax.value_and_grad(ppo_loss, has_aux=True)
    (loss, metrics), grads = jax.eval_shape(
        lambda p: fn(p, setup.network, batch, setup.loss_hp, setup.discrete), runner.params
    )
    assert loss.dtype == jnp.float32
    for leaf in jax.tree.leaves(metrics) + jax.tree.leaves(grads):
        assert leaf.dtype == jnp.float32


def test_cartpole_learns_in_bfloat16(tmp_path):
    config = load_config(
        REPO / "configs" / "cartpole.yaml",
        [
            "precision=bfloat16",
            "train.total_steps=300000",
            "train.progress_bar=false",
            "checkpoint.every_updates=0",
        ],
    )
    result = train(config, tmp_path / "bf16", quiet=True)
    returns = [row["rollout/episode_return"] for row in result.history]
    assert np.nanmean(returns[-2:]) > 200, returns
