"""``python -m jaxrl.plot``,
the same as ``jaxrl plot``: figures from a run's TensorBoard event files.

This file is only run; the command is :mod:`jaxrl.commands.plot`.
"""

import sys

if __name__ != "__main__":
    raise ImportError(f"{__name__} is only run (python -m {__name__}): import jaxrl.commands.plot")

from jaxrl.commands.cli import run_command  # noqa: E402

sys.exit(run_command("plot", sys.argv[1:], prog_name="python -m jaxrl.plot"))
