"""A tiny league with every feature on, as test data: the refactor of issue 61 keeps its bits.

Soccer 1v1 with a curriculum (a one-update warm-up, then self-play), the league (pool, PFSP
lanes, rule opponents), an evaluation lane, two exploiters and PBT over two members, three
chunks of one update each. :func:`run` trains it from scratch; :func:`leaf_norms` reduces a
runner state to the L1 norm of every leaf (keys as their data), keyed by its path.

``python -m tests.arch_reference`` (from the repository root) writes the reference:
``tests/data/arch_reference/norms.json`` (the norms after 2 and 3 chunks) and a checkpoint of
the runner after 2 chunks under ``tests/data/arch_reference/checkpoints``. It was run once,
at c913e45 (before the Feature refactor); ``tests/test_arch_reference.py`` re-runs the config
on the code as it is and restores the checkpoint. Regenerate only for a change meant to
alter the program.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config import config_from_dict
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_run, make_train_step

DATA = Path(__file__).resolve().parent / "data" / "arch_reference"
NUM_ENVS, STEPS, CHUNKS, SAVED_AT = 8, 8, 3, 2


def config_dict() -> dict:
    """The tiny league: 8 envs (4 learner-vs-pool, 2 vs the rule, 2 vs the latest), one
    evaluation lane of 2 envs, 2 exploiters of 4 envs, PBT on 2 seeds every update."""
    return {
        "seed": 0,
        "env": {
            "name": "Soccer",
            "num_envs": NUM_ENVS,
            "kwargs": {"max_steps_in_episode": 10},
            "normalize_obs": True,
        },
        "curriculum": {
            "stages": [
                {
                    "name": "warmup",
                    "env": {"max_steps_in_episode": 6},
                    "metric": "episode_length",
                    "threshold": 0.0,
                    "window": 1,
                    "min_updates": 1,
                },
                {
                    "name": "league",
                    "env": {"max_steps_in_episode": 8},
                    "features": {"selfplay": True},
                },
            ]
        },
        "evaluation": {"lanes": [{"name": "rule", "envs": 2}], "every_updates": 2},
        "network": {"hidden_sizes": [8]},
        "ppo": {"num_steps": STEPS, "num_minibatches": 2, "update_epochs": 1},
        "train": {
            "total_steps": NUM_ENVS * STEPS * CHUNKS,
            "updates_per_chunk": 1,
            "num_seeds": 2,
            "progress_bar": False,
        },
        "selfplay": {
            "pool_size": 2,
            "snapshot_every": 1,
            "latest_fraction": 0.25,
            "rule_fraction": 0.25,
            "lanes": 1,
            "exploiters": 2,
            "exploiter_fraction": 0.5,
            "exploiter_threshold": 0.5,
            "exploiter_min_games": 1.0,
        },
        "pbt": {
            "every_updates": 1,
            "fraction": 0.5,
            "hyperparameters": {
                "ppo.lr": {"min": 1e-4, "max": 1e-2},
                "ppo.ent_coef": {"min": 0.0, "max": 0.1},
            },
        },
    }


def as_data(tree):
    """``tree`` with typed PRNG keys as their uint32 data, on the host."""

    def data(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        return np.asarray(x)

    return jax.tree.map(data, jax.device_get(tree))


def leaf_norms(tree) -> dict[str, float]:
    """``{path: L1 norm}`` of every leaf (float64), keys as their data."""
    flat, _ = jax.tree_util.tree_flatten_with_path(as_data(tree))
    return {
        jax.tree_util.keystr(path): float(np.abs(np.asarray(leaf, np.float64)).sum())
        for path, leaf in flat
    }


def run(runner=None, chunks: int = CHUNKS):
    """``(setup, step, runners)``: the compiled chunk and the runner after 0..chunks chunks,
    from ``runner`` (default: a fresh one). Every runner but the last is a copy (the step
    donates its input)."""
    setup = make_setup(config_from_dict(config_dict()))
    step = make_train_step(setup)
    runner = init_run(setup) if runner is None else runner
    runners = []
    for _ in range(chunks):
        runners.append(jax.tree.map(jnp.copy, runner))
        runner, _ = step(runner)
    runners.append(jax.block_until_ready(runner))
    return setup, step, runners


def main() -> None:
    """Write the reference norms and checkpoint under :data:`DATA`."""
    _, _, runners = run()
    shutil.rmtree(DATA, ignore_errors=True)
    DATA.mkdir(parents=True)
    norms = {str(i): leaf_norms(runners[i]) for i in (SAVED_AT, CHUNKS)}
    (DATA / "norms.json").write_text(json.dumps(norms, indent=0, sort_keys=True) + "\n")
    checkpointer = Checkpointer(DATA, keep=1)
    checkpointer.save(runners[SAVED_AT], {"env_steps": 0}, step=SAVED_AT)
    checkpointer.close()


if __name__ == "__main__":
    main()
