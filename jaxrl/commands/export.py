"""Deploy a trained policy: one self-contained ONNX or StableHLO file, checked before written.

    python -m jaxrl.export --run-dir DIR --format onnx --out policy.onnx [--step N] [--sample]
    jaxrl export --run-dir DIR --format stablehlo --out policy.stablehlo

The file holds the policy at the checkpoint's step with the observation normaliser of that
step folded in. It runs without jaxrl: an ``.onnx`` file under ``onnxruntime`` alone (no JAX),
a ``.stablehlo`` file with plain ``jax`` (``jax.export.deserialize``). Its inputs and outputs
(:func:`signature`, names as in the docs' deploy guide):

- inputs: ``obs [b, *obs]`` (the env's dtype; one agent's row for multi-agent runs); recurrent
  policies ``carry_in [b, C]`` float32 (zeros to start) and ``reset [b]`` bool (the row starts
  an episode); sampled exports ``noise [b, A]`` float32 (uniform in (0, 1) for discrete actions,
  standard normal for continuous ones);
- outputs: ``action`` (``[b]`` int32 or ``[b, A]`` float32, unclipped), ``logits [b, A]``
  (discrete) or ``mean [b, A]`` and ``std [b, A]`` (continuous), ``value [b]``, and for
  recurrent policies ``carry_out [b, C]``.

``b`` is dynamic in both formats. Before anything is written the command plays the policy in
the run's env through jaxrl (a host run: its vectorised gymnasium / EnvPool env), replays the
recorded observations through jaxrl's :func:`jaxrl.core.acting.act` and through the file (in
onnxruntime, or deserialised), and refuses to write (one line, exit 2) if the actions differ or
an output differs beyond the tolerance; the tolerance and the result are printed.

ONNX conversion is jax2onnx's (``pip install 'jaxrl[onnx]'``); this module hands it the
policy's jaxpr with two of its gaps closed (:func:`onnx_ready`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.metadata
import logging
import re
import string
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

FORMATS = ("onnx", "stablehlo")
ATOL = 1e-4  # outputs may differ by atol * max(1, max |jaxrl's output|)
ONNX_PIP = "pip install 'jaxrl[onnx]'"
ONNX_OPSET = 23  # jax2onnx's default opset; onnxruntime >= 1.24 runs it


class ExportError(ValueError):
    """Bad input or a policy that cannot be exported or did not match: one line, exit 2."""


# ----------------------------------------------------------------------------- the run


@dataclasses.dataclass(frozen=True)
class Deployable:
    """A restored policy and how to record observations for it (host side, static)."""

    spec: Any  # jaxrl.core.acting.PolicySpec (network, discrete, normalize_obs)
    policy: Any  # jaxrl.core.acting.PolicyParams of one member
    step: int  # the checkpoint's update
    initial_hidden: Callable[[int], Any]  # batch -> the core's carry (() without a core)
    action_dim: int  # logits (discrete) or action components (continuous)
    config: Any  # the run's Config
    record: Callable[..., Recording]  # (policy, act_fn, steps, num_envs, seed) -> Recording
    masked: bool = False  # the env declares legal actions: the file takes a legal mask

    @property
    def recurrent(self) -> bool:
        """The network has a recurrent core (its export takes and returns a carry)."""
        return bool(jax_leaves(self.initial_hidden(1)))


class Recording:
    """Observations of ``B`` rows over ``T`` steps, as the policy saw them while playing."""

    def __init__(self, obs: np.ndarray, reset: np.ndarray, legal: np.ndarray | None = None):
        self.obs = obs  # [T, B, *obs] the env's dtype
        self.reset = reset  # [T, B] bool, the row starts an episode
        self.legal = legal  # [T, B, n] bool legal actions fed to both sides (masked envs)


def jax_leaves(tree: Any) -> list:
    """``jax.tree.leaves`` (imported late: ``import jaxrl.commands.export`` stays light)."""
    import jax  # noqa: PLC0415

    return jax.tree.leaves(tree)


def restore(run_dir: str | Path, step: int | None = None, member: int = 0) -> Deployable:
    """The policy of ``run_dir`` at ``step`` (default: the latest), JAX or host run.

    Raises:
      ExportError: not a run directory, or a member the run does not have.
      jaxrl.run.checkpoint.CheckpointError: no checkpoint at ``step``.
    """
    from jaxrl.run.play import host_backend  # noqa: PLC0415

    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise ExportError(f"--run-dir: {run_dir} is not a run directory (no config.yaml)")
    if host_backend(run_dir):
        if member != 0:
            raise ExportError(f"--member must be 0: a host run has one member, got {member}")
        return _restore_host(run_dir, step)
    return _restore_jax(run_dir, step, member)


def _restore_jax(run_dir: Path, step: int | None, member: int) -> Deployable:
    import jax  # noqa: PLC0415

    from jaxrl.envs import protocols  # noqa: PLC0415
    from jaxrl.run.play import load_policy  # noqa: PLC0415

    setup, policy, step = load_policy(run_dir, step)
    count = setup.members.count
    if not 0 <= member < count:
        raise ExportError(f"--member must be in 0..{count - 1}, got {member}")
    if count > 1:
        policy = jax.tree.map(lambda x: x[member], policy)
    return Deployable(
        spec=setup.policy,
        policy=policy,
        step=int(step),
        initial_hidden=setup.network.initial_hidden,
        action_dim=_action_dim(setup.policy, policy, setup.obs_shape),
        config=setup.config,
        record=functools.partial(_record_jax, setup),
        masked=setup.policy.discrete and protocols.action_masked(setup.env) is not None,
    )


def _restore_host(run_dir: Path, step: int | None) -> Deployable:
    from jaxrl.hostenv.play import restore_host_policy  # noqa: PLC0415

    spec, policy, step = restore_host_policy(run_dir, step)
    config = spec.config
    return Deployable(
        spec=spec.policy,
        policy=policy,
        step=int(step),
        initial_hidden=spec.network.initial_hidden,
        action_dim=spec.spaces.action_dim,
        config=config,
        record=functools.partial(_record_host, spec),
    )


def _action_dim(spec: Any, policy: Any, obs_shape: tuple[int, ...]) -> int:
    """Logits or action components of the network (from one call's output shape)."""
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    hidden = spec.network.initial_hidden(1)
    obs = jax.ShapeDtypeStruct((1, 1, *obs_shape), jnp.float32)
    first = jax.ShapeDtypeStruct((1, 1), jnp.bool_)
    _, out, _ = jax.eval_shape(spec.network.apply, policy.params, hidden, obs, first)
    return int((out if spec.discrete else out[0]).shape[-1])


# ----------------------------------------------------------------------------- recording


def _record_jax(
    setup: Any, policy: Any, act_fn: Any, steps: int, num_envs: int, seed: int
) -> Recording:
    """The learner rows' observations over ``steps`` match steps of greedy play (jaxrl's)."""
    import jax  # noqa: PLC0415

    from jaxrl.run import play  # noqa: PLC0415

    del act_fn  # the match step acts with jaxrl.core.acting.act itself
    layout = play.eval_layout(setup, num_envs)
    spec = play.eval_spec(setup, layout, deterministic=True)
    plan = play.play_plan(layout, play.stage_env_params(setup))

    @jax.jit
    def run(policy: Any, key: jax.Array) -> Any:
        keep = lambda c: (c.obs, c.is_first)  # noqa: E731 - what the learner's rows saw
        initial = setup.network.initial_hidden
        return play.play_steps(spec, initial, policy, plan, key, steps - 1, keep)

    obs, reset = jax.device_get(run(policy, jax.random.key(seed)))
    return Recording(np.asarray(obs), np.asarray(reset))


def _record_host(
    spec: Any, policy: Any, act_fn: Any, steps: int, num_envs: int, seed: int
) -> Recording:
    """Observations of ``steps`` steps of greedy play on the run's host envs (its vec env)."""
    from jaxrl.hostenv.vecenv import make_vec  # noqa: PLC0415

    del policy  # act_fn closes over it
    config = spec.config
    vec = make_vec(config.env.backend, config.env.name, num_envs, seed, config.env.kwargs)
    obs, reset = [vec.reset()], [np.ones(vec.num_envs, bool)]
    hidden = spec.network.initial_hidden(vec.num_envs)
    try:
        for _ in range(steps - 1):
            action, hidden = act_fn(hidden, obs[-1], reset[-1])
            action = np.asarray(action)
            if not spec.spaces.discrete:
                action = np.clip(action, spec.spaces.action_low, spec.spaces.action_high)
            step = vec.step(action)
            obs.append(step.obs)
            reset.append(step.terminated | step.truncated)
    finally:
        vec.close()
    return Recording(np.stack(obs), np.stack(reset))


def record(run: Deployable, steps: int = 64, num_envs: int = 8, seed: int = 0) -> Recording:
    """``[steps, rows]`` observations of greedy play through jaxrl (rows: envs x agents)."""
    import jax  # noqa: PLC0415

    from jaxrl.core.acting import act  # noqa: PLC0415

    @jax.jit
    def act_fn(hidden: Any, obs: Any, reset: Any) -> Any:
        out = act(run.spec, run.policy, hidden, obs, reset, jax.random.key(0), True)
        return out.action, out.hidden

    return run.record(run.policy, act_fn, steps, num_envs, seed)


# ----------------------------------------------------------------------------- the function


@dataclasses.dataclass(frozen=True)
class Signature:
    """Names, shapes (``"b"`` the dynamic batch) and dtypes of the file's inputs and outputs."""

    inputs: tuple[tuple[str, tuple, Any], ...]
    outputs: tuple[str, ...]
    carry_width: int  # C of carry_in / carry_out (0: feed-forward)


def signature(run: Deployable, obs_shape: tuple, obs_dtype: Any, sample: bool) -> Signature:
    """What the exported function takes and returns (module docstring)."""
    width = sum(int(np.prod(x.shape[1:])) for x in jax_leaves(run.initial_hidden(1)))
    inputs = [("obs", ("b", *obs_shape), np.dtype(obs_dtype))]
    if width:
        inputs += [("carry_in", ("b", width), np.dtype("float32")), ("reset", ("b",), np.bool_)]
    if run.masked:
        inputs += [("legal", ("b", run.action_dim), np.dtype(np.bool_))]
    if sample:
        inputs += [("noise", ("b", run.action_dim), np.dtype("float32"))]
    outputs = ["action", *(("logits",) if run.spec.discrete else ("mean", "std")), "value"]
    return Signature(tuple(inputs), tuple(outputs + (["carry_out"] if width else [])), width)


def policy_function(run: Deployable, sig: Signature) -> Callable[[dict], dict]:
    """``inputs -> outputs`` (dicts named as in ``sig``): jaxrl's act, written out for export.

    Normalise with the step's running moments, one network step, then the mode or a sample
    drawn from ``noise`` (Gumbel-max from uniform noise; ``mean + std * noise``).
    """
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    from jaxrl.core.networks import mask_logits  # noqa: PLC0415
    from jaxrl.core.normalize import normalize  # noqa: PLC0415

    spec, policy = run.spec, jax.device_get(run.policy)
    treedef = jax.tree.structure(run.initial_hidden(1))

    def fn(inputs: dict) -> dict:
        obs = inputs["obs"]
        rows = obs.shape[0]
        hidden, reset = (), jnp.zeros((rows,), bool)
        if sig.carry_width:
            reset = inputs["reset"]
            hidden = jax.tree.unflatten(treedef, split_carry(inputs["carry_in"], treedef, run))
        x = normalize(policy.obs_stats, obs, spec.normalize_obs)
        hidden, out, value = spec.network.apply(policy.params, hidden, x[None], reset[None])
        result = {"value": value[0]}
        if spec.discrete:
            logits = mask_logits(out[0], inputs.get("legal"))  # illegal: float32's minimum
            score = logits - jnp.log(-jnp.log(inputs["noise"])) if "noise" in inputs else logits
            result |= {"action": jnp.argmax(score, -1).astype(jnp.int32), "logits": logits}
        else:
            mean, std = out[0][0], jnp.broadcast_to(jnp.exp(out[1]), out[0][0].shape)
            action = mean + std * inputs["noise"] if "noise" in inputs else mean
            result |= {"action": action, "mean": mean, "std": std}
        if sig.carry_width:
            result["carry_out"] = jnp.concatenate(
                [x.reshape((rows, -1)) for x in jax.tree.leaves(hidden)], -1
            )
        return {name: result[name] for name in sig.outputs}

    return fn


def split_carry(carry: Any, treedef: Any, run: Deployable) -> list:
    """``carry_in [b, C]`` cut into the core's carry leaves (in ``jax.tree.leaves`` order)."""
    leaves, start, out = jax_leaves(run.initial_hidden(1)), 0, []
    for leaf in leaves:
        width = int(np.prod(leaf.shape[1:]))
        out.append(carry[:, start : start + width].reshape((-1, *leaf.shape[1:])))
        start += width
    del treedef
    return out


def abstract_inputs(sig: Signature) -> dict:
    """``jax.ShapeDtypeStruct`` of each input, ``b`` a symbolic dimension (jax.export)."""
    import jax  # noqa: PLC0415

    (b,) = jax.export.symbolic_shape("b")
    return {
        name: jax.ShapeDtypeStruct(tuple(b if d == "b" else d for d in shape), dtype)
        for name, shape, dtype in sig.inputs
    }


# ----------------------------------------------------------------------------- the formats


def to_stablehlo(fn: Callable[[dict], dict], sig: Signature) -> bytes:
    """``jax.export`` serialisation: call with a dict of inputs, get a dict of outputs."""
    import jax  # noqa: PLC0415

    exported = jax.export.export(jax.jit(fn), platforms=("cpu", "cuda"))(abstract_inputs(sig))
    return bytes(exported.serialize())


def import_jax2onnx() -> Any:
    """jax2onnx, or the pip command that installs it (:class:`ExportError`)."""
    try:
        import jax2onnx  # noqa: PLC0415
        import onnxruntime  # noqa: F401, PLC0415
    except ImportError as err:
        raise ExportError(f"--format onnx needs {err.name}: {ONNX_PIP}") from None
    _print_pin_note()
    return jax2onnx


@functools.cache
def _print_pin_note() -> None:
    note = pin_note()
    if note:
        print(note, file=sys.stderr)


def pin_note() -> str | None:
    """One line if the installed jax2onnx pins an orbax-checkpoint other than the installed one.

    jax2onnx >= 0.14 declares ``orbax-checkpoint<0.11.37`` but never imports orbax; jaxrl's
    extra takes the newest jax2onnx without that pin (0.13.x).
    """
    from packaging.requirements import Requirement  # noqa: PLC0415

    try:
        requires = importlib.metadata.requires("jax2onnx") or []
        orbax = importlib.metadata.version("orbax-checkpoint")
    except importlib.metadata.PackageNotFoundError:
        return None
    for line in requires:
        req = Requirement(line)
        if req.name == "orbax-checkpoint" and not req.specifier.contains(orbax, prereleases=True):
            version = importlib.metadata.version("jax2onnx")
            return (
                f"note: jax2onnx {version} pins orbax-checkpoint{req.specifier} (metadata only: "
                f"it does not import orbax); jaxrl runs with orbax-checkpoint {orbax}"
            )
    return None


def to_onnx(fn: Callable[[dict], dict], sig: Signature, config: Any = None) -> bytes:
    """jax2onnx's conversion of ``fn`` (dynamic batch ``b``), inputs and outputs named.

    Raises:
      ExportError: jax2onnx is missing, or cannot express an op (the op and the option named).
    """
    import jax  # noqa: PLC0415

    jax2onnx = import_jax2onnx()
    names = [name for name, _, _ in sig.inputs]
    avals = abstract_inputs(sig)

    def positional(*xs: Any) -> tuple:
        out = fn(dict(zip(names, xs, strict=True)))
        return tuple(out[name] for name in sig.outputs)

    closed = jax.make_jaxpr(positional)(*avals.values())
    for name in ("jax2onnx", "onnx_ir"):  # per-value notes of the converter, not errors
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        model = jax2onnx.to_onnx(
            onnx_ready(closed),
            list(avals.values()),
            model_name="jaxrl_policy",
            opset=ONNX_OPSET,
            input_names=names,
            output_names=list(sig.outputs),
        )
    except NotImplementedError as err:
        raise ExportError(unsupported_line(err, closed, config)) from None
    except Exception as err:  # noqa: BLE001 - the converter fails inside an op's lowering
        raise ExportError(unsupported_line(err, closed, config, failing_op(err))) from None
    return model.SerializeToString()


def failing_op(err: Exception) -> str | None:
    """The op whose jax2onnx lowering raised ``err`` (its plugin module's name), or None."""
    frames = traceback.extract_tb(err.__traceback__)
    plugins = [Path(f.filename).stem for f in frames if "jax2onnx/plugins" in f.filename]
    return plugins[-1] if plugins else None


# Primitives whose sub-jaxpr is inlined (jax2onnx patches jnp.shape while it traces, which
# breaks flax's nn.scan in the recurrent core; tracing the jaxpr first avoids that).
_INLINE = ("pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call")


def onnx_ready(closed: Any) -> Callable[..., tuple]:
    """A function that replays ``closed`` (a ClosedJaxpr) for jax2onnx to trace.

    Two gaps of jax2onnx 0.13-0.17 are closed on the way: calls are inlined (see
    :data:`_INLINE`), and a ``dot_general`` other than ``[.., k] x [k, ..]`` becomes an einsum
    (jax2onnx lowers a contraction over the lhs's first axis to a Gemm of the wrong shape, as
    in the Nature CNN's channels-first dense layer).
    """

    def run(*xs: Any) -> tuple:
        return tuple(_eval(closed.jaxpr, closed.consts, xs))

    return run


def _eval(jaxpr: Any, consts: Any, args: Any) -> list:
    from jax.extend.core import Literal  # noqa: PLC0415

    env: dict = {}
    read = lambda v: v.val if isinstance(v, Literal) else env[v]  # noqa: E731
    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        env.update(zip(eqn.outvars, _bind(eqn, [read(v) for v in eqn.invars]), strict=True))
    return [read(v) for v in jaxpr.outvars]


def _bind(eqn: Any, args: list) -> list:
    params = eqn.params
    if eqn.primitive.name in _INLINE:
        inner = params.get("jaxpr") or params.get("call_jaxpr") or params.get("fun_jaxpr")
        if inner is not None:
            consts = getattr(inner, "consts", ())
            return _eval(getattr(inner, "jaxpr", inner), consts, args)
    if eqn.primitive.name == "dot_general" and not _plain_dot(params, *args):
        return [_einsum(params, *args)]
    out = eqn.primitive.bind(*args, **eqn.primitive.get_bind_params(params))
    return list(out) if eqn.primitive.multiple_results else [out]


def _plain_dot(params: dict, lhs: Any, rhs: Any) -> bool:
    (lc, rc), (lb, _) = params["dimension_numbers"]
    return not lb and tuple(lc) == (lhs.ndim - 1,) and tuple(rc) == (0,)


def _einsum(params: dict, lhs: Any, rhs: Any) -> Any:
    import jax.numpy as jnp  # noqa: PLC0415

    (lc, rc), (lb, rb) = params["dimension_numbers"]
    letters = iter(string.ascii_letters)
    left = [next(letters) for _ in range(lhs.ndim)]
    right: list = [None] * rhs.ndim
    for a, b in [*zip(lc, rc, strict=True), *zip(lb, rb, strict=True)]:
        right[b] = left[a]
    right = [c or next(letters) for c in right]
    out = [left[a] for a in lb]
    out += [c for i, c in enumerate(left) if i not in lc and i not in lb]
    out += [c for i, c in enumerate(right) if i not in rc and i not in rb]
    y = jnp.einsum(f"{''.join(left)},{''.join(right)}->{''.join(out)}", lhs, rhs)
    return y.astype(params["preferred_element_type"] or y.dtype)


# Network parts (flax module names in an op's name stack) and the option that puts them there.
_OPTIONS = (
    ("core", "network.core"),
    ("cell", "network.core"),  # the core's scanned step (its own name stack inside the scan)
    ("entities", "network.entity_width"),
    ("NatureEncoder", "the Nature CNN of image observations"),
    ("encoder", "network.encoder"),
    ("torso", "network.hidden_sizes / network.activation"),
    ("head", "the action and value heads"),
)


def unsupported_line(err: Exception, closed: Any, config: Any, op: str | None = None) -> str:
    """One line: the op jax2onnx cannot express and the network option that uses it."""
    found = re.search(r"primitive '([^']+)'", str(err))
    op = op or (found.group(1) if found else str(err).splitlines()[0])
    eqns = [e for e in _eqns(closed.jaxpr) if e.primitive.name == op]
    where = sorted({str(e.source_info.name_stack) for e in eqns})
    option = next((o for part, o in _OPTIONS if any(part in w for w in where)), None)
    if option is None:
        option = "the code around the network (normalisation, action choice)"
    if option.startswith("network.") and config is not None:
        net = config.network
        option += f" ({', '.join(f'{k}={getattr(net, k)}' for k in _option_keys(option))})"
    return (
        f"--format onnx: jax2onnx cannot express the op '{op}', used by {option}; "
        "--format stablehlo can"
    )


def _option_keys(option: str) -> list[str]:
    return [part.split(".")[1] for part in option.split(" / ")]


def _eqns(jaxpr: Any):
    """Every equation of ``jaxpr`` and of the jaxprs inside it."""
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            inner = getattr(value, "jaxpr", value)
            if hasattr(inner, "eqns"):
                yield from _eqns(inner)


# ----------------------------------------------------------------------------- the check


def random_legal(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """bool ``[T, B, n]`` masks for the check of a masked policy: each action legal with
    probability 1/2, at least one a row, so the file's masking is compared with act's."""
    rng = np.random.default_rng(seed + 1)
    legal = rng.random(shape) < 0.5
    np.put_along_axis(legal, rng.integers(0, shape[-1], shape[:-1])[..., None], True, -1)
    return legal


def make_noise(sig: Signature, rec: Recording, seed: int) -> np.ndarray | None:
    """``[T, B, A]`` float32 sampling noise for a sampled export's check (else None)."""
    if "noise" not in [name for name, _, _ in sig.inputs]:
        return None
    shape = rec.reset.shape + (sig.inputs[-1][1][1],)
    rng = np.random.default_rng(seed)
    if "logits" in sig.outputs:
        return rng.uniform(1e-6, 1.0 - 1e-6, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def replay_jaxrl(
    run: Deployable, sig: Signature, fn: Callable[[dict], dict], rec: Recording, noise: Any
) -> dict[str, np.ndarray]:
    """jaxrl's outputs ``[T, B, ...]`` on the recording, its carry stepped by jaxrl.

    ``action`` (greedy), ``value`` and ``carry_out`` are :func:`jaxrl.core.acting.act`'s;
    ``logits`` / ``mean`` / ``std`` and a sampled ``action`` are the exported function's, run in
    JAX on act's carry (``greedy``: act's action, which the function's mode must equal).
    """
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    from jaxrl.core.acting import act  # noqa: PLC0415

    rows = rec.reset.shape[1]

    def flat(hidden: Any) -> Any:
        return jnp.concatenate([x.reshape((rows, -1)) for x in jax.tree.leaves(hidden)], -1)

    sampled = noise is not None
    eps = noise if sampled else np.zeros(rec.reset.shape, np.float32)
    legal = rec.legal if rec.legal is not None else np.ones(rec.reset.shape, bool)

    def step(hidden: Any, xs: tuple) -> tuple[Any, dict]:
        obs, reset, e, ok = xs
        mask = ok if rec.legal is not None else None
        out = act(run.spec, run.policy, hidden, obs, reset, jax.random.key(0), True, legal=mask)
        inputs = {"obs": obs}
        if sig.carry_width:
            inputs |= {"carry_in": flat(hidden), "reset": reset}
        if mask is not None:
            inputs["legal"] = mask
        if sampled:
            inputs["noise"] = e
        ref = fn(inputs) | {"value": out.value, "greedy": out.action}
        if not sampled:
            ref |= {"action": out.action, "mine": fn(inputs)["action"]}
        if sig.carry_width:
            ref["carry_out"] = flat(out.hidden)
        return out.hidden, ref

    scan = jax.jit(lambda xs: jax.lax.scan(step, run.initial_hidden(rows), xs)[1])
    return jax.device_get(scan((rec.obs, rec.reset, eps, legal)))


def file_runner(blob: bytes, fmt: str, sig: Signature) -> Callable[[dict], dict]:
    """Run a written file: onnxruntime for ONNX, ``jax.export.deserialize`` for StableHLO."""
    if fmt == "onnx":
        import onnxruntime as ort  # noqa: PLC0415

        options = ort.SessionOptions()
        options.log_severity_level = 3  # errors only (not its unused-initializer notes)
        session = ort.InferenceSession(blob, options, providers=["CPUExecutionProvider"])
        names = list(sig.outputs)
        return lambda inputs: dict(zip(names, session.run(names, inputs), strict=True))
    import jax  # noqa: PLC0415

    call = jax.jit(jax.export.deserialize(bytearray(blob)).call)
    return lambda inputs: jax.device_get(call(inputs))


def replay_file(
    runner: Callable[[dict], dict], sig: Signature, rec: Recording, noise: Any
) -> dict[str, np.ndarray]:
    """The file's outputs ``[T, B, ...]``, its own ``carry_out`` fed back as ``carry_in``."""
    steps, rows = rec.reset.shape
    carry = np.zeros((rows, sig.carry_width), np.float32)
    outs = []
    for t in range(steps):
        inputs = {"obs": rec.obs[t]}
        if sig.carry_width:
            inputs |= {"carry_in": carry, "reset": rec.reset[t]}
        if rec.legal is not None:
            inputs["legal"] = rec.legal[t]
        if noise is not None:
            inputs["noise"] = noise[t]
        out = runner(inputs)
        carry = np.asarray(out.get("carry_out", carry))
        outs.append({k: np.asarray(v) for k, v in out.items()})
    return {k: np.stack([o[k] for o in outs]) for k in sig.outputs}


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The file against jaxrl on the recorded observations."""

    max_abs_diff: dict[str, float]  # per float output
    limit: dict[str, float]  # atol * max(1, max |jaxrl's output|)
    actions_agree: int  # rows x steps with the same action
    actions_total: int
    ties: int  # discrete disagreements where jaxrl's scores tie within the logits' limit
    atol: float

    @property
    def ok(self) -> bool:
        """Every float output within its limit; every differing action a tie."""
        within = all(self.max_abs_diff[k] <= self.limit[k] for k in self.max_abs_diff)
        return within and self.actions_total - self.actions_agree == self.ties

    def line(self) -> str:
        """``actions agree 100.0% (512/512); max |diff| logits 3e-09 ...; tolerance ...``."""
        share = 100.0 * self.actions_agree / max(self.actions_total, 1)
        diffs = ", ".join(f"{k} {v:.2g}" for k, v in self.max_abs_diff.items())
        ties = f", {self.ties} ties" if self.ties else ""
        return (
            f"actions agree {share:.1f}% ({self.actions_agree}/{self.actions_total}{ties}); "
            f"max |file - jaxrl| {diffs}; tolerance {self.atol:g} x max(1, max |jaxrl|)"
        )


def compare(
    ref: dict, got: dict, sig: Signature, noise: Any, atol: float = ATOL, legal: Any = None
) -> CheckResult:
    """The check's numbers (see :class:`CheckResult`); ``legal [T, B, n]``: the logits of
    illegal actions (float32's minimum on both sides) are left out of the differences."""
    if legal is not None:
        ref, got = ({**d, "logits": np.where(legal, d["logits"], 0.0)} for d in (ref, got))
    floats = [k for k in sig.outputs if k != "action" or "logits" not in sig.outputs]
    diff = {k: float(np.max(np.abs(got[k] - ref[k]), initial=0.0)) for k in floats}
    limit = {k: atol * max(1.0, float(np.max(np.abs(ref[k]), initial=0.0))) for k in floats}
    if "mine" in ref:  # the function's mode is act's action (greedy exports)
        mismatch = ref["mine"] != ref["greedy"]
        if "logits" not in sig.outputs:
            mismatch = np.abs(ref["mine"] - ref["greedy"]).max(-1) > limit["mean"]
        if mismatch.any():
            rows = int(mismatch.sum())
            raise ExportError(
                f"the exported function's mode differs from jaxrl's act on {rows} rows"
            )
    if "logits" not in sig.outputs:
        agree = (np.abs(got["action"] - ref["action"]) <= limit["action"]).all(-1)
        return CheckResult(diff, limit, int(agree.sum()), agree.size, 0, atol)
    score = ref["logits"] - (np.log(-np.log(noise)) if noise is not None else 0.0)
    agree = got["action"] == ref["action"]
    picked = np.take_along_axis(score, got["action"][..., None].astype(np.int64), -1)[..., 0]
    tie = ~agree & (picked >= score.max(-1) - limit["logits"])
    return CheckResult(diff, limit, int(agree.sum()), agree.size, int(tie.sum()), atol)


# ----------------------------------------------------------------------------- export


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """What :func:`export` wrote and how it matched jaxrl."""

    path: Path
    format: str
    step: int  # the checkpoint's update
    size: int  # bytes written
    signature: Signature
    check: CheckResult
    recording: Recording  # the observations the check replayed
    reference: dict  # jaxrl's outputs on them, [T, B, ...]
    noise: Any  # [T, B, A] the check's sampling noise (sampled exports), else None


def export(
    run_dir: str | Path,
    out: str | Path,
    format: str = "onnx",  # noqa: A002 - the CLI's --format
    *,
    step: int | None = None,
    member: int = 0,
    sample: bool = False,
    check_steps: int = 64,
    check_envs: int = 8,
    seed: int = 0,
    atol: float = ATOL,
) -> ExportResult:
    """Write the policy of ``run_dir`` at ``step`` as one file, after checking it against jaxrl.

    Raises:
      ExportError: bad input, an op the converter cannot express, a missing extra, or a file
        whose outputs differ from jaxrl's (nothing is written).
    """
    if format not in FORMATS:
        raise ExportError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
    if check_steps < 1 or check_envs < 1:
        raise ExportError("--check-steps and --check-envs must be >= 1")
    if format == "onnx":
        import_jax2onnx()  # the pip command before anything slow
    run = restore(run_dir, step, member)
    rec = record(run, check_steps, check_envs, seed)
    if run.masked:
        rec.legal = random_legal(rec.reset.shape + (run.action_dim,), seed)
    sig = signature(run, rec.obs.shape[2:], rec.obs.dtype, sample)
    fn = policy_function(run, sig)
    blob = to_onnx(fn, sig, run.config) if format == "onnx" else to_stablehlo(fn, sig)
    noise = make_noise(sig, rec, seed)
    ref = replay_jaxrl(run, sig, fn, rec, noise)
    got = replay_file(file_runner(blob, format, sig), sig, rec, noise)
    check = compare(ref, got, sig, noise, atol, rec.legal)
    if not check.ok:
        raise ExportError(f"refused to write {out}: the file does not match jaxrl: {check.line()}")
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)
    return ExportResult(path, format, run.step, len(blob), sig, check, rec, ref, noise)


def describe(sig: Signature) -> str:
    """``inputs obs[b,4] float32; outputs action, logits, value``."""
    ins = ", ".join(f"{n}[{','.join(map(str, s))}] {np.dtype(d).name}" for n, s, d in sig.inputs)
    return f"inputs {ins}; outputs {', '.join(sig.outputs)}"


# ----------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    """Command line of ``python -m jaxrl.export``."""
    from jaxrl.commands.cli import HelpFormatter, prog  # noqa: PLC0415

    parser = argparse.ArgumentParser(
        prog=prog("jaxrl.commands.export"),
        description="Write a checkpointed policy as one ONNX or StableHLO file that runs "
        "without jaxrl, after checking it against jaxrl on observations from the run's env.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--run-dir", required=True, help="a run directory written by jaxrl train")
    parser.add_argument("--step", type=int, help="checkpoint update step (default: latest)")
    parser.add_argument("--format", required=True, choices=FORMATS, help="the file's format")
    parser.add_argument("--out", required=True, help="the file to write")
    parser.add_argument("--member", type=int, default=0, help="runs of several members: which")
    parser.add_argument(
        "--sample", action="store_true", help="sample actions from a noise input (else the mode)"
    )
    parser.add_argument("--check-steps", type=int, default=64, help="steps of play replayed")
    parser.add_argument("--check-envs", type=int, default=8, help="envs played for the check")
    parser.add_argument("--seed", type=int, default=0, help="seed of the check's play")
    parser.add_argument(
        "--atol", type=float, default=ATOL, help="tolerance, times max(1, max |jaxrl's output|)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m jaxrl.export``."""
    from jaxrl.config import ConfigError  # noqa: PLC0415
    from jaxrl.run.checkpoint import CheckpointError, error_line  # noqa: PLC0415

    args = build_parser().parse_args(argv)
    try:
        result = export(
            args.run_dir, args.out, args.format, step=args.step, member=args.member,
            sample=args.sample, check_steps=args.check_steps, check_envs=args.check_envs,
            seed=args.seed, atol=args.atol,
        )  # fmt: skip
    except (ConfigError, ValueError) as err:  # ExportError included: one line, exit 2
        print(f"error: {err}", file=sys.stderr)
        return 2
    except CheckpointError as err:
        line, status = error_line(err, "--step")
        print(f"error: {line}", file=sys.stderr)
        return status
    steps, rows = result.recording.reset.shape
    print(f"checked on {steps} steps x {rows} rows of recorded observations: {result.check.line()}")
    print(
        f"wrote {result.path} ({result.format}, update {result.step}, {result.size:,} bytes): "
        f"{describe(result.signature)}"
    )
    return 0
