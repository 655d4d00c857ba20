"""Host-side rendering of Craftax-Classic states to RGB frames and GIFs, with Craftax's own
pixel renderer (its textures at 16 pixels a block: a 144 x 144 view of the player's
surroundings and inventory). The full game's states: :mod:`jaxrl.envs.suites.craftax_render_full`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from PIL import Image

STEP_DT = 0.1  # seconds of GIF per env step at the renderer's default pace (jaxrl.commands.render)
BLOCK_PIXELS = 16  # pixels a block: one of the sizes Craftax ships textures for


@functools.cache
def _renderer(full: bool) -> Callable[[Any], jax.Array]:
    """Craftax's pixel renderer of one state, jitted and vmapped over time."""
    if full:
        from craftax.craftax.renderer import make_craftax_pixel_renderer  # noqa: PLC0415
    else:
        from craftax.craftax_classic.renderer import make_craftax_pixel_renderer  # noqa: PLC0415
    return jax.jit(jax.vmap(make_craftax_pixel_renderer(BLOCK_PIXELS)))


def frames_of(states: Any, full: bool) -> list[np.ndarray]:
    """uint8 ``[H, W, 3]`` frames of stacked Craftax states ``[T, ...]`` of one env."""
    pixels = np.asarray(_renderer(full)(states))  # [T, H, W, 3] float, 0..255
    return [frame for frame in np.clip(pixels, 0, 255).astype(np.uint8)]


def render_frames(states: Any, params: Any) -> list[np.ndarray]:
    """uint8 ``[H, W, 3]`` frames of stacked Craftax-Classic states ``[T, ...]``."""
    del params
    return frames_of(states, full=False)


def save_gif(frames: Sequence[np.ndarray], path: Path, fps: int = 15) -> None:
    """Write ``frames`` as a looping GIF."""
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f) for f in frames]
    images[0].save(
        path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0
    )
