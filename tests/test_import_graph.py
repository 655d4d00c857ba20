"""The import graph of ``jaxrl/`` and ``envs/``: no cycle anywhere, the layers (the folders)
import only themselves and the layers below, ``docs/developer.md``'s floors are these layers,
each soccer module imports on its own, and the PPO core knows no feature.

The graph is read with ``ast`` from every ``**/*.py`` of a package, function-level imports
included (a lazy import inside a method still closes a cycle, it only hides it until the
call). Imports under ``if TYPE_CHECKING:`` never run: they count for the layers (a lower layer
names no type of a higher one) but not for cycles (a config section annotating its argument
as the ``Config`` that holds it is no cycle).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module_name(path: Path, root: Path) -> str:
    """The module a file imports as: ``envs/`` installs as ``jaxrl.envs`` (pyproject.toml)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[:1] == ["envs"]:
        parts.insert(0, "jaxrl")
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """``id`` of every node inside an ``if TYPE_CHECKING:`` block."""
    inside = set()
    for node in ast.walk(tree):
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def import_graph(
    root: Path, package: str, *, typing: bool = True, files: dict[str, Path] | None = None
) -> dict[str, set[str]]:
    """Module -> the modules it imports (anywhere in its body), from source: those of
    ``package``, or of ``files`` (module -> path, several packages) when given. ``typing``:
    count the imports under ``if TYPE_CHECKING:`` too."""
    if files is None:
        files = {_module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    edges = {}
    for name, path in files.items():
        targets = set()
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = set() if typing else _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
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


# ----------------------------------------------------------------------------- the layers


@dataclass(frozen=True)
class Layer:
    """One floor of the import graph: a folder (or, for ``api``, the top-level modules of
    ``jaxrl/``) that imports only itself and the floors before it in :data:`LAYERS`."""

    name: str
    folder: str  # "envs", "jaxrl/config", ...; "jaxrl" for the top-level modules
    holds: str  # what goes there (docs/developer.md's floors table)
    with_previous: bool = False  # on the floor of the layer before it: each may import the other


# The floors, lowest first. docs/developer.md's floors table is rendered from this
# (:func:`floors_table`) and compared with the page.
LAYERS = (
    Layer(
        "envs",
        "envs",
        "environments (gymnax 1.0): the registry, protocols, checker, our envs, "
        "suite adapters, host envs (gymnasium, EnvPool); installed as `jaxrl.envs`, imports "
        "nothing else of `jaxrl`",
    ),
    Layer(
        "config",
        "jaxrl/config",
        "the typed config: one module per section, YAML loading, "
        "validation at load (pure Python first, then the env checks)",
    ),
    Layer(
        "core",
        "jaxrl/core",
        "the PPO core and the match step: networks, acting, rollout, "
        "GAE, losses, update, member values, Elo arithmetic; imports no feature",
    ),
    Layer(
        "features",
        "jaxrl/features",
        "the `Feature` interfaces and the features of one "
        "learner's update: curriculum, evaluation lanes, PBT",
    ),
    Layer(
        "league",
        "jaxrl/league",
        "self-play: opponent groups, the snapshot pool, ratings, exploiters, the population league",
    ),
    Layer(
        "run",
        "jaxrl/run",
        "a run: build (`setup`), initialise (`runner`), compose the "
        "compiled step (`train_step`), checkpoints, logs, summary, playing restored policies",
    ),
    Layer(
        "hostenv",
        "jaxrl/hostenv",
        "the host path: the step source the run driver steps for host envs (actor, learner), "
        "their networks, playing a host run",
        with_previous=True,
    ),
    Layer(
        "commands",
        "jaxrl/commands",
        "the command lines, one module each (`main(argv)`), and `cli` (`jaxrl <command>`)",
    ),
    Layer(
        "api",
        "jaxrl",
        "the Python API (`api`, `jaxrl.train` ...) and the six-line "
        "`python -m jaxrl.<command>` entry files (never imported)",
    ),
)

# Edges the run driver (issue 68, point 1) removes: until it lands they are allowed, and a test
# fails as soon as one is gone so that it leaves this list too.
PENDING: set[tuple[str, str]] = set()


def tree_files(root: Path) -> dict[str, Path]:
    """Module -> path of every ``*.py`` of ``jaxrl/`` and ``envs/`` under ``root``."""
    return {
        _module_name(p, root): p
        for package in ("jaxrl", "envs")
        for p in sorted((root / package).rglob("*.py"))
    }


def layer_of(module: str, layers: tuple[Layer, ...] = LAYERS) -> int:
    """Index in ``layers`` of the folder that holds ``module`` (the deepest folder wins)."""
    path = module.replace(".", "/")
    if path == "jaxrl/envs" or path.startswith("jaxrl/envs/"):  # the envs/ folder
        path = path.removeprefix("jaxrl/")
    best = max(
        (layer.folder.count("/"), i)
        for i, layer in enumerate(layers)
        if path == layer.folder or path.startswith(layer.folder + "/")
    )
    return best[1]


def floor_of(index: int, layers: tuple[Layer, ...] = LAYERS) -> int:
    """The floor of ``layers[index]``: layers marked ``with_previous`` share their
    predecessor's floor (the run driver picks the host path's step source; the host path uses
    the run's checkpoints)."""
    return sum(not layer.with_previous for layer in layers[1 : index + 1])


def upward_arrows(edges: dict[str, set[str]], layers: tuple[Layer, ...] = LAYERS) -> list[str]:
    """``a -> b`` for each import of a module ``b`` on a higher floor than ``a``'s."""
    floor = lambda module: floor_of(layer_of(module, layers), layers)  # noqa: E731
    return sorted(
        f"{a} ({layers[layer_of(a, layers)].name}) -> {b} ({layers[layer_of(b, layers)].name})"
        for a, targets in edges.items()
        for b in targets
        if floor(b) > floor(a) and (a, b) not in PENDING
    )


def without_pending(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    return {a: {b for b in bs if (a, b) not in PENDING} for a, bs in edges.items()}


def test_layer_checks_find_an_injected_cycle_and_upward_arrow(tmp_path):
    """The checks themselves, on a tree of two packages: an upward import (even a lazy one
    or one under ``TYPE_CHECKING``) and a cycle across folders are found."""
    layers = (Layer("low", "envs", ""), Layer("mid", "jaxrl/core", ""), Layer("top", "jaxrl", ""))
    for folder in ("envs", "jaxrl/core"):
        (tmp_path / folder).mkdir(parents=True)
    for name in ("envs/__init__", "jaxrl/__init__", "jaxrl/core/__init__", "jaxrl/api"):
        (tmp_path / f"{name}.py").write_text("")
    (tmp_path / "envs/a.py").write_text("import numpy\n")
    (tmp_path / "jaxrl/core/b.py").write_text("from jaxrl.envs import a\n")
    (tmp_path / "jaxrl/api.py").write_text("from jaxrl.core.b import x\n")
    edges = import_graph(tmp_path, "", files=tree_files(tmp_path))
    assert upward_arrows(edges, layers) == [] and find_cycle(edges) is None
    (tmp_path / "envs/a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import jaxrl.core.b\n"
    )
    edges = import_graph(tmp_path, "", files=tree_files(tmp_path))
    assert upward_arrows(edges, layers) == ["jaxrl.envs.a (low) -> jaxrl.core.b (mid)"]
    assert find_cycle(import_graph(tmp_path, "", files=tree_files(tmp_path), typing=False)) is None
    (tmp_path / "envs/a.py").write_text("def f():\n    from jaxrl import api\n")
    edges = import_graph(tmp_path, "", files=tree_files(tmp_path))
    assert upward_arrows(edges, layers) == ["jaxrl.envs.a (low) -> jaxrl.api (top)"]
    assert find_cycle(edges) == ["jaxrl.api", "jaxrl.core.b", "jaxrl.envs.a", "jaxrl.api"]


def test_no_import_cycle_in_jaxrl_or_envs():
    """No cycle anywhere in the two trees, across packages and through lazy imports."""
    edges = without_pending(import_graph(ROOT, "", files=tree_files(ROOT), typing=False))
    assert "jaxrl.envs.soccer.rule_policy" in edges and "jaxrl.config.root" in edges
    assert find_cycle(edges) is None


def test_every_layer_imports_only_itself_and_the_layers_below():
    """envs < config < core < features < league < run < hostenv < commands < api: no module
    imports one of a higher floor (lazy and ``TYPE_CHECKING`` imports included)."""
    edges = import_graph(ROOT, "", files=tree_files(ROOT))
    assert upward_arrows(edges) == []


def test_every_folder_of_the_trees_is_a_layer():
    """A new folder of ``jaxrl/`` is a layer of its own (or moves into one): it must be named
    in :data:`LAYERS` (subpackages of ``envs/`` are part of the envs)."""
    folders = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "jaxrl").rglob("*.py")}
    assert folders == {layer.folder for layer in LAYERS if layer.folder.startswith("jaxrl")}


