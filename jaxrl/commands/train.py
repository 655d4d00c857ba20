"""Training CLI: parse flags, load and validate the config, run the driver, map errors to exit
statuses.

    python -m jaxrl.train --config configs/cartpole.yaml [section.key=value ...] [--run-dir DIR]
    python -m jaxrl.train --resume DIR [train.total_steps=N ...]

``--resume DIR`` continues from the newest intact checkpoint and may change only the keys in
``jaxrl.config.loader.RESUMABLE_KEYS`` (train further with ``train.total_steps=N``); see
``docs/guide/checkpoints.md``. The loop, checkpoints, logging and signals are
:mod:`jaxrl.run.driver`'s (SIGINT or SIGTERM: the step in flight finishes and is saved, exit
``128 + signal``; a second one aborts).

Exit statuses: 0 done; 1 training failed (non-finite updates, an unreadable checkpoint); 2 bad
input (a config error, a run directory that is taken or is no run); ``128 + signal`` stopped
by a signal. Nothing heavy is imported until the config is valid: a typo in a flag or a key is
reported before JAX starts.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from jaxrl.commands.cli import HelpFormatter, prog
from jaxrl.run.distributed import DistributedError, add_process_flags, cluster_from_flags
from jaxrl.run.errors import RunDirError, TrainingError
from jaxrl.run.signals import TrainingInterrupted

__all__ = ["build_parser", "interrupted_exit", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``python -m jaxrl.train``."""
    parser = argparse.ArgumentParser(
        prog=prog("jaxrl.commands.train"),
        description="Train a PPO agent with one compiled JAX train step.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--config", help="YAML config file (see configs/)")
    parser.add_argument(
        "overrides", nargs="*", metavar="section.key=value", help="config overrides"
    )
    parser.add_argument("--run-dir", help="output directory (default runs/<config>-<time>)")
    parser.add_argument("--resume", metavar="DIR", help="continue the run in DIR")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing run in --run-dir"
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no summary or progress bar; the done: line stays"
    )
    add_process_flags(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status (``128 + signal`` when interrupted)."""
    from jaxrl.config import ConfigError  # noqa: PLC0415

    args = build_parser().parse_intermixed_args(argv)  # overrides before or after flags
    try:
        return _run(args)
    except (ConfigError, DistributedError) as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    except RunDirError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except TrainingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as stop:
        return interrupted_exit(stop)


def _run(args: argparse.Namespace) -> int:
    """Validate the arguments and the config, then train (the driver imports JAX)."""
    from jaxrl.config import ConfigError, load_config  # noqa: PLC0415
    from jaxrl.config.loader import RESUMABLE_KEYS  # noqa: PLC0415
    from jaxrl.run.distributed import join  # noqa: PLC0415

    join(cluster_from_flags(args.coordinator, args.num_processes, args.process_id))
    if args.resume:
        if args.config or args.run_dir:
            raise ConfigError(
                "--resume DIR continues a run with its saved config.yaml; it takes no "
                "--config or --run-dir (overrides only of " + ", ".join(RESUMABLE_KEYS) + ")"
            )
        from jaxrl.run.run_dir import resume_config  # noqa: PLC0415 - no JAX

        config = resume_config(Path(args.resume), args.overrides)
    else:
        if not args.config and not args.overrides:
            raise ConfigError("give --config FILE (see configs/) or --resume DIR")
        config = load_config(args.config, args.overrides)
    from jaxrl.run import driver  # noqa: PLC0415 - imports JAX: only for a valid config
    from jaxrl.run.checkpoint import CheckpointError  # noqa: PLC0415

    try:
        if args.resume:
            driver.train(config, Path(args.resume), resume=True, quiet=args.quiet)
        else:
            driver.train(
                config, args.run_dir, overwrite=args.overwrite, config_path=args.config,
                quiet=args.quiet,
            )  # fmt: skip
    except CheckpointError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


def interrupted_exit(stop: KeyboardInterrupt) -> int:
    """Report an interrupted run; its exit status (``128 + signal``) for a command line."""
    from jaxrl.run.signals import worker_busy  # noqa: PLC0415

    if not isinstance(stop, TrainingInterrupted):  # before the driver took over the signals
        print("interrupted before training started: nothing saved", file=sys.stderr)
        return 130
    print(stop.message, file=sys.stderr, flush=True)
    if worker_busy():  # an abandoned compile or step would hold up the interpreter's exit
        sys.stdout.flush()
        os._exit(128 + stop.signum)
    return 128 + stop.signum
