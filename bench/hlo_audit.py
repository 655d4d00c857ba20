"""What one compiled train chunk asks of an accelerator, read from its optimized HLO on the CPU.

``python -m bench.hlo_audit [--json FILE] [--workloads cartpole_ff,cartpole_gru,soccer_league]``

A GPU runs the train chunk as a stream of kernels; what costs it time besides the kernels
themselves is the host: a ``while`` loop whose trip count depends on data reads its predicate
back to the host every iteration, a host callback or an in/outfeed stops the stream, and every
``conditional`` launches a branch-selection kernel and splits the stream. None of that shows
on a CPU's clock, but all of it shows in the optimized HLO, which the CPU compiler prints:

- every ``while`` that XLA proved a trip count for carries ``known_trip_count`` in its backend
  config (``lax.scan`` and static ``fori_loop`` do); one without it is data-dependent;
- host traffic is an ``infeed``/``outfeed``/``send``/``recv`` or a ``custom-call`` to a
  Python callback;
- the rollout's loop over env steps is the ``while`` traced under
  :data:`jaxrl.core.rollout.ENV_STEP_SCOPE`; what its body calls, transitively, runs every env step.

The program is traced as for a GPU (:func:`jaxrl.core.permutation.target_platform`): the CPU's
minibatch shuffle uses a data-dependent loop that the GPU's does not. Fusion decisions differ
between the CPU and GPU compilers, so the kernel counts are a review signal (a change that adds
launches shows up), not a GPU measurement; ``tests/test_hlo_audit.py`` asserts the structure
(loops, host traffic, conditionals) and ``docs/results/log.md`` records the counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from jaxrl.core.rollout import ENV_STEP_SCOPE

REPO = Path(__file__).resolve().parents[1]
# Instructions that launch nothing: bookkeeping of tuples, views and parameters.
FREE_OPCODES = frozenset(
    {
        "parameter",
        "constant",
        "get-tuple-element",
        "tuple",
        "bitcast",
        "after-all",
        "partition-id",
        "replica-id",
        "opt-barrier",
    }
)
HOST_OPCODES = frozenset({"infeed", "outfeed", "send", "recv", "send-done", "recv-done"})
CALLED_ATTRS = ("calls", "to_apply", "body", "condition", "true_computation", "false_computation")


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One HLO instruction, as much of it as the audit reads."""

    name: str
    opcode: str
    called: tuple[str, ...]  # computations it calls (fusion, loop, branches, reducers)
    op_name: str  # the JAX name stack it was traced under ("" when absent)
    trip_count: int | None  # a while's known trip count, None when unknown or not a while
    target: str | None  # a custom-call's target


@dataclasses.dataclass(frozen=True)
class HloModule:
    """The computations of an optimized HLO module, by name, and the entry's name."""

    computations: dict[str, tuple[Instruction, ...]]
    entry: str


def _split_type(rest: str) -> str:
    """``rest`` after the instruction's result type (which may be a parenthesised tuple)."""
    if not rest.startswith("("):
        return rest.split(" ", 1)[1]
    depth = 0
    for i, char in enumerate(rest):
        depth += char == "("
        depth -= char == ")"
        if depth == 0:
            return rest[i + 1 :].lstrip()
    raise ValueError(f"unbalanced tuple type in HLO: {rest[:80]}")


def parse_instruction(line: str) -> Instruction | None:
    """An :class:`Instruction` from one line of HLO text, or None if it is not one."""
    match = re.match(r"\s+(?:ROOT )?%?([\w.\-]+) = (.*)$", line)
    if match is None:
        return None
    name, rest = match.groups()
    body = _split_type(rest)
    opcode = re.match(r"([\w\-]+)\(", body)
    if opcode is None:
        return None
    called: list[str] = []
    for attr in CALLED_ATTRS:
        called += re.findall(rf"\b{attr}=%?([\w.\-]+)", body)
    for group in re.findall(r"branch_computations=\{([^}]*)\}", body):
        called += [c.strip().lstrip("%") for c in group.split(",") if c.strip()]
    op_name = re.search(r'op_name="([^"]*)"', body)
    trip = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', body)
    target = re.search(r'custom_call_target="([^"]+)"', body)
    return Instruction(
        name=name,
        opcode=opcode.group(1),
        called=tuple(called),
        op_name=op_name.group(1) if op_name else "",
        trip_count=int(trip.group(1)) if trip else None,
        target=target.group(1) if target else None,
    )


