"""The MettaGrid arena's rules as pure functions on one env's arrays (no batch axis).

Everything here acts on a :class:`World`, the part of the env state the rules change. The
env (:mod:`envs.grid.env`) draws layouts, orders the agents and builds observations; this
module holds the converters' state machine, the actions and the rewards.

Grid cells hold an int32 *code*: ``EMPTY`` (0), ``WALL`` (1), converter ``j`` as
``CONVERTER0 + j`` and agent ``i`` as ``CONVERTER0 + M + i`` (``M`` converters). Positions
are (row, col) in the padded grid (walls fill the padding, see :mod:`envs.grid.env`).
"""

from __future__ import annotations

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


def _can_start(
    kind: jax.Array, inv: jax.Array, phase: jax.Array, rules: Rules
) -> tuple[jax.Array, jax.Array]:
    """MettaGrid's ``maybe_start_converting`` test for converters of any batch shape.

    Args:
      kind: [...] int32 converter kinds.
      inv: [..., resources] int32 inventories.
      phase: [...] int32 phases.
      rules: the rule constants.

    Returns:
      ``(start [...] bool, needed [..., resources] int32)``: whether a conversion starts, and
      the inputs it consumes.
    """
    needed = rules.recipe_in[kind]
    outputs = jnp.sum(jnp.where(rules.recipe_out[kind] > 0, inv, 0), axis=-1)
    start = (phase == IDLE) & (outputs < rules.max_output) & jnp.all(inv >= needed, axis=-1)
    return start, needed


def start_converters(world: World, t: jax.Array, rules: Rules, which: jax.Array) -> World:
    """Start every converter in ``which`` ([M] bool) that can convert at step ``t``."""
    start, needed = _can_start(world.conv_kind, world.conv_inv, world.conv_phase, rules)
    start = start & which
    return world.replace(
        conv_inv=world.conv_inv - jnp.where(start[:, None], needed, 0),
        conv_phase=jnp.where(start, CONVERTING, world.conv_phase),
        conv_end=jnp.where(start, t + rules.conversion_ticks, world.conv_end),
    )


