"""Frames of Corridor episodes; ``jaxrl render`` imports it through ``Corridor.renderer``."""

from pathlib import Path

import numpy as np
from PIL import Image

STEP_DT = 0.25  # seconds of GIF per env step


def render_frames(states, params) -> list[np.ndarray]:
    """uint8 [16, 16 * length, 3] frames of states [T]: grey cells, green exit, red agent."""
    cell, length = 16, int(params.length)
    frames = []
    for pos in np.asarray(states.pos).reshape(-1):
        frame = np.full((cell, cell * length, 3), 200, np.uint8)
        frame[:, (length - 1) * cell :] = (60, 180, 75)
        frame[2:-2, pos * cell + 2 : (pos + 1) * cell - 2] = (230, 25, 75)
        frames.append(frame)
    return frames


def save_gif(frames, path: Path, fps: int = 15) -> None:
    """Write ``frames`` to a looping GIF."""
    images = [Image.fromarray(frame) for frame in frames]
    duration = int(1000 / fps)
    images[0].save(path, save_all=True, append_images=images[1:], duration=duration, loop=0)
