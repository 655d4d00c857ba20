"""Data-parallel training over devices and processes equals training on one device.

Each multi-device run is a subprocess: ``JAX_NUM_CPU_DEVICES`` is read when JAX starts,
and processes join with ``jax.distributed`` on localhost (gloo collectives on CPU). The
runs use ``update_epochs=1, num_minibatches=1`` so that every layout takes the same
gradient steps; the 1-device run is this test process's own (one CPU device).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxrl.commands.evaluate import load_policy
from jaxrl.config import load_config
from jaxrl.run.distributed import Cluster, DistributedError, cluster_from_flags, detect
from jaxrl.run.driver import train
from tests.conftest import cpu_devices_env, tiny_overrides

REPO = Path(__file__).resolve().parents[1]

# 8 envs x 32 steps, 6 updates in 2 chunks, one minibatch of one epoch per update.
SAME_STEPS = tiny_overrides(
    "env.num_envs=8",
    "env.normalize_obs=true",
    "ppo.update_epochs=1",
    "ppo.num_minibatches=1",
    "train.total_steps=1536",
    "train.updates_per_chunk=3",
    "checkpoint.every_updates=3",
)
TOLERANCE = 1e-5  # float32 sums in another order across devices


def _run(args: list[str], devices: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "jaxrl.train", *args],
        cwd=REPO,
        env=cpu_devices_env(devices),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen, timeout: int = 300) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


def _train_cli(run_dir: Path, overrides: list[str]) -> list[str]:
    return [
        "--config",
        "configs/cartpole.yaml",
        *SAME_STEPS,
        *overrides,
        "--run-dir",
        str(run_dir),
        "--quiet",
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def _assert_close(a, b) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=TOLERANCE)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same run on 1 device (here) and on 2 processes x 1 device. One process on 2
    devices is ``tests/test_pbt.py``'s CLI run (``mesh.devices=2``, restored on one device and
    compared with the one-device run) and ``tests/test_league_population.py``'s league."""
    root = tmp_path_factory.mktemp("distributed")
    port = _free_port()
    processes = [
        _run(
            _train_cli(root / "two_processes", [])
            + [
                "--coordinator",
                f"localhost:{port}",
                "--num-processes",
                "2",
                "--process-id",
                str(i),
            ],
            devices=1,
        )
        for i in range(2)
    ]
    config = load_config(REPO / "configs" / "cartpole.yaml", SAME_STEPS)
    one = train(config, root / "one_device", quiet=True)
    for i, proc in enumerate(processes):
        code, err = _finish(proc)
        assert code == 0, f"process {i} failed:\n{err[-3000:]}"
    return root, one


def test_two_processes_equal_one_device(runs):
    root, one = runs
    _, policy, step = load_policy(root / "two_processes")  # restored onto 1 device
    assert step == 6
    _assert_close(policy.params, one.runner.params)
    _assert_close(policy.obs_stats, one.runner.obs_stats)  # the normaliser saw every env


def test_two_process_run_resumes_on_one_device(runs, tmp_path):
    root, one = runs
    shutil.copytree(root / "two_processes", tmp_path / "run")
    shutil.rmtree(tmp_path / "run" / "checkpoints" / "6")  # back to update 3
    resumed = train(run_dir=tmp_path / "run", resume=True, quiet=True)
    _assert_close(resumed.runner.params, one.runner.params)


def test_only_process_zero_writes_logs(runs):
    root, _ = runs
    events = list((root / "two_processes").glob("events.out.tfevents.*"))
    assert len(events) == 1
    assert (root / "two_processes" / "config.yaml").is_file()


def test_grouped_run_resumes_only_on_its_device_count(tmp_path):
    """A run whose env groups are per device refuses another device count, in one line."""
    from jaxrl.config import config_from_dict  # noqa: PLC0415
    from jaxrl.run.chunk_source import check_resume_devices  # noqa: PLC0415
    from jaxrl.run.errors import TrainingError  # noqa: PLC0415
    from jaxrl.run.setup import make_setup  # noqa: PLC0415
    from tests.conftest import tiny_selfplay  # noqa: PLC0415

    setup = make_setup(config_from_dict(tiny_selfplay()))
    check_resume_devices(setup, 1)
    check_resume_devices(setup, None)  # checkpoints from before the device count was saved
    with pytest.raises(TrainingError, match="trained on 2 devices with env groups"):
        check_resume_devices(setup, 2)


def test_env_count_must_divide_over_devices(tmp_path):
    proc = _run(_train_cli(tmp_path / "run", ["env.num_envs=7"]), devices=2)
    code, err = _finish(proc, timeout=120)
    assert code == 2
    assert err.strip() == (
        "config error: env.num_envs (7) does not divide over 2 devices (mesh.devices=all)"
    )
    assert not (tmp_path / "run").exists()


def test_more_devices_than_available_is_a_config_error():
    with pytest.raises(Exception, match=r"mesh.devices: 4 devices asked for, 1 available"):
        load_config(REPO / "configs" / "cartpole.yaml", ["mesh.devices=4"])


@pytest.mark.parametrize(
    "flags, message",
    [
        (("localhost:1234", None, None), "go together"),
        (("localhost", 2, 0), "HOST:PORT"),
        (("localhost:1234", 2, 2), r"--process-id must be in 0..1"),
    ],
)
def test_bad_process_flags(flags, message):
    with pytest.raises(DistributedError, match=message):
        cluster_from_flags(*flags, environ={})


def test_process_flags_and_detection():
    assert cluster_from_flags("h:1", 2, 1, environ={}) == Cluster("flags", "h:1", 2, 1)
    assert cluster_from_flags(None, None, None, environ={}) is None
    slurm = {
        "SLURM_JOB_ID": "7",
        "SLURM_STEP_NODELIST": "node[1-2]",
        "SLURM_NTASKS": "2",
        "SLURM_PROCID": "1",
    }
    assert detect(slurm) == "slurm"
    assert detect({**slurm, "SLURM_NTASKS": "1"}) is None  # one task: nothing to join
    assert detect({"TPU_WORKER_HOSTNAMES": "t1,t2,t3,t4"}) == "tpu-pod"
    assert detect({"TPU_WORKER_HOSTNAMES": "localhost"}) is None  # a single-host TPU VM
    assert cluster_from_flags(None, None, None, environ=slurm) == Cluster("slurm")
