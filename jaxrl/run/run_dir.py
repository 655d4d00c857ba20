"""What a run directory is, read without JAX: a ``--resume DIR`` is checked (and its overrides
validated) before anything imports JAX, so bad input is one line at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jaxrl.config import Config, ConfigError
from jaxrl.config.loader import check_resume_overrides, load_resume_config
from jaxrl.run.errors import RunDirError

MEMBER_FILE = "member.json"  # marks a member extracted by jaxrl.commands.extract: policies only


def extracted_from(run_dir: str | Path) -> dict[str, Any] | None:
    """The ``member.json`` of a run written by :mod:`jaxrl.commands.extract`, or None for any
    other."""
    path = Path(run_dir) / MEMBER_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def check_resumable(run_dir: Path) -> None:
    """Refuse in one line a ``--resume DIR`` that is no run (missing, no config, extracted).

    Raises:
      RunDirError: no such directory, or not a run directory.
      ConfigError: a member extracted from a population run (policies only).
    """
    if not run_dir.is_dir():
        raise RunDirError(f"cannot resume {run_dir}: no such directory")
    if not (run_dir / "config.yaml").is_file():
        raise RunDirError(f"cannot resume {run_dir}: it has no config.yaml (not a run directory)")
    member = extracted_from(run_dir)
    if member is not None:
        raise ConfigError(
            f"cannot resume {run_dir}: it is member {member['member']} extracted from "
            f"{member['source']} (policies only); resume that run instead"
        )


def resume_config(run_dir: Path, overrides: list[str]) -> Config | None:
    """The config ``--resume DIR [overrides]`` trains with (None: the saved one, as it is).

    An override of a key that cannot change on resume is refused first, whatever ``run_dir``.
    """
    check_resume_overrides(overrides)
    check_resumable(run_dir)
    return load_resume_config(run_dir, overrides) if overrides else None
