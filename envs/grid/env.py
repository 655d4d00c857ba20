"""The MettaGrid arena in pure JAX: rooms of agents, converters and combat, one vmappable env.

A port of the classic MettaGrid arena (``Metta-AI/mettagrid`` at e2c1acd9: ``builder/envs.py``
``make_arena``, ``builder/building.py``, ``cpp/``) under the gymnax 1.0 contract and the
single-team multi-agent conventions of this repo: every agent is an actor slot, all share one
policy, and every per-agent array has one entry per slot.

World: ``rooms = room_rows x room_cols`` rooms of ``room_size x room_size`` cells laid side by
side with no wall between them (MettaGrid's ``instance_border_width=0``), surrounded by walls.
Each room holds ``agents_per_room`` agents and its own walls, mines, generators, altars, lasery
and armory, placed at distinct random cells of the room at every reset. The default is the
arena: 2 x 2 rooms of 25 x 25, 6 agents, 10 walls, 10 mines, 5 generators, 5 altars,
1 lasery and 1 armory each (24 agents, 88 converters, a 50 x 50 floor).

Converters (mine: -> ore, cooldown 50; generator: ore -> battery, 25; altar: 3 batteries ->
heart, 10; lasery: battery + 2 ore -> laser, 10; armory: 3 ore -> armor, 10) start a
conversion whenever they are idle, hold their inputs and fewer than ``max_output`` (5)
outputs; the output appears ``conversion_ticks`` (1) steps later, then the cooldown runs. So
an unattended mine yields ore at steps 1, 52, 103, ... until it holds 5.

Action, int32 [A], ``Discrete(16)`` per agent (``rules.ACTION_NAMES``): 0 noop, 1-4 move
up/down/left/right (turns to face that way even when blocked), 5 get_items and 6 put_items on
the faced converter, 7-15 attack with argument 0-8. Each step: converter events, then the
agents in a random order (drawn from the step key), attacks first, then everything else. A
frozen agent loses the action it chose (its counter counts down by one per lost action).

Observation, uint8 [A, 11, 11, F=19] (MettaGrid's uint8 values; the trainer casts them to
float32): the 11 x 11 window centred on the agent (row 0 is 5 rows up; the window does not
rotate with the agent), one feature vector per cell:

    idx    feature
    0:7    type one-hot: agent, wall, mine, generator, altar, lasery, armory
    7      frozen (agents, 0/1)
    8      orientation (agents, 0 up, 1 down, 2 left, 3 right)
    9      converting or cooling down (converters, 0/1)
    10:15  inventory: ore, battery, heart, armor, laser (agents and converters, <= 255)
    15:19  global features, at the centre cell only: episode progress round(255 t / T),
           last action kind (0 noop 1 move 2 get 3 put 4 attack), its argument, last reward
           round(100 r) clipped to [0, 255]

Cells outside the floor are walls (MettaGrid surrounds the map by a 6-cell wall border).

Reward, float32 [A]: the change of ``sum_r min(weight_r * inventory_r, cap_r)`` over the step
(MettaGrid's resource rewards). ``reward_mode`` 0 ("hearts"): 1 per heart, uncapped.
``reward_mode`` 1 ("shaped", the ``arena_basic_easy_shaped`` recipe): ore 0.1, battery 0.8,
laser 0.5, armor 0.5 (each capped at 1), heart 1 (capped at 100), and altars take 1 battery.

Termination: never. Truncation: ``time >= max_steps_in_episode`` (1000).

Info: ``agent_mask`` bool [A] (all true), ``hearts`` int32 [A] hearts taken from altars this
episode so far, ``episode_outcome`` {``hearts``: float32 (), mean hearts per agent this
episode}, plus gymnax's ``terminated``, ``truncated`` and ``final_observation``.

Simplifications against MettaGrid (speed and learning figures: docs/results/metta-arena.md):
- Dense observation instead of up to 200 tokens; the features colour, swappable, glyph and
  group are omitted (constant in the arena), the type id is a one-hot, the ``frozen``
  feature is 0/1 as in MettaGrid's agent tokens.
- Red resources only (the arena places only red mines and generators); no blueprint (nothing
  in the arena makes it), no ``max_conversions`` (unlimited in the arena), no action failure
  penalty, no resource loss, no stat rewards (all off in the arena).
- Converter inventories are capped at 255 per resource; agents at 50 (hearts 255), as the
  arena's ``default_resource_limit``.
- Rooms are placed as a grid with no inner wall; each room's objects and agents are drawn
  uniformly without replacement from its own cells (MettaGrid's ``Random`` scene), and
  agents start facing up.
- The outer wall is the observation padding (5 cells) rather than MettaGrid's 6.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl.envs.domains import NON_NEGATIVE, Choices, Interval, param
from jaxrl.envs.grid import rules as grid_rules
from jaxrl.envs.grid.rules import Rules, World

VIEW = 11  # observation window side
RADIUS = VIEW // 2
PAD = RADIUS  # wall cells around the floor: every window and attack cone stays in the grid
NUM_FEATURES = 19
F_TYPE, F_FROZEN, F_ORIENTATION, F_CONVERTING, F_INVENTORY, F_GLOBAL = 0, 7, 8, 9, 10, 15
TYPE_AGENT, TYPE_WALL, TYPE_CONVERTER0 = 0, 1, 2  # one-hot slots; converter kind k -> 2 + k

HEARTS, SHAPED = 0, 1
REWARD_MODES = {"hearts": HEARTS, "shaped": SHAPED}
REWARD_MODE_CHOICES = Choices({HEARTS: "hearts", SHAPED: "shaped"})
_UNCAPPED = np.float32(1e9)
_WEIGHTS = np.array(
    [[0.0, 0.0, 1.0, 0.0, 0.0], [0.1, 0.8, 1.0, 0.5, 0.5]], np.float32
)  # [mode, resources]
_CAPS = np.array([[_UNCAPPED] * 5, [1.0, 1.0, 100.0, 1.0, 1.0]], np.float32)  # [mode, resources]
_SHAPED_ALTAR_BATTERIES = 1


@dataclasses.dataclass(frozen=True)
class GridSpec:
    """Static sizes of the arena (they fix array shapes; one compile per spec)."""

    room_rows: int = 2
    room_cols: int = 2
    room_size: int = 25
    agents_per_room: int = 6
    walls: int = 10
    mines: int = 10
    generators: int = 5
    altars: int = 5
    laseries: int = 1
    armories: int = 1

    def __post_init__(self):
        """Check that every room has room for its objects and agents."""
        if min(self.room_rows, self.room_cols, self.room_size, self.agents_per_room) < 1:
            raise ValueError(f"rooms, room size and agents per room must be >= 1: {self}")
        if self.per_room > self.room_size**2:
            raise ValueError(f"{self.per_room} objects and agents do not fit a room: {self}")

    @property
    def rooms(self) -> int:
        """Rooms in the arena."""
        return self.room_rows * self.room_cols

    @property
    def kinds_per_room(self) -> np.ndarray:
        """int32 [converters per room]: the kind of each converter of a room, in slot order."""
        counts = (self.mines, self.generators, self.altars, self.laseries, self.armories)
        return np.repeat(np.arange(grid_rules.NUM_KINDS), counts).astype(np.int32)

    @property
    def converters_per_room(self) -> int:
        """Converters in each room."""
        return len(self.kinds_per_room)

    @property
    def per_room(self) -> int:
        """Cells each room's walls, converters and agents occupy."""
        return self.walls + self.converters_per_room + self.agents_per_room

    @property
    def num_agents(self) -> int:
        """Agents in the arena (A)."""
        return self.rooms * self.agents_per_room

    @property
    def num_converters(self) -> int:
        """Converters in the arena (M)."""
        return self.rooms * self.converters_per_room

    @property
    def grid_dtype(self) -> type:
        """The cell codes' dtype: uint8 while every code fits (the arena's 114 codes), else int32.

        The grid is copied at every step (auto-reset selects between two), so its width
        matters for speed.
        """
        codes = grid_rules.CONVERTER0 + self.num_converters + self.num_agents
        return np.uint8 if codes <= 256 else np.int32

    @property
    def shape(self) -> tuple[int, int]:
        """The padded grid ``(Hp, Wp)``: the floor plus ``PAD`` wall cells on every side."""
        return self.room_rows * self.room_size + 2 * PAD, self.room_cols * self.room_size + 2 * PAD


