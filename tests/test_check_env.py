"""The env checker (:mod:`jaxrl.envs.check`, ``jaxrl check-env``) and its run at every config load.

The bad envs are tests/bad_envs.py, imported by path (``bad_envs:<Class>``) as a user's own
env is. Each failure must be exactly one line naming the env, the problem and the fix.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import gymnax
import pytest

from jaxrl.commands import check_env
from jaxrl.commands import train as train_module
from jaxrl.commands.cli import main as cli_main
from jaxrl.envs import check
from jaxrl.envs.host import missing_module

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
CARTPOLE = str(REPO / "configs" / "cartpole.yaml")


def line_of(text: str) -> int:
    """The line of tests/bad_envs.py holding ``text`` (the file:line a message names)."""
    lines = (TESTS / "bad_envs.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


SHAPE = (
    "env 'bad_envs:WrongObsShape': reset returns observations of shape (3,) but its "
    "observation_space has shape (4,): make observation_space(params) describe what "
    "reset_env/step_env return (the network is built from the space; else flax's "
    "ScopeParamShapeError)"
)
PYTHON_IF = (
    "env 'bad_envs:PythonIf': TracerBoolConversionError at "
    f"tests/bad_envs.py:{line_of('if state.x > 0')}: no Python if/while on traced values in "
    "step_env: use jnp.where or lax.cond"
)
RAISES = (
    "env 'bad_envs:RaisingFactory': its factory raised RuntimeError: map file "
    f"maps/level1.txt not found (at tests/bad_envs.py:{line_of('raise RuntimeError')})"
)


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    """Run from the repository root (file:line relative to it) with tests/ importable."""
    monkeypatch.chdir(REPO)
    monkeypatch.syspath_prepend(str(TESTS))


def failure(name: str, running: bool = False) -> str:
    with pytest.raises(check.EnvCheckError) as caught:
        env, params = check.make(name)
        check.check(name, env, params, running=running)
    return str(caught.value)


# ----------------------------------------------------------------------------- the checks


def test_a_good_env_passes_with_its_summary():
    env, params = check.make("bad_envs:Good")
    summary = check.check("bad_envs:Good", env, params, running=True)
    assert summary.line() == (
        "ok: bad_envs:Good: observations float32 (4,), actions Discrete(2), 1 agent slot, "
        "jit and vmap ran, time limit truncates"
    )


def test_a_multi_agent_two_team_env_summary():
    env, params = check.make("Soccer")
    summary = check.check("Soccer", env, params)  # abstract only: no compile
    assert summary.line() == (
        "ok: Soccer: observations float32 (6, 65), actions Discrete(18), 6 agent slots, "
        "two teams of 3"
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("WrongObsShape", SHAPE),
        ("PythonIf", PYTHON_IF),
        ("RaisingFactory", RAISES),
        (
            "IntObs",
            "env 'bad_envs:IntObs': reset returns int32 observations (observation_space: "
            "float32): return float32 (obs.astype(jnp.float32)), or uint8 images with a uint8 "
            "observation_space",
        ),
        (
            "FloatDone",
            "env 'bad_envs:FloatDone': step's terminated is float32 (), not bool (): return a "
            "bool scalar (a comparison, or jnp.bool_)",
        ),
        (
            "ForeignSpace",
            "env 'bad_envs:ForeignSpace': its action_space is bad_envs.ForeignDiscrete, not a "
            "gymnax space: return gymnax.environments.spaces.Box / Discrete (map the suite's "
            "space to gymnax's)",
        ),
        (
            "WrongAgents",
            "env 'bad_envs:WrongAgents': declares num_agents = 3 but its observations have "
            "shape (4,): a multi-agent env returns [num_agents, *obs] (one row per slot)",
        ),
        (
            "WrongMask",
            "env 'bad_envs:WrongMask': action_mask returns bool (3,); expected bool (2,) (True "
            "where the action is legal)",
        ),
        (
            "WrongTeams",
            "env 'bad_envs:WrongTeams': declares two teams of team_size = 2 but num_agents = 2: "
            "num_agents must be 2 * team_size",
        ),
    ],
)
def test_each_broken_rule_is_one_line(env, message):
    assert failure(f"bad_envs:{env}") == message


def test_an_old_api_env_by_import_path_is_adapted_and_passes():
    """A five-value step (gymnax < 1.0) is no failure any more: envs.make wraps it in
    LegacyStep, and the adapted env meets every rule the checker reads."""
    from jaxrl.envs.suites.legacy import LegacyStep  # noqa: PLC0415

    env, params = check.make("bad_envs:OldApi")
    assert isinstance(env, LegacyStep)
    check.check("bad_envs:OldApi", env, params)


def test_a_time_limit_that_terminates_is_found_by_a_real_step():
    env, params = check.make("bad_envs:DoneOnTimeLimit")
    check.check("bad_envs:DoneOnTimeLimit", env, params)  # abstractly it looks fine
    assert failure("bad_envs:DoneOnTimeLimit", running=True) == (
        "env 'bad_envs:DoneOnTimeLimit': max_steps_in_episode ends episodes as terminated as "
        "well as truncated: return only natural ends as step_env's terminated (the old gymnax "
        "done included the time limit; a terminated step is not bootstrapped)"
    )


def test_an_adapted_old_api_env_is_noted_and_its_time_limit_checked():
    """An old-API env behind a 6-value adapter passes the abstract checks with a note; its
    ``done`` (the time limit included) comes back as terminated, which the real step finds."""
    name = "bad_envs:AdaptedOldApi"
    env, params = check.make(name)
    check.check(name, env, params)
    assert check.adapted_note(name, env, params, env.action_space(params)) == (
        "its step returns the old gymnax API's 5 values: envs.make adapts it to 6",
    )
    assert failure(name, running=True) == (
        f"env {name!r}: with max_steps_in_episode = 1 the first step terminated, not "
        "truncated: the time limit is a truncation (gymnax 1.x's step sets truncated from "
        "is_truncated, state.time >= max_steps_in_episode); count steps in state.time"
    )


def test_an_old_gymnax_in_place_of_1x_is_named(monkeypatch):
    """popgym-arcade's stable-gymnax overwrites the gymnax folder: its step returns 5 values."""
    step = gymnax.environments.environment.Environment.step

    def old_step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = step(self, key, state, action, params)
        return obs, state, reward, terminated | truncated, info

    monkeypatch.setattr(gymnax.environments.environment.Environment, "step", old_step)
    check.gymnax_step_arity.cache_clear()
    try:
        with pytest.raises(check.EnvCheckError) as caught:
            check.check_gymnax()
    finally:
        monkeypatch.undo()
        check.gymnax_step_arity.cache_clear()
    assert str(caught.value) == (
        "the installed gymnax is not 1.x (an old gymnax replaced it, e.g. popgym-arcade's "
        "stable-gymnax): pip install --force-reinstall 'gymnax>=1.0,<2'"
    )
    check.check_gymnax()  # the real one is 1.x


