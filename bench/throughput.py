"""jaxrl's performance instrument: env, train and inference throughput, memory, precision.

``python -m bench.throughput`` takes about 2 minutes on a 2-core CPU; ``--tiny`` takes
seconds (a smoke test of the instrument itself, not a measurement); ``--full`` measures
more env counts with more repeats::

    python -m bench.throughput [--only env,train,inference,memory,precision,selfplay,scale]
        [--tiny | --full] [--repeats N] [--env NAME] [--env-param KEY=VALUE ...]
        [--num-envs 1,64,...]
        [--config FILE ...] [--set KEY=VALUE ...] [--train-envs N] [--reference]
        [--json FILE] [--compare OLD.json [--tolerance 0.10]] [--results NEW.json]

Method (after xland-minigrid's ``scripts/benchmark_xland.py``):

- Compile time is measured apart from run time (``jit(...).lower(...).compile()``) and
  is a figure of its own. The first call after compiling warms up and is not timed.
- Every timed call ends in ``jax.block_until_ready``. One repeat times ``k`` back-to-back
  calls, with ``k`` chosen from the warm-up call so that a repeat lasts at least the
  profile's ``min_repeat_s``. A figure is the median over repeats, with its min and max.
- Env-only throughput pre-samples the random actions and per-step keys outside the timed
  region. The timed function is one ``lax.scan`` of vmapped, auto-resetting steps that
  carries the last observation and the summed reward, so XLA cannot drop that work.
- Training throughput runs the real ``make_train_step`` chunk. ``train.total_steps`` is
  raised so that no update of a timed chunk is an idle no-op (checked with the chunk's
  ``train/updates`` metric).
- Self-play (``--only selfplay``) times ``configs/soccer_selfplay.yaml`` started in its league
  stage (pool lanes, current-policy and RulePolicy opponents, evaluation lanes) against the
  same config started in the RulePolicy stage before it (same envs, network and lanes; every
  opponent scripted), and ``configs/soccer_curriculum.yaml`` in its 3v3 stage at the same
  number of envs; the ratios are printed.
- Memory is measured in a fresh child process per figure. The child builds the run and runs
  one chunk of one update (peak memory is per update: a chunk's scan reuses its buffers).
  It reports the device allocator's ``peak_bytes_in_use`` on GPU/TPU and the process's
  peak RSS on CPU (``VmHWM``; see :func:`peak_rss_bytes` for why not ``ru_maxrss``). At
  small sizes the RSS peak is mostly XLA compiling, so the child also reports what the
  compiled step allocates (``memory_analysis()``), a deterministic figure.
- A figure measured for one section is reused by another that asks for the same thing
  (the float32 train and inference figures of the precision section, for instance).

Exit status: 0 when done and nothing regressed; 1 when a figure regressed past
``--tolerance`` against ``--compare``; 2 for bad command-line input (one line on stderr).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import functools
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from flax import struct

import envs
from jaxrl.acting import PolicyParams, act
from jaxrl.config import Config, ConfigError, load_config, parse_overrides
from jaxrl.setup import Setup, make_setup
from jaxrl.train_step import init_run, init_runner_state, make_train_step, restart_matches
from jaxrl.types import RunnerState

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("env", "train", "inference", "memory", "precision", "selfplay", "scale")
DEFAULT_SECTIONS = SECTIONS[:5]  # selfplay and scale compile several train steps: ask for them
SCALE_SEEDS = 8  # scale: members vmapped in one program, against 1
SCALE_DEVICE_ENVS = 64  # scale: envs sharded over 2 devices, against 1 (unless --train-envs)
SELFPLAY_CONFIG = "configs/soccer_selfplay.yaml"  # league stage vs its RulePolicy stage
CURRICULUM_CONFIG = "configs/soccer_curriculum.yaml"  # its last stage: 3v3 vs RulePolicy
DEFAULT_CONFIG = "configs/cartpole.yaml"
# The recurrent variant of a config: a GRU core on a shared 128-wide torso.
RECURRENT_OVERRIDES = (
    "network.core=gru",
    "network.core_size=128",
    "network.hidden_sizes=[128]",
    "network.shared_torso=true",
    "ppo.sequence_length=16",
)
INFERENCE_QUANTITIES = ("p50", "p95", "p99", "actions_per_s", "compile")
_BENCH_UPDATES = 2**30  # updates in a benchmark "run": never reached, fits the int32 counter
_MIB = 2**20


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


# ---- figures ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Figure:
    """One measured quantity: a sample per repeat, its unit and which direction is good."""

    name: str  # "<section>/<subject>/<quantity>", e.g. "train/cartpole/sps"
    unit: str  # "steps/s", "us", "s", "MiB", ...
    higher_is_better: bool  # rates: True; latency, compile time, memory: False
    samples: tuple[float, ...]  # one value per repeat

    @property
    def median(self) -> float:
        """Median over repeats."""
        return float(np.median(self.samples))

    @property
    def min(self) -> float:
        """Smallest repeat."""
        return float(np.min(self.samples))

    @property
    def max(self) -> float:
        """Largest repeat."""
        return float(np.max(self.samples))

    def to_json(self) -> dict[str, Any]:
        """The record written by ``--json`` under ``results[name]``."""
        return {
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "repeats": len(self.samples),
        }


def rate(name: str, unit: str, samples: Sequence[float]) -> Figure:
    """A higher-is-better figure."""
    return Figure(name, unit, True, tuple(float(s) for s in samples))


def cost(name: str, unit: str, samples: Sequence[float]) -> Figure:
    """A lower-is-better figure."""
    return Figure(name, unit, False, tuple(float(s) for s in samples))


# ---- profiles -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Profile:
    """How much work each sub-benchmark does."""

    name: str
    repeats: int  # timed repeats of every throughput and latency figure
    min_repeat_s: float  # a repeat times back-to-back calls for at least this long
    compile_repeats: int  # fresh compiles behind a compile-time figure
    env_counts: tuple[int, ...]  # env: numbers of parallel envs
    env_steps_target: int  # env: about this many env steps per timed call, ...
    env_steps_range: tuple[int, int]  # ... the scan length clamped to [lo, hi]
    recurrent: bool  # train, inference: also the recurrent variant of the first config
    train_overrides: tuple[str, ...]  # appended to every config's overrides
    infer_batches: tuple[int, ...]  # inference: batch sizes
    infer_calls: tuple[int, int]  # inference: [min, max] timed act() calls per repeat, ...
    infer_repeat_s: float  # ... as many as take about this long (percentiles are per repeat)
    memory_envs: tuple[int, ...]  # memory: numbers of envs
    memory_recurrent: bool  # memory: also the recurrent variant
    memory_repeats: int  # memory: fresh child processes per figure
    reference_repeats: int  # --reference: reference runs (each compiles)


PROFILES = {
    "tiny": Profile(
        name="tiny",
        repeats=3,
        min_repeat_s=0.0,
        compile_repeats=1,
        env_counts=(1, 64),
        env_steps_target=2**10,
        env_steps_range=(8, 64),
        recurrent=False,
        train_overrides=("ppo.num_steps=32", "train.updates_per_chunk=1"),
        infer_batches=(1, 64),
        infer_calls=(100, 100),
        infer_repeat_s=0.0,
        memory_envs=(4,),
        memory_recurrent=False,
        memory_repeats=1,
        reference_repeats=1,
    ),
    "default": Profile(
        name="default",
        repeats=5,
        min_repeat_s=0.2,
        compile_repeats=1,
        env_counts=(1, 64, 1024, 8192),
        env_steps_target=2**20,
        env_steps_range=(64, 1000),
        recurrent=True,
        # Shorter chunks than cartpole.yaml's 64 updates: the same work per update, fewer
        # seconds per timed call (a GRU chunk of 64 updates takes seconds on 2 cores).
        train_overrides=("train.updates_per_chunk=16",),
        infer_batches=(1, 4096),
        infer_calls=(50, 200),
        infer_repeat_s=0.5,
        memory_envs=(4, 512, 4096),
        memory_recurrent=False,
        memory_repeats=1,
        reference_repeats=2,
    ),
    "full": Profile(
        name="full",
        repeats=10,
        min_repeat_s=0.5,
        compile_repeats=3,
        env_counts=(1, 64, 1024, 8192, 65536),
        env_steps_target=2**22,
        env_steps_range=(64, 1000),
        recurrent=True,
        train_overrides=(),
        infer_batches=(1, 256, 4096),
        infer_calls=(200, 1000),
        infer_repeat_s=2.0,
        memory_envs=(4, 512, 4096, 65536),
        memory_recurrent=True,
        memory_repeats=3,
        reference_repeats=3,
    ),
}


# ---- timing and memory helpers ------------------------------------------------------------


def time_calls(run: Callable[[], Any], repeats: int, min_repeat_s: float) -> list[float]:
    """Seconds per call of ``run``, which must block until its result is ready.

    The first call warms up and calibrates how many back-to-back calls make a repeat of at
    least ``min_repeat_s``; it is not part of the result.

    Returns:
      The mean seconds per call of each of ``repeats`` repeats.
    """
    start = time.perf_counter()
    run()
    first = time.perf_counter() - start
    calls = max(1, math.ceil(min_repeat_s / max(first, 1e-9)))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        times.append((time.perf_counter() - start) / calls)
    return times


def compile_seconds(jitted: Any, *args: Any) -> tuple[float, Any]:
    """Trace, lower and compile ``jitted`` for ``args``: ``(seconds, executable)``."""
    start = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    return time.perf_counter() - start, compiled


def available_bytes() -> int:
    """Memory a benchmark may take: free device memory on GPU/TPU, available RAM on CPU."""
    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def tree_bytes(tree: Any) -> int:
    """Bytes of all array leaves (works on ``jax.eval_shape`` results)."""
    return sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- env throughput -----------------------------------------------------------------------


class EnvBenchCarry(struct.PyTreeNode):
    """The env benchmark's scan carry."""

    env_state: Any  # [B] env states
    obs: jax.Array  # [B, *obs_shape] last observation (carried so XLA keeps computing it)
    reward_sum: jax.Array  # [B, *reward_shape] float32 summed reward (same reason)
    agent_steps: jax.Array  # () int32 active agent-steps, from info["agent_mask"] if present


