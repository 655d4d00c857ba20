"""Many hosts: joining the processes of one run with ``jax.distributed``.

Every process runs the same program on its own devices. After :func:`join`, ``jax.devices()``
lists the devices of every process, the train step's mesh spans them all and each process
steps its share of the envs (``env.num_envs`` is the global count). Processes join when

- ``--coordinator HOST:PORT --num-processes N --process-id I`` are given, or
- the environment names a cluster JAX detects by itself: a SLURM job step of several tasks
  (``srun``) or a Cloud TPU pod slice (``TPU_WORKER_HOSTNAMES`` with several hosts, or
  ``MEGASCALE_COORDINATOR_ADDRESS``).

Only process 0 writes TensorBoard events and the config; every process takes part in
Orbax's checkpoint writes (each writes the shards it holds, process 0 the metadata).
The flags are parsed without JAX (a command line reports a bad flag before JAX starts).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np


class DistributedError(ValueError):
    """The process-group flags are incomplete or inconsistent."""


@dataclasses.dataclass(frozen=True)
class Cluster:
    """How this process joins the others: explicit flags, or JAX's detection (all None)."""

    source: str  # "flags", "slurm" or "tpu-pod"
    coordinator: str | None = None  # HOST:PORT of process 0
    num_processes: int | None = None
    process_id: int | None = None


def detect(environ: Mapping[str, str] = os.environ) -> str | None:
    """The multi-process cluster named by ``environ``, or None for a single process."""
    slurm = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID")
    if all(name in environ for name in slurm) and int(environ["SLURM_NTASKS"]) > 1:
        return "slurm"
    hosts = [h for h in environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
    if len(hosts) > 1 or environ.get("MEGASCALE_COORDINATOR_ADDRESS"):
        return "tpu-pod"
    return None


def cluster_from_flags(
    coordinator: str | None,
    num_processes: int | None,
    process_id: int | None,
    environ: Mapping[str, str] = os.environ,
) -> Cluster | None:
    """The cluster to join: the three flags together, or the detected one, or None."""
    given = [coordinator is not None, num_processes is not None, process_id is not None]
    if any(given):
        if not all(given):
            raise DistributedError(
                "--coordinator HOST:PORT, --num-processes N and --process-id I go together"
            )
        host, _, port = coordinator.rpartition(":")
        if not host or not port.isdigit():
            raise DistributedError(f"--coordinator must be HOST:PORT, got {coordinator!r}")
        if num_processes < 1 or not 0 <= process_id < num_processes:
            raise DistributedError(
                f"--process-id must be in 0..{num_processes - 1} for --num-processes "
                f"{num_processes}, got {process_id}"
            )
        return Cluster("flags", coordinator, num_processes, process_id)
    source = detect(environ)
    return Cluster(source) if source else None


def add_process_flags(parser: argparse.ArgumentParser) -> None:
    """``--coordinator``, ``--num-processes`` and ``--process-id`` on ``parser``."""
    hosts = parser.add_argument_group(
        "many hosts",
        "join N processes with jax.distributed (detected by itself under SLURM srun and on "
        "TPU pod slices); env.num_envs is the global count; give every process the same "
        "config and a --run-dir on a shared filesystem",
    )
    hosts.add_argument("--coordinator", metavar="HOST:PORT", help="address of process 0")
    hosts.add_argument("--num-processes", type=int, metavar="N", help="processes in the run")
    hosts.add_argument("--process-id", type=int, metavar="I", help="this process, 0..N-1")


def join_from_argv(argv: list[str]) -> None:
    """Join the processes the command line (or the environment) names; exit 2 on bad flags.

    A CLI calls this before importing anything that starts a JAX backend (gymnax does, at
    import), since ``jax.distributed.initialize`` must come first.
    """
    parser = argparse.ArgumentParser(add_help=False)
    add_process_flags(parser)
    args, _ = parser.parse_known_args(argv)
    try:
        join(cluster_from_flags(args.coordinator, args.num_processes, args.process_id))
    except DistributedError as err:
        print(f"config error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


def join(cluster: Cluster | None) -> None:
    """Join the processes of ``cluster`` (nothing for None, or when already joined).

    Raises:
      DistributedError: a JAX backend started before the processes could join.
    """
    if cluster is None:
        return
    import jax  # noqa: PLC0415 - the flags above are parsed without JAX

    if jax.distributed.is_initialized():
        return
    from jax._src import xla_bridge  # noqa: PLC0415 - no public "has a backend started"

    if xla_bridge.backends_are_initialized():
        raise DistributedError(
            "processes must join before JAX starts a backend: run python -m jaxrl.train with "
            "the process flags, or call jax.distributed.initialize() first in your program"
        )
    # Cross-process collectives between CPU devices need gloo (GPUs and TPUs bring their own).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=cluster.coordinator,
        num_processes=cluster.num_processes,
        process_id=cluster.process_id,
    )


def is_main_process() -> bool:
    """True on the process that writes logs and the config (process 0)."""
    import jax  # noqa: PLC0415

    return jax.process_index() == 0


def replicate(tree: Any, mesh: Any) -> Any:
    """``tree`` (the same host values on every process) as arrays replicated over ``mesh``.

    Works across processes, where an array on one local device cannot enter a computation
    over the whole mesh.
    """
    import jax  # noqa: PLC0415

    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    def put(x):
        value = np.asarray(x)
        return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])

    return jax.tree.map(put, jax.device_get(tree))


def sync(name: str) -> None:
    """Wait until every process reaches the point called ``name`` (nothing on one process)."""
    import jax  # noqa: PLC0415

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)
