"""The JAX ecosystem's env suites by name: ``env.name: <suite>:<env id>``.

Each suite is an optional extra (``pip install 'jaxrl[craftax]'``); its adapter module here
(``jaxrl.envs.suites.<suite>``) turns the suite's envs into gymnax-1.x envs that declare what they
can do beyond that (:mod:`jaxrl.envs.protocols`: action masks, structured observations, agent slots,
turns). An adapter module defines:

- ``names() -> list[str]``: the env ids the suite offers (for listings and close matches);
- ``make(env_id, **make_kwargs) -> env``: one env, with constructor arguments from the config
  (``env.make_kwargs``); raises ``ValueError`` (one line) for an unknown id or bad arguments.

The suite's package is imported only when one of its envs is made.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Suite:
    """One env suite: its prefix in ``env.name``, its package and the extra that installs it."""

    prefix: str  # "craftax" in "craftax:Craftax-Classic-Symbolic-v1"
    package: str  # the module the suite's package installs (import name)
    extra: str  # pip install 'jaxrl[<extra>]'
    adapter: str  # our adapter module
    note: str = ""  # a known conflict with our pins, said once when the suite is imported
    refused: bool = False  # it cannot be installed beside jaxrl (the note says why): no env

    @property
    def pip(self) -> str:
        """The command that installs the suite beside jaxrl."""
        return f"pip install 'jaxrl[{self.extra}]'"


SUITES: dict[str, Suite] = {
    s.prefix: s
    for s in (
        Suite("craftax", "craftax", "craftax", "jaxrl.envs.suites.craftax"),
        Suite("jumanji", "jumanji", "jumanji", "jaxrl.envs.suites.jumanji"),
        Suite("navix", "navix", "navix", "jaxrl.envs.suites.navix"),
        Suite("jaxmarl", "jaxmarl", "jaxmarl", "jaxrl.envs.suites.jaxmarl"),
        Suite("pgx", "pgx", "pgx", "jaxrl.envs.suites.pgx"),
        Suite("playground", "mujoco_playground", "playground", "jaxrl.envs.suites.playground"),
        Suite("brax", "brax", "brax", "jaxrl.envs.suites.brax"),
        Suite("xminigrid", "xminigrid", "xminigrid", "jaxrl.envs.suites.xminigrid"),
        Suite(
            "popgym_arcade",
            "popgym_arcade",
            "popgym-arcade",
            "jaxrl.envs.suites.popgym_arcade",
            note="its dependency stable-gymnax installs its own gymnax/ package over gymnax 1.x "
            "(a five-value step), which breaks jaxrl's envs",
            refused=True,
        ),
        Suite(
            "kinetix",
            "kinetix",
            "kinetix",
            "jaxrl.envs.suites.kinetix",
            note="kinetix-env pins jax<=0.9.0: installing it downgrades jax and flax below the "
            "versions jaxrl is tested on (jax 0.10)",
            refused=True,
        ),
    )
}


def split(name: str) -> tuple[Suite, str] | None:
    """``(suite, env id)`` if ``name`` is ``<suite>:<env id>`` of a known suite, else None."""
    prefix, sep, env_id = name.partition(":")
    suite = SUITES.get(prefix)
    return (suite, env_id) if sep and suite is not None else None


@functools.cache
def adapter(suite: Suite) -> Any:
    """The suite's adapter module (imports the suite's package).

    Raises:
      ValueError: one line: the suite cannot be installed beside jaxrl (its note), its package
        is not installed (with the pip command), or it fails to import.
    """
    if suite.refused:
        raise ValueError(f"the {suite.prefix} suite cannot be used with jaxrl: {suite.note}")
    if importlib.util.find_spec(suite.package) is None:
        raise ValueError(
            f"the {suite.prefix} suite needs its package, which is not installed: {suite.pip}"
        )
    try:
        module = importlib.import_module(suite.adapter)
    except ImportError as err:
        raise ValueError(
            f"the {suite.prefix} suite's package is installed but fails to import "
            f"({type(err).__name__}: {err}); reinstall it with {suite.pip}"
        ) from None
    if suite.note:
        import warnings  # noqa: PLC0415

        warnings.warn(f"{suite.prefix}: {suite.note}", stacklevel=2)
    return module


def factory(name: str) -> Callable[..., Any]:
    """The factory of suite env ``name`` (``<suite>:<env id>``): ``factory(**make_kwargs)``.

    Raises:
      ValueError: one line: a missing package, or an env id the suite does not have (with its
        names and the closest one).
    """
    suite, env_id = split(name)  # type: ignore[misc]
    module = adapter(suite)
    known = list(module.names())
    if env_id not in known:
        close = difflib.get_close_matches(env_id, known, n=1)
        hint = f" (did you mean {suite.prefix}:{close[0]}?)" if close else ""
        raise ValueError(
            f"unknown {suite.prefix} environment {env_id!r}{hint}; {suite.prefix} has: "
            + ", ".join(known)
        )
    return functools.partial(module.make, env_id)
