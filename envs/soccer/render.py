"""Host-side rendering of soccer states to RGB frames and GIFs (numpy + Pillow, no JAX tracing).

The picture is the world frame seen from above with +y (the orange goal, which blue attacks)
at the top.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from PIL import Image, ImageDraw

from jaxrl.envs.soccer import physics
from jaxrl.envs.soccer.physics import (
    BALL_RADIUS,
    CAR_RADIUS,
    CORNER,
    GOAL_DEPTH,
    GOAL_HALF_WIDTH,
    HALF_LENGTH,
    HALF_WIDTH,
    MAX_PER_TEAM,
    STEP_DT,
)

SCALE = 40.0  # pixels per metre
MARGIN = 12  # pixels around the goals
HUD = 28  # pixels of score/clock bar at the top

GRASS = (46, 125, 50)
LINE = (230, 240, 230)
BLUE = (40, 110, 240)
ORANGE = (245, 140, 30)
BLUE_GOAL = (120, 160, 230)
ORANGE_GOAL = (240, 190, 120)
BALL = (250, 250, 250)
BACKGROUND = (25, 25, 30)


def _size() -> tuple[int, int]:
    width = int(2 * HALF_WIDTH * SCALE) + 2 * MARGIN
    height = int(2 * (HALF_LENGTH + GOAL_DEPTH) * SCALE) + 2 * MARGIN + HUD
    return width, height


def _px(x: float, y: float) -> tuple[float, float]:
    """World (x, y) -> pixel (column, row); +y is up."""
    width, _ = _size()
    col = width / 2 + x * SCALE
    row = HUD + MARGIN + (HALF_LENGTH + GOAL_DEPTH - y) * SCALE
    return col, row


def _field_polygon() -> list[tuple[float, float]]:
    """Field outline with the goal boxes, counter-clockwise from the blue goal's back-left."""
    w, h, c, g, d = HALF_WIDTH, HALF_LENGTH, CORNER, GOAL_HALF_WIDTH, GOAL_DEPTH
    points = [
        (-g, -h - d), (g, -h - d), (g, -h), (w - c, -h), (w, -h + c), (w, h - c), (w - c, h),
        (g, h), (g, h + d), (-g, h + d), (-g, h), (-w + c, h), (-w, h - c), (-w, -h + c),
        (-w + c, -h), (-g, -h),
    ]  # fmt: skip
    return [_px(x, y) for x, y in points]


def _circle(draw: ImageDraw.ImageDraw, x: float, y: float, r: float, fill, outline=None):
    col, row = _px(x, y)
    rp = r * SCALE
    draw.ellipse([col - rp, row - rp, col + rp, row + rp], fill=fill, outline=outline, width=2)


def _background() -> Image.Image:
    img = Image.new("RGB", _size(), BACKGROUND)
    draw = ImageDraw.Draw(img)
    draw.polygon(_field_polygon(), fill=GRASS, outline=LINE, width=2)
    for sign, colour in ((-1.0, BLUE_GOAL), (1.0, ORANGE_GOAL)):
        y0, y1 = sorted((sign * HALF_LENGTH, sign * (HALF_LENGTH + GOAL_DEPTH)))
        (c0, r0), (c1, r1) = _px(-GOAL_HALF_WIDTH, y1), _px(GOAL_HALF_WIDTH, y0)
        draw.rectangle([c0 + 2, r0 + 2, c1 - 2, r1 - 2], fill=colour)
        goal_line = [_px(x, sign * HALF_LENGTH) for x in (-GOAL_HALF_WIDTH, GOAL_HALF_WIDTH)]
        draw.line(goal_line, fill=LINE, width=2)
    draw.line([_px(-HALF_WIDTH, 0.0), _px(HALF_WIDTH, 0.0)], fill=LINE, width=1)
    _circle(draw, 0.0, 0.0, 1.0, fill=None, outline=LINE)
    return img


def _frame(background: Image.Image, state: Any, max_steps: int) -> np.ndarray:
    """One state (numpy leaves, no batch axis) -> uint8 [H, W, 3]."""
    img = background.copy()
    draw = ImageDraw.Draw(img)
    bodies = state.bodies
    for i in range(physics.NUM_CARS):
        if not bool(state.car_active[i]):
            continue
        x, y = (float(v) for v in bodies.car_pos[i])
        heading = float(bodies.car_heading[i])
        colour = BLUE if i < MAX_PER_TEAM else ORANGE
        _circle(draw, x, y, CAR_RADIUS, fill=colour, outline=(20, 20, 20))
        nose = (x + CAR_RADIUS * 1.4 * math.cos(heading), y + CAR_RADIUS * 1.4 * math.sin(heading))
        draw.line([_px(x, y), _px(*nose)], fill=(255, 255, 255), width=3)
        # Boost meter: a small bar under the car.
        col, row = _px(x, y - CAR_RADIUS - 0.08)
        length = 2 * CAR_RADIUS * SCALE
        draw.rectangle([col - length / 2, row - 2, col + length / 2, row + 2], fill=(60, 60, 60))
        filled = length * float(np.clip(bodies.car_boost[i], 0.0, 1.0))
        draw.rectangle([col - length / 2, row - 2, col - length / 2 + filled, row + 2],
                       fill=(255, 220, 60))  # fmt: skip
    bx, by = (float(v) for v in bodies.ball_pos)
    _circle(draw, bx, by, BALL_RADIUS, fill=BALL, outline=(0, 0, 0))

    seconds_left = max(0.0, (max_steps - int(state.time)) * STEP_DT)
    clock = f"{int(seconds_left) // 60}:{int(seconds_left) % 60:02d}"
    width, _ = _size()
    draw.text((10, 8), f"BLUE {int(state.score[0])}", fill=BLUE)
    draw.text((width - 80, 8), f"{int(state.score[1])} ORANGE", fill=ORANGE)
    draw.text((width / 2 - 14, 8), clock, fill=(255, 255, 255))
    return np.asarray(img, dtype=np.uint8)


def render_frames(states: Any, params: Any) -> list[np.ndarray]:
    """Draw soccer states.

    Args:
      states: an ``EnvState`` with a leading time axis (e.g. from ``rollout_states``), a single
        unbatched ``EnvState``, or a sequence of unbatched states.
      params: the ``EnvParams`` used (for the match clock).

    Returns:
      A list of uint8 [H, W, 3] frames, one per state.
    """
    if isinstance(states, Sequence):
        states = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *states)
    states = jax.tree.map(np.asarray, states)
    if states.time.ndim == 0:
        states = jax.tree.map(lambda x: x[None], states)
    max_steps = int(np.asarray(params.max_steps_in_episode))
    background = _background()
    num = states.time.shape[0]
    return [
        _frame(background, jax.tree.map(lambda x, t=t: x[t], states), max_steps) for t in range(num)
    ]


def save_gif(frames: Sequence[np.ndarray], path: str | Path, fps: int = 15) -> None:
    """Write frames (uint8 [H, W, 3]) to an animated GIF at ``fps`` frames per second."""
    if not frames:
        raise ValueError("no frames to save")
    images = [Image.fromarray(np.asarray(f, dtype=np.uint8)) for f in frames]
    images[0].save(
        path,
        save_all=True,
        append_images=images[1:],
        duration=max(1, round(1000 / fps)),
        loop=0,
        optimize=False,
    )
