"""Members of a run (``train.num_seeds`` x ``sweep``): vmapped in one program, each equal
to the same seed and hyperparameters trained alone."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from jaxrl import envs
from jaxrl.commands import evaluate as evaluate_cli
from jaxrl.config import SWEEPABLE, ConfigError, load_config
from jaxrl.core.hyper import (
    PPO_KEYS,
    Hyper,
    base_hyper,
    env_leaf_kind,
    make_members,
    member_env_params,
)
from jaxrl.run.driver import train
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_member_params, member_params, member_params_program
from tests.conftest import tiny_overrides

REPO = Path(__file__).resolve().parents[1]

# 4 envs x 16 steps, 6 updates in 2 chunks.
SMALL = tiny_overrides(
    "ppo.num_steps=16",
    "train.total_steps=384",
    "train.updates_per_chunk=3",
    "checkpoint.every_updates=3",
)
LRS = [1e-3, 3e-4]
MEMBERS = SMALL + ["train.num_seeds=2", f"sweep={{ppo.lr: {LRS}, ppo.ent_coef: [0.0, 0.02]}}"]
TOLERANCE = 1e-5  # vmapped and single runs may sum in another order


def _config(overrides: list[str]):
    return load_config(REPO / "configs" / "cartpole.yaml", overrides)


def _member(tree, i: int):
    return jax.tree.map(lambda x: np.asarray(x)[i], tree)


def _assert_close(a, b) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=TOLERANCE)


@pytest.fixture(scope="module")
def members_run(tmp_path_factory):
    """4 members (2 sweep points x seeds 0, 1) in one program."""
    return train(_config(MEMBERS), tmp_path_factory.mktemp("members") / "run", quiet=True)


@pytest.fixture(scope="module")
def single_runs(tmp_path_factory):
    """Members 0 (lr 1e-3, ent 0, seed 0) and 3 (lr 3e-4, ent 0.02, seed 1) on their own."""
    root = tmp_path_factory.mktemp("singles")
    first = train(_config(SMALL + ["ppo.lr=1e-3", "ppo.ent_coef=0.0"]), root / "a", quiet=True)
    last = train(
        _config(SMALL + ["seed=1", "ppo.lr=3e-4", "ppo.ent_coef=0.02"]), root / "b", quiet=True
    )
    return first, last


def test_member_layout():
    members = make_members(_config(MEMBERS))
    assert members.names == (
        "lr=0.001-ent_coef=0-seed0",
        "lr=0.001-ent_coef=0-seed1",
        "lr=0.0003-ent_coef=0.02-seed0",
        "lr=0.0003-ent_coef=0.02-seed1",
    )
    assert members.seeds == (0, 1, 0, 1)
    np.testing.assert_array_equal(members.hyper.lr, np.float32([1e-3, 1e-3, 3e-4, 3e-4]))
    np.testing.assert_array_equal(members.hyper.clip_eps, np.float32([0.2] * 4))  # not swept


def test_sweep_values_differ_per_member(members_run):
    runner = members_run.runner
    np.testing.assert_array_equal(runner.hyper.lr, np.float32([1e-3, 1e-3, 3e-4, 3e-4]))
    np.testing.assert_array_equal(runner.hyper.ent_coef, np.float32([0, 0, 0.02, 0.02]))
    kernels = [np.asarray(x) for x in jax.tree.leaves(runner.params)]
    for a in range(4):
        for b in range(a + 1, 4):  # every member trained to params of its own
            assert any(not np.allclose(k[a], k[b]) for k in kernels), (a, b)
    rates = members_run.history[-1]["train/learning_rate"]  # annealed from each member's lr
    assert rates[0] == rates[1] and rates[2] == rates[3] and rates[0] > rates[2]


def test_vmapped_members_equal_runs_one_by_one(members_run, single_runs):
    first, last = single_runs
    _assert_close(_member(members_run.runner.params, 0), first.runner.params)
    _assert_close(_member(members_run.runner.params, 3), last.runner.params)
    _assert_close(_member(members_run.runner.opt_state, 3), last.runner.opt_state)


def test_one_tensorboard_run_per_member(members_run):
    for name in make_members(_config(MEMBERS)).names:
        assert list((members_run.run_dir / name).glob("events.out.tfevents.*")), name


def test_evaluate_json_lists_the_seeds(members_run, capsys):
    assert (
        evaluate_cli.main(["--run-dir", str(members_run.run_dir), "--episodes", "2", "--json"]) == 0
    )
    seeds = json.loads(capsys.readouterr().out)["seeds"]
    assert [s["seed"] for s in seeds] == [0, 1, 0, 1]
    assert seeds[2]["sweep"] == {"ppo.lr": 3e-4, "ppo.ent_coef": 0.02}
    assert seeds[1]["member"] == "lr=0.001-ent_coef=0-seed1"
    assert all(len(s["returns"]) == 2 and "mean_return" in s for s in seeds)


def test_resume_of_members_is_bit_exact(members_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(members_run.run_dir, copy)
    shutil.rmtree(copy / "checkpoints" / "6")  # back to the checkpoint at update 3
    resumed = train(run_dir=copy, resume=True, quiet=True)
    for x, y in zip(
        jax.tree.leaves(resumed.runner.params),
        jax.tree.leaves(members_run.runner.params),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.num_seeds=0", "train.num_seeds must be >= 1"),
        ("sweep={ppo.lr: [0.001, -1]}", r"sweep.ppo.lr: every value must be a finite number > 0"),
        ("sweep={ppo.num_steps: [8, 16]}", "'ppo.num_steps' cannot be swept"),
        ("sweep={ppo.lr: [0.001, 0.002], ppo.gamma: [0.9]}", "same length"),
    ],
)
def test_bad_members_config(override, message):
    with pytest.raises(ConfigError, match=message):
        _config(SMALL + [override])


# ---- env parameters as member values -------------------------------------------------------

SOCCER = REPO / "configs" / "soccer_1v1.yaml"
TIME_WEIGHTS = [-0.001, -0.5]  # Soccer's reward.time term: weight x 1 every step


def _soccer_sweep(sweep: dict):
    """The soccer 1v1 config with ``sweep``."""
    return load_config(SOCCER, [f"sweep={json.dumps(sweep)}"])


def test_ppo_keys_are_the_sweepable_keys():
    assert PPO_KEYS == SWEEPABLE


def test_member_values_are_declared_once():
    """The PPO fields declared with ``member_value`` are, in order, the Hyper leaves, the
    sweepable keys and the keys PBT may explore; their rule is checked at load."""
    from jaxrl.config.ppo import MEMBER_VALUES  # noqa: PLC0415

    names = list(MEMBER_VALUES)
    assert names == ["lr", "gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef"]
    assert [f.name for f in dataclasses.fields(Hyper)] == [*names, "env"]
    assert list(SWEEPABLE) == [f"ppo.{name}" for name in names]
    config = load_config(REPO / "configs" / "cartpole.yaml", [])
    hyper = base_hyper(config)
    for name in names:
        assert getattr(hyper, name) == np.float32(getattr(config.ppo, name))
    with pytest.raises(ConfigError, match=r"ppo\.vf_coef must be >= 0, got -1"):
        load_config(REPO / "configs" / "cartpole.yaml", ["ppo.vf_coef=-1"])


@pytest.mark.parametrize(
    "config, override, message",
    [
        ("soccer_1v1", "sweep={env.kwargs.reward.sparse: [0, 2]}", "a bool parameter takes 0 or 1"),
        ("soccer_1v1", "sweep={env.kwargs.blue_size: [1, 1.5]}", "takes whole numbers, got 1.5"),
        ("soccer_1v1", "sweep={env.kwargs.team_size_weights: [0, 1]}", "only numeric scalar"),
        ("soccer_1v1", "sweep={env.kwargs.reward: [0, 1]}", "reward: a struct"),
        ("cartpole", "sweep={env.kwargs.gravity: [9.8, 1.0, 2.0], ppo.lr: [0.1]}", "same length"),
        (
            "soccer_curriculum",
            "sweep={env.kwargs.opponent_skill: [0.5, 1.0]}",
            "^sweep: env.kwargs.opponent_skill varies per member and a curriculum stage sets",
        ),
    ],
)
def test_bad_env_sweep(config, override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(REPO / "configs" / f"{config}.yaml", [override])


@pytest.mark.parametrize(
    "key, kind",
    [
        ("env.kwargs.reward.touch", "float"),
        ("env.kwargs.reward.sparse", "bool"),
        ("env.kwargs.blue_size", "int"),
        ("env.kwargs.physics.ball_mass", "float"),
    ],
)
def test_env_leaf_kind(key, kind):
    _, params = envs.make("Soccer")
    assert env_leaf_kind(key, params) == kind


@pytest.mark.parametrize(
    "key, message",
    [
        ("ppo.lr", "env parameters are given as env.kwargs.<parameter>"),
        ("env.kwargs.reward.bogus", "no parameter 'bogus' in RewardWeights"),
        ("env.kwargs.reward", "a struct; name one of its fields"),
        ("env.kwargs.team_size_weights", "only numeric scalar parameters vary per member"),
        ("env.kwargs.blue_size.x", "int32 has no parameter 'x'"),
        ("env.kwargs.mode", "static field"),
    ],
)
def test_env_keys_that_cannot_vary_per_member(key, message):
    _, params = envs.make("Soccer")

    class WithStatic(struct.PyTreeNode):  # Soccer's params plus a static field
        reward: Any
        team_size_weights: Any
        blue_size: Any
        mode: str = struct.field(pytree_node=False, default="a")

    fields = ("reward", "team_size_weights", "blue_size")
    with_static = WithStatic(**{name: getattr(params, name) for name in fields})
    with pytest.raises(ValueError, match=f"^{key}: .*{message}"):
        env_leaf_kind(key, with_static)


def test_env_sweep_members_and_their_values():
    members = make_members(_soccer_sweep({"env.kwargs.reward.time": TIME_WEIGHTS}))
    assert members.names == ("time=-0.001-seed0", "time=-0.5-seed0")
    assert members.points[1] == {"env.kwargs.reward.time": -0.5}
    np.testing.assert_array_equal(members.hyper.env["reward.time"], np.float32(TIME_WEIGHTS))
    np.testing.assert_array_equal(members.hyper.lr, np.float32([3e-4, 3e-4]))
    # PBT may explore an env parameter nobody swept: it starts at the config's value.
    pbt = ["train.num_seeds=2", "pbt.every_updates=2", "pbt.fraction=0.5"]
    pbt += ["pbt.hyperparameters={env.kwargs.reward.touch: {min: 0.0, max: 1.0}}"]
    explored = make_members(load_config(SOCCER, pbt))
    np.testing.assert_array_equal(explored.hyper.env["reward.touch"], np.float32([0.5, 0.5]))
    assert make_members(load_config(SOCCER)).hyper.env == {}  # nothing varies: no entry


def test_env_values_are_cast_to_their_leaf():
    _, params = envs.make("Soccer")
    two = lambda x: np.broadcast_to(x, (2,))  # noqa: E731
    hyper = jax.tree.map(two, base_hyper(load_config(SOCCER))).replace(
        env={
            "reward.sparse": np.float32([0.0, 1.0]),
            "blue_size": np.float32([1.0, 2.0]),
            "reward.touch": np.float32([0.0, 0.2]),
        }
    )
    got = jax.vmap(lambda h: member_env_params(params, h))(hyper)
    np.testing.assert_array_equal(got.reward.sparse, [False, True])
    assert got.reward.sparse.dtype == bool and got.blue_size.dtype == jnp.int32
    np.testing.assert_array_equal(got.blue_size, [1, 2])
    np.testing.assert_array_equal(got.reward.touch, np.float32([0.0, 0.2]))
    np.testing.assert_array_equal(got.reward.goal_scored, [10.0, 10.0])  # the rest unchanged


def test_each_member_plays_under_its_own_env_values():
    """Soccer's time term is its weight on every active slot: one vmapped step, two weights."""
    env, params = envs.make("Soccer")
    members = make_members(_soccer_sweep({"env.kwargs.reward.time": TIME_WEIGHTS}))

    @jax.jit
    def first_step(hyper, key):
        member_params = member_env_params(params, hyper)
        key_reset, key_step = jax.random.split(key)
        _, state = env.reset(key_reset, member_params)
        action = jnp.full((6,), 8, jnp.int32)  # no-op
        *_, info = env.step(key_step, state, action, member_params)
        return info["reward_terms"]["time"], info["agent_mask"]

    hyper = jax.tree.map(jnp.asarray, members.hyper)
    keys = jax.random.split(jax.random.key(0), members.count)
    time_term, active = jax.vmap(first_step)(hyper, keys)
    for m, weight in enumerate(TIME_WEIGHTS):
        np.testing.assert_array_equal(time_term[m][active[m]], np.float32(weight))
        np.testing.assert_array_equal(time_term[m][~active[m]], 0.0)


