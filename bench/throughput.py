"""jaxrl's performance instrument: env, train and inference throughput, memory, precision.

``python -m bench.throughput`` takes about 2 minutes on a 2-core CPU; ``--tiny`` takes
seconds (a smoke test of the instrument itself, not a measurement); ``--full`` measures
more env counts with more repeats::

    python -m bench.throughput [--only env,train,inference,memory,precision,selfplay,scale,device]
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
  number of envs; and the league stage with ``--exploiters`` exploiters beside the main
  agent (its steps/s counts the main agent's env steps only: the exploiters' cost per main
  agent step, target >= 0.7x; timed in turns with the league without them); with
  ``--league-variant KEY=VALUE`` the league with those overrides too, in the same turns (what
  a change to the league's config costs, e.g. ``network.entity_width=16``); the ratios are
  printed.
- Device (``--only device``, :mod:`bench.device_bench`): per train config, the accelerator's
  busy fraction during a timed chunk and its kernels and host<->device copies per update, from
  a ``jax.profiler`` trace ("n/a" on a CPU), and the share of an update spent in the rollout.
- Memory is measured in a fresh child process per figure. The child builds the run and runs
  one chunk of one update (peak memory is per update: a chunk's scan reuses its buffers).
  It reports the device allocator's ``peak_bytes_in_use`` on GPU/TPU and the process's
  peak RSS on CPU (``VmHWM``; see :func:`peak_rss_bytes` for why not ``ru_maxrss``). At
  small sizes the RSS peak is mostly XLA compiling, so the child also reports what the
  compiled step allocates (``memory_analysis()``), a deterministic figure.
- A figure measured for one section is reused by another that asks for the same thing
  (the float32 train and inference figures of the precision section, for instance).

The sections live in their own modules; this one is the command line and the plan:
:mod:`bench.env_bench` (``env``), :mod:`bench.train_bench` (``train``, ``--reference``,
``selfplay``, ``scale``), :mod:`bench.inference_bench` (``inference``),
:mod:`bench.memory_bench` (``memory``), :mod:`bench.report` (table, JSON, ``--compare``) and
:mod:`bench.figures` (figures, profiles, timing, configs and child processes).

Exit status: 0 when done and nothing regressed; 1 when a figure regressed past
``--tolerance`` against ``--compare``; 2 for bad command-line input (one line on stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jaxrl import envs
from jaxrl.commands.cli import prog
from jaxrl.config import Config, ConfigError, load_config, parse_overrides
from jaxrl.run.setup import make_setup

from .device_bench import device_figures
from .env_bench import env_figures, env_fits
from .figures import PROFILES, ConfigSpec, Figure, Profile, UsageError, log
from .inference_bench import INFERENCE_QUANTITIES, inference_figures
from .memory_bench import memory_figures, train_fits
from .report import compare, fmt, header, machine_meta, read_results, table
from .train_bench import (
    alternating_train_figures,
    at_stage,
    reference_figures,
    reference_kwargs,
    scale_figures,
    train_figures,
)

REPO = Path(__file__).resolve().parents[1]
SECTIONS = (
    "env",
    "train",
    "inference",
    "memory",
    "precision",
    "selfplay",
    "scale",
    "device",
    "host",
)  # host: gymnasium/EnvPool envs beside CleanRL (bench.host_throughput)
DEFAULT_SECTIONS = SECTIONS[:5]  # selfplay, scale and device compile more steps: ask for them
SCALE_SEEDS = 8  # scale: members vmapped in one program, against 1
SCALE_DEVICE_ENVS = 64  # scale: envs sharded over 2 devices, against 1 (unless --train-envs)
SELFPLAY_CONFIG = "configs/soccer_selfplay.yaml"  # league stage vs its RulePolicy stage
CURRICULUM_CONFIG = "configs/soccer_curriculum.yaml"  # its last stage: 3v3 vs RulePolicy
# Exploiters beside the main agent in selfplay/league_exploiters (each on the config's
# exploiter_fraction of the envs).
BENCH_EXPLOITERS = 1
DEFAULT_CONFIG = "configs/cartpole.yaml"
# The recurrent variant of a config: a GRU core on a shared 128-wide torso.
RECURRENT_OVERRIDES = (
    "network.core=gru",
    "network.core_size=128",
    "network.hidden_sizes=[128]",
    "network.shared_torso=true",
    "ppo.sequence_length=16",
)


# ---- figures ------------------------------------------------------------------------------


# ---- profiles -----------------------------------------------------------------------------


# ---- timing and memory helpers ------------------------------------------------------------


# ---- env throughput -----------------------------------------------------------------------


# ---- training throughput ------------------------------------------------------------------


# ---- inference latency --------------------------------------------------------------------


# ---- memory -------------------------------------------------------------------------------


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
    exploiters: tuple[str, ...]  # selfplay: the overrides that add the exploiters (--exploiters)
    league_variant: tuple[str, ...]  # selfplay: the league's overrides timed beside it (or none)
    peer_python: str | None = None  # host: python of CleanRL's venv (--peer-python), or none


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


def _selfplay_run(label: str, path: str, stage: int, overrides: list[str]):
    """``(prefix, config, prepare)`` of a self-play figure: ``path`` started at ``stage``."""
    config = load_config(REPO / path, overrides)
    log(f"[selfplay] {label}: {path}, stage {stage}, {config.env.num_envs} envs")
    return f"selfplay/{label}", config, functools.partial(at_stage, stage)


class Collected:
    """The figures measured so far, each logged as it comes, and the run's :class:`Outcome`."""

    def __init__(self):
        """Nothing measured yet."""
        self.figures: list[Figure] = []
        self.outcome = Outcome(ratios={}, notes=[], section_wall_s={})

    def report(self, new: list[Figure]) -> None:
        """Log ``new`` (median and spread) and keep it."""
        for f in new:
            log(f"  {f.name}: {fmt(f.median)} {f.unit} [{fmt(f.min)} - {fmt(f.max)}]")
        self.figures.extend(new)

    def median_of(self, name: str) -> float:
        """The median of the figure ``name`` measured so far."""
        return next(f.median for f in self.figures if f.name == name)


