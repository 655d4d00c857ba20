"""``python -m jaxrl.plot``: curves from event files, seeds as mean and spread, stages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from jaxrl.commands import plot
from jaxrl.config import load_config
from jaxrl.envs.soccer.env import REWARD_TERMS
from jaxrl.run.driver import train
from jaxrl.run.logger import Logger

REPO = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def seeds_run(tmp_path_factory):
    """CartPole, 2 seeds vmapped, 4 chunks (4 points on every curve)."""
    config = load_config(
        REPO / "configs" / "cartpole.yaml",
        [
            "env.num_envs=4",
            "ppo.num_steps=16",
            "network.hidden_sizes=[8]",
            "train.total_steps=512",
            "train.updates_per_chunk=2",
            "train.num_seeds=2",
            "train.progress_bar=false",
        ],
    )
    return train(config, tmp_path_factory.mktemp("plot") / "cp", quiet=True).run_dir


def test_png_of_seeds_and_two_tags(seeds_run, tmp_path, capsys):
    out = tmp_path / "curves.png"
    code = plot.main(
        ["--run-dir", str(seeds_run), "--tags", "train/entropy,train/value_loss", "--out", str(out)]
    )
    assert code == 0 and capsys.readouterr().out.strip() == f"wrote {out}"
    assert out.read_bytes()[:8] == PNG and out.stat().st_size > 10_000


def test_seeds_are_mean_and_spread(seeds_run):
    curves, stages, _ = plot.curves_for([seeds_run], ["train/entropy"], None, group=False)
    (curve,) = curves["train/entropy"]
    assert curve.count == 2 and curve.label == "cp (mean of 2 seeds)"
    a = plot.read_scalars(seeds_run / "seed0")["train/entropy"]
    b = plot.read_scalars(seeds_run / "seed1")["train/entropy"]
    np.testing.assert_array_equal(curve.steps, [128, 256, 384, 512])
    np.testing.assert_allclose(curve.mean, (a.values + b.values) / 2)
    np.testing.assert_allclose(curve.low, np.minimum(a.values, b.values))
    assert stages is None  # no curriculum


def test_curriculum_stages_are_read(selfplay_run):
    curves, stages, names = plot.curves_for(
        [selfplay_run.run_dir], ["rollout/episode_length"], None, group=False
    )
    assert names == ["rule", "league"]
    assert stages.values[-1] == 1 and set(stages.values) <= {0.0, 1.0}
    assert len(curves["rollout/episode_length"]) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--run-dir", "/nonexistent/run"], "error: --run-dir /nonexistent/run: no such directory"),
        (["--tags", "rollout/bogus"], "error: unknown tag 'rollout/bogus' in "),
        (["--labels", "a,b"], "error: --labels: 2 labels for 1 curve(s)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(seeds_run, tmp_path, capsys, args, message):
    argv = ["--out", str(tmp_path / "x.png"), *args]
    if "--run-dir" not in args:
        argv += ["--run-dir", str(seeds_run)]
    assert plot.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
    assert not (tmp_path / "x.png").exists()


def test_empty_directory_has_no_events(tmp_path, capsys):
    assert plot.main(["--run-dir", str(tmp_path), "--out", str(tmp_path / "x.png")]) == 2
    assert "no TensorBoard event files" in capsys.readouterr().err


# ---- PBT schedules and reward breakdowns (written event files, no training) -----------------

STEPS = (100, 200, 300, 400)


def _write(run_dir: Path, rows: dict[str, dict[str, list[float]]]) -> Path:
    """``{member: {tag: [value per step of STEPS]}}`` as TensorBoard runs under ``run_dir``."""
    for member, tags in rows.items():
        logger = Logger(run_dir / member)
        for i, step in enumerate(STEPS):
            logger.scalars(step, {tag: values[i] for tag, values in tags.items()})
        logger.close()
    return run_dir


@pytest.fixture(scope="module")
def pbt_run(tmp_path_factory):
    """4 members; at step 300 member seed3 copies seed1 (its lr perturbed) and PBT fires."""

    def member(returns, lrs, replaced=(0, 0, 0, 0), parents=None, index=0):
        return {
            "rollout/episode_return": returns,
            "hyper/ppo.lr": lrs,
            "hyper/ppo.gamma": [0.99] * 4,  # the same for everyone: no panel
            "pbt/replaced": list(replaced),
            "pbt/parent": parents or [index] * 4,
            "pbt/events": [0, 0, 1, 0],
        }

    return _write(
        tmp_path_factory.mktemp("pbt") / "run",
        {
            "seed0": member([1, 2, 3, 4], [1e-3] * 4),
            "seed1": member([2, 5, 9, 12], [3e-4] * 4, index=1),
            "seed2": member([1, 3, 4, 5], [1e-4] * 4, index=2),
            "seed3": member(
                [0, 0, 9, 13], [3e-3, 3e-3, 3.75e-4, 3.75e-4], (0, 0, 1, 0), [3, 3, 1, 1]
            ),  # fmt: skip
        },
    )


def test_schedule_reads_copies_events_and_varying_hyperparameters(pbt_run):
    schedule = plot.schedule_of(pbt_run, "rollout/episode_return")
    assert schedule.hyper_tags == ("hyper/ppo.lr",)
    assert schedule.copies == {"seed0": [], "seed1": [], "seed2": [], "seed3": [(300, 1)]}
    np.testing.assert_array_equal(schedule.events, [300])


def test_schedule_png(pbt_run, tmp_path, capsys):
    out = tmp_path / "schedule.png"
    assert plot.main(["--run-dir", str(pbt_run), "--figure", "schedule", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    assert out.read_bytes()[:8] == PNG and out.stat().st_size > 10_000


@pytest.fixture(scope="module")
def rewards_run(tmp_path_factory):
    """A reward-weight sweep: 2 points x 2 seeds, three terms (one negative)."""

    def member(touch, goal):
        return {
            "rollout/reward/touch": touch,
            "rollout/reward/goal_scored": goal,
            "rollout/reward/time": [-0.5] * 4,
        }

    return _write(
        tmp_path_factory.mktemp("rewards") / "run",
        {
            "touch=0-seed0": member([0, 0, 0, 0], [0, 1, 2, 3]),
            "touch=0-seed1": member([0, 0, 0, 0], [0, 3, 4, 5]),
            "touch=0.2-seed0": member([1, 2, 2, 2], [0, 0, 1, 1]),
            "touch=0.2-seed1": member([1, 2, 4, 4], [0, 0, 1, 3]),
        },
    )


def test_reward_breakdown_averages_a_points_seeds(rewards_run, tmp_path):
    breakdown = plot.reward_breakdown(rewards_run)
    assert list(breakdown) == ["touch=0", "touch=0.2"]
    assert list(breakdown["touch=0"]) == ["goal_scored", "time", "touch"]
    np.testing.assert_allclose(breakdown["touch=0"]["goal_scored"].mean, [0, 2, 3, 4])
    np.testing.assert_allclose(breakdown["touch=0.2"]["touch"].mean, [1, 2, 3, 3])
    np.testing.assert_allclose(breakdown["touch=0.2"]["time"].mean, [-0.5] * 4)
    out = tmp_path / "rewards.png"
    assert plot.main(["--run-dir", str(rewards_run), "--figure", "rewards", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG and out.stat().st_size > 10_000


def test_panel_title_wraps_a_sweep_point_at_whole_parts():
    point = "sparse=0-touch=0.5-vel_to_ball=0.01-vel_ball_to_goal=-0.05-ball_goal_potential=1"
    assert plot.panel_title(point, width=48) == (
        "sparse=0, touch=0.5, vel_to_ball=0.01\nvel_ball_to_goal=-0.05, ball_goal_potential=1"
    )
    assert plot.panel_title("lr=0.001") == "lr=0.001"


@pytest.mark.parametrize(
    "figure, message",
    [
        ("schedule", "is not a PBT run (its members log no pbt/replaced)"),
        ("rewards", "logs no rollout/reward/<term> (its env reports no info['reward_terms'])"),
    ],
)
def test_figure_of_the_wrong_run_is_one_line(tmp_path, capsys, figure, message):
    run = _write(tmp_path / "run", {"seed0": {"train/entropy": [1, 2, 3, 4]}, "seed1": {}})
    argv = ["--run-dir", str(run), "--figure", figure, "--out", str(tmp_path / "x.png")]
    assert plot.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    two = ["--run-dir", str(run), str(run), "--figure", figure, "--out", str(tmp_path / "x.png")]
    assert plot.main(two) == 2
    assert "give one --run-dir, got 2" in capsys.readouterr().err


def test_reward_breakdown_of_a_real_run(selfplay_run):
    # The terms' in-graph sums are checked against a hand count in test_reward_terms; here
    # the figure's reader finds every Soccer term in a trained run's events.
    breakdown = plot.reward_breakdown(selfplay_run.run_dir)
    assert len(breakdown) == 1
    (terms,) = breakdown.values()
    assert set(terms) == set(REWARD_TERMS)
