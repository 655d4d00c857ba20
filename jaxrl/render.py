"""``python -m jaxrl.render``,
the same as ``jaxrl render``: render an episode of a trained policy to a GIF.

This file is only run; the command is :mod:`jaxrl.commands.render`.
"""

import sys

if __name__ != "__main__":
    raise ImportError(
        f"{__name__} is only run (python -m {__name__}): import jaxrl.commands.render"
    )

from jaxrl.commands.cli import run_command  # noqa: E402

sys.exit(run_command("render", sys.argv[1:], prog_name="python -m jaxrl.render"))