def _train_extra(plan: Plan) -> list[str]:
    """``--train-envs`` as an override of the train, reference and precision configs."""
    return [f"env.num_envs={plan.train_envs}"] if plan.train_envs else []


def run_env(plan: Plan, measure: Measurements, out: Collected) -> None:
    """``--only env``: env-only throughput at each env count that fits in memory."""
    del measure  # env figures are not shared with another section
    for num_envs in plan.env_counts:
        if not env_fits(plan.env_name, plan.env_kwargs, num_envs, plan.profile):
            out.outcome.notes.append(
                f"env {plan.env_name} n={num_envs}: skipped, not enough memory"
            )
            continue
        log(f"[env] {plan.env_name}, {num_envs} envs")
        out.report(env_figures(plan.env_name, plan.env_kwargs, num_envs, plan.profile))


def run_train(plan: Plan, measure: Measurements, out: Collected) -> None:
    """``--only train``: each config's train chunk (and, with ``--reference``, the reference)."""
    for spec in plan.specs:
        log(f"[train] {spec.label}")
        out.report(measure.train(f"train/{spec.label}", spec.load(_train_extra(plan))))
        if plan.reference:
            run_train_reference(plan, spec, out)


def run_train_reference(plan: Plan, spec: ConfigSpec, out: Collected) -> None:
    """``--reference``: bench.reference_ppo on ``spec`` as shipped and with jaxrl's PRNG."""
    written = spec.load_as_written(_train_extra(plan))
    if reference_kwargs(written) is None:
        out.outcome.notes.append(f"reference: skipped for {spec.label} (not the reference's model)")
        return
    log(f"[train] {spec.label}: bench.reference_ppo")
    out.report(reference_figures(f"train/{spec.label}/reference", written, plan.profile))
    log(f"[train] {spec.label}: bench.reference_ppo with jaxrl.core.prng installed")
    out.report(
        reference_figures(
            f"train/{spec.label}/reference_fast_prng", written, plan.profile, fast_prng=True
        )
    )
    ours = out.median_of(f"train/{spec.label}/sps")
    for name in ("reference", "reference_fast_prng"):
        theirs = out.median_of(f"train/{spec.label}/{name}/sps")
        out.outcome.ratios[f"train/{spec.label}/sps ours/{name}"] = ours / theirs


