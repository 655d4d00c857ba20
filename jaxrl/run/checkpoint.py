"""Orbax checkpoints of the whole runner state, and params-only restore for evaluation.

Layout of a run directory::

    RUN_DIR/config.yaml          resolved config (written by the trainer)
    RUN_DIR/checkpoints/<step>/  one Orbax checkpoint per saved update step, with items
        policy/   PolicyParams: params + observation normaliser (all play needs)
        state/    the rest of the RunnerState (optimizer, env states, keys, counters)
        <name>/   one item per train-step feature: its state (curriculum, selfplay, ...)
        meta/     JSON: update step, env steps, wall-clock seconds

Orbax writes each step into a temporary directory and renames it when complete, so a
process killed mid-save leaves the previous checkpoints intact.

A checkpoint that cannot be read back (a truncated data file, a missing item, a corrupt
meta JSON) raises :class:`CorruptCheckpointError`: one line with the step, the cause in plain
words and the intact steps. "Intact" means "restores": a step is checked by restoring the
items the caller needs (all of them to resume, the policy to play), as Orbax offers no
cheaper test that reads the array data. ``--resume`` falls back to the newest intact step
and moves the unreadable newer ones aside to ``checkpoints/<step>.corrupt`` (never deleted:
Orbax neither lists nor garbage-collects such a directory, and training saves ``<step>``
again); see ``docs/guide/checkpoints.md``.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from jaxrl.core.acting import PolicyParams
from jaxrl.core.types import RunnerState


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete or does not match the config."""


class CorruptCheckpointError(CheckpointError):
    """Checkpoint ``step`` cannot be read back; ``intact`` are the steps that can."""

    def __init__(self, directory: Path, step: int, cause: str, intact: list[int]):
        self.directory = directory  # RUN_DIR/checkpoints
        self.step = step
        self.cause = cause  # plain words, e.g. "data file policy/d/5162... is truncated"
        self.intact = intact  # ascending; [] when none restores
        super().__init__(
            f"checkpoint {step} in {directory} is unreadable: {cause}; intact checkpoints: "
            + (", ".join(map(str, intact)) if intact else "none")
        )

    def suggest(self, flag: str = "--step") -> str:
        """The message and the flag that picks the newest intact step (if there is one)."""
        if not self.intact:
            return str(self)
        return f"{self} (choose one with {flag} {self.intact[-1]})"


def error_line(err: Exception, flag: str = "--step") -> tuple[str, int]:
    """A command's one-line report of ``err`` and its exit status: 2 for a checkpoint error
    (the run directory or step the user named: missing, without checkpoints, or unreadable,
    then with ``flag`` and an intact step to choose), 1 for anything else."""
    if isinstance(err, CorruptCheckpointError):
        return err.suggest(flag), 2
    return str(err), 2 if isinstance(err, CheckpointError) else 1


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _keys_to_data(tree: Any) -> Any:
    # Orbax stores plain arrays; typed PRNG keys are saved as their uint32 key data.
    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def _data_to_keys(tree: Any, like: Any) -> Any:
    return jax.tree.map(
        lambda x, ref: (
            jax.random.wrap_key_data(x, impl=jax.random.key_impl(ref)) if _is_key(ref) else x
        ),
        tree,
        like,
    )


def _abstract(tree: Any) -> Any:
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, _drop_empty(tree))


def _drop_empty(tree: Any) -> Any:
    """``tree`` with zero-size arrays as None: Orbax refuses to save them, and they hold no
    data (a run without pool lanes has ``[0]``-shaped lane state, for instance)."""
    return jax.tree.map(lambda x: None if getattr(x, "size", 1) == 0 else x, tree)


def _fill_empty(restored: Any, like: Any) -> Any:
    """Undo :func:`_drop_empty`: the zero-size arrays of ``like`` back in their places."""
    values = iter(jax.tree.leaves(restored))
    leaves, treedef = jax.tree.flatten(like)
    return jax.tree.unflatten(
        treedef, [x if getattr(x, "size", 1) == 0 else next(values) for x in leaves]
    )


