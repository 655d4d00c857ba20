"""Restore a policy from a run's checkpoint and measure its return.

    python -m jaxrl.evaluate --run-dir DIR [--episodes N] [--step S] [--json]

The same as a function for notebooks::

    from jaxrl.evaluate import evaluate
    result = evaluate("runs/cartpole-...", episodes=32)
    print(result.mean_return, result.std_return)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.checkpoint import Checkpointer, CheckpointError, PolicyState
from jaxrl.config import ConfigError, load_config
from jaxrl.curriculum import stage_params
from jaxrl.normalize import normalize
from jaxrl.rollout import OUTCOME_KEY, act, agent_mask, per_actor, per_env, reset_actors
from jaxrl.setup import Setup, init_params, make_setup
from jaxrl.types import RunningStats


@dataclasses.dataclass(frozen=True)
class EvalResult:
    """Returns of ``episodes`` independent episodes of a restored policy."""

    mean_return: float
    std_return: float
    mean_length: float
    returns: tuple[float, ...]
    step: int  # update step of the checkpoint
    episodes: int
    deterministic: bool
    outcomes: dict = dataclasses.field(default_factory=dict)  # mean env-reported outcomes

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return dataclasses.asdict(self)


class EpisodeStats(struct.PyTreeNode):
    """First-episode results of ``E`` evaluation envs."""

    episode_return: jax.Array  # [E] float32
    episode_length: jax.Array  # [E] int32
    outcome: Any  # {name: [E] float32} env-reported outcomes (e.g. soccer win)


class EvalCarry(struct.PyTreeNode):
    """State of the evaluation loop over ``E`` envs (``E * A`` actors), one episode each."""

    obs: jax.Array  # [E * A, *obs_shape] raw observation per actor
    env_state: Any  # [E] env state
    hidden: Any  # [E * A, ...] recurrent carry
    is_first: jax.Array  # [E * A] bool
    done: jax.Array  # [E] bool, the env's first episode has ended
    stats: EpisodeStats
    key: jax.Array


def run_episodes(
    setup: Setup,
    policy: PolicyState,
    key: jax.Array,
    episodes: int,
    deterministic: bool = True,
    env_params: Any = None,
) -> EpisodeStats:
    """Play one episode in each of ``episodes`` vmapped envs.

    Deterministic play takes the mode of the action distribution (argmax or the mean).
    ``env_params`` defaults to the run's env params. In a multi-agent env an episode's
    return is the mean return of its active learner agents.
    """
    env_params = setup.env_params if env_params is None else env_params
    key_reset, key_loop = jax.random.split(key)
    del key
    enabled = setup.config.env.normalize_obs
    start = reset_actors(setup, env_params, key_reset, episodes, policy.obs_stats)

    def body(c: EvalCarry) -> EvalCarry:
        key, key_act, key_env = jax.random.split(c.key, 3)
        obs_norm = normalize(policy.obs_stats, c.obs, enabled)
        hidden, action, _, _ = act(
            setup, policy.params, c.hidden, obs_norm, c.is_first, key_act, deterministic
        )
        obs, env_state, _, terminated, truncated, info = jax.vmap(
            setup.env.step, in_axes=(0, 0, 0, None)
        )(jax.random.split(key_env, episodes), c.env_state, per_env(setup, action), env_params)
        # Record each env's first episode only; later episodes (after auto-reset) are ignored.
        finished = jnp.logical_and(info["episode_done"], ~c.done)  # [E]
        mask = agent_mask(setup, info)
        mask = jnp.ones((episodes, 1), bool) if mask is None else per_env(setup, mask)
        returns = info["episode_return"].reshape(episodes, -1)  # [E, A] or [E, 1]
        mean_return = (returns * mask).sum(-1) / jnp.maximum(mask.sum(-1), 1)
        outcome = info.get(OUTCOME_KEY, {})
        return EvalCarry(
            obs=per_actor(setup, obs, per_agent=True).astype(jnp.float32),
            env_state=env_state,
            hidden=hidden,
            is_first=per_actor(setup, jnp.logical_or(terminated, truncated), per_agent=False),
            done=jnp.logical_or(c.done, finished),
            stats=EpisodeStats(
                episode_return=jnp.where(finished, mean_return, c.stats.episode_return),
                episode_length=jnp.where(finished, info["episode_length"], c.stats.episode_length),
                outcome={
                    name: jnp.where(finished, outcome[name], value)
                    for name, value in c.stats.outcome.items()
                },
            ),
            key=key,
        )

    zeros = jnp.zeros(episodes, jnp.float32)
    init = EvalCarry(
        obs=start.obs,
        env_state=start.env_state,
        hidden=start.hidden,
        is_first=start.is_first,
        done=jnp.zeros(episodes, bool),
        stats=EpisodeStats(
            episode_return=zeros,
            episode_length=jnp.zeros(episodes, jnp.int32),
            outcome={name: zeros for name in setup.outcome_names},
        ),
        key=key_loop,
    )
    return jax.lax.while_loop(lambda c: ~c.done.all(), body, init).stats


def load_policy(run_dir: str | Path, step: int | None = None) -> tuple[Setup, PolicyState, int]:
    """Config, env and network of a run, with params restored from a checkpoint."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise CheckpointError(f"{run_dir} is not a run directory (no config.yaml)")
    config = load_config(run_dir / "config.yaml")
    setup = make_setup(config)
    like = PolicyState(
        params=init_params(setup, jax.random.key(0)),
        obs_stats=RunningStats.create(setup.obs_shape),
    )
    checkpointer = Checkpointer(run_dir, keep=config.checkpoint.keep, create=False)
    try:
        policy, step = checkpointer.restore_policy(like, step)
    finally:
        checkpointer.close()
    return setup, policy, step


