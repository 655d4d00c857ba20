"""``python -m jaxrl.plot``: curves from event files, seeds as mean and spread, stages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from jaxrl import plot
from jaxrl.config import load_config
from jaxrl.train import train

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