class EnvParams(struct.PyTreeNode):
    """What an episode is conditioned on; every field is an array leaf (no retrace).

    ``reward_mode`` also accepts the names ``"hearts"`` and ``"shaped"`` (YAML configs).
    """

    max_steps_in_episode: jax.Array = param(np.int32(1000), Interval(1))  # () episode length
    reward_mode: jax.Array = param(np.int32(HEARTS), REWARD_MODE_CHOICES)  # () see module doc
    recipe_in: jax.Array = param(
        domain=NON_NEGATIVE, default_factory=lambda: grid_rules.RECIPE_IN.copy()
    )  # [5, 5]
    recipe_out: jax.Array = param(
        domain=NON_NEGATIVE, default_factory=lambda: grid_rules.RECIPE_OUT.copy()
    )  # [5, 5]
    cooldown: jax.Array = param(
        domain=NON_NEGATIVE, default_factory=lambda: grid_rules.COOLDOWN.copy()
    )  # [5]
    conversion_ticks: jax.Array = param(np.int32(1), Interval(1))  # () steps from start to output
    max_output: jax.Array = param(np.int32(5), Interval(1))  # () outputs a converter holds
    inventory_limit: jax.Array = param(
        domain=NON_NEGATIVE, default_factory=lambda: grid_rules.INVENTORY_LIMIT.copy()
    )  # [5] agents' caps
    freeze_duration: jax.Array = param(np.int32(10), NON_NEGATIVE)  # () actions a hit agent loses

    def __post_init__(self):
        """Map a reward mode name to its code and cast Python scalars/lists to the leaf dtypes."""
        mode = self.reward_mode
        if isinstance(mode, str):
            if mode not in REWARD_MODES:
                raise ValueError(f"reward_mode must be one of {sorted(REWARD_MODES)}, got {mode!r}")
            object.__setattr__(self, "reward_mode", np.int32(REWARD_MODES[mode]))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (bool, int, float, list, tuple)):
                dtype = np.asarray(
                    f.default if f.default is not dataclasses.MISSING else f.default_factory()
                ).dtype
                object.__setattr__(self, f.name, np.asarray(value, dtype))


