"""Evaluation's action mode (``--actions sample|greedy``, ``jaxrl.evaluate(..., actions=)``).

Sampling is the default: PPO trains a stochastic policy, and its mode is another policy
(on Craftax-Classic a greedy trained policy scored 0.72, below a random policy's 1.31, where
its samples scored 3.29). The tests play an untrained policy (about uniform over two
actions) on the deterministic Corridor of examples/corridor: greedy play is the same episode
whatever the seed, sampled play is not.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jaxrl.commands import evaluate as evaluate_module
from jaxrl.commands.evaluate import EvalResult, build_parser, evaluate_policy, summary_line
from jaxrl.config import config_from_dict
from jaxrl.core import match
from jaxrl.run.play import greedy, policy_like
from jaxrl.run.setup import make_setup

REPO = Path(__file__).resolve().parents[1]
EPISODES = 8


@pytest.fixture(scope="module")
def corridor():
    """A Corridor setup and its untrained policy."""
    sys.path.insert(0, str(REPO / "examples" / "corridor"))
    data = {
        "env": {"name": "corridor:Corridor", "num_envs": 2},
        "network": {"hidden_sizes": [8]},
        "ppo": {"num_steps": 4, "num_minibatches": 1},
        "train": {"total_steps": 8, "progress_bar": False},
    }
    setup = make_setup(config_from_dict(data))
    yield setup, policy_like(setup)
    sys.path.remove(str(REPO / "examples" / "corridor"))


def play(corridor, actions: str, seed: int) -> EvalResult:
    setup, policy = corridor
    return evaluate_policy(setup, policy, 0, EPISODES, seed, actions)


def test_greedy_is_the_same_episode_whatever_the_seed(corridor):
    first, second = play(corridor, "greedy", 0), play(corridor, "greedy", 1)
    assert first.actions == second.actions == "greedy"
    assert first.returns == second.returns
    assert len(set(first.returns)) == 1  # every env plays the same deterministic episode


def test_sample_draws_other_episodes_from_other_seeds(corridor):
    first, second = play(corridor, "sample", 0), play(corridor, "sample", 1)
    assert first.actions == "sample"
    assert first.returns != second.returns
    assert len(set(first.returns)) > 1  # the envs of one seed differ too


def test_the_mode_reaches_act(corridor, monkeypatch):
    """The match step hands act deterministic=True for greedy, False for sample."""
    seen = []
    act = match.act

    def spy(*args, **kwargs):
        seen.append(kwargs.get("deterministic", args[6] if len(args) > 6 else False))
        return act(*args, **kwargs)

    monkeypatch.setattr(match, "act", spy)
    play(corridor, "greedy", 2)
    play(corridor, "sample", 2)
    assert [bool(d) for d in seen] == [True, False]  # traced once each


def test_sample_is_the_default_and_a_bad_mode_is_refused(tmp_path):
    assert build_parser().parse_args(["--run-dir", "R"]).actions == "sample"
    assert build_parser().parse_args(["--run-dir", "R", "--actions", "greedy"]).actions == "greedy"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--run-dir", "R", "--actions", "mode"])
    assert greedy("greedy") and not greedy("sample")
    with pytest.raises(ValueError, match="^actions must be one of sample, greedy, got 'mode'$"):
        evaluate_module.evaluate(tmp_path, actions="mode")  # before anything is restored


def test_the_summary_line_names_the_mode():
    result = EvalResult(
        mean_return=0.5, std_return=0.25, mean_length=5.0, returns=(0.25, 0.75), step=160,
        episodes=2, actions="sample",
    )  # fmt: skip
    assert summary_line(result) == (
        "step 160: return 0.50 +- 0.25 over 2 episodes (mean length 5.0, actions: sample)"
    )
