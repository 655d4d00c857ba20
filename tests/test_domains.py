"""Env parameter domains (jaxrl.envs.domains): declared beside each field, checked wherever a value
enters, refused in one line naming the key, the value and the domain (exit 2 on a command)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from jaxrl import envs
from jaxrl.config import ConfigError, config_from_dict, load_config
from jaxrl.envs import protocols
from jaxrl.envs.domains import DOMAIN_KEY, NON_NEGATIVE, Choices, Interval, check_value

CAGE2_RED = "one of -1 (drawn per episode), 0 (Sleep), 1 (B_line), 2 (Meander)"
SOCCER_KIND = "one of 0 (idle), 1 (RulePolicy), 2 (random)"


def test_interval_and_choices_contain_and_read():
    unit = Interval(0.0, 1.0)
    assert unit.contains(0.0) and unit.contains(1.0) and not unit.contains(1.5)
    assert not unit.contains(float("nan"))
    assert str(unit) == "[0, 1]"
    positive = Interval(0.0, None, low_open=True)
    assert not positive.contains(0.0) and positive.contains(1e-9)
    assert str(positive) == "(0, inf)"
    assert NON_NEGATIVE.contains(np.array([[0, 3], [1, 2]])) and not NON_NEGATIVE.contains([1, -1])
    kinds = Choices({0: "idle", 1: "rule"})
    assert kinds.contains(np.int32(1)) and not kinds.contains(2)
    assert str(kinds) == "one of 0 (idle), 1 (rule)"
    modes = Choices({"table": "table", "history": "history"})
    assert modes.contains("table") and not modes.contains("x")
    assert isinstance(unit, protocols.Domain) and isinstance(kinds, protocols.Domain)
    with pytest.raises(ValueError, match=r"^k=1\.5 is out of range: allowed \[0, 1\]$"):
        check_value("k", 1.5, unit)


@pytest.mark.parametrize("name", ["Soccer", "CAGE2", "MettaArena", "MemoryProbe"])
def test_our_envs_defaults_lie_in_their_declared_domains(name):
    """Every declared domain admits the default (walks nested structs: soccer's reward, physics)."""
    _, params = envs.make(name)
    declared = 0

    def walk(node, prefix):
        nonlocal declared
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            if dataclasses.is_dataclass(value):
                walk(value, f"{prefix}{f.name}.")
            elif f.metadata.get(DOMAIN_KEY) is not None:
                declared += 1
                check_value(f"{prefix}{f.name}", value, f.metadata[DOMAIN_KEY])

    walk(params, "")
    assert declared >= 1


@pytest.mark.parametrize(
    ("name", "key", "value", "domain"),
    [
        ("CAGE2", "red_agent", 7, CAGE2_RED),
        ("Soccer", "opponent_kind", 9, SOCCER_KIND),
        ("Soccer", "blue_size", 4, "[0, 3]"),
        ("MettaArena", "reward_mode", 2, "one of 0 (hearts), 1 (shaped)"),
    ],
)
def test_env_kwargs_out_of_range_is_one_line(name, key, value, domain):
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"env.name={name}", f"env.kwargs.{key}={value}"])
    assert str(err.value) == f"env.kwargs.{key}={value} is out of range: allowed {domain}"
    with pytest.raises(ValueError, match=f"{key}={value} is out of range"):  # python: envs.make
        envs.make(name, **{key: value})


def test_nested_struct_field_out_of_range_names_the_dotted_path():
    with pytest.raises(ConfigError, match=r"^env\.kwargs\.reward\.team_spirit=2\.0 is out of"):
        load_config(None, ["env.name=Soccer", "env.kwargs.reward={team_spirit: 2.0}"])


