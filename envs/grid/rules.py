"""The MettaGrid arena's rules as pure functions on one env's arrays (no batch axis).

Everything here acts on a :class:`World`, the part of the env state the rules change. The
env (:mod:`envs.grid.env`) draws layouts, orders the agents and builds observations; this
module holds the converters' state machine, the actions and the rewards.

Grid cells hold an int32 *code*: ``EMPTY`` (0), ``WALL`` (1), converter ``j`` as
``CONVERTER0 + j`` and agent ``i`` as ``CONVERTER0 + M + i`` (``M`` converters). Positions
are (row, col) in the padded grid (walls fill the padding, see :mod:`envs.grid.env`).
"""

from __future__ import annotations

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

    grid: jax.Array  # [Hp, Wp] int32 cell codes
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


def attack(world: World, i: jax.Array, arg: jax.Array, active: jax.Array, rules: Rules) -> World:
    """Agent ``i`` attacks the ``arg``-th agent in its cone, if ``active``.

    ``active`` already includes "chose attack, not frozen, holds a laser". No agent in the
    cone: nothing happens and the laser is kept. Otherwise the laser is spent; a target with
    armor loses one armor and is unharmed; else it is frozen for ``freeze_duration`` actions
    and, unless it was frozen already, the attacker takes its whole inventory (up to its caps).
    """
    num_converters = world.conv_kind.shape[0]
    pos, ori = world.agent_pos[i], world.agent_ori[i]
    forward = jnp.asarray(DELTA)[ori]
    right = jnp.asarray(DELTA)[jnp.asarray(CLOCKWISE)[ori]]
    cone = jnp.asarray(ATTACK_CELLS)
    cells = pos + cone[:, :1] * forward + cone[:, 1:] * right  # [9, 2]
    codes = world.grid[cells[:, 0], cells[:, 1]]  # [9]
    is_agent = codes >= CONVERTER0 + num_converters
    rank = jnp.cumsum(is_agent) - 1
    exact = is_agent & (rank == arg)
    last = 8 - jnp.argmax(is_agent[::-1])
    pick = jnp.where(jnp.any(exact), jnp.argmax(exact), last)
    target = jnp.clip(codes[pick] - CONVERTER0 - num_converters, 0, world.frozen.shape[0] - 1)
    hit = active & jnp.any(is_agent)

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
    return world.replace(agent_inv=inv, frozen=frozen)


def move(world: World, i: jax.Array, direction: jax.Array, active: jax.Array) -> World:
    """Agent ``i`` turns to ``direction`` and steps there if the cell is empty (if ``active``)."""
    num_converters = world.conv_kind.shape[0]
    pos = world.agent_pos[i]
    dest = pos + jnp.asarray(DELTA)[direction]
    go = active & (world.grid[dest[0], dest[1]] == EMPTY)
    code = CONVERTER0 + num_converters + i
    grid = world.grid.at[pos[0], pos[1]].set(jnp.where(go, EMPTY, code))
    grid = grid.at[dest[0], dest[1]].set(jnp.where(go, code, grid[dest[0], dest[1]]))
    return world.replace(
        grid=grid,
        agent_pos=world.agent_pos.at[i].set(jnp.where(go, dest, pos)),
        agent_ori=world.agent_ori.at[i].set(jnp.where(active, direction, world.agent_ori[i])),
    )


def get_put(
    world: World, i: jax.Array, get: jax.Array, put: jax.Array, t: jax.Array, rules: Rules
) -> World:
    """Agent ``i`` gets the outputs of / puts recipe inputs into the converter it faces.

    ``get``: takes all of the converter's output resources, up to the agent's caps. ``put``:
    gives, per input resource, up to the recipe's amount of what it holds. Either counts
    hearts taken from altars, and restarts the converter when its inventory changed.
    """
    num_converters = world.conv_kind.shape[0]
    front = world.agent_pos[i] + jnp.asarray(DELTA)[world.agent_ori[i]]
    code = world.grid[front[0], front[1]]
    is_conv = (code >= CONVERTER0) & (code < CONVERTER0 + num_converters)
    j = jnp.clip(code - CONVERTER0, 0, num_converters - 1)
    kind = world.conv_kind[j]
    agent, conv = world.agent_inv[i], world.conv_inv[j]
    take = jnp.where(
        get & is_conv & (rules.recipe_out[kind] > 0),
        jnp.minimum(conv, rules.inventory_limit - agent),
        0,
    )
    give = jnp.where(
        put & is_conv,
        jnp.minimum(jnp.minimum(rules.recipe_in[kind], agent), CONVERTER_LIMIT - conv),
        0,
    )
    delta = take - give  # [resources], for the agent
    hearts = jnp.where(kind == ALTAR, take[HEART], 0)
    world = world.replace(
        agent_inv=world.agent_inv.at[i].add(delta),
        conv_inv=world.conv_inv.at[j].add(-delta),
        hearts=world.hearts.at[i].add(hearts),
    )
    return start_one(world, j, t, rules, jnp.any(delta != 0))


# ----------------------------------------------------------------------------- rewards


def inventory_value(inv: jax.Array, rules: Rules) -> jax.Array:
    """MettaGrid's resource reward: ``sum_r min(weight_r * inv_r, cap_r)``, float32 [A]."""
    value = jnp.minimum(rules.reward_weight * inv.astype(jnp.float32), rules.reward_cap)
    return jnp.sum(value, axis=-1)