def split_runner(runner: RunnerState) -> tuple[PolicyParams, RunnerState, dict[str, Any]]:
    """``(policy, rest, features)``: params and normaliser; the rest, with keys as data; the
    feature states by name (each is its own checkpoint item)."""
    policy = PolicyParams(params=runner.params, obs_stats=runner.obs_stats)
    rest = _keys_to_data(runner.replace(params=None, obs_stats=None, features=None))
    features = {name: _keys_to_data(state) for name, state in runner.features.items()}
    return policy, rest, features


class Checkpointer:
    """Saves and restores runner states under ``RUN_DIR/checkpoints``."""

    def __init__(self, run_dir: str | Path, keep: int = 3, create: bool = True):
        self.directory = (Path(run_dir) / "checkpoints").absolute()
        if not create and not self.directory.is_dir():
            raise CheckpointError(f"no checkpoints in {run_dir} ({self.directory} is missing)")
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=create, enable_async_checkpointing=False
        )
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def steps(self) -> list[int]:
        """Saved update steps, ascending."""
        return sorted(self.manager.all_steps())

    def latest_step(self) -> int | None:
        """The newest saved update step, or None."""
        return self.manager.latest_step()

    def save(self, runner: RunnerState, meta: dict[str, Any], step: int | None = None) -> int:
        """Save ``runner`` at ``step`` (default: its update step); returns the step."""
        step = int(runner.update_step) if step is None else int(step)
        policy, rest, features = split_runner(runner)
        self.manager.save(
            step,
            args=ocp.args.Composite(
                policy=ocp.args.StandardSave(policy),
                state=ocp.args.StandardSave(_drop_empty(rest)),
                meta=ocp.args.JsonSave({**meta, "update_step": step, "features": sorted(features)}),
                **{
                    name: ocp.args.StandardSave(_drop_empty(state))
                    for name, state in features.items()
                },
            ),
            force=True,
        )
        self.manager.wait_until_finished()
        return step

    def save_policy(self, policy: PolicyParams, meta: dict[str, Any], step: int) -> int:
        """Save a policy alone at ``step`` (an extracted member: :mod:`jaxrl.commands.extract`); it
        restores with :meth:`restore_policy` and :meth:`meta`, not as a whole runner."""
        self.manager.save(
            int(step),
            args=ocp.args.Composite(
                policy=ocp.args.StandardSave(policy),
                meta=ocp.args.JsonSave({**meta, "update_step": int(step), "features": []}),
            ),
            force=True,
        )
        self.manager.wait_until_finished()
        return int(step)

    def _resolve_step(self, step: int | None) -> int:
        steps = self.steps()
        if not steps:
            raise CheckpointError(f"no checkpoints in {self.directory}")
        if step is None:
            return steps[-1]
        if step not in steps:
            raise CheckpointError(
                f"no checkpoint at step {step} in {self.directory}; saved steps: {steps}"
            )
        return step

    def _read(self, step: int | None, args: Callable[[], dict[str, Any]]) -> tuple[Any, int]:
        """Restore the items ``args()`` names at ``step`` (default: latest).

        Raises:
          CorruptCheckpointError: the step does not restore (the other steps are checked the same
            way to name the intact ones).
        """
        step = self._resolve_step(step)
        try:
            return self._restore_items(step, args()), step
        except Exception as err:  # Orbax raises many types for unreadable data
            cause = plain_cause(err, self.directory / str(step))
        intact = [s for s in self.steps() if s != step and self.readable(s, args)]
        raise CorruptCheckpointError(self.directory, step, cause, intact) from None

    def _restore_items(self, step: int, items: dict[str, Any]) -> Any:
        _quiet_closed_loop()  # before: a failed read's siblings may call back at once
        return self.manager.restore(step, args=ocp.args.Composite(**items))

    def readable(self, step: int, args: Callable[[], dict[str, Any]]) -> bool:
        """Whether the items ``args()`` names restore at ``step`` (the intactness check)."""
        try:
            self._restore_items(step, args())
        except Exception:  # noqa: BLE001 - any failure means "not intact"
            return False
        return True

    def restore(self, like: RunnerState, step: int | None = None) -> tuple[RunnerState, dict]:
        """Restore a whole runner state shaped like ``like``; returns ``(runner, meta)``.

        Raises:
          CorruptCheckpointError: ``step`` (default: the latest) does not restore.
        """
        restored, _ = self._read(step, lambda: _runner_items(like))
        return _assemble(restored, like), dict(restored.meta)

    def restore_intact(
        self, like: RunnerState
    ) -> tuple[RunnerState, dict, CorruptCheckpointError | None]:
        """The newest step that restores: ``(runner, meta, why the newest did not)``.

        When the newest step is unreadable the newest intact one is restored, and the error
        about the newest (its cause, the intact steps) is returned beside it; every step
        above the restored one is unreadable.

        Raises:
          CorruptCheckpointError: no step restores.
        """
        try:
            runner, meta = self.restore(like)
            return runner, meta, None
        except CorruptCheckpointError as bad:
            if not bad.intact:
                raise
            runner, meta = self.restore(like, bad.intact[-1])
            return runner, meta, bad

    def set_aside(self, step: int) -> Path:
        """Move checkpoint ``step`` to ``<step>.corrupt`` (``.corrupt.1``, ... if taken): out
        of Orbax's sight, so it is neither garbage-collected nor in the way of a new save of
        ``step``, and never deleted. Returns the new path."""
        source = self.directory / str(step)
        target = self.directory / f"{step}.corrupt"
        n = 0
        while target.exists():
            n += 1
            target = self.directory / f"{step}.corrupt.{n}"
        source.rename(target)
        self.manager.reload()  # forget the step Orbax listed at start
        return target

    def meta(self, step: int) -> dict[str, Any]:
        """The JSON ``meta`` item of checkpoint ``step`` (update step, env steps, wall time)."""
        restored, _ = self._read(step, lambda: {"meta": ocp.args.JsonRestore()})
        return dict(restored.meta)

    def restore_item(self, name: str, like: Any, step: int | None = None) -> tuple[Any, int]:
        """Restore one feature's state (e.g. ``selfplay``) shaped like ``like``."""
        restored, step = self._read(step, lambda: {name: ocp.args.StandardRestore(_abstract(like))})
        return _fill_empty(restored[name], like), step

    def restore_saved(self, name: str, step: int) -> Any:
        """Item ``name`` of checkpoint ``step`` as it was saved, without a template: nested
        dicts of NumPy arrays by field name (e.g. ``state``'s ``hyper``, ``league``'s
        ``ratings``)."""
        restored, _ = self._read(step, lambda: {name: ocp.args.StandardRestore()})
        return restored[name]

    def restore_policy(
        self, like: PolicyParams, step: int | None = None
    ) -> tuple[PolicyParams, int]:
        """Restore only params and normaliser; returns ``(policy, step)``."""
        restored, step = self._read(
            step, lambda: {"policy": ocp.args.StandardRestore(_abstract(like))}
        )
        return restored.policy, step

    def close(self) -> None:
        """Finish pending writes and release the manager."""
        self.manager.wait_until_finished()
        self.manager.close()