class EnvState(struct.PyTreeNode):
    """Per-instance dynamic state."""

    world: World  # grid, agents and converters
    time: jax.Array  # () int32 steps taken this episode
    last_action: jax.Array  # [A] int32 flat action of the last step (0 after a reset)
    last_reward: jax.Array  # [A] float32 reward of the last step


def make_rules(params: EnvParams) -> Rules:
    """The rule constants of ``params`` (the shaped mode's weights and 1-battery altar)."""
    shaped = params.reward_mode == SHAPED
    altar = jnp.where(
        shaped, _SHAPED_ALTAR_BATTERIES, params.recipe_in[grid_rules.ALTAR, grid_rules.BATTERY]
    )
    return Rules(
        recipe_in=jnp.asarray(params.recipe_in).at[grid_rules.ALTAR, grid_rules.BATTERY].set(altar),
        recipe_out=jnp.asarray(params.recipe_out),
        cooldown=jnp.asarray(params.cooldown),
        conversion_ticks=params.conversion_ticks,
        max_output=params.max_output,
        inventory_limit=jnp.asarray(params.inventory_limit),
        freeze_duration=params.freeze_duration,
        reward_weight=jnp.asarray(_WEIGHTS)[params.reward_mode],
        reward_cap=jnp.asarray(_CAPS)[params.reward_mode],
    )


