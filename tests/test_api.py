"""The Python API (jaxrl.api): ``jaxrl.commands.train`` in memory and to a run directory,
``jaxrl.commands.evaluate`` and ``jaxrl.load_policy``'s jittable ``act``."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrl
from jaxrl import envs
from jaxrl.config import ConfigError
from jaxrl.run.errors import TrainingError

REPO = Path(__file__).resolve().parent.parent
TINY = (
    "env.num_envs=8", "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=2",
    "network.hidden_sizes=[16]", "train.total_steps=2048", "train.updates_per_chunk=4",
    "train.progress_bar=false",
)  # fmt: skip
UPDATES = 2048 // (8 * 16)


@pytest.fixture(scope="module")
def corridor():
    """The Corridor class of examples/corridor (importable as ``corridor``)."""
    sys.path.insert(0, str(REPO / "examples" / "corridor"))
    import corridor  # noqa: PLC0415

    yield corridor.Corridor
    sys.path.remove(str(REPO / "examples" / "corridor"))


@pytest.fixture(scope="module")
def corridor_run(tmp_path_factory, corridor):
    """Corridor trained to a run directory through the API, given as a class."""
    run_dir = tmp_path_factory.mktemp("api") / "run"
    out = jaxrl.train(None, env=corridor, overrides=TINY, run_dir=run_dir, quiet=True)
    return run_dir, out


def test_importing_jaxrl_is_light():
    code = "import sys, jaxrl; print(any(m == 'jax' or m.startswith('jax.') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


def test_train_evaluate_export_are_plain_functions():
    """``jaxrl.train``/``evaluate``/``export`` are the API's functions; the command lines'
    entry files (``python -m jaxrl.train``) refuse to be imported, so nothing can put a
    module in a function's place."""
    import types  # noqa: PLC0415

    from jaxrl import api  # noqa: PLC0415

    for name in ("train", "evaluate", "export"):
        assert isinstance(getattr(jaxrl, name), types.FunctionType)
        assert getattr(jaxrl, name) is getattr(api, name)
        with pytest.raises(ImportError, match=f"jaxrl.{name} is only run"):
            importlib.import_module(f"jaxrl.{name}")
        assert isinstance(getattr(jaxrl, name), types.FunctionType)  # still the function


def test_train_in_memory_writes_nothing_and_returns_history(tmp_path, monkeypatch, corridor):
    monkeypatch.chdir(tmp_path)
    out = jaxrl.train(None, env=corridor(), overrides=TINY, quiet=True)  # an env instance
    assert list(tmp_path.iterdir()) == []  # no run dir, events or checkpoints
    assert out.run_dir is None and out.config.env.name == "Corridor"
    assert [row["update"] for row in out.history] == [4, 8, 12, 16]
    assert all(np.isfinite(row["loss/total"]) for row in out.history if "loss/total" in row)
    assert int(jax.device_get(out.state.update_step)) == UPDATES
    result = jaxrl.evaluate(out, episodes=4)
    assert result.step == UPDATES and result.episodes == 4


def test_run_dir_records_the_import_path_and_evaluates(corridor_run):
    run_dir, out = corridor_run
    assert out.run_dir == run_dir and (run_dir / "config.yaml").is_file()
    assert out.config.env.name == "corridor:Corridor"  # the class, by its import path
    result = jaxrl.evaluate(run_dir, episodes=4)
    assert result.step == UPDATES


