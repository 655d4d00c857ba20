"""The errors a training run reports in one line (imports nothing heavy).

The command line maps them to exit statuses (``docs/reference/cli.md``): :class:`RunDirError`
is bad input (2), :class:`TrainingError` a run that cannot go on (1).
"""

from __future__ import annotations


class TrainingError(RuntimeError):
    """Training cannot go on (non-finite updates, a checkpoint that cannot resume here, ...)."""


class RunDirError(TrainingError):
    """Bad input: a run directory that cannot be used as asked (taken, missing, not a run)."""