# ----------------------------------------------------------------------------- layout


def _floor_grid(spec: GridSpec) -> np.ndarray:
    """[Hp, Wp] cell codes (``spec.grid_dtype``): walls with an empty floor."""
    grid = np.full(spec.shape, grid_rules.WALL, spec.grid_dtype)
    grid[PAD:-PAD, PAD:-PAD] = grid_rules.EMPTY
    return grid


BANK_SIZE = 4096  # precomputed room layouts per spec (each used under 8 symmetries)


@functools.lru_cache(maxsize=8)
def layout_bank(spec: GridSpec) -> np.ndarray:
    """int32 [BANK_SIZE, per_room]: room cells drawn uniformly without replacement (seed 0).

    A reset runs at every step under gymnax's auto-reset (and under ``vmap`` both branches
    run), so drawing ``per_room`` distinct cells there (a sort of ``room_size**2`` uniforms)
    would cost more than the step itself; a reset instead picks a bank entry and one of the
    8 symmetries of the square for each room.
    """
    rng = np.random.default_rng(0)
    cells = spec.room_size**2
    return np.argsort(rng.random((BANK_SIZE, cells)), axis=1)[:, : spec.per_room].astype(np.int32)


def _symmetry(row: jax.Array, col: jax.Array, which: jax.Array, size: int):
    """One of the 8 symmetries of the ``size`` square applied to cells ``(row, col)``."""
    row, col = jnp.where(which & 1, col, row), jnp.where(which & 1, row, col)  # transpose
    row = jnp.where(which & 2, size - 1 - row, row)  # flip rows
    col = jnp.where(which & 4, size - 1 - col, col)  # flip columns
    return row, col


def draw_world(key: jax.Array, spec: GridSpec, rules: Rules) -> World:
    """A fresh arena drawn from ``key``: see :func:`world_from_bits`."""
    return world_from_bits(jax.random.bits(key, (2, spec.rooms), jnp.uint32), spec, rules)


