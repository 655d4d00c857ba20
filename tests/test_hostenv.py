"""Host envs (gymnasium, EnvPool) through the actor-learner split: tiny end-to-end runs."""

from __future__ import annotations

import dataclasses
import re
import shutil
import sys
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from jaxrl.commands.evaluate import evaluate  # noqa: E402
from jaxrl.commands.train import main  # noqa: E402
from jaxrl.config import (  # noqa: E402
    Config,
    ConfigError,
    CurriculumConfig,
    EnvConfig,
    EvalLaneConfig,
    EvaluationConfig,
    MeshConfig,
    PBTConfig,
    SelfPlayConfig,
    StageConfig,
    TrainConfig,
    host,
    load_config,
)
from jaxrl.hostenv.networks import NatureEncoder, PatchConv  # noqa: E402
from jaxrl.hostenv.spaces import read_spaces  # noqa: E402
from jaxrl.run.driver import train, train_in_memory  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# 2 envs x 16 steps = 32 env steps per update; 4 updates.
TINY = [
    "env.num_envs=2",
    "ppo.num_steps=16",
    "ppo.num_minibatches=2",
    "ppo.update_epochs=2",
    "network.hidden_sizes=[8]",
    "train.total_steps=128",
    "train.progress_bar=false",
    "checkpoint.every_updates=2",
]


def tiny(*overrides: str):
    return load_config(REPO / "configs/cartpole_gymnasium.yaml", [*TINY, *overrides])


def leaves_equal(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


@pytest.fixture(scope="module")
def sync_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("host") / "sync"
    return train(tiny(), run_dir, quiet=True)


def test_gymnasium_cartpole_trains_end_to_end(sync_run):
    assert int(sync_run.runner.update_step) == 4
    assert [row["update"] for row in sync_run.history] == [1, 2, 3, 4]
    rows = sync_run.history
    assert all(np.isfinite(row["train/total_loss"]) for row in rows)
    assert all(row["train/nonfinite_updates"] == 0.0 for row in rows)
    assert sum(row["rollout/episodes"] for row in rows) > 0  # CartPole's random episodes end
    for tag in ("perf/env_s", "perf/policy_s", "perf/transfer_s", "perf/update_s"):
        assert all(row[tag] > 0 for row in rows)
    saved = sorted(p.name for p in (sync_run.run_dir / "checkpoints").iterdir())
    assert saved == ["2", "4"]
    assert list(sync_run.run_dir.glob("events.out.tfevents.*"))


def test_sync_mode_is_bit_reproducible(sync_run, tmp_path):
    again = train(tiny(), tmp_path / "again", quiet=True)
    assert leaves_equal(sync_run.runner.params, again.runner.params)
    assert leaves_equal(sync_run.runner.opt_state, again.runner.opt_state)
    losses = lambda result: [row["train/total_loss"] for row in result.history]  # noqa: E731
    assert losses(sync_run) == losses(again)
    other_seed = train(tiny("seed=1"), tmp_path / "seed1", quiet=True)
    assert not leaves_equal(sync_run.runner.params, other_seed.runner.params)


def test_async_mode_trains_one_update_behind(sync_run, tmp_path):
    result = train(tiny("env.host_mode=async"), tmp_path / "async", quiet=True)
    assert int(result.runner.update_step) == 4
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(result.runner.params))
    # The first two rollouts act with the same (initial) params, so the first update is the
    # sync run's and the second is not.
    first = lambda r: r.history[0]["train/total_loss"]  # noqa: E731
    second = lambda r: r.history[1]["train/total_loss"]  # noqa: E731
    assert first(result) == first(sync_run)
    assert second(result) != second(sync_run)


def test_resume_restores_update_and_restarts_envs(sync_run, tmp_path):
    run_dir = tmp_path / "resumed"
    shutil.copytree(sync_run.run_dir, run_dir)
    shutil.rmtree(run_dir / "checkpoints" / "4")  # as if killed after update 2's checkpoint
    result = train(run_dir=run_dir, resume=True, quiet=True)
    assert int(result.runner.update_step) == 4
    assert [row["update"] for row in result.history] == [3, 4]
    # The envs restart from a new seed, so updates 3-4 see other episodes than the first run.
    assert not leaves_equal(result.runner.params, sync_run.runner.params)


