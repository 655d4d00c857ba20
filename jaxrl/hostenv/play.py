"""Play outside training for a host run (``env.backend: gymnasium | envpool``).

The host counterpart of :mod:`jaxrl.run.play`: a host run's policy restored from its
checkpoint (:func:`restore_host_policy`), its episodes on fresh host envs
(:func:`play_episodes`, :func:`evaluate_host`) and, for a gymnasium env that draws
``rgb_array`` frames, one clip of it (:func:`render_frames`). Every action comes from
:func:`jaxrl.core.acting.act`, as in training; Box actions are clipped to the env's bounds
before they are stepped, as the actor does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxrl.config import Config
from jaxrl.config.loader import load_run_config
from jaxrl.core.acting import PolicyParams, act
from jaxrl.hostenv.learner import HostSpec, host_spec, init_runner, policy_of
from jaxrl.hostenv.vecenv import make_vec
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.eval_result import EvalResult

DEFAULT_RENDER_FPS = 30  # frames per second of a gymnasium env that names none


class HostRenderError(ValueError):
    """A host run's env cannot draw frames (one line: why, and what to do)."""


def restore_host_policy(
    run_dir: str | Path, step: int | None
) -> tuple[HostSpec, PolicyParams, int]:
    """``(spec, policy, step)``: a host run's built spec and its policy at ``step`` (None: the
    latest checkpoint).

    Raises:
      jaxrl.run.checkpoint.CheckpointError: no checkpoints, or none at ``step``.
    """
    config = load_run_config(run_dir)
    spec = host_spec(config)
    like = policy_of(init_runner(spec, jax.random.key(0)))
    checkpointer = Checkpointer(run_dir, keep=config.checkpoint.keep, create=False)
    try:
        policy, step = checkpointer.restore_policy(like, step)
    finally:
        checkpointer.close()
    return spec, policy, int(step)


def act_fn(spec: HostSpec, deterministic: bool) -> Any:
    """Jitted ``(policy, hidden, obs [B, *obs], is_first [B], key) -> ActOutput``."""
    return jax.jit(
        lambda p, h, o, f, k: act(spec.policy, p, h, o, f, k, deterministic=deterministic)
    )


def host_action(spec: HostSpec, action: Any) -> np.ndarray:
    """The actions ``[B]`` or ``[B, A]`` a host env steps: Box actions clipped to its bounds."""
    action = np.asarray(action)
    if not spec.spaces.discrete:
        action = np.clip(action, spec.spaces.action_low, spec.spaces.action_high)
    return action


def play_episodes(
    spec: HostSpec, vec: Any, policy: PolicyParams, episodes: int, seed: int, deterministic: bool
) -> tuple[list[float], list[int]]:
    """Returns and lengths of the first ``episodes`` episodes ``vec`` finishes under ``policy``."""
    step_fn = act_fn(spec, deterministic)
    key = jax.random.key(seed)
    obs, is_first = vec.reset(), np.ones(vec.num_envs, bool)
    hidden = spec.network.initial_hidden(vec.num_envs)
    ret, length = np.zeros(vec.num_envs), np.zeros(vec.num_envs, int)
    returns: list[float] = []
    lengths: list[int] = []
    t = 0
    while len(returns) < episodes:
        out = step_fn(policy, hidden, obs, is_first, jax.random.fold_in(key, t))
        step = vec.step(host_action(spec, out.action))
        ret += step.raw_reward
        length += 1
        done = step.terminated | step.truncated
        for i in np.nonzero(done)[0]:
            returns.append(float(ret[i]))
            lengths.append(int(length[i]))
        ret[done], length[done] = 0.0, 0
        obs, is_first, hidden, t = step.obs, done, out.hidden, t + 1
    return returns[:episodes], lengths[:episodes]


def evaluate_policy_host(
    spec: HostSpec, policy: PolicyParams, step: int, episodes: int, seed: int, deterministic: bool
) -> EvalResult:
    """:func:`evaluate_host` of a policy in hand (e.g. trained in memory)."""
    config = spec.config
    num_envs = min(episodes, config.env.num_envs)
    vec = make_vec(config.env.backend, config.env.name, num_envs, seed, config.env.kwargs)
    try:
        returns, lengths = play_episodes(spec, vec, policy, episodes, seed, deterministic)
    finally:
        vec.close()
    returns_arr = np.asarray(returns, np.float64)
    return EvalResult(
        mean_return=float(returns_arr.mean()),
        std_return=float(returns_arr.std()),
        mean_length=float(np.mean(lengths)),
        returns=tuple(returns),
        step=int(step),
        episodes=episodes,
        actions="greedy" if deterministic else "sample",
    )


