"""Shared fixtures; also makes the repository root importable under plain ``pytest``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# One XLA compilation cache for the whole test session, shared by xdist workers and by the
# CLI subprocesses the tests start (they inherit the environment variable). Many tests
# compile the same tiny programs (the same config in several files, a CLI run of a program a
# fixture compiled in-process); with the cache, each is compiled once. The cache is keyed by
# the optimized program, the compile options and the backend, so a hit is the same
# executable. Every compile is stored, not only those of 1 s or more (JAX's default): the CLI
# subprocesses and the second worker recompile the same small programs of setup and
# evaluation. Figures: docs/results/ci.md#how-the-tests-compile.
CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"
MIN_COMPILE_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"
_OWN_CACHE: list[str] = []  # the directory this process made (removed at the end)

# XLA's CPU backend compiles without LLVM's optimisation passes in the tests (this process and
# every child), and emits fusions with its classic elemental emitter rather than its MLIR
# fusion emitters (xla_cpu_use_fusion_emitters=false): compiling is most of the suite's time
# and the tests' programs are tiny. The flags act on code generation, not on the HLO, so the
# optimised HLO the audit reads is unchanged; training runs and benchmarks keep XLA's defaults.
# Figures: docs/results/ci.md#how-the-tests-compile.
FAST_COMPILE = (
    "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true "
    "--xla_cpu_use_fusion_emitters=false"
)


def pytest_configure(config):
    """Point JAX (this process and every child) at the session's compilation cache and flags."""
    del config
    if FAST_COMPILE not in os.environ.get("XLA_FLAGS", ""):  # the controller sets it once
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip()
    if not os.environ.get(CACHE_ENV):  # the xdist controller, or a plain single-process run
        os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="jaxrl-test-xla-cache-")
        _OWN_CACHE.append(os.environ[CACHE_ENV])
    os.environ.setdefault(MIN_COMPILE_ENV, "0")  # children read it when JAX starts
    import jax  # noqa: PLC0415 - after the environment is set

    jax.config.update("jax_compilation_cache_dir", os.environ[CACHE_ENV])
    jax.config.update(
        "jax_persistent_cache_min_compile_time_secs", float(os.environ[MIN_COMPILE_ENV])
    )


def pytest_unconfigure(config):
    """Remove the cache this process made (workers leave it to the controller)."""
    del config
    for path in _OWN_CACHE:
        shutil.rmtree(path, ignore_errors=True)


LEAGUE_GROUP = "league"  # the xdist group of every test that needs the tiny league's programs


# A wrapper: the marks are set before xdist's worker hook appends "@<group>" to the node ids
# (the scheduler groups by that suffix). pytest 9.2
# keeps node ids in a structured field that xdist 3.8 does not write (pytest-xdist#1386), so
# with it every test was scheduled on its own and each module fixture could compile twice;
# the dev extra pins pytest<9.2, and the controller's check below stops a run without groups.
@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Groups for pytest-xdist's ``--dist loadgroup`` (the README's test command).

    A test file runs on one worker, so its module-scoped compiled fixtures are compiled once;
    the files that use the session's tiny league (:func:`selfplay_run`) share one worker, so
    the league trains once. A test that marks its own group keeps it. Without xdist the marks
    do nothing.
    """
    league = {item.module.__name__ for item in items if "selfplay_run" in item.fixturenames}
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:  # a test's own choice
            continue
        module = item.module.__name__
        item.add_marker(pytest.mark.xdist_group(LEAGUE_GROUP if module in league else module))
    return (yield)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook, run by the controller
def pytest_xdist_node_collection_finished(node, ids):
    """Stop at once when a worker's tests carry no group (see the comment above)."""
    if node.config.getoption("dist") == "loadgroup" and ids and not any("@" in i for i in ids):
        pytest.exit(
            "pytest-xdist did not group the tests (--dist loadgroup); with pytest 9.2 it "
            "cannot (pytest-xdist#1386): install the dev extra's pytest<9.2",
            returncode=4,
        )


REPO = Path(__file__).resolve().parent.parent


def cpu_devices_env(devices: int) -> dict[str, str]:
    """The environment of a child process that sees ``devices`` virtual CPU devices
    (``JAX_NUM_CPU_DEVICES`` is read when JAX starts, so multi-device runs are children)."""
    return {**os.environ, "JAX_NUM_CPU_DEVICES": str(devices), "JAX_PLATFORMS": "cpu"}


