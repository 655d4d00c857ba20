"""jaxrl.commands.extract: one member of a population run as a run of its own.

The population run is the tiny league of ``tests/test_league_population.py`` (its compiled
chunk, from the persistent compile cache), its three chunks saved as checkpoints 1..3.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.commands.extract import UsageError, _choose, extract, main
from jaxrl.commands.tournament import _open_runs
from jaxrl.commands.train import main as train_main
from jaxrl.config import load_run_config, save_config
from jaxrl.features.pbt import member_scores, ranking
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.play import load_policy
from jaxrl.run.setup import make_setup
from tests.test_league_population import train_league


@pytest.fixture(scope="module")
def population_run(tmp_path_factory):
    """``(run_dir, setup, runners)``: a two-member league run with checkpoints 1, 2, 3."""
    league = train_league()
    setup, runners = league.setup, league.runners
    run_dir = tmp_path_factory.mktemp("population")
    save_config(setup.config, run_dir / "config.yaml")
    checkpointer = Checkpointer(run_dir, keep=5)
    for i, runner in enumerate(runners, start=1):
        checkpointer.save(runner, {"env_steps": i * setup.config.batch_size}, step=i)
    checkpointer.close()
    return run_dir, setup, runners


def pbt_first(setup, runner) -> int:
    """The member PBT ranks first on the runner's smoothed metrics (the league's rating)."""
    (pbt,) = [f for f in setup.population_features if f.name == "pbt"]
    scores = member_scores(pbt.spec, runner.features["pbt"].smoothed)
    return int(ranking(jnp.asarray(scores), jnp.ones(scores.shape[0], bool))[0])


def test_best_is_pbts_first_with_its_policy_and_pbt_values(population_run):
    run_dir, setup, runners = population_run
    done = extract(run_dir)
    last = runners[-1]
    best = pbt_first(setup, last)
    assert (done.index, done.member) == (best, setup.members.names[best])
    assert done.steps == (1, 2, 3) and done.out == run_dir / "members" / done.member
    assert "ranked first by PBT at update 3 on league/rating" in done.chosen_by
    # The policy of each step is the member's slice, bit for bit.
    for step, runner in zip(done.steps, runners, strict=True):
        member_setup, policy, got = load_policy(done.out, step)
        assert got == step and member_setup.members.count == 1
        want = jax.tree.map(lambda x: np.asarray(x)[best], runner.params)
        jax.tree.map(np.testing.assert_array_equal, policy.params, want)
    # The config: one member, its seed, the population switches off, PBT's values at step 3.
    config = load_run_config(done.out)
    assert config.train.num_seeds == 1 and config.seed == setup.members.seeds[best]
    assert config.selfplay.cross_member == 0.0 and not config.pbt.enabled
    assert config.ppo.lr == pytest.approx(float(np.asarray(last.hyper.lr)[best]))
    assert set(done.hyper) == set(setup.config.pbt.hyperparameters)
    marker = json.loads((done.out / "member.json").read_text())
    assert marker["member"] == done.member and marker["steps"] == [1, 2, 3]


def test_a_named_member_plays_in_a_tournament_and_cannot_resume(population_run, capsys):
    run_dir, setup, _ = population_run
    other = setup.members.names[1]
    out = run_dir.parent / "named"
    args = ["--run-dir", str(run_dir), "--member", other, "--step", "2", "--out", str(out)]
    assert main(args) == 0
    assert f"member {other} (named)" in capsys.readouterr().out
    assert Checkpointer(out, create=False).steps() == [2]
    ((member_setup, _, _, steps),) = _open_runs([str(out)])  # the tournament takes it
    assert steps == [2] and member_setup.members.count == 1
    assert train_main(["--resume", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"member {other} extracted from" in err[0]


def test_without_pbt_best_is_the_top_league_rating(population_run, tmp_path):
    run_dir, setup, runners = population_run
    league_only = dataclasses.replace(
        setup, population_features=tuple(f for f in setup.population_features if f.name != "pbt")
    )
    last = runners[-1]  # the tiny league's ratings tie: set them apart, member 1 on top
    league = last.features["league"].replace(ratings=np.asarray([1480.0, 1530.0], np.float32))
    checkpointer = Checkpointer(tmp_path, keep=1)
    checkpointer.save(last.replace(features={**last.features, "league": league}), {}, step=5)
    index, chosen_by = _choose(league_only, checkpointer, "best", 5)
    assert index == 1 and chosen_by == "best league rating at update 5 (seed0 1480, seed1 1530)"
    no_population = dataclasses.replace(setup, population_features=())
    with pytest.raises(UsageError, match="name a member: seed0, seed1"):
        _choose(no_population, checkpointer, "best", 5)
    checkpointer.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--member", "seed9"], "--member seed9: no such member"),
        (["--step", "7"], "--step 7: no such checkpoint"),
        (["--member", "0", "--out", "{taken}"], "exists; choose another or pass --overwrite"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(population_run, capsys, args, message):
    run_dir, _, _ = population_run
    taken = run_dir.parent / "taken"
    taken.mkdir(exist_ok=True)
    args = [a.replace("{taken}", str(taken)) for a in args]
    assert main(["--run-dir", str(run_dir), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_a_single_member_run_is_refused(tmp_path, capsys):
    from jaxrl.config import config_from_dict  # noqa: PLC0415
    from tests.arch_reference import config_dict  # noqa: PLC0415

    data = config_dict()
    data["train"]["num_seeds"] = 1
    data.pop("pbt", None)
    save_config(config_from_dict(data), tmp_path / "config.yaml")
    make_setup(load_run_config(tmp_path))  # a valid run config
    assert main(["--run-dir", str(tmp_path)]) == 2
    assert "a run of one member" in capsys.readouterr().err