def layer_modules(layer: Layer, root: Path = ROOT) -> list[str]:
    """The layer's modules as docs/developer.md lists them: paths below its folder without
    ``.py``, a subpackage as ``name/`` (for ``api``, the top-level files of ``jaxrl/``)."""
    folder = root / layer.folder
    nested = {other.folder for other in LAYERS} - {layer.folder}
    names = set()
    for path in folder.rglob("*.py"):
        rel = path.relative_to(folder)
        if any(
            path.parent.relative_to(root).as_posix().startswith(n)
            for n in nested
            if n.startswith(layer.folder + "/")
        ):
            continue
        names.add(f"{rel.parts[0]}/" if len(rel.parts) > 1 else rel.stem)
    return sorted(names, key=lambda n: (n != "__init__", n.endswith("/"), n))


def floors_table(root: Path = ROOT) -> str:
    """docs/developer.md's floors table, rendered from :data:`LAYERS` and the files."""
    rows = [
        "| floor | folder | modules | may import | what goes there |",
        "| --- | --- | --- | --- | --- |",
    ]
    for i, layer in enumerate(LAYERS):
        below = (
            ", ".join(
                other.name + (" (same floor)" if floor_of(j) == floor_of(i) else "")
                for j, other in enumerate(LAYERS)
                if j != i and floor_of(j) <= floor_of(i)
            )
            or "no module of ours"
        )
        modules = ", ".join(f"`{m}`" for m in layer_modules(layer, root))
        folder = "`jaxrl/*.py`" if layer.name == "api" else f"`{layer.folder}/`"
        rows.append(f"| {layer.name} | {folder} | {modules} | {below} | {layer.holds} |")
    return "\n".join(rows) + "\n"