def _runner_items(like: RunnerState) -> dict[str, Any]:
    """The restore arguments of every item of a whole runner state shaped like ``like``."""
    policy_like, rest_like, features_like = split_runner(like)
    return {
        "policy": ocp.args.StandardRestore(_abstract(policy_like)),
        "state": ocp.args.StandardRestore(_abstract(rest_like)),
        "meta": ocp.args.JsonRestore(),
        **{
            name: ocp.args.StandardRestore(_abstract(state))
            for name, state in features_like.items()
        },
    }


def _assemble(restored: Any, like: RunnerState) -> RunnerState:
    """The runner state from its restored items (keys rewrapped, empty leaves refilled)."""
    _, rest_like, features_like = split_runner(like)
    rest = _data_to_keys(
        _fill_empty(restored.state, rest_like),
        like.replace(params=None, obs_stats=None, features=None),
    )
    features = {
        name: _data_to_keys(_fill_empty(restored[name], features_like[name]), state)
        for name, state in like.features.items()
    }
    return rest.replace(
        params=restored.policy.params, obs_stats=restored.policy.obs_stats, features=features
    )


def _drop_closed_loop(unraisable: Any, previous: Callable[[Any], None]) -> None:
    exc = unraisable.exc_value
    if isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed":
        return
    if isinstance(exc, Exception) and isinstance(exc.__cause__, GeneratorExit):
        return  # a read abandoned (its coroutine closed) after the restore had failed
    previous(unraisable)


