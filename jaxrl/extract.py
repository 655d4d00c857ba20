"""``python -m jaxrl.extract``,
the same as ``jaxrl extract``: write one member of a population run as a run of its own.

This file is only run; the command is :mod:`jaxrl.commands.extract`.
"""

import sys

if __name__ != "__main__":
    raise ImportError(
        f"{__name__} is only run (python -m {__name__}): import jaxrl.commands.extract"
    )

from jaxrl.commands.cli import run_command  # noqa: E402

sys.exit(run_command("extract", sys.argv[1:], prog_name="python -m jaxrl.extract"))
