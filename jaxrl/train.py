"""Training CLI and API: the host loop around the compiled chunk step.

    python -m jaxrl.train --config configs/cartpole.yaml [section.key=value ...] [--run-dir DIR]
    python -m jaxrl.train --resume DIR

The host loop only runs between compiled chunks: it reads the chunk's scalar metrics,
writes TensorBoard scalars, updates the progress bar and saves checkpoints.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # join the other processes first: importing gymnax starts JAX
    from jaxrl.distributed import join_from_argv

    join_from_argv(sys.argv[1:])

import argparse
import dataclasses
import datetime
import math
import shutil
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from jaxrl.checkpoint import Checkpointer, CheckpointError
from jaxrl.config import Config, ConfigError, load_config, save_config
from jaxrl.distributed import (
    DistributedError,
    add_process_flags,
    cluster_from_flags,
    is_main_process,
    join,
    sync,
)
from jaxrl.logger import Logger, NullLogger, chunk_scalars
from jaxrl.setup import Setup, make_setup
from jaxrl.train_step import init_run, make_train_step
from jaxrl.types import RunnerState


class TrainingError(RuntimeError):
    """Training cannot go on (non-finite updates, a refused run directory, ...)."""


@dataclasses.dataclass
class TrainResult:
    """What a finished (or stopped) run returns to Python callers."""

    runner: RunnerState
    history: list[dict[str, float]]  # one row per chunk: env_steps, update, scalars
    compile_s: float  # seconds to compile the chunk step
    sps: float  # agent steps per second after compile, over the whole run
    run_dir: Path


def default_run_dir(config_path: str | None) -> Path:
    """``runs/<config stem>-<UTC timestamp>``."""
    stem = Path(config_path).stem if config_path else "run"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stem}-{stamp}"


def prepare_run_dir(run_dir: Path, overwrite: bool) -> None:
    """Create ``run_dir``; refuse one that already holds a run unless ``overwrite``.

    With several processes every one checks, then process 0 alone creates the directory.
    """
    held = run_dir.exists() and any(run_dir.iterdir())
    if held and not overwrite:
        raise TrainingError(
            f"run directory {run_dir} already holds a run; continue it with "
            f"--resume {run_dir} or replace it with --overwrite"
        )
    sync("jaxrl-run-dir-checked")
    if is_main_process():
        if held:
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
    sync("jaxrl-run-dir-created")


def run_summary(
    config: Config, setup: Setup, run_dir: Path, start_update: int, features: dict
) -> str:
    """A few lines describing the run, printed before training."""
    ppo, env = config.ppo, config.env
    devices = ", ".join(f"{d.platform}:{d.id}" for d in jax.devices()[:8]) + (
        ", ..." if jax.device_count() > 8 else ""
    )
    if jax.process_count() > 1:
        devices += f" ({jax.device_count()} devices of {jax.process_count()} processes)"
    shards = setup.layout.devices
    devices += (
        f"; env batch sharded over {shards} ({env.num_envs // shards} envs each), params replicated"
        if shards > 1
        else "; one device trains"
    )
    on = lambda flag: "on" if flag else "off"  # noqa: E731
    lines = [
        f"jaxrl on jax {jax.__version__}",
        f"  run dir      {run_dir}",
        f"  devices      {devices}",
        f"  precision    {config.precision} -> compute {setup.compute_dtype.name}, params float32",
        f"  env          {env.name} x {env.num_envs} envs, action repeat {env.action_repeat}, "
        f"{'discrete' if setup.discrete else 'continuous'} actions, obs {setup.obs_shape}",
        f"  batch        {config.batch_size} = {env.num_envs} envs x {ppo.num_steps} steps; "
        f"{ppo.num_minibatches} minibatches of {config.minibatch_size} x {ppo.update_epochs} "
        "epochs",
        f"  schedule     {config.num_updates} updates ({config.num_updates * config.batch_size} "
        f"steps) in chunks of {config.chunk_updates}; starting at update {start_update}",
        f"  network      MLP {list(config.network.hidden_sizes)} {config.network.activation}, "
        f"{'shared' if config.network.shared_torso else 'separate'} torsos"
        + (
            f", {config.network.core.upper()} {config.network.core_size}"
            if config.network.core != "none"
            else ""
        ),
        f"  features     obs norm {on(env.normalize_obs)}, lr anneal {on(ppo.anneal_lr)}, "
        f"value clip {on(ppo.clip_value)}, adv norm {on(ppo.normalize_advantages)}, "
        f"reward scale {ppo.reward_scale:g}",
        f"  checkpoints  every {config.checkpoint.every_updates or 'end only'} updates, "
        f"keep {config.checkpoint.keep}",
    ]
    members = setup.members
    if members.count > 1:
        swept = ", ".join(f"{k} {v}" for k, v in config.sweep.items())
        lines.append(
            f"  members      {members.count} runs vmapped in one program: "
            f"{members.count // config.train.num_seeds} sweep points x "
            f"{config.train.num_seeds} seeds ({members.seeds[0]}..{max(members.seeds)})"
            + (f"; sweep {swept}" if swept else "")
            + "; TensorBoard runs "
            + ", ".join(members.names[:4])
            + (", ..." if members.count > 4 else "")
        )
    layout = setup.layout
    if layout.two_team:
        lines.append(
            f"  teams        two teams of {layout.team_size}: the learner drives one per env, "
            f"{layout.num_envs * layout.actors_per_env} training actors"
        )
    for feature in setup.features:
        lines += [f"  {line}" for line in feature.summary(features[feature.name])]
    return "\n".join(lines)


def _params_finite(runner: RunnerState) -> bool:
    leaves = jax.tree.leaves(runner.params)
    return bool(jnp.all(jnp.array([jnp.isfinite(x).all() for x in leaves])))


def train(
    config: Config | None = None,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    config_path: str | None = None,
    quiet: bool = False,
) -> TrainResult:
    """Train (or resume) a run; the Python API behind ``python -m jaxrl.train``.

    Args:
      config: the run's config (ignored when resuming: the saved ``config.yaml`` is used).
      run_dir: where config, TensorBoard events and checkpoints go.
      resume: continue the run in ``run_dir`` from its latest checkpoint.
      overwrite: replace an existing run in ``run_dir``.
      config_path: only used to name a default run directory.
      quiet: no summary, no progress bar.

    Raises:
      ConfigError, CheckpointError, TrainingError: with a one-line message.
    """
    if resume:
        if run_dir is None:
            raise TrainingError("resume needs a run directory")
        run_dir = Path(run_dir)
        if not (run_dir / "config.yaml").is_file():
            raise CheckpointError(f"cannot resume {run_dir}: it has no config.yaml")
        config = load_config(run_dir / "config.yaml")
    else:
        config = config or Config()
        if run_dir is None and jax.process_count() > 1:
            raise TrainingError(
                "a run of several processes needs --run-dir (the same shared path on every process)"
            )
        run_dir = Path(run_dir) if run_dir is not None else default_run_dir(config_path)
        prepare_run_dir(run_dir, overwrite)
        if is_main_process():
            save_config(config, run_dir / "config.yaml")

    setup = make_setup(config)
    runner = init_run(setup)
    checkpointer = Checkpointer(run_dir, keep=config.checkpoint.keep, create=not resume)
    if resume:
        runner, meta = checkpointer.restore(runner)
        _check_resume_devices(setup, meta.get("devices"))
    start_update = int(np.max(jax.device_get(runner.update_step)))
    main = is_main_process()
    quiet = quiet or not main  # the other processes train silently
    if not quiet:
        print(run_summary(config, setup, run_dir, start_update, runner.features), flush=True)

    members = setup.members
    if not main:
        loggers = [NullLogger() for _ in members.names]
    elif members.count == 1:
        loggers = [Logger(run_dir)]
    else:  # one TensorBoard run per member, readable on its own
        loggers = [Logger(run_dir / name) for name in members.names]
    try:
        return _loop(config, setup, runner, checkpointer, loggers, run_dir, quiet)
    finally:
        for logger in loggers:
            logger.close()
        checkpointer.close()


def _check_resume_devices(setup: Setup, saved: int | None) -> None:
    """Refuse to resume on another device count a run whose env groups are per device.

    Opponent groups (self-play), evaluation lanes and curriculum replay envs are laid out in
    every device's slice of the env batch, so on another device count the saved env states
    would land in other groups. Runs with one kind of env resume on any device count, and
    evaluation always works.
    """
    layout = setup.layout
    grouped = layout.selfplay or layout.per_env_params  # evaluation lanes, curriculum replay
    if saved is None or saved == layout.devices or not grouped:
        return
    raise TrainingError(
        f"this run was trained on {saved} devices with env groups (self-play, evaluation lanes "
        "or curriculum replay) "
        f"laid out per device; resume it on {saved} devices (mesh.devices={saved}), not "
        f"{layout.devices} (evaluation restores on any device count)"
    )


def _member_rows(metrics: dict, count: int) -> list[dict[str, float]]:
    """Per member ``{tag: float}`` from the chunk's metrics (``[R]`` leaves when R > 1)."""
    if count == 1:
        return [chunk_scalars(metrics)]
    return [chunk_scalars({tag: value[i] for tag, value in metrics.items()}) for i in range(count)]