def _quiet_closed_loop() -> None:
    """Silence the reads still in flight when a restore failed.

    When one array of a restore fails, Orbax closes its event loop while TensorStore still
    completes the item's other reads; each one's callback then raises "Event loop is closed",
    and Python prints it as an unraisable exception (a dozen tracebacks around the one-line
    report); a read whose coroutine is closed unfinished raises Orbax's read error from
    ``GeneratorExit`` the same way. Only those are dropped; any other goes to the hook that
    was installed.
    """
    hook = sys.unraisablehook
    if getattr(hook, "func", None) is _drop_closed_loop:
        return
    sys.unraisablehook = functools.partial(_drop_closed_loop, previous=hook)


_TRUNCATED = re.compile(
    r'Error reading Byte range \[\d+, (\d+)\) of local file "([^"]+)": Requested byte range '
    r"\[\d+, \d+\) is not valid for value of size (\d+)"
)
_OCDBT_TRUNCATED = re.compile(
    r'Error reading "([^"]+)" in OCDBT database at local file "([^"]+)": Requested byte range '
    r"\[\d+, (\d+)\) is not valid for value of size (\d+)"
)
_LOCAL_FILE = re.compile(r'local file "([^"]+)"')
_MISSING_ITEM = re.compile(r'Item "([^"]+)" was not found')
_CHAIN_LIMIT = 16  # a guard against a cycle of causes


def plain_cause(err: BaseException, step_dir: Path) -> str:
    """What is wrong with a checkpoint, in plain words, from the error Orbax raised.

    The whole ``__cause__``/``__context__`` chain is read: Orbax often wraps TensorStore's
    precise error (a truncated OCDBT value, a missing file) in a generic ``Exception`` whose
    text ends in a JSON spec of the whole store and a ``<bound method ...>`` repr. The causes
    seen in practice are named; anything else is the outermost error cut to its first clause.
    """
    chain = _chain(err)
    for link in chain:
        if (named := _named_cause(link, step_dir)) is not None:
            return named
    return _first_clause(err)


def _chain(err: BaseException) -> list[BaseException]:
    """``err`` and the errors it was raised from or during, outermost first, each once."""
    chain: list[BaseException] = []
    link: BaseException | None = err
    while link is not None and link not in chain and len(chain) < _CHAIN_LIMIT:
        chain.append(link)
        link = link.__cause__ or link.__context__
    return chain


def _named_cause(err: BaseException, step_dir: Path) -> str | None:
    """Plain words for one error of a chain when it is a cause seen in practice, else None."""
    text = str(err)
    if isinstance(err, json.JSONDecodeError):
        return f"its meta JSON is not valid ({err.msg} at line {err.lineno} column {err.colno})"
    if (match := _MISSING_ITEM.search(text)) is not None:
        return f"item {match.group(1)!r} is missing"
    if (match := _TRUNCATED.search(text)) is not None:
        expected, path, size = match.groups()
        return f"data file {_relative(path, step_dir)} is truncated ({size} of {expected} bytes)"
    if (match := _OCDBT_TRUNCATED.search(text)) is not None:
        key, path, expected, size = match.groups()
        array = key.rsplit("/", 1)[0]  # "params...kernel/0.0": the array, then its chunk
        where = _relative(path, step_dir).rstrip("/") + "/"
        return f"data for {array} in {where} is truncated ({size} of {expected} bytes)"
    if "NOT_FOUND" in text and (match := _LOCAL_FILE.search(text)) is not None:
        return f"file {_relative(match.group(1), step_dir)} is missing"
    if isinstance(err, FileNotFoundError) and err.filename:
        return f"file {_relative(str(err.filename), step_dir)} is missing"
    return None


def _first_clause(err: BaseException) -> str:
    """``err``'s type and first clause, without TensorStore's spec or a method's repr."""
    text = str(err)
    for cut in (" See full TensorStore details", " [tensorstore_spec", "<bound method"):
        text = text.split(cut)[0]
    lines = text.strip().splitlines()
    clause = re.sub(r'Error opening "\w+" driver: ', "", lines[0] if lines else "").rstrip(":")
    if len(clause) > 200:
        clause = clause[:197] + "..."
    return f"{type(err).__name__}: {clause}" if clause else type(err).__name__


def _relative(path: str, step_dir: Path) -> str:
    """``path`` relative to the checkpoint's directory when it is inside it."""
    try:
        return str(Path(path).relative_to(step_dir))
    except ValueError:
        return path