def parse_hlo(text: str) -> HloModule:
    """Parse the text of an optimized HLO module (``compiled.as_text()``)."""
    computations: dict[str, tuple[Instruction, ...]] = {}
    entry, current, instructions = "", None, []
    for line in text.splitlines():
        header = re.match(r"(ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if header and not line.startswith(" "):
            current, instructions = header.group(2), []
            if header.group(1):
                entry = current
        elif line.startswith("}") and current is not None:
            computations[current] = tuple(instructions)
            current = None
        elif current is not None:
            instruction = parse_instruction(line)
            if instruction is not None:
                instructions.append(instruction)
    if not entry:
        raise ValueError("no ENTRY computation in the HLO text")
    return HloModule(computations=computations, entry=entry)


@dataclasses.dataclass(frozen=True)
class Launches:
    """Kernels a computation launches when it runs once (loops times their trip counts).

    ``fusions``: fused kernels; ``other``: unfused ops that run on their own (dots, copies,
    sorts, scatters, custom calls...); ``conditionals``: branch selections. A conditional
    counts its costliest branch.
    """

    fusions: int = 0
    other: int = 0
    conditionals: int = 0

    def __add__(self, other: Launches) -> Launches:
        return Launches(
            self.fusions + other.fusions,
            self.other + other.other,
            self.conditionals + other.conditionals,
        )

    def times(self, n: int) -> Launches:
        return Launches(self.fusions * n, self.other * n, self.conditionals * n)

    @property
    def total(self) -> int:
        return self.fusions + self.other + self.conditionals


def launches(module: HloModule, computation: str, _memo: dict | None = None) -> Launches:
    """:class:`Launches` of one run of ``computation`` (a loop of unknown trip count: once)."""
    memo = {} if _memo is None else _memo
    if computation in memo:
        return memo[computation]
    count = Launches()
    for inst in module.computations[computation]:
        if inst.opcode in FREE_OPCODES:
            continue
        if inst.opcode == "fusion":
            count += Launches(fusions=1)
        elif inst.opcode == "while":
            body = sum((launches(module, c, memo) for c in inst.called), Launches())
            count += body.times(inst.trip_count or 1)
        elif inst.opcode == "conditional":
            branches = [launches(module, c, memo) for c in inst.called]
            count += Launches(conditionals=1) + max(branches, key=lambda b: b.total)
        elif inst.opcode == "call":
            count += sum((launches(module, c, memo) for c in inst.called), Launches())
        else:  # reducers' to_apply computations are part of the op, not launches of their own
            count += Launches(other=1)
    memo[computation] = count
    return count


def reachable(module: HloModule, roots: Iterable[str]) -> list[Instruction]:
    """Every instruction that running ``roots`` may execute (not inside fused computations)."""
    seen: set[str] = set()
    stack = list(roots)
    out: list[Instruction] = []
    while stack:
        name = stack.pop()
        if name in seen or name not in module.computations:
            continue
        seen.add(name)
        for inst in module.computations[name]:
            out.append(inst)
            if inst.opcode in ("while", "conditional", "call"):
                stack.extend(inst.called)
    return out


@dataclasses.dataclass(frozen=True)
class Audit:
    """The audit of one compiled program."""

    data_dependent_loops: tuple[str, ...]  # op names of whiles without a known trip count
    host_ops: tuple[str, ...]  # "opcode target @ op name" of host traffic
    step_conditionals: tuple[str, ...]  # op names of conditionals in the env-step loop body
    env_step_loops: int  # whiles traced under ENV_STEP_SCOPE
    per_env_step: Launches  # one iteration of the env-step loop
    per_update: Launches  # the whole program divided by its updates
    temp_bytes: int | None  # the compiled program's scratch memory (memory_analysis)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("per_env_step", "per_update"):
            out[key]["total"] = getattr(self, key).total
        return out


def _host_op(inst: Instruction) -> bool:
    if inst.opcode in HOST_OPCODES:
        return True
    return inst.opcode == "custom-call" and "callback" in (inst.target or "").lower()


def audit_module(module: HloModule, updates: int, temp_bytes: int | None = None) -> Audit:
    """Audit a parsed module whose entry runs ``updates`` PPO updates."""
    everything = reachable(module, [module.entry])
    loops = [i for i in everything if i.opcode == "while"]
    step_loops = [i for i in loops if i.op_name.endswith(f"{ENV_STEP_SCOPE}/while")]
    bodies = [c for i in step_loops for c in i.called]
    step_body = reachable(module, bodies)
    # XLA may clone a loop (e.g. into both branches of a conditional): the clones are the same
    # loop, so the per-step figure is the costliest clone's.
    per_step = max(
        (sum((launches(module, c) for c in i.called), Launches()) for i in step_loops),
        key=lambda b: b.total,
        default=Launches(),
    )
    total = launches(module, module.entry)
    per_update = Launches(
        fusions=round(total.fusions / updates),
        other=round(total.other / updates),
        conditionals=round(total.conditionals / updates),
    )
    return Audit(
        data_dependent_loops=tuple(i.op_name or i.name for i in loops if i.trip_count is None),
        host_ops=tuple(
            f"{i.opcode} {i.target or ''} @ {i.op_name}".strip() for i in everything if _host_op(i)
        ),
        step_conditionals=tuple(
            sorted({i.op_name or i.name for i in step_body if i.opcode == "conditional"})
        ),
        env_step_loops=len(step_loops),
        per_env_step=per_step,
        per_update=per_update,
        temp_bytes=temp_bytes,
    )


def audit_compiled(compiled: Any, updates: int) -> Audit:
    """Audit a ``jax.stages.Compiled`` whose call runs ``updates`` PPO updates."""
    memory = compiled.memory_analysis()
    temp = None if memory is None else int(memory.temp_size_in_bytes)
    return audit_module(parse_hlo(compiled.as_text()), updates, temp)


# XLA compile options that skip LLVM's optimisation of the CPU code: the HLO is the same, the
# floats may differ in the last bit (e.g. where a multiply-add is fused). For programs whose HLO,
# shapes or structure are read and not their numbers: this audit (it reads the HLO and the
# buffer assignment, both before LLVM; cartpole_gru compiles in 9.7 s instead of 14.6 s) and the
# env contract test (tests/test_envs.py). Tests that compare numbers compile as users do.
UNOPTIMIZED_CODEGEN = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
}


