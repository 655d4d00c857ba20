"""The population league (:mod:`jaxrl.league.population`): members play each other.

One compiled program serves the module (``league_run``): the tiny league of
``tests/arch_reference.py`` (curriculum into self-play, pool lanes, rule opponents, an
evaluation lane, two exploiters, PBT over the members every update) with
``selfplay.cross_member: 1`` (every pool lane draws another member) and PBT ranking on
``league/rating``, three chunks of one update under ``chex.assert_max_traces(n=1)``. The
pieces of the table (pair counts, ratings, copies) are checked by hand without a compile.
A child process trains the same run with its envs on two CPU devices.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.config import ConfigError, config_from_dict
from jaxrl.core.acting import PolicyParams
from jaxrl.core.elo import expected_score
from jaxrl.core.types import RunnerState
from jaxrl.league.pool import empty_roster, league_probs, member_probs
from jaxrl.league.population import LeagueState, inherit_rows, pair_table, rate_members
from jaxrl.league.rating import RULE_ELO
from jaxrl.run.setup import Setup, make_setup
from jaxrl.run.train_step import init_run, train_population_chunk
from tests.arch_reference import config_dict
from tests.conftest import run_on_cpu_devices

REPO = Path(__file__).resolve().parent.parent
CHUNKS = 3


def league_config(devices: int = 1) -> dict:
    """The arch reference's tiny league, its pool lanes drawing only other members."""
    config = config_dict()
    config["selfplay"]["cross_member"] = 1.0
    config["pbt"]["metric"] = ["league/rating"]
    if devices > 1:
        config["mesh"] = {"devices": devices}
    return config


class LeagueRun(NamedTuple):
    """The league trained ``CHUNKS`` chunks, the chunk compiled once."""

    setup: Setup
    runners: list  # the runner after each chunk (host copies)
    metrics: list  # each chunk's metrics (host copies)
    last: RunnerState  # the final runner as the step left it (on a mesh: sharded)


def train_league(devices: int = 1) -> LeagueRun:
    """The league of :func:`league_config` on ``devices`` devices (:class:`LeagueRun`)."""
    setup = make_setup(config_from_dict(league_config(devices)))
    runner = init_run(setup)
    chunk = lambda r: train_population_chunk(setup, r)  # noqa: E731
    if setup.mesh is not None:
        from jaxrl.run.train_step import make_train_step  # noqa: PLC0415 - the sharded step

        step = make_train_step(setup)
    else:
        step = jax.jit(chex.assert_max_traces(chunk, n=1), donate_argnums=0)
    runners, metrics = [], []
    for _ in range(CHUNKS):
        runner, chunk_metrics = step(runner)
        runners.append(jax.device_get(runner))
        metrics.append(jax.device_get(chunk_metrics))
    return LeagueRun(setup=setup, runners=runners, metrics=metrics, last=runner)


@pytest.fixture(scope="module")
def league_run():
    return train_league()


# ----------------------------------------------------------------------------- by hand


def test_pair_table_counts_each_game_from_both_sides():
    last = np.zeros((3, 3, 3), np.float32)
    last[0, 1] = [2, 1, 0]  # member 0 beat member 1 twice, drew once
    last[2, 0] = [0, 0, 4]  # member 2 lost four to member 0
    last[1, 1] = [5, 0, 0]  # a game against itself never counts
    table = np.asarray(pair_table(jnp.asarray(last), jnp.asarray([True, True, True])))
    np.testing.assert_array_equal(table[0, 1], [2, 1, 0])
    np.testing.assert_array_equal(table[1, 0], [0, 1, 2])
    np.testing.assert_array_equal(table[0, 2], [4, 0, 0])
    np.testing.assert_array_equal(table[2, 0], [0, 0, 4])
    np.testing.assert_array_equal(table[1, 1], [0, 0, 0])
    # A member not counted (a fresh copy): its own rows are its parent's, they drop out.
    skipped = np.asarray(pair_table(jnp.asarray(last), jnp.asarray([False, True, True])))
    np.testing.assert_array_equal(skipped[0, 1], [0, 0, 0])
    np.testing.assert_array_equal(skipped[0, 2], [4, 0, 0])


def test_ratings_rank_by_results_and_stay_anchored_to_the_rule():
    even = jnp.full((2,), RULE_ELO, jnp.float32)
    results = (
        jnp.zeros((2, 2, 3))
        .at[0, 1]
        .set(jnp.asarray([30.0, 0, 10]))
        .at[1, 0]
        .set(jnp.asarray([10.0, 0, 30]))
    )
    rule = jnp.asarray([[10.0, 0, 10], [10.0, 0, 10]])  # both even against the rule
    ratings = even
    for _ in range(50):
        ratings = rate_members(ratings, results, rule, damping_games=4.0)
    ratings = np.asarray(ratings)
    assert ratings[0] > RULE_ELO > ratings[1]
    # The fixed point: each member's expected points equal its points (rule games included).
    for i, j in ((0, 1), (1, 0)):
        wins = float(results[i, j, 0])
        expected = 40 * expected_score(ratings[i], ratings[j])
        expected += 20.5 * expected_score(ratings[i], RULE_ELO)
        np.testing.assert_allclose(expected, wins + 10 + 0.25, rtol=2e-3)