def world_from_bits(bits: jax.Array, spec: GridSpec, rules: Rules) -> World:
    """A fresh arena: objects and agents at distinct random cells of their rooms.

    Each room takes a uniformly drawn entry of :func:`layout_bank` under a uniformly drawn
    symmetry of the square: its walls, converters (in ``kinds_per_room`` order) and agents
    take the entry's cells in that order.

    Args:
      bits: uint32 [2, rooms] random bits: each room's bank entry, then its symmetry.
      spec: the arena's sizes.
      rules: the rule constants.
    """
    cells = jnp.asarray(layout_bank(spec))[bits[0] % BANK_SIZE]  # [rooms, per_room]
    symmetry = (bits[1] % 8).astype(jnp.int32)[:, None]
    row, col = _symmetry(cells // spec.room_size, cells % spec.room_size, symmetry, spec.room_size)
    rooms = np.arange(spec.rooms)
    row = row + (PAD + (rooms // spec.room_cols) * spec.room_size)[:, None]  # [rooms, per_room]
    col = col + (PAD + (rooms % spec.room_cols) * spec.room_size)[:, None]
    first_agent = spec.walls + spec.converters_per_room
    agent_pos = jnp.stack([row[:, first_agent:], col[:, first_agent:]], -1).reshape(-1, 2)
    # Cell codes by (room, slot): walls, then converters and agents numbered room-major.
    codes = np.full((spec.rooms, spec.per_room), grid_rules.WALL, np.int64)
    codes[:, spec.walls : first_agent] = grid_rules.CONVERTER0 + np.arange(
        spec.num_converters
    ).reshape(spec.rooms, -1)
    codes[:, first_agent:] = (
        grid_rules.CONVERTER0 + spec.num_converters + np.arange(spec.num_agents)
    ).reshape(spec.rooms, -1)
    width = spec.shape[1]
    grid = (
        jnp.asarray(_floor_grid(spec).reshape(-1))
        .at[(row * width + col).reshape(-1)]
        .set(codes.reshape(-1).astype(spec.grid_dtype), unique_indices=True)
        .reshape(spec.shape)
    )
    num_agents, num_converters = spec.num_agents, spec.num_converters
    world = World(
        grid=grid,
        agent_pos=agent_pos.astype(jnp.int32),
        agent_ori=jnp.full(num_agents, grid_rules.UP, jnp.int32),
        agent_inv=jnp.zeros((num_agents, grid_rules.NUM_RESOURCES), jnp.int32),
        frozen=jnp.zeros(num_agents, jnp.int32),
        hearts=jnp.zeros(num_agents, jnp.int32),
        conv_kind=jnp.asarray(np.tile(spec.kinds_per_room, spec.rooms)),
        conv_inv=jnp.zeros((num_converters, grid_rules.NUM_RESOURCES), jnp.int32),
        conv_phase=jnp.full(num_converters, grid_rules.IDLE, jnp.int32),
        conv_end=jnp.zeros(num_converters, jnp.int32),
    )
    # MettaGrid starts every converter that can start when it joins the grid (mines).
    return grid_rules.start_converters(
        world, jnp.zeros((), jnp.int32), rules, jnp.ones(num_converters, bool)
    )


# ----------------------------------------------------------------------------- observation


def feature_table(world: World, me: jax.Array) -> jax.Array:
    """uint8 [2 + M + 2A, F]: the features of every cell code, then one *self* row per agent.

    Cell-code rows leave the global features at zero; agent ``i``'s self row is its own
    features with ``me[i]`` (uint8 [A, 4], :func:`global_features`) as its global features.
    """
    num_agents = world.agent_pos.shape[0]
    num_converters = world.conv_kind.shape[0]

    def byte(x):  # counts and flags as uint8 (inventories are capped at 255 anyway)
        return jnp.minimum(x, 255).astype(jnp.uint8).reshape(x.shape[0], -1)

    wall = np.zeros((2, NUM_FEATURES), np.uint8)
    wall[grid_rules.WALL, F_TYPE + TYPE_WALL] = 1
    conv = jnp.concatenate(
        [
            jax.nn.one_hot(TYPE_CONVERTER0 + world.conv_kind, 7, dtype=jnp.uint8),
            np.zeros((num_converters, 2), np.uint8),
            byte(world.conv_phase != grid_rules.IDLE),
            byte(world.conv_inv),
            np.zeros((num_converters, NUM_FEATURES - F_GLOBAL), np.uint8),
        ],
        axis=1,
    )
    agent_type = np.zeros((num_agents, 7), np.uint8)
    agent_type[:, TYPE_AGENT] = 1
    agent = jnp.concatenate(
        [
            agent_type,
            byte(world.frozen > 0),
            byte(world.agent_ori),
            np.zeros((num_agents, 1), np.uint8),
            byte(world.agent_inv),
        ],
        axis=1,
    )  # [A, F_GLOBAL]
    others = jnp.pad(agent, ((0, 0), (0, NUM_FEATURES - F_GLOBAL)))  # as other agents see it
    return jnp.concatenate([wall, conv, others, jnp.concatenate([agent, me], axis=1)])


def global_features(state: EnvState, params: EnvParams) -> jax.Array:
    """uint8 [A, 4]: progress, last action kind and argument, last reward (module docstring)."""
    progress = jnp.round(
        255.0 * state.time.astype(jnp.float32) / params.max_steps_in_episode.astype(jnp.float32)
    )
    action = state.last_action
    return jnp.stack(
        [
            jnp.broadcast_to(jnp.clip(progress, 0, 255), action.shape),
            jnp.asarray(grid_rules.ACTION_KIND)[action].astype(jnp.float32),
            jnp.asarray(grid_rules.ACTION_ARG)[action].astype(jnp.float32),
            jnp.clip(jnp.round(100.0 * state.last_reward), 0, 255),
        ],
        axis=-1,
    ).astype(jnp.uint8)


def observe(state: EnvState, params: EnvParams) -> jax.Array:
    """Every agent's observation, uint8 [A, 11, 11, F] (layout in the module docstring).

    One gather writes the whole tensor: each agent's 11 x 11 window of cell codes indexes a
    feature table with one row per code, plus one *self* row per agent (its features and
    its global features) that replaces the code of the window's centre, where the agent
    stands. Writing the observation is most of a step's memory traffic, so it is written
    once, as uint8 (the trainer casts to float32 at the policy input).
    """
    world = state.world
    num_agents = world.agent_pos.shape[0]
    table = feature_table(world, global_features(state, params))  # [2 + M + 2A, F]

    def window(pos):  # [2] -> [11, 11] codes
        return jax.lax.dynamic_slice(world.grid, (pos[0] - RADIUS, pos[1] - RADIUS), (VIEW, VIEW))

    codes = jax.vmap(window)(world.agent_pos).astype(jnp.int32)  # [A, 11, 11]
    self_rows = table.shape[0] - num_agents + jnp.arange(num_agents)
    return table[codes.at[:, RADIUS, RADIUS].set(self_rows)]  # [A, 11, 11, F] (int32: faster)


# ----------------------------------------------------------------------------- step


def materialize(bits: jax.Array) -> jax.Array:
    """``bits`` (uint32 [n]) unchanged, computed once into a buffer of their own.

    Dozens of fusions read the step's bits. With the hash in straight-line form (JAX's
    lowering off CPU, and on CPU once :mod:`jaxrl.core.prng` is installed) XLA copies it, and the
    hashes that made the caller's keys, into each of them; LLVM's loop vectorizer then took
    over ten minutes on one of those kernels (jax 0.10.2). A reduction is not fused into the
    elementwise kernels that read it, so the hash is computed once, here, for free.
    """
    return jnp.max(jnp.stack([bits, jnp.zeros_like(bits)], axis=-1), axis=-1)


class MettaArena(environment.Environment[EnvState, EnvParams]):
    """The MettaGrid arena; see the module docstring for obs, action, reward and info.

    Implements :class:`jaxrl.envs.protocols.MultiAgentEnv` (``num_agents`` slots, one team) and
    :class:`jaxrl.envs.protocols.RenderableEnv`.

    Args:
      spec: static sizes (rooms, agents and objects per room); the default is the arena.
    """

    renderer = "jaxrl.envs.grid.render"  # frames and GIFs of stacked states (needs Pillow)

    def __init__(self, spec: GridSpec | None = None):
        super().__init__()
        self.spec = GridSpec() if spec is None else spec
        self.num_agents = self.spec.num_agents  # actor slots per env, all on one team

    @property
    def default_params(self) -> EnvParams:
        """The hearts-only arena with 1000-step episodes."""
        return EnvParams()

    @property
    def name(self) -> str:
        """Environment name."""
        return "MettaArena"

    @property
    def num_actions(self) -> int:
        """Discrete actions per agent."""
        return grid_rules.NUM_ACTIONS

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        """Per-agent action space; ``step`` expects int32 [num_agents] actions."""
        del params
        return spaces.Discrete(grid_rules.NUM_ACTIONS)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """uint8 [num_agents, 11, 11, NUM_FEATURES]."""
        del params
        return spaces.Box(0, 255, (self.num_agents, VIEW, VIEW, NUM_FEATURES), jnp.uint8)

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """A new random layout; returns ``(obs uint8 [A, 11, 11, F], state)``."""
        state = self._fresh(jax.random.bits(key, (2, self.spec.rooms), jnp.uint32), params)
        return observe(state, params), state

    def _fresh(self, bits: jax.Array, params: EnvParams) -> EnvState:
        """The state of a new episode laid out by ``bits`` (:func:`world_from_bits`)."""
        return EnvState(
            world=world_from_bits(bits, self.spec, make_rules(params)),
            time=jnp.zeros((), jnp.int32),
            last_action=jnp.zeros(self.num_agents, jnp.int32),
            last_reward=jnp.zeros(self.num_agents, jnp.float32),
        )

    def transition(
        self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[EnvState, jax.Array, dict[str, Any]]:
        """One step without observations: ``(state, reward [A], info)``."""
        bits = jax.random.bits(key, (self.num_agents,), jnp.uint32)
        return self._transition(bits, state, action, params)

    def _transition(
        self, bits: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[EnvState, jax.Array, dict[str, Any]]:
        """One step with the agents' turn order drawn from ``bits`` (uint32 [A])."""
        rules = make_rules(params)
        action = jnp.clip(jnp.asarray(action, jnp.int32), 0, grid_rules.NUM_ACTIONS - 1)
        t = state.time + 1
        priority = grid_rules.turn_priority(bits)
        before = grid_rules.inventory_value(state.world.agent_inv, rules)
        world = grid_rules.process_events(state.world, t, rules)
        world = grid_rules.resolve(world, action, priority, t, rules)
        reward = grid_rules.inventory_value(world.agent_inv, rules) - before
        state = EnvState(world=world, time=t, last_action=action, last_reward=reward)
        info = {
            "agent_mask": jnp.ones(self.num_agents, bool),
            "hearts": world.hearts,
            "episode_outcome": {"hearts": jnp.mean(world.hearts.astype(jnp.float32))},
        }
        return state, reward, info

    def step_env(
        self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict[str, Any]]:
        """One step with ``action`` int32 [A]: converter events, attacks, other actions."""
        state, reward, info = self.transition(key, state, action, params)
        return observe(state, params), state, reward, jnp.zeros((), bool), info

    def step(
        self,
        key: jax.Array,
        state: EnvState,
        action: jax.Array,
        params: EnvParams | None = None,
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, jax.Array, dict[str, Any]]:
        """gymnax's auto-resetting step (same outputs), observing the selected state once.

        gymnax selects between the reset's and the step's observations; on CPU, XLA runs
        that select over two gathered observations far slower than the whole step
        (figures: docs/results/speed.md#why-the-code-is-as-it-is). Here the states are
        selected and observed once; the pre-reset observation is computed apart, only for
        ``info["final_observation"]`` (dead code, and skipped, where a caller ignores it).
        """
        params = self.default_params if params is None else params
        # One draw of random bits per step (on CPU each draw is a loop of kernels, or with
        # jaxrl.core.prng one hash kernel): the turn order, then the layout of the next episode.
        num_agents, rooms = self.num_agents, self.spec.rooms
        bits = materialize(jax.random.bits(key, (num_agents + 2 * rooms,), jnp.uint32))
        stepped, reward, info = self._transition(bits[:num_agents], state, action, params)
        terminated = jnp.zeros((), bool)
        truncated = self.is_truncated(stepped, params)
        fresh = self._fresh(bits[num_agents:].reshape(2, rooms), params)
        state = jax.tree.map(lambda x, y: jnp.where(truncated, x, y), fresh, stepped)
        info = {
            **info,
            "terminated": terminated,
            "truncated": truncated,
            "final_observation": observe(stepped, params),
        }
        return observe(state, params), state, reward, terminated, truncated, info

    def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """The episode ends after ``max_steps_in_episode`` steps."""
        return state.time >= params.max_steps_in_episode

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """The arena never terminates."""
        del state, params
        return jnp.zeros((), bool)

    def get_obs(self, state: EnvState, params: EnvParams | None = None, key=None) -> jax.Array:
        """Observations uint8 [A, 11, 11, F] (gymnax legacy hook)."""
        del key
        return observe(state, self.default_params if params is None else params)