def test_load_policy_act_is_jittable_and_plays_as_evaluate(corridor_run, corridor):
    """A hand-written rollout with ``act`` (deterministic, like evaluate's greedy actions) gets
    evaluate's return on the deterministic Corridor: the same params, the same actions."""
    run_dir, _ = corridor_run
    policy = jaxrl.load_policy(run_dir)
    assert policy.checkpoint_step == UPDATES and not policy.recurrent
    env, params = envs.make("corridor:Corridor")

    @jax.jit
    @chex.assert_max_traces(n=1)
    def episode_return(policy_params, key):
        obs, state = env.reset(key, params)

        def step(carry, key_step):
            obs, state, total, done = carry
            key_act, key_env = jax.random.split(key_step)
            action = policy.act(policy_params, obs[None], key_act)[0]
            obs, state, reward, terminated, truncated, _ = env.step(key_env, state, action, params)
            total = total + jnp.where(done, 0.0, reward)
            return (obs, state, total, done | terminated | truncated), None

        carry = (obs, state, jnp.float32(0.0), jnp.bool_(False))
        keys = jax.random.split(key, int(params.max_steps_in_episode))
        (_, _, total, _), _ = jax.lax.scan(step, carry, keys)
        return total

    mine = float(episode_return(policy.params, jax.random.key(0)))
    again = float(episode_return(policy.params, jax.random.key(1)))  # no retrace
    evaluated = jaxrl.evaluate(run_dir, episodes=2, actions="greedy")
    assert mine == again == pytest.approx(evaluated.mean_return)
    assert evaluated.std_return == 0.0


def test_api_errors_name_keyword_arguments(corridor_run):
    run_dir, _ = corridor_run
    with pytest.raises(TrainingError) as err:
        jaxrl.train(None, overrides=TINY, run_dir=run_dir)
    assert "overwrite=True" in str(err.value) and "--" not in str(err.value)
    with pytest.raises(TrainingError, match="resume=True needs run_dir="):
        jaxrl.train(None, resume=True)
    with pytest.raises(TypeError, match="env= takes"):
        jaxrl.train(None, env=3)


def test_resume_with_overrides_trains_further_as_the_cli_does(tmp_path, corridor):
    """``jaxrl.train(run_dir=R, resume=True, overrides=["train.total_steps=N"])`` is
    ``python -m jaxrl.train --resume R train.total_steps=N``: the same bits, the same config."""
    import shutil  # noqa: PLC0415

    from jaxrl.commands.train import main  # noqa: PLC0415
    from jaxrl.config import load_config  # noqa: PLC0415

    short = [*TINY, "train.total_steps=1024"]
    api_dir, cli_dir = tmp_path / "api", tmp_path / "cli"
    jaxrl.train(None, env=corridor, overrides=short, run_dir=api_dir, quiet=True)
    shutil.copytree(api_dir, cli_dir)
    further = ["train.total_steps=2048"]
    out = jaxrl.train(run_dir=api_dir, resume=True, overrides=further, quiet=True)
    assert [row["update"] for row in out.history] == [12, 16]
    assert out.config.train.total_steps == 2048 and out.run_dir == api_dir
    assert main(["--resume", str(cli_dir), *further, "--quiet"]) == 0
    assert load_config(api_dir / "config.yaml") == load_config(cli_dir / "config.yaml")
    by_cli = jaxrl.load_policy(cli_dir).params
    by_api = jaxrl.load_policy(api_dir).params
    assert jaxrl.load_policy(api_dir).checkpoint_step == UPDATES
    chex.assert_trees_all_equal(by_api, by_cli)
    chex.assert_trees_all_equal(by_api.params, out.state.params)
    with pytest.raises(ConfigError, match="ppo.lr"):
        jaxrl.train(run_dir=api_dir, resume=True, overrides=["ppo.lr=0.1"])


def test_env_argument_names_classes_by_import_path_else_registers_them(corridor):
    from jaxrl.api import env_name  # noqa: PLC0415

    assert env_name("CAGE2") == "CAGE2"
    assert env_name(corridor) == "corridor:Corridor"  # importable: found by any process

    class Notebook(corridor):  # defined in a function (a notebook cell): no import path
        pass

    assert env_name(Notebook) == "Notebook" and envs.source("Notebook") == ""
    assert env_name(Notebook) == "Notebook"  # again: the same registration
    assert isinstance(envs.make("Notebook")[0], Notebook)
    assert env_name(envs.MemoryProbe()) == "MemoryProbe-instance"  # ours stays as registered
    assert type(envs.make("MemoryProbe")[0]) is envs.MemoryProbe