def test_a_copy_takes_its_parents_rating_and_rows():
    state = LeagueState(
        ratings=jnp.asarray([1600.0, 1500.0, 1400.0]),
        results=jnp.arange(27, dtype=jnp.float32).reshape(3, 3, 3),
        games=jnp.ones((3, 3)),
    )
    new = inherit_rows(state, jnp.asarray([0, 1, 0]))  # member 2 copied member 0
    np.testing.assert_array_equal(new.ratings, [1600.0, 1500.0, 1600.0])
    np.testing.assert_array_equal(new.results[2, 1], state.results[0, 1])
    np.testing.assert_array_equal(new.results[1, 2], state.results[1, 0])
    np.testing.assert_array_equal(new.results[2, 2], [0, 0, 0])
    np.testing.assert_array_equal(new.results[0, 2], [0, 0, 0])  # the parent vs itself
    np.testing.assert_array_equal(new.games, state.games)


def test_matchmaking_by_rating_never_draws_itself():
    current = PolicyParams(params={"w": jnp.zeros((2,))}, obs_stats=None)
    roster = empty_roster(current, 3, RULE_ELO)
    np.testing.assert_array_equal(member_probs(roster, "hard"), [0, 0, 0])  # not written yet
    pool = jnp.asarray([0.5, 0.5, 0.0])  # K = 2 snapshots, entry K unused
    np.testing.assert_allclose(league_probs(pool, roster, "hard", 0.25), [0.5, 0.5, 0, 0, 0, 0])
    roster = roster.replace(index=jnp.asarray(1), ratings=jnp.asarray([1700.0, 1500.0, 1500.0]))
    probs = np.asarray(member_probs(roster, "hard"))
    w = np.asarray([expected_score(1500.0, 1700.0), 0.5, 0.5])
    weights = (1 - w) ** 2 * np.asarray([1, 0, 1])
    np.testing.assert_allclose(probs, weights / weights.sum(), rtol=1e-5)
    combined = np.asarray(league_probs(pool, roster, "hard", 0.25))
    np.testing.assert_allclose(combined[:3], 0.75 * np.asarray(pool))
    np.testing.assert_allclose(combined[3:], 0.25 * probs, rtol=1e-5)
    np.testing.assert_allclose(combined.sum(), 1.0, rtol=1e-6)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"train": {"num_seeds": 1}, "pbt": {"every_updates": 0}}, "needs a population"),
        ({"selfplay": {"cross_member": 1.5}}, "selfplay.cross_member must be in [0, 1]"),
        ({"selfplay": {"latest_fraction": 0.5, "rule_fraction": 0.5}}, "leave no env"),
    ],
)
def test_bad_cross_member(changes, message):
    config = league_config()
    for section, values in changes.items():
        config[section] = {**config[section], **values}
    with pytest.raises(ConfigError, match=re.escape(message)):
        config_from_dict(config)


