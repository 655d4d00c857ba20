"""The MettaGrid arena's rules as pure functions on one env's arrays (no batch axis).

Everything here acts on a :class:`World`, the part of the env state the rules change. The
env (:mod:`jaxrl.envs.grid.env`) draws layouts, orders the agents and builds observations; this
module holds the converters' state machine, the actions and the rewards.

Grid cells hold an int32 *code*: ``EMPTY`` (0), ``WALL`` (1), converter ``j`` as
``CONVERTER0 + j`` and agent ``i`` as ``CONVERTER0 + M + i`` (``M`` converters). Positions
are (row, col) in the padded grid (walls fill the padding, see :mod:`jaxrl.envs.grid.env`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

# ----------------------------------------------------------------------------- constants

# Resources, the last axis of every inventory.
ORE, BATTERY, HEART, ARMOR, LASER = range(5)
RESOURCES = ("ore", "battery", "heart", "armor", "laser")
NUM_RESOURCES = len(RESOURCES)

# Converter kinds, in the order of the recipe tables.
MINE, GENERATOR, ALTAR, LASERY, ARMORY = range(5)
CONVERTER_KINDS = ("mine", "generator", "altar", "lasery", "armory")
NUM_KINDS = len(CONVERTER_KINDS)

# Grid cell codes.
EMPTY, WALL, CONVERTER0 = 0, 1, 2

# Converter phases (MettaGrid's ``converting`` and ``cooling_down`` flags).
IDLE, CONVERTING, COOLING = 0, 1, 2

# Orientations and move arguments, as in MettaGrid: up, down, left, right.
UP, DOWN, LEFT, RIGHT = range(4)
DELTA = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]], np.int32)  # [4, (drow, dcol)]
CLOCKWISE = np.array([RIGHT, LEFT, UP, DOWN], np.int32)  # the direction to the right of each

# Flattened action space: (kind, argument) pairs in one Discrete(16).
NOOP, MOVE, GET, PUT, ATTACK = range(5)
ACTION_KIND = np.array([NOOP] + [MOVE] * 4 + [GET, PUT] + [ATTACK] * 9, np.int32)  # [16]
ACTION_ARG = np.array([0, 0, 1, 2, 3, 0, 0, *range(9)], np.int32)  # [16]
NUM_ACTIONS = len(ACTION_KIND)
ACTION_NAMES = (
    "noop",
    *(f"move_{d}" for d in ("up", "down", "left", "right")),
    "get_items",
    "put_items",
    *(f"attack_{k}" for k in range(9)),
)

# Attack cone: (forward, right) offsets in MettaGrid's scan order (argument k picks the k-th
# agent found in this order, or the last one found when there are fewer than k + 1).
ATTACK_CELLS = np.array(
    [[d, o] for d in (1, 2, 3) for o in (0, -1, 1)], np.int32
)  # [9, (forward, right)]

# Recipes of the classic arena (MettaGrid ``builder/building.py``): [kinds, resources].
RECIPE_IN = np.zeros((NUM_KINDS, NUM_RESOURCES), np.int32)
RECIPE_IN[GENERATOR, ORE] = 1
RECIPE_IN[ALTAR, BATTERY] = 3
RECIPE_IN[LASERY, BATTERY], RECIPE_IN[LASERY, ORE] = 1, 2
RECIPE_IN[ARMORY, ORE] = 3
RECIPE_OUT = np.zeros((NUM_KINDS, NUM_RESOURCES), np.int32)
for _kind, _res in ((MINE, ORE), (GENERATOR, BATTERY), (ALTAR, HEART), (LASERY, LASER)):
    RECIPE_OUT[_kind, _res] = 1
RECIPE_OUT[ARMORY, ARMOR] = 1
COOLDOWN = np.array([50, 25, 10, 10, 10], np.int32)  # [kinds]
INVENTORY_LIMIT = np.array([50, 50, 255, 50, 50], np.int32)  # agent caps [resources]
CONVERTER_LIMIT = 255  # a converter's inventory of any resource (MettaGrid's uint8 amounts)


class Rules(struct.PyTreeNode):
    """The rule constants one step uses, all array leaves (see ``EnvParams.rules``)."""

    recipe_in: jax.Array  # [kinds, resources] int32, consumed when a conversion starts
    recipe_out: jax.Array  # [kinds, resources] int32, added when it finishes
    cooldown: jax.Array  # [kinds] int32, steps of cooldown after each conversion
    conversion_ticks: jax.Array  # () int32, steps from start to output (>= 1)
    max_output: jax.Array  # () int32, no conversion starts with this many outputs held
    inventory_limit: jax.Array  # [resources] int32, agents' caps
    freeze_duration: jax.Array  # () int32, actions a hit agent loses
    reward_weight: jax.Array  # [resources] float32, reward per unit held
    reward_cap: jax.Array  # [resources] float32, cap of each resource's reward


class World(struct.PyTreeNode):
    """The arrays the rules change (``A`` agents, ``M`` converters, padded grid ``[Hp, Wp]``)."""

    grid: jax.Array  # [Hp, Wp] uint8 cell codes (int32 when they do not fit a byte)
    agent_pos: jax.Array  # [A, 2] int32 (row, col)
    agent_ori: jax.Array  # [A] int32 orientation
    agent_inv: jax.Array  # [A, resources] int32
    frozen: jax.Array  # [A] int32 actions still lost to a hit
    hearts: jax.Array  # [A] int32 hearts taken from altars this episode
    conv_kind: jax.Array  # [M] int32 converter kind
    conv_inv: jax.Array  # [M, resources] int32
    conv_phase: jax.Array  # [M] int32 IDLE / CONVERTING / COOLING
    conv_end: jax.Array  # [M] int32 step at which the current phase ends


# ----------------------------------------------------------------------------- converters


def _over_resources(op: Callable[[Any, Any], Any], x: jax.Array) -> jax.Array:
    """``op`` folded over the resource axis (the last, of size 5), as elementwise ops.

    Not a reduction: XLA makes every reduction a kernel of its own, where elementwise ops fuse
    with what reads them (this runs once per agent's turn).
    """
    return functools.reduce(op, [x[..., r] for r in range(x.shape[-1])])


def recipe(kind: jax.Array, rules: Rules) -> tuple[jax.Array, jax.Array]:
    """``(needed [..., resources] int32, makes [..., resources] bool)`` of converter kinds
    ``kind`` [...]: the inputs a conversion consumes, and the resources it outputs."""
    return rules.recipe_in[kind], rules.recipe_out[kind] > 0


def can_start(
    needed: jax.Array, makes: jax.Array, inv: jax.Array, phase: jax.Array, rules: Rules
) -> jax.Array:
    """MettaGrid's ``maybe_start_converting`` test for converters of any batch shape ``[...]``.

    Args:
      needed: [..., resources] int32 their recipes' inputs (:func:`recipe`).
      makes: [..., resources] bool their recipes' outputs.
      inv: [..., resources] int32 inventories.
      phase: [...] int32 phases.
      rules: the rule constants.

    Returns:
      [...] bool, whether a conversion starts (it consumes ``needed``).
    """
    outputs = _over_resources(jnp.add, jnp.where(makes, inv, 0))
    has_inputs = _over_resources(jnp.logical_and, inv >= needed)
    return (phase == IDLE) & (outputs < rules.max_output) & has_inputs


def start_converters(world: World, t: jax.Array, rules: Rules, which: jax.Array) -> World:
    """Start every converter in ``which`` ([M] bool) that can convert at step ``t``."""
    needed, makes = recipe(world.conv_kind, rules)
    start = can_start(needed, makes, world.conv_inv, world.conv_phase, rules) & which
    return world.replace(
        conv_inv=world.conv_inv - jnp.where(start[:, None], needed, 0),
        conv_phase=jnp.where(start, CONVERTING, world.conv_phase),
        conv_end=jnp.where(start, t + rules.conversion_ticks, world.conv_end),
    )


def process_events(world: World, t: jax.Array, rules: Rules) -> World:
    """The converter events due at step ``t`` (MettaGrid processes them before the actions).

    A conversion that ends adds its outputs (up to ``CONVERTER_LIMIT``) and starts the
    cooldown; a cooldown that ends returns the converter to idle, and an idle converter with
    its inputs (and room for output) starts converting, to finish ``conversion_ticks`` later.
    With every delay >= 1 a converter has at most one event per step.
    """
    due = world.conv_end == t
    finished = due & (world.conv_phase == CONVERTING)
    cooled = due & (world.conv_phase == COOLING)
    produced = jnp.where(finished[:, None], rules.recipe_out[world.conv_kind], 0)
    cooldown = rules.cooldown[world.conv_kind]
    world = world.replace(
        conv_inv=jnp.minimum(world.conv_inv + produced, CONVERTER_LIMIT),
        conv_phase=jnp.where(finished, COOLING, jnp.where(cooled, IDLE, world.conv_phase)),
        conv_end=jnp.where(finished, t + cooldown, world.conv_end),
    )
    return start_converters(world, t, rules, cooled)


# ----------------------------------------------------------------------------- actions


def cone_target(world: World, i: jax.Array, arg: jax.Array) -> jax.Array:
    """The agent that agent ``i``'s attack with argument ``arg`` would hit, int32 () or -1.

    Argument ``k`` picks the ``k``-th agent of the 9-cell cone in ``ATTACK_CELLS`` order, or
    the last one found when the cone holds fewer than ``k + 1``; -1 when it holds none.
    """
    num_converters = world.conv_kind.shape[0]
    pos, ori = world.agent_pos[i], world.agent_ori[i]
    forward = jnp.asarray(DELTA)[ori]
    right = jnp.asarray(DELTA)[jnp.asarray(CLOCKWISE)[ori]]
    cone = jnp.asarray(ATTACK_CELLS)
    cells = pos + cone[:, :1] * forward + cone[:, 1:] * right  # [9, 2]
    codes = world.grid[cells[:, 0], cells[:, 1]].astype(jnp.int32)  # [9]
    is_agent = codes >= CONVERTER0 + num_converters
    rank = jnp.cumsum(is_agent) - 1
    exact = is_agent & (rank == arg)
    last = 8 - jnp.argmax(is_agent[::-1])
    pick = jnp.where(jnp.any(exact), jnp.argmax(exact), last)
    return jnp.where(jnp.any(is_agent), codes[pick] - CONVERTER0 - num_converters, -1).astype(
        jnp.int32
    )


def trade(
    agent: jax.Array,
    conv: jax.Array,
    needed: jax.Array,
    makes: jax.Array,
    get: jax.Array,
    put: jax.Array,
    rules: Rules,
) -> tuple[jax.Array, jax.Array]:
    """What a get or a put moves, for agents and converters of any batch shape ``[...]``.

    Args:
      agent: [..., resources] int32 the agents' inventories.
      conv: [..., resources] int32 the inventories of the converters they use.
      needed: [..., resources] int32 those converters' recipe inputs (:func:`recipe`).
      makes: [..., resources] bool their recipe outputs.
      get: [...] bool, takes all of the converter's outputs, up to the agent's caps.
      put: [...] bool, gives per input resource up to the recipe's amount of what it holds.
      rules: the rule constants.

    Returns:
      ``(take, give)`` [..., resources] int32, to the agent and to the converter.
    """
    take = jnp.where(
        get[..., None] & makes,
        jnp.minimum(conv, rules.inventory_limit - agent),
        0,
    )
    give = jnp.where(
        put[..., None],
        jnp.minimum(jnp.minimum(needed, agent), CONVERTER_LIMIT - conv),
        0,
    )
    return take, give


def turn_priority(bits: jax.Array) -> jax.Array:
    """Distinct random turn priorities from random ``bits`` (uint32 [A]): agents take their
    turns from the lowest, int32 [A].

    The high bits are random and the low bits the agent's index, so no two agents tie; the
    order they give is uniform up to ties of the random bits (about one in ``2**25`` pairs
    for 24 agents), which the index breaks.
    """
    num_agents = bits.shape[0]
    shift = max(num_agents - 1, 1).bit_length()
    if shift > 16:
        raise ValueError(f"at most 65536 agents take turns, got {num_agents}")
    high = (bits >> (1 + shift)).astype(jnp.int32) << shift
    return high | jnp.arange(num_agents, dtype=jnp.int32)


def _rows(x: jax.Array, masks: jax.Array) -> jax.Array:
    """The sum of the rows of ``x`` ([K, F] int32) where each of ``masks`` ([R, K] bool) is set.

    For a one-hot mask that is the row it picks (zeros for an empty mask); under a column of
    ones, a count. Returns [R, F] int32. A masked sum, not an indexed read: under ``vmap`` an
    index that differs per env is a gather (and a scatter to write back), each a kernel of
    its own on a GPU, where one reduction reads every row a turn needs.
    """
    return jnp.sum(jnp.where(masks[:, :, None], x[None], 0), axis=1, dtype=x.dtype)


def _in_turns(
    turn: Callable[[Any, jax.Array, Any], Any],
    carry: Any,
    waiting: jax.Array,
    priority: jax.Array,
    mine: Any,
) -> Any:
    """``turn(carry, me, mine[i])`` for every agent ``i`` in ``waiting`` ([A] bool), by priority.

    ``me`` is agent ``i`` as a one-hot bool [A]; ``mine`` a pytree of per-agent values
    (leaves [A, ...]), read in turn order once, before the loop.

    A loop over all ``A`` agents in priority order (a static trip count), where an agent that
    is not waiting keeps the carry as it was. A loop over only the waiting agents has a trip
    count that depends on data, and XLA's GPU loop reads such a loop's predicate back to the
    host at every iteration (a device-to-host copy each). Figures:
    docs/results/log.md#what-the-seeds-measure-busy-fraction-kernels-copies-time-split-memory-call-1
    """
    order = jnp.argsort(priority)
    turns = (
        order[:, None] == jnp.arange(order.shape[0]),  # [A turns, A agents] one-hot rows
        waiting[order],
        jax.tree.map(lambda x: x[order], mine),
    )

    def body(carry, x):
        me, active, mine_i = x
        new = turn(carry, me, mine_i)
        return jax.tree.map(lambda n, c: jnp.where(active, n, c), new, carry), None

    return jax.lax.scan(body, carry, turns)[0]


class _Attacker(struct.PyTreeNode):
    """What an attacker's turn reads that no turn changes (leaves [A] in :func:`_in_turns`)."""

    target: jax.Array  # () int32 the agent its cone picks, -1 for an empty cone
    priority: jax.Array  # () int32 its turn priority


class _Actor(struct.PyTreeNode):
    """What a move or get/put turn reads that no turn changes (leaves [A, ...] in
    :func:`_in_turns`)."""

    kind: jax.Array  # () int32 action kind (MOVE, GET, PUT...)
    dest: jax.Array  # [2] int32 the cell a mover heads for, or the one anyone else faces
    dest_open: jax.Array  # () bool no object in that cell on the step's grid
    converter: jax.Array  # () int32 the converter in that cell, -1 for none
    needed: jax.Array  # [resources] int32 that converter's recipe inputs
    makes: jax.Array  # [resources] bool that converter's recipe outputs
    altar: jax.Array  # () bool that converter is an altar


_UNIT = np.eye(NUM_RESOURCES, dtype=np.int32)  # [resources, resources] one unit of each


def _attack_turn(
    carry: tuple[World, jax.Array], me: jax.Array, mine: _Attacker, rules: Rules
) -> tuple[World, jax.Array]:
    """One attacker's turn, with masks (``reference.attack_effect`` after a lost action).

    Args:
      carry: the world (its grid unused) and the priority of the last hit on each agent,
        int32 [A] (-1: none yet).
      me: [A] bool, the attacker (one-hot).
      mine: its target and priority.
      rules: the rule constants.
    """
    pieces, last_hit = carry
    num_agents = me.shape[0]
    them = jnp.arange(num_agents) == mine.target  # [A] one-hot, none for an empty cone
    inv = pieces.agent_inv
    # One read of both rows; the target is never the attacker (its cone excludes its cell).
    rows = _rows(jnp.concatenate([inv, pieces.frozen[:, None]], -1), jnp.stack([me, them]))
    (my_inv, my_frozen), (their_inv, their_frozen) = ((r[:-1], r[-1]) for r in rows)
    frozen = pieces.frozen - (me & (my_frozen > 0)).astype(jnp.int32)  # a lost action
    hit = (my_frozen == 0) & (my_inv[LASER] >= 1) & (mine.target >= 0)
    blocked = hit & (their_inv[ARMOR] >= 1)
    lands = hit & ~blocked
    steals = lands & (their_frozen == 0)
    stolen = jnp.where(steals, jnp.minimum(their_inv, rules.inventory_limit - my_inv), 0)
    unit = jnp.asarray(_UNIT)
    inv = inv - jnp.where(them[:, None], stolen + blocked * unit[ARMOR], 0)
    inv = inv + jnp.where(me[:, None], stolen - hit * unit[LASER], 0)
    frozen = jnp.where(them & lands, rules.freeze_duration, frozen)
    last_hit = jnp.where(them & lands, mine.priority, last_hit)
    return pieces.replace(agent_inv=inv, frozen=frozen), last_hit


def _actor_turn(pieces: World, me: jax.Array, mine: _Actor, t: jax.Array, rules: Rules) -> World:
    """One mover's or converter user's turn, with masks (``reference.move``, ``exchange``).

    Args:
      pieces: the world (its grid unused).
      me: [A] bool, the agent (one-hot).
      mine: its action and what it heads for or faces.
      t: () int32 the step number.
      rules: the rule constants.
    """
    num_agents, num_converters = me.shape[0], pieces.conv_kind.shape[0]
    pos = pieces.agent_pos
    there = (pos[:, 0] == mine.dest[0]) & (pos[:, 1] == mine.dest[1])  # [A]
    # One read: the agent's inventory, and how many agents stand where it heads.
    ones = jnp.ones((num_agents, 1), jnp.int32)
    rows = _rows(jnp.concatenate([pieces.agent_inv, ones], -1), jnp.stack([me, there]))
    my_inv, taken = rows[0, :-1], rows[1, -1] > 0
    step = (mine.kind == MOVE) & mine.dest_open & ~taken
    conv = jnp.arange(num_converters) == mine.converter  # [M] one-hot, none for -1
    conv_row = _rows(jnp.concatenate([pieces.conv_inv, pieces.conv_phase[:, None]], -1), conv[None])
    conv_inv, conv_phase = conv_row[0, :-1], conv_row[0, -1]
    use = mine.converter >= 0
    get, put = use & (mine.kind == GET), use & (mine.kind == PUT)
    take, give = trade(my_inv, conv_inv, mine.needed, mine.makes, get, put, rules)
    delta = take - give  # [resources], for the agent
    start = can_start(mine.needed, mine.makes, conv_inv - delta, conv_phase, rules)
    starts = conv & start & _over_resources(jnp.logical_or, delta != 0)  # [M]
    return pieces.replace(
        agent_pos=jnp.where((me & step)[:, None], mine.dest, pos),
        agent_inv=pieces.agent_inv + jnp.where(me[:, None], delta, 0),
        hearts=pieces.hearts + jnp.where(me & mine.altar, take[HEART], 0),
        conv_inv=pieces.conv_inv
        - jnp.where(conv[:, None], delta, 0)
        - jnp.where(starts[:, None], mine.needed, 0),
        conv_phase=jnp.where(starts, CONVERTING, pieces.conv_phase),
        conv_end=jnp.where(starts, t + rules.conversion_ticks, pieces.conv_end),
    )


def _pairs(a: jax.Array, b: jax.Array) -> jax.Array:
    """bool [A, A]: cell ``a[i]`` equals cell ``b[k]`` (both int32 [A, 2])."""
    return jnp.all(a[:, None, :] == b[None, :, :], axis=-1)


def resolve(
    world: World, action: jax.Array, priority: jax.Array, t: jax.Array, rules: Rules
) -> World:
    """Every agent's action at step ``t`` by ``priority``: all attacks, then the rest.

    The result of :func:`jaxrl.envs.grid.reference.resolve_in_turns` (MettaGrid's one agent after
    another), computed with turns only where the order can matter.

    - What each action reaches on the grid is fixed for its whole phase: no one moves while
      attacks resolve, an agent that gets or puts does not move, converters never move. So
      attack targets, move destinations and faced converters are read once, for all agents.
    - Attacks: only an attacker that is frozen (it loses the action) or holds a laser can
      change anything; those take turns. Any other attacker's action is lost only if a hit
      froze it before its turn: its counter then counts down unless the last hit on it came
      after its turn.
    - Frozen agents that chose anything else lose it, each on its own counter.
    - A move conflicts when another mover heads for the same cell, or for its cell, or it
      heads for a mover's cell; a get or put conflicts when another agent uses the same
      converter. Conflicting agents take turns; the rest act at once (their moves and
      converters touch no one else's).
    - The grid is rewritten from the final positions.

    Args:
      world: the world after the step's converter events.
      action: int32 [A] flat actions.
      priority: int32 [A] distinct turn priorities (:func:`turn_priority`).
      t: () int32 the step number (1 for the first step of an episode).
      rules: the rule constants.
    """
    num_agents, num_converters = world.agent_pos.shape[0], world.conv_kind.shape[0]
    agents = jnp.arange(num_agents)
    kind = jnp.asarray(ACTION_KIND)[action]  # [A]
    arg = jnp.asarray(ACTION_ARG)[action]  # [A]
    pieces = world.replace(grid=None)  # the turns never read the grid

    # Attacks.
    attacker = kind == ATTACK
    takes_turn = attacker & ((world.frozen > 0) | (world.agent_inv[:, LASER] >= 1))

    # Nobody moves while attacks resolve: every cone is read from the step's grid, once.
    target = jax.vmap(cone_target, in_axes=(None, 0, 0))(world, agents, arg)  # [A]

    pieces, last_hit = _in_turns(
        functools.partial(_attack_turn, rules=rules),
        (pieces, jnp.full(num_agents, -1, jnp.int32)),
        takes_turn,
        priority,
        _Attacker(target=target, priority=priority),
    )
    loses = attacker & ~takes_turn & (pieces.frozen > 0) & (last_hit < priority)
    frozen = pieces.frozen - loses.astype(jnp.int32)

    # Everything else.
    other = ~attacker
    acts = other & (frozen == 0)
    pieces = pieces.replace(frozen=frozen - (other & (frozen > 0)).astype(jnp.int32))
    mover = acts & (kind == MOVE)
    pos = pieces.agent_pos
    # The cell a mover heads for, or the one anyone else faces (a converter to use).
    heading = jnp.where(kind == MOVE, jnp.minimum(arg, 3), pieces.agent_ori)  # [A]
    dest = pos + jnp.asarray(DELTA)[heading]  # [A, 2]
    dest_code = world.grid[dest[:, 0], dest[:, 1]].astype(jnp.int32)  # [A]
    dest_open = (dest_code == EMPTY) | (dest_code >= CONVERTER0 + num_converters)  # no object
    both = mover[:, None] & mover[None, :]
    same_dest = both & _pairs(dest, dest) & ~jnp.eye(num_agents, dtype=bool)
    into_mover = both & _pairs(dest, pos)  # [i, k]: i heads for mover k's cell
    move_turn = mover & (same_dest.any(1) | into_mover.any(1) | into_mover.any(0))
    user = acts & ((kind == GET) | (kind == PUT))
    is_conv = (dest_code >= CONVERTER0) & (dest_code < CONVERTER0 + num_converters)
    converter = jnp.where(is_conv, dest_code - CONVERTER0, -1)  # [A] faced converter
    use = user & (converter >= 0)
    shared = use[:, None] & use[None, :] & (converter[:, None] == converter[None, :])
    use_turn = use & (jnp.sum(shared, axis=1) > 1)

    go = mover & ~move_turn & (dest_code == EMPTY)
    j = jnp.maximum(converter, 0)
    needed, makes = recipe(pieces.conv_kind[j], rules)  # [A, resources] each
    single = use & ~use_turn
    take, give = trade(
        pieces.agent_inv,
        pieces.conv_inv[j],
        needed,
        makes,
        single & (kind == GET),
        single & (kind == PUT),
        rules,
    )
    delta = take - give  # [A, resources], for the agents
    touched = jnp.zeros(num_converters, bool).at[j].max(jnp.any(delta != 0, axis=-1))
    pieces = pieces.replace(
        agent_pos=jnp.where(go[:, None], dest, pos),
        agent_ori=jnp.where(mover, jnp.minimum(arg, 3), pieces.agent_ori),
        agent_inv=pieces.agent_inv + delta,
        conv_inv=pieces.conv_inv.at[j].add(-delta),
        hearts=pieces.hearts + jnp.where(pieces.conv_kind[j] == ALTAR, take[:, HEART], 0),
    )
    pieces = start_converters(pieces, t, rules, touched)

    actor = _Actor(
        kind=kind,
        dest=dest,
        dest_open=dest_open,
        converter=converter,
        needed=needed,
        makes=makes,
        altar=pieces.conv_kind[j] == ALTAR,
    )
    pieces = _in_turns(
        functools.partial(_actor_turn, t=t, rules=rules),
        pieces,
        move_turn | use_turn,
        priority,
        actor,
    )

    after = pieces.agent_pos
    grid = world.grid.at[pos[:, 0], pos[:, 1]].set(EMPTY)
    codes = (CONVERTER0 + num_converters + agents).astype(world.grid.dtype)
    return pieces.replace(grid=grid.at[after[:, 0], after[:, 1]].set(codes))


# ----------------------------------------------------------------------------- rewards


def inventory_value(inv: jax.Array, rules: Rules) -> jax.Array:
    """MettaGrid's resource reward: ``sum_r min(weight_r * inv_r, cap_r)``, float32 [A]."""
    value = jnp.minimum(rules.reward_weight * inv.astype(jnp.float32), rules.reward_cap)
    # Five adds, not a reduction: XLA on CPU hands tiny reductions to a slower library call.
    total = value[..., 0]
    for r in range(1, NUM_RESOURCES):
        total = total + value[..., r]
    return total
