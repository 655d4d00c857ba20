"""Training throughput of the real compiled chunk (``--only train``, ``selfplay``, ``scale``), and
the PureJaxRL-style reference run side by side (``--reference``)."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import envs
from jaxrl.config import Config
from jaxrl.core.types import RunnerState
from jaxrl.run.setup import Setup, make_setup
from jaxrl.run.train_step import init_run, make_train_step, restart_matches

from .figures import (
    PROFILES,
    ConfigSpec,
    Figure,
    Profile,
    compile_seconds,
    cost,
    rate,
    run_child,
    time_calls,
)


@dataclasses.dataclass
class _Chunk:
    """A compiled train chunk ready to be timed, and the updates each timed call ran."""

    prefix: str
    config: Config
    steps: int  # env steps of one call, every member
    compiles: list[float]
    call: Callable[[], None]
    updates: list[jax.Array]


def _compiled_chunk(
    prefix: str,
    config: Config,
    profile: Profile,
    prepare: Callable[[Setup, RunnerState], RunnerState] | None,
) -> _Chunk:
    setup = make_setup(config)
    runner = init_run(setup)  # every member, sharded over the run's devices
    if prepare is not None:
        runner = prepare(setup, runner)
    compiles = []
    for _ in range(profile.compile_repeats):
        # A fresh jit per compile: a real trace, lowering and XLA compile, never a cache hit.
        seconds, compiled = compile_seconds(make_train_step(setup), runner)
        compiles.append(seconds)
    carried = {"runner": runner}
    updates: list[jax.Array] = []

    def call() -> None:
        # The step donates its input: always feed it the runner it returned last.
        runner, metrics = jax.block_until_ready(compiled(carried["runner"]))
        carried["runner"] = runner
        updates.append(metrics["train/updates"])

    steps = config.chunk_updates * config.batch_size * setup.members.count  # all members
    return _Chunk(prefix, config, steps, compiles, call, updates)


def _chunk_figures(chunk: _Chunk, seconds: list[float]) -> list[Figure]:
    ran = sorted({int(u) for u in np.concatenate([np.ravel(u) for u in chunk.updates])})
    if ran != [chunk.config.chunk_updates]:
        raise RuntimeError(
            f"{chunk.prefix}: chunks ran {ran} updates, expected {chunk.config.chunk_updates} each"
        )
    updates = chunk.config.chunk_updates
    return [
        rate(f"{chunk.prefix}/sps", "steps/s", [chunk.steps / s for s in seconds]),
        rate(f"{chunk.prefix}/updates_per_s", "updates/s", [updates / s for s in seconds]),
        cost(f"{chunk.prefix}/compile", "s", chunk.compiles),
    ]


def train_figures(
    prefix: str,
    config: Config,
    profile: Profile,
    prepare: Callable[[Setup, RunnerState], RunnerState] | None = None,
) -> list[Figure]:
    """Training steps/s and updates/s of the compiled chunk, and its compile time.

    ``prepare`` edits the fresh runner state before compiling (e.g. a curriculum stage).
    """
    chunk = _compiled_chunk(prefix, config, profile, prepare)
    return _chunk_figures(chunk, time_calls(chunk.call, profile.repeats, profile.min_repeat_s))


def alternating_train_figures(
    runs: Sequence[tuple[str, Config, Callable[[Setup, RunnerState], RunnerState] | None]],
    profile: Profile,
) -> list[Figure]:
    """:func:`train_figures` of several ``(prefix, config, prepare)`` runs, all compiled in
    one process first and then timed in turns, one repeat of each per round, so that a drift
    of the machine's speed reaches every run alike (for ratios between them)."""
    chunks = [_compiled_chunk(prefix, config, profile, prepare) for prefix, config, prepare in runs]
    seconds: list[list[float]] = [[] for _ in chunks]
    for _ in range(profile.repeats):
        for chunk, times in zip(chunks, seconds, strict=True):
            times.extend(time_calls(chunk.call, 1, profile.min_repeat_s))
    return [f for c, t in zip(chunks, seconds, strict=True) for f in _chunk_figures(c, t)]


