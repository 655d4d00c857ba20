"""``python -m jaxrl.tournament``,
the same as ``jaxrl tournament``: a round-robin tournament between checkpoints, rated by Elo.

This file is only run; the command is :mod:`jaxrl.commands.tournament`.
"""

import sys

if __name__ != "__main__":
    raise ImportError(
        f"{__name__} is only run (python -m {__name__}): import jaxrl.commands.tournament"
    )

from jaxrl.commands.cli import run_command  # noqa: E402

sys.exit(run_command("tournament", sys.argv[1:], prog_name="python -m jaxrl.tournament"))
