"""What the distribution installs: only ``jaxrl`` at the top level of site-packages.

The repository's ``envs/`` and ``bench/`` install as ``jaxrl.envs`` and ``jaxrl.bench``
(``pyproject.toml``'s ``package-dir``), so a user's project with its own ``envs/``, ``bench/``
or ``configs/`` folder neither shadows ours nor is shadowed by it; ``bench/research/`` (the
one-off studies, run from a clone) is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = ROOT / "configs" / "cartpole.yaml"
CORRIDOR = ROOT / "examples" / "corridor" / "corridor.py"
TINY = (
    "env.num_envs=8", "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=2",
    "network.hidden_sizes=[16]", "train.total_steps=1024", "train.updates_per_chunk=8",
)  # fmt: skip


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def package_folders() -> dict[str, Path]:
    """``{installed package name: folder}`` of every package folder that should install."""
    found = {}
    for folder, name in (("jaxrl", "jaxrl"), ("envs", "jaxrl.envs"), ("bench", "jaxrl.bench")):
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            parts = init.parent.relative_to(ROOT / folder).parts
            if folder == "bench" and parts[:1] == ("research",):
                continue  # one-off studies: run from a clone, never installed
            found[".".join([name, *parts])] = init.parent
    return found


def test_only_jaxrl_is_installed_at_the_top_level():
    config = _setuptools()
    assert {name.split(".")[0] for name in config["packages"]} == {"jaxrl"}
    assert config["package-dir"] == {"jaxrl": "jaxrl", "jaxrl.envs": "envs", "jaxrl.bench": "bench"}


def test_the_package_list_names_every_package_folder():
    """A new subpackage of jaxrl/, envs/ or bench/ must be added to pyproject.toml's list (a
    package missing there would be missing from the wheel, not from a clone's tests)."""
    assert sorted(_setuptools()["packages"]) == sorted(package_folders())


def _user_project(root: Path) -> Path:
    """A user's project folder with its own ``envs/`` (holding their env), ``bench/`` and
    ``configs/`` packages and folders, as a new user's layout often is."""
    for name in ("envs", "bench"):
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text(f"MINE = {name!r}\n")
    shutil.copy(CORRIDOR, root / "envs" / "corridor.py")
    (root / "configs").mkdir()
    shutil.copy(CARTPOLE, root / "configs" / "cartpole.yaml")
    return root


def test_commands_run_from_a_folder_with_its_own_envs_and_bench(tmp_path):
    """``python -m jaxrl.train`` trains from a folder that has its own ``envs/`` and ``bench/``
    packages (the user's env found by its import path ``jaxrl.envs.corridor:Corridor``), then
    ``python -m jaxrl.evaluate`` plays the run, from the same folder."""
    project = _user_project(tmp_path / "project")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run_dir = project / "runs" / "corridor"
    train = subprocess.run(
        [sys.executable, "-m", "jaxrl.train", "--config", "configs/cartpole.yaml", *TINY,
         "env.name=envs.corridor:Corridor", "--run-dir", str(run_dir), "--quiet"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr[-2000:]
    assert (run_dir / "checkpoints").is_dir()
    evaluate = subprocess.run(
        [sys.executable, "-m", "jaxrl.evaluate", "--run-dir", str(run_dir), "--episodes", "2"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert evaluate.returncode == 0, evaluate.stderr[-2000:]
    assert "return" in evaluate.stdout
