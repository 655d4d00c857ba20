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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from jaxrl.acting import PolicyParams
from jaxrl.types import RunnerState


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete or does not match the config."""


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

    def restore(self, like: RunnerState, step: int | None = None) -> tuple[RunnerState, dict]:
        """Restore a whole runner state shaped like ``like``; returns ``(runner, meta)``."""
        step = self._resolve_step(step)
        policy_like, rest_like, features_like = split_runner(like)
        try:
            restored = self.manager.restore(
                step,
                args=ocp.args.Composite(
                    policy=ocp.args.StandardRestore(_abstract(policy_like)),
                    state=ocp.args.StandardRestore(_abstract(rest_like)),
                    meta=ocp.args.JsonRestore(),
                    **{
                        name: ocp.args.StandardRestore(_abstract(state))
                        for name, state in features_like.items()
                    },
                ),
            )
        except Exception as err:  # Orbax raises many types for unreadable data
            raise CheckpointError(
                f"checkpoint {self.directory / str(step)} is corrupt or does not match the "
                f"config: {_first_line(err)}"
            ) from None
        rest = _data_to_keys(
            _fill_empty(restored.state, rest_like),
            like.replace(params=None, obs_stats=None, features=None),
        )
        features = {
            name: _data_to_keys(_fill_empty(restored[name], features_like[name]), state)
            for name, state in like.features.items()
        }
        runner = rest.replace(
            params=restored.policy.params, obs_stats=restored.policy.obs_stats, features=features
        )
        return runner, dict(restored.meta)

    def meta(self, step: int) -> dict[str, Any]:
        """The JSON ``meta`` item of checkpoint ``step`` (update step, env steps, wall time)."""
        step = self._resolve_step(step)
        try:
            restored = self.manager.restore(
                step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())
            )
        except Exception as err:
            raise CheckpointError(
                f"checkpoint {self.directory / str(step)} has no readable meta: {_first_line(err)}"
            ) from None
        return dict(restored.meta)

    def restore_item(self, name: str, like: Any, step: int | None = None) -> tuple[Any, int]:
        """Restore one feature's state (e.g. ``selfplay``) shaped like ``like``."""
        step = self._resolve_step(step)
        try:
            restored = self.manager.restore(
                step, args=ocp.args.Composite(**{name: ocp.args.StandardRestore(_abstract(like))})
            )
        except Exception as err:
            raise CheckpointError(
                f"checkpoint {self.directory / str(step)} has no readable {name!r} item: "
                f"{_first_line(err)}"
            ) from None
        return _fill_empty(restored[name], like), step

    def restore_policy(
        self, like: PolicyParams, step: int | None = None
    ) -> tuple[PolicyParams, int]:
        """Restore only params and normaliser; returns ``(policy, step)``."""
        step = self._resolve_step(step)
        try:
            restored = self.manager.restore(
                step,
                args=ocp.args.Composite(policy=ocp.args.StandardRestore(_abstract(like))),
            )
        except Exception as err:
            raise CheckpointError(
                f"checkpoint {self.directory / str(step)} is corrupt or does not match the "
                f"config: {_first_line(err)}"
            ) from None
        return restored.policy, step

    def close(self) -> None:
        """Finish pending writes and release the manager."""
        self.manager.wait_until_finished()
        self.manager.close()


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"