def test_env_sweep_members_train_under_their_own_values(tmp_path):
    """CartPole's time limit swept in one program: each member's episodes end by its own."""
    config = _config(SMALL + ["sweep={env.kwargs.max_steps_in_episode: [10, 40]}"])
    result = train(config, tmp_path / "run", quiet=True)
    assert make_members(config).names == (
        "max_steps_in_episode=10-seed0",
        "max_steps_in_episode=40-seed0",
    )
    lengths = np.array([row["rollout/episode_length"] for row in result.history])  # [chunks, 2]
    assert (lengths[:, 0] <= 10).all() and (lengths[:, 1] > 10).all(), lengths
    np.testing.assert_array_equal(result.runner.hyper.env["max_steps_in_episode"], [10, 40])


# ----------------------------------------------------------------------------- initial params


def test_members_params_one_by_one_equal_the_vmapped_program():
    """The members' initial params, computed one member at a time, are the bits a vmapped
    program over the members gives."""
    setup = make_setup(
        load_config(REPO / "configs" / "cartpole.yaml", SMALL + ["train.num_seeds=3"])
    )
    keys = jnp.stack([jax.random.key(seed) for seed in setup.members.seeds])
    vmapped = jax.jit(jax.vmap(lambda k: member_params(setup, k)))(keys)
    one_by_one = init_member_params(setup, keys)
    assert jax.tree.structure(one_by_one) == jax.tree.structure(vmapped)
    for ours, theirs in zip(jax.tree.leaves(one_by_one), jax.tree.leaves(vmapped), strict=True):
        assert ours.shape[0] == 3
        np.testing.assert_array_equal(ours, theirs)


def test_members_params_program_has_no_batched_qr():
    """The orthogonal initialiser's QRs are of single matrices: a batched one on the CPU runs
    as tasks that wait on XLA's pool, and with 8 Breakout members it hung (see
    :func:`jaxrl.run.train_step.init_member_params`)."""
    config = load_config(REPO / "configs" / "breakout_minatar_pbt.yaml", ["env.num_envs=16"])
    setup = make_setup(config)
    assert setup.members.count == 8
    text = member_params_program(setup).lower(jax.random.key(0)).as_text()
    operands = re.findall(r"custom_call @lapack_\w+\(.*?\) .*?: \(tensor<([^>]*)>", text)
    assert len(operands) == 2 * 4  # geqrf and orgqr of each of the 4 kernels
    assert all(shape.count("x") == 2 for shape in operands), operands  # rows x cols x dtype