def env_scan(env: Any, env_params: Any, carry: EnvBenchCarry, actions, keys) -> EnvBenchCarry:
    """``T`` vmapped, auto-resetting steps of ``B`` envs with pre-sampled inputs.

    Args:
      env: a gymnax-1.0 env (auto-resetting ``step``).
      env_params: its params.
      carry: the initial states and observations, zero sums.
      actions: ``[T, B, *agent_shape, *action_shape]`` pre-sampled actions.
      keys: ``[T, B]`` per-step env keys.
    """
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def body(c: EnvBenchCarry, inputs) -> tuple[EnvBenchCarry, None]:
        action, key = inputs
        obs, env_state, reward, _, _, info = step(key, c.env_state, action, env_params)
        agent_steps = c.agent_steps
        if "agent_mask" in info:  # trace time: a multi-agent env reporting its active slots
            agent_steps = agent_steps + info["agent_mask"].sum(dtype=jnp.int32)
        return EnvBenchCarry(
            env_state=env_state,
            obs=obs,
            reward_sum=c.reward_sum + reward.astype(jnp.float32),
            agent_steps=agent_steps,
        ), None

    carry, _ = jax.lax.scan(body, carry, (actions, keys))
    return carry


def env_scan_length(num_envs: int, profile: Profile) -> int:
    """Steps per timed call: about ``env_steps_target`` env steps, clamped."""
    lo, hi = profile.env_steps_range
    return int(min(hi, max(lo, profile.env_steps_target // num_envs)))


def env_fits(name: str, kwargs: dict[str, Any], num_envs: int, profile: Profile) -> bool:
    """Whether the env benchmark at ``num_envs`` should fit in half the free memory."""
    env, env_params = envs.make(name, **kwargs)
    obs, state = jax.eval_shape(env.reset, jax.random.key(0), env_params)
    agents = int(getattr(env, "num_agents", 1))
    # Step and reset branches, the select and the scan's double buffer: ~8 copies of
    # state and obs; plus the pre-sampled actions (<= 8 bytes each) and keys (8 bytes).
    need = num_envs * (
        8 * tree_bytes((obs, state)) + env_scan_length(num_envs, profile) * (8 * agents + 8)
    )
    return need < 0.5 * available_bytes()


def env_figures(name: str, kwargs: dict[str, Any], num_envs: int, profile: Profile) -> list[Figure]:
    """Raw env steps/s for ``num_envs`` envs (and agent-steps/s for multi-agent envs).

    Args:
      name: a registered env name.
      kwargs: overrides of its ``EnvParams``.
      num_envs: parallel (vmapped) env instances.
      profile: scan length, repeats.
    """
    env, env_params = envs.make(name, **kwargs)
    agent_shape = (int(env.num_agents),) if hasattr(env, "num_agents") else ()
    num_steps = env_scan_length(num_envs, profile)
    key_reset, key_actions, key_steps = jax.random.split(jax.random.key(0), 3)

    obs, env_state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(key_reset, num_envs), env_params
    )
    space = env.action_space(env_params)
    shape = (num_steps, num_envs, *agent_shape)
    # Sampled outside the timed region: the figure is the env's speed, not the sampler's.
    actions = jax.jit(lambda k: jax.vmap(space.sample)(jax.random.split(k, math.prod(shape))))(
        key_actions
    )
    actions = actions.reshape(shape + actions.shape[1:])
    keys = jax.random.split(key_steps, (num_steps, num_envs))
    _, _, reward, _, _, info = jax.eval_shape(
        jax.vmap(env.step, in_axes=(0, 0, 0, None)), keys[0], env_state, actions[0], env_params
    )
    reports_active = bool(agent_shape) and "agent_mask" in info
    carry = EnvBenchCarry(
        env_state=env_state,
        obs=obs,
        reward_sum=jnp.zeros(reward.shape, jnp.float32),
        agent_steps=jnp.zeros((), jnp.int32),
    )
    jax.block_until_ready((carry, actions, keys))

    compiles = []
    for _ in range(profile.compile_repeats):
        # A fresh jit per compile: a real trace, lowering and XLA compile.
        seconds, compiled = compile_seconds(
            jax.jit(functools.partial(env_scan, env, env_params)), carry, actions, keys
        )
        compiles.append(seconds)
    last: list[EnvBenchCarry] = []

    def call() -> None:
        last[:] = [jax.block_until_ready(compiled(carry, actions, keys))]

    seconds = time_calls(call, profile.repeats, profile.min_repeat_s)
    env_steps = num_steps * num_envs
    sps = [env_steps / s for s in seconds]
    tag = ",".join(f"{k}={v}" for k, v in sorted(kwargs.items()))
    prefix = f"env/{name}" + (f"[{tag}]" if tag else "") + f"/n={num_envs}"
    figures = [rate(f"{prefix}/sps", "steps/s", sps)]
    if agent_shape:
        # Active agents if the env reports them in info["agent_mask"], else every slot.
        if reports_active:
            per_step = int(last[0].agent_steps) / env_steps
        else:
            per_step = math.prod(agent_shape)
        figures.append(rate(f"{prefix}/agent_sps", "agent-steps/s", [s * per_step for s in sps]))
    figures.append(cost(f"{prefix}/compile", "s", compiles))
    return figures


# ---- training throughput ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ConfigSpec:
    """A config to benchmark: a label, its YAML file and overrides."""

    label: str  # names the figures: "train/<label>/sps"
    path: str
    overrides: tuple[str, ...]

    def load(self, extra: Sequence[str] = ()) -> Config:
        """The config with overrides, its ``train.total_steps`` raised out of reach."""
        # Any total that passes validation gives the batch size; then the real one.
        config = load_config(self.path, [*self.overrides, *extra, f"train.total_steps={2**62}"])
        steps = f"train.total_steps={config.batch_size * _BENCH_UPDATES}"
        return load_config(self.path, [*self.overrides, *extra, steps])

    def load_as_written(self, extra: Sequence[str] = ()) -> Config:
        """The config with overrides and nothing else changed."""
        return load_config(self.path, [*self.overrides, *extra])


def train_figures(
    prefix: str,
    config: Config,
    profile: Profile,
    prepare: Callable[[Setup, RunnerState], RunnerState] | None = None,
) -> list[Figure]:
    """Training steps/s and updates/s of the compiled chunk, and its compile time.

    ``prepare`` edits the fresh runner state before compiling (e.g. a curriculum stage).
    """
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

    seconds = time_calls(call, profile.repeats, profile.min_repeat_s)
    ran = sorted({int(u) for u in np.concatenate([np.ravel(u) for u in updates])})
    if ran != [config.chunk_updates]:
        raise RuntimeError(
            f"{prefix}: chunks ran {ran} updates, expected {config.chunk_updates} each"
        )
    steps = config.chunk_updates * config.batch_size * setup.members.count  # all members
    return [
        rate(f"{prefix}/sps", "steps/s", [steps / s for s in seconds]),
        rate(f"{prefix}/updates_per_s", "updates/s", [config.chunk_updates / s for s in seconds]),
        cost(f"{prefix}/compile", "s", compiles),
    ]


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
    process has installed :mod:`jaxrl.prng`'s CPU lowering); ``fast_prng`` installs it there
    too, to separate what that lowering buys from the rest of jaxrl's train step.
    """
    kwargs = reference_kwargs(config)
    assert kwargs is not None
    runs = [
        _run_child(
            "reference_child", {"seed": config.seed, "kwargs": kwargs, "fast_prng": fast_prng}
        )
        for _ in range(profile.reference_repeats)
    ]
    return [
        rate(f"{prefix}/sps", "steps/s", [r["sps"] for r in runs]),
        cost(f"{prefix}/compile", "s", [r["compile_s"] for r in runs]),
    ]


def reference_child() -> None:
    """Child process entry: one ``run_reference``; ``sys.argv[1]`` is its JSON spec."""
    from bench.reference_ppo import run_reference

    spec = json.loads(sys.argv[1])
    if spec["fast_prng"]:
        from jaxrl import prng

        prng.install()
    print(json.dumps(run_reference(spec["seed"], **spec["kwargs"])))


def at_stage(stage: int, setup: Setup, runner: RunnerState) -> RunnerState:
    """``runner`` moved to curriculum ``stage`` (negative: from the end), envs restarted."""
    state = runner.features["curriculum"]
    stage = stage % setup.curriculum.num_stages
    features = {**runner.features, "curriculum": state.replace(stage=jnp.asarray(stage, jnp.int32))}
    return restart_matches(setup, runner.replace(features=features), jax.random.key(1))


# ---- inference latency --------------------------------------------------------------------


def inference_figures(
    prefix: str, setup: Setup, batch: int, profile: Profile, quantities: Sequence[str]
) -> list[Figure]:
    """Latency percentiles and actions/s of jitted ``act`` (sampling) at ``batch``.

    Args:
      prefix: names the figures ``<prefix>/<quantity>``.
      setup: the run whose network acts; params are freshly initialised.
      batch: observations per call.
      profile: repeats and calls per repeat.
      quantities: any of ``p50``, ``p95``, ``p99`` (microseconds per call, percentiles of
        each repeat's calls), ``actions_per_s`` (batch x calls / seconds) and ``compile``.
    """
    key_params, key_obs, key_act = jax.random.split(jax.random.key(0), 3)
    runner = init_runner_state(setup, key_params)
    params = PolicyParams(params=runner.params, obs_stats=runner.obs_stats)
    hidden = setup.network.initial_hidden(batch)
    obs = jax.random.normal(key_obs, (batch, *setup.obs_shape), jnp.float32)
    is_first = jnp.zeros((batch,), bool)
    keys = list(jax.random.split(key_act, profile.infer_calls[1] + 10))  # split before timing
    compiles = []
    for _ in range(profile.compile_repeats):
        # A fresh jit per compile: a real trace, lowering and XLA compile.
        jitted = jax.jit(functools.partial(act, setup.policy), static_argnames="deterministic")
        seconds, compiled = compile_seconds(jitted, params, hidden, obs, is_first, keys[0])
        compiles.append(seconds)
    start = time.perf_counter()
    for key in keys[-10:]:  # warm-up, and a latency estimate to size the repeats
        jax.block_until_ready(compiled(params, hidden, obs, is_first, key))
    latency = (time.perf_counter() - start) / 10
    low, high = profile.infer_calls
    calls = int(min(high, max(low, profile.infer_repeat_s // latency)))
    keys = keys[:calls]

    samples: dict[str, list[float]] = {q: [] for q in ("p50", "p95", "p99", "actions_per_s")}
    for _ in range(profile.repeats):
        latencies = np.empty(calls)
        for i, key in enumerate(keys):
            start = time.perf_counter()
            jax.block_until_ready(compiled(params, hidden, obs, is_first, key))
            latencies[i] = time.perf_counter() - start
        for q in (50, 95, 99):
            samples[f"p{q}"].append(float(np.percentile(latencies, q)) * 1e6)
        samples["actions_per_s"].append(batch * calls / latencies.sum())

    figures = []
    for q in quantities:
        if q == "actions_per_s":
            figures.append(rate(f"{prefix}/actions_per_s", "actions/s", samples[q]))
        elif q == "compile":
            figures.append(cost(f"{prefix}/compile", "s", compiles))
        else:
            figures.append(cost(f"{prefix}/{q}", "us", samples[q]))
    return figures


# ---- memory -------------------------------------------------------------------------------


def peak_rss_bytes() -> int:
    """This process's peak resident set size.

    Linux's ``VmHWM`` (``/proc/self/status``) where available: ``ru_maxrss`` survives
    ``exec``, so in a child it is at least the parent's RSS when it forked (measured: a
    13 MiB child of a 327 MiB parent reports 327 MiB). Elsewhere ``ru_maxrss``.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: KiB on Linux, bytes on macOS
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def memory_child() -> None:
    """Child process entry: build a run, train one update, print peak memory as JSON.

    ``sys.argv[1]`` is ``{"path", "overrides", "num_envs"}``.
    """
    spec = json.loads(sys.argv[1])
    device = jax.devices()[0]  # start the backend before the baseline
    baseline = peak_rss_bytes()
    config = ConfigSpec("child", spec["path"], tuple(spec["overrides"])).load(
        [f"env.num_envs={spec['num_envs']}", "train.updates_per_chunk=1"]
    )
    setup = make_setup(config)
    runner = init_runner_state(setup, jax.random.key(config.seed))
    compiled = make_train_step(setup).lower(runner).compile()
    analysis = compiled.memory_analysis()
    runner, metrics = jax.block_until_ready(compiled(runner))
    assert int(metrics["train/updates"]) == 1
    stats = (device.memory_stats() or {}) if device.platform != "cpu" else {}
    xla_buffers = None
    if analysis is not None:
        # What XLA allocates for one call: live arguments, outputs that do not reuse a
        # donated argument, and scratch. Deterministic, unlike RSS.
        xla_buffers = (
            analysis.argument_size_in_bytes
            + analysis.output_size_in_bytes
            - analysis.alias_size_in_bytes
            + analysis.temp_size_in_bytes
        )
    print(
        json.dumps(
            {
                "platform": device.platform,
                "baseline_rss": baseline,
                "peak_rss": peak_rss_bytes(),
                "peak_device": stats.get("peak_bytes_in_use"),
                "xla_buffers": xla_buffers,
            }
        )
    )


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
        result = _run_child("scale_child", child, extra)
        for f in result["figures"]:
            f["name"] = f"scale/{spec.label}/devices={devices}" + f["name"]
            figures.append(Figure(**{**f, "samples": tuple(f["samples"])}))
    kind = "virtual CPU devices sharing the cores" if platform == "cpu" else f"{platform}s"
    return figures, f"scale: devices={many} are {kind}"


def _run_child(
    entry: str, spec: dict[str, Any], extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run ``bench.throughput.<entry>()`` in a fresh Python with ``spec``; its last JSON line."""
    env = {**os.environ, **(extra_env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from bench.throughput import {entry}; {entry}()",
            json.dumps(spec),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{entry} ({spec}) failed: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _run_memory_child(path: str, overrides: Sequence[str], num_envs: int) -> dict[str, Any]:
    spec = {"path": path, "overrides": list(overrides), "num_envs": num_envs}
    return _run_child("memory_child", spec)


def train_fits(config: Config) -> bool:
    """Whether one update of ``config`` should fit in half the free memory (estimated)."""
    setup = make_setup(config)
    obs_bytes = 4 * math.prod(setup.obs_shape)
    # The rollout's Transition (obs + ~12 scalars per step), GAE and the shuffled
    # minibatch copies: ~6 copies of [T, B] transitions.
    need = 6 * config.batch_size * (obs_bytes + 64)
    return need < 0.5 * available_bytes()


def memory_figures(jobs: Sequence[tuple[str, ConfigSpec, int]], profile: Profile) -> list[Figure]:
    """Peak memory of one update per ``(label, spec, num_envs)``, in fresh child processes.

    The children run concurrently, one per CPU: their peak memory does not depend on timing.
    """
    runs = [job for job in jobs for _ in range(profile.memory_repeats)]
    workers = max(1, min(len(runs), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        outputs = list(
            pool.map(lambda job: _run_memory_child(job[1].path, job[1].overrides, job[2]), runs)
        )
    figures = []
    for label, spec, num_envs in jobs:
        mine = [
            out for job, out in zip(runs, outputs, strict=True) if job == (label, spec, num_envs)
        ]
        prefix = f"memory/{label}/n={num_envs}"
        if mine[0]["peak_device"] is not None:
            samples = [out["peak_device"] / _MIB for out in mine]
            figures.append(cost(f"{prefix}/peak_device", "MiB", samples))
        else:
            samples = [out["peak_rss"] / _MIB for out in mine]
            figures.append(cost(f"{prefix}/peak_rss", "MiB", samples))
        if mine[0]["xla_buffers"] is not None:
            samples = [out["xla_buffers"] / _MIB for out in mine]
            figures.append(cost(f"{prefix}/xla_buffers", "MiB", samples))
    if outputs and outputs[0]["peak_device"] is None:
        # What a child holds before building anything: python, jax, jaxrl and the XLA client.
        samples = [out["baseline_rss"] / _MIB for out in outputs]
        figures.append(cost("memory/baseline_rss", "MiB", samples))
    return figures


# ---- orchestration ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything a run measures, resolved and validated from the command line."""

    profile: Profile
    sections: tuple[str, ...]
    env_name: str
    env_kwargs: dict[str, Any]  # --env-param overrides of the env benchmark's EnvParams
    env_counts: tuple[int, ...]
    specs: tuple[ConfigSpec, ...]  # train section configs
    train_envs: int | None  # --train-envs: env.num_envs for train, reference and precision
    reference: bool


class Measurements:
    """Train and inference figures measured so far, reused when asked for again.

    Keyed by what the measurement depends on, so that (for instance) the precision
    section's float32 figures are the train and inference sections' figures, not a second
    compile and run of the same thing.
    """

    def __init__(self, profile: Profile):
        """Nothing measured yet; measurements will use ``profile``."""
        self.profile = profile
        self._train: dict[str, list[Figure]] = {}
        self._inference: dict[tuple[str, int], list[Figure]] = {}

    def train(self, prefix: str, config: Config) -> list[Figure]:
        """:func:`train_figures` of ``config``, named under ``prefix``."""
        key = json.dumps(config.to_dict(), sort_keys=True)
        if key not in self._train:
            self._train[key] = train_figures("", config, self.profile)
        return [dataclasses.replace(f, name=prefix + f.name) for f in self._train[key]]

    def inference(
        self, prefix: str, config: Config, batch: int, quantities: Sequence[str]
    ) -> list[Figure]:
        """:func:`inference_figures` of ``config``'s policy at ``batch``, under ``prefix``."""
        policy = config.to_dict()
        env = policy["env"]
        key = json.dumps(
            [policy["network"], policy["precision"], env["name"], env["kwargs"]], sort_keys=True
        )
        if (key, batch) not in self._inference:
            self._inference[key, batch] = inference_figures(
                "", make_setup(config), batch, self.profile, INFERENCE_QUANTITIES
            )
        wanted = [f"/{q}" for q in quantities]
        return [
            dataclasses.replace(f, name=prefix + f.name)
            for f in self._inference[key, batch]
            if f.name in wanted
        ]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a run produced besides the figures."""

    ratios: dict[str, float]  # derived: ours/reference, bfloat16/float32 (ratio of medians)
    notes: list[str]  # skipped measurements and why
    section_wall_s: dict[str, float]  # wall time of each sub-benchmark, compiles included


def run_plan(plan: Plan) -> tuple[list[Figure], Outcome]:
    """Run the selected sub-benchmarks."""
    profile = plan.profile
    measure = Measurements(profile)
    figures: list[Figure] = []
    outcome = Outcome(ratios={}, notes=[], section_wall_s={})
    train_extra = [f"env.num_envs={plan.train_envs}"] if plan.train_envs else []
    first = plan.specs[0]

    def report(new: list[Figure]) -> None:
        for f in new:
            _log(f"  {f.name}: {_fmt(f.median)} {f.unit} [{_fmt(f.min)} - {_fmt(f.max)}]")
        figures.extend(new)

    def median_of(name: str) -> float:
        return next(f.median for f in figures if f.name == name)

    for section in plan.sections:
        start = time.perf_counter()
        if section == "env":
            for num_envs in plan.env_counts:
                if not env_fits(plan.env_name, plan.env_kwargs, num_envs, profile):
                    outcome.notes.append(
                        f"env {plan.env_name} n={num_envs}: skipped, not enough memory"
                    )
                    continue
                _log(f"[env] {plan.env_name}, {num_envs} envs")
                report(env_figures(plan.env_name, plan.env_kwargs, num_envs, profile))

        elif section == "train":
            for spec in plan.specs:
                _log(f"[train] {spec.label}")
                report(measure.train(f"train/{spec.label}", spec.load(train_extra)))
                if not plan.reference:
                    continue
                written = spec.load_as_written(train_extra)
                if reference_kwargs(written) is None:
                    outcome.notes.append(
                        f"reference: skipped for {spec.label} (not the reference's model)"
                    )
                    continue
                _log(f"[train] {spec.label}: bench.reference_ppo")
                report(reference_figures(f"train/{spec.label}/reference", written, profile))
                _log(f"[train] {spec.label}: bench.reference_ppo with jaxrl.prng installed")
                report(
                    reference_figures(
                        f"train/{spec.label}/reference_fast_prng", written, profile, fast_prng=True
                    )
                )
                ours = median_of(f"train/{spec.label}/sps")
                for name in ("reference", "reference_fast_prng"):
                    theirs = median_of(f"train/{spec.label}/{name}/sps")
                    outcome.ratios[f"train/{spec.label}/sps ours/{name}"] = ours / theirs

        elif section == "inference":
            for spec in plan.specs:
                for batch in profile.infer_batches:
                    _log(f"[inference] {spec.label}, batch {batch}")
                    report(
                        measure.inference(
                            f"inference/{spec.label}/b={batch}",
                            spec.load(train_extra),
                            batch,
                            INFERENCE_QUANTITIES,
                        )
                    )

        elif section == "memory":
            jobs = []
            for spec in plan.specs if profile.memory_recurrent else plan.specs[:1]:
                for num_envs in profile.memory_envs:
                    if train_fits(spec.load([f"env.num_envs={num_envs}"])):
                        jobs.append((spec.label, spec, num_envs))
                    else:
                        outcome.notes.append(
                            f"memory {spec.label} n={num_envs}: skipped, not enough memory"
                        )
            _log(f"[memory] {len(jobs)} configurations, each in fresh processes")
            report(memory_figures(jobs, profile))

        elif section == "precision":
            batch = max(profile.infer_batches)
            for dtype in ("float32", "bfloat16"):
                _log(f"[precision] {first.label}, {dtype}")
                config = first.load([*train_extra, f"precision={dtype}"])
                prefix = f"precision/{first.label}/{dtype}"
                report(measure.train(prefix, config))
                for b in sorted({1, batch}):
                    report(measure.inference(f"{prefix}/act_b={b}", config, b, ("p50",)))
            for quantity in ("sps", f"act_b={batch}/p50"):
                bf16 = median_of(f"precision/{first.label}/bfloat16/{quantity}")
                f32 = median_of(f"precision/{first.label}/float32/{quantity}")
                outcome.ratios[f"precision/{first.label}/{quantity} bfloat16/float32"] = bf16 / f32
        elif section == "selfplay":
            num_envs = plan.train_envs or load_config(REPO / SELFPLAY_CONFIG).env.num_envs
            extra = [f"env.num_envs={num_envs}", *profile.train_overrides]
            for label, path, stage in (
                ("league", SELFPLAY_CONFIG, -1),
                ("rule_stage", SELFPLAY_CONFIG, -2),
                ("curriculum_3v3", CURRICULUM_CONFIG, -1),
            ):
                config = load_config(REPO / path, extra)
                _log(f"[selfplay] {label}: {path}, stage {stage}, {num_envs} envs")
                report(
                    train_figures(
                        f"selfplay/{label}", config, profile, functools.partial(at_stage, stage)
                    )
                )
            league = median_of("selfplay/league/sps")
            for other in ("rule_stage", "curriculum_3v3"):
                ratio = league / median_of(f"selfplay/{other}/sps")
                outcome.ratios[f"selfplay/league/sps over {other}"] = ratio
        elif section == "scale":
            for seeds in (1, SCALE_SEEDS):
                _log(f"[scale] {first.label}: train.num_seeds={seeds}, vmapped")
                config = first.load([*train_extra, f"train.num_seeds={seeds}"])
                report(measure.train(f"scale/{first.label}/seeds={seeds}", config))
            ratio = median_of(f"scale/{first.label}/seeds={SCALE_SEEDS}/sps") / median_of(
                f"scale/{first.label}/seeds=1/sps"
            )
            outcome.ratios[f"scale/{first.label}/sps seeds={SCALE_SEEDS}/seeds=1"] = ratio
            num_envs = plan.train_envs or SCALE_DEVICE_ENVS
            _log(f"[scale] {first.label}: {num_envs} envs on 1 device and sharded, in children")
            new, note = scale_figures(first, num_envs, profile)
            report(new)
            outcome.notes.append(note)
            if new:
                many = new[-1].name.split("/")[2]
                ratio = median_of(f"scale/{first.label}/{many}/sps") / median_of(
                    f"scale/{first.label}/devices=1/sps"
                )
                outcome.ratios[f"scale/{first.label}/sps {many}/devices=1"] = ratio
        outcome.section_wall_s[section] = time.perf_counter() - start
        _log(f"[{section}] {outcome.section_wall_s[section]:.1f} s")
    return figures, outcome


# ---- output -------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1e4:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def machine_meta(profile_name: str) -> dict[str, Any]:
    """Where and when the figures were taken."""
    device = jax.devices()[0]
    return {
        "device_kind": device.device_kind,
        "platform": device.platform,
        "device_count": jax.device_count(),
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "loadavg_start": list(os.getloadavg()),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "profile": profile_name,
        "argv": sys.argv[1:],
    }


def header(meta: dict[str, Any]) -> str:
    """The table's first line: device, jax version, CPU count, date, load, profile."""
    load = " ".join(f"{x:.2f}" for x in meta.get("loadavg_start", []))
    return (
        f"# jaxrl bench | device {meta.get('device_kind', '?')} "
        f"(platform {meta.get('platform', '?')}) x{meta.get('device_count', '?')} | "
        f"jax {meta.get('jax_version', '?')} | {meta.get('cpu_count', '?')} CPUs | "
        f"{meta.get('date', '?')} | load {load or '?'} | profile {meta.get('profile', '?')}"
        + (f" | XLA_FLAGS={meta['xla_flags']}" if meta.get("xla_flags") else "")
    )


def table(results: dict[str, dict[str, Any]]) -> str:
    """Rows of name, median, spread (min - max), unit and repeats."""
    rows = [("name", "median", "spread (min - max)", "unit", "repeats")]
    for name, r in results.items():
        spread = f"{_fmt(r['min'])} - {_fmt(r['max'])}"
        rows.append((name, _fmt(r["median"]), spread, r["unit"], str(r["repeats"])))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = []
    for row in rows:
        cells = [
            row[0].ljust(widths[0]),
            row[1].rjust(widths[1]),
            row[2].rjust(widths[2]),
            row[3].ljust(widths[3]),
            row[4].rjust(widths[4]),
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def read_results(path: str, flag: str) -> dict[str, Any]:
    """Read and check a ``--json`` file; raise :class:`UsageError` naming the problem."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as err:
        raise UsageError(f"{flag}: cannot read {path}: {err.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"{flag}: {path} is not valid JSON: {err}") from None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, dict):
        raise UsageError(f"{flag}: {path} has no 'results' mapping (not a bench JSON file)")
    for name, r in results.items():
        ok = (
            isinstance(r, dict)
            and all(isinstance(r.get(k), (int, float)) for k in ("median", "min", "max"))
            and isinstance(r.get("higher_is_better"), bool)
        )
        if not ok:
            raise UsageError(
                f"{flag}: {path}: results[{name!r}] lacks a numeric median/min/max "
                "or a boolean higher_is_better"
            )
    return data


def compare(new: dict[str, Any], old: dict[str, Any], tolerance: float) -> tuple[str, list[str]]:
    """Ratios new/old of the figures present in both: ``(report, regressed names)``."""
    shared = [name for name in new["results"] if name in old["results"]]
    rows = [("name", "old", "new", "new/old", "verdict")]
    regressed = []
    for name in shared:
        n, o = new["results"][name], old["results"][name]
        ratio = n["median"] / o["median"] if o["median"] else math.inf
        if n["higher_is_better"]:
            worse = n["median"] < o["median"] * (1 - tolerance)
            better = n["median"] > o["median"] * (1 + tolerance)
            overlap = n["max"] >= o["min"]
        else:
            worse = n["median"] > o["median"] * (1 + tolerance)
            better = n["median"] < o["median"] * (1 - tolerance)
            overlap = n["min"] <= o["max"]
        if worse:
            regressed.append(name)
            verdict = "REGRESSED" + (" (spreads overlap)" if overlap else "")
        else:
            verdict = "better" if better else "ok"
        rows.append((name, _fmt(o["median"]), _fmt(n["median"]), f"{ratio:.3f}", verdict))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        f"# compare: new/old medians, {len(shared)} figures in both; regression past "
        f"{tolerance:.0%} (rates: lower, latency/compile/memory: higher)"
    ]
    for row in rows:
        lines.append(
            "  ".join(
                [row[0].ljust(widths[0])]
                + [c.rjust(w) for c, w in zip(row[1:4], widths[1:4], strict=True)]
                + [row[4]]
            ).rstrip()
        )
    only_new = len(new["results"]) - len(shared)
    only_old = len(old["results"]) - len(shared)
    if only_new or only_old:
        lines.append(f"# not compared: {only_new} only in new, {only_old} only in old")
    if old.get("meta", {}).get("profile") != new.get("meta", {}).get("profile"):
        lines.append(
            f"# warning: profiles differ (old {old.get('meta', {}).get('profile')}, "
            f"new {new.get('meta', {}).get('profile')})"
        )
    return "\n".join(lines), regressed


# ---- command line -------------------------------------------------------------------------


def _positive_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _positive_int(text: str) -> int:
    (value,) = _positive_ints(text)
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    p = argparse.ArgumentParser(
        prog="python -m bench.throughput",
        description="jaxrl throughput, latency and memory benchmarks (figures: median over "
        "repeats with min-max spread; compile time reported separately).",
    )
    p.add_argument(
        "--only",
        default=",".join(DEFAULT_SECTIONS),
        help=f"comma-separated sub-benchmarks out of {','.join(SECTIONS)} "
        f"(default: {','.join(DEFAULT_SECTIONS)})",
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--tiny", action="store_true", help="seconds; checks the instrument")
    size.add_argument("--full", action="store_true", help="more env counts and repeats")
    p.add_argument("--repeats", type=_positive_int, help="timed repeats (overrides profile)")
    p.add_argument("--env", default="CartPole-v1", help="env benchmark: registered env name")
    p.add_argument(
        "--env-param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env benchmark: EnvParams override, e.g. blue_size=3 (repeatable)",
    )
    p.add_argument(
        "--num-envs", type=_positive_ints, help="env benchmark: env counts, e.g. 1,64,1024"
    )
    p.add_argument(
        "--config",
        action="append",
        metavar="FILE",
        help="train/inference/memory/precision config (repeatable; default "
        f"{DEFAULT_CONFIG} and its GRU variant, labelled 'recurrent')",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override applied to every config (repeatable)",
    )
    p.add_argument(
        "--train-envs",
        type=_positive_int,
        help="env.num_envs for train, --reference and precision",
    )
    p.add_argument(
        "--reference",
        action="store_true",
        help="also run bench.reference_ppo (PureJaxRL-style, in a fresh process) with the same "
        "hyperparameters, as shipped and with jaxrl's CPU PRNG lowering, and print the ratios",
    )
    p.add_argument("--json", metavar="FILE", help="write {meta, results} as JSON")
    p.add_argument(
        "--compare",
        metavar="OLD.json",
        help="print new/old ratios; exit 1 if a figure regressed past --tolerance",
    )
    p.add_argument("--tolerance", type=float, default=0.10, help="default 0.10")
    p.add_argument(
        "--results",
        metavar="NEW.json",
        help="take the new figures from this file instead of running (for --compare)",
    )
    return p


def _resolve_config(path: str) -> str:
    candidate = Path(path)
    if not candidate.is_file() and not candidate.is_absolute() and (REPO / path).is_file():
        candidate = REPO / path  # repository-relative paths work from any directory
    if not candidate.is_file():
        raise UsageError(f"config file {path} does not exist")
    return str(candidate)


def make_plan(args: argparse.Namespace) -> Plan:
    """Resolve and validate the command line; raise :class:`UsageError` on bad input."""
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    sections = tuple(s for s in SECTIONS if s in chosen)  # always in the canonical order
    if unknown or not sections:
        raise UsageError(
            f"--only: unknown sub-benchmark {(unknown or [args.only])[0]!r} "
            f"(choose from {', '.join(SECTIONS)})"
        )
    profile = PROFILES["tiny" if args.tiny else "full" if args.full else "default"]
    if args.repeats:
        profile = dataclasses.replace(profile, repeats=args.repeats)
    if args.env not in envs.registered_envs():
        raise UsageError(f"--env: unknown environment {args.env!r}")
    try:
        env_kwargs: dict[str, Any] = {}
        for key, value in parse_overrides(args.env_param):
            # reward.touch=0.1 -> {"reward": {"touch": 0.1}} (struct fields take mappings)
            *heads, last = key.split(".")
            target = env_kwargs
            for head in heads:
                target = target.setdefault(head, {})
                if not isinstance(target, dict):
                    raise ValueError(f"{key}: {head} is given both as a value and a mapping")
            target[last] = value
        envs.make(args.env, **env_kwargs)
    except (ConfigError, ValueError, TypeError) as err:
        raise UsageError(f"--env-param: {err}") from None
    if args.json and not Path(args.json).resolve().parent.is_dir():
        raise UsageError(f"--json: directory of {args.json} does not exist")

    overrides = tuple(args.set) + profile.train_overrides
    if args.config:
        paths = [_resolve_config(p) for p in args.config]
        specs = []
        for path in paths:
            label = Path(path).stem
            while label in [s.label for s in specs]:
                label += "'"
            specs.append(ConfigSpec(label, path, overrides))
    else:
        path = _resolve_config(DEFAULT_CONFIG)
        specs = [ConfigSpec("cartpole", path, overrides)]
        if profile.recurrent:
            specs.append(ConfigSpec("recurrent", path, RECURRENT_OVERRIDES + overrides))
    train_extra = [f"env.num_envs={args.train_envs}"] if args.train_envs else []
    for spec in specs:
        try:
            spec.load(train_extra)
        except ConfigError as err:
            raise UsageError(f"config {spec.path} ({spec.label}): {err}") from None
    return Plan(
        profile=profile,
        sections=sections,
        env_name=args.env,
        env_kwargs=env_kwargs,
        env_counts=args.num_envs or profile.env_counts,
        specs=tuple(specs),
        train_envs=args.train_envs,
        reference=args.reference,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if not 0 <= args.tolerance < 1:
            raise UsageError(f"--tolerance must be in [0, 1), got {args.tolerance}")
        old = read_results(args.compare, "--compare") if args.compare else None
        if args.results:
            data = read_results(args.results, "--results")
            meta, results = data.get("meta", {}), data["results"]
        else:
            plan = make_plan(args)
    except UsageError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2

    if not args.results:
        meta = machine_meta(plan.profile.name)
        _log(header(meta))
        start = time.perf_counter()
        figures, outcome = run_plan(plan)
        results = {f.name: f.to_json() for f in figures}
        bad = [n for n, r in results.items() if not (math.isfinite(r["median"]) and r["min"] > 0)]
        if bad:
            outcome.notes.append(f"non-positive or non-finite figures: {', '.join(bad)}")
        meta.update(
            wall_s=time.perf_counter() - start,
            loadavg_end=list(os.getloadavg()),
            section_wall_s=outcome.section_wall_s,
            ratios=outcome.ratios,
            notes=outcome.notes,
        )

    print(header(meta))
    print(table(results))
    for name, value in meta.get("ratios", {}).items():
        print(f"# ratio {name}: {value:.3f}")
    for note in meta.get("notes", []):
        print(f"# note: {note}")
    if "wall_s" in meta:
        load = " ".join(f"{x:.2f}" for x in meta.get("loadavg_end", []))
        print(f"# wall {meta['wall_s']:.1f} s | load at end {load}")

    new = {"meta": meta, "results": results}
    if args.json:
        Path(args.json).write_text(json.dumps(new, indent=2) + "\n")
    if old is None:
        return 0
    report, regressed = compare(new, old, args.tolerance)
    print(report)
    if regressed:
        print(
            f"regressed past {args.tolerance:.0%} against {args.compare}: {', '.join(regressed)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
