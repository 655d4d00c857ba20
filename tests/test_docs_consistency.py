"""The docs agree with the code: every env Protocol is on the API page, and no command a user
copies names a path of the machine it was run on."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path

from jaxrl.envs import protocols

ROOT = Path(__file__).resolve().parent.parent
# Paths that exist on one machine only: a home or workspace folder, pytest's temporary
# folders, a venv kept in /tmp. Placeholders (path/to/..., runs/...) and /tmp/<file> stay.
MACHINE_PATH = re.compile(
    r"/work/|/tmp/pytest|(?<![\w/])/root(?:/|\b(?!\.py))|/home/\w|/Users/\w|/tmp/\w*venv"
)


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_no_machine_specific_paths_in_the_docs():
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()}"
        for page in _pages()
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if MACHINE_PATH.search(line)
    ]
    assert not found, "machine-specific paths (write path/to/... instead):\n" + "\n".join(found)


def test_the_pattern_catches_what_it_should():
    for line in ("cd /work/venvs/x", "/tmp/pytest-of-root/run", "/root/.cache", "/tmp/sb3venv/"):
        assert MACHINE_PATH.search(line), line
    for line in ("--run-dir /tmp/qs", "path/to/cage-venv/bin/python", "runs/cartpole"):
        assert not MACHINE_PATH.search(line), line


def test_every_env_protocol_is_on_the_api_page():
    page = (ROOT / "docs" / "reference" / "api.md").read_text()
    block = page[page.index("::: envs.protocols") :]
    listed = set(re.findall(r"^\s+- (\w+)$", block, re.MULTILINE))
    defined = {
        name
        for name, value in vars(protocols).items()
        if inspect.isclass(value)
        and value.__module__ == protocols.__name__
        and typing.Protocol in value.__mro__
    }
    assert {"Env", "Renderer", "ActionMaskEnv", "TurnBasedEnv"} <= defined  # the walk works
    assert defined <= listed, f"protocols missing from docs/reference/api.md: {defined - listed}"
