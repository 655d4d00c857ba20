"""The ``jaxrl`` console script (jaxrl.commands.cli): subcommands run each module's main."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from jaxrl.commands import cli

REPO = Path(__file__).resolve().parent.parent


def test_console_script_is_declared():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["jaxrl"] == "jaxrl.commands.cli:main"


def test_every_command_has_a_main():
    assert list(cli.COMMANDS) == [
        "train", "evaluate", "check-env", "tournament", "exploit", "extract", "export", "render",
        "plot", "bench",
    ]  # fmt: skip
    for command in cli.COMMANDS.values():
        assert callable(importlib.import_module(command.module).main)


def test_help_lists_the_commands_in_a_fresh_process():
    done = subprocess.run(
        [sys.executable, "-m", "jaxrl", "--help"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0
    for name, command in cli.COMMANDS.items():
        assert f"  {name} " in done.stdout and f"({command.entry})" in done.stdout


def test_no_command_and_unknown_command_exit_2(capsys):
    assert cli.main([]) == 2
    assert "usage: jaxrl <command>" in capsys.readouterr().err
    assert cli.main(["evalute"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxrl: unknown command 'evalute' (did you mean evaluate?)")
    assert "\n" not in err


def test_subcommand_passes_its_arguments_and_exit_status(capsys):
    """``jaxrl evaluate`` is ``python -m jaxrl.evaluate``: same flags, same exit status."""
    assert cli.main(["evaluate", "--run-dir", str(REPO / "no-such-run")]) == 2
    assert "no-such-run is not a run directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        cli.main(["plot", "--help"])
    assert stop.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_train_subcommand_trains(tmp_path, capsys):
    """``jaxrl train`` (it joins processes first: one process here) runs a tiny config."""
    overrides = [
        "env.num_envs=4", "ppo.num_steps=8", "ppo.num_minibatches=1", "ppo.update_epochs=1",
        "network.hidden_sizes=[8]", "train.total_steps=32", "train.progress_bar=false",
    ]  # fmt: skip
    run_dir = tmp_path / "run"
    assert cli.main(["train", *overrides, "--run-dir", str(run_dir), "--quiet"]) == 0
    assert (run_dir / "config.yaml").is_file() and (run_dir / "checkpoints").is_dir()


def test_help_names_the_form_it_ran_as_and_shows_defaults(capsys):
    """``jaxrl plot --help`` says ``jaxrl plot``; flags with a default worth showing show it."""
    with pytest.raises(SystemExit):
        cli.main(["plot", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: jaxrl plot ")
    assert "PNG path (default: curves.png)" in out
    assert "(default: None)" not in out and "(default: False)" not in out
    from jaxrl.commands.plot import build_parser  # noqa: PLC0415

    assert build_parser().format_usage().startswith("usage: python -m jaxrl.plot ")
