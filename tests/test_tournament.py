"""Tournament: pairings through the shared match step, Elo table, JSON, plot, cache, bad input."""

from __future__ import annotations

import json
import shutil

import jax
import numpy as np
import pytest
import yaml

from jaxrl.commands.tournament import load_players, main, make_play_batch, pair_key
from jaxrl.core.match import NETWORK


def test_policy_against_itself_scores_half(selfplay_run):
    setup, players, policies = load_players([str(selfplay_run.run_dir)], ["latest", "rule"])
    me = [i for i, p in enumerate(players) if p.kind == NETWORK][0]
    games = 64
    play = make_play_batch(setup, games, deterministic=False)
    env_params = setup.env.with_team_size(setup.env_params, 1)
    kinds = jax.numpy.asarray([p.kind for p in players])
    index = jax.numpy.full((4,), me)
    keys = jax.numpy.stack([jax.random.fold_in(jax.random.key(0), i) for i in range(4)])
    wdl = np.asarray(play(policies, kinds, index, index, env_params, keys)).sum(0)
    assert wdl.sum() == 4 * games
    score = (wdl[0] + 0.5 * wdl[1]) / wdl.sum()
    # 256 matches: the standard error of the score is at most 0.5 / 16.
    assert abs(score - 0.5) < 3 * 0.5 / np.sqrt(wdl.sum())


def test_rule_policy_beats_random_in_the_tournament(selfplay_run):
    setup, players, policies = load_players([str(selfplay_run.run_dir)], ["rule", "random"])
    names = [p.name for p in players]
    rule, rand = names.index("rule"), names.index("random")
    play = make_play_batch(setup, 16, deterministic=True)
    kinds = jax.numpy.asarray([p.kind for p in players])
    first = jax.numpy.asarray([rule])
    second = jax.numpy.asarray([rand])
    keys = pair_key(0, players[rule], players[rand], 2)[None]
    # 20 s matches (the run's are 1.6 s: too short to score).
    env_params = setup.env.with_team_size(setup.env_params, 2).replace(max_steps_in_episode=300)
    won, drew, lost = np.asarray(play(policies, kinds, first, second, env_params, keys))[0]
    assert won + drew + lost == 16 and won > lost


def test_cli_table_json_plot_and_cache(selfplay_run, tmp_path, capsys):
    out_json, out_png = tmp_path / "elo.json", tmp_path / "elo.png"
    args = ["--run-dir", str(selfplay_run.run_dir), "--players", "all,rule,random"]
    args += ["--team-sizes", "1,3", "--games", "4", "--bootstrap", "50"]
    assert main([*args, "--json", str(out_json), "--plot", str(out_png)]) == 0
    captured = capsys.readouterr()
    assert "pairings to play" in captured.err and "rule" in captured.out
    data = json.loads(out_json.read_text())
    assert data["anchor"] == "rule"
    ratings = data["ratings"]
    steps = sorted({r["update"] for r in ratings if r["update"] is not None})
    assert steps == [4, 8, 12]
    assert {r["team_size"] for r in ratings} == {1, 3}
    for r in ratings:
        assert set(r) >= {"player", "team_size", "elo", "ci", "games", "vs_rule"}
        assert r["ci"][0] <= r["elo"] + 1e-6 and r["elo"] <= r["ci"][1] + 1e-6
        if r["player"] == "rule":
            assert r["elo"] == 1500.0 and r["ci"] == [1500.0, 1500.0]
        else:
            assert r["games"] == 4 * 4  # 4 opponents x 4 games
            assert sum(r["vs_rule"].values()) == pytest.approx(1.0)
    assert out_png.stat().st_size > 1000
    # Cached: a second tournament plays nothing new, with the same ratings.
    assert main([*args, "--json", str(out_json)]) == 0
    assert "0 pairings to play" in capsys.readouterr().err
    assert json.loads(out_json.read_text()) == data


@pytest.fixture()
def other_network_run(selfplay_run, tmp_path):
    """A copy of the run whose config claims another network width."""
    run = tmp_path / "wide"
    shutil.copytree(selfplay_run.run_dir, run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["network"]["hidden_sizes"] = [32]
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    return run


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--players", "latest,rule,champion"], "unknown player 'champion'"),
        (["--players", "999,rule"], "no checkpoint at update 999"),
        (["--players", "latest,random"], "must include rule"),
        (["--games", "0"], "--games must be >= 1"),
        (["--team-sizes", "4"], "not in 1..3"),
    ],
)
def test_cli_bad_input(selfplay_run, capsys, extra, message):
    assert main(["--run-dir", str(selfplay_run.run_dir), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err


def test_cli_refuses_runs_without_checkpoints_and_other_networks(
    selfplay_run, other_network_run, tmp_path, capsys
):
    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(selfplay_run.run_dir / "config.yaml", empty / "config.yaml")
    assert main(["--run-dir", str(empty)]) == 2
    assert "no checkpoints" in capsys.readouterr().err
    assert main(["--run-dir", str(selfplay_run.run_dir), "--run-dir", str(other_network_run)]) == 2
    err = capsys.readouterr().err.strip()
    assert "incompatible networks" in err and "\n" not in err
    assert main(["--run-dir", str(tmp_path / "missing")]) == 2
    assert "not a run directory" in capsys.readouterr().err
