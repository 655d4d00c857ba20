"""The env registry (envs.resolve): registered names, import paths, ``jaxrl.envs`` entry points,
and a run's config.yaml finding its env again in a fresh process (train and evaluate)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from jaxrl import envs
from jaxrl.config import ConfigError, load_config
from jaxrl.envs.probes import MemoryProbe

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "corridor"  # corridor.py and its renderer, corridor_render.py
# The Corridor runs: 8 envs x 16 steps, 16 updates (it learns the 5-step walk to the exit).
TINY = (
    "env.num_envs=8", "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=2",
    "network.hidden_sizes=[16]", "train.total_steps=2048", "train.updates_per_chunk=16",
    "train.progress_bar=false",
)  # fmt: skip
OPTIMAL_RETURN = 0.6  # 5 steps right: 4 x -0.1 + 1


@pytest.fixture(autouse=True)
def _clean_registry():
    """Each test leaves the registry as it found it."""
    before = dict(envs._OWN_ENVS)
    yield
    envs._OWN_ENVS.clear()
    envs._OWN_ENVS.update(before)
    envs._LOADED.clear()


def test_register_same_factory_twice_is_a_no_op_another_needs_overwrite():
    envs.register("Probe-x", MemoryProbe)
    envs.register("Probe-x", MemoryProbe)  # a re-run notebook cell
    taken = r"already registered to jaxrl\.envs\.probes:MemoryProbe; pass "
    with pytest.raises(ValueError, match=taken):
        envs.register("Probe-x", envs.Soccer)
    envs.register("Probe-x", envs.Soccer, overwrite=True)
    assert type(envs.make("Probe-x")[0]).__name__ == "Soccer"
    with pytest.raises(ValueError, match="gymnax environment"):
        envs.register("CartPole-v1", MemoryProbe)
    with pytest.raises(ValueError, match="import path"):
        envs.register("a.b:C", MemoryProbe)


def test_import_path_resolves_and_is_its_own_source():
    env, params = envs.make("jaxrl.envs.probes:MemoryProbe", delay=3)
    assert isinstance(env, MemoryProbe) and int(params.delay) == 3
    assert envs.is_known("jaxrl.envs.probes:MemoryProbe")
    assert envs.source("jaxrl.envs.probes:MemoryProbe") == "jaxrl.envs.probes:MemoryProbe"
    assert envs.source("CAGE2") == "" and envs.source("CartPole-v1") == ""
    with pytest.raises(ValueError, match=r"^env import path 'no_such_pkg:X': ModuleNotFoundError"):
        envs.make("no_such_pkg:X")
    with pytest.raises(ValueError, match=r"not a gymnax-1\.x env"):
        envs.make("collections:OrderedDict")


def test_registered_factory_records_its_import_path_main_ones_none():
    envs.register("Probe-y", MemoryProbe)
    assert envs.source("Probe-y") == "jaxrl.envs.probes:MemoryProbe"
    envs.register("Probe-z", lambda: MemoryProbe())
    assert envs.source("Probe-z") == ""  # a lambda: nothing a fresh process could import


def test_config_with_recorded_source_finds_an_unregistered_name(tmp_path):
    """A run's env.source brings back a name registered from Python in another process."""
    config = load_config(None, ["env.name=Gone-v0", "env.source=jaxrl.envs.probes:MemoryProbe"])
    assert config.env.name == "Gone-v0" and isinstance(envs.make("Gone-v0")[0], MemoryProbe)
    with pytest.raises(ConfigError, match=r"^env\.name: unknown environment 'Never-v0'"):
        load_config(None, ["env.name=Never-v0"])


def _plugin_dir(tmp_path: Path) -> Path:
    """A directory holding corridor.py and a distribution declaring its jaxrl.envs entry point
    (what ``pip install examples/corridor`` leaves in site-packages)."""
    root = tmp_path / "site"
    dist = root / "jaxrl_corridor-0.1.0.dist-info"
    dist.mkdir(parents=True)
    for module in ("corridor.py", "corridor_render.py"):
        shutil.copy(EXAMPLE / module, root / module)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: jaxrl-corridor\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[jaxrl.envs]\nCorridor-v0 = corridor:Corridor\n")
    return root


def test_entry_point_is_found_in_process(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_plugin_dir(tmp_path)))
    assert "Corridor-v0" in envs.registered_envs() and envs.is_known("Corridor-v0")
    env, params = envs.make("Corridor-v0", length=4)
    assert type(env).__name__ == "Corridor" and int(params.length) == 4
    assert envs.source("Corridor-v0") == "corridor:Corridor"
    with pytest.raises(ValueError, match=r"length=1 is out of range: allowed \[2, 100\]"):
        envs.make("Corridor-v0", length=1)
    monkeypatch.delitem(sys.modules, "corridor", raising=False)


