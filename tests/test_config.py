"""Loading, validation, derived sizes and round-tripping of :mod:`jaxrl.config`."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from flax import struct

from jaxrl import envs
from jaxrl.config import (
    Config,
    ConfigError,
    EnvConfig,
    NetworkConfig,
    PPOConfig,
    TrainConfig,
    config_from_dict,
    load_config,
    parse_overrides,
    save_config,
)
from jaxrl.envs import suites

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


# ---- defaults and loading -------------------------------------------------------------------


def test_defaults_load():
    config = load_config(None)
    assert config == Config()
    assert config_from_dict({}) == Config()
    assert config_from_dict(None) == Config()
    assert config.env.name == "CartPole-v1"
    assert isinstance(config.network.hidden_sizes, tuple)


def test_config_is_frozen():
    config = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.ppo.lr = 1.0  # type: ignore[misc]


def test_yaml_file_and_overrides(tmp_path):
    path = _write(
        tmp_path,
        "seed: 3\n"
        "env:\n"
        "  num_envs: 8\n"
        "  kwargs: {max_steps_in_episode: 50}\n"
        "network:\n"
        "  hidden_sizes: [32, 16]\n"
        "ppo:\n"
        "  lr: 1e-3\n"
        "  num_steps: 16\n",
    )
    config = load_config(path)
    assert config.seed == 3
    assert config.env.num_envs == 8
    assert config.env.kwargs == {"max_steps_in_episode": 50}
    assert config.network.hidden_sizes == (32, 16)
    assert config.ppo.lr == pytest.approx(1e-3) and isinstance(config.ppo.lr, float)
    assert config.ppo.num_steps == 16
    # Keys absent from the file keep their defaults.
    assert config.ppo.gamma == PPOConfig().gamma

    config = load_config(
        path, ["ppo.lr=5e-4", "network.hidden_sizes=[8, 8, 8]", "env.kwargs.gravity=5.0"]
    )
    assert config.ppo.lr == pytest.approx(5e-4)
    assert config.network.hidden_sizes == (8, 8, 8)
    assert config.env.kwargs == {"max_steps_in_episode": 50, "gravity": 5.0}
    assert config.env.num_envs == 8  # untouched by the overrides


@pytest.mark.parametrize(
    ("raw", "want"),
    [("1e-3", 1e-3), ("3E-4", 3e-4), ("1", 1.0), ("2.5e-4", 2.5e-4), ("0.001", 1e-3)],
)
def test_float_spellings(tmp_path, raw, want):
    # PyYAML reads "1e-3" as a string and "1" as an int; both are valid floats here.
    for config in (
        load_config(_write(tmp_path, f"ppo:\n  lr: {raw}\n")),
        load_config(None, [f"ppo.lr={raw}"]),
    ):
        assert isinstance(config.ppo.lr, float)
        assert config.ppo.lr == pytest.approx(want)


@pytest.mark.parametrize(
    ("raw", "want"),
    [("1e5", 100_000), ("2.5e+4", 25_000), ("100000.0", 100_000), ("3E3", 3_000)],
)
def test_whole_number_spellings_for_int_keys(tmp_path, raw, want):
    # "1e5" is a string to PyYAML and "2.5e+4" a float: both are whole, both fit an int key.
    for config in (
        load_config(_write(tmp_path, f"train:\n  total_steps: {raw}\n")),
        load_config(None, [f"train.total_steps={raw}"]),
    ):
        assert config.train.total_steps == want and type(config.train.total_steps) is int


@pytest.mark.parametrize("raw", ["1.5e0", "2.5", "1e-3", "nan", "inf"])
def test_fractional_number_for_int_key_is_one_line(raw):
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"train.total_steps={raw}"])
    message = str(err.value)
    assert message.startswith("config key train.total_steps: expected a whole number, got ")
    assert "\n" not in message


def test_yaml_syntax_error_names_file_line_and_column(tmp_path, capsys):
    from jaxrl.commands.train import main  # noqa: PLC0415

    # Line 3, column 14: the second ':' on "  num_envs: 4: 5".
    path = _write(tmp_path, "env:\n  name: CartPole-v1\n  num_envs: 4: 5\n")
    assert main(["--config", str(path), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert (
        err == f"config error: {path}:3:14: not valid YAML: mapping values are not allowed here\n"
    )
    # An unclosed list: the error points where it was found and where the list starts.
    path = _write(tmp_path, "env:\n  name: [CartPole\nppo:\n  lr: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}:3:4: not valid YAML: expected ',' or ']'")
    assert str(info.value).endswith(
        "(while parsing a flow sequence that starts at line 2, column 9)"
    )


def test_unparsable_override_is_one_line_naming_it(tmp_path, capsys):
    from jaxrl.commands.train import main  # noqa: PLC0415

    argv = ["--config", str(CONFIG_DIR / "cartpole.yaml"), "network.hidden_sizes=[64,64"]
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(
        "config error: override 'network.hidden_sizes=[64,64': the value is not valid YAML ("
    )
    assert "at column 7 of '[64,64'" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("network.hidden_sizes=abc", "config key network.hidden_sizes: expected a list, got 'abc'"),
        ("network.hidden_sizes=[8, 2.5]", "network.hidden_sizes: expected a list of int"),
    ],
)
def test_list_key_refuses_a_scalar(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, [override])


def test_config_error_is_always_one_line():
    assert str(ConfigError("env.kwargs: bad\n  value\n\nhere")) == "env.kwargs: bad value here"


def test_int_for_float_gamma():
    config = load_config(None, ["ppo.gamma=1", "ppo.gae_lambda=0"])
    assert config.ppo.gamma == 1.0 and isinstance(config.ppo.gamma, float)
    assert config.ppo.gae_lambda == 0.0 and isinstance(config.ppo.gae_lambda, float)


def test_parse_overrides():
    assert parse_overrides(["ppo.lr=1e-3", "network.hidden_sizes=[4, 4]", "seed=2"]) == [
        ("ppo.lr", "1e-3"),
        ("network.hidden_sizes", [4, 4]),
        ("seed", 2),
    ]
    with pytest.raises(ConfigError, match="ppo.lr"):
        parse_overrides(["ppo.lr"])


# ---- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        pytest.param(["ppo.lrr=0.1"], "ppo.lrr", id="unknown_nested_key"),
        pytest.param(["network.widths=[4]"], "network.widths", id="unknown_network_key"),
        pytest.param(["sede=1"], "sede", id="unknown_top_level_key"),
        pytest.param(["ppo=3"], "ppo", id="section_not_a_mapping"),
        pytest.param(["ppo.num_steps=abc"], "ppo.num_steps", id="str_for_int"),
        pytest.param(["ppo.num_steps=1.5"], "ppo.num_steps", id="float_for_int"),
        pytest.param(["ppo.anneal_lr=3"], "ppo.anneal_lr", id="int_for_bool"),
        pytest.param(["ppo.lr=abc"], "ppo.lr", id="str_for_float"),
        pytest.param(["env.name=[1]"], "env.name", id="list_for_str"),
        pytest.param(["ppo.lr=-1e-3"], "ppo.lr", id="negative_lr"),
        pytest.param(["ppo.lr=0"], "ppo.lr", id="zero_lr"),
        pytest.param(["ppo.gamma=1.5"], "ppo.gamma", id="gamma_above_one"),
        pytest.param(["ppo.clip_eps=0"], "ppo.clip_eps", id="zero_clip_eps"),
        pytest.param(
            ["env.num_envs=3", "ppo.num_steps=5", "ppo.num_minibatches=4"],
            "ppo.num_minibatches",
            id="batch_not_divisible",
        ),
        pytest.param(["env.name=CartPole-v7"], "env.name", id="unknown_env"),
        pytest.param(["env.kwargs={foo: 1}"], "env.kwargs", id="bad_env_kwargs_key"),
        pytest.param(["precision=fp16"], "precision", id="bad_precision"),
        pytest.param(["network.activation=swish"], "network.activation", id="bad_activation"),
        pytest.param(["network.hidden_sizes=[64, 0]"], "network.hidden_sizes", id="zero_width"),
        pytest.param(["env.num_envs=0"], "env.num_envs", id="zero_envs"),
        pytest.param(["train.total_steps=100"], "train.total_steps", id="total_below_batch"),
        pytest.param(["checkpoint.keep=0"], "checkpoint.keep", id="keep_zero"),
        pytest.param(
            ["curriculum.stages=[{min_updates: 5, max_updates: 3}, {}]"],
            "curriculum.stages[0].max_updates",
            id="max_updates_below_min_updates",
        ),
    ],
)
def test_config_error_names_key(overrides, key):
    with pytest.raises(ConfigError, match=re.escape(key)) as err:
        load_config(None, overrides)
    assert "\n" not in str(err.value)  # one-line messages


def test_unknown_key_suggests_close_match():
    with pytest.raises(ConfigError, match=re.escape("did you mean ppo.lr")):
        load_config(None, ["ppo.lrr=0.1"])


def test_unknown_env_kwargs_key_is_named():
    with pytest.raises(ConfigError, match="foo"):
        load_config(None, ["env.kwargs={foo: 1}"])


def test_unknown_env_is_named():
    with pytest.raises(ConfigError, match="CartPole-v7"):
        load_config(None, ["env.name=CartPole-v7"])


def test_unknown_key_in_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=re.escape("ppo.lrr")):
        load_config(_write(tmp_path, "ppo:\n  lrr: 0.1\n"))


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(_write(tmp_path, "ppo: [1, 2\n"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty; give at least one section"),
        ("# only a comment\n", "is empty; give at least one section"),
        (
            "- env\n- ppo\n",
            "the top level must be a mapping of sections (env:, ppo:, ...), got a list",
        ),
        ("42\n", "the top level must be a mapping of sections (env:, ppo:, ...), got a number"),
    ],
)
def test_empty_or_non_mapping_file_is_one_line_exit_2(tmp_path, capsys, text, message):
    from jaxrl.commands.train import main  # noqa: PLC0415

    path = _write(tmp_path, text)
    assert main(["--config", str(path), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"config error: config file {path}") and err.count("\n") == 1
    assert message in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        pytest.param(["ppo.num_steps=true"], "ppo.num_steps", id="bool_for_int"),
        pytest.param(["ppo.lr=true"], "ppo.lr", id="bool_for_float"),
        pytest.param(
            ["network.hidden_sizes=[64, true]"], "network.hidden_sizes", id="bool_in_int_tuple"
        ),
    ],
)
def test_bool_is_wrong_type_for_numbers(overrides, key):
    with pytest.raises(ConfigError, match=re.escape(key)):
        load_config(None, overrides)


def test_env_kwargs_value_of_wrong_type_is_rejected():
    with pytest.raises(ConfigError, match="max_steps_in_episode"):
        load_config(None, ["env.kwargs={max_steps_in_episode: abc}"])


# ---- nested env params (struct fields such as Soccer's reward) --------------------------------


def test_nested_env_kwargs_override_only_the_given_fields(tmp_path):
    path = _write(
        tmp_path,
        "env:\n"
        "  name: Soccer\n"
        "  kwargs:\n"
        "    blue_size: 2\n"
        "    reward: {touch: 0.1, sparse: true}\n"
        "    physics: {ball_mass: 1}\n",
    )
    config = load_config(path, ["env.kwargs.reward.vel_to_ball=0"])  # dotted on the command line
    assert config.env.kwargs["reward"] == {"touch": 0.1, "sparse": True, "vel_to_ball": 0}
    _, params = envs.make(config.env.name, **config.env.kwargs)  # as make_setup builds them
    _, default = envs.make("Soccer")
    assert int(params.blue_size) == 2
    assert float(params.reward.touch) == pytest.approx(0.1) and bool(params.reward.sparse)
    assert float(params.reward.vel_to_ball) == 0.0
    assert float(params.physics.ball_mass) == 1.0
    # Fields not named keep the defaults, and every leaf keeps its dtype (no retrace).
    assert params.reward.goal_scored == default.reward.goal_scored
    assert params.physics.car_mass == default.physics.car_mass
    for leaf, ref in zip(jax.tree.leaves(params), jax.tree.leaves(default), strict=True):
        assert np.asarray(leaf).dtype == np.asarray(ref).dtype
    save_config(config, tmp_path / "saved.yaml")
    assert load_config(tmp_path / "saved.yaml") == config


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            ["env.kwargs={reward: {tuch: 0.1}}"],
            "unknown env parameter env.kwargs.reward.tuch (did you mean env.kwargs.reward.touch?)",
            id="unknown_nested_key",
        ),
        pytest.param(
            ["env.kwargs={physics: {xyzzy: 1}}"],
            "unknown env parameter env.kwargs.physics.xyzzy (known: ",
            id="unknown_nested_key_no_match",
        ),
        pytest.param(
            ["env.kwargs.reward.touch=true"],
            "env.kwargs.reward.touch: expected number, got True",
            id="bool_for_float",
        ),
        pytest.param(
            ["env.kwargs.reward.touch=abc"],
            "env.kwargs.reward.touch: expected number, got 'abc'",
            id="str_for_float",
        ),
        pytest.param(
            ["env.kwargs.reward.sparse=2"],
            "env.kwargs.reward.sparse: expected bool, got 2 (a bool takes true/false, 1 or 0)",
            id="int_for_bool",
        ),
        pytest.param(
            ["env.kwargs.blue_size=1.5"],
            "env.kwargs.blue_size: expected int, got 1.5 (not a whole number)",
            id="fraction_for_int",
        ),
        pytest.param(
            ["env.kwargs={reward: 0.5}"],
            "env.kwargs.reward: expected a mapping of RewardWeights fields, got 0.5",
            id="scalar_for_struct",
        ),
        pytest.param(
            ["env.kwargs={blue_size: {n: 2}}"],
            "env.kwargs.blue_size: not a struct",
            id="mapping_for_leaf",
        ),
        pytest.param(
            ["env.kwargs={reward.touch: 0.1}"],
            "env.kwargs: dotted key 'reward.touch' in a mapping; write reward: {touch: ...}",
            id="dotted_key_in_yaml",
        ),
        pytest.param(
            ["curriculum.stages=[{env: {blue_size: 1}}, {env: {reward: {vel_to_bal: 0}}}]"],
            "unknown env parameter curriculum.stages[1].env.reward.vel_to_bal "
            "(did you mean curriculum.stages[1].env.reward.vel_to_ball?)",
            id="stage_unknown_nested_key",
        ),
        pytest.param(
            ["curriculum.stages=[{env: {reward: {touch: false}}}]"],
            "curriculum.stages[0].env.reward.touch: expected number, got False",
            id="stage_bool_for_float",
        ),
    ],
)
def test_nested_env_param_errors_name_the_dotted_path(overrides, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, ["env.name=Soccer", *overrides])
    assert message in str(err.value)
    assert "\n" not in str(err.value)


class _Inner(struct.PyTreeNode):
    scale: jax.Array = np.float32(1.0)  # () array leaf: can be staged
    mode: int = struct.field(pytree_node=False, default=0)  # static: fixes control flow


class _OuterParams(struct.PyTreeNode):
    inner: _Inner = struct.field(default_factory=_Inner)


class _StaticFieldEnv(gymnax.environments.environment.Environment):
    """The smallest env on :class:`_OuterParams` that passes the env check (jaxrl.envs.check)."""

    default_params = _OuterParams()

    def reset_env(self, key, params):
        return jnp.zeros((1,), jnp.float32), gymnax.environments.environment.EnvState(time=0)

    def step_env(self, key, state, action, params):
        obs, state = self.reset_env(key, params)
        return obs, state, jnp.float32(0.0), jnp.bool_(False), {}

    def is_truncated(self, state, params):
        return jnp.bool_(False)  # no max_steps_in_episode in these params

    def observation_space(self, params):
        return gymnax.environments.spaces.Box(0.0, 1.0, (1,), jnp.float32)

    def action_space(self, params):
        return gymnax.environments.spaces.Discrete(2)


def test_static_nested_field_is_settable_but_not_staged(monkeypatch):
    monkeypatch.setitem(envs._OWN_ENVS, "StaticFieldEnv", _StaticFieldEnv)
    config = load_config(
        None,
        [
            "env.name=StaticFieldEnv",
            "env.kwargs={inner: {mode: 2}}",
            "curriculum.stages=[{env: {inner: {scale: 0.5}}}, {}]",
        ],
    )
    assert envs.make(config.env.name, **config.env.kwargs)[1].inner.mode == 2
    with pytest.raises(ConfigError, match=re.escape("curriculum.stages[0].env.inner.mode: static")):
        load_config(
            None, ["env.name=StaticFieldEnv", "curriculum.stages=[{env: {inner: {mode: 1}}}]"]
        )


# ---- derived sizes --------------------------------------------------------------------------


def test_derived_sizes():
    config = load_config(
        None,
        [
            "env.num_envs=8",
            "ppo.num_steps=16",
            "ppo.num_minibatches=4",
            "train.total_steps=1000",
            "train.updates_per_chunk=3",
        ],
    )
    assert config.batch_size == 128  # 8 x 16
    assert config.minibatch_size == 32  # 128 / 4
    assert config.num_updates == 7  # 1000 // 128
    assert config.chunk_updates == 3
    assert config.num_chunks == 3  # ceil(7 / 3)


def test_chunk_updates_capped_by_num_updates():
    config = load_config(
        None,
        [
            "env.num_envs=2",
            "ppo.num_steps=4",
            "train.total_steps=16",
            "ppo.num_minibatches=2",
            "train.updates_per_chunk=32",
        ],
    )
    assert config.num_updates == 2
    assert config.chunk_updates == 2
    assert config.num_chunks == 1


def test_total_steps_equal_to_one_batch_is_allowed():
    config = load_config(
        None, ["env.num_envs=2", "ppo.num_steps=4", "train.total_steps=8", "ppo.num_minibatches=1"]
    )
    assert config.num_updates == 1


# ---- round trip -----------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    config = Config(
        seed=7,
        precision="bfloat16",
        env=EnvConfig(
            name="Pendulum-v1",
            num_envs=2,
            kwargs={"max_steps_in_episode": 50},
            action_repeat=2,
            normalize_obs=True,
        ),
        network=NetworkConfig(hidden_sizes=(32, 16), activation="relu", shared_torso=True),
        ppo=PPOConfig(
            num_steps=8,
            num_minibatches=2,
            lr=1e-3,
            adam_eps=1e-8,
            gamma=0.95,
            clip_value=False,
            normalize_advantages=False,
        ),
        train=TrainConfig(total_steps=1600, updates_per_chunk=4, progress_bar=False),
    )
    path = tmp_path / "config.yaml"
    save_config(config, path)
    loaded = load_config(path)
    assert loaded == config
    assert loaded.to_dict() == config.to_dict()
    assert isinstance(loaded.network.hidden_sizes, tuple)
    # And the defaults survive a round trip too.
    save_config(Config(), path)
    assert load_config(path) == Config()


# ---- shipped configs ------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_config_loads(path):
    name = yaml.safe_load(path.read_text()).get("env", {}).get("name", "")
    found = suites.split(name)
    if found and importlib.util.find_spec(found[0].package) is None:
        pytest.skip(f"{name} needs its suite's package: {found[0].pip}")
    config = load_config(path)
    assert config.num_updates >= 1
    assert config.batch_size % config.ppo.num_minibatches == 0


# ---- env values cast to the leaf's dtype ------------------------------------------------------


def test_env_values_are_cast_to_the_leaf_dtype():
    """1 for a bool leaf, 2.0 for an int one: cast losslessly (config, overrides, evaluate)."""
    config = load_config(
        None, ["env.name=CAGE2", "env.kwargs.fix_bugs=1", "env.kwargs.red_agent=2.0"]
    )
    _, params = envs.make(config.env.name, **config.env.kwargs)
    assert params.fix_bugs is True and params.red_agent == 2 and type(params.red_agent) is int
    # A CAGE2 step with fix_bugs=1 used to fail in lax.select (an int where a bool goes).
    env, default = envs.make("CAGE2")
    params = envs.override_params(default, {"fix_bugs": 1, "red_bline_prob": 1})
    assert params.fix_bugs is True and params.red_bline_prob == 1.0
    key = jax.random.key(0)
    _, state = env.reset(key, params)
    fixed = jax.jit(env.step)(key, state, np.int32(0), params)
    reference = jax.jit(env.step)(key, state, np.int32(0), default.replace(fix_bugs=True))
    assert all(
        np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(fixed), jax.tree.leaves(reference), strict=True)
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"fix_bugs": 2}, "fix_bugs: expected bool, got 2 (a bool takes true/false, 1 or 0)"),
        ({"red_agent": 0.5}, "red_agent: expected int, got 0.5 (not a whole number)"),
        ({"red_bline_prob": True}, "red_bline_prob: expected number, got True"),
    ],
)
def test_lossy_env_values_are_refused_in_one_line(overrides, message):
    _, default = envs.make("CAGE2")
    with pytest.raises(ValueError, match=re.escape(message)):
        envs.override_params(default, overrides)


def test_array_leaves_keep_dtype_and_shape():
    from jaxrl.envs.params import cast_value  # noqa: PLC0415

    leaf = jax.numpy.zeros(3, jax.numpy.int32)
    cast = cast_value("w", [1, 2.0, 3], leaf)
    assert isinstance(cast, jax.Array) and cast.dtype == leaf.dtype and cast.tolist() == [1, 2, 3]
    assert cast_value("b", 1, np.bool_(False)) is np.True_
    assert cast_value("x", 1e3, np.zeros((), np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match=re.escape("w: expected a list of numbers of shape [3]")):
        cast_value("w", [1, 2], leaf)
    with pytest.raises(ValueError, match=re.escape("(out of int32 range)")):
        cast_value("w", [1, 2, 2**40], leaf)


def test_wandb_logging_is_off_by_default_and_its_mode_checked():
    assert load_config(None).logger.wandb.project == ""
    config = load_config(None, ["logger.wandb.project=p", "logger.wandb.mode=offline"])
    assert (config.logger.wandb.project, config.logger.wandb.mode) == ("p", "offline")
    with pytest.raises(ConfigError, match=re.escape("logger.wandb.mode must be one of online")):
        load_config(None, ["logger.wandb.mode=disabled"])
    with pytest.raises(ConfigError, match=re.escape("unknown config key logger.wandb.projct")):
        load_config(None, ["logger.wandb.projct=p"])


def test_entity_width_needs_an_env_with_entity_blocks():
    assert load_config(None).network.entity_width == 0
    soccer = CONFIG_DIR / "soccer_selfplay.yaml"
    assert load_config(soccer, ["network.entity_width=16"]).network.entity_width == 16
    with pytest.raises(ConfigError, match=re.escape("network.entity_width must be >= 0, got -1")):
        load_config(soccer, ["network.entity_width=-1"])
    message = "network.entity_width: CartPole-v1 declares no entity blocks in its observation"
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, ["network.entity_width=8"])


_NO_JAX_SCRIPT = """
import sys
from jaxrl.config import ConfigError, load_config

