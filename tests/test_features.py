"""New features plug into the train step, its initialisation and the checkpoint with their
module and one registration line each (jaxrl.run.setup.FEATURES), without an edit to any of
them (jaxrl.features); the step hands each exactly the states it declares in ``reads`` and
keeps of what it hands back only its own and those it declares in ``writes``."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.core.layout import OpponentGroups
from jaxrl.core.metrics import MetricSpec, Scalar
from jaxrl.features import (
    Feature,
    FeatureOutput,
    LayoutNeeds,
    LearnerFeature,
    PopulationFeature,
    Registration,
    merge_needs,
)
from jaxrl.run import setup as run_setup
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.setup import make_setup, metric_specs
from jaxrl.run.train_step import init_run, make_train_step
from tests.conftest import make_tiny_config

UPDATES = 2  # per chunk
BONUS = 1000  # what the population feature adds to every member's steps after each update


@dataclasses.dataclass(frozen=True)
class Steps(Feature):
    """Counts one member's updates; shows the others only the count (its view)."""

    name = "steps"

    def init(self, params, obs_stats):
        del params, obs_stats
        return {"count": jnp.zeros((), jnp.int32)}

    def after_update(self, state, result, reads=None):
        assert reads == {}  # declares none
        return {"count": state["count"] + 1}, FeatureOutput.of({})

    def metric_specs(self):
        return ()

    def view(self, state):
        return state["count"]


@dataclasses.dataclass(frozen=True)
class Reader(Feature):
    """Reports the steps it is handed (the view as the update began)."""

    name = "reader"
    reads = ("steps",)

    def init(self, params, obs_stats):
        del params, obs_stats
        return {"seen": jnp.zeros((), jnp.int32)}  # Orbax saves no empty item

    def after_update(self, state, result, reads=None):
        assert set(reads) == {"steps"}  # exactly what it declares
        seen = reads["steps"]
        return {"seen": seen}, FeatureOutput.of({"reader/seen": Scalar.of(seen)})

    def metric_specs(self):
        return (MetricSpec("reader/seen", "last"),)


class Counter(LearnerFeature):
    """Counts the learner's updates and reports its params' L1 norm after each."""

    name = "counter"
    reads = ("steps",)

    def init(self, init_learner, key, hyper, params):
        del init_learner, key, hyper, params
        return {"count": jnp.zeros((), jnp.int32)}  # a container: a checkpoint item

    def after_learner(self, ops, before, after):
        assert callable(ops.update) and callable(ops.metric_specs)  # handed in by the step
        assert set(before.features) == set(after.features) == {"counter", "steps"}
        count = before.features[self.name]["count"] + 1
        norm = sum(jnp.abs(x).sum() for x in jax.tree.leaves(after.params))
        # Not declared in writes: the step drops this edit of another feature's state.
        features = {self.name: {"count": count}, "steps": {"count": jnp.zeros((), jnp.int32)}}
        metrics = {
            "counter/updates": Scalar.of(count),
            "counter/norm": Scalar.of(norm),
            "counter/steps": Scalar.of(after.features["steps"]["count"]),
        }
        return after.replace(features=features), metrics

    def metric_specs(self):
        return (
            MetricSpec("counter/updates", "last"),
            MetricSpec("counter/norm", "last"),
            MetricSpec("counter/steps", "last"),
        )


class Rounds(PopulationFeature):
    """Counts population steps (its state is ``[R]``) and adds BONUS to every member's steps
    (it declares that it writes them)."""

    name = "rounds"
    reads = ("steps",)
    writes = ("steps",)

    def init(self, seeds):
        return {"count": jnp.zeros((len(seeds),), jnp.int32)}

    def after_members(self, state, members, ran, packed, replica_axis):
        del packed, replica_axis
        assert set(members.features) == {"steps"}
        state = {"count": state["count"] + ran.astype(jnp.int32)}
        count = Scalar(value=state["count"].astype(jnp.float32), weight=ran.astype(jnp.float32))
        steps = {"count": members.features["steps"]["count"] + BONUS}
        return state, members.replace(features={"steps": steps}), {"rounds/count": count}

    def metric_specs(self, hyper):
        del hyper
        return (MetricSpec("rounds/count", "last"),)


READS = ("steps", "not_configured")  # the learner feature's build-time reads
BUILT_READS: dict = {}  # what its build was handed


def _counter(reads: dict) -> Counter:
    BUILT_READS.update(reads)
    return Counter()


def _steps_layout(config, num_envs):
    del config, num_envs
    return LayoutNeeds(per_env_params=True)


NEW = (  # one line each
    Registration(build=lambda context: Steps(), layout=_steps_layout),
    Registration(build=lambda context: Reader()),
    Registration(build=lambda setup, reads: _counter(reads), kind="learner", reads=READS),
    Registration(build=lambda setup, tags: Rounds(), kind="population"),
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    config = make_tiny_config(
        "train.num_seeds=2", f"train.updates_per_chunk={UPDATES}", "train.total_steps=1024"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run_setup, "FEATURES", run_setup.FEATURES + NEW)
        setup = make_setup(config)
    runner = init_run(setup)
    runner, metrics = make_train_step(setup)(runner)
    return setup, jax.block_until_ready(runner), metrics, tmp_path_factory.mktemp("features")


def test_registered_features_are_built_with_their_layout_needs(trained):
    setup, _, _, _ = trained
    assert [f.name for f in setup.features] == ["steps", "reader"]
    assert [f.name for f in setup.learner_features] == ["counter"]
    assert [f.name for f in setup.population_features] == ["rounds"]
    assert setup.layout.per_env_params  # Steps asked for it
    # The learner feature's build was handed the built feature it declares (and no other),
    # by the assembler: a declared feature that is not configured is absent.
    assert list(BUILT_READS) == ["steps"] and BUILT_READS["steps"] is setup.features[0]


def test_reads_and_writes_are_wired_as_declared(trained):
    _, runner, metrics, _ = trained
    # Update 1: steps 0 -> 1, + BONUS; update 2: the reader sees 1 + BONUS as it began.
    np.testing.assert_array_equal(runner.features["steps"]["count"], [2 + 2 * BONUS] * 2)
    np.testing.assert_array_equal(metrics["reader/seen"], [1 + BONUS] * 2)
    # The learner feature saw the steps after the member's update (2 + BONUS in update 2),
    # and its undeclared write of them was dropped.
    np.testing.assert_array_equal(metrics["counter/steps"], [2 + BONUS] * 2)


def test_two_features_filling_the_opponent_groups_are_refused():
    one = LayoutNeeds(opponents=OpponentGroups(lanes=1, lane_envs=2))
    assert merge_needs([one, LayoutNeeds(per_env_params=True)]) == LayoutNeeds(True, one.opponents)
    with pytest.raises(ValueError, match="two features fill the opponent groups"):
        merge_needs([one, one])
    lanes = LayoutNeeds(per_env_params=True, measured_envs=(4, 2))
    assert merge_needs([one, lanes]).measured_envs == (4, 2)
    with pytest.raises(ValueError, match="two features add measuring groups"):
        merge_needs([lanes, lanes])


def test_the_step_calls_both_and_reduces_what_they_declare(trained):
    setup, runner, metrics, _ = trained
    tags = [spec.tag for spec in metric_specs(setup)][-4:]
    assert tags == ["reader/seen", "counter/updates", "counter/norm", "counter/steps"]
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
    assert {"counter", "rounds", "steps"} <= set(meta["features"])
    for name in ("counter", "rounds"):
        np.testing.assert_array_equal(restored.features[name]["count"], [UPDATES, UPDATES])
