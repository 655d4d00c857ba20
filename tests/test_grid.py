"""MettaArena (envs/grid): contract, converter timing, caps, combat, movement, obs, rewards.

Hand-built worlds on a tiny arena (one 7 x 7 room, 2 agents, one converter of each kind) are
stepped through the env's own jitted ``step_env``; expected values follow MettaGrid's rules
(``cpp/include/mettagrid`` at e2c1acd9).
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bench.hlo_audit import parse_hlo
from jaxrl import envs
from jaxrl.core import prng
from jaxrl.envs.grid import env as arena
from jaxrl.envs.grid import reference as grid_reference
from jaxrl.envs.grid import rules as grid_rules

SPEC = arena.GridSpec(
    room_rows=1,
    room_cols=1,
    room_size=7,
    agents_per_room=2,
    walls=2,
    mines=1,
    generators=1,
    altars=1,
    laseries=1,
    armories=1,
)
ENV = arena.MettaArena(SPEC)
P = arena.PAD  # floor cell (0, 0) is grid cell (P, P)
NOOP, UP, DOWN, LEFT, RIGHT, GET, PUT = 0, 1, 2, 3, 4, 5, 6
ATTACK0 = 7
ORE, BATTERY, HEART, ARMOR, LASER = (
    grid_rules.ORE,
    grid_rules.BATTERY,
    grid_rules.HEART,
    grid_rules.ARMOR,
    grid_rules.LASER,
)


@pytest.fixture(scope="module")
def step_fn():
    """``(key, state, action, params) -> (obs, state, reward, terminated, info)``, jitted."""
    return jax.jit(ENV.step_env)


def build(agents, converters=(), walls=(), time=0):
    """A hand-built state: ``agents`` = [(floor (r, c), orientation, {res: n})] (2 of them),
    ``converters`` = [(kind, floor (r, c))] for converter slots 0.. (others parked idle),
    ``walls`` = [floor (r, c)]."""
    grid = arena._floor_grid(SPEC).copy()
    m = SPEC.num_converters
    kinds = np.array(SPEC.kinds_per_room)
    for r, c in walls:
        grid[P + r, P + c] = grid_rules.WALL
    for j, (kind, (r, c)) in enumerate(converters):
        kinds[j] = kind
        grid[P + r, P + c] = grid_rules.CONVERTER0 + j
    pos, ori, inv = [], [], []
    for i, ((r, c), o, items) in enumerate(agents):
        grid[P + r, P + c] = grid_rules.CONVERTER0 + m + i
        pos.append((P + r, P + c))
        ori.append(o)
        row = np.zeros(grid_rules.NUM_RESOURCES, np.int32)
        for res, n in items.items():
            row[res] = n
        inv.append(row)
    a = len(agents)
    world = grid_rules.World(
        grid=jnp.asarray(grid),
        agent_pos=jnp.asarray(pos, jnp.int32),
        agent_ori=jnp.asarray(ori, jnp.int32),
        agent_inv=jnp.asarray(np.stack(inv)),
        frozen=jnp.zeros(a, jnp.int32),
        hearts=jnp.zeros(a, jnp.int32),
        conv_kind=jnp.asarray(kinds, jnp.int32),
        conv_inv=jnp.zeros((m, grid_rules.NUM_RESOURCES), jnp.int32),
        conv_phase=jnp.zeros(m, jnp.int32),
        conv_end=jnp.zeros(m, jnp.int32),
    )
    return arena.EnvState(
        world=world,
        time=jnp.asarray(time, jnp.int32),
        last_action=jnp.zeros(a, jnp.int32),
        last_reward=jnp.zeros(a, jnp.float32),
    )


def run(step_fn, state, actions, params=None, seed=0):
    """Step ``state`` through ``actions`` [(a0, a1)]; returns (states, rewards) lists."""
    params = ENV.default_params if params is None else params
    states, rewards = [], []
    for t, action in enumerate(actions):
        key = jax.random.key(seed * 1000 + t)
        _, state, reward, _, _ = step_fn(key, state, jnp.asarray(action, jnp.int32), params)
        states.append(state)
        rewards.append(np.asarray(reward))
    return states, rewards


# ----------------------------------------------------------------------------- contract


def test_registered_contract_and_no_retrace():
    env, params = envs.make("MettaArena")
    assert env.num_agents == 24 and not hasattr(env, "num_teams")
    obs, state = jax.jit(env.reset)(jax.random.key(0), params)
    assert obs.shape == (24, 11, 11, arena.NUM_FEATURES) and obs.dtype == jnp.uint8
    assert env.observation_space(params).shape == obs.shape
    assert env.action_space(params).n == grid_rules.NUM_ACTIONS == 16
    # Every agent and converter stands on its own floor cell of its own room.
    world = state.world
    codes = np.asarray(world.grid)
    m = env.spec.num_converters
    assert (codes >= grid_rules.CONVERTER0).sum() == m + 24 and (
        codes == grid_rules.WALL
    ).sum() == (codes.size - 50 * 50 + 40)
    room = (np.asarray(world.agent_pos) - P) // 25
    np.testing.assert_array_equal(room[:, 0] * 2 + room[:, 1], np.repeat(np.arange(4), 6))

    small = arena.MettaArena(SPEC)
    p3 = small.default_params.replace(max_steps_in_episode=3)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(key, state, action, params):
        return small.step(key, state, action, params)

    _, s = small.reset(jax.random.key(1), p3)
    for t in range(7):
        shaped = p3.replace(reward_mode="shaped") if t % 2 else p3
        obs, s, reward, terminated, truncated, info = step(
            jax.random.key(t), s, jnp.full(2, t % 16, jnp.int32), shaped
        )
        assert reward.shape == (2,) and reward.dtype == jnp.float32
        assert info["agent_mask"].shape == (2,) and bool(info["agent_mask"].all())
        assert not bool(terminated)
        assert bool(truncated) == (t % 3 == 2)
        assert int(s.time) == (t + 1) % 3
        assert info["final_observation"].shape == obs.shape == (2, 11, 11, arena.NUM_FEATURES)
    assert float(info["episode_outcome"]["hearts"]) == 0.0


def test_step_hashes_its_random_bits_once():
    """With :mod:`jaxrl.core.prng` installed (every training run installs it) the step's random
    bits are hashed in one kernel (``env.materialize``), not copied into each kernel that
    reads them: with 19 copies, LLVM's loop vectorizer once took over ten minutes on the
    arena's step. Counted in the optimized HLO, compiled with LLVM's expensive passes off so
    that a regression fails here in seconds instead of stalling the compile."""
    prng.install()  # process-wide and the same bits (tests/test_prng.py): as make_setup does
    keys = jax.random.split(jax.random.key(0), 2)
    _, state = jax.vmap(ENV.reset, in_axes=(0, None))(keys, ENV.default_params)
    action = jnp.zeros((2, ENV.num_agents), jnp.int32)
    step = jax.jit(jax.vmap(ENV.step, in_axes=(0, 0, 0, None)))
    compiled = step.lower(keys, state, action, ENV.default_params).compile(
        compiler_options={"xla_llvm_disable_expensive_passes": True}
    )
    module = parse_hlo(compiled.as_text())
    fusions = [i for body in module.computations.values() for i in body if i.opcode == "fusion"]
    # Threefry-2x32 has 20 rounds of one xor each: a kernel with 20 xors holds a whole hash.
    xors = [sum(i.opcode == "xor" for i in module.computations[f.called[0]]) for f in fusions]
    holding = sum(n >= 20 for n in xors)
    assert 1 <= holding <= 2, f"{holding} kernels each hash the step's bits (1 with materialize)"


def test_materialize_keeps_the_bits():
    bits = jax.random.bits(jax.random.key(3), (32,), jnp.uint32)
    np.testing.assert_array_equal(jax.jit(arena.materialize)(bits), bits)


def test_reset_layouts_differ_by_seed():
    a = arena.draw_world(jax.random.key(0), arena.GridSpec(), arena.make_rules(arena.EnvParams()))
    b = arena.draw_world(jax.random.key(1), arena.GridSpec(), arena.make_rules(arena.EnvParams()))
    assert not np.array_equal(np.asarray(a.grid), np.asarray(b.grid))


def test_reward_mode_names():
    assert int(arena.EnvParams(reward_mode="shaped").reward_mode) == arena.SHAPED
    with pytest.raises(ValueError):
        arena.EnvParams(reward_mode="gold")


# ----------------------------------------------------------------------------- converters


def test_mine_produces_after_one_tick_then_every_cooldown_plus_one(step_fn):
    # draw_world starts the mines at t = 0: ore at step 1, cooldown 50, next ore at step 52.
    state = build(
        [((6, 0), grid_rules.UP, {}), ((6, 6), grid_rules.UP, {})], [(grid_rules.MINE, (0, 0))]
    )
    world = grid_rules.start_converters(
        state.world,
        jnp.zeros((), jnp.int32),
        arena.make_rules(arena.EnvParams()),
        jnp.ones(5, bool),
    )
    state = state.replace(world=world)
    assert int(state.world.conv_phase[0]) == grid_rules.CONVERTING
    states, _ = run(step_fn, state, [(NOOP, NOOP)] * 105)
    ore = np.array([int(s.world.conv_inv[0, ORE]) for s in states])  # after steps 1..105
    assert ore[0] == 1 and (ore[:51] == 1).all() and ore[51] == 2 and ore[102] == 3
    assert int(states[0].world.conv_phase[0]) == grid_rules.COOLING
    # Other converters without inputs never start.
    assert (np.asarray(states[-1].world.conv_inv[1:]) == 0).all()


def test_mine_stops_at_max_output_and_restarts_when_emptied(step_fn):
    state = build(
        [((1, 0), grid_rules.UP, {}), ((6, 6), grid_rules.UP, {})], [(grid_rules.MINE, (0, 0))]
    )
    world = state.world.replace(conv_inv=state.world.conv_inv.at[0, ORE].set(5))
    world = grid_rules.start_converters(
        world, jnp.zeros((), jnp.int32), arena.make_rules(arena.EnvParams()), jnp.ones(5, bool)
    )
    assert int(world.conv_phase[0]) == grid_rules.IDLE  # full: blocked
    states, _ = run(step_fn, state.replace(world=world), [(GET, NOOP), (NOOP, NOOP)])
    assert int(states[0].world.agent_inv[0, ORE]) == 5
    assert int(states[0].world.conv_phase[0]) == grid_rules.CONVERTING  # started by the get
    assert int(states[1].world.conv_inv[0, ORE]) == 1  # one tick later


def test_altar_converts_three_batteries_then_cools_down(step_fn):
    # Agent 0 faces the altar (up) holding 6 batteries.
    state = build(
        [((1, 0), grid_rules.UP, {BATTERY: 6}), ((6, 6), grid_rules.UP, {})],
        [(grid_rules.ALTAR, (0, 0))],
    )
    actions = [(PUT, NOOP), (NOOP, NOOP), (GET, NOOP), (PUT, NOOP)] + [(NOOP, NOOP)] * 12
    states, rewards = run(step_fn, state, actions)
    # Step 1: 3 batteries in, conversion starts; step 2: the heart is out, cooldown 10 begins.
    assert int(states[0].world.agent_inv[0, BATTERY]) == 3
    assert int(states[0].world.conv_inv[0, HEART]) == 0
    assert int(states[1].world.conv_inv[0, HEART]) == 1
    assert int(states[2].world.agent_inv[0, HEART]) == 1 and rewards[2][0] == 1.0
    assert int(states[2].world.hearts[0]) == 1
    # Step 4: 3 more batteries wait in the cooling altar; the cooldown ends at step 12, the
    # conversion starts then and the heart appears at step 13.
    assert int(states[3].world.conv_inv[0, BATTERY]) == 3
    hearts = [int(s.world.conv_inv[0, HEART]) for s in states]
    assert hearts[3:12] == [0] * 9 and hearts[12] == 1
    assert int(states[11].world.conv_inv[0, BATTERY]) == 0  # consumed at step 12


def test_shaped_altar_takes_one_battery(step_fn):
    params = ENV.default_params.replace(reward_mode="shaped")
    state = build(
        [((1, 0), grid_rules.UP, {BATTERY: 2}), ((6, 6), grid_rules.UP, {})],
        [(grid_rules.ALTAR, (0, 0))],
    )
    states, rewards = run(step_fn, state, [(PUT, NOOP), (NOOP, NOOP), (GET, NOOP)], params)
    assert int(states[0].world.agent_inv[0, BATTERY]) == 1
    assert rewards[0][0] == pytest.approx(-0.2)  # min(0.8 * 2, 1) -> 0.8
    assert rewards[2][0] == pytest.approx(1.0) and rewards[2][1] == 0.0


# ----------------------------------------------------------------------------- caps


def test_inventory_caps(step_fn):
    # 48 ore + a mine holding 5: the agent takes 2 (cap 50), the mine keeps 3.
    state = build(
        [((1, 0), grid_rules.UP, {ORE: 48}), ((6, 6), grid_rules.UP, {})],
        [(grid_rules.MINE, (0, 0))],
    )
    world = state.world.replace(
        conv_inv=state.world.conv_inv.at[0, ORE].set(5),
        conv_phase=state.world.conv_phase.at[0].set(grid_rules.COOLING),
        conv_end=state.world.conv_end.at[0].set(100),
    )
    states, _ = run(step_fn, state.replace(world=world), [(GET, NOOP)])
    assert int(states[0].world.agent_inv[0, ORE]) == 50
    assert int(states[0].world.conv_inv[0, ORE]) == 3
    # A put gives at most the recipe's amount: 1 ore into a generator.
    state = build(
        [((1, 0), grid_rules.UP, {ORE: 4}), ((6, 6), grid_rules.UP, {})],
        [(grid_rules.GENERATOR, (0, 0))],
    )
    states, _ = run(step_fn, state, [(PUT, NOOP), (NOOP, NOOP)])
    assert int(states[0].world.agent_inv[0, ORE]) == 3
    assert int(states[1].world.conv_inv[0, BATTERY]) == 1


# ----------------------------------------------------------------------------- combat


def test_attack_spends_laser_freezes_ten_actions_and_steals(step_fn):
    # Agent 0 at (4, 2) faces up; agent 1 two cells ahead at (2, 2) holds ore and a heart.
    items = {ORE: 3, HEART: 2}
    state = build([((4, 2), grid_rules.UP, {LASER: 2}), ((2, 2), grid_rules.DOWN, items)])
    states, rewards = run(step_fn, state, [(ATTACK0, LEFT)] + [(NOOP, LEFT)] * 10)
    hit = states[0].world
    assert int(hit.agent_inv[0, LASER]) == 1
    assert int(hit.agent_inv[0, ORE]) == 3 and int(hit.agent_inv[0, HEART]) == 2
    assert (np.asarray(hit.agent_inv[1]) == 0).all()
    assert rewards[0].tolist() == [2.0, -2.0]  # hearts mode: hearts change hands
    # The attack resolves before agent 1's move, which is the first of 10 lost actions.
    cols = [int(s.world.agent_pos[1, 1]) - P for s in states]
    assert cols[:10] == [2] * 10 and cols[10] == 1
    assert [int(s.world.frozen[1]) for s in states[:10]] == list(range(9, -1, -1))


def test_armor_blocks_and_no_target_keeps_laser(step_fn):
    state = build(
        [((4, 2), grid_rules.UP, {LASER: 2}), ((3, 2), grid_rules.DOWN, {ARMOR: 1, ORE: 5})]
    )
    states, _ = run(step_fn, state, [(ATTACK0, NOOP), (ATTACK0, NOOP)])
    first = states[0].world
    assert int(first.agent_inv[0, LASER]) == 1 and int(first.agent_inv[1, ARMOR]) == 0
    assert int(first.frozen[1]) == 0 and int(first.agent_inv[1, ORE]) == 5
    second = states[1].world  # no armor left: frozen and robbed
    assert int(second.frozen[1]) == 9 and int(second.agent_inv[0, ORE]) == 5
    # Nobody in the cone: the laser is kept.
    state = build([((4, 2), grid_rules.UP, {LASER: 1}), ((4, 4), grid_rules.DOWN, {})])
    states, _ = run(step_fn, state, [(ATTACK0 + 3, NOOP)])
    assert int(states[0].world.agent_inv[0, LASER]) == 1


def test_attack_argument_picks_in_scan_order():
    # Cone cells facing up from (5, 3): (4,3) (4,2) (4,4) (3,3) (3,2) (3,4) (2,3) (2,2) (2,4).
    spec = dataclasses.replace(
        SPEC, agents_per_room=3, walls=0, mines=0, generators=0, altars=0, laseries=0, armories=0
    )
    grid = arena._floor_grid(spec).copy()
    pos = [(5, 3), (3, 4), (4, 2)]  # agent 1 is 6th in scan order, agent 2 is 2nd
    for i, (r, c) in enumerate(pos):
        grid[P + r, P + c] = grid_rules.CONVERTER0 + i
    world = grid_rules.World(
        grid=jnp.asarray(grid),
        agent_pos=jnp.asarray(pos, jnp.int32) + P,
        agent_ori=jnp.zeros(3, jnp.int32),
        agent_inv=jnp.zeros((3, 5), jnp.int32).at[0, LASER].set(5),
        frozen=jnp.zeros(3, jnp.int32),
        hearts=jnp.zeros(3, jnp.int32),
        conv_kind=jnp.zeros(0, jnp.int32),
        conv_inv=jnp.zeros((0, 5), jnp.int32),
        conv_phase=jnp.zeros(0, jnp.int32),
        conv_end=jnp.zeros(0, jnp.int32),
    )
    rules = arena.make_rules(arena.EnvParams())
    for arg, target in ((0, 2), (1, 1), (8, 1)):  # past the last agent: the last one
        out = grid_reference.attack(world, jnp.int32(0), jnp.int32(arg), jnp.bool_(True), rules)
        assert np.flatnonzero(np.asarray(out.frozen)).tolist() == [target]


# ----------------------------------------------------------------------------- movement


def test_movement_blocked_by_walls_agents_and_converters(step_fn):
    state = build(
        [((3, 3), grid_rules.UP, {}), ((3, 4), grid_rules.UP, {})],
        [(grid_rules.MINE, (4, 3))],
        walls=[(2, 3)],
    )
    states, _ = run(step_fn, state, [(UP, NOOP), (RIGHT, NOOP), (DOWN, NOOP), (LEFT, NOOP)])
    pos = [tuple(np.asarray(s.world.agent_pos[0]) - P) for s in states]
    ori = [int(s.world.agent_ori[0]) for s in states]
    assert pos[:3] == [(3, 3)] * 3 and pos[3] == (3, 2)
    assert ori == [
        grid_rules.UP,
        grid_rules.RIGHT,
        grid_rules.DOWN,
        grid_rules.LEFT,
    ]  # turned even when blocked
    # The floor edge is wall; grid codes follow the agent.
    state = build([((0, 0), grid_rules.UP, {}), ((6, 6), grid_rules.UP, {})])
    states, _ = run(step_fn, state, [(UP, DOWN), (LEFT, RIGHT), (NOOP, UP), (NOOP, LEFT)])
    np.testing.assert_array_equal(np.asarray(states[-1].world.agent_pos), [[P, P], [P + 5, P + 5]])
    grid = np.asarray(states[-1].world.grid)
    assert grid[P + 5, P + 5] == grid_rules.CONVERTER0 + 5 + 1
    assert grid[P + 6, P + 6] == grid[P + 5, P + 6] == grid_rules.EMPTY


# ----------------------------------------------------------------------------- turn order

CROWD = dataclasses.replace(
    SPEC, room_size=6, agents_per_room=12, walls=1, mines=3, generators=2, altars=2
)


def crowded_world(key):
    """A 6 x 6 room holding 12 agents and 9 converters, with random inventories, freeze
    counters, orientations and converter states: conflicts on most steps."""
    keys = jax.random.split(key, 7)
    rules = arena.make_rules(arena.EnvParams())
    world = arena.draw_world(keys[0], CROWD, rules)
    a, m = CROWD.num_agents, CROWD.num_converters
    return world.replace(
        agent_ori=jax.random.randint(keys[1], (a,), 0, 4),
        agent_inv=jax.random.randint(keys[2], (a, grid_rules.NUM_RESOURCES), 0, 3),
        frozen=jnp.where(jax.random.bernoulli(keys[3], 0.25, (a,)), 1 + (a % 3), 0),
        conv_inv=jax.random.randint(keys[4], (m, grid_rules.NUM_RESOURCES), 0, 6),
        conv_phase=jax.random.randint(keys[5], (m,), 0, 3),
        conv_end=jax.random.randint(keys[6], (m,), 3, 9),
    )


def test_resolve_equals_one_turn_after_another():
    """The conflict-only turns of ``resolve`` give MettaGrid's one-agent-after-another result
    on crowded worlds where attacks, chained moves and shared converters meet every step."""
    rules = arena.make_rules(arena.EnvParams())
    t = jnp.int32(3)

    def both(key):
        k_world, k_action, k_order = jax.random.split(key, 3)
        world = crowded_world(k_world)
        # Gets and puts weighted up so that agents often share a converter.
        weight = np.ones(grid_rules.NUM_ACTIONS)
        weight[[GET, PUT]] = 6.0
        action = jax.random.choice(
            k_action, grid_rules.NUM_ACTIONS, (CROWD.num_agents,), p=weight / weight.sum()
        )
        priority = grid_rules.turn_priority(
            jax.random.bits(k_order, (CROWD.num_agents,), jnp.uint32)
        )
        fast = grid_rules.resolve(world, action, priority, t, rules)
        slow = grid_reference.resolve_in_turns(world, action, priority, t, rules)
        return world, fast, slow

    world, fast, slow = jax.jit(jax.vmap(both))(jax.random.split(jax.random.key(0), 512))
    for name in grid_rules.World.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name), err_msg=name)
    # The worlds did exercise the rules: moves, hits, trades.
    assert np.asarray(fast.agent_pos != world.agent_pos).any(-1).mean() > 0.02
    assert (np.asarray(fast.frozen) >= 9).sum() > 20
    assert (np.asarray(fast.conv_inv) != np.asarray(world.conv_inv)).any(-1).sum() > 50


def _in_turns_while(turn, carry, waiting, priority):
    """The data-dependent loop ``rules._in_turns`` was until issue 18: the reference."""

    def body(loop):
        carry, waiting = loop
        i = jnp.argmin(jnp.where(waiting, priority, np.iinfo(np.int32).max))
        return turn(carry, i), waiting.at[i].set(False)

    return jax.lax.while_loop(lambda loop: jnp.any(loop[1]), body, (carry, waiting))[0]


@pytest.mark.parametrize("num_agents", [1, 24])
def test_turns_of_static_trip_count_match_the_data_dependent_loop(num_agents):
    """``_in_turns`` (a scan over all agents) takes the same turns in the same order as the
    while loop over the waiting agents it replaced, ties of priority included (the lower
    index first), with a turn that reads what the earlier turns wrote; ``me`` is the
    one-hot of the agent whose values ``mine`` holds."""

    def turn(carry, i):
        log, n, acc = carry
        return log.at[n].set(i), n + 1, acc * 31 + i + 7 * (acc % 5)

    def one_hot_turn(carry, me, mine):
        i, tag = mine
        carry = turn(carry, i)
        return carry[0], carry[1], jnp.where(jnp.argmax(me) == i, carry[2], -(10**6) + tag)

    def both(key):
        k_wait, k_prio = jax.random.split(key)
        waiting = jax.random.bernoulli(k_wait, 0.4, (num_agents,))
        priority = jax.random.randint(k_prio, (num_agents,), 0, 4)  # ties on purpose
        carry = (jnp.full(num_agents, -1, jnp.int32), jnp.int32(0), jnp.int32(1))
        agents = jnp.arange(num_agents, dtype=jnp.int32)
        new = grid_rules._in_turns(one_hot_turn, carry, waiting, priority, (agents, agents))
        old = _in_turns_while(turn, carry, waiting, priority)
        return waiting, priority, new, old

    waiting, priority, new, old = jax.jit(jax.vmap(both))(jax.random.split(jax.random.key(0), 500))
    for a, b in zip(new, old, strict=True):
        np.testing.assert_array_equal(a, b)
    # And both are the waiting agents by (priority, index).
    log, count, _ = new
    for row in range(0, 500, 7):
        want = sorted(np.flatnonzero(waiting[row]), key=lambda i: (priority[row][i], i))
        assert int(count[row]) == len(want)
        np.testing.assert_array_equal(log[row][: len(want)], want)
    assert np.asarray(count).max() >= min(num_agents, 3)


def test_chained_moves_follow_the_turn_order(step_fn):
    """Agent 0 steps right into agent 1's cell: it gets there only if agent 1 left first."""
    state = build([((3, 2), grid_rules.UP, {}), ((3, 3), grid_rules.UP, {})])
    action = jnp.asarray([RIGHT, RIGHT], jnp.int32)
    rules = arena.make_rules(arena.EnvParams())
    for priority, want in (([1, 0], [(3, 3), (3, 4)]), ([0, 1], [(3, 2), (3, 4)])):
        world = grid_rules.resolve(
            state.world, action, jnp.asarray(priority, jnp.int32), jnp.int32(1), rules
        )
        np.testing.assert_array_equal(world.agent_pos, np.asarray(want) + P)


