"""Console-script entry points that join the processes of a run before JAX starts.

``jaxrl-train`` is ``python -m jaxrl.train``: the process flags (or a detected cluster) are
acted on before :mod:`jaxrl.commands.train` is imported, because importing gymnax starts a backend.
"""

from __future__ import annotations

import sys

from jaxrl.run.distributed import join_from_argv


def train() -> int:
    """``jaxrl-train [args]``."""
    join_from_argv(sys.argv[1:])
    from jaxrl.commands.train import main  # noqa: PLC0415 - after the join

    return main()