def compile_for_audit(lowered: Any) -> Any:
    """``lowered.compile()``, for reading its HLO: without LLVM optimisation on the CPU."""
    import jax

    if jax.default_backend() == "cpu":
        return lowered.compile(UNOPTIMIZED_CODEGEN)
    return lowered.compile()


# ---- the audited workloads --------------------------------------------------------------------

# Small shapes: the structure of the program does not depend on the batch, and a CI machine
# compiles these in seconds. ``train.updates_per_chunk=2`` keeps the chunk's scan a loop.
SMALL = ("env.num_envs=4", "ppo.num_steps=8", "train.updates_per_chunk=2")
RECURRENT = (
    "network.core=gru",
    "network.core_size=16",
    "network.hidden_sizes=[16]",
    "network.shared_torso=true",
    "ppo.sequence_length=4",
)
WORKLOADS: dict[str, tuple[str, tuple[str, ...]]] = {
    "cartpole_ff": ("configs/cartpole.yaml", SMALL),
    "cartpole_gru": ("configs/cartpole.yaml", SMALL + RECURRENT),
    "soccer_league": (
        "configs/soccer_selfplay.yaml",
        (
            "env.num_envs=8",
            "ppo.num_steps=4",
            "ppo.num_minibatches=2",
            "train.updates_per_chunk=2",
            "network.hidden_sizes=[16]",
        ),
    ),
    # Not in CI (tests/test_hlo_audit.py): the arena's compile takes minutes on a 2-core CPU.
    "metta_arena": (
        "configs/metta_arena_gpu.yaml",
        (
            "env.num_envs=8",
            "ppo.num_minibatches=1",
            "train.updates_per_chunk=2",
            "network.hidden_sizes=[16]",
            "network.core_size=16",
        ),
    ),
}
CI_WORKLOADS = ("cartpole_ff", "cartpole_gru", "soccer_league")  # the three


