"""Population-based training on the member axis (:mod:`jaxrl.features.pbt`): smoothing, ranking,
selection, the copy bit for bit, exploration within bounds, lineage, one trace whether PBT
fires or not, and the same decisions with the members sharded over 2 devices."""

from __future__ import annotations

import sys
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.commands import plot
from jaxrl.config import BoundsConfig, ConfigError, PBTConfig, load_config
from jaxrl.core.hyper import Hyper
from jaxrl.core.metrics import Scalar
from jaxrl.core.types import RunnerState, RunningStats
from jaxrl.features import pbt
from jaxrl.features.pbt import pbt_spec
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.driver import train
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_run, train_population_chunk

REPO = Path(__file__).resolve().parents[1]
TAGS = ("train/entropy", "rollout/episode_return", "curriculum/stage")
LR = BoundsConfig(min=1e-4, max=1e-2, log=True)
ENT = BoundsConfig(min=0.0, max=0.1, values=(0.0, 0.01, 0.05))


def _config(**changes) -> PBTConfig:
    base = dict(every_updates=2, fraction=0.25, hyperparameters={"ppo.lr": LR, "ppo.ent_coef": ENT})
    return PBTConfig(**{**base, **changes})


def _spec(members: int = 4, **changes) -> pbt.PBTSpec:
    config = _config(**changes)
    config.validate(members, 10, {})
    return pbt.make_spec(
        config,
        num_members=members,
        num_updates=10,
        metric_tags=TAGS,
        sweep={},
        copied_features=("curriculum",),
        max_nonfinite=3,
        merged_features=(("merged", _merge_rule),),
    )


def _merge_rule(own: dict, parent: dict) -> dict:
    """A merged feature (as the league's exploiters): the parent's weights, its own envs."""
    return {"weights": parent["weights"], "envs": own["envs"]}