HEAVY = ("jax", "flax", "gymnax", "envs")
for override in ("ppo.lrr=1", "ppo.lr=-1", "selfplay.pool_size=-1", "mesh.devices=0"):
    try:
        load_config("configs/cartpole.yaml", [override])
    except ConfigError as err:
        print(override, "|", err)
    loaded = [m for m in HEAVY if m in sys.modules]
    assert not loaded, (override, loaded)
try:  # the env checks still run at load, after the config's own values
    load_config("configs/cartpole.yaml", ["env.kwargs.max_steps_in_episod=5"])
except ConfigError as err:
    print("env |", err)
print("jax" in sys.modules)
"""


def test_a_config_error_is_reported_before_jax_is_imported():
    """A typo or a bad value stops ``load_config`` with its one line while JAX, flax, gymnax
    and the envs are still unimported (a typo costs no backend start); the env checks run
    after, at load, as before."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    result = subprocess.run(
        [sys.executable, "-c", _NO_JAX_SCRIPT],
        cwd=CONFIG_DIR.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        "ppo.lrr=1 | unknown config key ppo.lrr (did you mean ppo.lr?)",
        "ppo.lr=-1 | ppo.lr must be a finite number > 0, got -1.0",
        "selfplay.pool_size=-1 | selfplay.pool_size must be >= 0, got -1",
        "mesh.devices=0 | mesh.devices must be >= 1, got 0",
    ]
    assert lines[4].startswith("env | unknown env parameter env.kwargs.max_steps_in_episod")
    assert lines[5] == "True", lines