def lower_workload(name: str, platform: str = "gpu") -> tuple[Any, int]:
    """The lowered train chunk of workload ``name`` traced as for ``platform``; its updates."""
    from jaxrl.config import load_config
    from jaxrl.core.permutation import target_platform
    from jaxrl.run.setup import make_setup
    from jaxrl.run.train_step import init_run, make_train_step

    path, overrides = WORKLOADS[name]
    config = load_config(str(REPO / path), list(overrides))
    setup = make_setup(config)
    runner = init_run(setup)
    with target_platform(platform):
        lowered = make_train_step(setup).lower(runner)
    return lowered, config.chunk_updates


def compile_workload(name: str, platform: str = "gpu") -> tuple[Any, int]:
    """:func:`lower_workload`, compiled for the audit (:func:`compile_for_audit`)."""
    lowered, updates = lower_workload(name, platform)
    return compile_for_audit(lowered), updates


def audit_workload(name: str, platform: str = "gpu") -> Audit:
    """Compile and audit one of :data:`WORKLOADS`."""
    compiled, updates = compile_workload(name, platform)
    return audit_compiled(compiled, updates)


def report(audits: dict[str, Audit], out: Callable[[str], Any] = print) -> None:
    """A table of the audits, for a terminal or ``docs/results/log.md``."""
    out(
        "| workload | data-dependent loops | host ops | conditionals per env step "
        "| kernels per env step (fusions + other) | kernels per update (fusions + other "
        "+ conditionals) | temp MiB |"
    )
    out("|---|---|---|---|---|---|---|")
    for name, a in audits.items():
        step, upd = a.per_env_step, a.per_update
        temp = "n/a" if a.temp_bytes is None else f"{a.temp_bytes / 2**20:.2f}"
        out(
            f"| {name} | {len(a.data_dependent_loops)} | {len(a.host_ops)} "
            f"| {len(a.step_conditionals)} | {step.fusions} + {step.other} "
            f"| {upd.fusions} + {upd.other} + {upd.conditionals} | {temp} |"
        )
    for name, a in audits.items():
        for what, items in (
            ("data-dependent loop", a.data_dependent_loops),
            ("host op", a.host_ops),
            ("env-step conditional", a.step_conditionals),
        ):
            for item in items:
                out(f"  {name}: {what}: {item}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hlo_audit", description=__doc__)
    parser.add_argument("--workloads", default=",".join(CI_WORKLOADS), help=f"of {list(WORKLOADS)}")
    parser.add_argument("--platform", default="gpu", choices=("cpu", "gpu", "tpu"))
    parser.add_argument("--json", type=Path, help="write the audits here")
    args = parser.parse_args(argv)
    names = [n for n in args.workloads.split(",") if n]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        print(f"unknown workload {unknown[0]!r}; known: {', '.join(WORKLOADS)}", file=sys.stderr)
        return 2
    audits = {name: audit_workload(name, args.platform) for name in names}
    report(audits)
    if args.json:
        args.json.write_text(json.dumps({n: a.to_json() for n, a in audits.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
