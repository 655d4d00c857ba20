"""bench.cyber_defender: a CAGE2 run's twelve cells against the CAGE-2 leaderboard."""

from __future__ import annotations

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bench import cyber_defender as cd
from jaxrl.commands.evaluate import evaluate
from jaxrl.config import save_config
from jaxrl.run.driver import train
from tests.conftest import make_tiny_config

# A one-update CAGE2 run: 4 envs x 10 steps, a 16-unit torso and GRU (the defender's shape,
# smaller). Untrained on purpose: the tests check the bench's bookkeeping, not the defender.
# On CybORG's 145 actions (the openings below are CybORG ids); the shipped config's reduced
# set has its own test in tests/test_cyber_breakdown.py.
TINY_CAGE = (
    "env.kwargs.action_set=full",
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
        reference = evaluate(
            cage_run, EPISODES, seed=153, actions="greedy", env_overrides=overrides
        )  # the defender's scores play the mode
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
        assert cd.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:") and message in err, err


@pytest.fixture(scope="module")
def other_run(tmp_path_factory):
    """A second tiny CAGE2 run, another seed: other weights, the same shapes."""
    run_dir = tmp_path_factory.mktemp("cage_other") / "run"
    train(make_tiny_config(*TINY_CAGE, "seed=1", config="cage2.yaml"), run_dir, quiet=True)
    return run_dir


def _means(scores: cd.DefenderScores, red: str) -> list[float]:
    return [c.mean for c in scores.cells if c.red == red]


def test_a_pair_plays_each_reds_run_after_the_fingerprint(cage_run, other_run, scores):
    same = cd.evaluate_pair(cage_run, cage_run, episodes=EPISODES, seed=153)
    assert [c.mean for c in same.cells] == [c.mean for c in scores.cells]  # the gate is moot
    assert "update 1" in same.runs and str(cage_run) in same.runs
    # Against B_line the verdict is always B_line: the B_line run plays every step alone.
    pair = cd.evaluate_pair(cage_run, other_run, episodes=EPISODES, seed=153)
    assert _means(pair, "B_line") == _means(scores, "B_line")
    assert str(other_run) in pair.runs


def test_the_gated_network_switches_at_the_verdict():
    spec = cd.RedGated(
        b_line=_tiny_actor_critic(), meander=_tiny_actor_critic()
    )  # two nets, one shape
    hidden = spec.initial_hidden(2)
    obs = jnp.zeros((1, 2, 79), jnp.float32).at[0, :, -1].set(0.03)  # step 3
    obs = obs.at[0, 1, 52 + 9].set(0.5).at[0, 1, 52 + 10].set(1.0)  # row 1: two hosts touched
    is_first = jnp.zeros((1, 2), bool)
    variables = spec.init(jax.random.key(0), hidden, obs, is_first)
    b_only = {"params": variables["params"]["b_line"]}
    m_only = {"params": variables["params"]["meander"]}
    hidden_out, logits, value = spec.apply(variables, hidden, obs, is_first)
    assert hidden_out.verdict.tolist() == [1, 2]  # B_line, Meander
    _, b_logits, b_value = _tiny_actor_critic().apply(b_only, hidden.b_line, obs, is_first)
    _, m_logits, m_value = _tiny_actor_critic().apply(m_only, hidden.meander, obs, is_first)
    np.testing.assert_array_equal(logits[0, 0], b_logits[0, 0])
    np.testing.assert_array_equal(logits[0, 1], m_logits[0, 1])
    assert value[0, 0] == b_value[0, 0] and value[0, 1] == m_value[0, 1]
    assert not np.array_equal(b_logits[0, 1], m_logits[0, 1])  # the two nets do differ


def _tiny_actor_critic():
    from jaxrl.core.networks import ActorCritic  # noqa: PLC0415

    return ActorCritic(
        action_dim=145, discrete=True, hidden_sizes=(8,), shared_torso=True, core="gru",
        core_size=8,
    )  # fmt: skip


def test_pair_bad_input_is_one_line(cage_run, tmp_path, capsys):
    cases = [
        (["--b-line-run", str(cage_run)], "--b-line-run with --meander-run"),
        ([], "give --run-dir"),
        (
            [
                "--run-dir",
                str(cage_run),
                "--b-line-run",
                str(cage_run),
                "--meander-run",
                str(cage_run),
            ],
            "not both",
        ),  # fmt: skip
        (
            ["--b-line-run", str(cage_run), "--meander-run", str(cage_run), "--step", "1"],
            "--step needs one --run-dir",
        ),  # fmt: skip
        (
            ["--b-line-run", str(cage_run), "--meander-run", str(tmp_path / "nowhere")],
            "is not a run directory",
        ),  # fmt: skip
    ]
    for argv, message in cases:
        assert cd.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:") and message in err, err


def test_an_ensemble_plays_the_mean_of_its_networks_action_probabilities():
    nets = (_tiny_actor_critic(), _tiny_actor_critic(), _tiny_actor_critic())
    ensemble = cd.Ensemble(members=nets)
    hidden = ensemble.initial_hidden(2)
    obs = jax.random.uniform(jax.random.key(1), (1, 2, 79))
    is_first = jnp.asarray([[True, False]])
    variables = ensemble.init(jax.random.key(0), hidden, obs, is_first)
    assert sorted(variables["params"]) == ["members_0", "members_1", "members_2"]
    carries, logits, value = ensemble.apply(variables, hidden, obs, is_first)
    probs, values = [], []
    for k, net in enumerate(nets):
        own = {"params": variables["params"][f"members_{k}"]}
        carry, net_logits, net_value = net.apply(own, hidden.members[k], obs, is_first)
        np.testing.assert_array_equal(carries.members[k], carry)  # each keeps its own state
        probs.append(np.asarray(jax.nn.softmax(net_logits.astype(jnp.float32))))
        values.append(np.asarray(net_value, np.float32))
    assert logits.shape == (1, 2, 145) and logits.dtype == jnp.float32
    np.testing.assert_allclose(np.exp(logits), np.mean(probs, axis=0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(value, np.mean(values, axis=0), rtol=1e-6)
    assert not np.allclose(probs[0], probs[1])  # the networks do differ


def test_an_ensemble_of_one_run_twice_plays_as_the_run(cage_run, other_run, scores):
    twice = cd.evaluate_ensemble(f"{cage_run},{cage_run}", episodes=EPISODES, seed=153)
    assert [c.mean for c in twice.cells] == [c.mean for c in scores.cells]
    assert twice.runs.count(f"{cage_run} (update 1)") == 2
    # Either side of a pair may be an ensemble: against B_line only the B_line side plays.
    pair = cd.evaluate_pair([cage_run, cage_run], other_run, episodes=EPISODES, seed=153)
    assert _means(pair, "B_line") == _means(scores, "B_line")


def test_ensemble_cli_and_bad_input(cage_run, tmp_path, capsys):
    path = tmp_path / "ensemble.json"
    runs = f"{cage_run},{cage_run}"
    argv = ["--run-dir", runs, "--episodes", str(EPISODES), "--json", str(path)]
    assert cd.main(argv) == 0
    assert f"{cage_run} (update 1), {cage_run} (update 1)" in capsys.readouterr().out
    assert json.loads(path.read_text())["runs"].count(str(cage_run)) == 2
    cartpole = tmp_path / "cartpole"
    cartpole.mkdir()
    save_config(make_tiny_config(), cartpole / "config.yaml")
    cases = [
        (["--run-dir", runs, "--step", "1"], "--step needs one --run-dir"),
        (["--run-dir", f"{cage_run},{cartpole}"], "trained CartPole-v1, not CAGE2"),
        (["--run-dir", f"{cage_run},{tmp_path / 'nowhere'}"], "is not a run directory"),
        (["--b-line-run", runs, "--meander-run", f"{cage_run},{cartpole}"], "not CAGE2"),
    ]
    for argv, message in cases:
        assert cd.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:") and message in err, err


def test_combined_runs_refuse_what_they_cannot_mix(cage_run, monkeypatch):
    """Runs a combined defender cannot mix are refused by name (the loader stubbed with
    variants of the tiny run's setup)."""
    from jaxrl.run.play import load_policy  # noqa: PLC0415

    setup, policy, step = load_policy(cage_run)
    config = setup.config
    normalised = dataclasses.replace(
        config, env=dataclasses.replace(config.env, normalize_obs=True)
    )
    variants = {
        "many": dataclasses.replace(
            setup, members=dataclasses.replace(setup.members, names=("seed0", "seed1"))
        ),
        "normalised": dataclasses.replace(
            setup, config=normalised, step=dataclasses.replace(setup.step, normalize_obs=True)
        ),
        "narrow": dataclasses.replace(setup, obs_shape=(52,)),
        "plain": setup,
    }
    monkeypatch.setattr(cd, "_check_cage2_run", lambda run_dir: None)
    monkeypatch.setattr(cd, "load_policy", lambda run_dir: (variants[str(run_dir)], policy, step))
    cases = [
        ("plain,many", "many has 2 members"),
        ("plain,normalised", "normalised normalises observations"),
        ("plain,narrow", "narrow sees obs_mode='extended' (52,), the first run 'extended'"),
    ]
    for runs, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            cd.load_defender(runs)
    assert cd.load_defender("plain,plain")[3] == "plain (update 1), plain (update 1)"
    with pytest.raises(ValueError, match="normalises observations"):  # the fingerprint's too
        cd.load_pair("normalised", "plain")


def test_an_opening_scripts_the_first_actions_then_hands_over():
    net = _tiny_actor_critic()
    opening = cd.Opening(network=net, actions=(51, 116))
    hidden = opening.initial_hidden(2)
    obs = jax.random.uniform(jax.random.key(2), (1, 2, 79))
    variables = opening.init(jax.random.key(0), hidden, obs, jnp.ones((1, 2), bool))
    own = {"params": variables["params"]["network"]}
    own_hidden = net.initial_hidden(2)
    # Row 1 starts its episode one step later than row 0 (its first step is a reset).
    firsts = [[True, False], [False, True], [False, False], [False, False]]
    for t, first in enumerate(firsts):
        is_first = jnp.asarray([first])
        hidden, logits, value = opening.apply(variables, hidden, obs, is_first)
        own_hidden, own_logits, own_value = net.apply(own, own_hidden, obs, is_first)
        np.testing.assert_array_equal(hidden.inner, own_hidden)  # the defender's carry moves
        np.testing.assert_array_equal(value, own_value)
        steps = [t, t - 1] if t >= 1 else [0, 0]  # row 1: the episode step after its reset
        for row, step in enumerate(steps):
            if step < 2:
                assert int(jnp.argmax(logits[0, row])) == (51, 116)[step]
                assert float(jax.nn.logsumexp(logits[0, row])) == pytest.approx(0.0, abs=1e-6)
            else:
                np.testing.assert_array_equal(logits[0, row], own_logits[0, row])


def _first_action(run_dir) -> int:
    """The run's deterministic first action: every episode starts from the same observation."""
    from jaxrl.run.play import load_policy  # noqa: PLC0415

    setup, policy, _ = load_policy(run_dir)
    obs, _ = setup.env.reset(jax.random.key(0), setup.env_params)
    network = setup.network
    _, logits, _ = network.apply(
        policy.params, network.initial_hidden(1), obs[None, None], jnp.ones((1, 1), bool)
    )
    return int(jnp.argmax(logits[0, 0]))


def test_an_opening_of_the_defenders_own_first_action_changes_nothing(cage_run, scores):
    first = _first_action(cage_run)
    (same,) = cd.evaluate_defender(cage_run, episodes=EPISODES, seed=153, opening=(first,))
    assert [c.mean for c in same.cells] == [c.mean for c in scores.cells]
    assert same.opening == (first,)
    # Two Restores of a host Red has not reached cost 1 each (not the defender's own opening).
    restore = 134 if first == 133 else 133
    opening = (restore, restore)
    (moved,) = cd.evaluate_defender(cage_run, episodes=EPISODES, seed=153, opening=opening)
    assert [c.mean for c in moved.cells] != [c.mean for c in scores.cells]


def test_opening_cli_and_bad_input(cage_run, tmp_path, capsys):
    path = tmp_path / "opening.json"
    argv = ["--run-dir", str(cage_run), "--episodes", str(EPISODES), "--opening", "51,116"]
    assert cd.main([*argv, "--json", str(path)]) == 0
    assert "opening 51,116;" in capsys.readouterr().out
    assert json.loads(path.read_text())["opening"] == [51, 116]
    for text, message in (("51,x", "action indices like 51,116"), ("145", "[0, 145)")):
        assert cd.main(["--run-dir", str(cage_run), "--opening", text]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:") and message in err, err