def run_on_cpu_devices(argv: list[str], devices: int, timeout: int) -> subprocess.CompletedProcess:
    """``python *argv`` from the repository root on ``devices`` CPU devices, output captured."""
    return subprocess.run(
        [sys.executable, *argv],
        cwd=REPO,
        env=cpu_devices_env(devices),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# The tiny CartPole run the tests train: 4 envs x 32 steps, 24 updates in 3 chunks of 8, two
# 16-unit layers; it compiles in a few seconds on a CPU. A test that needs another shape gives
# only the difference (later overrides win), so the tests that share a program compile it
# once (the session's compilation cache).
TINY_CARTPOLE: tuple[str, ...] = (
    "env.num_envs=4",
    "ppo.num_steps=32",
    "ppo.update_epochs=2",
    "ppo.num_minibatches=2",
    "network.hidden_sizes=[16, 16]",
    "train.total_steps=3072",
    "train.updates_per_chunk=8",
    "train.progress_bar=false",
    "checkpoint.every_updates=8",
)


def tiny_overrides(*changes: str) -> list[str]:
    """The tiny run's overrides followed by ``changes`` (CLI argv or :func:`make_tiny_config`)."""
    return [*TINY_CARTPOLE, *changes]


def make_tiny_config(*changes: str, config: str = "cartpole.yaml"):
    """``configs/<config>`` with the tiny run's overrides and then ``changes``."""
    from jaxrl.config import load_config  # noqa: PLC0415 - keep conftest import light

    return load_config(REPO / "configs" / config, tiny_overrides(*changes))


@pytest.fixture(scope="session")
def tiny_config():
    """The tiny CartPole config (:data:`TINY_CARTPOLE`)."""
    return make_tiny_config()


NUM_ENVS = 8
STEPS = 16
UPDATES = 12


def tiny_selfplay(**extra) -> dict:
    """Soccer: 2 updates of 1v1 against the RulePolicy, then a league at mixed team sizes."""
    config = {
        "seed": 0,
        "env": {
            "name": "Soccer",
            "num_envs": NUM_ENVS,
            "kwargs": {"max_steps_in_episode": 24},
            "normalize_obs": True,
        },
        "network": {"hidden_sizes": [16]},
        "ppo": {"num_steps": STEPS, "num_minibatches": 2, "update_epochs": 1},
        "train": {
            "total_steps": NUM_ENVS * STEPS * UPDATES,
            "updates_per_chunk": 4,
            "progress_bar": False,
        },
        "checkpoint": {"every_updates": 2, "keep": 20},
        "curriculum": {
            "replay": 0.25,
            "stages": [
                {
                    "name": "rule",
                    "env": {"blue_size": 1, "orange_size": 1, "opponent_kind": 1},
                    "metric": "episode_length",
                    "threshold": 0.0,
                    "window": 1,
                    "min_updates": 2,
                },
                {
                    "name": "league",
                    "env": {"team_size_weights": [0.4, 0.3, 0.3], "opponent_kind": 1},
                    "features": {"selfplay": True},
                },
            ],
        },
        "selfplay": {
            "pool_size": 3,
            "snapshot_every": 2,
            "latest_fraction": 0.25,
            "rule_fraction": 0.25,
            "lanes": 2,
            "pfsp": "hard",
        },
        "evaluation": {
            "every_updates": 2,
            "lanes": [
                {"name": "rule_1v1", "envs": 2, "env": {"blue_size": 1, "orange_size": 1}},
                {"name": "rule_3v3", "envs": 2, "env": {"blue_size": 3, "orange_size": 3}},
            ],
        },
    }
    for key, value in extra.items():
        section, field = key.split("__")
        config[section] = {**config[section], field: value}
    return config


@pytest.fixture(scope="session")
def selfplay_run(tmp_path_factory):
    """A tiny self-play run whose snapshots (every 4 updates) fall on its checkpoints."""
    from jaxrl.config import config_from_dict  # noqa: PLC0415 - keep conftest import light
    from jaxrl.run.driver import train  # noqa: PLC0415

    config = config_from_dict(tiny_selfplay(selfplay__snapshot_every=4))
    return train(config, tmp_path_factory.mktemp("selfplay") / "run", quiet=True)
