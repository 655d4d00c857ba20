"""jaxrl export: one file per policy, checked against jaxrl, run in a fresh process without jaxrl.

The ONNX tests need jax2onnx (``pip install 'jaxrl[onnx]'``, in the dev extra) and skip with
that reason without it; the image test needs EnvPool (dev extra).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrl
from jaxrl.commands import export as ex
from jaxrl.config import load_config
from jaxrl.run.driver import train

REPO = Path(__file__).resolve().parents[1]
CHECK = {"check_steps": 8, "check_envs": 2}  # small: 8 steps x (2 envs x agents) rows
TINY = [
    "env.num_envs=4",
    "ppo.num_steps=16",
    "ppo.update_epochs=1",
    "ppo.num_minibatches=2",
    "train.total_steps=64",
    "train.updates_per_chunk=1",
    "train.progress_bar=false",
    "checkpoint.every_updates=1",
]


def needs_onnx():
    pytest.importorskip("jax2onnx", reason="jax2onnx missing: pip install 'jaxrl[onnx]'")
    pytest.importorskip("onnxruntime", reason="onnxruntime missing: pip install 'jaxrl[onnx]'")


def tiny_run(path: Path, config: str, *changes: str) -> Path:
    train(load_config(REPO / "configs" / config, [*TINY, *changes]), path, quiet=True)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory, selfplay_run) -> dict[str, Path]:
    """Feed-forward (normalised obs), LSTM, two-team soccer and (EnvPool) image runs."""
    root = tmp_path_factory.mktemp("export-runs")
    out = {
        "ff": tiny_run(root / "ff", "cartpole.yaml", "env.normalize_obs=true",
                       "network.hidden_sizes=[16]"),
        "lstm": tiny_run(root / "lstm", "cartpole_lstm.yaml", "ppo.sequence_length=8",
                         "network.hidden_sizes=[16]", "network.core_size=8",
                         "env.normalize_obs=true"),
        "soccer": selfplay_run.run_dir,  # the session's tiny two-team league (shared policy)
        # an env with legal actions: the file takes a legal mask (its best action is illegal)
        "masked": tiny_run(root / "masked", "cartpole.yaml",
                           "env.name=jaxrl.envs.probes:MaskedBandit", "network.hidden_sizes=[16]"),
    }  # fmt: skip
    try:
        import envpool  # noqa: F401, PLC0415
    except ImportError:
        return out
    out["image"] = tiny_run(root / "image", "breakout_envpool.yaml", "env.num_envs=2",
                            "env.host_mode=sync", "ppo.num_steps=8", "network.hidden_sizes=[8]",
                            "train.total_steps=16")  # fmt: skip
    return out


# A fresh interpreter: jaxrl (and for ONNX, jax and flax) cannot be imported, so the file
# alone acts; it replays the recorded observations, its carry fed back, and compares actions.
LOADER = textwrap.dedent(
    """
    import sys
    sys.modules["jaxrl"] = None
    if sys.argv[1] == "onnx":
        for name in ("jax", "jaxlib", "flax"):
            sys.modules[name] = None
    import numpy as np

    def runner(fmt, path):
        if fmt == "onnx":
            import onnxruntime as ort
            session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            names = [o.name for o in session.get_outputs()]
            return lambda inputs: dict(zip(names, session.run(names, inputs)))
        import jax
        call = jax.export.deserialize(bytearray(open(path, "rb").read())).call
        return lambda inputs: {k: np.asarray(v) for k, v in call(inputs).items()}

    for path, data in zip(sys.argv[2::2], sys.argv[3::2]):
        run, d = runner(sys.argv[1], path), np.load(data)
        carry = np.zeros((d["obs"].shape[1], int(d["carry_width"])), np.float32)
        actions = []
        for t in range(d["obs"].shape[0]):
            inputs = {"obs": d["obs"][t]}
            if carry.shape[1]:
                inputs |= {"carry_in": carry, "reset": d["reset"][t]}
            if "legal" in d:
                inputs["legal"] = d["legal"][t]
            out = run(inputs)
            carry = out.get("carry_out", carry)
            actions.append(out["action"])
        assert np.array_equal(np.stack(actions), d["action"]), path
        if "legal" in d:  # never an action the mask forbids
            picked = np.take_along_axis(d["legal"], np.stack(actions)[..., None], -1)
            assert picked.all(), path
        print("matched", path, np.stack(actions).size)
    """
)


def export_all(runs: dict[str, Path], fmt: str, tmp: Path) -> list[str]:
    """Export every run to ``fmt``; ``[file, data.npz, ...]`` for :data:`LOADER`."""
    argv = []
    for name, run_dir in runs.items():
        result = jaxrl.export(run_dir, tmp / f"{name}.{fmt}", fmt, **CHECK)
        assert result.check.ok and result.check.actions_agree == result.check.actions_total
        sig = result.signature
        assert (sig.carry_width > 0) == (name == "lstm")
        assert ("legal" in [n for n, _, _ in sig.inputs]) == (name == "masked")
        data = tmp / f"{name}.npz"
        legal = {} if result.recording.legal is None else {"legal": result.recording.legal}
        np.savez(data, obs=result.recording.obs, reset=result.recording.reset,
                 action=result.reference["action"], carry_width=sig.carry_width,
                 **legal)  # fmt: skip
        argv += [str(result.path), str(data)]
    return argv


def run_loader(fmt: str, argv: list[str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", LOADER, fmt, *argv], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_stablehlo_files_act_as_jaxrl_without_jaxrl(runs, tmp_path):
    out = run_loader("stablehlo", export_all(runs, "stablehlo", tmp_path))
    assert out.count("matched") == len(runs)


def test_onnx_files_act_as_jaxrl_without_jax(runs, tmp_path):
    needs_onnx()
    out = run_loader("onnx", export_all(runs, "onnx", tmp_path))
    assert out.count("matched") == len(runs)


def test_a_file_that_differs_is_refused_and_not_written(runs, tmp_path, monkeypatch, capsys):
    real = ex.file_runner

    def off_by_a_little(blob, fmt, sig):  # logits 1e-3 off: within no tolerance of 1e-4
        run = real(blob, fmt, sig)
        return lambda inputs: {**run(inputs), "logits": run(inputs)["logits"] + 1e-3}

    monkeypatch.setattr(ex, "file_runner", off_by_a_little)
    out = tmp_path / "policy.stablehlo"
    argv = ["--run-dir", str(runs["ff"]), "--format", "stablehlo", "--out", str(out)]
    code = ex.main([*argv, "--check-steps", "4", "--check-envs", "2"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "refused to write" in err and "logits 0.001" in err and "tolerance 0.0001" in err
    assert not out.exists()


def test_missing_extra_gives_the_pip_command(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jax2onnx", None)
    argv = ["--run-dir", str(runs["ff"]), "--format", "onnx", "--out", str(tmp_path / "p.onnx")]
    assert ex.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --format onnx needs jax2onnx: pip install 'jaxrl[onnx]'"


def test_unsupported_op_names_the_op_and_the_option():
    from jaxrl.core.networks import ActorCritic  # noqa: PLC0415

    net = ActorCritic(action_dim=2, discrete=True, hidden_sizes=(4,), core="gru", core_size=3)
    hidden, obs, first = net.initial_hidden(2), jnp.zeros((1, 2, 4)), jnp.zeros((1, 2), bool)
    params = net.init(jax.random.key(0), hidden, obs, first)
    closed = jax.make_jaxpr(lambda o: net.apply(params, hidden, o, first))(obs)
    err = NotImplementedError("[lowering] No plugins registered for primitive 'logistic'")
    config = SimpleNamespace(network=SimpleNamespace(core="gru"))
    line = ex.unsupported_line(err, closed, config)
    assert line == (
        "--format onnx: jax2onnx cannot express the op 'logistic', used by network.core "
        "(core=gru); --format stablehlo can"
    )


def test_dot_general_as_einsum_is_the_same_contraction():
    lhs = jax.random.normal(jax.random.key(0), (3, 5, 2))  # [k, batch, m]
    rhs = jax.random.normal(jax.random.key(1), (5, 3, 4))  # [batch, k, n]
    dims = (((0,), (1,)), ((1,), (0,)))
    want = jax.lax.dot_general(lhs, rhs, dims)  # [batch, m, n]
    got = ex._einsum({"dimension_numbers": dims, "preferred_element_type": None}, lhs, rhs)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert ex._plain_dot({"dimension_numbers": (((1,), (0,)), ((), ()))}, lhs[0], rhs[0])
    assert not ex._plain_dot({"dimension_numbers": dims}, lhs, rhs)


def test_compare_counts_ties_and_limits_by_scale():
    sig = ex.Signature(inputs=(), outputs=("action", "logits", "value"), carry_width=0)
    ref = {
        "action": np.array([[1, 0]]),
        "logits": np.array([[[0.0, 2.0], [5.0, 5.0 - 1e-5]]]),  # row 2: a tie within 1e-4 x 5
        "value": np.array([[100.0, -3.0]]),
    }
    got = {"action": np.array([[1, 1]]), "logits": ref["logits"] + 2e-4, "value": ref["value"]}
    check = ex.compare(ref, got, sig, None)
    assert check.limit == {"logits": 5e-4, "value": 1e-2}  # 1e-4 x max(1, max |jaxrl|)
    assert check.actions_agree == 1 and check.ties == 1 and check.ok
    got["action"] = np.array([[0, 1]])  # row 1: logit 0 vs 2, no tie
    assert not ex.compare(ref, got, sig, None).ok


CARTPOLE_500 = [  # 32 envs x 32 steps, lr 1e-3: greedy return 500 after ~150k steps
    "env.num_envs=32",
    "ppo.num_steps=32",
    "ppo.lr=1e-3",
    "train.total_steps=150000",
    "train.updates_per_chunk=16",
    "train.progress_bar=false",
    "checkpoint.every_updates=0",
]


def test_guide_cartpole_program_scores_500_with_onnxruntime_alone(tmp_path):
    needs_onnx()
    pytest.importorskip("gymnasium")
    config = load_config(REPO / "configs" / "cartpole.yaml", CARTPOLE_500)
    run = train(config, tmp_path / "cartpole", quiet=True)
    model = jaxrl.export(run.run_dir, tmp_path / "cartpole.onnx", "onnx").path
    program = REPO / "examples" / "deploy" / "cartpole_onnx.py"
    block = "import sys, runpy; sys.modules.update(jax=None, jaxlib=None, flax=None, jaxrl=None)"
    main = "runpy.run_path(sys.argv[0], run_name='__main__')"
    run_it = f"{block}; sys.argv[0] = {str(program)!r}; {main}"
    proc = subprocess.run(
        [sys.executable, "-c", run_it, str(model), "--episodes", "3"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("mean 500.0"), proc.stdout


def test_guide_shows_the_example_programs_as_they_are():
    guide = (REPO / "docs" / "guide" / "deploy.md").read_text()
    for name in ("cartpole_onnx.py", "recurrent_onnx.py"):
        program = (REPO / "examples" / "deploy" / name).read_text()
        assert f"```python\n{program}```" in guide, name
