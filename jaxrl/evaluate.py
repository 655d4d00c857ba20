"""``python -m jaxrl.evaluate``,
the same as ``jaxrl evaluate``: measure a checkpointed policy's return.

``jaxrl.evaluate`` is the Python function :func:`jaxrl.api.evaluate`, so this file is only run,
never imported (importing it would put a module where the function is).
"""

import sys

if __name__ != "__main__":
    raise ImportError(
        f"{__name__} is only run (python -m {__name__}): import jaxrl.commands.evaluate"
    )

from jaxrl.commands.cli import run_command  # noqa: E402

sys.exit(run_command("evaluate", sys.argv[1:], prog_name="python -m jaxrl.evaluate"))