def run_inference(plan: Plan, measure: Measurements, out: Collected) -> None:
    """``--only inference``: each config's ``act`` latency at the profile's batch sizes."""
    for spec in plan.specs:
        for batch in plan.profile.infer_batches:
            log(f"[inference] {spec.label}, batch {batch}")
            out.report(
                measure.inference(
                    f"inference/{spec.label}/b={batch}",
                    spec.load(_train_extra(plan)),
                    batch,
                    INFERENCE_QUANTITIES,
                )
            )


def run_memory(plan: Plan, measure: Measurements, out: Collected) -> None:
    """``--only memory``: peak memory of one update, each configuration in fresh processes."""
    del measure  # measured in child processes
    profile = plan.profile
    jobs = []
    for spec in plan.specs if profile.memory_recurrent else plan.specs[:1]:
        for num_envs in profile.memory_envs:
            if train_fits(spec.load([f"env.num_envs={num_envs}"])):
                jobs.append((spec.label, spec, num_envs))
            else:
                out.outcome.notes.append(
                    f"memory {spec.label} n={num_envs}: skipped, not enough memory"
                )
    log(f"[memory] {len(jobs)} configurations, each in fresh processes")
    out.report(memory_figures(jobs, profile))


def run_precision(plan: Plan, measure: Measurements, out: Collected) -> None:
    """``--only precision``: the first config trained and acting in float32 and bfloat16."""
    first = plan.specs[0]
    batch = max(plan.profile.infer_batches)
    for dtype in ("float32", "bfloat16"):
        log(f"[precision] {first.label}, {dtype}")
        config = first.load([*_train_extra(plan), f"precision={dtype}"])
        prefix = f"precision/{first.label}/{dtype}"
        out.report(measure.train(prefix, config))
        for b in sorted({1, batch}):
            out.report(measure.inference(f"{prefix}/act_b={b}", config, b, ("p50",)))
    for quantity in ("sps", f"act_b={batch}/p50"):
        bf16 = out.median_of(f"precision/{first.label}/bfloat16/{quantity}")
        f32 = out.median_of(f"precision/{first.label}/float32/{quantity}")
        out.outcome.ratios[f"precision/{first.label}/{quantity} bfloat16/float32"] = bf16 / f32


def run_selfplay(plan: Plan, measure: Measurements, out: Collected) -> None:
    """``--only selfplay``: the league (with exploiters, a variant) beside its other stages."""
    del measure  # each stage is its own program
    profile = plan.profile
    num_envs = plan.train_envs or load_config(REPO / SELFPLAY_CONFIG).env.num_envs
    extra = [f"env.num_envs={num_envs}", *profile.train_overrides]

    # The league with and without exploiters, timed in turns (their ratio is a target).
    runs = [
        _selfplay_run("league", SELFPLAY_CONFIG, -1, extra),
        _selfplay_run("league_exploiters", SELFPLAY_CONFIG, -1, [*extra, *plan.exploiters]),
    ]
    if plan.league_variant:  # --league-variant: a change's cost, timed in the same turns
        variant = [*extra, *plan.league_variant]
        runs.append(_selfplay_run("league_variant", SELFPLAY_CONFIG, -1, variant))
    out.report(alternating_train_figures(runs, profile))
    for label, path, stage in (
        ("rule_stage", SELFPLAY_CONFIG, -2),
        ("curriculum_3v3", CURRICULUM_CONFIG, -1),
    ):
        prefix, config, prepare = _selfplay_run(label, path, stage, extra)
        out.report(train_figures(prefix, config, profile, prepare))
    league = out.median_of("selfplay/league/sps")
    for other in ("rule_stage", "curriculum_3v3"):
        ratio = league / out.median_of(f"selfplay/{other}/sps")
        out.outcome.ratios[f"selfplay/league/sps over {other}"] = ratio
    for prefix, _, _ in runs[1:]:  # the exploiters, and the --league-variant if given
        ratio = out.median_of(f"{prefix}/sps") / league
        out.outcome.ratios[f"{prefix}/sps over league"] = ratio


