"""No function in ``jaxrl/``, ``envs/`` or ``bench/`` runs past 60 lines, but for the named
exceptions (``docs/developer.md`` says why each is one): a longer function is usually several
ideas."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 60
PACKAGES = ("jaxrl", "envs", "bench")

# "path:function": the physics and rules that one function states in order, where a split
# would scatter one step's update over several places (docs/developer.md).
EXCEPTIONS = {
    "envs/cyber/env.py:apply_red",  # CAGE-2's Red action rules, one case after another
    "envs/grid/rules.py:resolve",  # MettaGrid's turn order, resolved in one pass
    "envs/soccer/physics.py:drive",  # one integration step of the tyre and boost model
    "envs/soccer/physics.py:resolve_walls",  # the walls of a quadrant, Gauss-Seidel in order
}


def long_functions(root: Path, limit: int = LIMIT) -> dict[str, int]:
    """``{"path:function": lines}`` of every function longer than ``limit`` lines (its
    decorators excluded, its docstring included) under ``jaxrl/``, ``envs/`` and ``bench/``
    (``bench/research/`` included)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > limit:
                        found[f"{path.relative_to(root).as_posix()}:{node.name}"] = lines
    return found


def test_the_check_counts_lines(tmp_path):
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT))
    (tmp_path / "jaxrl" / "a.py").write_text(f"def long():\n{body}\n\ndef short():\n    pass\n")
    assert long_functions(tmp_path) == {"jaxrl/a.py:long": LIMIT + 1}


def test_the_check_covers_bench_and_its_research_folder(tmp_path):
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "bench" / "research").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT - 1))  # LIMIT lines with the def
    (tmp_path / "bench" / "a.py").write_text(f"def at_limit():\n{body}")
    (tmp_path / "bench" / "research" / "b.py").write_text(f"def over():\n{body}    x = 0\n")
    assert long_functions(tmp_path) == {"bench/research/b.py:over": LIMIT + 1}


def test_only_the_named_exceptions_run_past_60_lines():
    assert sorted(set(long_functions(ROOT)) - EXCEPTIONS) == []