def evaluate(
    run_dir: str | Path,
    episodes: int = 16,
    step: int | None = None,
    seed: int = 0,
    deterministic: bool = True,
    stage: int | None = None,
) -> EvalResult:
    """Restore params (latest checkpoint or ``step``) and play ``episodes`` episodes.

    For a curriculum run, the episodes use the params of curriculum ``stage`` (default:
    the last stage, the task the curriculum leads to).
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    setup, policy, step = load_policy(run_dir, step)
    env_params = setup.env_params
    if setup.curriculum is not None:
        last = setup.curriculum.num_stages - 1
        stage = last if stage is None else stage
        if not 0 <= stage <= last:
            raise ValueError(f"stage must be in 0..{last}, got {stage}")
        env_params = stage_params(setup.curriculum, setup.env_params, jnp.asarray(stage))
    elif stage not in (None, 0):
        raise ValueError("this run has no curriculum stages")
    play = jax.jit(run_episodes, static_argnums=(0, 3, 4))
    stats = jax.device_get(
        play(setup, policy, jax.random.key(seed), episodes, deterministic, env_params)
    )
    returns = np.asarray(stats.episode_return, dtype=np.float64)
    lengths = stats.episode_length
    return EvalResult(
        mean_return=float(returns.mean()),
        std_return=float(returns.std()),
        mean_length=float(np.mean(lengths)),
        returns=tuple(float(r) for r in returns),
        step=int(step),
        episodes=episodes,
        deterministic=deterministic,
        outcomes={name: float(np.mean(v)) for name, v in stats.outcome.items()},
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m jaxrl.evaluate``."""
    parser = argparse.ArgumentParser(
        prog="python -m jaxrl.evaluate", description="Evaluate a checkpointed policy."
    )
    parser.add_argument("--run-dir", required=True, help="a run directory written by jaxrl.train")
    parser.add_argument("--episodes", type=int, default=16, help="episodes to play (vmapped)")
    parser.add_argument("--step", type=int, help="checkpoint update step (default: latest)")
    parser.add_argument("--seed", type=int, default=0, help="evaluation seed")
    parser.add_argument(
        "--stochastic", action="store_true", help="sample actions instead of the mode"
    )
    parser.add_argument(
        "--stage", type=int, help="curriculum stage to play (default: the last stage)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        result = evaluate(
            args.run_dir, args.episodes, args.step, args.seed, not args.stochastic, args.stage
        )
    except (CheckpointError, ConfigError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(
            f"step {result.step}: return {result.mean_return:.2f} +- {result.std_return:.2f} "
            f"over {result.episodes} episodes (mean length {result.mean_length:.1f}, "
            f"{'deterministic' if result.deterministic else 'stochastic'} actions)"
            + "".join(f", {k} {v:.3f}" for k, v in result.outcomes.items())
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