def test_cross_member_without_a_population_exits_2_with_one_line():
    argv = ["--config", "configs/soccer_selfplay.yaml", "selfplay.cross_member=0.5"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    result = subprocess.run(
        [sys.executable, "-m", "jaxrl.train", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "selfplay.cross_member needs a population" in lines[0]


# ----------------------------------------------------------------------------- the run


def test_members_play_each_other_and_every_pair_is_counted(league_run):
    setup, runners, metrics = league_run.setup, league_run.runners, league_run.metrics
    names = [feature.name for feature in setup.population_features]
    assert names == ["pbt", "league"]  # the league sees PBT's copies
    table = runners[-1].features["league"]
    games = np.asarray(table.games)
    assert games[0, 1] > 0 and games[1, 0] > 0  # the two members met
    np.testing.assert_array_equal(games, games.T)  # each game from both sides
    np.testing.assert_array_equal(np.diag(games), 0)
    played = sum(m["league/member_games_played"] for m in metrics)
    np.testing.assert_array_equal(played, games.sum(1))
    # Each member counted its own games as the learner; both views make the pair's total.
    own = sum(np.nan_to_num(m["league/member_games"]) for m in metrics)
    assert own.sum() == games.sum() / 2
    assert np.isfinite(table.ratings).all()


def test_ratings_are_logged_per_member_and_reach_the_rosters(league_run):
    runners, metrics = league_run.runners, league_run.metrics
    for runner, chunk in zip(runners, metrics, strict=True):
        ratings = np.asarray(runner.features["league"].ratings)
        np.testing.assert_array_equal(chunk["league/member_rating"], ratings)
        roster = runner.features["selfplay"].roster
        np.testing.assert_array_equal(roster.ratings, np.broadcast_to(ratings, (2, 2)))
        np.testing.assert_array_equal(roster.index, [0, 1])
        # Every roster holds every member's current weights.
        for member in range(2):
            chex.assert_trees_all_equal(
                jax.tree.map(lambda x, m=member: x[m, m], roster.policies.params),
                jax.tree.map(lambda x, m=member: x[m], runner.params),
            )
    assert "pbt/parent" in metrics[-1] and "league/rating" in metrics[-1]


def test_selection_copies_the_parents_league_state_bit_for_bit(league_run):
    runners, metrics = league_run.runners, league_run.metrics
    copies = 0
    for runner, chunk in zip(runners, metrics, strict=True):
        for child in np.flatnonzero(chunk["league/copied"] > 0):
            parent = int(runner.features["pbt"].parent[child])
            assert parent != child
            copies += 1
            row = lambda tree, m: jax.tree.map(lambda x: x[m], tree)  # noqa: E731
            selfplay = runner.features["selfplay"]
            own = selfplay.replace(roster=selfplay.roster.replace(index=None))
            chex.assert_trees_all_equal(row(own, child), row(own, parent))
            chex.assert_trees_all_equal(row(runner.params, child), row(runner.params, parent))
            ratings = runner.features["league"].ratings
            assert ratings[child] == ratings[parent]
    assert copies >= 1  # PBT fired every update: the bottom member copied at least once


def test_switch_off_adds_nothing_to_the_state():
    setup = make_setup(config_from_dict(config_dict()))
    state = jax.eval_shape(lambda: init_run(setup))
    assert not hasattr(state.features["selfplay"], "roster")
    assert "league" not in state.features
    assert not any(
        spec.tag.startswith("league/rating") for f in setup.features for spec in f.metric_specs()
    )


def _key_data(x):
    return jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x


def two_device_run() -> None:
    """Child process: the league run on 2 CPU devices; its table, and how its state lies
    over the devices, as JSON on stdout.

    Replicated state is computed on every device (shard_map returns device 0's copy without
    checking), so every device's copy is compared; the env states (the learner's and the
    exploiters') are split over the devices instead."""
    run = train_league(devices=2)
    runners, last = run.runners, run.last
    assert jax.device_count() == 2
    table = runners[-1].features["league"]
    exploiters = last.features["exploiters"]
    split = [last.match, exploiters.learners.match]
    replicated = last.replace(
        match=None,
        features={
            **last.features,
            "exploiters": exploiters.replace(learners=exploiters.learners.replace(match=None)),
        },
    )
    leaves = jax.tree.leaves(jax.tree.map(_key_data, replicated))
    differ = sum(
        not all(
            np.array_equal(
                np.asarray(s.data), np.asarray(x.addressable_shards[0].data), equal_nan=True
            )
            for s in x.addressable_shards
        )
        for x in leaves
    )
    out = {
        "games": np.asarray(table.games).tolist(),
        "ratings": np.asarray(table.ratings).tolist(),
        "parent": np.asarray(runners[-1].features["pbt"].parent).tolist(),
        "leaves": len(leaves),
        "differ": differ,
        "split": all("data" in x.sharding.spec for x in jax.tree.leaves(split)),
        "updates": np.asarray(jax.device_get(last.update_step)).tolist(),
        "exploiter_updates": np.asarray(jax.device_get(exploiters.learners.update_step)).tolist(),
    }
    print(json.dumps(out))


@pytest.fixture(scope="module")
def two_device_league():
    """The league run with its envs sharded over 2 CPU devices (members whole on each), in
    a child process: ``JAX_NUM_CPU_DEVICES`` is read when JAX starts."""
    code = "from tests.test_league_population import two_device_run; two_device_run()"
    result = run_on_cpu_devices(["-c", code], 2, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_two_devices_play_and_rate_the_one_device_games(league_run, two_device_league):
    """The same games, ratings and copies on 2 devices as on one."""
    two = two_device_league
    one = league_run.runners[-1]
    np.testing.assert_array_equal(two["games"], np.asarray(one.features["league"].games))
    np.testing.assert_array_equal(two["parent"], np.asarray(one.features["pbt"].parent))
    np.testing.assert_allclose(two["ratings"], np.asarray(one.features["league"].ratings), atol=0.5)


def test_league_state_is_identical_on_every_device(league_run, two_device_league):
    """Promotion, pool draws, PFSP counts, Elo, PBT, evaluation lanes, the normaliser and the
    exploiters decide on values reduced over the devices: every device holds the same
    replicated state, and every env state (the exploiters' too) is split over the devices."""
    two = two_device_league
    assert two["leaves"] > 50 and two["differ"] == 0 and two["split"]
    one = league_run.runners[-1]
    assert two["updates"] == np.asarray(one.update_step).tolist() == [CHUNKS, CHUNKS]
    # The exploiters trained only in the league stage: the updates less the warm-up's one.
    exploiter_updates = np.asarray(one.features["exploiters"].learners.update_step)
    assert two["exploiter_updates"] == exploiter_updates.tolist()
    assert (exploiter_updates == CHUNKS - 1).all()
