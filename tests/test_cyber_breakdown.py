"""bench.research.cyber_breakdown: one evaluation cell of a CAGE2 defender, broken down."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from bench.research import cyber_breakdown as cb
from bench.research import cyber_trace
from jaxrl.envs.cyber import red
from jaxrl.envs.cyber import tables as tb
from jaxrl.run.driver import train
from tests.conftest import make_tiny_config
from tests.test_cyber_defender import TINY_CAGE

EPISODES, LENGTH = 8, 30


@pytest.fixture(scope="module")
def cage_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cage_breakdown") / "run"
    train(make_tiny_config(*TINY_CAGE, config="cage2.yaml"), run_dir, quiet=True)
    return run_dir


@pytest.fixture(scope="module")
def result(cage_run) -> cb.Breakdown:
    return cb.breakdown(cage_run, "B_line", LENGTH, episodes=EPISODES, seed=3)


def test_the_parts_add_up_to_the_return(result):
    # The return is its three terms (each step's reward is their sum rounded to 0.1).
    assert result.mean == pytest.approx(sum(result.terms.values()), abs=1e-3)
    # The hosts' costs are the access term, and a counted step is a step with a shell.
    assert sum(h.cost for h in result.hosts) == pytest.approx(-result.terms["access"], abs=1e-3)
    for h in result.hosts:
        assert 0 <= h.counted_steps <= h.shell_steps <= LENGTH
        value = tb.HOST_VALUE[tb.HOSTS.index(h.host)]
        assert h.cost == pytest.approx(h.counted_steps * value, rel=1e-5)
    # Red starts on User0 and holds it all episode; it is worth nothing.
    user0 = next(h for h in result.hosts if h.host == "User0")
    assert user0.shell_steps == LENGTH and user0.cost == 0
    # Every step is one Blue action, and the per-host counts are within their kind's.
    assert sum(result.kinds.values()) == pytest.approx(LENGTH)
    for name, per_host in result.targets.items():
        assert sum(per_host.values()) == pytest.approx(result.kinds[name])
    assert result.terms["restore"] == pytest.approx(-result.kinds["restore"])
    assert len(result.opening) == cb.OPENING_STEPS
    for top in result.opening:
        assert 0 < sum(p for _, p in top) <= 1 + 1e-9


def test_deterministic_and_seeded(cage_run, result):
    again = cb.breakdown(cage_run, "B_line", LENGTH, episodes=EPISODES, seed=3)
    assert again == result
    other = cb.breakdown(cage_run, "Meander", LENGTH, episodes=EPISODES, seed=3)
    assert other.red == "Meander" and other != result


def test_cli_prints_and_writes_json(cage_run, tmp_path, capsys):
    path = tmp_path / "breakdown.json"
    argv = ["--run-dir", str(cage_run), "--length", str(LENGTH), "--episodes", str(EPISODES),
            "--seed", "3", "--json", str(path)]  # fmt: skip
    assert cb.main(argv) == 0
    out = capsys.readouterr().out
    assert "B_line 30 steps, CybORG 2.1 bugs" in out and "| User0 | 30.0 | 30.0 | 0.00 |" in out
    data = json.loads(path.read_text())
    assert data["terms"] == cb.breakdown(cage_run, "B_line", LENGTH, episodes=EPISODES,
                                         seed=3).terms  # fmt: skip


def test_bad_input_is_one_line(cage_run, tmp_path, capsys):
    cases = [
        (["--red", "Sleep"], "--red must be one of"),
        (["--length", "0"], "--length and --episodes must be >= 1"),
        (["--json", str(tmp_path / "no" / "x.json")], "no directory"),
    ]
    for extra, message in cases:
        assert cb.main(["--run-dir", str(cage_run), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:") and message in err, err
    assert cb.main(["--run-dir", str(tmp_path / "nowhere")]) == 2
    assert "is not a run directory" in capsys.readouterr().err


def test_a_scripted_opening_shows_in_the_breakdown(cage_run, capsys):
    restore = tb.RESTORE + tb.ENTERPRISE0
    scripted = cb.breakdown(
        cage_run, "B_line", LENGTH, episodes=EPISODES, seed=3, opening=(restore, restore)
    )
    assert scripted.scripted == (restore, restore)
    for t in (0, 1):
        assert scripted.opening[t] == ((tb.action_name(restore), 1.0),)
    assert scripted.targets["restore"]["Enterprise0"] >= 2
    assert scripted.terms["restore"] <= -2
    argv = ["--run-dir", str(cage_run), "--length", str(LENGTH), "--episodes", str(EPISODES),
            "--opening", f"{restore},{restore}"]  # fmt: skip
    assert cb.main(argv) == 0
    assert f"opening {restore},{restore}" in capsys.readouterr().out
    assert cb.main([*argv[:-1], "146"]) == 2
    assert "--opening needs actions in [0, 145)" in capsys.readouterr().err


def test_a_reduced_action_set_run_breaks_down_in_cyborg_actions(tmp_path_factory, capsys):
    """A run on the 36 reduced actions: its opening indices are its own (0-35), the breakdown
    names the CybORG actions they played (the decoy macro's decoy), and 36 is refused."""
    run_dir = tmp_path_factory.mktemp("cage_reduced") / "run"
    config = make_tiny_config(*TINY_CAGE, "env.kwargs.action_set=reduced", config="cage2.yaml")
    train(config, run_dir, quiet=True)
    macro = tb.REDUCED_KINDS.index("decoy") * len(tb.REDUCED_HOSTS)  # Decoy Enterprise0
    scripted = cb.breakdown(
        run_dir, "B_line", LENGTH, episodes=EPISODES, seed=3, opening=(macro, macro)
    )
    first = tb.DECOY + tb.NUM_HOSTS * tb.HARAKA_SMTP + tb.ENTERPRISE0  # Cardiff's order
    second = tb.DECOY + tb.NUM_HOSTS * tb.TOMCAT + tb.ENTERPRISE0
    assert scripted.opening[0] == ((tb.action_name(first), 1.0),)
    assert scripted.opening[1] == ((tb.action_name(second), 1.0),)
    assert scripted.kinds["decoy"] >= 2
    argv = ["--run-dir", str(run_dir), "--length", str(LENGTH), "--episodes", str(EPISODES),
            "--opening", "36"]  # fmt: skip
    assert cb.main(argv) == 2
    assert "--opening needs actions in [0, 36)" in capsys.readouterr().err


def test_trace_records_every_step_as_the_peer_does(cage_run, tmp_path, capsys):
    """``--trace`` writes cyber_peer's format; its records follow B_line's rules and the
    breakdown's own figures."""
    path = tmp_path / "trace.npz"
    argv = ["--run-dir", str(cage_run), "--length", str(LENGTH), "--episodes", str(EPISODES),
            "--seed", "3", "--trace", str(path)]  # fmt: skip
    assert cb.main(argv) == 0
    capsys.readouterr()
    trace = cyber_trace.load(path)
    assert trace["reward"].shape == (EPISODES, LENGTH)
    result = cb.breakdown(cage_run, "B_line", LENGTH, episodes=EPISODES, seed=3)
    assert trace["reward"].sum(1).mean() == pytest.approx(result.mean, abs=1e-4)
    assert (trace["red_access"][..., tb.USER0] == 2).all()  # Red starts as SYSTEM there
    stage = trace["red_stage"]
    assert (stage[:, 0] == 0).all()
    for t in range(LENGTH - 1):  # the stage walks as B_line's table says
        expected = red.bline_next_stage(stage[:, t], trace["red_success"][:, t])
        np.testing.assert_array_equal(stage[:, t + 1], expected)
    np.testing.assert_array_equal(trace["red_kind"], red.BLINE_KIND[stage])
    scans = trace["red_kind"] == red.RED_SUBNET_SCAN
    np.testing.assert_array_equal(trace["red_target"][scans], red.BLINE_TARGET[stage][scans])
    exploits = trace["red_kind"] == red.RED_EXPLOIT
    assert (trace["red_exploit"][~exploits] == -1).all()
    assert (trace["red_exploit"][exploits & trace["red_success"]] >= 0).all()
    assert np.isin(trace["table"], (0, 1)).all()
    # Against itself the trace shows no divergence.
    steps, totals = cyber_trace.compare(trace, trace)
    assert all(d.z == 0 for d in steps + totals)
    assert cb.main([*argv[:-1], str(tmp_path / "no" / "t.npz")]) == 2
    assert "no directory" in capsys.readouterr().err


@pytest.mark.parametrize("action_set", ["full", "reduced"])
def test_foothold_restore_plays_a_restore_of_each_user_host(action_set):
    from jaxrl.envs.cyber import env as cyber_env

    users = np.asarray(cb.USER_HOSTS, np.int32)
    actions = np.asarray(cb.foothold_restore(users, action_set))
    state = cyber_env.initial_state(jax.random.key(0), cyber_env.EnvParams())
    played = [int(cyber_env.expand_action(state, a, action_set, False)) for a in actions]
    assert played == [tb.RESTORE + u for u in cb.USER_HOSTS]


def test_the_foothold_restore_probe_restores_b_lines_user_host(cage_run, tmp_path, capsys):
    """``--restore-foothold K`` replaces Blue's action at step K with a Restore of the user host
    B_line port-scans at its stage 1, in every episode, and pays the Restore's cost."""
    step = 6
    path = tmp_path / "probe.npz"
    probe = cb.breakdown(
        cage_run, "B_line", LENGTH, episodes=EPISODES, seed=3, trace=path, restore_foothold=step
    )
    trace = cyber_trace.load(path)
    first_scan = (trace["red_stage"] == 1).argmax(1)  # [E] B_line's port scan of its user host
    user = trace["red_target"][np.arange(EPISODES), first_scan].astype(np.int32)
    assert np.isin(user, cb.USER_HOSTS).all()
    np.testing.assert_array_equal(trace["blue_action"][:, step], tb.RESTORE + user)
    assert sum(probe.targets["restore"].get(tb.HOSTS[u], 0.0) for u in cb.USER_HOSTS) >= 1.0
    assert probe.terms["restore"] <= -1.0
    assert probe.restore_foothold == step and 0.0 <= probe.foothold_at_end <= 1.0
    argv = ["--run-dir", str(cage_run), "--length", str(LENGTH), "--episodes", str(EPISODES),
            "--restore-foothold", str(step)]  # fmt: skip
    assert cb.main(argv) == 0
    assert f"oracle Restore of B_line's user host at step {step}" in capsys.readouterr().out
    assert cb.main([*argv[:-1], str(LENGTH)]) == 2
    assert f"--restore-foothold needs a step in [0, {LENGTH})" in capsys.readouterr().err
    assert cb.main([*argv, "--red", "Meander"]) == 2
    assert "--restore-foothold probes B_line's user host, not Meander's" in capsys.readouterr().err