def test_evaluate_plays_a_host_run(sync_run):
    result = evaluate(sync_run.run_dir, episodes=3, seed=0)
    assert result.episodes == 3 and len(result.returns) == 3 and result.step == 4
    assert all(1 <= r <= 500 for r in result.returns)
    assert evaluate(sync_run.run_dir, episodes=3, seed=0).returns == result.returns


def test_unsupported_space_is_refused_in_one_line(tmp_path, capsys):
    code = main(
        [
            "--config",
            str(REPO / "configs/cartpole_gymnasium.yaml"),
            "env.name=FrozenLake-v1",
            "--run-dir",
            str(tmp_path / "run"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "observation space Discrete(16)" in err and "Box observations only" in err
    assert not (tmp_path / "run").exists()


NAN_AFTER = 32  # steps of an env instance: its rewards turn NaN in update 3 (16 steps each)


class _NaNRewards(gymnasium.Wrapper):
    """Rewards become NaN after ``NAN_AFTER`` steps of this instance (across episodes)."""

    def __init__(self, env):
        super().__init__(env)
        self.steps = 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        reward = float("nan") if self.steps > NAN_AFTER else reward
        return obs, reward, terminated, truncated, info


if "NaNCartPole-v0" not in gymnasium.registry:
    gymnasium.register(
        "NaNCartPole-v0", entry_point=lambda **kw: _NaNRewards(gymnasium.make("CartPole-v1", **kw))
    )


def test_a_nan_streak_stops_the_host_run_at_its_last_good_checkpoint(tmp_path, capsys):
    """The host learner skips and counts non-finite updates as the compiled step does, and
    the one driver stops the run on the streak with one line, keeping the last good save."""
    run_dir = tmp_path / "nan"
    argv = ["--config", str(REPO / "configs/cartpole_gymnasium.yaml"), *TINY]
    argv += ["env.name=NaNCartPole-v0", "train.max_nonfinite_updates=2"]
    assert main([*argv, "--run-dir", str(run_dir), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "training stopped: 2 non-finite updates in a row at update 4" in err
    assert "last good checkpoint: step 2" in err
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["2"]
    # With room for the streak the run goes on: updates 3 and 4 skipped, params finite.
    more_room = tiny("env.name=NaNCartPole-v0", "train.max_nonfinite_updates=10")
    result = train_in_memory(more_room, quiet=True)
    assert [row["train/nonfinite_updates"] for row in result.history] == [0.0, 0.0, 1.0, 1.0]
    assert int(result.runner.nonfinite_total) == 2 and int(result.runner.update_step) == 4
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(result.runner.params))


def test_read_spaces():
    box = gymnasium.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    spaces = read_spaces(box, gymnasium.spaces.Discrete(6), "x")
    assert spaces.image and spaces.discrete and spaces.action_dim == 6
    cont = read_spaces(
        gymnasium.spaces.Box(-1, 1, (3,)), gymnasium.spaces.Box(-2.0, 2.0, (2,)), "y"
    )
    assert not cont.discrete and cont.action_dim == 2 and cont.action_high == (2.0, 2.0)
    with pytest.raises(ConfigError, match="MultiDiscrete"):
        read_spaces(box, gymnasium.spaces.MultiDiscrete([2, 3]), "z")


@pytest.mark.parametrize(
    "override, key",
    [
        ("selfplay.pool_size=2", "selfplay.pool_size"),
        ("env.normalize_obs=true", "env.normalize_obs"),
        ("env.host_mode=later", "env.host_mode"),
        ("env.backend=ray", "env.backend"),
        ("env.name=NoSuchTask-v0", "env.name"),
    ],
)
def test_bad_host_settings_are_refused(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        tiny(override)


def config_keys(cls: type = Config, prefix: str = "") -> list[str]:
    """Every key of the config, from the dataclasses (a mapping or a list of sections, such
    as ``env.kwargs`` or ``curriculum.stages``, is one key)."""
    keys = []
    for field in dataclasses.fields(cls):
        factory = field.default_factory
        value = factory() if factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(value):
            keys += config_keys(type(value), f"{prefix}{field.name}.")
        else:
            keys.append(f"{prefix}{field.name}")
    return keys


def host_uncovered(keys: list[str]) -> list[str]:
    """Keys the host path neither supports nor refuses (nor idles behind a refused switch)."""

    def covered(key: str) -> bool:
        section = key.split(".")[0]
        return (
            key in host.HOST_SUPPORTED
            or section in host.HOST_SUPPORTED
            or key in host.HOST_UNSUPPORTED
            or section in host.HOST_IDLE
        )

    return [key for key in keys if not covered(key)]


def test_every_config_key_is_supported_or_refused_by_the_host_path():
    """A new section or key says in jaxrl/config/host.py what the host path does with it."""
    keys = config_keys()
    assert {"ppo.lr", "env.host_mode", "selfplay.pool_size", "sweep", "mesh.devices"} <= set(keys)
    assert host_uncovered(keys) == []
    assert host_uncovered([*keys, "league.size", "env.frame_skip"]) == [
        "league.size",
        "env.frame_skip",
    ]
    named = [*host.HOST_SUPPORTED, *host.HOST_UNSUPPORTED, *host.HOST_IDLE]
    stale = [k for k in named if k not in keys and not any(x.startswith(k + ".") for x in keys)]
    assert not stale, f"jaxrl/config/host.py names keys the config does not have: {stale}"


@pytest.mark.parametrize("key", list(host.HOST_UNSUPPORTED))
def test_each_refused_key_is_off_by_default_and_refused_when_used(key):
    used = host.HOST_UNSUPPORTED[key]
    config = Config(env=EnvConfig(backend="gymnasium"))
    assert not used(config)
    on = {
        "curriculum.stages": {"curriculum": CurriculumConfig(stages=(StageConfig(),))},
        "selfplay.pool_size": {"selfplay": SelfPlayConfig(pool_size=2)},
        "selfplay.exploiters": {"selfplay": SelfPlayConfig(exploiters=1)},
        "evaluation.lanes": {"evaluation": EvaluationConfig(lanes=(EvalLaneConfig(),))},
        "sweep": {"sweep": {"ppo.lr": [1e-3]}},
        "pbt.every_updates": {"pbt": PBTConfig(every_updates=5)},
        "train.num_seeds": {"train": TrainConfig(num_seeds=2)},
        "env.normalize_obs": {"env": EnvConfig(backend="gymnasium", normalize_obs=True)},
        "env.action_repeat": {"env": EnvConfig(backend="gymnasium", action_repeat=2)},
        "env.make_kwargs": {"env": EnvConfig(backend="gymnasium", make_kwargs={"a": 1})},
        "mesh.devices": {"mesh": MeshConfig(devices=2)},
    }[key]
    with pytest.raises(ConfigError, match=re.escape(f"{key}: not supported with env.backend")):
        host.validate_host(dataclasses.replace(config, **on))


def test_patch_conv_is_the_strided_convolution():
    x = jax.random.normal(jax.random.key(0), (2, 20, 20, 3))  # [M, H, W, C]
    patch = PatchConv(features=5, kernel=4, stride=2)
    x_first = jnp.transpose(x, (3, 0, 1, 2))  # PatchConv runs channels first: [C, M, H, W]
    params = patch.init(jax.random.key(1), x_first)
    dense = params["params"]["Dense_0"]
    # Dense rows are ordered (a, b, p, q, c) for kernel offset (2a + p, 2b + q).
    kernel = dense["kernel"].reshape(2, 2, 2, 2, 3, 5).transpose(0, 2, 1, 3, 4, 5)
    conv = nn.Conv(5, (4, 4), (2, 2), padding="VALID")
    want = conv.apply({"params": {"kernel": kernel.reshape(4, 4, 3, 5), "bias": dense["bias"]}}, x)
    got = jnp.transpose(patch.apply(params, x_first), (1, 2, 3, 0))
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_nature_encoder_is_nn_conv_with_its_kernels():
    """The whole encoder equals the same three ``nn.Conv`` layers (NHWC, flattened (h, w, c))."""
    obs = jax.random.randint(jax.random.key(3), (2, 4, 84, 84), 0, 256).astype(jnp.uint8)
    features, params = NatureEncoder().init_with_output(jax.random.key(2), obs)
    assert features.shape == (2, 7 * 7 * 64)
    x = jnp.transpose(obs, (0, 2, 3, 1)).astype(jnp.float32) / 255.0
    for i, (out, k, s) in enumerate(((32, 8, 4), (64, 4, 2), (64, 3, 1))):
        dense = params["params"][f"PatchConv_{i}"]["Dense_0"]
        size, c = k // s, x.shape[-1]
        kernel = dense["kernel"].reshape(size, size, s, s, c, out).transpose(0, 2, 1, 3, 4, 5)
        conv = nn.Conv(out, (k, k), (s, s), padding="VALID")
        conv_params = {"kernel": kernel.reshape(k, k, c, out), "bias": dense["bias"]}
        x = nn.relu(conv.apply({"params": conv_params}, x))
    np.testing.assert_allclose(features, x.reshape((2, -1)), atol=1e-4)


def test_envpool_cartpole_trains(tmp_path):
    pytest.importorskip("envpool")
    result = train(tiny("env.backend=envpool"), tmp_path / "envpool", quiet=True)
    assert int(result.runner.update_step) == 4
    assert all(np.isfinite(row["train/total_loss"]) for row in result.history)
    assert sum(row["rollout/episodes"] for row in result.history) > 0


def test_host_bench_measures_jaxrl_and_reads_the_peer(tmp_path):
    from bench import host_throughput as hb

    case = hb.Case(
        name="cartpole",
        config=str(REPO / "configs/cartpole_gymnasium.yaml"),
        peer_script="peer.py",
        peer_args=("--num-envs", "2"),
        updates=1,
        peer_steps=64,
    )
    # A stand-in for CleanRL's script: it prints SPS lines as CleanRL's do.
    (tmp_path / "peer.py").write_text(
        "import os, sys\nassert '--total-timesteps' in sys.argv\n"
        "print('SPS: 10'); print('SPS:', 40 + int(os.environ['OMP_NUM_THREADS']))\n"
    )
    result = hb.measure(
        case,
        sys.executable,
        tmp_path,
        1,
        ("sync",),
        ("env.num_envs=2", "ppo.num_steps=16", "network.hidden_sizes=[8]"),
        (1, 2),
    )
    assert result["cleanrl"]["sps"] == 42.0 and result["cleanrl"]["threads"] == 2
    sync = result["jaxrl"]["sync"]
    assert sync["sps"] > 0 and set(sync["split_s"]) == set(hb.SPLIT)
    assert result["ratio"]["sync"] == sync["sps"] / 42.0
    assert "ratio" in hb.report([result])


def test_recurrent_bf16_and_continuous_actions_train(tmp_path):
    gru = train(
        tiny(
            "network.core=gru",
            "network.core_size=8",
            "ppo.sequence_length=8",
            "precision=bfloat16",
        ),
        tmp_path / "gru",
        quiet=True,
    )
    assert int(gru.runner.update_step) == 4
    assert all(np.isfinite(row["train/total_loss"]) for row in gru.history)
    kernel = gru.runner.params["params"]["actor_core"]
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(kernel))  # params stay f32
    # Episodes cut at 10 steps: truncated, bootstrapped from the pre-reset observation.
    pendulum = train(
        tiny("env.name=Pendulum-v1", "env.kwargs={max_episode_steps: 10}"),
        tmp_path / "pendulum",
        quiet=True,
    )
    assert "log_std" in pendulum.runner.params["params"]
    assert all(np.isfinite(row["train/total_loss"]) for row in pendulum.history)
    assert all(row["rollout/episode_length"] == 10.0 for row in pendulum.history)


def test_actor_bootstraps_truncated_steps_from_the_final_observation():
    from jaxrl.core.acting import value_of
    from jaxrl.hostenv.actor import Actor
    from jaxrl.hostenv.learner import policy_of
    from jaxrl.hostenv.source import actor_key, build
    from jaxrl.hostenv.vecenv import make_vec

    config = tiny("env.name=Pendulum-v1", "env.kwargs={max_episode_steps: 3}")
    spec, runner = build(config)
    vec = make_vec("gymnasium", "Pendulum-v1", 2, 0, {"max_episode_steps": 3})
    traj = Actor(spec, vec).rollout(policy_of(runner), actor_key(config, 0)).traj
    truncated = np.asarray(traj.truncated)
    assert truncated[2::3].all() and truncated.sum() == truncated[2::3].size
    final = np.asarray(traj.final_value)
    assert (final[~truncated] == 0).all() and (final[truncated] != 0).all()
    # Step 2 ends each env's first episode: its final observation is not step 3's (a reset).
    first_reset_obs = np.asarray(traj.obs[3])
    value_reset = value_of(spec.policy, runner.params, (), first_reset_obs, jnp.ones(2, bool))
    assert not np.allclose(final[2], np.asarray(value_reset))
    assert np.asarray(traj.is_first)[3].all() and not np.asarray(traj.is_first)[2].any()