def test_developer_floors_table_is_the_layers():
    """docs/developer.md's floors table lists every module of ``jaxrl/`` and ``envs/`` in the
    row of its layer, and each layer may import exactly the floors below it."""
    text = (ROOT / "docs/developer.md").read_text()
    start = text.index("| floor | folder |")
    end = text.index("\n\n", start) + 1
    assert text[start:end] == floors_table(), (
        "docs/developer.md's floors table is out of date; replace it with:\n" + floors_table()
    )


def test_developer_guide_names_only_what_exists():
    """Every ``jaxrl.x.y`` / ``jaxrl.envs.x.y`` name and ``jaxrl/...``/``envs/...`` path in
    docs/developer.md exists (a module, or a top-level name of one)."""
    text = (ROOT / "docs/developer.md").read_text()
    files = tree_files(ROOT)
    missing = [
        path
        for path in re.findall(r"`((?:jaxrl|envs)/[\w/]+\.py)", text)
        if not (ROOT / path).is_file()
    ]
    for dotted in set(re.findall(r"\b((?:jaxrl|envs)(?:\.\w+)+)", text)):
        parts = dotted.split(".")
        if parts[0] == "envs":  # the folder's modules import as jaxrl.envs
            parts.insert(0, "jaxrl")
        cut = max(i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in files)
        module, rest = ".".join(parts[:cut]), parts[cut:]
        tree = ast.parse(files[module].read_text())
        names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        names |= {
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        names |= {
            a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names
        }
        if rest and rest[0] not in names and rest[0] != "py":
            missing.append(dotted)
    assert not missing, f"docs/developer.md names what does not exist: {sorted(missing)}"


def test_pending_edges_still_exist():
    """An edge the run driver removes leaves :data:`PENDING` with it."""
    edges = import_graph(ROOT, "", files=tree_files(ROOT))
    gone = [f"{a} -> {b}" for a, b in PENDING if b not in edges.get(a, ())]
    assert not gone, f"remove {gone} from PENDING in tests/test_import_graph.py"


def test_envs_never_import_jaxrl():
    """The floors: jaxrl builds on envs, never the other way round."""
    for path in sorted((ROOT / "envs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                module = node.module or ""
                names = [f"{module}.{a.name}" if module == "jaxrl" else module for a in node.names]
            else:
                continue
            ours = [n for n in names if n == "jaxrl" or n.startswith("jaxrl.")]
            assert all(n == "jaxrl.envs" or n.startswith("jaxrl.envs.") for n in ours), path


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