def evaluate_host(
    run_dir: str | Path, episodes: int, step: int | None, seed: int, deterministic: bool
) -> EvalResult:
    """``episodes`` episodes of a host run's checkpointed policy on fresh host envs.

    Returns a :class:`jaxrl.run.eval_result.EvalResult` (the first ``episodes`` episodes to
    end, on ``min(episodes, env.num_envs)`` envs seeded with ``seed``).
    """
    spec, policy, step = restore_host_policy(run_dir, step)
    return evaluate_policy_host(spec, policy, step, episodes, seed, deterministic)


# ----------------------------------------------------------------------------- rendering


def render_env(config: Config) -> Any:
    """One gymnasium env of the run that draws ``rgb_array`` frames.

    Raises:
      HostRenderError: an EnvPool run, or an env that does not draw (one line).
    """
    env = config.env
    if env.backend != "gymnasium":
        raise HostRenderError(
            f"env.backend={env.backend} envs do not draw frames ({env.name}); jaxrl render "
            "draws gymnasium envs (render_mode='rgb_array') and envs with a renderer"
        )
    import gymnasium  # noqa: PLC0415 - optional dependency

    for driver in ("SDL_AUDIODRIVER", "SDL_VIDEODRIVER"):  # pygame draws off-screen: no sound
        os.environ.setdefault(driver, "dummy")  # card or display wanted (nor their warnings)

    try:
        game = gymnasium.make(env.name, render_mode="rgb_array", **env.kwargs)
    except (gymnasium.error.Error, ImportError, TypeError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise HostRenderError(f"gymnasium {env.name} cannot draw frames: {first}") from None
    if "rgb_array" not in game.metadata.get("render_modes", ()):
        game.close()
        raise HostRenderError(f"gymnasium {env.name} has no render_mode 'rgb_array'")
    return game


def step_dt(game: Any) -> float:
    """Seconds of clip per env step: the env's own ``render_fps`` (else 30 frames a second)."""
    return 1.0 / float(game.metadata.get("render_fps") or DEFAULT_RENDER_FPS)


def render_frames(
    spec: HostSpec, game: Any, policy: PolicyParams, num_steps: int, seed: int, deterministic: bool
) -> list[np.ndarray]:
    """uint8 ``[H, W, 3]`` frames of ``num_steps`` steps of one env (``num_steps + 1``
    frames, the first after the reset; a finished episode restarts, as training's envs do)."""
    step_fn = act_fn(spec, deterministic)
    key = jax.random.key(seed)
    obs, _ = game.reset(seed=seed)
    is_first, hidden = np.ones(1, bool), spec.network.initial_hidden(1)
    frames = [np.asarray(game.render(), np.uint8)]
    for t in range(num_steps):
        batch = np.asarray(obs, spec.spaces.obs_dtype)[None]  # [1, *obs]
        out = step_fn(policy, hidden, batch, is_first, jax.random.fold_in(key, t))
        obs, _, terminated, truncated, _ = game.step(host_action(spec, out.action)[0])
        done = bool(terminated or truncated)
        if done:
            obs, _ = game.reset()
        frames.append(np.asarray(game.render(), np.uint8))
        is_first, hidden = np.array([done]), out.hidden
    return frames


def render_host(
    run_dir: str | Path, step: int | None, seconds: float, seed: int, deterministic: bool
) -> list[np.ndarray]:
    """Frames of about ``seconds`` of a gymnasium run's policy playing one env.

    Raises:
      HostRenderError: the env does not draw; CheckpointError: no checkpoint at ``step``.
    """
    config = load_run_config(run_dir)
    game = render_env(config)  # refused before anything is restored
    try:
        spec, policy, _ = restore_host_policy(run_dir, step)
        num_steps = max(1, round(seconds / step_dt(game)))
        return render_frames(spec, game, policy, num_steps, seed, deterministic)
    finally:
        game.close()


def save_gif(frames: list[np.ndarray], path: Path, fps: int = 15) -> None:
    """Write ``frames`` as a looping GIF."""
    from PIL import Image  # noqa: PLC0415 - matplotlib's dependency, needed only here

    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f) for f in frames]
    images[0].save(
        path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0
    )
