"""What the distribution installs: only ``jaxrl`` at the top level of site-packages.

The repository's ``envs/`` and ``bench/`` install as ``jaxrl.envs`` and ``jaxrl.bench``
(``pyproject.toml``'s ``package-dir``), so a user's project with its own ``envs/``, ``bench/``
or ``configs/`` folder neither shadows ours nor is shadowed by it; ``bench/research/`` (the
one-off studies, run from a clone) is not installed. That every command works from a folder
with its own ``envs`` and ``bench`` packages: tests/test_registry.py's import-path case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]


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
