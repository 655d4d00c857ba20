"""bench/league_population.py: the report of issue 62's measurement (no training here: the
plumbing runs with ``--tiny`` by hand, see the module)."""

from __future__ import annotations

import json

from bench import league_population as lp


def plan(tmp_path, runs=1):
    return lp.Plan(
        out=tmp_path, runs=runs, hour=60, games=8, exploit_steps=64, dud_below=0.05, tiny=True
    )


def rating(player, size, elo, win):
    return {"player": player, "team_size": size, "elo": elo, "vs_rule": {"win": win}}


def test_report_rows_duds_and_exploits(tmp_path):
    p = plan(tmp_path)
    found = {"single_s0": p.agent_dir("single", 0), "population_s0": p.agent_dir("population", 0)}
    assert found["population_s0"].name == "population_s0_best"  # unique tournament names
    ratings = {
        "ratings": [
            *(rating("single_s0/300", s, 1500 + s, [0.5, 0.01, 0.2][s - 1]) for s in (1, 2, 3)),
            *(rating("population_s0_best/40", s, 1600 + s, 0.3) for s in (1, 2, 3)),
        ]
    }
    table = lp.table(p, found, ratings, {"single_s0": 0.61, "population_s0": None})
    rows = {line.split(" | ")[0][2:]: line for line in table.splitlines()[2:]}
    assert (
        rows["single_s0"]
        == "| single_s0 | 1501 / 1502 / 1503 | 0.500 / 0.010 / 0.200 | yes | 0.610 |"
    )
    assert rows["population_s0"].endswith("| 0.300 / 0.300 / 0.300 | no | - |")


def test_runs_resume_for_what_is_left_of_their_hour(tmp_path, monkeypatch):
    p = plan(tmp_path)
    calls = []
    monkeypatch.setattr(
        lp, "_call", lambda args, timeout=None: calls.append((args, timeout)) or 130
    )
    lp.train_run(p, "single", 0)  # interrupted at its timeout: not done, resumed next time
    run = p.run_dir("single", 0)
    state = json.loads((run / "bench.json").read_text())
    assert not state["done"] and calls[0][0][:3] == [
        "jaxrl.train",
        "--config",
        lp.ARMS["single"],
    ]
    assert "env.num_envs=8" in calls[0][0]  # --tiny
    (run / "checkpoints" / "2").mkdir(parents=True)
    state["seconds"] = 20.0
    (run / "bench.json").write_text(json.dumps(state))
    lp.train_run(p, "single", 0)
    assert calls[1][0] == ["jaxrl.train", "--resume", str(run)] and calls[1][1] == 40.0
    (run / "bench.json").write_text(json.dumps({"seconds": 59.0, "done": False}))
    lp.train_run(p, "single", 0)  # under 30 s left: nothing more
    assert len(calls) == 2
    assert "| single_s0 | 59 | False |" in lp._progress(p)


def test_unknown_arm_is_refused(tmp_path, capsys):
    assert lp.main(["--out", str(tmp_path), "--arms", "pairs"]) == 2
    assert "--arms pairs: not one of single, population" in capsys.readouterr().err
