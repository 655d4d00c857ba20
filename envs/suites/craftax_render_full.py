"""Host-side rendering of (full) Craftax states: :mod:`jaxrl.envs.suites.craftax_render` with the
full game's renderer."""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxrl.envs.suites.craftax_render import STEP_DT, frames_of, save_gif

__all__ = ["STEP_DT", "render_frames", "save_gif"]


def render_frames(states: Any, params: Any) -> list[np.ndarray]:
    """uint8 ``[H, W, 3]`` frames of stacked Craftax states ``[T, ...]``."""
    del params
    return frames_of(states, full=True)
