"""bench.cyber_defender: a CAGE2 run's twelve cells against the CAGE-2 leaderboard."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from bench import cyber_defender as cd
from jaxrl.config import save_config
from jaxrl.evaluate import evaluate
from jaxrl.train import train
from tests.conftest import make_tiny_config

# A one-update CAGE2 run: 4 envs x 10 steps, a 16-unit torso and GRU (the defender's shape,
# smaller). Untrained on purpose: the tests check the bench's bookkeeping, not the defender.
TINY_CAGE = (
    "ppo.num_steps=10",
    "ppo.sequence_length=10",
    "network.hidden_sizes=[16]",
    "network.core_size=16",
    "train.total_steps=40",
    "train.updates_per_chunk=1",
    "checkpoint.every_updates=1",
)
EPISODES = 6


@pytest.fixture(scope="module")
def cage_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cage") / "run"
    train(make_tiny_config(*TINY_CAGE, config="cage2.yaml"), run_dir, quiet=True)
    return run_dir


@pytest.fixture(scope="module")
def scores(cage_run) -> cd.DefenderScores:
    (result,) = cd.evaluate_defender(cage_run, episodes=EPISODES, seed=153)
    return result


def test_best_entry_per_cell_and_totals_of_the_leaderboard():
    assert [cd.best_entry("B_line", n) for n in cd.LENGTHS] == [-3.47, -5.85, -11.39]
    assert [cd.best_entry("Meander", n) for n in cd.LENGTHS] == [-5.64, -8.69, -16.6]
    for entry in cd.LEADERBOARD.values():  # each published total is its six cells' sum
        if "B_line" in entry:
            assert sum(entry["B_line"]) + sum(entry["Meander"]) == pytest.approx(entry["total"])


def test_twelve_cells_agree_with_jaxrl_evaluate(cage_run, scores):
    keys = [(c.bugs, c.red, c.length) for c in scores.cells]
    assert keys == [(b, r, n) for b in cd.BUGS for r in cd.REDS for n in cd.LENGTHS]
    assert scores.step == 1 and scores.episodes == EPISODES and scores.deterministic
    for bugs, red, length in (("2.1", "B_line", 30), ("fixed", "Meander", 100)):
        overrides = {"red_agent": cd.REDS[red], "max_steps_in_episode": length,
                     "fix_bugs": cd.BUGS[bugs], "green_agent": False}  # fmt: skip
        reference = evaluate(cage_run, EPISODES, seed=153, env_overrides=overrides)
        cell = scores.cell(bugs, red, length)
        assert cell.mean == pytest.approx(reference.mean_return, abs=1e-9)
        assert cell.se == pytest.approx(reference.std_return / np.sqrt(EPISODES), abs=1e-9)
        assert reference.mean_length == length  # the episode length really was the cell's
    # An untrained Blue loses something against an active Red at 100 steps.
    assert scores.cell("2.1", "B_line", 100).mean < 0


def _hand_scores(shift: float, lower: tuple[str, int] | None = None) -> cd.DefenderScores:
    """Every cell at the best 2.1 entry plus ``shift``; the ``lower`` cell 0.01 below the best."""
    cells = []
    for bugs in cd.BUGS:
        for red in cd.REDS:
            for n in cd.LENGTHS:
                mean = cd.best_entry(red, n) + (-0.01 if (red, n) == lower else shift)
                cells.append(cd.Cell(bugs=bugs, red=red, length=n, mean=mean, se=0.1))
    return cd.DefenderScores(
        step=7, episodes=1000, seed=153, deterministic=True, cells=tuple(cells)
    )


def test_verdict_of_hand_built_scores():
    at_best = _hand_scores(0.0)  # every cell level with the best entry: total -51.64
    assert at_best.cells_at_best() == 6
    assert at_best.total("2.1") == pytest.approx(-51.64)
    assert not at_best.meets_targets()  # the total target is stricter than the cells
    ahead = _hand_scores(0.5)  # -48.64
    assert ahead.meets_targets()
    one_short = _hand_scores(0.5, lower=("Meander", 50))
    assert one_short.cells_at_best() == 5 and not one_short.meets_targets()
    text = cd.report(ahead)
    assert "6/6 cells" in text and "targets met" in text
    assert (
        "| best entry per cell | -3.47 | -5.85 | -11.39 | -5.64 | -8.69 | -16.60 | -51.64 |" in text
    )
    assert "5/6 cells" in cd.report(one_short) and "targets not met" in cd.report(one_short)


def test_cli_prints_the_table_and_writes_json(cage_run, scores, tmp_path, capsys):
    path = tmp_path / "defender.json"
    argv = ["--run-dir", str(cage_run), "--episodes", str(EPISODES), "--json", str(path)]
    assert cd.main(argv) == 0
    out = capsys.readouterr().out
    assert "| jaxrl (2.1) |" in out and "| jaxrl (fixed) |" in out and "| CardiffUni |" in out
    data = json.loads(path.read_text())
    assert data["cells"] == [dataclasses.asdict(c) for c in scores.cells]  # same seed, same play
    assert data["total"]["2.1"] == pytest.approx(scores.total("2.1"))
    assert data["meets_targets"] is False


def test_bad_input_is_one_line(cage_run, tmp_path, capsys):
    cartpole = tmp_path / "cartpole"
    cartpole.mkdir()
    save_config(make_tiny_config(), cartpole / "config.yaml")
    cases = [
        (["--run-dir", str(tmp_path / "nowhere")], "is not a run directory"),
        (["--run-dir", str(cartpole)], "trained CartPole-v1, not CAGE2"),
        (["--run-dir", str(cage_run), "--episodes", "0"], "--episodes must be >= 1"),
        (["--run-dir", str(cage_run), "--json", str(tmp_path / "no" / "x.json")], "no directory"),
    ]
    for argv, message in cases:
        assert cd.main(argv) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:") and message in err, err
