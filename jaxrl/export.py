"""``python -m jaxrl.export``,
the same as ``jaxrl export``: write a policy as one ONNX or StableHLO file.

``jaxrl.export`` is the Python function :func:`jaxrl.api.export`, so this file is only run,
never imported (importing it would put a module where the function is).
"""

import sys

if __name__ != "__main__":
    raise ImportError(
        f"{__name__} is only run (python -m {__name__}): import jaxrl.commands.export"
    )

from jaxrl.commands.cli import run_command  # noqa: E402

sys.exit(run_command("export", sys.argv[1:], prog_name="python -m jaxrl.export"))