def test_turn_priorities_are_distinct_and_drawn_from_the_key():
    keys = jax.random.split(jax.random.key(1), 2000)
    draw = jax.vmap(lambda k: grid_rules.turn_priority(jax.random.bits(k, (24,), jnp.uint32)))
    prio = np.asarray(draw(keys))
    assert all(len(set(row)) == 24 for row in prio)
    np.testing.assert_array_equal(prio, draw(keys))
    # Every agent goes first about equally often (uniform order).
    first = np.bincount(prio.argmin(1), minlength=24) / len(prio)
    assert np.abs(first - 1 / 24).max() < 0.025


# ----------------------------------------------------------------------------- observation


def test_observation_of_a_hand_built_state():
    state = build(
        [((3, 3), grid_rules.LEFT, {ORE: 2, LASER: 1}), ((3, 5), grid_rules.DOWN, {HEART: 7})],
        [(grid_rules.ALTAR, (1, 3))],
        walls=[(3, 2)],
        time=250,
    )
    world = state.world.replace(
        conv_inv=state.world.conv_inv.at[0, BATTERY].set(2),
        conv_phase=state.world.conv_phase.at[0].set(grid_rules.COOLING),
        frozen=state.world.frozen.at[1].set(4),
    )
    state = state.replace(
        world=world,
        last_action=jnp.asarray([ATTACK0 + 4, UP], jnp.int32),
        last_reward=jnp.asarray([0.5, 0.0], jnp.float32),
    )
    obs = np.asarray(arena.observe(state, arena.EnvParams())).astype(np.uint8)
    assert obs.shape == (2, 11, 11, arena.NUM_FEATURES)
    me = obs[0]
    c = arena.RADIUS
    expect = np.zeros(arena.NUM_FEATURES, np.uint8)
    expect[arena.F_TYPE + arena.TYPE_AGENT] = 1
    expect[arena.F_ORIENTATION] = grid_rules.LEFT
    expect[arena.F_INVENTORY + ORE], expect[arena.F_INVENTORY + LASER] = 2, 1
    expect[arena.F_GLOBAL :] = [round(255 * 250 / 1000), grid_rules.ATTACK, 4, 50]
    np.testing.assert_array_equal(me[c, c], expect)
    wall = np.zeros(arena.NUM_FEATURES, np.uint8)
    wall[arena.F_TYPE + arena.TYPE_WALL] = 1
    np.testing.assert_array_equal(me[c, c - 1], wall)
    altar = np.zeros(arena.NUM_FEATURES, np.uint8)
    altar[arena.F_TYPE + arena.TYPE_CONVERTER0 + grid_rules.ALTAR] = 1
    altar[arena.F_CONVERTING] = 1
    altar[arena.F_INVENTORY + BATTERY] = 2
    np.testing.assert_array_equal(me[c - 2, c], altar)
    other = np.zeros(arena.NUM_FEATURES, np.uint8)
    other[arena.F_TYPE + arena.TYPE_AGENT] = 1
    other[arena.F_FROZEN] = 1
    other[arena.F_ORIENTATION] = grid_rules.DOWN
    other[arena.F_INVENTORY + HEART] = 7
    np.testing.assert_array_equal(me[c, c + 2], other)  # no globals off-centre
    # Outside the 7 x 7 floor everything is wall; the rest of the floor is empty.
    assert (me[: c - 3, :, arena.F_TYPE + arena.TYPE_WALL] == 1).all()
    assert me[c + 1, c].sum() == 0
    # Agent 1 sees agent 0 two cells to its left.
    np.testing.assert_array_equal(obs[1][c, c - 2, : arena.F_GLOBAL], expect[: arena.F_GLOBAL])


