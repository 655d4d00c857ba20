"""Curriculum: in-graph promotion rule, stage params, no recompile across a stage switch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import envs
from jaxrl.config import CurriculumConfig, StageConfig, load_config
from jaxrl.features.curriculum import CurriculumState, advance, make_spec, stage_params, window_mean
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.driver import train
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_runner_state, train_chunk
from tests.conftest import make_tiny_config

REPO = Path(__file__).resolve().parents[1]


class _Params:
    """Stand-in EnvParams with two fields."""

    def __init__(self, limit=500, gravity=9.8):
        self.limit, self.gravity = limit, gravity

    def replace(self, **kw):
        return _Params(**{**vars(self), **kw})


def _spec():
    stages = (
        StageConfig(name="easy", env={"limit": 10}, threshold=5.0, window=3, min_updates=4),
        StageConfig(name="mid", env={"limit": 50, "gravity": 5.0}, threshold=40.0, window=2),
        StageConfig(name="full"),
    )
    return make_spec(CurriculumConfig(stages=stages), _Params())


def test_stage_tables_keep_defaults():
    spec = _spec()
    np.testing.assert_array_equal(spec.param_tables["limit"], [10, 50, 500])
    np.testing.assert_allclose(spec.param_tables["gravity"], [9.8, 5.0, 9.8])
    assert spec.param_tables["limit"].dtype == np.int32
    assert spec.param_tables["gravity"].dtype == np.float32
    params = stage_params(spec, _Params(), jnp.asarray(1))
    assert int(params.limit) == 50 and float(params.gravity) == 5.0


SOCCER_STAGES = [
    "env.name=Soccer",
    "env.kwargs={reward: {touch: 0.3, sparse: false}}",
    "curriculum.stages=["
    "{name: shaped, env: {blue_size: 1}},"
    "{name: lean, env: {blue_size: 2, reward: {touch: 0.05, vel_to_ball: 0.0}}},"
    "{name: sparse, env: {reward: {sparse: true}}}]",
]


def test_nested_reward_weights_are_staged_and_gathered_without_retrace():
    config = load_config(None, SOCCER_STAGES)
    _, base = envs.make(config.env.name, **config.env.kwargs)
    spec = make_spec(config.curriculum, base)
    # Leaves are staged by dotted path; a stage that does not set one keeps env.kwargs' value,
    # and env.kwargs' value keeps the env default for the fields it does not name.
    assert set(spec.param_tables) == {
        "blue_size",
        "reward.touch",
        "reward.vel_to_ball",
        "reward.sparse",
    }
    np.testing.assert_allclose(spec.param_tables["reward.touch"], [0.3, 0.05, 0.3])
    np.testing.assert_allclose(spec.param_tables["reward.vel_to_ball"], [0.01, 0.0, 0.01])
    np.testing.assert_array_equal(spec.param_tables["reward.sparse"], [False, False, True])
    assert spec.param_tables["reward.touch"].dtype == np.float32
    assert spec.param_tables["reward.sparse"].dtype == np.bool_

    gather = jax.jit(chex.assert_max_traces(lambda s: stage_params(spec, base, s), n=1))
    stage0, stage1 = gather(jnp.int32(0)), gather(jnp.int32(1))  # one trace for both
    assert float(stage0.reward.touch) == pytest.approx(0.3)
    assert float(stage1.reward.touch) == pytest.approx(0.05)
    assert float(stage1.reward.vel_to_ball) == 0.0 and int(stage1.blue_size) == 2
    assert float(stage1.reward.goal_scored) == float(base.reward.goal_scored)
    assert bool(gather(jnp.int32(2)).reward.sparse)
    # Same tree structure and dtypes as the base params: the env step does not retrace either.
    assert jax.tree.structure(stage1) == jax.tree.structure(base)
    for leaf, ref in zip(jax.tree.leaves(stage1), jax.tree.leaves(base), strict=True):
        assert leaf.dtype == np.asarray(ref).dtype and leaf.shape == np.shape(ref)


def test_shipped_soccer_curriculum_cuts_touch_and_vel_to_ball_after_stage_1():
    config = load_config(REPO / "configs" / "soccer_curriculum.yaml")
    _, base = envs.make(config.env.name, **config.env.kwargs)
    spec = make_spec(config.curriculum, base)
    np.testing.assert_allclose(spec.param_tables["reward.touch"], [0.5, 0.5, 0.05, 0.05, 0.05])
    np.testing.assert_allclose(spec.param_tables["reward.vel_to_ball"], [0.01, 0.01, 0, 0, 0])
    assert not any(key.startswith("reward.goal") for key in spec.param_tables)


@dataclasses.dataclass(frozen=True)
class _Trace:
    """What :func:`advance` did over a sequence of updates."""

    state: CurriculumState  # after the last update
    stages: list[int]  # stage after each update
    promoted: list[bool]  # a promotion in that update
    capped: list[bool]  # ... by ``max_updates`` alone


def _trace(spec, values) -> _Trace:
    """Feed per-update metric values (None = no episode ended) through ``advance``."""
    state = CurriculumState.create(int(spec.window.max()))
    step = jax.jit(lambda s, v, ok: advance(spec, s, {"episode_return": (v, ok)}))
    stages, promoted, capped = [], [], []
    for v in values:
        state, p = step(state, jnp.float32(0.0 if v is None else v), jnp.asarray(v is not None))
        stages.append(int(state.stage))
        promoted.append(bool(p.promoted))
        capped.append(bool(p.capped))
    return _Trace(state=state, stages=stages, promoted=promoted, capped=capped)


def _run(spec, values):
    """``(state, stages, promoted)`` of :func:`_trace`."""
    trace = _trace(spec, values)
    return trace.state, trace.stages, trace.promoted


def test_promotion_waits_for_min_updates_and_full_window():
    # Stage 0: threshold 5 over a window of 3, at least 4 updates in the stage.
    _, stages, promoted = _run(_spec(), [9, 9, 9, 9, 1])
    # After 3 updates the window is full and good, but min_updates=4 holds it back.
    assert stages == [0, 0, 0, 1, 1]
    assert promoted == [False, False, False, True, False]


def test_max_updates_promotes_a_stage_whose_metric_never_gets_there():
    stages = (
        StageConfig(name="stuck", threshold=5.0, window=3, min_updates=2, max_updates=5),
        StageConfig(name="held", threshold=5.0, window=3),
        StageConfig(name="last"),
    )
    spec = make_spec(CurriculumConfig(stages=stages), _Params())
    # Stage 0 never reaches 5 (updates without an episode count too): out at its 5th update.
    # Stage 1 has no limit: it holds on the same values.
    trace = _trace(spec, [0, None, 1, 0, 1] + [0] * 10)
    assert trace.stages == [0, 0, 0, 0, 1] + [1] * 10
    assert trace.promoted == [False] * 4 + [True] + [False] * 10
    # That promotion came by the cap alone: it is flagged.
    assert trace.capped == trace.promoted
    # The metric still promotes first when it gets there, and that promotion is not capped.
    trace = _trace(spec, [9, 9, 9, 0, 0])
    assert trace.stages == [0, 0, 1, 1, 1]
    assert trace.promoted == [False, False, True, False, False]
    assert trace.capped == [False] * 5


def test_a_promotion_at_the_cap_with_the_metric_met_is_not_capped():
    stages = (
        StageConfig(name="good", threshold=5.0, window=2, min_updates=4, max_updates=4),
        StageConfig(name="last"),
    )
    spec = make_spec(CurriculumConfig(stages=stages), _Params())
    # At update 4 both rules hold (min_updates 4, a full good window): the metric's promotion.
    trace = _trace(spec, [9, 9, 9, 9, 9])
    assert trace.stages == [0, 0, 0, 1, 1]
    assert trace.capped == [False] * 5
    # The same cap with a window below the threshold: capped.
    trace = _trace(spec, [9, 9, 1, 1, 9])
    assert trace.promoted == [False, False, False, True, False]
    assert trace.capped == trace.promoted


def test_summary_names_each_members_stage():
    config = make_tiny_config(*TINY[:1], "train.num_seeds=2")
    setup = make_setup(config)
    curriculum = next(f for f in setup.features if f.name == "curriculum")
    state = CurriculumState.create(1).replace(stage=jnp.asarray([0, 1], jnp.int32))
    (line,) = curriculum.summary(state)
    assert "at stages [0, 1] (members)" in line
    (line,) = curriculum.summary(CurriculumState.create(1))
    assert "at stage 0" in line


def test_window_mean_uses_only_recent_values_and_skips_missing():
    spec = _spec()
    # Missing values are not pushed; the low early values leave the 3-wide window.
    _, stages, _ = _run(spec, [0, 0, None, 0, 6, None, 6, 6])
    assert stages == [0, 0, 0, 0, 0, 0, 0, 1]
    state = CurriculumState.create(3)
    for v in (1.0, 2.0, 3.0, 4.0):
        state, _ = advance(_spec(), state, {"episode_return": (jnp.float32(v), jnp.asarray(True))})
    assert float(window_mean(state, jnp.asarray(3))) == pytest.approx(3.0)
    assert float(window_mean(state, jnp.asarray(2))) == pytest.approx(3.5)


def test_window_restarts_in_new_stage_and_last_stage_is_kept():
    spec = _spec()
    values = [9, 9, 9, 9] + [45] + [45] + [1e9] * 5
    state, stages, promoted = _run(spec, values)
    # Stage 1 needs two values of its own: the stage-0 values are not reused.
    assert stages[3:6] == [1, 1, 2]
    assert stages[-1] == 2 and sum(promoted) == 2


CURRICULUM = (
    "curriculum.stages=["
    "{name: short, env: {max_steps_in_episode: 20}, threshold: 0, window: 1, min_updates: 3},"
    "{name: long, env: {max_steps_in_episode: 60}}]"
)
# The tiny run in 3 chunks of 4 updates: promotion at update 3 falls inside the first chunk.
TINY = (
    CURRICULUM,
    "train.total_steps=1536",
    "train.updates_per_chunk=4",
    "checkpoint.every_updates=4",
)


def test_stage_switch_does_not_recompile_and_applies_params():
    config = make_tiny_config(*TINY)
    setup = make_setup(config)
    runner = init_runner_state(setup, jax.random.key(0))

    def chunk(runner):
        return train_chunk(setup, runner)

    step = jax.jit(chex.assert_max_traces(chunk, n=1), donate_argnums=0)
    stages, lengths = [], []
    for _ in range(3):
        runner, metrics = step(runner)
        stages.append(int(metrics["curriculum/stage"]))
        lengths.append(float(metrics["rollout/episode_length"]))
    # Stage 0 caps episodes at 20 steps; after promotion (update 3) the cap is 60.
    assert stages == [1, 1, 1]
    assert int(runner.features["curriculum"].stage) == 1
    assert lengths[0] <= 20.0
    env_params = stage_params(
        setup.curriculum, setup.env_params, runner.features["curriculum"].stage
    )
    assert int(env_params.max_steps_in_episode) == 60


def test_curriculum_state_is_logged_checkpointed_and_resumed(tmp_path, capsys):
    config = make_tiny_config(*TINY)
    result = train(config, tmp_path / "run")  # not quiet: the done line names the stage
    done = capsys.readouterr().out.strip().splitlines()[-1]
    assert done.startswith("done: 1,536 env steps, ")
    assert done.endswith(f", stage 2/2 (long); run dir {tmp_path / 'run'}")
    assert [row["curriculum/stage"] for row in result.history] == [1.0, 1.0, 1.0]
    assert sum(row["curriculum/promotions"] for row in result.history) == 1.0
    # Stage "short" promotes on its metric (threshold 0), not on a cap.
    assert sum(row["curriculum/capped_promotions"] for row in result.history) == 0.0
    setup = make_setup(config)
    restored, _ = Checkpointer(result.run_dir, create=False).restore(
        init_runner_state(setup, jax.random.key(0)), step=4
    )
    assert int(restored.features["curriculum"].stage) == 1
    assert int(restored.features["curriculum"].updates_in_stage) == 1