def _loop(
    config: Config,
    setup: Setup,
    runner: RunnerState,
    checkpointer: Checkpointer,
    loggers: list[Logger],
    run_dir: Path,
    quiet: bool,
) -> TrainResult:
    batch = config.batch_size
    every = config.checkpoint.every_updates
    limit = config.train.max_nonfinite_updates
    names = setup.members.names
    t0 = time.perf_counter()
    step_fn = make_train_step(setup).lower(runner).compile()
    compile_s = time.perf_counter() - t0

    def progress(updates, streaks) -> tuple[np.ndarray, np.ndarray]:
        """Per-member update counts and non-finite streaks as int arrays ``[R]``."""
        return np.atleast_1d(updates).astype(int), np.atleast_1d(streaks).astype(int)

    updates, streaks = progress(*jax.device_get((runner.update_step, runner.nonfinite_streak)))
    for logger, done in zip(loggers, updates, strict=True):
        logger.scalars(int(done) * batch, {"perf/compile_s": compile_s})
    update = int(updates.max())
    last_saved = checkpointer.latest_step() or 0
    history: list[dict] = []
    stopped: dict[str, int] = {}  # member -> update at which its NaN streak stopped it
    bar = tqdm(
        total=config.num_updates * batch,
        initial=update * batch,
        unit="step",
        unit_scale=True,
        dynamic_ncols=True,
        disable=quiet or not config.train.progress_bar,
    )
    train_s, trained_steps = 0.0, 0
    recent_return = math.nan
    while update < config.num_updates:
        t_chunk = time.perf_counter()
        runner, metrics = step_fn(runner)
        # One device-to-host transfer per chunk; the scalars are read from host copies.
        metrics, new_updates, streaks = jax.device_get(
            (metrics, runner.update_step, runner.nonfinite_streak)
        )
        new_updates, streaks = progress(new_updates, streaks)
        chunk_s = time.perf_counter() - t_chunk
        steps = int((new_updates - updates).sum()) * batch  # agent steps of all members
        train_s += chunk_s
        trained_steps += steps
        rows = _member_rows(metrics, len(names))
        for logger, row, done, before in zip(loggers, rows, new_updates, updates, strict=True):
            member_steps = int(done - before) * batch
            row["perf/sps"] = member_steps / chunk_s if member_steps else 0.0
            logger.scalars(int(done) * batch, row)
        new_update = int(new_updates.max())
        if len(rows) == 1:
            history.append({"env_steps": new_update * batch, "update": new_update, **rows[0]})
        else:
            merged = {tag: [row[tag] for row in rows] for tag in rows[0]}
            history.append({"env_steps": new_update * batch, "update": new_update, **merged})
        returns = [row["rollout/episode_return"] for row in rows]
        if not all(math.isnan(r) for r in returns):
            recent_return = float(np.nanmean(returns))
        bar.update((new_update - update) * batch)
        bar.set_postfix(sps=f"{steps / chunk_s:.3g}", ret=f"{recent_return:.4g}")

        for name, streak, done in zip(names, streaks, new_updates, strict=True):
            if streak >= limit and name not in stopped:
                stopped[name] = int(done)
                if len(names) > 1:
                    tqdm.write(
                        f"warning: member {name} stopped after {streak} non-finite updates in a "
                        f"row at update {int(done)}; the other members go on",
                        file=sys.stderr,
                    )
        if len(stopped) == len(names):
            bar.close()
            saved = checkpointer.latest_step()
            where = f"step {saved} in {checkpointer.directory}" if saved else "none"
            raise TrainingError(
                f"training stopped: {int(streaks.max())} non-finite updates in a row at update "
                f"{new_update} (train.max_nonfinite_updates={limit}); last good checkpoint: "
                f"{where}"
            )
        updates, update = new_updates, new_update
        at_end = update >= config.num_updates or len(stopped) + (
            updates >= config.num_updates
        ).sum() >= len(names)
        due = every > 0 and update // every > last_saved // every
        if (due or at_end) and update != last_saved:
            if not _params_finite(runner):
                raise TrainingError(f"refusing to checkpoint non-finite params at update {update}")
            checkpointer.save(
                runner,
                {
                    "env_steps": update * batch,
                    "wall_s": time.perf_counter() - t0,
                    "devices": setup.layout.devices,
                },
                step=update,
            )
            last_saved = update
        if at_end:
            break
    bar.close()
    jax.block_until_ready(runner)
    sps = trained_steps / train_s if train_s > 0 else 0.0
    if not quiet:
        final = history[-1]["rollout/episode_return"] if history else math.nan
        final = float(np.nanmean(final)) if isinstance(final, list) else final
        print(
            f"done: {update * batch} steps"
            + (f" x {len(names)} members" if len(names) > 1 else "")
            + f", {sps:,.0f} steps/s after {compile_s:.1f} s compile, "
            f"last episode return {final:.4g}; run dir {run_dir}",
            flush=True,
        )
    if stopped:
        raise TrainingError(
            "members stopped by non-finite updates (train.max_nonfinite_updates="
            f"{limit}): "
            + ", ".join(f"{n} at update {u}" for n, u in stopped.items())
            + f"; the others trained to the end; checkpoints in {checkpointer.directory}"
        )
    return TrainResult(
        runner=runner, history=history, compile_s=compile_s, sps=sps, run_dir=run_dir
    )


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``python -m jaxrl.train``."""
    parser = argparse.ArgumentParser(
        prog="python -m jaxrl.train",
        description="Train a PPO agent with one compiled JAX train step.",
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
    parser.add_argument("--quiet", action="store_true", help="no summary or progress bar")
    add_process_flags(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    args = build_parser().parse_intermixed_args(argv)  # overrides before or after flags
    try:
        join(cluster_from_flags(args.coordinator, args.num_processes, args.process_id))
        if args.resume:
            if args.config or args.overrides or args.run_dir:
                raise ConfigError(
                    "--resume DIR continues a run with its saved config.yaml; "
                    "it takes no --config, --run-dir or overrides"
                )
            train(run_dir=args.resume, resume=True, quiet=args.quiet)
        else:
            if not args.config and not args.overrides:
                raise ConfigError("give --config FILE (see configs/) or --resume DIR")
            config = load_config(args.config, args.overrides)
            train(
                config,
                args.run_dir,
                overwrite=args.overwrite,
                config_path=args.config,
                quiet=args.quiet,
            )
    except (ConfigError, DistributedError) as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    except (CheckpointError, TrainingError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; resume from the last checkpoint with --resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