def test_the_config_check_runs_once_per_env(monkeypatch):
    monkeypatch.setattr(check, "_CHECKED", {})  # this test's entries go with it
    env, params = check.make("bad_envs:Good")
    summary = check.check_once("first", env, params)
    calls = []
    monkeypatch.setattr(check, "check", lambda *a, **k: calls.append(a) or summary)
    again, _ = check.make("bad_envs:Good")  # a new instance of the same env
    assert check.check_once("second", again, params).name == "second"
    assert calls == []
    wrong, wrong_params = check.make("bad_envs:WrongObsShape")
    check.check_once("third", wrong, wrong_params)  # another class: checked
    assert len(calls) == 1


# ----------------------------------------------------------------------------- train


@pytest.mark.parametrize(
    ("env", "message"),
    [("WrongObsShape", SHAPE), ("PythonIf", PYTHON_IF), ("RaisingFactory", RAISES)],
)
def test_train_stops_at_a_broken_env_in_one_line(env, message, capsys):
    status = train_module.main(["--config", CARTPOLE, f"env.name=bad_envs:{env}"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.strip().splitlines() == [f"config error: env.name: {message}"]


def test_python_m_train_prints_one_line_and_exits_2():
    """The whole command, as a new user runs it (was a 48-line TracerBoolConversionError)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jaxrl.train",
            "--config",
            CARTPOLE,
            "env.name=bad_envs:PythonIf",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"config error: env.name: {PYTHON_IF}"]


@pytest.mark.skipif(
    importlib.util.find_spec("gymnasium") is None or importlib.util.find_spec("ale_py"),
    reason="needs gymnasium without ale_py",
)
def test_a_gymnasium_id_whose_module_is_missing_names_it(capsys):
    config = str(REPO / "configs" / "cartpole_gymnasium.yaml")
    status = train_module.main(["--config", config, "env.name=ale_py:ALE/Pong-v5"])
    assert status == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "config error: env.name: gymnasium env 'ale_py:ALE/Pong-v5' needs the module 'ale_py', "
        "which is not installed: pip install 'ale-py'"
    ]


def test_a_missing_module_is_named_with_what_installs_it():
    err = ModuleNotFoundError("No module named 'Box2D'")
    assert missing_module("gymnasium", "LunarLander-v3", err) == (
        "env.name: gymnasium env 'LunarLander-v3' needs the module 'Box2D', which is not "
        "installed: pip install 'gymnasium[box2d]'"
    )
    assert missing_module("no_such_backend_pkg", "X", err) == (
        "env.backend=no_such_backend_pkg needs the no_such_backend_pkg package: "
        "pip install -e '.[no_such_backend_pkg]'"
    )


# ----------------------------------------------------------------------------- check-env


def test_check_env_command_passes_and_fails(capsys):
    assert cli_main(["check-env", "CartPole-v1"]) == 0
    assert capsys.readouterr().out.strip() == (
        "ok: CartPole-v1: observations float32 (4,), actions Discrete(2), 1 agent slot, "
        "jit and vmap ran, time limit truncates"
    )
    assert check_env.main(["bad_envs:PythonIf"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {PYTHON_IF}"]


def test_check_env_kwargs_json_or_key_value():
    assert check_env.parse_kwargs(['{"length": 8}'], "--make-kwargs") == {"length": 8}
    assert check_env.parse_kwargs(["reward.touch=0.5", "n=2"], "--env-kwargs") == {
        "reward": {"touch": 0.5},
        "n": 2,
    }
    with pytest.raises(ValueError, match="^--make-kwargs: not a JSON object"):
        check_env.parse_kwargs(["{length: 8"], "--make-kwargs")


def test_check_env_applies_env_kwargs(capsys):
    assert check_env.main(["MemoryProbe", "--env-kwargs", "max_steps_in_episode=3"]) == 0
    assert capsys.readouterr().out.startswith("ok: MemoryProbe: ")
    assert check_env.main(["MemoryProbe", "--env-kwargs", "no_such_field=3"]) == 2
    assert "no_such_field" in capsys.readouterr().err