@pytest.mark.parametrize(
    ("name", "env"),
    [("CAGE2", {"red_agent": 7}), ("Soccer", {"opponent_kind": 9})],
)
def test_curriculum_stage_and_eval_lane_out_of_range(name, env):
    key, value = next(iter(env.items()))
    stage = {"curriculum": {"stages": [{"name": "a"}, {"name": "b", "env": env}]}}
    with pytest.raises(ConfigError) as err:
        config_from_dict({"env": {"name": name}, **stage})
    assert str(err.value).startswith(f"curriculum.stages[1].env.{key}={value} is out of range")
    lane = {"evaluation": {"lanes": [{"name": "hard", "env": env}]}}
    with pytest.raises(ConfigError, match=rf"^evaluation\.lanes\[0\]\.env\.{key}={value} is out"):
        config_from_dict({"env": {"name": name, "num_envs": 8}, **lane})


def test_sweep_and_pbt_bounds_out_of_range():
    with pytest.raises(ConfigError, match=r"^sweep\.env\.kwargs\.red_agent=7 is out of range"):
        config_from_dict({"env": {"name": "CAGE2"}, "sweep": {"env.kwargs.red_agent": [1, 7]}})
    pbt = {
        "every_updates": 4,
        "hyperparameters": {"env.kwargs.red_bline_prob": {"min": 0.1, "max": 1.5}},
    }
    with pytest.raises(ConfigError, match=r"red_bline_prob=1\.5 is out of range: allowed \[0, 1\]"):
        config_from_dict({"env": {"name": "CAGE2"}, "pbt": pbt, "train": {"num_seeds": 4}})


@pytest.mark.parametrize(
    ("config", "key", "value", "domain"),
    [
        ("cage2.yaml", "red_agent", 7, CAGE2_RED),
        ("soccer_1v1.yaml", "opponent_kind", 9, SOCCER_KIND),
    ],
)
def test_train_command_refuses_out_of_range_exit_2(capsys, config, key, value, domain):
    from jaxrl.commands.train import main  # noqa: PLC0415

    assert main(["--config", f"configs/{config}", f"env.kwargs.{key}={value}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"config error: env.kwargs.{key}={value} is out of range: allowed {domain}"


def _tiny_run(tmp_path_factory, name: str, *extra: str):
    import jaxrl  # noqa: PLC0415

    overrides = [
        f"env.name={name}", "env.num_envs=2", "ppo.num_steps=4", "ppo.num_minibatches=1",
        "ppo.update_epochs=1", "train.total_steps=8", "network.hidden_sizes=[8]", *extra,
    ]  # fmt: skip
    run_dir = tmp_path_factory.mktemp(name.lower()) / "run"
    jaxrl.train(None, overrides=overrides, run_dir=run_dir, quiet=True)
    return run_dir


@pytest.mark.parametrize(
    ("name", "flag", "domain"),
    [("CAGE2", "red_agent=7", CAGE2_RED), ("Soccer", "opponent_kind=9", SOCCER_KIND)],
)
def test_evaluate_env_param_out_of_range_exit_2(tmp_path_factory, capsys, name, flag, domain):
    """``--env-param`` reaches the same check: one line, exit 2 (a tiny 1-update run)."""
    from jaxrl.commands.evaluate import main  # noqa: PLC0415

    run_dir = _tiny_run(tmp_path_factory, name)
    capsys.readouterr()
    assert main(["--run-dir", str(run_dir), "--episodes", "1", "--env-param", flag]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: --env-param {flag} is out of range: allowed {domain}"


def test_gymnax_params_get_declared_domains_by_class():
    """gymnax's EnvParams cannot carry field metadata: declare_domains on its base class covers
    every gymnax env (wrapped or not) and envs built on it; CAGE2's own base allows <= 0."""
    with pytest.raises(ConfigError, match=r"^env\.kwargs\.max_steps_in_episode=0 is out of range"):
        load_config(None, ["env.name=CartPole-v1", "env.kwargs.max_steps_in_episode=0"])
    with pytest.raises(ValueError, match=r"max_steps_in_episode=0 is out of range: allowed \[1, "):
        envs.make("Breakout-MinAtar", max_steps_in_episode=0)  # Float32-wrapped
    assert int(envs.make("CAGE2", max_steps_in_episode=0)[1].max_steps_in_episode) == 0
