"""Non-finite updates are skipped and counted; a NaN streak stops training cleanly."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnax.environments.classic_control import cartpole

from jaxrl import envs
from jaxrl.commands.train import main
from jaxrl.config import load_config
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.driver import train
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_runner_state
from tests.conftest import tiny_overrides

REPO = Path(__file__).resolve().parents[1]
NAN_AFTER = 8 * 32  # agent steps per env: the rewards turn NaN during update 9


@struct.dataclass
class NaNState(cartpole.EnvState):
    global_step: jax.Array  # () int32, steps across episodes (survives auto-reset)


class NaNCartPole(cartpole.CartPole):
    """CartPole whose rewards become NaN after ``NAN_AFTER`` steps of an instance."""

    def reset_env(self, key, params):
        obs, state = super().reset_env(key, params)
        return obs, NaNState(**vars(state), global_step=jnp.zeros((), jnp.int32))

    def step_env(self, key, state, action, params):
        obs, new, reward, terminated, info = super().step_env(key, state, action, params)
        new = NaNState(**vars(new), global_step=state.global_step)
        return obs, new, reward, terminated, info

    def step(self, key, state, action, params=None):
        obs, new, reward, terminated, truncated, info = super().step(key, state, action, params)
        new = new.replace(global_step=state.global_step + 1)
        reward = jnp.where(state.global_step >= NAN_AFTER, jnp.nan, reward)
        return obs, new, reward, terminated, truncated, info


if "NaNCartPole-test" not in envs.registered_envs():
    envs.register("NaNCartPole-test", NaNCartPole)

OVERRIDES = tiny_overrides(
    "env.name=NaNCartPole-test", "train.total_steps=4096", "train.max_nonfinite_updates=3"
)


def test_nan_streak_stops_with_last_good_checkpoint(tmp_path, capsys):
    run_dir = tmp_path / "nan"
    code = main(
        ["--config", str(REPO / "configs" / "cartpole.yaml"), *OVERRIDES]
        + ["--run-dir", str(run_dir), "--quiet"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert len(err.splitlines()) == 1, err
    assert "3 non-finite updates in a row" in err
    assert "last good checkpoint: step 8" in err

    config = load_config(run_dir / "config.yaml")
    setup = make_setup(config)
    checkpointer = Checkpointer(run_dir, create=False)
    assert checkpointer.steps() == [8]
    runner, _ = checkpointer.restore(init_runner_state(setup, jax.random.key(0)))
    for leaf in jax.tree.leaves(runner.params):
        assert np.isfinite(np.asarray(leaf)).all()


def test_nonfinite_updates_are_skipped_and_counted(tmp_path):
    config = load_config(
        REPO / "configs" / "cartpole.yaml", [*OVERRIDES, "train.max_nonfinite_updates=100"]
    )
    result = train(config, tmp_path / "skip", quiet=True)
    runner = result.runner
    # All 32 updates run; updates 9..32 see NaN rewards and are skipped.
    assert int(runner.update_step) == 32
    assert int(runner.nonfinite_total) == 24
    assert int(runner.nonfinite_streak) == 24
    assert [row["train/nonfinite_updates"] for row in result.history] == [0.0, 8.0, 8.0, 8.0]
    for leaf in jax.tree.leaves(runner.params):
        assert np.isfinite(np.asarray(leaf)).all()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--config", "configs/cartpole.yaml", "ppo.lrr=1"], "ppo.lrr"),
        (["--config", "configs/cartpole.yaml", "ppo.lr=-1"], "ppo.lr"),
        (["--config", "configs/cartpole.yaml", "ppo.num_minibatches=3"], "ppo.num_minibatches"),
        (["--config", "configs/cartpole.yaml", "env.name=NoSuchEnv"], "env.name"),
        (["--config", "configs/missing.yaml"], "missing.yaml"),
        (["--resume", "runs/x", "ppo.lr=1"], "ppo.lr cannot change when resuming"),
    ],
)
def test_cli_rejects_bad_input_with_one_line(argv, needle, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


def test_resume_of_missing_run_is_a_clear_error(tmp_path, capsys):
    assert main(["--resume", str(tmp_path)]) == 2  # bad input: a folder that is no run
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no config.yaml" in err
