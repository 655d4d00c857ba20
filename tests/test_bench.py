"""The benchmark instrument ``bench.throughput``: a tiny run end to end, its JSON, --compare.

One ``--tiny`` run of every sub-benchmark in a subprocess is shared by the tests; the
--compare and bad-input checks read its JSON without running anything again. The run is
mostly XLA compiles, under the suite's cheap compile settings (``conftest.FAST_COMPILE``,
inherited): the test checks the instrument, not the figures.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from bench import figures, throughput, train_bench
from tests.conftest import FAST_COMPILE, tiny_overrides

REPO = Path(__file__).resolve().parents[1]
FIELDS = {"median", "min", "max", "unit", "higher_is_better", "repeats"}


def _bench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(  # inherits conftest's XLA_FLAGS (FAST_COMPILE)
        [sys.executable, "-m", "bench.throughput", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("bench") / "out.json"
    return _bench("--tiny", "--json", str(out)), out


def test_tiny_run_prints_header_and_table(tiny):
    proc, out = tiny
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = lines[0]
    assert header.startswith("# jaxrl bench")
    assert f"(platform {jax.devices()[0].platform})" in header
    assert f"jax {jax.__version__}" in header
    assert f"{os.cpu_count()} CPUs" in header
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", header)
    assert lines[1].split() == ["name", "median", "spread", "(min", "-", "max)", "unit", "repeats"]
    rows = {line.split()[0]: line.split() for line in lines[2:] if not line.startswith("#")}
    results = json.loads(out.read_text())["results"]
    assert set(rows) == set(results)
    for name, r in results.items():
        # name, median, min, "-", max, unit, repeats
        assert rows[name][-2:] == [r["unit"], str(r["repeats"])], rows[name]


def test_tiny_json_schema_and_figures(tiny):
    proc, out = tiny
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert set(data) == {"meta", "results"}
    meta = data["meta"]
    for key in ("device_kind", "platform", "jax_version", "cpu_count", "date", "profile"):
        assert key in meta, key
    assert meta["profile"] == "tiny"
    assert meta["jax_version"] == jax.__version__
    assert FAST_COMPILE in meta["xla_flags"]
    results = data["results"]
    for section in throughput.DEFAULT_SECTIONS:
        assert any(name.startswith(f"{section}/") for name in results), section
    for expected in (
        "env/CartPole-v1/n=64/sps",
        "env/CartPole-v1/n=64/compile",
        "train/cartpole/sps",
        "train/cartpole/compile",
        "inference/cartpole/b=1/p99",
        "precision/cartpole/bfloat16/sps",
    ):
        assert expected in results, expected
    for name, r in results.items():
        assert set(r) == FIELDS, name
        assert isinstance(r["higher_is_better"], bool) and isinstance(r["unit"], str), name
        assert isinstance(r["repeats"], int) and r["repeats"] >= 1, name
        for key in ("median", "min", "max"):
            assert math.isfinite(r[key]) and r[key] > 0, (name, key, r[key])
        assert r["min"] <= r["median"] <= r["max"], name
        rate = name.endswith(("sps", "_per_s"))
        assert r["higher_is_better"] == rate, name


def test_compare_with_itself_exits_0(tiny, capsys):
    _, out = tiny
    assert throughput.main(["--results", str(out), "--compare", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "REGRESSED" not in printed
    assert "train/cartpole/sps" in printed and "1.000" in printed


def test_compare_with_much_better_old_figures_exits_1(tiny, tmp_path):
    _, out = tiny
    data = json.loads(out.read_text())
    old = data["results"]
    for key in ("median", "min", "max"):
        old["train/cartpole/sps"][key] *= 10  # the old run trained 10x faster
        old["train/cartpole/compile"][key] /= 10  # ... and compiled 10x faster
    doctored = tmp_path / "old.json"
    doctored.write_text(json.dumps(data))
    proc = _bench("--results", str(out), "--compare", str(doctored), timeout=120)
    assert proc.returncode == 1, proc.stderr[-3000:]
    regressed = [line for line in proc.stdout.splitlines() if "REGRESSED" in line]
    assert sorted(line.split()[0] for line in regressed) == [
        "train/cartpole/compile",
        "train/cartpole/sps",
    ]
    assert "train/cartpole/sps" in proc.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--only", "env,bogus"], "'bogus'"),
        (["--config", "configs/no_such.yaml"], "no_such.yaml does not exist"),
        (["--compare", "no_such.json"], "cannot read no_such.json"),
        (["--compare", "README.md"], "not valid JSON"),
        (["--set", "ppo.lrr=1"], "unknown config key ppo.lrr"),
        (["--exploiters", "2y"], "expected N or NxF"),
        (["--exploiters", "0"], "N must be >= 1"),
        (["--exploiters", "1x1.5"], "F in (0, 1]"),
        (["--league-variant", "network.entity_width=-1"], "entity_width must be >= 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert throughput.main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], captured.err


def test_reference_runs_in_a_fresh_process_with_fast_prng():
    """``--reference`` runs bench.reference_ppo in a child (here with jaxrl.core.prng installed
    first, which takes every line of the child's path; as shipped it only skips the install)."""
    spec = figures.ConfigSpec("cartpole", str(REPO / "configs" / "cartpole.yaml"), ())
    config = spec.load_as_written(["train.total_steps=1024", "train.updates_per_chunk=2"])
    kwargs = train_bench.reference_kwargs(config)
    assert kwargs is not None and kwargs["total_steps"] == 1024  # 2 updates of 4 x 128
    out = figures.run_child(
        "bench.train_bench.reference_child", {"seed": 0, "kwargs": kwargs, "fast_prng": True}
    )
    assert out["sps"] > 0 and out["compile_s"] > 0 and math.isfinite(out["final_return"])
    recurrent = figures.ConfigSpec(
        "gru", str(REPO / "configs" / "cartpole.yaml"), ("network.core=gru",)
    ).load_as_written()
    assert train_bench.reference_kwargs(recurrent) is None  # not the reference's model


def test_env_param_dotted_keys_set_struct_fields():
    """``--env-param reward.touch=2`` sets one field of Soccer's reward struct; bad keys exit 2."""
    parse = throughput.build_parser().parse_args
    plan = throughput.make_plan(
        parse(["--env", "Soccer", "--env-param", "reward.touch=2", "--env-param", "blue_size=2"])
    )
    assert plan.env_kwargs == {"reward": {"touch": 2}, "blue_size": 2}
    with pytest.raises(throughput.UsageError, match="reward.tuch"):
        throughput.make_plan(parse(["--env", "Soccer", "--env-param", "reward.tuch=2"]))


def test_exploiters_option_gives_the_overrides():
    assert throughput._exploiter_overrides("1") == ("selfplay.exploiters=1",)
    assert throughput._exploiter_overrides("2x0.125") == (
        "selfplay.exploiters=2",
        "selfplay.exploiter_fraction=0.125",
    )


def test_league_variant_option_is_kept_in_the_plan():
    parser = throughput.build_parser()
    plan = throughput.make_plan(parser.parse_args(["--only", "selfplay"]))
    assert plan.league_variant == ()
    args = ["--only", "selfplay", "--league-variant", "network.entity_width=16"]
    plan = throughput.make_plan(parser.parse_args(args))
    assert plan.league_variant == ("network.entity_width=16",)


def test_alternating_runs_are_timed_in_turns(monkeypatch):
    """Every run is compiled before any is timed, then one repeat of each per round."""
    profile = figures.PROFILES["tiny"]
    events: list[str] = []
    compile_seconds = train_bench.compile_seconds

    def compiling(jitted, *args):
        events.append("compile")
        return compile_seconds(jitted, *args)

    def timing(call, repeats, min_repeat_s):
        events.append(f"time x{repeats}")
        call()
        return [1.0] * repeats

    monkeypatch.setattr(train_bench, "compile_seconds", compiling)
    monkeypatch.setattr(train_bench, "time_calls", timing)
    cartpole = str(REPO / "configs" / "cartpole.yaml")
    runs = [
        (
            f"alt/{n}",
            figures.ConfigSpec("t", cartpole, tuple(tiny_overrides())).load([f"env.num_envs={n}"]),
            None,
        )
        for n in (4, 8)
    ]
    found = train_bench.alternating_train_figures(runs, profile)
    compiles = ["compile"] * profile.compile_repeats * 2
    assert events == compiles + ["time x1"] * 2 * profile.repeats
    assert [f.name for f in found] == [
        f"alt/{n}/{q}" for n in (4, 8) for q in ("sps", "updates_per_s", "compile")
    ]
    config = runs[1][1]
    assert found[3].samples == (config.chunk_updates * config.batch_size,) * profile.repeats
