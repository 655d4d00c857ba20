"""The import graph: no cycles in ``envs/``, each soccer module imports on its own, and the
PPO core of ``jaxrl/`` knows no feature.

The graph is read with ``ast`` from every ``**/*.py`` of a package, function-level imports
included (a lazy import inside a method still closes a cycle, it only hides it until the
call).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (anywhere in its body), from source."""
    files = {_module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    edges = {}
    for name, path in files.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                mods = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:  # relative: resolve against this module's package
                    base = name.split(".")
                    if path.name != "__init__.py":
                        base = base[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join([*base, mod] if mod else base)
                # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one.
                mods = [
                    f"{mod}.{alias.name}" if f"{mod}.{alias.name}" in files else mod
                    for alias in node.names
                ]
            else:
                continue
            targets.update(m for m in mods if m in files and m != name)
        edges[name] = targets
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None (depth-first search)."""
    done, on_path = set(), []

    def visit(node: str) -> list[str] | None:
        if node in on_path:
            return [*on_path[on_path.index(node) :], node]
        if node in done:
            return None
        on_path.append(node)
        for target in sorted(edges[node]):
            cycle = visit(target)
            if cycle:
                return cycle
        on_path.pop()
        done.add(node)
        return None

    for node in sorted(edges):
        cycle = visit(node)
        if cycle:
            return cycle
    return None


def test_cycle_check_finds_a_lazy_import_cycle(tmp_path):
    """The check itself: a cycle closed by an import inside a function is found."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import a\n    return a\n")
    (pkg / "c.py").write_text("from . import a\n")
    edges = import_graph(tmp_path, "pkg")
    assert edges["pkg.c"] == {"pkg.a"}
    assert find_cycle(edges) == ["pkg.a", "pkg.b", "pkg.a"]
    (pkg / "b.py").write_text("def f():\n    return 1\n")
    assert find_cycle(import_graph(tmp_path, "pkg")) is None


def test_envs_import_graph_has_no_cycle():
    edges = import_graph(ROOT, "envs")
    assert "envs.soccer.rule_policy" in edges
    assert find_cycle(edges) is None


def test_envs_never_import_jaxrl():
    """The floors: jaxrl builds on envs, never the other way round."""
    for path in sorted((ROOT / "envs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            assert not any(n == "jaxrl" or n.startswith("jaxrl.") for n in names), path


@pytest.mark.parametrize("module", ["envs.soccer.rule_policy", "envs.soccer.env"])
def test_soccer_module_imports_first_in_a_fresh_interpreter(module):
    """Each module imported first (a cycle shows as an ImportError from a partial module)."""
    result = subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr


# ----------------------------------------------------------------------------- the PPO core

# The PPO core and the match step: they play and learn whatever the features hand them (a
# plan, a pool of opponents, the member's values) and import no feature.
CORE = (
    "jaxrl.core.ppo",
    "jaxrl.core.losses",
    "jaxrl.core.gae",
    "jaxrl.core.rollout",
    "jaxrl.core.match",
    "jaxrl.core.opponents",
    "jaxrl.core.acting",
    "jaxrl.core.networks",
    "jaxrl.core.encoders",
    "jaxrl.core.normalize",
    "jaxrl.core.types",
)
# What the core must not reach: the features, their interface, and the modules that build or
# compose them (the setup imports every feature, the runner and the step the setup).
FEATURES = (
    "jaxrl.run.setup",
    "jaxrl.features",
    "jaxrl.features.curriculum",
    "jaxrl.features.eval_lanes",
    "jaxrl.league",
    "jaxrl.features.pbt",
    "jaxrl.run.runner",
    "jaxrl.run.train_step",
)


def _is_feature(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in FEATURES)


def forbidden_reach(edges: dict[str, set[str]], start: str) -> list[str]:
    """Feature modules ``start`` imports, directly or through any other module."""
    seen, stack, found = {start}, [start], set()
    while stack:
        module = stack.pop()
        for target in edges[module]:
            if _is_feature(target):
                found.add(target)
            elif target not in seen:
                seen.add(target)
                stack.append(target)
    return sorted(found)


def test_core_check_finds_an_added_import(tmp_path):
    """The check itself: a feature import anywhere behind the core is found, through the
    match step too."""
    pkg = tmp_path / "jaxrl"
    for folder in ("league", "core", "features", "run"):
        (pkg / folder).mkdir(parents=True)
    for name in ("__init__", "league/__init__", "league/pool", "core/match", "core/acting"):
        (pkg / f"{name}.py").write_text("")
    (pkg / "core/gae.py").write_text("")
    (pkg / "core/rollout.py").write_text(
        "from jaxrl.core.match import x\nfrom jaxrl.core import acting\n"
    )
    edges = import_graph(tmp_path, "jaxrl")
    assert forbidden_reach(edges, "jaxrl.core.rollout") == []
    (pkg / "core/match.py").write_text("from jaxrl.league import pool\n")
    (pkg / "core/acting.py").write_text("def f():\n    import jaxrl.features.pbt\n")
    (pkg / "features/pbt.py").write_text("")
    (pkg / "core/gae.py").write_text("import jaxrl.run.setup\n")
    (pkg / "run/setup.py").write_text("")
    edges = import_graph(tmp_path, "jaxrl")
    assert forbidden_reach(edges, "jaxrl.core.rollout") == [
        "jaxrl.features.pbt",
        "jaxrl.league.pool",
    ]
    assert forbidden_reach(edges, "jaxrl.core.match") == ["jaxrl.league.pool"]
    assert forbidden_reach(edges, "jaxrl.core.gae") == ["jaxrl.run.setup"]


@pytest.mark.parametrize("module", CORE)
def test_ppo_core_and_match_step_import_no_feature(module):
    """The match step and the PPO core (losses, gae, ppo, rollout, match, opponents, acting,
    networks, ...) import no feature (curriculum, league, pbt, eval lanes), no feature
    interface, and neither the setup nor the step that compose them, directly or behind
    another module."""
    edges = import_graph(ROOT, "jaxrl")
    assert "jaxrl.league.feature" in edges and "jaxrl.run.setup" in edges  # the graph is real
    assert forbidden_reach(edges, module) == []


def test_the_train_step_names_no_feature():
    """``jaxrl/run/train_step.py`` imports no feature module and names none: every feature plugs
    in through :mod:`jaxrl.features`."""
    edges = import_graph(ROOT, "jaxrl")
    named = {"jaxrl.features.curriculum", "jaxrl.features.eval_lanes", "jaxrl.features.pbt"}
    assert not [
        m for m in edges["jaxrl.run.train_step"] if m in named or m.startswith("jaxrl.league")
    ]
    source = (ROOT / "jaxrl" / "run" / "train_step.py").read_text().lower()
    for word in ("curriculum", "selfplay", "exploit", "pbt", "evaluation", "league"):
        assert word not in source, word
