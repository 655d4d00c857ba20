"""Check an env against the contract the trainer relies on, before training on it.

    jaxrl check-env NAME [--make-kwargs JSON | key=value ...] [--env-kwargs JSON | key=value ...]
    python -m jaxrl.check_env my_pkg.envs:MyEnv

``NAME`` is anything ``env.name`` accepts (a gymnax name, one of ours, ``<suite>:<env id>``,
an import path ``module:Attr``, an entry point). The checks are :mod:`jaxrl.envs.check`'s: the
factory builds, ``reset`` and ``step`` trace under ``jit`` and ``vmap`` and run once, the step
returns gymnax 1.x's six values of the right types, observations match the observation space,
the spaces are gymnax's, the time limit truncates, the protocol declarations hold, and the
installed gymnax is 1.x. A failure prints one line naming the env, the problem and the fix
(exit 2); a pass prints ``ok: NAME: ...`` with the spaces and shapes (exit 0). Training runs
the abstract part of the same checks at every config load.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from jaxrl.commands.cli import HelpFormatter, prog


def build_parser() -> argparse.ArgumentParser:
    """Command line of ``python -m jaxrl.check_env``."""
    parser = argparse.ArgumentParser(
        prog=prog("jaxrl.commands.check_env"),
        description="Check an env against the gymnax 1.x contract the trainer relies on.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("name", help="env name, <suite>:<env id> or import path module:Attr")
    parser.add_argument(
        "--make-kwargs",
        nargs="+",
        default=[],
        metavar="JSON|KEY=VALUE",
        help="arguments of the env's factory (env.make_kwargs): one JSON object or key=value",
    )
    parser.add_argument(
        "--env-kwargs",
        nargs="+",
        default=[],
        metavar="JSON|KEY=VALUE",
        help="EnvParams overrides (env.kwargs), dotted for struct fields: JSON or key=value",
    )
    return parser


def parse_kwargs(items: list[str], flag: str) -> dict[str, Any]:
    """One JSON object, or ``key=value`` items (YAML values, dotted keys nested).

    Raises:
      ValueError: ``"{flag}: ..."``, neither form.
    """
    from jaxrl import envs  # noqa: PLC0415
    from jaxrl.config import ConfigError, parse_overrides  # noqa: PLC0415

    if len(items) == 1 and items[0].lstrip().startswith("{"):
        try:
            value = json.loads(items[0])
        except json.JSONDecodeError as err:
            raise ValueError(f"{flag}: not a JSON object: {err}") from None
        if not isinstance(value, dict):
            raise ValueError(f"{flag}: not a JSON object: {items[0]}")
        return value
    try:
        return envs.nest_dotted(parse_overrides(items))
    except ConfigError as err:
        raise ValueError(f"{flag}: {err}") from None


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m jaxrl.check_env``: 0 if the env passes, 2 if not."""
    args = build_parser().parse_args(argv)
    from jaxrl.envs import check  # noqa: PLC0415 - imports JAX

    try:
        make_kwargs = parse_kwargs(args.make_kwargs, "--make-kwargs")
        overrides = parse_kwargs(args.env_kwargs, "--env-kwargs")
        env, params = check.make(args.name, make_kwargs=make_kwargs, **overrides)
        summary = check.check(args.name, env, params, running=True)
    except ValueError as err:  # check.EnvCheckError is one
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(summary.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
