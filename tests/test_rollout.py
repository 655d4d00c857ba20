"""The rollout buffer: observations kept in the env's dtype, normalised again in the loss exactly
as the policy saw them while acting."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.config import load_config
from jaxrl.core.losses import ppo_loss
from jaxrl.core.rollout import rollout
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_run, make_plan, training_batch

SMALL = ["env.num_envs=4", "ppo.num_steps=8", "network.hidden_sizes=[16]"]


def _rollout(config):
    setup = make_setup(config)
    runner = init_run(setup)
    plan = make_plan(setup, runner.features)
    fn = jax.jit(lambda r: rollout(setup, r.params, r.obs_stats, plan, r.match, r.key))
    _, out = fn(runner)
    return setup, runner, out


@pytest.mark.parametrize("normalize_obs", [False, True])
def test_loss_sees_what_the_policy_saw(normalize_obs):
    # Re-running the loss on the rollout with the acting params gives ratio 1 everywhere: the
    # loss normalises the raw observations with each step's moments, as acting did.
    config = load_config(
        "configs/cartpole.yaml", [*SMALL, f"env.normalize_obs={str(normalize_obs).lower()}"]
    )
    setup, runner, out = _rollout(config)
    traj = out.transitions
    assert traj.obs.dtype == jnp.float32  # CartPole's own dtype
    assert (out.step_stats is None) == (not normalize_obs)
    zeros = jnp.zeros_like(traj.value)
    batch = training_batch(setup, traj, out.start_hidden, zeros, zeros)
    _, metrics = ppo_loss(
        runner.params, setup.network, batch, setup.loss_hp, setup.discrete, out.step_stats
    )
    assert float(metrics.approx_kl) == pytest.approx(0.0, abs=1e-6)
    assert float(metrics.clip_fraction) == 0.0
    if normalize_obs:  # the moments moved during the rollout: each step kept its own
        means = np.asarray(out.step_stats.mean)
        assert means.shape == (8, 4)
        assert not np.allclose(means[0], means[-1])


def test_buffer_keeps_the_env_dtype():
    # MettaArena observes uint8 [24, 11, 11, 19] per env: stored as uint8 (4x less memory than
    # float32 at the seed's batch), cast inside the network.
    config = load_config(
        "configs/metta_arena.yaml",
        ["env.num_envs=1", "ppo.num_steps=32", "ppo.num_minibatches=1", "network.hidden_sizes=[8]"],
    )
    _, _, out = _rollout(config)
    assert out.transitions.obs.dtype == jnp.uint8
    assert out.transitions.obs.shape == (32, 24, 11, 11, 19)
