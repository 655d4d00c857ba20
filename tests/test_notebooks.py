"""Every notebook in ``notebooks/`` runs top to bottom in smoke mode (``JAXRL_SMOKE=1``).

Committed notebooks carry no outputs: CI regenerates them by executing each notebook here
(nbclient, the executor behind ``jupyter nbconvert --execute``), and a failing cell fails
the test with the cell's error. Each run must also write its figures (PNG plots, the soccer
GIF) as non-empty images and show each one inline.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import LEAGUE_GROUP, TINY_CARTPOLE, tiny_selfplay

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
# The soccer notebook's smoke run is the tests' tiny league: it runs on the league's xdist
# worker (tests/conftest.py), where that program and its tournament are compiled once.
LEAGUE = pytest.mark.xdist_group(LEAGUE_GROUP)
RUNS = [pytest.param(p, id=p.stem, marks=[LEAGUE] * (p.stem == "soccer_league")) for p in NOTEBOOKS]
# What each notebook writes next to itself, and shows inline, by file name.
FIGURES = {
    "custom_env": ("corridor.png",),
    "quickstart": ("quickstart_curve.png", "soccer.gif"),
    "soccer_league": ("league_elo.png", "league_curves.png"),
}
WRITTEN = {"soccer_league": ("league_elo.json",)}  # written, not shown
MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".gif": b"GIF8"}
MIME = {".png": "image/png", ".gif": "image/gif"}


def test_the_three_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == [
        "custom_env.ipynb",
        "quickstart.ipynb",
        "soccer_league.ipynb",
    ]
    assert sorted(FIGURES) == [p.stem for p in NOTEBOOKS]


def _displayed(book, mime: str) -> int:
    """How many ``mime`` displays the executed notebook's outputs carry."""
    return sum(
        mime in output.get("data", {})
        for cell in book.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    book = nbformat.read(path, as_version=4)
    stale = [i for i, c in enumerate(book.cells) if c.cell_type == "code" and c.outputs]
    assert not stale, f"{path.name}: cells {stale} carry outputs; clear them before committing"


@pytest.mark.parametrize("path", RUNS)
def test_runs_in_smoke_mode(path, tmp_path, monkeypatch):
    monkeypatch.setenv("JAXRL_SMOKE", "1")
    # Run in a scratch notebooks/ directory, so runs and images stay out of the tree; the
    # notebook finds the configs in its parent directory, here a link to the repository's.
    book = nbformat.read(path, as_version=4)
    workdir = tmp_path / "notebooks"
    workdir.mkdir()
    (tmp_path / "configs").symlink_to(path.parents[1] / "configs")
    client = NotebookClient(
        book,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    book = client.execute()
    # Each figure is written, is an image of its kind, and is shown inline.
    for name in FIGURES[path.stem] + WRITTEN.get(path.stem, ()):
        out = workdir / name
        assert out.is_file() and out.stat().st_size > 0, f"{path.name} did not write {name}"
        if out.suffix in MAGIC:
            assert out.read_bytes().startswith(MAGIC[out.suffix]), f"{name} is not a {out.suffix}"
    for suffix, mime in MIME.items():
        shown = sum(name.endswith(suffix) for name in FIGURES[path.stem])
        assert _displayed(book, mime) == shown, f"{path.name}: {mime} displays"


def _smoke_branch(stem: str) -> list[ast.stmt]:
    """The statements under ``if SMOKE:`` in notebook ``stem``'s code cells."""
    book = nbformat.read(NOTEBOOKS[[p.stem for p in NOTEBOOKS].index(stem)], as_version=4)
    found = []
    for cell in book.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "SMOKE":
                found += node.body
    return found


def test_smoke_runs_are_the_tests_tiny_runs():
    # The smoke runs train the tests' tiny programs, so CI compiles each once (the session's
    # compilation cache); a notebook that drifts from them would compile its own.
    quick = ast.unparse(_smoke_branch("quickstart")[0])
    assert all(f"'{o}'" in quick for o in TINY_CARTPOLE if "progress_bar" not in o), quick
    (league,) = [
        n.value.args[0]
        for n in _smoke_branch("soccer_league")
        if isinstance(n, ast.Assign) and ast.unparse(n.value.func) == "config_from_dict"
    ]
    data = eval(compile(ast.Expression(league), "soccer_league", "eval"), {"__builtins__": {}})
    assert data == tiny_selfplay(selfplay__snapshot_every=4)
