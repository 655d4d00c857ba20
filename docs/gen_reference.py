"""Generate the configuration and command-line references of the docs site.

``python docs/gen_reference.py`` writes ``docs/reference/config.md`` from the typed config
dataclasses (every key of :class:`jaxrl.config.Config` as its dotted path, with its type,
default and the one-line comment its field carries in ``jaxrl/config/*.py``) and
``docs/reference/cli.md`` from the argparse parsers of the commands in :data:`CLI_MODULES`.
``python docs/gen_reference.py --check`` exits 1 when a committed page differs from a fresh
generation. ``tests/test_docs.py`` runs the same checks, so a key or flag added without its
comment or help, or without regenerating, fails the tests.

A field's meaning is its trailing ``# ...`` comment or, for a long one, the comment lines
directly above it (joined). A nested section (``env: EnvConfig``) takes its class docstring.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import io
import sys
import textwrap
import tokenize
import typing
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
CONFIG_PAGE = ROOT / "docs" / "reference" / "config.md"
CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"

# Every module with a ``build_parser()``; tests/test_docs.py fails when one is missing here.
CLI_MODULES = (
    "jaxrl.commands.train",
    "jaxrl.commands.evaluate",
    "jaxrl.commands.check_env",
    "jaxrl.commands.tournament",
    "jaxrl.commands.exploit",
    "jaxrl.commands.extract",
    "jaxrl.commands.export",
    "jaxrl.commands.render",
    "jaxrl.commands.plot",
    "jaxrl.bench.throughput",
    "jaxrl.bench.league_population",
    "jaxrl.bench.random_policy",
)
# Installed console scripts (pyproject.toml [project.scripts]) and the module each runs.
CONSOLE_SCRIPTS = {
    "jaxrl-train": "jaxrl.commands.train",
    "jaxrl-evaluate": "jaxrl.commands.evaluate",
    "jaxrl-tournament": "jaxrl.commands.tournament",
}


class Key(NamedTuple):
    """One row of the configuration reference."""

    path: str  # dotted key, e.g. ppo.lr; list items as stages[].name, mappings as <key>
    type: str  # the annotation as written
    default: str  # the default, as YAML would show it
    meaning: str  # the field's comment ("" when it has none: a test fails on that)


class Flag(NamedTuple):
    """One row of the command-line reference."""

    command: str  # e.g. python -m jaxrl.train
    flags: str  # e.g. --run-dir DIR
    default: str  # "" when there is none or it is not shown
    help: str  # the argparse help ("" when missing: a test fails on that)


# ---- config ------------------------------------------------------------------------------


@cache
def _comments(path: str) -> tuple[dict[int, str], dict[int, str]]:
    """Per line of a source file: its trailing comment, and its comment if the line is one."""
    source = Path(path).read_text()
    trailing: dict[int, str] = {}
    whole: dict[int, str] = {}
    last_code_line = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            if tok.start[0] == last_code_line:
                trailing[tok.start[0]] = text
            else:
                whole[tok.start[0]] = text
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            last_code_line = tok.end[0]
    return trailing, whole


@cache
def _field_lines(cls: type) -> dict[str, tuple[int, int, str]]:
    """Field name -> (first line, last line, annotation text) in the class's source file."""
    path = inspect.getsourcefile(cls)
    tree = ast.parse(Path(path).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return {
                stmt.target.id: (stmt.lineno, stmt.end_lineno, ast.unparse(stmt.annotation))
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            }
    raise LookupError(f"class {cls.__name__} not found in {path}")


def field_meaning(cls: type, name: str) -> str:
    """The comment on field ``name`` of dataclass ``cls``: trailing, or the block above it."""
    path = inspect.getsourcefile(cls)
    trailing, whole = _comments(path)
    first, last, _ = _field_lines(cls)[name]
    for line in range(first, last + 1):
        if line in trailing:
            return trailing[line]
    above = []
    line = first - 1
    while line in whole:
        above.append(whole[line])
        line -= 1
    return " ".join(reversed(above))


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _show(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "(required)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"' if value == "" else value
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _nested(annotation: Any) -> tuple[str, type] | None:
    """A dataclass this field holds: ("", C), a tuple of them ("[]", C), a mapping ("<key>", C)."""
    if dataclasses.is_dataclass(annotation):
        return "", annotation
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple and args and dataclasses.is_dataclass(args[0]):
        return "[]", args[0]
    if origin is dict and len(args) == 2 and dataclasses.is_dataclass(args[1]):
        return ".<key>", args[1]
    return None


def config_keys(cls: type | None = None, prefix: str = "") -> Iterator[Key]:
    """Every key of ``cls`` (default: the root :class:`Config`), depth first, in field order."""
    if cls is None:
        from jaxrl.config import Config  # noqa: PLC0415 - the generator imports on demand

        cls = Config
    hints = typing.get_type_hints(cls)
    lines = _field_lines(cls)
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        nested = _nested(hints[f.name])
        annotation = lines[f.name][2]
        if nested is not None and nested[0] == "":
            doc = inspect.getdoc(nested[1]) or ""
            yield Key(path, annotation, "", doc.splitlines()[0] if doc else "")
            yield from config_keys(nested[1], path + ".")
            continue
        yield Key(path, annotation, _show(_default(f)), field_meaning(cls, f.name))
        if nested is not None:
            yield from config_keys(nested[1], path + nested[0] + ".")


def _cell(text: str) -> str:
    """Text for a table cell inside backticks."""
    return text.replace("|", "\\|").replace("\n", " ")


def _prose(text: str) -> str:
    """Text for a table cell outside backticks (``<name>`` is not an HTML tag)."""
    return _cell(text).replace("<", "&lt;").replace(">", "&gt;")


def config_page() -> str:
    """The Markdown of ``docs/reference/config.md``."""
    rows = [
        f"| `{k.path}` | `{_cell(k.type)}` | `{_cell(k.default)}` | {_prose(k.meaning)} |"
        if k.default
        else f"| **`{k.path}`** | `{_cell(k.type)}` | | **{_prose(k.meaning)}** |"
        for k in config_keys()
    ]
    return "\n".join(
        [
            "# Configuration reference",
            "",
            "<!-- Generated by `python docs/gen_reference.py` from jaxrl/config/*.py; do not edit."
            " -->",
            "",
            "Every key of a run config, as its dotted path (what an override names:",
            "`python -m jaxrl.train --config configs/cartpole.yaml ppo.lr=1e-3`), with its type,",
            "its default and the comment its field carries in `jaxrl/config/`. `[]` marks the",
            "items of a list (`curriculum.stages[].threshold`), `<key>` the entries of a mapping",
            "(`pbt.hyperparameters.<key>.min`). Unknown keys, wrong types and impossible values",
            "are refused at load with one line naming the key. What each shipped file in",
            "`configs/` is for: [Config files](configs.md).",
            "",
            "| key | type | default | meaning |",
            "|---|---|---|---|",
            *rows,
            "",
        ]
    )


# ---- command line --------------------------------------------------------------------------


def entry(module_name: str) -> str:
    """What ``python -m`` runs for a command module: ``jaxrl.train`` for ``jaxrl.commands.train``
    (the entry files of ``jaxrl/``), the module itself otherwise."""
    package, _, name = module_name.rpartition(".")
    return f"jaxrl.{name}" if package == "jaxrl.commands" else module_name


def parser_of(module_name: str) -> argparse.ArgumentParser:
    """The parser of a command: its module's ``build_parser()``."""
    return importlib.import_module(module_name).build_parser()


def _flag_name(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar or action.dest
    name = ", ".join(action.option_strings)
    if action.nargs == 0:
        return name
    metavar = action.metavar or action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    return f"{name} {metavar}" + (" ..." if action.nargs in ("+", "*") else "")


def parser_flags(command: str, parser: argparse.ArgumentParser) -> Iterator[Flag]:
    """Every argument of ``parser`` (and of its subcommands, as ``command sub``)."""
    for action in parser._actions:  # argparse has no public list of a parser's actions
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield Flag(command, name, "", helps.get(name, sub.description or ""))
                yield from parser_flags(f"{command} {name}", sub)
            continue
        default = action.default
        hidden = default is None or default is argparse.SUPPRESS or action.nargs == 0
        shown = "" if hidden or default == [] else _show(default)
        text = (action.help or "").replace("%(default)s", str(default))
        yield Flag(command, _flag_name(action), shown, text)


def cli_flags() -> Iterator[Flag]:
    """Every flag of every command in :data:`CLI_MODULES`."""
    for module_name in CLI_MODULES:
        yield from parser_flags(f"python -m {entry(module_name)}", parser_of(module_name))


def cli_page() -> str:
    """The Markdown of ``docs/reference/cli.md``."""
    scripts = {module: script for script, module in CONSOLE_SCRIPTS.items()}
    lines = [
        "# Command-line reference",
        "",
        "<!-- Generated by `python docs/gen_reference.py` from the argparse parsers; do not edit."
        " -->",
        "",
        "Every command's flags, from its parser (`--help` prints the same). Bad input ends",
        "with one line naming the problem and exit status 2.",
        "",
    ]
    from jaxrl.commands.cli import COMMANDS  # noqa: PLC0415 - the docs tool imports the project lazily

    subcommands = {command.module: name for name, command in COMMANDS.items()}
    lines += [
        "## `jaxrl <command>`",
        "",
        "The installed `jaxrl` command runs each command below as a subcommand, with the same",
        "flags and exit status (`jaxrl --help` lists them):",
        "",
        "| command | runs | what it does |",
        "|---|---|---|",
        *(
            f"| `jaxrl {name}` | `python -m {c.entry}` | {_prose(c.summary)} |"
            for name, c in COMMANDS.items()
        ),
        "",
    ]
    for module_name in CLI_MODULES:
        parser = parser_of(module_name)
        lines += [f"## `python -m {entry(module_name)}`", ""]
        installed = [f"`jaxrl {subcommands[module_name]}`"] if module_name in subcommands else []
        if module_name in scripts:
            installed.append(f"`{scripts[module_name]}`")
        if installed:
            lines += [f"Installed as {' and '.join(installed)}.", ""]
        if parser.description:
            lines += [textwrap.dedent(parser.description).strip(), ""]
        lines += ["| flag | default | meaning |", "|---|---|---|"]
        base = f"python -m {entry(module_name)}"
        for flag in parser_flags(base, parser):
            default = f"`{_cell(flag.default)}`" if flag.default else ""
            name = f"{flag.command.removeprefix(base)} {flag.flags}".strip()  # sub --flag
            lines.append(f"| `{_cell(name)}` | {default} | {_prose(flag.help)} |")
        lines.append("")
    return "\n".join(lines)


# ---- entry point ---------------------------------------------------------------------------


def pages() -> dict[Path, str]:
    """Each generated page and its fresh text."""
    return {CONFIG_PAGE: config_page(), CLI_PAGE: cli_page()}


def main(argv: list[str] | None = None) -> int:
    """Write the pages, or with ``--check`` report the ones that differ (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a committed page is out of date"
    )
    args = parser.parse_args(argv)
    stale = []
    for path, text in pages().items():
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(path.relative_to(ROOT))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print(
            f"out of date: {', '.join(map(str, stale))}; run python docs/gen_reference.py",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
