"""``jaxrl <command> [args]``: one console script for every command of the project.

    jaxrl train --config configs/cartpole.yaml      # = python -m jaxrl.train ...
    jaxrl evaluate --run-dir runs/cartpole-...      # = python -m jaxrl.evaluate ...
    jaxrl check-env my_pkg.envs:MyEnv               # = python -m jaxrl.check_env ...
    jaxrl --help                                    # the commands
    jaxrl evaluate --help                           # one command's flags

Each subcommand hands the rest of the command line to the ``main(argv)`` of its module
(:data:`COMMANDS`), so the ``python -m`` forms and ``jaxrl <command>`` take the same flags
and exit with the same status. ``train`` first joins the processes of a multi-process run
(:func:`jaxrl.distributed.join_from_argv`), before anything imports JAX, as
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

    module: str  # e.g. "jaxrl.evaluate"
    summary: str  # shown by ``jaxrl --help``


# The subcommands, in the order ``jaxrl --help`` lists them (read by the CLI reference).
COMMANDS: Mapping[str, Command] = MappingProxyType(
    {
        "train": Command("jaxrl.train", "train a PPO agent from a YAML config, or resume a run"),
        "evaluate": Command("jaxrl.evaluate", "measure a checkpointed policy's return"),
        "check-env": Command(
            "jaxrl.check_env", "check an env against the contract the trainer relies on"
        ),
        "tournament": Command(
            "jaxrl.tournament", "round-robin tournament between checkpoints, rated by Elo"
        ),
        "exploit": Command("jaxrl.exploit", "train a best response against a frozen checkpoint"),
        "extract": Command(
            "jaxrl.extract", "write one member of a population run as a run of its own"
        ),
        "export": Command("jaxrl.export", "write a policy as one ONNX or StableHLO file"),
        "render": Command("jaxrl.render", "render an episode of a trained policy to a GIF"),
        "plot": Command("jaxrl.plot", "figures from a run's TensorBoard event files"),
        "bench": Command("bench.throughput", "env, train and inference throughput"),
    }
)


# The subcommand :func:`main` is running (e.g. "evaluate"), for :func:`prog`; None otherwise.
_running: str | None = None


def prog(module: str) -> str:
    """The name a command's usage line shows: ``jaxrl <command>`` while :func:`main` runs it,
    else ``python -m <module>`` (e.g. ``prog("jaxrl.evaluate")``)."""
    command = COMMANDS.get(_running or "")
    if command is not None and command.module == module:
        return f"jaxrl {_running}"
    return f"python -m {module}"


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
        *(f"  {name:<{width}}  {c.summary} ({c.module})" for name, c in COMMANDS.items()),
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
    if name == "train":  # join the other processes first: importing gymnax starts JAX
        from jaxrl.distributed import join_from_argv  # noqa: PLC0415

        join_from_argv(rest)
    module = importlib.import_module(command.module)
    global _running  # noqa: PLW0603 - the command's parser reads it (its usage line's name)
    _running = name
    try:
        return int(module.main(rest) or 0)
    finally:
        _running = None


# python -m jaxrl.cli: run main of the imported module, whose _running prog() reads.
if __name__ == "__main__":
    from jaxrl.cli import main as cli_main  # noqa: PLC0415

    sys.exit(cli_main())