def run_scale(plan: Plan, measure: Measurements, out: Collected) -> None:
    """``--only scale``: seeds vmapped in one program, then envs sharded over devices."""
    first = plan.specs[0]
    for seeds in (1, SCALE_SEEDS):
        log(f"[scale] {first.label}: train.num_seeds={seeds}, vmapped")
        config = first.load([*_train_extra(plan), f"train.num_seeds={seeds}"])
        out.report(measure.train(f"scale/{first.label}/seeds={seeds}", config))
    ratio = out.median_of(f"scale/{first.label}/seeds={SCALE_SEEDS}/sps") / out.median_of(
        f"scale/{first.label}/seeds=1/sps"
    )
    out.outcome.ratios[f"scale/{first.label}/sps seeds={SCALE_SEEDS}/seeds=1"] = ratio
    num_envs = plan.train_envs or SCALE_DEVICE_ENVS
    log(f"[scale] {first.label}: {num_envs} envs on 1 device and sharded, in children")
    new, note = scale_figures(first, num_envs, plan.profile)
    out.report(new)
    out.outcome.notes.append(note)
    if new:
        many = new[-1].name.split("/")[2]
        ratio = out.median_of(f"scale/{first.label}/{many}/sps") / out.median_of(
            f"scale/{first.label}/devices=1/sps"
        )
        out.outcome.ratios[f"scale/{first.label}/sps {many}/devices=1"] = ratio


def run_device(plan: Plan, measure: Measurements, out: Collected) -> None:
    """``--only device``: each config's device busy fraction, launches and time split."""
    del measure  # profiled on its own
    for spec in plan.specs:
        log(f"[device] {spec.label}")
        config = spec.load(_train_extra(plan))
        new, note = device_figures(f"device/{spec.label}", config, plan.profile)
        out.report(new)
        if note:
            out.outcome.notes.append(f"device {spec.label}: {note}")


def run_host(plan: Plan, measure: Measurements, out: Collected) -> None:
    """``--only host``: gymnasium and EnvPool envs beside CleanRL (bench.host_throughput)."""
    del measure  # trained in child processes
    from . import host_throughput  # noqa: PLC0415 - needs gymnasium/envpool

    results = host_throughput.run(plan.profile.name == "tiny", plan.peer_python)
    out.outcome.notes.append(host_throughput.report(results))
    out.outcome.ratios.update(host_throughput.ratios(results))


SECTION_RUNS = {
    "env": run_env,
    "train": run_train,
    "inference": run_inference,
    "memory": run_memory,
    "precision": run_precision,
    "selfplay": run_selfplay,
    "scale": run_scale,
    "device": run_device,
    "host": run_host,
}  # one per SECTIONS entry


def run_plan(plan: Plan) -> tuple[list[Figure], Outcome]:
    """Run the selected sub-benchmarks."""
    measure = Measurements(plan.profile)
    out = Collected()
    for section in plan.sections:
        start = time.perf_counter()
        SECTION_RUNS[section](plan, measure, out)
        out.outcome.section_wall_s[section] = time.perf_counter() - start
        log(f"[{section}] {out.outcome.section_wall_s[section]:.1f} s")
    return out.figures, out.outcome


# ---- output -------------------------------------------------------------------------------


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
        prog=prog("bench.throughput"),
        description="jaxrl throughput, latency and memory benchmarks (figures: median over "
        "repeats with min-max spread; compile time reported separately).",
    )
    _add_env_arguments(p)
    _add_train_arguments(p)
    _add_output_arguments(p)
    return p


def _add_env_arguments(p: argparse.ArgumentParser) -> None:
    """The sections, the profile and the env benchmark's options."""
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


def _add_train_arguments(p: argparse.ArgumentParser) -> None:
    """The configs of the train sections and what is timed beside them."""
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
        "--exploiters",
        default=f"{BENCH_EXPLOITERS}",
        metavar="N[xF]",
        help="selfplay: exploiters beside the league's main agent, each on F of its envs "
        f"(default {BENCH_EXPLOITERS}, F the config's exploiter_fraction), e.g. 2x0.125",
    )
    p.add_argument(
        "--league-variant",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="selfplay: also time the league with this override (repeatable), in turns with the "
        "league and its exploiters, and print its ratio to the league (e.g. "
        "network.entity_width=16)",
    )
    p.add_argument(
        "--reference",
        action="store_true",
        help="also run bench.reference_ppo (PureJaxRL-style, in a fresh process) with the same "
        "hyperparameters, as shipped and with jaxrl's CPU PRNG lowering, and print the ratios",
    )