def reference_kwargs(config: Config) -> dict[str, Any] | None:
    """``run_reference`` arguments with ``config``'s hyperparameters; None if it differs.

    The reference is a float32 two-tower 64x64 tanh MLP on a discrete gymnax env with an
    annealed learning rate and no observation normalisation or action repeat.
    """
    import gymnax

    net, ppo, env = config.network, config.ppo, config.env
    if env.name not in gymnax.registered_envs or not envs.is_discrete(*envs.make(env.name)):
        return None
    same = (
        net.core == "none"
        and tuple(net.hidden_sizes) == (64, 64)
        and net.activation == "tanh"
        and not net.shared_torso
        and env.action_repeat == 1
        and not env.kwargs
        and not env.normalize_obs
        and ppo.anneal_lr
        and jnp.dtype(make_setup(config).compute_dtype) == jnp.float32
    )
    if not same:
        return None
    return {
        "env_name": env.name,
        "num_envs": env.num_envs,
        "num_steps": ppo.num_steps,
        # At least as many updates as one of our chunks, so both time similar work.
        "total_steps": max(config.train.total_steps, config.batch_size * config.chunk_updates),
        "update_epochs": ppo.update_epochs,
        "num_minibatches": ppo.num_minibatches,
        "lr": ppo.lr,
        "gamma": ppo.gamma,
        "gae_lambda": ppo.gae_lambda,
        "clip_eps": ppo.clip_eps,
        "ent_coef": ppo.ent_coef,
        "vf_coef": ppo.vf_coef,
        "max_grad_norm": ppo.max_grad_norm,
    }


def reference_figures(
    prefix: str, config: Config, profile: Profile, fast_prng: bool = False
) -> list[Figure]:
    """Steps/s and compile time of ``bench.reference_ppo`` with ``config``'s hyperparameters.

    Each run is a fresh child process, so the reference sees JAX exactly as shipped (this
    process has installed :mod:`jaxrl.core.prng`'s CPU lowering); ``fast_prng`` installs it there
    too, to separate what that lowering buys from the rest of jaxrl's train step.
    """
    kwargs = reference_kwargs(config)
    assert kwargs is not None
    runs = [
        run_child(
            f"{__name__}.reference_child",
            {"seed": config.seed, "kwargs": kwargs, "fast_prng": fast_prng},
        )
        for _ in range(profile.reference_repeats)
    ]
    return [
        rate(f"{prefix}/sps", "steps/s", [r["sps"] for r in runs]),
        cost(f"{prefix}/compile", "s", [r["compile_s"] for r in runs]),
    ]


def reference_child() -> None:
    """Child process entry: one ``run_reference``; ``sys.argv[1]`` is its JSON spec."""
    from .reference_ppo import run_reference

    spec = json.loads(sys.argv[1])
    if spec["fast_prng"]:
        from jaxrl.core import prng

        prng.install()
    print(json.dumps(run_reference(spec["seed"], **spec["kwargs"])))


def at_stage(stage: int, setup: Setup, runner: RunnerState) -> RunnerState:
    """``runner`` moved to curriculum ``stage`` (negative: from the end), envs restarted."""
    state = runner.features["curriculum"]
    stage = stage % setup.curriculum.num_stages
    features = {**runner.features, "curriculum": state.replace(stage=jnp.asarray(stage, jnp.int32))}
    return restart_matches(setup, runner.replace(features=features), jax.random.key(1))


def scale_child() -> None:
    """Child process entry: train figures of one config on ``JAX_NUM_CPU_DEVICES`` devices."""
    spec = json.loads(sys.argv[1])
    config = ConfigSpec("child", spec["path"], tuple(spec["overrides"])).load()
    figures = train_figures("", config, PROFILES[spec["profile"]])
    rows = [dataclasses.asdict(f) for f in figures]  # name, unit, higher_is_better, samples
    print(json.dumps({"devices": jax.device_count(), "figures": rows}))


def scale_figures(spec: ConfigSpec, num_envs: int, profile: Profile) -> tuple[list[Figure], str]:
    """Train figures on 1 device and on 2 (or every local accelerator), each in a child.

    On CPU the 2 devices are virtual (``JAX_NUM_CPU_DEVICES=2``) and share the same cores:
    the figure is the cost of sharding, not a speed-up. Returns the figures and a note.
    """
    platform = jax.devices()[0].platform
    many = 2 if platform == "cpu" else jax.local_device_count()
    if many < 2:
        return [], f"scale: one {platform} device, nothing to shard over"
    figures = []
    for devices in (1, many):
        child = {
            "path": spec.path,
            "overrides": [*spec.overrides, f"env.num_envs={num_envs}", f"mesh.devices={devices}"],
            "profile": profile.name,
        }
        extra = {"JAX_NUM_CPU_DEVICES": str(devices)} if platform == "cpu" else {}
        result = run_child(f"{__name__}.scale_child", child, extra)
        for f in result["figures"]:
            f["name"] = f"scale/{spec.label}/devices={devices}" + f["name"]
            figures.append(Figure(**{**f, "samples": tuple(f["samples"])}))
    kind = "virtual CPU devices sharing the cores" if platform == "cpu" else f"{platform}s"
    return figures, f"scale: devices={many} are {kind}"
