"""The tiny league of :mod:`tests.arch_reference` (curriculum, self-play, an evaluation lane,
two exploiters, PBT on two members) trains to the parameters it trained to before the Feature
refactor (issue 61), and the checkpoint that code saved restores and trains on to them too.

Compared as the L1 norm of every leaf of the whole runner state (params, optimiser state,
every feature's state, PBT's, the exploiters' runners, env states, keys as their data) at
``rtol=1e-4``: the tolerance of ``test_without_exploiters_the_program_is_unchanged``
(XLA's CPU code differs between instruction sets; a changed program moves the optimiser
moments far more).
"""

from __future__ import annotations

import json
import shutil

import jax
import numpy as np
import pytest

from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.train_step import init_run
from tests.arch_reference import CHUNKS, DATA, SAVED_AT, leaf_norms, run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[str, float]]:
    return json.loads((DATA / "norms.json").read_text())


@pytest.fixture(scope="module")
def trained():
    """``(setup, step, runners)`` of a fresh run of the reference config (compiled once)."""
    return run()


def _assert_norms(runner, expected: dict[str, float]) -> None:
    norms = leaf_norms(runner)
    assert sorted(norms) == sorted(expected)  # the same leaves: a checkpoint's structure
    paths = sorted(expected)
    np.testing.assert_allclose(
        [norms[p] for p in paths], [expected[p] for p in paths], rtol=1e-4, atol=0
    )


def test_a_fresh_run_trains_to_the_reference(trained, reference):
    _, _, runners = trained
    for chunk in (SAVED_AT, CHUNKS):
        _assert_norms(runners[chunk], reference[str(chunk)])


def test_the_reference_checkpoint_restores_and_trains_on(trained, reference, tmp_path):
    setup, step, _ = trained
    shutil.copytree(DATA / "checkpoints", tmp_path / "checkpoints")
    checkpointer = Checkpointer(tmp_path, create=False)
    restored, _ = checkpointer.restore(init_run(setup), SAVED_AT)
    checkpointer.close()
    _assert_norms(restored, reference[str(SAVED_AT)])
    runner = restored
    for _ in range(CHUNKS - SAVED_AT):
        runner, _ = step(runner)
    _assert_norms(jax.block_until_ready(runner), reference[str(CHUNKS)])
