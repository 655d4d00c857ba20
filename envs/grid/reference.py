"""MettaGrid's turns as MettaGrid takes them, one agent after another: the reference for
:func:`jaxrl.envs.grid.rules.resolve`.

Each function here reads and writes one agent's (or one converter's) entries by index, in
the order MettaGrid's C++ loop does; :func:`resolve_in_turns` runs every agent's action that
way. The env steps with :func:`jaxrl.envs.grid.rules.resolve`, which reaches the same world with
masks and turns only where the order can matter; ``tests/test_grid.py`` holds the two equal.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.envs.grid.rules import (
    ACTION_ARG,
    ACTION_KIND,
    ALTAR,
    ARMOR,
    ATTACK,
    CONVERTER0,
    CONVERTING,
    DELTA,
    EMPTY,
    GET,
    HEART,
    LASER,
    MOVE,
    PUT,
    Rules,
    World,
    can_start,
    cone_target,
    recipe,
    trade,
)


def start_one(world: World, j: jax.Array, t: jax.Array, rules: Rules, touched: jax.Array) -> World:
    """Start converter ``j`` if ``touched`` and it can convert (after a get or a put)."""
    needed, makes = recipe(world.conv_kind[j], rules)
    start = can_start(needed, makes, world.conv_inv[j], world.conv_phase[j], rules) & touched
    return world.replace(
        conv_inv=world.conv_inv.at[j].add(jnp.where(start, -needed, 0)),
        conv_phase=world.conv_phase.at[j].set(jnp.where(start, CONVERTING, world.conv_phase[j])),
        conv_end=world.conv_end.at[j].set(
            jnp.where(start, t + rules.conversion_ticks, world.conv_end[j])
        ),
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
    needed, makes = recipe(kind, rules)
    take, give = trade(
        world.agent_inv[i], world.conv_inv[j], needed, makes, get & is_conv, put & is_conv, rules
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