def _run(args: list[str], pythonpath: list[Path], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [*pythonpath, REPO]))}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize(
    ("name", "where"),
    [("Corridor-v0", "plugin"), ("corridor:Corridor", "import path")],
)
def test_train_and_evaluate_find_the_env_in_fresh_processes(
    tmp_path, name, where, monkeypatch, capsys
):
    """``jaxrl train``, then ``python -m jaxrl.evaluate --run-dir`` and ``jaxrl render`` (each
    a fresh process) find the env by entry point or import path; the saved config records
    where it came from. The commands of docs/guide/own-env.md, with tiny step counts. The
    import-path case runs ``python -m jaxrl.train`` from a folder holding packages of its own
    named ``envs`` and ``bench`` (which raise when imported): jaxrl's install as
    ``jaxrl.envs`` and ``jaxrl.bench`` (pyproject.toml), so every command works there."""
    if where == "plugin":
        path = [_plugin_dir(tmp_path)]
        train = ["-m", "jaxrl", "train"]
    else:  # from a project folder with packages of its own named envs and bench
        path = [EXAMPLE]
        train = ["-m", "jaxrl.train"]
        for package in ("envs", "bench"):
            (tmp_path / package).mkdir()
            (tmp_path / package / "__init__.py").write_text(
                f"raise ImportError('jaxrl imported the project\\'s own {package} package')\n"
            )
    run_dir = tmp_path / "run"
    train = [*train, f"env.name={name}", *TINY, "--run-dir", str(run_dir)]
    done = _run(train, path, tmp_path)
    assert done.returncode == 0, done.stderr
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())["env"]
    assert saved["name"] == name and saved["source"] == "corridor:Corridor"
    evaluate = [
        *("-m", "jaxrl.evaluate", "--run-dir", str(run_dir), "--episodes", "4", "--json"),
        *("--actions", "greedy"),  # the policy's mode: the optimum, whatever the seed
    ]
    done = _run(evaluate, path, tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["mean_length"] == 5.0 and result["mean_return"] == pytest.approx(OPTIMAL_RETURN)
    if where == "plugin":  # an env param out of the env's declared range, in this process
        from jaxrl.commands.evaluate import main as evaluate_main  # noqa: PLC0415

        monkeypatch.syspath_prepend(str(path[0]))
        assert evaluate_main([*evaluate[2:], "--env-param", "length=1"]) == 2
        message = "error: --env-param length=1 is out of range: allowed [2, 100]"
        assert capsys.readouterr().err.strip() == message
        monkeypatch.delitem(sys.modules, "corridor", raising=False)
    else:  # the renderer the env declares (one clip is enough)
        gif = tmp_path / "corridor.gif"
        render = [
            "-m",
            "jaxrl",
            "render",
            "--run-dir",
            str(run_dir),
            "--out",
            str(gif),
        ]
        done = _run([*render, "--seconds", "2"], path, tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"wrote 9 frames to {gif}"  # the start + 8 steps
        assert gif.stat().st_size > 0


def test_the_guide_shows_the_env_the_tests_run():
    """docs/guide/own-env.md's env is examples/corridor/corridor.py, its entry point the
    package's: the page cannot drift from what the tests above train and evaluate."""
    page = (REPO / "docs" / "guide" / "own-env.md").read_text()
    blocks = page.split("```")
    python = [b.removeprefix("python\n") for b in blocks[1::2] if b.startswith("python\n")]
    assert python[0] == (EXAMPLE / "corridor.py").read_text()
    assert len(python[0].splitlines()) <= 50
    toml = (EXAMPLE / "pyproject.toml").read_text()
    entry = 'Corridor-v0 = "corridor:Corridor"'
    assert entry in page and entry in toml


def test_saved_config_of_a_python_registered_env_loads_where_it_is_not_registered(tmp_path):
    """What train writes (save_config) brings the env back once the registration is gone, as
    in a fresh ``python -m jaxrl.evaluate`` process."""
    from jaxrl.config import save_config  # noqa: PLC0415

    envs.register("Probe-saved", MemoryProbe)
    save_config(load_config(None, ["env.name=Probe-saved", "env.kwargs.delay=2"]), tmp_path / "c")
    assert (
        yaml.safe_load((tmp_path / "c").read_text())["env"]["source"]
        == "jaxrl.envs.probes:MemoryProbe"
    )
    del envs._OWN_ENVS["Probe-saved"]
    assert not envs.is_known("Probe-saved")
    config = load_config(tmp_path / "c")
    env, params = envs.make(config.env.name, **config.env.kwargs)
    assert isinstance(env, MemoryProbe) and int(params.delay) == 2
