"""Orbax checkpoints of whole runner states: every leaf round-trips, empty ones included."""

from __future__ import annotations

from pathlib import Path

import chex
import jax
import numpy as np

from jaxrl.acting import PolicyParams
from jaxrl.checkpoint import Checkpointer
from jaxrl.config import load_config
from jaxrl.play import policy_like
from jaxrl.setup import make_setup
from jaxrl.train_step import init_run

REPO = Path(__file__).resolve().parents[1]


def test_soccer_without_selfplay_round_trips(tmp_path):
    """A two-team run without pool lanes holds zero-size lane state, which Orbax refuses to
    save; the checkpointer drops and restores those leaves (configs/soccer_1v1.yaml could
    not save a checkpoint before)."""
    config = load_config(REPO / "configs" / "soccer_1v1.yaml", ["env.num_envs=4"])
    setup = make_setup(config)
    runner = init_run(setup)
    empty = [x.shape for x in jax.tree.leaves(runner) if x.size == 0]
    assert empty, "the case under test: some leaf has zero size"
    checkpointer = Checkpointer(tmp_path, keep=1)
    checkpointer.save(runner, {"env_steps": 0}, step=1)
    restored, meta = checkpointer.restore(runner)
    policy, step = checkpointer.restore_policy(policy_like(setup), 1)
    checkpointer.close()
    # The policy item restores as the one policy type, the runner's params and normaliser.
    assert step == 1 and type(policy) is PolicyParams
    chex.assert_trees_all_equal(
        policy, PolicyParams(params=runner.params, obs_stats=runner.obs_stats)
    )
    assert meta["update_step"] == 1
    want, tree = jax.tree.flatten(runner)
    got, tree_restored = jax.tree.flatten(restored)
    assert tree_restored == tree
    for x, y in zip(want, got, strict=True):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
