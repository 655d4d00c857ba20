"""The one error type of the config, and the small checks every section uses."""

from __future__ import annotations

import difflib
from typing import Any


class ConfigError(ValueError):
    """A configuration problem, with a one-line message naming the offending key.

    The message is kept to one line whatever it wraps (an env's or a library's error text).
    """

    def __init__(self, message: str):
        lines = (line.strip() for line in str(message).splitlines())
        super().__init__(" ".join(line for line in lines if line))


def require(ok: bool, message: str) -> None:
    """Raise :class:`ConfigError` with ``message`` unless ``ok``."""
    if not ok:
        raise ConfigError(message)


def suggest(word: str, options: list[str]) -> str:
    """`` (did you mean X?)`` for the closest option to ``word``, or ``""``."""
    close = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def check_env_overrides(where: str, overrides: Any, params: Any, *, staged: bool) -> None:
    """:func:`jaxrl.envs.params.check_overrides`, its error as a :class:`ConfigError`."""
    from jaxrl.envs.params import check_overrides  # noqa: PLC0415 - envs imports gymnax (a backend)

    try:
        check_overrides(where, overrides, params, staged=staged)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def apply_env_overrides(where: str, overrides: Any, params: Any) -> Any:
    """``params`` with ``overrides`` applied (:func:`jaxrl.envs.override_params`), checked first.

    Stage and lane overrides sit on top of ``env.kwargs``: their values become array leaves
    stacked next to the training envs' params, so only array leaves can differ (``staged``).
    """
    from jaxrl import envs  # noqa: PLC0415 - keep config importable without building envs

    check_env_overrides(where, overrides, params, staged=True)
    try:
        return envs.override_params(params, overrides)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{where}: {err}") from None