# ----------------------------------------------------------------------------- rewards


def test_per_agent_shaped_rewards(step_fn):
    params = ENV.default_params.replace(reward_mode="shaped")
    state = build(
        [((1, 0), grid_rules.UP, {ORE: 9}), ((1, 6), grid_rules.UP, {})],
        [(grid_rules.MINE, (0, 0)), (grid_rules.MINE, (0, 6))],
    )
    world = state.world.replace(conv_inv=state.world.conv_inv.at[0, ORE].set(3).at[1, ORE].set(1))
    world = world.replace(
        conv_phase=world.conv_phase.at[:2].set(grid_rules.COOLING),
        conv_end=world.conv_end.at[:2].set(100),
    )
    states, rewards = run(step_fn, state.replace(world=world), [(GET, GET), (NOOP, GET)], params)
    # Agent 0: 9 -> 12 ore, reward capped at 1.0 (0.9 before): +0.1; agent 1: 0 -> 1: +0.1.
    np.testing.assert_allclose(rewards[0], [0.1, 0.1], atol=1e-6)
    np.testing.assert_allclose(rewards[1], [0.0, 0.0], atol=1e-6)
    # Hearts mode: ore is worth nothing.
    _, rewards = run(step_fn, state.replace(world=world), [(GET, GET)])
    np.testing.assert_array_equal(rewards[0], [0.0, 0.0])
