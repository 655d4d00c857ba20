"""A new learner feature and a new population feature plug into the train step, its
initialisation and the checkpoint without an edit to any of them (jaxrl.features)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.core.metrics import MetricSpec, Scalar
from jaxrl.features import LearnerFeature, PopulationFeature
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.setup import make_setup, metric_specs
from jaxrl.run.train_step import init_run, make_train_step
from tests.conftest import make_tiny_config

UPDATES = 2  # per chunk


class Counter(LearnerFeature):
    """Counts the learner's updates and reports its params' L1 norm after each."""

    name = "counter"

    def init(self, init_learner, key, hyper, params):
        del init_learner, key, hyper, params
        return {"count": jnp.zeros((), jnp.int32)}  # a container: a checkpoint item

    def after_learner(self, ops, before, after):
        assert callable(ops.update) and callable(ops.metric_specs)  # handed in by the step
        count = before.features[self.name]["count"] + 1
        norm = sum(jnp.abs(x).sum() for x in jax.tree.leaves(after.params))
        runner = after.replace(features={**after.features, self.name: {"count": count}})
        return runner, {"counter/updates": Scalar.of(count), "counter/norm": Scalar.of(norm)}

    def metric_specs(self):
        return (MetricSpec("counter/updates", "last"), MetricSpec("counter/norm", "last"))


class Rounds(PopulationFeature):
    """Counts population steps; its state is ``[R]`` and it leaves the members alone."""

    name = "rounds"

    def init(self, seeds):
        return {"count": jnp.zeros((len(seeds),), jnp.int32)}

    def after_members(self, state, members, ran, packed, replica_axis):
        del packed, replica_axis
        state = {"count": state["count"] + ran.astype(jnp.int32)}
        count = Scalar(value=state["count"].astype(jnp.float32), weight=ran.astype(jnp.float32))
        return state, members, {"rounds/count": count}

    def metric_specs(self, hyper):
        del hyper
        return (MetricSpec("rounds/count", "last"),)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    config = make_tiny_config(
        "train.num_seeds=2", f"train.updates_per_chunk={UPDATES}", "train.total_steps=1024"
    )
    setup = make_setup(config)
    setup = dataclasses.replace(setup, learner_features=(Counter(),))
    setup = dataclasses.replace(setup, population_features=(Rounds(),))
    runner = init_run(setup)
    runner, metrics = make_train_step(setup)(runner)
    return setup, jax.block_until_ready(runner), metrics, tmp_path_factory.mktemp("features")


def test_the_step_calls_both_and_reduces_what_they_declare(trained):
    setup, runner, metrics, _ = trained
    assert [spec.tag for spec in metric_specs(setup)][-2:] == ["counter/updates", "counter/norm"]
    np.testing.assert_array_equal(runner.features["counter"]["count"], [UPDATES, UPDATES])
    np.testing.assert_array_equal(runner.features["rounds"]["count"], [UPDATES, UPDATES])
    np.testing.assert_array_equal(metrics["counter/updates"], [UPDATES, UPDATES])
    np.testing.assert_array_equal(metrics["rounds/count"], [UPDATES, UPDATES])
    leaves = jax.tree.leaves(runner.params)
    norms = [sum(np.abs(np.asarray(x[m])).sum() for x in leaves) for m in (0, 1)]
    np.testing.assert_allclose(metrics["counter/norm"], norms, rtol=1e-5)


def test_their_states_are_checkpoint_items(trained):
    setup, runner, _, tmp_path = trained
    checkpointer = Checkpointer(tmp_path)
    checkpointer.save(runner, {"env_steps": 0}, step=UPDATES)
    restored, meta = checkpointer.restore(init_run(setup))
    checkpointer.close()
    assert {"counter", "rounds"} <= set(meta["features"])
    for name in ("counter", "rounds"):
        np.testing.assert_array_equal(restored.features[name]["count"], [UPDATES, UPDATES])
