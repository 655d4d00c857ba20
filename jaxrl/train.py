"""``python -m jaxrl.train``,
the same as ``jaxrl train``: train a PPO agent from a YAML config, or resume a run.

``jaxrl.train`` is the Python function :func:`jaxrl.api.train`, so this file is only run,
never imported (importing it would put a module where the function is).
"""

import sys

if __name__ != "__main__":
    raise ImportError(f"{__name__} is only run (python -m {__name__}): import jaxrl.commands.train")

from jaxrl.commands.cli import run_command  # noqa: E402

sys.exit(run_command("train", sys.argv[1:], prog_name="python -m jaxrl.train"))
