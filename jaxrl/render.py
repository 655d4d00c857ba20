"""Render an episode of a trained policy (or of the scripted RulePolicy) to a GIF.

    python -m jaxrl.render --run-dir DIR --out match.gif [--step S] [--stage N] [--seconds 20]
    python -m jaxrl.render --rule-policy --out rule.gif [--env-kwargs '{blue_size: 2}']

Only environments with a renderer are supported (``Soccer``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import yaml

import envs
from jaxrl.checkpoint import CheckpointError
from jaxrl.config import ConfigError
from jaxrl.curriculum import stage_params
from jaxrl.evaluate import load_policy
from jaxrl.normalize import normalize
from jaxrl.rollout import act, per_actor, per_env
from jaxrl.setup import Setup


def unwrap_state(state: Any) -> Any:
    """The innermost env state under the trainer's wrappers."""
    while hasattr(state, "env_state"):
        state = state.env_state
    return state


def policy_states(
    setup: Setup, policy, env_params, key: jax.Array, num_steps: int, deterministic: bool
) -> Any:
    """States ``[num_steps + 1]`` of one env driven by the restored policy (auto-resets)."""
    key_reset, key_play = jax.random.split(key)
    del key
    enabled = setup.config.env.normalize_obs
    obs, state = setup.env.reset(key_reset, env_params)
    obs = per_actor(setup, obs[None], per_agent=True)
    hidden = setup.network.initial_hidden(setup.num_agents)
    is_first = jnp.ones((setup.num_agents,), bool)

    def body(carry, key):
        obs, state, hidden, is_first = carry
        key_act, key_step = jax.random.split(key)
        hidden, action, _, _ = act(
            setup,
            policy.params,
            hidden,
            normalize(policy.obs_stats, obs, enabled),
            is_first,
            key_act,
            deterministic,
        )
        obs, state, _, terminated, truncated, _ = setup.env.step(
            key_step, state, per_env(setup, action)[0], env_params
        )
        obs = per_actor(setup, obs[None], per_agent=True)
        done = jnp.repeat(jnp.logical_or(terminated, truncated)[None], setup.num_agents)
        return (obs, state, hidden, done), unwrap_state(state)

    _, states = jax.lax.scan(
        body, (obs, state, hidden, is_first), jax.random.split(key_play, num_steps)
    )
    first = unwrap_state(state)
    return jax.tree.map(lambda s0, s: jnp.concatenate([s0[None], s]), first, states)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m jaxrl.render``."""
    parser = argparse.ArgumentParser(prog="python -m jaxrl.render", description=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run-dir", help="a soccer run directory written by jaxrl.train")
    source.add_argument(
        "--rule-policy", action="store_true", help="blue plays the scripted RulePolicy"
    )
    parser.add_argument("--out", required=True, help="output GIF path")
    parser.add_argument("--step", type=int, help="checkpoint update step (default: latest)")
    parser.add_argument("--stage", type=int, help="curriculum stage (default: the last)")
    parser.add_argument(
        "--env-kwargs", default="{}", help="YAML mapping of Soccer EnvParams overrides"
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the clip")
    parser.add_argument("--fps", type=int, default=15, help="GIF frames per second")
    parser.add_argument("--seed", type=int, default=0, help="episode seed")
    parser.add_argument("--stochastic", action="store_true", help="sample policy actions")
    args = parser.parse_args(argv)

    from envs.soccer import render, rollout_states  # noqa: PLC0415
    from envs.soccer.env import RULE  # noqa: PLC0415
    from envs.soccer.physics import STEP_DT  # noqa: PLC0415

    try:
        overrides = yaml.safe_load(args.env_kwargs) or {}
        if not isinstance(overrides, dict):
            raise ConfigError(f"--env-kwargs must be a mapping, got {args.env_kwargs!r}")
        num_steps = max(1, round(args.seconds / STEP_DT))
        key = jax.random.key(args.seed)
        if args.rule_policy:
            env, env_params = envs.make("Soccer", **overrides)
            play = jax.jit(rollout_states, static_argnums=(0, 4))
            states = play(env, key, env_params, jnp.asarray(RULE, jnp.int32), num_steps)
        else:
            setup, policy, step = load_policy(args.run_dir, args.step)
            if setup.config.env.name != "Soccer":
                raise ConfigError(f"only Soccer runs can be rendered, not {setup.config.env.name}")
            env_params = setup.env_params
            if setup.curriculum is not None:
                last = setup.curriculum.num_stages - 1
                stage = last if args.stage is None else args.stage
                env_params = stage_params(setup.curriculum, env_params, jnp.asarray(stage))
            env_params = envs.override_params(env_params, overrides)
            play = jax.jit(policy_states, static_argnums=(0, 4, 5))
            states = play(setup, policy, env_params, key, num_steps, not args.stochastic)
        frames = render.render_frames(jax.device_get(states), env_params)
        render.save_gif(frames, Path(args.out), fps=args.fps)
    except (ConfigError, CheckpointError, ValueError, yaml.YAMLError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"wrote {len(frames)} frames to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
