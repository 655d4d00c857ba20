"""Host-side rendering of MettaArena states to RGB frames and GIFs (numpy + Pillow, no tracing).

Each frame shows the floor from above (walls grey, mines brown, generators yellow, altars
red, lasery purple, armory teal; a converter's outputs as white dots, a cooling converter
darker), the agents as circles coloured by room with a tick for their orientation (frozen
agents pale blue), and a side panel with every agent's inventory (ore, battery, heart,
armor, laser) and the hearts it took from altars.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from PIL import Image, ImageDraw

from jaxrl.envs.grid import rules as grid_rules
from jaxrl.envs.grid.env import PAD

STEP_DT = 0.1  # seconds of GIF per env step at the renderer's default pace (jaxrl.commands.render)
CELL = 10  # pixels per cell
PANEL = 190  # pixels of the inventory panel
HUD = 18  # pixels of the step counter bar

FLOOR = (28, 30, 36)
WALL = (110, 110, 120)
KIND_COLOURS = (
    (150, 95, 50),  # mine
    (225, 200, 60),  # generator
    (220, 50, 60),  # altar
    (160, 80, 200),  # lasery
    (50, 170, 170),  # armory
)
ROOM_COLOURS = ((70, 140, 255), (255, 150, 40), (90, 210, 110), (240, 90, 200))
FROZEN = (190, 220, 255)
TEXT = (230, 230, 230)
_DIRS = grid_rules.DELTA  # (drow, dcol) per orientation


def _frame(world: Any, time: int, agents_per_room: int) -> np.ndarray:
    """One RGB frame of one env's world (numpy arrays, no batch axis)."""
    grid = np.asarray(world.grid)
    height, width = grid.shape[0] - 2 * PAD, grid.shape[1] - 2 * PAD
    img = Image.new("RGB", (width * CELL + PANEL, height * CELL + HUD), FLOOR)
    draw = ImageDraw.Draw(img)

    def box(r, c, inset=0):
        x, y = (c - PAD) * CELL, (r - PAD) * CELL + HUD
        return (x + inset, y + inset, x + CELL - 1 - inset, y + CELL - 1 - inset)

    for r, c in zip(*np.nonzero(grid == grid_rules.WALL), strict=True):
        if PAD <= r < PAD + height and PAD <= c < PAD + width:
            draw.rectangle(box(r, c), fill=WALL)
    conv_inv = np.asarray(world.conv_inv)
    conv_phase = np.asarray(world.conv_phase)
    for j, kind in enumerate(np.asarray(world.conv_kind)):
        r, c = np.argwhere(grid == grid_rules.CONVERTER0 + j)[0]
        colour = KIND_COLOURS[kind]
        if conv_phase[j] != grid_rules.IDLE:
            colour = tuple(v // 2 for v in colour)
        draw.rectangle(box(r, c), fill=colour)
        outputs = int((conv_inv[j] * (grid_rules.RECIPE_OUT[kind] > 0)).sum())
        x0, y0, _, _ = box(r, c)
        for k in range(min(outputs, 5)):
            draw.point((x0 + 1 + 2 * k, y0 + CELL - 3), fill=(255, 255, 255))
    pos = np.asarray(world.agent_pos)
    ori = np.asarray(world.agent_ori)
    frozen = np.asarray(world.frozen)
    for i, (r, c) in enumerate(pos):
        colour = FROZEN if frozen[i] > 0 else ROOM_COLOURS[(i // agents_per_room) % 4]
        draw.ellipse(box(r, c, 1), fill=colour)
        cx, cy = (c - PAD) * CELL + CELL / 2, (r - PAD) * CELL + HUD + CELL / 2
        dr, dc = _DIRS[ori[i]]
        draw.line((cx, cy, cx + dc * CELL / 2, cy + dr * CELL / 2), fill=(0, 0, 0), width=2)
    inv = np.asarray(world.agent_inv)
    hearts = np.asarray(world.hearts)
    x = width * CELL + 6
    draw.text((x, 2), "agent ore bat hrt arm las | got", fill=TEXT)
    draw.text((4, 2), f"step {time}", fill=TEXT)
    row_h = max(10, (height * CELL + HUD - 16) // max(len(inv), 1))
    for i in range(len(inv)):
        y = 16 + i * row_h
        draw.ellipse((x, y + 2, x + 6, y + 8), fill=ROOM_COLOURS[(i // agents_per_room) % 4])
        cells = " ".join(f"{int(v):3d}" for v in inv[i])
        draw.text((x + 10, y), f"{i:2d} {cells} | {int(hearts[i]):2d}", fill=TEXT)
    return np.asarray(img)


def render_frames(states: Any, env_params: Any, agents_per_room: int = 6) -> list[np.ndarray]:
    """RGB frames of stacked states ``[T]`` (an ``EnvState`` with a leading time axis)."""
    del env_params
    states = jax.device_get(states)
    times = np.asarray(states.time)
    return [
        _frame(jax.tree.map(lambda x, t=t: x[t], states.world), int(times[t]), agents_per_room)
        for t in range(len(times))
    ]


def save_gif(frames: Sequence[np.ndarray], path: Path, fps: int = 15) -> None:
    """Write ``frames`` as a looping GIF."""
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f) for f in frames]
    images[0].save(
        path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0
    )
