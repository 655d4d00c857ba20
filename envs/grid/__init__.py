"""The MettaGrid arena in pure JAX: agents, converters and combat on a grid (``MettaArena``).

See :mod:`jaxrl.envs.grid.env` for the observation, action, reward and info layout and the list of
simplifications, :mod:`jaxrl.envs.grid.rules` for the rules, :mod:`jaxrl.envs.grid.render` for GIFs.
"""

from jaxrl.envs.grid.env import (
    NUM_FEATURES,
    VIEW,
    EnvParams,
    EnvState,
    GridSpec,
    MettaArena,
    draw_world,
    make_rules,
    observe,
)
from jaxrl.envs.grid.rules import ACTION_NAMES, NUM_ACTIONS, RESOURCES, Rules, World

__all__ = [
    "ACTION_NAMES",
    "NUM_ACTIONS",
    "NUM_FEATURES",
    "RESOURCES",
    "VIEW",
    "EnvParams",
    "EnvState",
    "GridSpec",
    "MettaArena",
    "Rules",
    "World",
    "draw_world",
    "make_rules",
    "observe",
]
