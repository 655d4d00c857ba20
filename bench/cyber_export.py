"""A trained CAGE2 defender as numpy arrays, to play it in real CybORG.

    python -m bench.cyber_export --run-dir RUN [--member M] [--step S] --out FILE.npz

The ``.npz`` holds the network's params (``params/<module>/.../<leaf>``, float32), its shape
(torso widths, activation, recurrent core) and what a Blue needs to play it outside JAX:
the observation mode, the action set and the tables of the reduced set's decoy macro for
both bug settings. ``bench/research/cyber_peer.py``'s ``PolicyBlue`` plays it in CybORG with numpy
only (``--blue policy --policy FILE.npz``), so a defender's leaderboard figure can be checked
against the env the leaderboard used; ``tests/test_cyber_export.py`` checks that
``PolicyBlue`` chooses jaxrl's actions and rebuilds jaxrl's observations step by step.

Bad input (not a CAGE2 run, a member it does not have, a network ``PolicyBlue`` cannot play:
observation normalisation, an LSTM core) is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxrl.config import ConfigError
from jaxrl.envs.cyber import tables as tb
from jaxrl.run.checkpoint import CheckpointError
from jaxrl.run.play import load_policy

from .cyber_defender import _check_cage2_run

ACTIVATIONS = ("tanh", "relu")  # what PolicyBlue implements


def flat_params(params: Any) -> dict[str, np.ndarray]:
    """``{"params/<module>/.../<leaf>": float32 array}`` of a flax params tree."""
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    return {
        "/".join(str(getattr(k, "key", k)) for k in path): np.asarray(leaf, np.float32)
        for path, leaf in leaves
    }


def export_arrays(run_dir: str | Path, member: int = 0, step: int | None = None) -> dict:
    """The arrays of the ``.npz`` for ``member`` of ``run_dir`` (see the module docstring).

    Raises:
      ValueError: not a CAGE2 run, no such member, or a network PolicyBlue cannot play.
      CheckpointError: not a run directory or no checkpoint.
    """
    _check_cage2_run(run_dir)
    setup, policy, step = load_policy(run_dir, step)
    count = setup.members.count
    if not 0 <= member < count:
        raise ValueError(f"--member {member}: {run_dir} has members 0..{count - 1}")
    if count > 1:
        policy = jax.tree.map(lambda x: x[member], policy)
    net = setup.config.network
    if setup.normalize_obs:
        raise ValueError(f"{run_dir} normalises observations; PolicyBlue reads raw ones")
    if net.core not in ("gru", "none"):
        raise ValueError(f"{run_dir} has a {net.core} core; PolicyBlue plays GRU or none")
    if net.activation not in ACTIVATIONS:
        raise ValueError(f"{run_dir} uses {net.activation}; PolicyBlue plays {ACTIVATIONS}")
    params = policy.params["params"] if "params" in policy.params else policy.params
    arrays = {f"params/{k}": v for k, v in flat_params(params).items()}
    return {
        **arrays,
        "step": np.int64(step),
        "obs_mode": np.asarray(setup.env_params.obs_mode),
        "action_set": np.asarray(setup.env_params.action_set),
        "activation": np.asarray(net.activation),
        "core": np.asarray(net.core),
        "shared_torso": np.asarray(net.shared_torso),
        "torso_layers": np.int64(len(net.hidden_sizes)),
        "reduced_first": tb.REDUCED_FIRST,
        "reduced_hosts": tb.REDUCED_HOSTS,
        "decoy_order": tb.DECOY_ORDER,
        "decoy_compatible": np.asarray(tb.DECOY_COMPATIBLE, bool),
        "decoy_exploit_2_1": tb.DECOY_EXPLOIT_BUGGY,
        "decoy_exploit_fixed": tb.DECOY_EXPLOIT_FIXED,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", required=True, help="a CAGE2 run")
    parser.add_argument("--member", type=int, default=0, help="member of a PBT or seed run")
    parser.add_argument("--step", type=int, default=None, help="checkpoint (default: latest)")
    parser.add_argument("--out", required=True, help="the .npz to write")
    args = parser.parse_args(argv)
    try:
        arrays = export_arrays(args.run_dir, args.member, args.step)
    except (ValueError, CheckpointError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    np.savez(args.out, **arrays)
    print(f"{args.out}: {args.run_dir} member {args.member} at update {int(arrays['step'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
