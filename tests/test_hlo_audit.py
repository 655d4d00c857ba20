"""The compiled train chunk as a GPU would run it: no data-dependent loops, no host traffic, and
a bounded number of conditionals per env step (``bench.hlo_audit``, read from the CPU's HLO)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from bench.hlo_audit import (
    CI_WORKLOADS,
    audit_compiled,
    audit_workload,
    compile_for_audit,
    lower_workload,
    parse_hlo,
    parse_instruction,
    reachable,
)
from jaxrl.core.permutation import target_platform
from jaxrl.core.rollout import ENV_STEP_SCOPE, TRUNCATION_SCOPE
from jaxrl.envs.grid import env as arena

# The conditionals an env step may run, each with what it is for. Anything else in the env-step
# loop body fails the test: a per-step conditional is a branch-selection kernel on a GPU and
# splits the kernel stream, so it needs a reason.
ALLOWED_STEP_CONDITIONALS = {
    # rollout.transition_of: the value of the pre-reset observation, needed only at a time limit;
    # skipped when no env truncated this step (most steps at a few envs).
    TRUNCATION_SCOPE: 1,
}


@pytest.fixture(scope="module")
def audits():
    return {name: audit_workload(name) for name in CI_WORKLOADS}


@pytest.mark.parametrize("name", CI_WORKLOADS)
def test_no_data_dependent_loop_or_host_traffic(audits, name):
    audit = audits[name]
    assert audit.data_dependent_loops == ()
    assert audit.host_ops == ()


@pytest.mark.parametrize("name", CI_WORKLOADS)
def test_env_step_conditionals_are_the_allowed_ones(audits, name):
    audit = audits[name]
    assert audit.env_step_loops >= 1, "the rollout's env-step loop was not found in the HLO"
    for scope, most in ALLOWED_STEP_CONDITIONALS.items():
        assert sum(scope in op for op in audit.step_conditionals) <= most
    unexplained = [
        op for op in audit.step_conditionals if not any(s in op for s in ALLOWED_STEP_CONDITIONALS)
    ]
    assert unexplained == []


@pytest.mark.parametrize("name", CI_WORKLOADS)
def test_launch_counts_are_counted(audits, name):
    # Printed by python -m bench.hlo_audit and recorded in docs/results/log.md, not bounded here;
    # this only checks that the counter found the work.
    audit = audits[name]
    assert audit.per_env_step.fusions > 0
    assert audit.per_update.total > audit.per_env_step.total


def test_metta_arena_turns_are_loops_of_static_trip_count():
    # The arena's agents take their turns in loops over all agents (envs/grid/rules.py
    # _in_turns). Loops over only the agents in conflict had data-dependent trip counts, which
    # a GPU reads back to the host every iteration (figures:
    # docs/results/log.md#hlo-audit-cpu-python-m-benchhlo_audit). The structure does not
    # depend on the arena's size, so a 3-agent room stands in for the 24-agent arena, whose
    # train chunk (python -m bench.hlo_audit --workloads metta_arena) takes minutes to compile.
    spec = arena.GridSpec(
        room_rows=1,
        room_cols=1,
        room_size=7,
        agents_per_room=3,
        walls=2,
        mines=1,
        generators=1,
        altars=1,
        laseries=1,
        armories=1,
    )
    env = arena.MettaArena(spec)
    params = env.default_params
    keys = jax.random.split(jax.random.key(0), 2)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    action = jnp.zeros((2, env.num_agents), jnp.int32)
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    with target_platform("gpu"):
        compiled = compile_for_audit(step.lower(keys, state, action, params))
    audit = audit_compiled(compiled, updates=1)
    assert audit.data_dependent_loops == ()
    assert audit.host_ops == ()
    module = parse_hlo(compiled.as_text())
    trips = [i.trip_count for i in reachable(module, [module.entry]) if i.opcode == "while"]
    assert trips.count(env.num_agents) >= 2, trips  # the attacks' turns, then the others'


def test_cpu_shuffle_is_the_loop_the_gpu_program_avoids():
    # The same program traced for the CPU shuffles minibatches by cycle walking, a loop of
    # data-dependent trip count: the audit must see it (and so would see one added elsewhere).
    lowered, updates = lower_workload("cartpole_ff", platform="cpu")
    compiled = compile_for_audit(lowered)
    audit = audit_compiled(compiled, updates)
    assert len(audit.data_dependent_loops) >= 1
    # The audit's compile skips LLVM's optimisation only: a train chunk's HLO is the same.
    assert compiled.as_text() == lowered.compile().as_text()


def test_audit_flags_a_while_loop_a_callback_and_a_step_conditional():
    def step(carry, x):
        carry = jax.lax.cond(x > 0, lambda c: c + x, lambda c: c * 2.0, carry)
        return carry, carry

    def program(x):
        with jax.named_scope(ENV_STEP_SCOPE):
            total, _ = jax.lax.scan(step, 0.0, x)
        total = jax.lax.while_loop(lambda t: t < 100.0, lambda t: t * 2.0 + 1.0, total)
        jax.debug.callback(lambda t: None, total)
        return total

    lowered = jax.jit(program).lower(jnp.arange(5.0))
    compiled = compile_for_audit(lowered)
    # The audit's compile skips LLVM's optimisation only: the HLO it reads is the same.
    assert compiled.as_text() == lowered.compile().as_text()
    audit = audit_compiled(compiled, updates=1)
    assert len(audit.data_dependent_loops) == 1
    assert len(audit.host_ops) == 1
    assert len(audit.step_conditionals) == 1
    assert audit.env_step_loops == 1


def test_parse_instruction_reads_tuple_types_and_attributes():
    line = (
        "  %while.1 = (s32[], f32[2,3]{1,0}, /*index=2*/pred[]) while(%tuple.1), "
        'condition=%cond.2, body=%body.3, metadata={op_name="jit(f)/env_steps/while"}, '
        'backend_config={"known_trip_count":{"n":"128"}}'
    )
    inst = parse_instruction(line)
    assert inst.opcode == "while"
    assert set(inst.called) == {"cond.2", "body.3"}
    assert inst.trip_count == 128
    assert inst.op_name == "jit(f)/env_steps/while"
    branch = parse_instruction(
        "  %c = f32[] conditional(%p, %a, %b), branch_computations={%x.1, %y.2}"
    )
    assert branch.opcode == "conditional" and branch.called == ("x.1", "y.2")
