"""Play tools on a host-backend run (``env.backend: gymnasium``), and the exit status of every
play command on bad input (2, one line).

One tiny gymnasium CartPole run is trained once (4 updates of 2 envs x 16 steps); evaluate,
render, export and ``jaxrl.load_policy`` play it; tournament, exploit and extract refuse it
in one line naming the backend and what plays it instead.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

import jaxrl  # noqa: E402
from jaxrl.commands.train import main as train_main  # noqa: E402
from jaxrl.config import save_config  # noqa: E402
from jaxrl.run.checkpoint import Checkpointer, CheckpointError, error_line  # noqa: E402
from jaxrl.run.setup import make_setup  # noqa: E402
from jaxrl.run.train_step import init_run  # noqa: E402
from tests.conftest import make_tiny_config  # noqa: E402
from tests.test_hostenv import TINY  # noqa: E402 - the same tiny host run

REPO = Path(__file__).resolve().parents[1]
COMMANDS = ("evaluate", "render", "tournament", "exploit", "extract", "export")


@pytest.fixture(scope="module")
def host_run(tmp_path_factory) -> Path:
    """A trained gymnasium CartPole run: checkpoints at updates 2 and 4."""
    run_dir = tmp_path_factory.mktemp("play_host") / "cartpole"
    config = str(REPO / "configs" / "cartpole_gymnasium.yaml")
    assert train_main(["--config", config, *TINY, "--run-dir", str(run_dir), "--quiet"]) == 0
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["2", "4"]
    return run_dir


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory) -> Path:
    """A JAX CartPole run directory with untrained checkpoints at updates 1 and 2."""
    run_dir = tmp_path_factory.mktemp("play_jax") / "cartpole"
    config = make_tiny_config()
    run_dir.mkdir()
    save_config(config, run_dir / "config.yaml")
    runner = init_run(make_setup(config))
    checkpointer = Checkpointer(run_dir, keep=2)
    for step in (1, 2):
        checkpointer.save(runner, {"env_steps": 0}, step=step)
    checkpointer.close()
    return run_dir


def run(command: str, argv: list[str], capsys) -> tuple[int, str, str]:
    """``python -m jaxrl.<command> argv`` in process: ``(status, stdout, stderr)``."""
    main = importlib.import_module(f"jaxrl.commands.{command}").main
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse
        status = stop.code
    out, err = capsys.readouterr()
    return status, out, err


def refused(status: int, err: str) -> str:
    """The one line of a refusal (exit 2, no traceback)."""
    assert status == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


# ----------------------------------------------------------------------------- host runs


def test_evaluate_plays_the_host_run(host_run, capsys):
    status, out, _ = run(
        "evaluate", ["--run-dir", str(host_run), "--episodes", "3", "--json"], capsys
    )
    assert status == 0
    result = json.loads(out)
    assert result["step"] == 4 and result["episodes"] == 3 and len(result["returns"]) == 3
    assert all(1 <= r <= 500 for r in result["returns"])  # CartPole: +1 a step, 500 at most
    assert result["mean_return"] == pytest.approx(np.mean(result["returns"]))
    again = jaxrl.evaluate(host_run, 3, step=2)
    assert again.step == 2 and again.actions == "sample"


def test_evaluate_refuses_options_a_host_run_has_not(host_run, capsys):
    status, _, err = run("evaluate", ["--run-dir", str(host_run), "--opponent", "rule"], capsys)
    line = refused(status, err)
    assert line.startswith("error: opponent: an env.backend=gymnasium run has no")


def test_render_draws_the_gymnasium_env(host_run, tmp_path, capsys):
    from PIL import Image

    gif = tmp_path / "cartpole.gif"
    argv = ["--run-dir", str(host_run), "--out", str(gif), "--seconds", "0.2", "--fps", "10"]
    status, out, err = run("render", argv, capsys)
    assert status == 0, err
    # CartPole draws at 50 frames a second: 0.2 s is 10 steps, 11 frames with the reset's.
    assert out.strip() == f"wrote 11 frames to {gif}"
    with Image.open(gif) as image:  # Pillow merges equal frames, adding their durations
        durations = []
        for index in range(image.n_frames):
            image.seek(index)
            durations.append(image.info["duration"])
        assert image.size == (600, 400) and sum(durations) == 11 * 100


def test_render_refuses_jax_only_flags(host_run, tmp_path, capsys):
    argv = ["--run-dir", str(host_run), "--out", str(tmp_path / "x.gif"), "--stage", "1"]
    line = refused(*run("render", argv, capsys)[::2])
    assert line.startswith("error: --stage: an env.backend=gymnasium run")
    assert not (tmp_path / "x.gif").exists()


@pytest.mark.parametrize(
    "command, argv, why",
    [
        ("tournament", [], "the tournament plays two-team JAX envs"),
        ("exploit", ["--budget", "64"], "the best response trains against it"),
        ("extract", [], "it has one member, nothing to extract"),
    ],
)
def test_two_team_and_population_tools_refuse_a_host_run(host_run, command, argv, why, capsys):
    status, _, err = run(command, ["--run-dir", str(host_run), *argv], capsys)
    line = refused(status, err)
    assert line.startswith(f"error: --run-dir {host_run} is an env.backend=gymnasium run: {why}")
    assert line.endswith("jaxrl evaluate, jaxrl export, jaxrl render (gymnasium) and "
                         "jaxrl.load_policy play it")  # fmt: skip


def test_load_policy_acts_with_the_host_network(host_run):
    from jaxrl.hostenv.play import restore_host_policy

    policy = jaxrl.load_policy(host_run)
    assert policy.checkpoint_step == 4 and not policy.recurrent
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    actions = jax.jit(policy.act)(policy.params, obs, jax.random.key(0))
    # The mode by hand: the host network's logits for one step of six fresh rows, argmax.
    network = restore_host_policy(host_run, None)[0].network
    _, logits, _ = network.apply(
        policy.params.params, network.initial_hidden(6), jnp.asarray(obs)[None],
        jnp.ones((1, 6), bool),
    )  # fmt: skip
    np.testing.assert_array_equal(np.asarray(actions), np.argmax(np.asarray(logits[0]), -1))
    earlier = jaxrl.load_policy(host_run, step=2)
    assert earlier.checkpoint_step == 2
    assert not all(
        np.array_equal(a, b)
        for a, b in zip(
            jax.tree.leaves(policy.params), jax.tree.leaves(earlier.params), strict=True
        )
    )
    with pytest.raises(ValueError, match="member= must be 0: a host run has one member"):
        jaxrl.load_policy(host_run, member=1)


def test_the_jax_loader_refuses_a_host_run(host_run):
    from jaxrl.run.play import HostRunError, load_policy

    with pytest.raises(HostRunError, match="is an env.backend=gymnasium run: this tool plays JAX"):
        load_policy(host_run)


# ----------------------------------------------------------------------------- exit status


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_run_directory_exits_2(command, tmp_path, capsys):
    missing = tmp_path / "no-such-run"
    extra = {"render": ["--out", "x.gif"], "exploit": ["--budget", "64"]}.get(command, [])
    extra = ["--out", "x.onnx", "--format", "stablehlo"] if command == "export" else extra
    status, _, err = run(command, ["--run-dir", str(missing), *extra], capsys)
    line = refused(status, err)
    assert str(missing) in line and "not a run directory (no config.yaml)" in line


@pytest.mark.parametrize(
    "command, extra",
    [
        ("evaluate", []),
        ("render", ["--out", "x.gif"]),
        ("export", ["--out", "x.shlo", "--format", "stablehlo"]),
    ],
)
@pytest.mark.parametrize("which", ["host", "jax"])
def test_a_step_without_checkpoint_exits_2(command, extra, which, host_run, jax_run, capsys):
    run_dir, saved = (host_run, "[2, 4]") if which == "host" else (jax_run, "[1, 2]")
    argv = ["--run-dir", str(run_dir), "--step", "3", *extra]
    line = refused(*run(command, argv, capsys)[::2])
    assert line.endswith(
        f"no checkpoint at step 3 in {run_dir / 'checkpoints'}; saved steps: {saved}"
    )


@pytest.mark.parametrize(
    "command, argv, message",
    [
        ("evaluate", ["--episodes", "0"], "error: episodes must be >= 1, got 0"),
        ("render", ["--out", "x.gif", "--seconds", "0"], "error: --seconds must be > 0, got 0.0"),
        ("render", ["--out", "x.gif", "--fps", "0"], "error: --fps must be >= 1, got 0"),
        ("export", ["--out", "x.shlo", "--format", "stablehlo", "--member", "1"],
         "error: --member must be 0: a host run has one member, got 1"),
    ],
)  # fmt: skip
def test_bad_flag_values_exit_2(command, argv, message, host_run, capsys):
    status, _, err = run(command, ["--run-dir", str(host_run), *argv], capsys)
    assert refused(status, err) == message


def test_a_jax_run_without_renderer_is_refused(jax_run, tmp_path, capsys):
    argv = ["--run-dir", str(jax_run), "--out", str(tmp_path / "x.gif")]
    assert refused(*run("render", argv, capsys)[::2]) == (
        "error: no renderer for CartPole-v1 runs (an env declares one: "
        "jaxrl.envs.protocols.RenderableEnv)"
    )


def test_error_line_gives_2_for_every_checkpoint_error():
    assert error_line(CheckpointError("no checkpoints in x")) == ("no checkpoints in x", 2)
    assert error_line(RuntimeError("disk on fire")) == ("disk on fire", 1)
