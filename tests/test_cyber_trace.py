"""bench.research.cyber_trace: where a CybORG trace and a jaxrl trace part, step by step."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.research import cyber_peer, cyber_trace
from jaxrl.envs.cyber import red
from jaxrl.envs.cyber import tables as tb

EPISODES, STEPS = 400, 12


def _trace(seed: int) -> dict[str, np.ndarray]:
    """A B_line-like trace: the scan, exploit and escalation of User1 repeated, Red holding
    User1 as root from step 4, Blue sleeping, a -0.1 reward while Red holds it."""
    rng = np.random.default_rng(seed)
    trace = cyber_peer.new_trace(EPISODES, STEPS)
    cycle = np.array([red.RED_SCAN, red.RED_EXPLOIT, red.RED_PRIVESC], np.int8)
    trace["red_kind"][:] = np.resize(cycle, STEPS)
    trace["red_target"][:] = tb.USER1
    trace["red_success"][:] = rng.random((EPISODES, STEPS)) < 0.9
    exploit = trace["red_kind"] == red.RED_EXPLOIT
    trace["red_exploit"][:] = np.where(exploit, tb.FTP, -1)
    trace["red_stage"][:] = np.resize(np.array([1, 2, 3], np.int8), STEPS)
    trace["red_access"][..., tb.USER0] = 2
    trace["red_access"][:, 4:, tb.USER1] = 2
    trace["reward"][:, 4:] = -0.1
    trace["table"][:, :, 4 * tb.USER1] = trace["red_kind"] == red.RED_SCAN  # Scan activity
    return trace


def test_the_peers_codes_are_jaxrls():
    assert cyber_peer.HOSTS == tb.HOSTS
    assert cyber_peer.SUBNETS == tb.SUBNETS
    assert cyber_peer.EXPLOITS == tb.EXPLOITS
    assert len(cyber_peer.RED_ACTIONS) == len(red.RED_KINDS)
    for peer, ours in zip(cyber_peer.RED_ACTIONS, red.RED_KINDS, strict=True):
        assert peer.startswith(ours)  # ExploitRemoteService is red's "Exploit"


def test_two_draws_of_one_process_do_not_diverge():
    steps, totals = cyber_trace.compare(_trace(0), _trace(1))
    assert len(steps) == STEPS * len(totals)
    assert cyber_trace.first_divergence(steps, 4.5) == []
    assert max(abs(d.z) for d in steps + totals) < 4.5
    same, _ = cyber_trace.compare(_trace(0), _trace(0))
    assert all(d.z == 0 for d in same)


def test_finds_the_first_step_and_series_that_differ():
    a, b = _trace(0), _trace(1)
    # From step 7 on, Red's exploit fails more often in b, and Blue restores User1 at step 9.
    b["red_success"][:, 7] &= np.arange(EPISODES) % 2 == 0
    b["blue_action"][:, 9] = tb.RESTORE + tb.USER1
    b["reward"][:, 9] -= 1.0
    steps, totals = cyber_trace.compare(a, b)
    first = cyber_trace.first_divergence(steps, 4.5)
    assert {d.step for d in first} == {7}
    assert first[0].series == "red ExploitRemoteService User1 succeeded"
    assert first[0].a > first[0].b and first[0].z > 4.5
    by_name = {d.series: d for d in totals}
    assert by_name["blue Restore User1"].b == pytest.approx(1.0)
    assert by_name["blue Restore User1"].a == 0.0
    assert by_name["reward"].a - by_name["reward"].b == pytest.approx(1.0, abs=1e-5)
    text = cyber_trace.report(steps, totals, 4.5, 5, ("cyborg", "jaxrl"))
    assert "first step with a series at |z| >= 4.5:" in text
    assert "step 7: red ExploitRemoteService User1 succeeded" in text
    assert "after 10 steps +1.000" in text


def test_cli_prints_writes_json_and_refuses_bad_traces(tmp_path, capsys):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    np.savez_compressed(a, **_trace(0))
    np.savez_compressed(b, **_trace(1))
    out = tmp_path / "cmp.json"
    assert cyber_trace.main([str(a), str(b), "--top", "3", "--json", str(out)]) == 0
    assert "none in 12 steps" in capsys.readouterr().out
    rows = json.loads(out.read_text())["rows"]
    assert {"series", "step", "a", "b", "z"} <= set(rows[0])
    short = _trace(0)
    del short["red_stage"]
    np.savez_compressed(tmp_path / "short.npz", **short)
    wrong = _trace(0)
    wrong["table"] = wrong["table"][..., :13]
    np.savez_compressed(tmp_path / "wrong.npz", **wrong)
    cases = [
        ([str(tmp_path / "short.npz"), str(b)], "no ['red_stage']"),
        ([str(tmp_path / "wrong.npz"), str(b)], "table has shape"),
        ([str(tmp_path / "none.npz"), str(b)], "none.npz"),
        ([str(a), str(b), "--names", "x"], "--names takes two labels"),
    ]
    for argv, message in cases:
        assert cyber_trace.main(argv) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:") and message in err, err
