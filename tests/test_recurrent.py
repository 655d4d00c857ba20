"""Recurrent PPO: hidden-state handling, sequence equivalence, memory, resume."""

from __future__ import annotations

import shutil
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.commands.evaluate import evaluate
from jaxrl.config import load_config
from jaxrl.core.losses import Minibatch
from jaxrl.core.networks import RecurrentCore, make_distribution
from jaxrl.core.ppo import shuffle_minibatches
from jaxrl.core.rollout import rollout
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.driver import train
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import (
    init_runner_state,
    make_plan,
    make_sequences,
    make_train_step,
    training_batch,
)
from tests.conftest import tiny_overrides

REPO = Path(__file__).resolve().parents[1]

# 4 envs x 16 steps with 5-step episodes: every sequence crosses episode boundaries.
TINY_RNN = tiny_overrides(
    "env.kwargs={max_steps_in_episode: 5}",
    "ppo.num_steps=16",
    "network.hidden_sizes=[8]",
    "network.core_size=8",
    "train.total_steps=1536",
)


def _config(*extra: str):
    return load_config(REPO / "configs" / "cartpole.yaml", [*TINY_RNN, *extra])


def _equal(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def _rollout_and_recompute(config):
    """Act for one rollout, then re-run the stored sequences as the loss does."""
    setup = make_setup(config)
    runner = init_runner_state(setup, jax.random.key(3))
    # Train one chunk first so the params are not at their (symmetric) initial values.
    runner, _ = make_train_step(setup)(runner)

    @jax.jit
    def go(runner):
        plan = make_plan(setup, runner.features)
        _, out = rollout(setup, runner.params, runner.obs_stats, plan, runner.match, runner.key)
        traj = out.transitions
        seqs = training_batch(setup, traj, out.start_hidden, traj.reward, traj.reward)
        _, policy_params, value = setup.network.apply(
            runner.params, seqs.hidden, seqs.obs, seqs.is_first
        )
        log_prob = make_distribution(policy_params, setup.discrete).log_prob(seqs.action)
        return traj, seqs, log_prob, value

    return go(runner)


@pytest.mark.parametrize(
    "extra",
    [
        ["network.core=gru", "ppo.sequence_length=0"],
        ["network.core=gru", "ppo.sequence_length=4"],
        ["network.core=lstm", "ppo.sequence_length=8", "network.shared_torso=true"],
    ],
    ids=["gru-whole-rollout", "gru-chunks-of-4", "lstm-shared-chunks-of-8"],
)
def test_loss_rerun_reproduces_acting(extra):
    traj, seqs, log_prob, value = _rollout_and_recompute(_config(*extra))
    # The rollout really crosses episode boundaries inside sequences.
    assert bool(traj.is_first[1:].any())
    assert bool(seqs.is_first[1:].any())
    np.testing.assert_allclose(log_prob, seqs.log_prob, rtol=0, atol=1e-6)
    np.testing.assert_allclose(value, seqs.value, rtol=0, atol=1e-6)


def test_reset_makes_output_independent_of_incoming_state():
    setup = make_setup(_config("network.core=gru"))
    runner = init_runner_state(setup, jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (3, 2, 4))
    is_first = jnp.array([[True, True], [False, False], [True, False]])
    noise = jax.tree.map(
        lambda h: jax.random.normal(jax.random.key(2), h.shape), setup.network.initial_hidden(2)
    )
    zero = setup.network.initial_hidden(2)
    _, logits_a, value_a = setup.network.apply(runner.params, zero, obs, is_first)
    _, logits_b, value_b = setup.network.apply(runner.params, noise, obs, is_first)
    np.testing.assert_array_equal(logits_a, logits_b)
    np.testing.assert_array_equal(value_a, value_b)
    # Without the reset the incoming state matters.
    _, logits_c, _ = setup.network.apply(runner.params, noise, obs, jnp.zeros_like(is_first))
    assert not np.allclose(logits_a[0], logits_c[0])


def _flax_gru_params(params, size: int):
    """Our fused GRU's params as flax's ``GRUCell`` names them (per-gate Dense layers)."""
    kx, bx = params["input"]["kernel"], params["input"]["bias"]  # [F, 3H], [3H]
    kh, bh = params["cell"]["hidden"]["kernel"], params["cell"]["hidden"]["bias"]
    gate = lambda a, g: a[..., g * size : (g + 1) * size]  # noqa: E731
    # flax has no hidden bias on r and z (the input's carries it): fold ours into the input's.
    return {
        "ir": {"kernel": gate(kx, 0), "bias": gate(bx, 0) + gate(bh, 0)},
        "iz": {"kernel": gate(kx, 1), "bias": gate(bx, 1) + gate(bh, 1)},
        "in": {"kernel": gate(kx, 2), "bias": gate(bx, 2)},
        "hr": {"kernel": gate(kh, 0)},
        "hz": {"kernel": gate(kh, 1)},
        "hn": {"kernel": gate(kh, 2), "bias": gate(bh, 2)},
    }


def test_fused_gru_is_flax_gru_cell():
    """One input matmul for the three gates over the whole sequence and one hidden matmul
    per step compute flax's ``GRUCell`` (reset gate on the hidden projection, bias inside),
    restarting from zeros where ``is_first``."""
    features, size, length, batch = 3, 4, 6, 5
    core = RecurrentCore("gru", size)
    rng = np.random.default_rng(0)  # numpy draws: no PRNG kernels to compile
    x = rng.normal(size=(length, batch, features)).astype(np.float32)
    is_first = np.zeros((length, batch), bool)
    is_first[0], is_first[3, ::2] = True, True
    shapes = {"input": (features, 3 * size), "cell": {"hidden": (size, 3 * size)}}
    # Random kernels and non-zero biases, so that where each bias goes is tested too.
    params = jax.tree.map(
        lambda shape: {
            "kernel": rng.normal(size=shape).astype(np.float32),
            "bias": 0.3 * rng.normal(size=shape[1]).astype(np.float32),
        },
        shapes,
        is_leaf=lambda v: isinstance(v, tuple),
    )
    noise = rng.normal(size=(batch, size)).astype(np.float32)  # the incoming state, reset
    carry, ys = jax.jit(core.apply)({"params": params}, noise, x, is_first)

    cell = nn.GRUCell(features=size)
    theirs = {"params": _flax_gru_params(params, size)}

    def flax_step(h, inputs):
        x_t, first = inputs
        return cell.apply(theirs, jnp.where(first[:, None], 0.0, h), x_t)

    h, want = jax.jit(lambda h: jax.lax.scan(flax_step, h, (x, is_first)))(noise)
    np.testing.assert_allclose(ys, want, rtol=0, atol=1e-5)
    np.testing.assert_allclose(carry, h, rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind, gates", [("gru", 3), ("lstm", 4)])
def test_recurrent_core_runs_one_matmul_per_step(kind, gates):
    """The gates' input projection is one matmul outside the time loop and the hidden one a
    single matmul of all gates inside it (not one per gate)."""
    core = RecurrentCore(kind, 4, jnp.bfloat16)
    x = jnp.zeros((5, 2, 3))
    is_first = jnp.zeros((5, 2), bool)
    carry = RecurrentCore.initial_carry(kind, 4, 2)
    params = core.init(jax.random.key(0), carry, x, is_first)
    jaxpr = jax.make_jaxpr(core.apply)(params, carry, x, is_first).jaxpr
    outside = [e for e in jaxpr.eqns if e.primitive.name == "dot_general"]
    (loop,) = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    inside = [e for e in loop.params["jaxpr"].jaxpr.eqns if e.primitive.name == "dot_general"]
    assert len(outside) == len(inside) == 1
    for dot in outside + inside:
        assert dot.outvars[0].aval.shape[-1] == gates * 4
        # bf16 compute, float32 params: the matmul runs on bf16 operands.
        assert {v.aval.dtype for v in dot.invars} == {jnp.dtype(jnp.bfloat16)}


def test_minibatches_shuffle_whole_sequences():
    config = _config("network.core=gru", "ppo.sequence_length=4")
    setup = make_setup(config)
    steps, envs = config.ppo.num_steps, config.env.num_envs
    t = jnp.arange(steps, dtype=jnp.float32)[:, None] * 100 + jnp.arange(envs)[None, :]
    data = Minibatch(
        obs=t[..., None],
        is_first=jnp.zeros((steps, envs), bool),
        hidden=(),
        action=t.astype(jnp.int32),
        log_prob=t,
        value=t,
        advantage=t,
        target=t,
    )
    start_hidden = jnp.arange(steps // 4 * envs, dtype=jnp.float32).reshape(steps // 4, envs, 1)
    seqs = make_sequences(setup, data, start_hidden)
    assert seqs.advantage.shape == (4, config.num_sequences)
    # Sequence c * B + b is env b's steps 4c .. 4c + 3, and starts from start_hidden[c, b].
    for n in range(config.num_sequences):
        c, b = divmod(n, envs)
        np.testing.assert_array_equal(seqs.advantage[:, n], t[4 * c : 4 * c + 4, b])
        assert seqs.hidden[n, 0] == start_hidden[c, b, 0]
    mbs = shuffle_minibatches(seqs, jax.random.key(0), config.ppo.num_minibatches)
    assert mbs.advantage.shape == (2, 4, config.num_sequences // 2)
    for m in range(2):
        for j in range(config.num_sequences // 2):
            column = np.asarray(mbs.advantage[m, :, j])
            env, start = int(column[0]) % 100, int(column[0]) // 100
            # Time runs in order inside every sequence, and its hidden state travels with it.
            np.testing.assert_array_equal(column, t[start : start + 4, env])
            assert mbs.hidden[m, j, 0] == start_hidden[start // 4, env, 0]


def test_recurrent_step_compiles_once_and_resumes_bit_exactly(tmp_path):
    config = _config("network.core=gru", "ppo.sequence_length=4")
    full = train(config, tmp_path / "full", quiet=True)
    assert int(full.runner.update_step) == 24
    # Resume a copy of the run from its first checkpoint: the hidden states, env states
    # and keys must all come back for the result to match bit for bit.
    partial = tmp_path / "partial"
    shutil.copytree(full.run_dir, partial)
    for step in ("16", "24"):
        shutil.rmtree(partial / "checkpoints" / step)
    resumed = train(run_dir=partial, resume=True, quiet=True)
    assert _equal(resumed.runner.params, full.runner.params)
    assert _equal(resumed.runner.match.hidden, full.runner.match.hidden)
    setup = make_setup(config)
    restored, _ = Checkpointer(partial, create=False).restore(
        init_runner_state(setup, jax.random.key(0))
    )
    assert _equal(restored.match.hidden, full.runner.match.hidden)
    # One executable for the whole run.
    step = make_train_step(setup)
    runner = init_runner_state(setup, jax.random.key(0))
    for _ in range(2):
        runner, _ = step(runner)
    assert step._cache_size() == 1


@pytest.fixture(scope="module")
def probe_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("probe")
    path = REPO / "configs" / "memory_probe.yaml"
    rnn = train(load_config(path, ["train.progress_bar=false"]), base / "gru", quiet=True)
    ff = train(
        load_config(path, ["train.progress_bar=false", "network.core=none"]),
        base / "ff",
        quiet=True,
    )
    return rnn, ff


def test_memory_probe_needs_memory(probe_runs):
    rnn, ff = probe_runs
    rnn_success = evaluate(rnn.run_dir, episodes=256, actions="greedy").mean_return
    ff_success = evaluate(ff.run_dir, episodes=256, actions="greedy").mean_return
    assert rnn_success >= 0.95, rnn_success
    assert 0.35 <= ff_success <= 0.65, ff_success
