"""``jaxrl <command> [args]``: one console script for every command of the project.

    jaxrl train --config configs/cartpole.yaml      # = python -m jaxrl.train ...
    jaxrl evaluate --run-dir runs/cartpole-...      # = python -m jaxrl.evaluate ...
    jaxrl check-env my_pkg.envs:MyEnv               # = python -m jaxrl.check_env ...
    jaxrl --help                                    # the commands
    jaxrl evaluate --help                           # one command's flags

Each subcommand hands the rest of the command line to the ``main(argv)`` of its module
(:data:`COMMANDS`), so the ``python -m`` forms and ``jaxrl <command>`` take the same flags
and exit with the same status. ``train`` first joins the processes of a multi-process run
(:func:`jaxrl.run.distributed.join_from_argv`), before anything imports JAX, as
``python -m jaxrl.train`` does. Nothing heavy is imported until a command is chosen.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Command:
    """One subcommand: the module whose ``main(argv) -> int`` runs it, and a one-line summary."""

    module: str  # e.g. "jaxrl.commands.evaluate"
    summary: str  # shown by ``jaxrl --help``

    @property
    def entry(self) -> str:
        """The module ``python -m`` runs: ``jaxrl.evaluate`` for ``jaxrl.commands.evaluate``."""
        package, _, name = self.module.rpartition(".")
        return f"jaxrl.{name}" if package == "jaxrl.commands" else self.module


# The subcommands, in the order ``jaxrl --help`` lists them (read by the CLI reference).
COMMANDS: Mapping[str, Command] = MappingProxyType(
    {
        "train": Command(
            "jaxrl.commands.train", "train a PPO agent from a YAML config, or resume a run"
        ),
        "evaluate": Command("jaxrl.commands.evaluate", "measure a checkpointed policy's return"),
        "check-env": Command(
            "jaxrl.commands.check_env", "check an env against the contract the trainer relies on"
        ),
        "tournament": Command(
            "jaxrl.commands.tournament", "round-robin tournament between checkpoints, rated by Elo"
        ),
        "exploit": Command(
            "jaxrl.commands.exploit", "train a best response against a frozen checkpoint"
        ),
        "extract": Command(
            "jaxrl.commands.extract", "write one member of a population run as a run of its own"
        ),
        "export": Command("jaxrl.commands.export", "write a policy as one ONNX or StableHLO file"),
        "render": Command(
            "jaxrl.commands.render", "render an episode of a trained policy to a GIF"
        ),
        "plot": Command("jaxrl.commands.plot", "figures from a run's TensorBoard event files"),
        "bench": Command("jaxrl.bench.throughput", "env, train and inference throughput"),
    }
)


# The name the running command's usage line shows ("jaxrl evaluate", "python -m jaxrl.evaluate"),
# set by :func:`run_command`, for :func:`prog`; None when a command's main is called directly.
_prog_name: str | None = None


def prog(module: str) -> str:
    """The name a command's usage line shows: what :func:`run_command` was started as (``jaxrl
    evaluate`` or ``python -m jaxrl.evaluate``), else ``python -m jaxrl.<command>`` (e.g.
    ``prog("jaxrl.commands.evaluate")``)."""
    if _prog_name:
        return _prog_name
    package, _, name = module.rpartition(".")
    return f"python -m jaxrl.{name}" if package == "jaxrl.commands" else f"python -m {module}"


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` that ends a flag's help with ``(default: ...)`` when its default says
    something (not None, False or an empty list) and the help does not give it already."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        quiet = default is None or default is False or default is argparse.SUPPRESS
        if quiet or default == [] or "%(default)" in text or not action.option_strings:
            return action.help
        return f"{text} (default: %(default)s)"


def usage() -> str:
    """The text of ``jaxrl --help``."""
    width = max(map(len, COMMANDS))
    lines = [
        "usage: jaxrl <command> [args ...]",
        "",
        "commands (each also runs as python -m <module>):",
        *(f"  {name:<{width}}  {c.summary} ({c.entry})" for name, c in COMMANDS.items()),
        "",
        "jaxrl <command> --help shows the flags of one command.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``jaxrl`` console script; returns the command's exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    command = COMMANDS.get(name)
    if command is None:
        import difflib  # noqa: PLC0415 - only on a typo

        close = difflib.get_close_matches(name, list(COMMANDS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        print(
            f"jaxrl: unknown command {name!r}{hint}; one of {', '.join(COMMANDS)}",
            file=sys.stderr,
        )
        return 2
    return run_command(name, rest, prog_name=f"jaxrl {name}")


def run_command(name: str, argv: Sequence[str], prog_name: str) -> int:
    """Run the command ``name`` (a key of :data:`COMMANDS`) on ``argv``; its exit status.

    ``train`` first joins the processes of a multi-process run, before anything imports JAX.
    """
    command = COMMANDS[name]
    if name == "train":  # join the other processes first: importing gymnax starts JAX
        from jaxrl.run.distributed import join_from_argv  # noqa: PLC0415

        join_from_argv(list(argv))
    module = importlib.import_module(command.module)
    global _prog_name  # noqa: PLW0603 - the command's parser reads it (its usage line's name)
    _prog_name = prog_name
    try:
        return int(module.main(list(argv)) or 0)
    finally:
        _prog_name = None