def _population(members: int = 4, update: int = 2) -> RunnerState:
    """A runner state of ``members`` members whose every leaf says which member it is."""
    rows = jnp.arange(members, dtype=jnp.float32)
    column = lambda scale: rows * scale  # noqa: E731
    hyper = Hyper(
        lr=(1e-3 * (rows + 1)).astype(jnp.float32),
        ent_coef=jnp.float32([0.0, 0.01, 0.05, 0.01] * (members // 4)),
        clip_eps=jnp.full(members, 0.2, jnp.float32),
        gamma=jnp.full(members, 0.99, jnp.float32),
        gae_lambda=jnp.full(members, 0.95, jnp.float32),
        vf_coef=jnp.full(members, 0.5, jnp.float32),
    )
    return RunnerState(
        params={"dense": {"kernel": rows[:, None, None] + jnp.zeros((members, 2, 3))}},
        opt_state=(column(7.0), {"mu": rows[:, None] * jnp.ones((members, 3))}),
        match={"env_state": column(10.0), "obs": rows[:, None] * jnp.ones((members, 5))},
        obs_stats=RunningStats(
            mean=column(0.5)[:, None] * jnp.ones((members, 4)),
            var=column(2.0)[:, None] + jnp.ones((members, 4)),
            count=column(100.0),
        ),
        key=jax.random.split(jax.random.key(5), members),
        update_step=jnp.full(members, update, jnp.int32),
        nonfinite_streak=jnp.zeros(members, jnp.int32),
        nonfinite_total=jnp.arange(members, dtype=jnp.int32),
        features={
            "curriculum": {"stage": jnp.arange(members, dtype=jnp.int32)},
            "other": rows,
            "merged": {"weights": column(3.0), "envs": column(-1.0)},
        },
        hyper=hyper,
    )


def _packed(returns, weights=None) -> Scalar:
    """Packed update metrics ``[R, 3]`` with the episode return in column 1."""
    returns = jnp.asarray(returns, jnp.float32)
    values = jnp.stack([jnp.zeros_like(returns), returns, jnp.zeros_like(returns)], axis=1)
    weight = jnp.ones_like(values) if weights is None else jnp.asarray(weights, jnp.float32)
    return Scalar(value=values, weight=weight)


def _step(spec, state, runner, packed):
    ran = jnp.ones(runner.update_step.shape, bool)
    return pbt.population_step(spec, state, runner, ran, packed)


SPEC = _spec()


@jax.jit
@chex.assert_max_traces(n=1)  # every test of 4 members shares one compile, fired or not
def step4(state, runner, packed):
    """The population step of ``SPEC`` (4 members), compiled once for the module."""
    return _step(SPEC, state, runner, packed)


# ---- config ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, members, message",
    [
        ({}, 1, "pbt needs at least 2 members"),
        ({"fraction": 0.2}, 4, r"pbt.fraction must be in \(0, 0.5\]"),
        ({"fraction": 0.75}, 8, r"pbt.fraction must be in \(0, 0.5\]"),
        ({"every_updates": 10}, 4, "must be below the run's 10 updates"),
        ({"burn_in_updates": -1}, 4, "pbt.burn_in_updates must be >= 0"),
        # every 2 updates of 10: the first event past a burn-in of 9 would be at update 10
        ({"burn_in_updates": 9}, 4, r"leaves no event in the run's 10 updates \(the first"),
        ({"metric": ()}, 4, "pbt.metric must be a non-empty list"),
        ({"smoothing": "median"}, 4, "pbt.smoothing must be one of ema, window"),
        ({"ema_decay": 1.0}, 4, r"pbt.ema_decay must be in \[0, 1\)"),
        ({"window": 0}, 4, "pbt.window must be >= 1"),
        ({"explore": "mutate"}, 4, "pbt.explore must be one of perturb, resample"),
        ({"factors": (0.8, -1.0)}, 4, "pbt.factors must be a non-empty list"),
        ({"resample_probability": 1.5}, 4, r"pbt.resample_probability must be in \[0, 1\]"),
        ({"hyperparameters": {}}, 4, "name at least one hyperparameter"),
        ({"min_gap": (0.1, 0.2)}, 4, r"pbt.min_gap must be empty or one finite gap >= 0 per"),
        ({"min_gap": (-0.1,)}, 4, r"pbt.min_gap must be empty or one finite gap >= 0 per"),
        ({"min_gap_se": (1.0, 2.0)}, 4, r"pbt.min_gap_se must be empty or one finite number"),
        ({"min_gap_se": (float("inf"),)}, 4, r"pbt.min_gap_se must be empty or one finite"),
        (
            {"hyperparameters": {"ppo.lr": BoundsConfig(min=0.0, max=1e-2, log=True)}},
            4,
            "pbt.hyperparameters.ppo.lr: log needs min > 0",
        ),
        (
            {"hyperparameters": {"ppo.lr": BoundsConfig(min=1e-2, max=1e-4)}},
            4,
            "expected finite min <= max",
        ),
        (
            {"hyperparameters": {"ppo.ent_coef": BoundsConfig(max=0.1, values=(0.0, 0.2))}},
            4,
            r"must lie in \[0.0, 0.1\]: \[0.2\]",
        ),
    ],
)
def test_bad_pbt_section(changes, members, message):
    with pytest.raises(ConfigError, match=message):
        _config(**changes).validate(members, 10, {})


PBT_ON = ["train.num_seeds=4", "pbt.every_updates=2"]


@pytest.mark.parametrize(
    "config, overrides, message",
    [
        ("cartpole", ["pbt.hyperparameters={ppo.bogus: {}}"], "ppo.bogus: 'ppo.bogus' cannot vary"),
        (
            "cartpole",
            ["pbt.hyperparameters={ppo.gamma: {min: 0.9, max: 1.5}}"],
            "pbt.hyperparameters.ppo.gamma: every value must be in \\[0, 1\\], got 1.5",
        ),
        (
            "cartpole",
            [
                "sweep={ppo.lr: [0.001, 0.05]}",
                "pbt.hyperparameters={ppo.lr: {min: 1e-4, max: 0.01}}",
            ],
            r"pbt.hyperparameters.ppo.lr: values and swept values must lie in .*: \[0.05\]",
        ),
        (
            "soccer_1v1",
            ["pbt.hyperparameters={env.kwargs.reward.sparse: {min: 0, max: 1}}"],
            "reward.sparse: a bool parameter is explored along a grid: give values",
        ),
        (
            "soccer_1v1",
            ["pbt.hyperparameters={env.kwargs.reward.tuch: {}}"],
            "pbt.hyperparameters.env.kwargs.reward.tuch: no parameter 'tuch' in RewardWeights",
        ),
        (
            "soccer_curriculum",
            ["pbt.hyperparameters={env.kwargs.opponent_skill: {min: 0, max: 1}}"],
            "opponent_skill varies per member and a curriculum stage sets opponent_skill too",
        ),
    ],
)
def test_bad_pbt_section_against_the_env(config, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(REPO / "configs" / f"{config}.yaml", PBT_ON + overrides)


def test_spec_tags_grids_and_draws():
    with pytest.raises(ValueError, match="no update metric 'rollout/episode_retrun'.*did you mean"):
        pbt.make_spec(
            _config(metric=("rollout/episode_retrun",)),
            num_members=4,
            num_updates=10,
            metric_tags=TAGS,
            sweep={},
            copied_features=(),
            max_nonfinite=3,
        )
    spec = pbt.make_spec(
        _config(metric=("curriculum/stage", "rollout/episode_return")),
        num_members=8,
        num_updates=10,
        metric_tags=TAGS,
        sweep={"ppo.lr": [3e-3, 1e-3]},
        copied_features=(),
        max_nonfinite=3,
    )
    assert (
        spec.metric_index == (2, 1)
        and spec.selected == 2
        and spec.keys == ("ppo.lr", "ppo.ent_coef")
    )
    np.testing.assert_array_equal(spec.grid_size, [0, 3])
    np.testing.assert_array_equal(spec.grid[1], np.float32([0.0, 0.01, 0.05]))
    np.testing.assert_array_equal(spec.draw_size, [2, 3])  # lr resamples from the sweep's list
    np.testing.assert_array_equal(spec.draws[0], np.float32([1e-3, 3e-3, 3e-3]))  # padded
    assert pbt.make_spec(PBTConfig(), num_members=1, num_updates=1, metric_tags=TAGS,
                         sweep={}, copied_features=(), max_nonfinite=1) is None  # fmt: skip


# ---- smoothing and ranking -------------------------------------------------------------------


def test_ema_and_window_by_hand():
    ema = _spec(ema_decay=0.5)
    window = _spec(smoothing="window", window=2)
    state = pbt.Smoothed.create(1, 2)
    values = [1.0, 4.0, 7.0]
    for value in values:
        state = pbt.push(ema, state, jnp.float32([value]), jnp.ones(1, bool))
    # EMA with bias correction: the values weigh 0.5 * 0.5^age, divided by the weights' sum.
    weights = np.float32([0.125, 0.25, 0.5])
    expected = (weights * np.float32(values)).sum() / weights.sum()
    np.testing.assert_allclose(pbt.score(ema, state), [expected], rtol=1e-6)
    # An invalid push changes nothing.
    same = pbt.push(ema, state, jnp.float32([100.0]), jnp.zeros(1, bool))
    chex.assert_trees_all_equal(same, state)

    state = pbt.Smoothed.create(1, 2)
    assert np.isnan(pbt.score(window, state)[0])  # nothing pushed yet
    state = pbt.push(window, state, jnp.float32([1.0]), jnp.ones(1, bool))
    np.testing.assert_array_equal(pbt.score(window, state), [1.0])
    for value in (4.0, 7.0):
        state = pbt.push(window, state, jnp.float32([value]), jnp.ones(1, bool))
    np.testing.assert_array_equal(pbt.score(window, state), [5.5])  # the last two


def test_standard_error_by_hand():
    window = _spec(smoothing="window", window=3)
    state = pbt.Smoothed.create(1, 3)
    assert pbt.standard_error(window, state)[0] == 0.0  # nothing pushed: trails any parent
    state = pbt.push(window, state, jnp.float32([1.0]), jnp.ones(1, bool))
    assert np.isinf(pbt.standard_error(window, state)[0])  # one value: its noise is unknown
    for value in (4.0, 7.0, 10.0):
        state = pbt.push(window, state, jnp.float32([value]), jnp.ones(1, bool))
    # The window holds 4, 7, 10: sample variance 9, standard error 3 / sqrt(3).
    np.testing.assert_allclose(pbt.standard_error(window, state), [np.sqrt(3.0)], rtol=1e-6)

    ema = _spec(ema_decay=0.5)
    state = pbt.Smoothed.create(1, 2)
    values = np.float64([1.0, 4.0, 7.0])
    for value in values:
        state = pbt.push(ema, state, jnp.float32([value]), jnp.ones(1, bool))
    # Reliability weights w = 0.5 * 0.5^age: var = sum w (x - m)^2 / (V1 - V2 / V1),
    # n_eff = V1^2 / V2, standard error sqrt(var / n_eff).
    w = np.float64([0.125, 0.25, 0.5])
    v1, v2 = w.sum(), (w**2).sum()
    mean = (w * values).sum() / v1
    variance = (w * (values - mean) ** 2).sum() / (v1 - v2 / v1)
    np.testing.assert_allclose(
        pbt.standard_error(ema, state), [np.sqrt(variance / (v1**2 / v2))], rtol=1e-5
    )
    # The effective count tends to (1 + d) / (1 - d): 9 at d = 0.8, so a constant series
    # has no error and an alternating one +-1 about sqrt(1 * 9/8 / 9).
    steady = _spec(ema_decay=0.8)
    state = pbt.Smoothed.create(1, 2)
    for i in range(200):
        state = pbt.push(steady, state, jnp.float32([(-1.0) ** i]), jnp.ones(1, bool))
    np.testing.assert_allclose(pbt.standard_error(steady, state), [np.sqrt(1 / 8)], rtol=0.02)


def test_pair_gaps_take_the_larger_of_the_fixed_and_the_noise_gap():
    spec = _spec(metric=("curriculum/stage", "rollout/episode_return"), min_gap=(0.5, 0.0),
                 min_gap_se=(0.0, 2.0))  # fmt: skip
    parent_se = jnp.float32([[jnp.inf, 3.0], [0.0, 0.1]])
    child_se = jnp.float32([[0.0, 4.0], [0.0, jnp.inf]])
    # Stage: 0.5 (no noise term, even with an infinite error); return: 2 x 5 = 10, and inf.
    np.testing.assert_array_equal(
        pbt.pair_gaps(spec, parent_se, child_se), [[0.5, 10.0], [0.5, np.inf]]
    )
    assert any("(gaps 0.5, 0; standard errors 0, 2)" in line for line in pbt.summary(spec))


def test_ranking_is_lexicographic_with_the_unusable_last():
    scores = jnp.float32([[1, 5], [2, 0], [2, 3], [jnp.nan, 9], [2, 3], [9, 9]])
    eligible = jnp.array([True, True, True, True, True, False])
    # Stage first, then the metric; ties by index; nan and ineligible members last.
    np.testing.assert_array_equal(pbt.ranking(scores, eligible), [2, 4, 1, 0, 3, 5])


def test_bottom_members_copy_their_drawn_parent_from_the_top():
    order = jnp.int32([5, 2, 0, 3, 1, 4])  # best first; n = 2: 1 and 4 are the bottom
    draws = jnp.int32([1, 0, 1, 0, 1, 0])  # 1 takes the best (5), 4 the second best (2)
    np.testing.assert_array_equal(pbt.select_sources(order, draws, 2), [0, 5, 2, 3, 2, 5])


def test_clearly_ahead_by_hand():
    nan = jnp.nan
    parent = jnp.float32([[1, 5], [1, 5], [1.05, 9], [0.5, 0], [nan, 9], [1, 2], [1, 0]])
    child = jnp.float32([[1, 4], [1, 4.8], [1, 0], [1, 9], [0, 0], [nan, nan], [1.04, 3]])
    gap = jnp.float32([0.1, 0.5])
    # Tied stage, return 1 ahead: yes; return 0.2 ahead: no; stage 0.05 ahead (under its gap)
    # and return 9 ahead: yes; stage 0.5 behind decides: no; a parent without a value: no;
    # a child without one: yes; stage under its gap, return 3 behind: no.
    np.testing.assert_array_equal(
        pbt.clearly_ahead(parent, child, gap), [True, False, True, False, False, True, False]
    )


GAP_SPEC = _spec(min_gap=(1.0,))


@jax.jit
def step4_gap(state, runner, packed):
    """The population step of ``GAP_SPEC``: a parent must lead the return by more than 1."""
    return _step(GAP_SPEC, state, runner, packed)


@pytest.mark.parametrize(
    "returns, streak, replaced",
    [
        ([1.0, 5.0, 3.0, -1.0], [0, 0, 0, 0], [0, 0, 0, 1]),  # 3 copies 1: 6 behind
        ([4.5, 5.0, 4.2, 4.1], [0, 0, 0, 0], [0, 0, 0, 0]),  # 3 is 0.9 behind: keeps its line
        ([4.5, 50.0, 4.2, 4.4], [0, 3, 0, 0], [0, 1, 0, 0]),  # 1 is stopped: copies anyway
    ],
)
def test_min_gap_copies_only_from_a_parent_clearly_ahead(returns, streak, replaced):
    runner = _population().replace(nonfinite_streak=jnp.int32(streak))
    state = pbt.init_population(GAP_SPEC, [0, 1, 2, 3])
    state, child, metrics = step4_gap(state, runner, _packed(returns))
    np.testing.assert_array_equal(metrics["pbt/replaced"].value, replaced)
    kept = ~np.asarray(replaced, bool)
    np.testing.assert_array_equal(
        np.asarray(child.hyper.lr)[kept], np.asarray(runner.hyper.lr)[kept]
    )
    np.testing.assert_array_equal(state.parent[kept], np.arange(4)[kept])
    assert any(" when clearly ahead (gaps 1)" in line for line in pbt.summary(GAP_SPEC))


SE_SPEC = _spec(smoothing="window", window=4, min_gap_se=(2.0,))


@jax.jit
def step4_se(state, runner, packed):
    """The population step of ``SE_SPEC``: a parent must lead by 2 standard errors."""
    return _step(SE_SPEC, state, runner, packed)


@pytest.mark.parametrize(
    "best, replaced",
    [
        # Member 1 leads member 3 (2, 2, 2, 2) by 3 with no noise: member 3 copies it.
        ([5.0, 5.0, 5.0, 5.0], [0, 0, 0, 1]),
        # The same mean lead, but 1's values swing (10, 0, 10, 0): standard error 2.9, so
        # the lead of 3 is under 2 x 2.9 and member 3 keeps its line.
        ([10.0, 0.0, 10.0, 0.0], [0, 0, 0, 0]),
    ],
)
def test_min_gap_se_copies_only_a_lead_beyond_the_noise(best, replaced):
    history = jnp.float32([[3.0] * 4, best, [4.0] * 4, [2.0] * 4])  # [R, 4 updates]
    state = pbt.init_population(SE_SPEC, [0, 1, 2, 3])
    smoothed = state.smoothed
    for t in range(3):  # the last value arrives with the step
        smoothed = jax.vmap(lambda s, v: pbt.push(SE_SPEC, s, v[None], jnp.ones(1, bool)))(
            smoothed, history[:, t]
        )
    state = state.replace(smoothed=smoothed)
    _, _, metrics = step4_se(state, _population(), _packed(history[:, 3]))
    np.testing.assert_array_equal(metrics["pbt/replaced"].value, replaced)


# ---- exploit and explore ---------------------------------------------------------------------


def test_exploit_copies_the_parent_bit_for_bit():
    runner = _population()
    state = pbt.init_population(SPEC, [0, 1, 2, 3])
    state, child, metrics = step4(state, runner, _packed([1.0, 5.0, 3.0, -1.0]))
    # Member 3 is the worst, member 1 the best (n = 1): 3 copies 1.
    source = np.array([0, 1, 2, 1])
    for name in ("params", "opt_state", "obs_stats", "nonfinite_streak", "update_step"):
        expected = jax.tree.map(lambda x: np.asarray(x)[source], getattr(runner, name))
        chex.assert_trees_all_equal(getattr(child, name), expected)
    np.testing.assert_array_equal(child.features["curriculum"]["stage"], [0, 1, 2, 1])
    np.testing.assert_array_equal(child.features["other"], runner.features["other"])  # not copied
    merged = child.features["merged"]  # the rule's: the parent's weights, its own envs
    np.testing.assert_array_equal(merged["weights"], [0.0, 3.0, 6.0, 3.0])
    np.testing.assert_array_equal(merged["envs"], [0.0, -1.0, -2.0, -3.0])
    chex.assert_trees_all_equal(child.match, runner.match)  # env states stay
    np.testing.assert_array_equal(jax.random.key_data(child.key), jax.random.key_data(runner.key))
    np.testing.assert_array_equal(child.nonfinite_total, runner.nonfinite_total)
    np.testing.assert_array_equal(state.parent, [0, 1, 2, 1])
    np.testing.assert_array_equal(state.generation, [0, 0, 0, 1])
    np.testing.assert_array_equal(state.smoothed.count[:, 1], [1, 1, 1, 0])  # the child afresh
    np.testing.assert_array_equal(metrics["pbt/replaced"].value, [0, 0, 0, 1])
    np.testing.assert_array_equal(metrics["pbt/events"].value, [1, 1, 1, 1])
    # Untouched members keep their values; the child explores from its parent's (lr 2e-3).
    np.testing.assert_array_equal(child.hyper.lr[:3], runner.hyper.lr[:3])
    assert child.hyper.lr[3] in (
        np.float32(2e-3) * np.float32(0.8),
        np.float32(2e-3) * np.float32(1.25),
    )
    assert child.hyper.ent_coef[3] in (np.float32(0.0), np.float32(0.05))  # a grid step from 0.01
    np.testing.assert_array_equal(child.hyper.gamma, runner.hyper.gamma)


def test_nothing_happens_between_events():
    runner = _population(update=3)  # 3 % every_updates != 0
    state = pbt.init_population(SPEC, [0, 1, 2, 3])
    new_state, child, metrics = step4(state, runner, _packed([1.0, 5.0, 3.0, -1.0]))
    chex.assert_trees_all_equal(child, runner)
    np.testing.assert_array_equal(new_state.parent, state.parent)
    np.testing.assert_array_equal(metrics["pbt/events"].value, [0, 0, 0, 0])
    np.testing.assert_array_equal(new_state.smoothed.count[:, 1], [1, 1, 1, 1])


BURN_SPEC = _spec(burn_in_updates=3)


@jax.jit
def step4_burn(state, runner, packed):
    """The population step of ``BURN_SPEC``: every 2 updates, none before update 3."""
    return _step(BURN_SPEC, state, runner, packed)


@pytest.mark.parametrize("update, fires", [(2, False), (3, False), (4, True), (6, True)])
def test_no_event_before_the_burn_in(update, fires):
    runner = _population(update=update)
    state = pbt.init_population(BURN_SPEC, [0, 1, 2, 3])
    state, child, metrics = step4_burn(state, runner, _packed([1.0, 5.0, 3.0, -1.0]))
    np.testing.assert_array_equal(metrics["pbt/events"].value, [int(fires)] * 4)
    np.testing.assert_array_equal(metrics["pbt/replaced"].value, [0, 0, 0, int(fires)])
    if not fires:  # every member as it was: the grid sweep's run so far
        chex.assert_trees_all_equal(child, runner)
    assert BURN_SPEC.burn_in_updates == 3 and _config(burn_in_updates=3).first_event == 4
    lines = pbt.summary(BURN_SPEC)
    assert any("every 2 updates from update 3 the bottom 1" in line for line in lines)


def test_lineage_over_two_events():
    runner = _population()
    state = pbt.init_population(SPEC, [0, 1, 2, 3])
    state, runner, _ = step4(state, runner, _packed([1.0, 5.0, 3.0, -1.0]))  # 3 copies 1
    runner = runner.replace(update_step=runner.update_step + 2)
    # Now member 3 (the child) does best and member 0 worst: 0 copies 3, generation 2.
    state, runner, metrics = step4(state, runner, _packed([-5.0, 1.0, 2.0, 9.0]))
    np.testing.assert_array_equal(state.parent, [3, 1, 2, 1])
    np.testing.assert_array_equal(state.generation, [2, 0, 0, 1])
    np.testing.assert_array_equal(metrics["pbt/parent"].value, [3, 1, 2, 1])
    np.testing.assert_array_equal(runner.params["dense"]["kernel"][0], np.ones((2, 3)))  # 1's


def test_stopped_members_rank_last_and_are_replaced():
    runner = _population()
    runner = runner.replace(nonfinite_streak=jnp.int32([0, 3, 0, 0]))  # 1 stopped (limit 3)
    state = pbt.init_population(SPEC, [0, 1, 2, 3])
    _, child, _ = step4(state, runner, _packed([1.0, 50.0, 3.0, 2.0]))
    # Member 1 reported the best return but is stopped: it is the bottom one and copies 2.
    np.testing.assert_array_equal(child.nonfinite_streak, [0, 0, 0, 0])
    np.testing.assert_array_equal(child.params["dense"]["kernel"][1], np.full((2, 3), 2.0))


def test_exploration_stays_within_bounds():
    keys = jax.random.split(jax.random.key(0), 2000)
    values = jnp.float32([1e-4, 0.01])  # lr at its lower bound, ent_coef on the grid
    perturb = _spec(resample_probability=0.0)
    out = np.asarray(jax.jit(jax.vmap(lambda k: pbt.explore_values(perturb, values, k)))(keys))
    lowest = np.float32(1e-4)
    assert set(out[:, 0].tolist()) == {lowest * np.float32(1.25), lowest}  # x 0.8: clipped
    assert set(out[:, 1].tolist()) == {np.float32(0.0), np.float32(0.05)}  # one grid step
    resample = _spec(explore="resample")
    out = np.asarray(jax.jit(jax.vmap(lambda k: pbt.explore_values(resample, values, k)))(keys))
    assert out[:, 0].min() >= np.float32(1e-4) and out[:, 0].max() <= np.float32(1e-2)
    # Log-uniform: about half the draws below the geometric middle 1e-3.
    assert 0.4 < (out[:, 0] < 1e-3).mean() < 0.6
    assert set(out[:, 1].tolist()) == {np.float32(v) for v in (0.0, 0.01, 0.05)}


def test_one_trace_whether_pbt_fires_or_not():
    state = pbt.init_population(SPEC, [0, 1, 2, 3])
    runner = _population(update=1)
    fired = []
    for returns in ([1, 2, 3, 4], [4, 3, 2, 1], [0, 0, 0, 5], [1, 1, 1, 1]):
        state, runner, metrics = step4(state, runner, _packed(returns))
        runner = runner.replace(update_step=runner.update_step + 1)
        fired.append(float(metrics["pbt/events"].value[0]))
    assert fired == [0.0, 1.0, 0.0, 1.0]  # updates 1 to 4, every 2


def test_keys_are_a_stream_of_their_own_per_member():
    state = pbt.init_population(_spec(), [0, 1, 2, 3])
    data = np.asarray(jax.random.key_data(state.key))
    assert len({tuple(row) for row in data}) == 4
    runner_key = np.asarray(jax.random.key_data(jax.random.split(jax.random.key(0), 3)))
    assert not any((data[0] == row).all() for row in runner_key)


# ---- members sharded over devices ------------------------------------------------------------


def _sharded_matches_unsharded() -> None:
    """Run in a subprocess with 2 CPU devices: the members split 2 + 2 over a mesh axis, then
    replicated on both devices with each device's own metrics."""
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    assert jax.device_count() == 2
    runner = _population()
    state = pbt.init_population(SPEC, [0, 1, 2, 3])
    packed = _packed([3.0, -2.0, 5.0, 1.0])  # member 1 (device 0) copies 2 (device 1)
    expected = step4(state, runner, packed)

    def sharded(state, runner, packed):
        ran = jnp.ones(runner.update_step.shape, bool)
        return pbt.population_step(SPEC, state, runner, ran, packed, axis="members")

    mesh = Mesh(np.asarray(jax.devices()), ("members",))
    step = jax.shard_map(
        sharded, mesh=mesh, in_specs=P("members"), out_specs=P("members"), check_vma=False
    )
    got = jax.jit(step)(state, runner, packed)
    np.testing.assert_array_equal(expected[2]["pbt/parent"].value, [0, 2, 2, 3])
    chex.assert_trees_all_equal(
        (got[0].replace(key=None), got[1].replace(key=None), got[2]),
        (expected[0].replace(key=None), expected[1].replace(key=None), expected[2]),
    )
    for a, b in ((got[0].key, expected[0].key), (got[1].key, expected[1].key)):
        np.testing.assert_array_equal(jax.random.key_data(a), jax.random.key_data(b))

    # Members replicated, envs sharded: each device reports its own returns (weights 1 and 3);
    # both rank on the weighted mean and make the decision one device makes from it.
    local = jnp.stack([_packed([1.0, 5.0, 3.0, -1.0]).value, _packed([5.0, 1.0, 3.0, 0.0]).value])
    weights = jnp.stack([jnp.ones((4, 3)), jnp.full((4, 3), 3.0)])

    def replicated(state, runner, values, weights):
        packed = Scalar(value=values[0], weight=weights[0])
        out = pbt.population_step(
            SPEC, state, runner, jnp.ones(4, bool), packed, replica_axis="members"
        )
        return jax.tree.map(lambda x: x[None], out)  # a leading device axis to compare

    step = jax.shard_map(
        replicated,
        mesh=mesh,
        in_specs=(P(), P(), P("members"), P("members")),
        out_specs=P("members"),
        check_vma=False,
    )
    both = jax.jit(step)(state, runner, local, weights)
    mean = (local[0] * 1.0 + local[1] * 3.0) / 4.0  # returns 4, 2, 3, -0.25: 3 copies 0
    one = step4(state, runner, Scalar(value=mean, weight=weights[1] + weights[0]))
    for device in range(2):
        mine = jax.tree.map(lambda x, d=device: x[d], both)
        np.testing.assert_array_equal(mine[2]["pbt/parent"].value, [0, 1, 2, 0])
        chex.assert_trees_all_equal(mine[1].params, one[1].params)
        chex.assert_trees_all_equal(mine[1].hyper, one[1].hyper)
    print("sharded population OK")


def test_sharded_population_on_two_devices():
    from tests.conftest import run_on_cpu_devices  # noqa: PLC0415 - this file is also a script

    result = run_on_cpu_devices([str(Path(__file__).resolve()), "--sharded"], 2, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "sharded population OK" in result.stdout


if __name__ == "__main__" and sys.argv[1:] == ["--sharded"]:
    sys.path.insert(0, str(REPO))
    _sharded_matches_unsharded()


# ---- PBT in the train step -------------------------------------------------------------------

# CartPole, 4 members, 6 updates in chunks of 2; PBT fires at updates 2 and 4 (the ends of
# chunks 1 and 2, where checkpoints are saved). One minibatch of one epoch per update, so a
# 2-device run takes the same gradient steps.
PBT_RUN = [
    "env.num_envs=4",
    "ppo.num_steps=16",
    "ppo.update_epochs=1",
    "ppo.num_minibatches=1",
    "network.hidden_sizes=[8]",
    "train.total_steps=384",
    "train.updates_per_chunk=2",
    "train.progress_bar=false",
    "checkpoint.every_updates=2",
    "checkpoint.keep=5",
    "train.num_seeds=4",
    "pbt.every_updates=2",
    "pbt.hyperparameters={ppo.lr: {min: 1e-5, max: 1e-2, log: true}, "
    "ppo.ent_coef: {min: 0.0, max: 0.1}}",
]


@pytest.fixture(scope="module")
def pbt_train(tmp_path_factory):
    """The PBT run, trained by :func:`jaxrl.run.driver.train`."""
    config = load_config(REPO / "configs" / "cartpole.yaml", PBT_RUN)
    return train(config, tmp_path_factory.mktemp("pbt_train") / "run", quiet=True)


@pytest.fixture(scope="module")
def pbt_like(pbt_train):
    """The run's setup and a runner state shaped like its checkpoints (one init, reused)."""
    setup = make_setup(load_config(pbt_train.run_dir / "config.yaml"))
    return setup, init_run(setup)


def _restore(run_dir: Path, like: RunnerState, step: int | None = None) -> RunnerState:
    checkpointer = Checkpointer(run_dir, create=False)
    try:
        return checkpointer.restore(like, step)[0]
    finally:
        checkpointer.close()


def _bits(tree):
    """Every leaf as a numpy array (typed keys as their data), for bit-for-bit comparisons."""

    def as_data(x):
        typed = jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
        return jax.random.key_data(x) if typed else x

    return [np.asarray(x) for x in jax.tree.leaves(jax.tree.map(as_data, tree))]


def test_lineage_and_values_are_logged_per_member(pbt_train):
    runs = {
        m: plot.read_scalars(pbt_train.run_dir / m) for m in ("seed0", "seed1", "seed2", "seed3")
    }
    for series in runs.values():
        for tag in ("pbt/parent", "pbt/generation", "pbt/replaced", "hyper/ppo.lr"):
            np.testing.assert_array_equal(series[tag].steps, [128, 256, 384])
        np.testing.assert_array_equal(series["pbt/events"].values, [1, 1, 0])  # updates 2, 4
    replaced = np.array([series["pbt/replaced"].values for series in runs.values()])  # [R, 3]
    np.testing.assert_array_equal(replaced.sum(0), [1, 1, 0])  # the bottom 1 of 4, each time
    child = int(replaced[:, 0].argmax())
    parent = int(runs[f"seed{child}"]["pbt/parent"].values[0])
    assert parent != child and runs[f"seed{child}"]["pbt/generation"].values[0] == 1
    first = pbt_train.history[0]
    assert first["pbt/parent"][child] == parent and first["pbt/replaced"][child] == 1


def test_children_hold_their_parents_weights_after_the_event(pbt_train, pbt_like):
    runner = _restore(
        pbt_train.run_dir, pbt_like[1], 2
    )  # saved at the end of update 2, PBT's first event
    population = runner.features["pbt"]
    child = int(np.flatnonzero(np.asarray(population.generation))[0])
    parent = int(population.parent[child])
    row = lambda tree, m: jax.tree.map(lambda x: np.asarray(x)[m], tree)  # noqa: E731
    for name in ("params", "opt_state", "obs_stats"):
        chex.assert_trees_all_equal(
            row(getattr(runner, name), child), row(getattr(runner, name), parent)
        )
    assert not np.array_equal(runner.match.obs[child], runner.match.obs[parent])  # own envs
    lr = np.asarray(runner.hyper.lr)
    assert lr[child] in (lr[parent] * np.float32(0.8), lr[parent] * np.float32(1.25))


def test_chunks_resume_bit_exact_and_never_retrace_when_pbt_fires(pbt_train, pbt_like):
    setup, like = pbt_like
    assert pbt_spec(setup) is not None
    chunk = jax.jit(chex.assert_max_traces(lambda r: train_population_chunk(setup, r), n=1))
    runner = _restore(pbt_train.run_dir, like, 2)
    runner, metrics = chunk(runner)  # updates 3 and 4: PBT fires at 4
    assert float(metrics["pbt/events"][0]) == 1
    for got, saved in zip(_bits(runner), _bits(_restore(pbt_train.run_dir, like, 4)), strict=True):
        np.testing.assert_array_equal(got, saved)
    runner, _ = chunk(runner)  # updates 5 and 6, the same trace
    for got, final in zip(_bits(runner), _bits(pbt_train.runner), strict=True):
        np.testing.assert_array_equal(got, final)


def test_pbt_on_two_devices_makes_the_one_device_decisions(pbt_train, pbt_like, tmp_path):
    """The envs sharded over 2 devices (members replicated): same copies, same weights."""
    run_dir = tmp_path / "run"
    from tests.conftest import run_on_cpu_devices  # noqa: PLC0415 - this file is also a script

    args = ["--config", "configs/cartpole.yaml", *PBT_RUN, "mesh.devices=2"]
    argv = ["-m", "jaxrl.train", *args, "--run-dir", str(run_dir), "--quiet"]
    result = run_on_cpu_devices(argv, 2, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    two = _restore(run_dir, pbt_like[1])  # a 2-device checkpoint restores on one device
    one = pbt_train.runner
    for name in ("parent", "generation"):
        np.testing.assert_array_equal(
            getattr(two.features["pbt"], name), getattr(one.features["pbt"], name)
        )
    chex.assert_trees_all_equal(two.hyper, one.hyper)
    chex.assert_trees_all_close(two.params, one.params, atol=1e-5, rtol=0)
