"""``python -m jaxrl.check_env``,
the same as ``jaxrl check-env``: check an env against the contract the trainer relies on.

This file is only run; the command is :mod:`jaxrl.commands.check_env`.
"""

import sys

if __name__ != "__main__":
    raise ImportError(
        f"{__name__} is only run (python -m {__name__}): import jaxrl.commands.check_env"
    )

from jaxrl.commands.cli import run_command  # noqa: E402

sys.exit(run_command("check-env", sys.argv[1:], prog_name="python -m jaxrl.check_env"))