def _add_output_arguments(p: argparse.ArgumentParser) -> None:
    """Where the figures go, the host section's peer, and the comparison with old figures."""
    p.add_argument("--json", metavar="FILE", help="write {meta, results} as JSON")
    p.add_argument("--peer-python", help="host section: python of CleanRL's venv (the peer)")
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


def _exploiter_overrides(text: str) -> tuple[str, ...]:
    """``--exploiters N`` or ``NxF`` as config overrides (N >= 1, 0 < F <= 1)."""
    count, _, fraction = text.partition("x")
    try:
        n, f = int(count), float(fraction) if fraction else None
    except ValueError:
        raise UsageError(f"--exploiters: expected N or NxF (e.g. 2x0.125), got {text!r}") from None
    if n < 1 or (f is not None and not 0 < f <= 1):
        raise UsageError(f"--exploiters: N must be >= 1 and F in (0, 1], got {text!r}")
    extra = () if f is None else (f"selfplay.exploiter_fraction={f}",)
    return (f"selfplay.exploiters={n}", *extra)


def _resolve_config(path: str) -> str:
    candidate = Path(path)
    if not candidate.is_file() and not candidate.is_absolute() and (REPO / path).is_file():
        candidate = REPO / path  # repository-relative paths work from any directory
    if not candidate.is_file():
        raise UsageError(f"config file {path} does not exist")
    return str(candidate)


def _sections(only: str) -> tuple[str, ...]:
    """``--only``'s sections, in the canonical order."""
    chosen = [s.strip() for s in only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    sections = tuple(s for s in SECTIONS if s in chosen)  # always in the canonical order
    if unknown or not sections:
        raise UsageError(
            f"--only: unknown sub-benchmark {(unknown or [only])[0]!r} "
            f"(choose from {', '.join(SECTIONS)})"
        )
    return sections


def _env_kwargs(env: str, env_param: Sequence[str]) -> dict[str, Any]:
    """``--env-param``'s overrides of ``--env``'s ``EnvParams``, checked by making the env."""
    if not envs.is_known(env):
        raise UsageError(f"--env: unknown environment {env!r}")
    try:
        # reward.touch=0.1 -> {"reward": {"touch": 0.1}} (struct fields take mappings)
        env_kwargs: dict[str, Any] = envs.nest_dotted(parse_overrides(env_param))
        envs.make(env, **env_kwargs)
    except (ConfigError, ValueError, TypeError) as err:
        raise UsageError(f"--env-param: {err}") from None
    return env_kwargs


def _config_specs(configs: Sequence[str] | None, overrides: tuple[str, ...], recurrent: bool):
    """The train sections' configs: ``--config``'s (labelled by file name), or the default
    config and, if ``recurrent``, its GRU variant."""
    if configs:
        paths = [_resolve_config(p) for p in configs]
        specs = []
        for path in paths:
            label = Path(path).stem
            while label in [s.label for s in specs]:
                label += "'"
            specs.append(ConfigSpec(label, path, overrides))
        return specs
    path = _resolve_config(DEFAULT_CONFIG)
    specs = [ConfigSpec("cartpole", path, overrides)]
    if recurrent:
        specs.append(ConfigSpec("recurrent", path, RECURRENT_OVERRIDES + overrides))
    return specs


def make_plan(args: argparse.Namespace) -> Plan:
    """Resolve and validate the command line; raise :class:`UsageError` on bad input."""
    sections = _sections(args.only)
    profile = PROFILES["tiny" if args.tiny else "full" if args.full else "default"]
    if args.repeats:
        profile = dataclasses.replace(profile, repeats=args.repeats)
    env_kwargs = _env_kwargs(args.env, args.env_param)
    if args.json and not Path(args.json).resolve().parent.is_dir():
        raise UsageError(f"--json: directory of {args.json} does not exist")

    overrides = tuple(args.set) + profile.train_overrides
    specs = _config_specs(args.config, overrides, profile.recurrent)
    train_extra = [f"env.num_envs={args.train_envs}"] if args.train_envs else []
    if args.league_variant:
        try:
            load_config(REPO / SELFPLAY_CONFIG, args.league_variant)
        except ConfigError as err:
            raise UsageError(f"--league-variant: {err}") from None
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
        exploiters=_exploiter_overrides(args.exploiters),
        league_variant=tuple(args.league_variant),
        peer_python=args.peer_python,
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
        log(header(meta))
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