def start_one(world: World, j: jax.Array, t: jax.Array, rules: Rules, touched: jax.Array) -> World:
    """Start converter ``j`` if ``touched`` and it can convert (after a get or a put)."""
    start, needed = _can_start(world.conv_kind[j], world.conv_inv[j], world.conv_phase[j], rules)
    start = start & touched
    return world.replace(
        conv_inv=world.conv_inv.at[j].add(jnp.where(start, -needed, 0)),
        conv_phase=world.conv_phase.at[j].set(jnp.where(start, CONVERTING, world.conv_phase[j])),
        conv_end=world.conv_end.at[j].set(
            jnp.where(start, t + rules.conversion_ticks, world.conv_end[j])
        ),
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


def attack_effect(
    world: World, i: jax.Array, target: jax.Array, active: jax.Array, rules: Rules
) -> tuple[World, jax.Array]:
    """Agent ``i`` attacks agent ``target`` (-1: an empty cone), if ``active``.

    Reads and writes only inventories and freeze counters (``world.grid`` may be ``None``).
    Returns the world and whether the hit landed (froze the target; armor did not block it).
    """
    hit = active & (target >= 0)
    target = jnp.maximum(target, 0)
    inv = world.agent_inv
    blocked = hit & (inv[target, ARMOR] >= 1)
    lands = hit & ~blocked
    steals = lands & (world.frozen[target] == 0)
    stolen = jnp.where(steals, jnp.minimum(inv[target], rules.inventory_limit - inv[i]), 0)
    inv = inv.at[target, ARMOR].add(-blocked.astype(jnp.int32))
    inv = inv.at[target].add(-stolen).at[i].add(stolen)
    inv = inv.at[i, LASER].add(-hit.astype(jnp.int32))  # spent after the steal, as in MettaGrid
    frozen = world.frozen.at[target].set(
        jnp.where(lands, rules.freeze_duration, world.frozen[target])
    )
    return world.replace(agent_inv=inv, frozen=frozen), lands


def attack(world: World, i: jax.Array, arg: jax.Array, active: jax.Array, rules: Rules) -> World:
    """Agent ``i`` attacks the ``arg``-th agent in its cone, if ``active``.

    ``active`` already includes "chose attack, not frozen, holds a laser". No agent in the
    cone: nothing happens and the laser is kept. Otherwise the laser is spent; a target with
    armor loses one armor and is unharmed; else it is frozen for ``freeze_duration`` actions
    and, unless it was frozen already, the attacker takes its whole inventory (up to its caps).
    """
    return attack_effect(world, i, cone_target(world, i, arg), active, rules)[0]


def move(world: World, i: jax.Array, direction: jax.Array, active: jax.Array) -> World:
    """Agent ``i`` turns to ``direction`` and steps there if the cell is empty (if ``active``)."""
    num_converters = world.conv_kind.shape[0]
    pos = world.agent_pos[i]
    dest = pos + jnp.asarray(DELTA)[direction]
    go = active & (world.grid[dest[0], dest[1]] == EMPTY)
    code = jnp.asarray(CONVERTER0 + num_converters + i).astype(world.grid.dtype)
    grid = world.grid.at[pos[0], pos[1]].set(jnp.where(go, EMPTY, code))
    grid = grid.at[dest[0], dest[1]].set(jnp.where(go, code, grid[dest[0], dest[1]]))
    return world.replace(
        grid=grid,
        agent_pos=world.agent_pos.at[i].set(jnp.where(go, dest, pos)),
        agent_ori=world.agent_ori.at[i].set(jnp.where(active, direction, world.agent_ori[i])),
    )


def faced_converter(world: World, i: jax.Array) -> jax.Array:
    """The converter agent ``i`` faces, int32 () or -1."""
    num_converters = world.conv_kind.shape[0]
    front = world.agent_pos[i] + jnp.asarray(DELTA)[world.agent_ori[i]]
    code = world.grid[front[0], front[1]].astype(jnp.int32)
    is_conv = (code >= CONVERTER0) & (code < CONVERTER0 + num_converters)
    return jnp.where(is_conv, code - CONVERTER0, -1).astype(jnp.int32)


def trade(
    agent: jax.Array,
    conv: jax.Array,
    kind: jax.Array,
    get: jax.Array,
    put: jax.Array,
    rules: Rules,
) -> tuple[jax.Array, jax.Array]:
    """What a get or a put moves, for agents and converters of any batch shape ``[...]``.

    Args:
      agent: [..., resources] int32 the agents' inventories.
      conv: [..., resources] int32 the inventories of the converters they use.
      kind: [...] int32 those converters' kinds.
      get: [...] bool, takes all of the converter's outputs, up to the agent's caps.
      put: [...] bool, gives per input resource up to the recipe's amount of what it holds.
      rules: the rule constants.

    Returns:
      ``(take, give)`` [..., resources] int32, to the agent and to the converter.
    """
    take = jnp.where(
        get[..., None] & (rules.recipe_out[kind] > 0),
        jnp.minimum(conv, rules.inventory_limit - agent),
        0,
    )
    give = jnp.where(
        put[..., None],
        jnp.minimum(jnp.minimum(rules.recipe_in[kind], agent), CONVERTER_LIMIT - conv),
        0,
    )
    return take, give


def exchange(
    world: World,
    i: jax.Array,
    j: jax.Array,
    get: jax.Array,
    put: jax.Array,
    t: jax.Array,
    rules: Rules,
) -> World:
    """Agent ``i`` gets the outputs of / puts recipe inputs into converter ``j`` (-1: none).

    Reads and writes only inventories, hearts and converter states (``world.grid`` may be
    ``None``).
    """
    is_conv = j >= 0
    j = jnp.maximum(j, 0)
    kind = world.conv_kind[j]
    take, give = trade(
        world.agent_inv[i], world.conv_inv[j], kind, get & is_conv, put & is_conv, rules
    )
    delta = take - give  # [resources], for the agent
    world = world.replace(
        agent_inv=world.agent_inv.at[i].add(delta),
        conv_inv=world.conv_inv.at[j].add(-delta),
        hearts=world.hearts.at[i].add(jnp.where(kind == ALTAR, take[HEART], 0)),
    )
    return start_one(world, j, t, rules, jnp.any(delta != 0))


def get_put(
    world: World, i: jax.Array, get: jax.Array, put: jax.Array, t: jax.Array, rules: Rules
) -> World:
    """Agent ``i`` gets the outputs of / puts recipe inputs into the converter it faces.

    ``get``: takes all of the converter's output resources, up to the agent's caps. ``put``:
    gives, per input resource, up to the recipe's amount of what it holds. Either counts
    hearts taken from altars, and restarts the converter when its inventory changed.
    """
    return exchange(world, i, faced_converter(world, i), get, put, t, rules)


def _lose_action(world: World, i: jax.Array, chose: jax.Array) -> tuple[World, jax.Array]:
    """A frozen agent's chosen action is lost (its counter counts down); returns if it acts."""
    frozen = world.frozen[i]
    world = world.replace(frozen=world.frozen.at[i].add(-(chose & (frozen > 0)).astype(jnp.int32)))
    return world, chose & (frozen == 0)


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


def resolve_in_turns(
    world: World, action: jax.Array, priority: jax.Array, t: jax.Array, rules: Rules
) -> World:
    """Every agent's action, one whole-world turn at a time: the reference for :func:`resolve`.

    Agents take turns by ``priority`` (lowest first): all attacks, then the rest; each turn
    reads and writes the grid, as MettaGrid's do.
    """
    kind = jnp.asarray(ACTION_KIND)[action]
    arg = jnp.asarray(ACTION_ARG)[action]
    order = jnp.argsort(priority)

    def attack_turn(world, i):
        world, ok = _lose_action(world, i, kind[i] == ATTACK)
        ok = ok & (world.agent_inv[i, LASER] >= 1)
        return attack(world, i, arg[i], ok, rules), None

    def other_turn(world, i):
        world, ok = _lose_action(world, i, kind[i] != ATTACK)
        world = move(world, i, arg[i], ok & (kind[i] == MOVE))
        return get_put(world, i, ok & (kind[i] == GET), ok & (kind[i] == PUT), t, rules), None

    world, _ = jax.lax.scan(attack_turn, world, order)
    world, _ = jax.lax.scan(other_turn, world, order)
    return world


_LAST = np.iinfo(np.int32).max


def _in_turns(
    turn: Callable[[Any, jax.Array], Any], carry: Any, waiting: jax.Array, priority: jax.Array
) -> Any:
    """``turn(carry, i)`` for every agent ``i`` in ``waiting`` ([A] bool), by priority."""

    def body(loop):
        carry, waiting = loop
        i = jnp.argmin(jnp.where(waiting, priority, _LAST))
        return turn(carry, i), waiting.at[i].set(False)

    return jax.lax.while_loop(lambda loop: jnp.any(loop[1]), body, (carry, waiting))[0]


def _pairs(a: jax.Array, b: jax.Array) -> jax.Array:
    """bool [A, A]: cell ``a[i]`` equals cell ``b[k]`` (both int32 [A, 2])."""
    return jnp.all(a[:, None, :] == b[None, :, :], axis=-1)


def resolve(
    world: World, action: jax.Array, priority: jax.Array, t: jax.Array, rules: Rules
) -> World:
    """Every agent's action at step ``t`` by ``priority``: all attacks, then the rest.

    The result of :func:`resolve_in_turns` (MettaGrid's one agent after another), computed
    with turns only where the order can matter.

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

    def attack_turn(carry, i):
        pieces, last_hit = carry
        pieces, ok = _lose_action(pieces, i, jnp.bool_(True))
        ok = ok & (pieces.agent_inv[i, LASER] >= 1)
        target = cone_target(world, i, arg[i])  # nobody has moved: the step's grid
        pieces, lands = attack_effect(pieces, i, target, ok, rules)
        hit = jnp.maximum(target, 0)
        return pieces, last_hit.at[hit].set(jnp.where(lands, priority[i], last_hit[hit]))

    pieces, last_hit = _in_turns(
        attack_turn, (pieces, jnp.full(num_agents, -1, jnp.int32)), takes_turn, priority
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
    single = use & ~use_turn
    take, give = trade(
        pieces.agent_inv,
        pieces.conv_inv[j],
        pieces.conv_kind[j],
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

    def other_turn(pieces, i):
        taken = jnp.any(jnp.all(pieces.agent_pos == dest[i], axis=-1))
        step = (kind[i] == MOVE) & dest_open[i] & ~taken
        pieces = pieces.replace(
            agent_pos=pieces.agent_pos.at[i].set(jnp.where(step, dest[i], pieces.agent_pos[i]))
        )
        return exchange(pieces, i, converter[i], kind[i] == GET, kind[i] == PUT, t, rules)

    pieces = _in_turns(other_turn, pieces, move_turn | use_turn, priority)

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
