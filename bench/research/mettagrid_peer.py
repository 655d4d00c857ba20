"""The C++ MettaGrid package stepping its closest arena with random actions: our speed peer.

Standalone: it does not import jaxrl, and nothing in the project (tests included) imports it.
It needs the ``mettagrid`` package (a C++ core with Python bindings) in a *separate*
environment, e.g.::

    python3.11 -m venv /work/venvs/mettagrid
    /work/venvs/mettagrid/bin/pip install mettagrid==0.26.22
    /work/venvs/mettagrid/bin/python bench/research/mettagrid_peer.py --steps 20000 --repeats 3

What it runs. ``mettagrid`` 0.26 is a newer design than the classic arena that
``envs/grid`` ports (its ``builder.envs.make_arena`` keeps only walls and agents; converters
became configurable objects with handlers), so this is the closest configuration it offers:
``make_arena(24)`` with our layout, 2 x 2 rooms of 25 x 25 (``MapGen``, border 6, no inner
border) each holding 6 agents, 10 walls and 22 plain objects named like the arena's
converters (mines, generators, altars, lasery, armory) where the arena has them, 11 x 11
observations of up to 200 tokens, 1000-step episodes. The objects have no recipes, so no
conversion events run; observation encoding, which MettaGrid's own profile puts at 84-89%
of a step, is all there.

One process, one env, one thread: actions for every agent are drawn uniformly from the
env's action space beforehand (``numpy``), written into the C++ action buffer and the C++
``step()`` is called directly (no Python wrapper per step); a new simulation (map
generation included) starts when the episode ends, as our auto-reset does. It prints one
JSON line with env-steps/s and agent-steps/s (the best and the median of ``--repeats``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import mettagrid
import mettagrid.mapgen.scenes.random as random_scene
import numpy as np
from mettagrid.builder.envs import make_arena
from mettagrid.config.mettagrid_config import GridObjectConfig
from mettagrid.mapgen.mapgen import MapGen
from mettagrid.simulator import Simulator

CONVERTERS = {"mine_red": 10, "generator_red": 5, "altar": 5, "lasery": 1, "armory": 1}


def arena_config(rooms: int, agents_per_room: int, room_size: int, max_steps: int):
    """The arena of ``envs/grid`` as far as ``mettagrid`` 0.26 can express it."""
    objects = {"wall": 10, **CONVERTERS}
    builder = MapGen.Config(
        num_agents=rooms * agents_per_room,
        width=room_size,
        height=room_size,
        border_width=6,
        instance_border_width=0,
        instance=random_scene.Random.Config(agents=agents_per_room, objects=objects),
    )
    cfg = make_arena(rooms * agents_per_room, map_builder=builder)
    for name in CONVERTERS:
        cfg.game.objects[name] = GridObjectConfig(name=name)
    cfg.game.max_steps = max_steps
    cfg.game.obs.width = 11
    cfg.game.obs.height = 11
    cfg.game.obs.num_tokens = 200
    return cfg


def run(cfg, steps: int, seed: int) -> tuple[float, int]:
    """Seconds for ``steps`` random-action steps (resets included) and the agent count."""
    simulator = Simulator()
    episode = 0
    sim = simulator.new_simulation(cfg, seed=seed)
    num_agents = sim.num_agents
    num_actions = len(sim.action_names)
    actions = np.random.default_rng(seed).integers(0, num_actions, (steps, num_agents))
    actions = actions.astype(sim._c_sim.actions().dtype)
    start = time.perf_counter()
    c_sim = sim._c_sim
    buffer = c_sim.actions()
    for i in range(steps):
        buffer[:] = actions[i]
        c_sim.step()
        if c_sim.truncations()[0] or c_sim.terminals()[0]:
            episode += 1
            sim = simulator.new_simulation(cfg, seed=seed + episode)
            c_sim = sim._c_sim
            buffer = c_sim.actions()
    return time.perf_counter() - start, num_agents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats")
    parser.add_argument("--rooms", type=int, default=4, help="rooms (a square number)")
    parser.add_argument("--agents-per-room", type=int, default=6)
    parser.add_argument("--room-size", type=int, default=25)
    parser.add_argument("--max-steps", type=int, default=1000, help="episode length")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cfg = arena_config(args.rooms, args.agents_per_room, args.room_size, args.max_steps)
    run(cfg, min(args.steps, 1000), args.seed)  # warm-up
    times = []
    for r in range(args.repeats):
        seconds, num_agents = run(cfg, args.steps, args.seed + 1000 * (r + 1))
        times.append(seconds)
    best, median = min(times), statistics.median(times)
    print(
        json.dumps(
            {
                "mettagrid": mettagrid.__version__ if hasattr(mettagrid, "__version__") else "?",
                "agents": num_agents,
                "steps": args.steps,
                "repeats": args.repeats,
                "env_steps_per_s_best": args.steps / best,
                "agent_steps_per_s_best": args.steps * num_agents / best,
                "agent_steps_per_s_median": args.steps * num_agents / median,
                "action_names": cfg.game.actions and [a.name for a in cfg.game.actions.actions()],
            }
        )
    )


if __name__ == "__main__":
    main()
