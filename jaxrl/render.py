"""Render an episode of a trained policy (or of the scripted RulePolicy) to a GIF.

    python -m jaxrl.render --run-dir DIR --out match.gif [--step S] [--stage N] [--seconds 20]
    python -m jaxrl.render --rule-policy --out rule.gif [--env-kwargs '{blue_size: 2}']

Both go through the shared match step (:mod:`jaxrl.match`); with ``--rule-policy`` the
learner's team plays the env's scripted RulePolicy.

Only environments with a renderer are supported (``Soccer``, ``MettaArena``).
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
from jaxrl.acting import PolicyParams
from jaxrl.checkpoint import CheckpointError, PolicyState
from jaxrl.config import Config, ConfigError, EnvConfig
from jaxrl.curriculum import stage_params
from jaxrl.evaluate import eval_layout, eval_spec, load_policy
from jaxrl.match import idle_plan, match_step, start_matches
from jaxrl.setup import Setup, init_params, make_setup
from jaxrl.types import RunningStats


def unwrap_state(state: Any) -> Any:
    """The innermost env state under the trainer's wrappers."""
    while hasattr(state, "env_state"):
        state = state.env_state
    return state


def policy_states(
    setup: Setup,
    policy: PolicyState,
    env_params: Any,
    key: jax.Array,
    num_steps: int,
    deterministic: bool,
    learner_kind: Any = None,
    opponent_kind: Any = None,
) -> Any:
    """States ``[num_steps + 1]`` of one env played through the shared match step.

    The learner (team 0) is the restored policy, or the env's scripted ``learner_kind``;
    the other team plays ``opponent_kind`` (default: what the env params name).
    """
    layout = eval_layout(setup, 1)
    spec = eval_spec(setup, layout, deterministic)
    plan = idle_plan(layout, env_params)
    if opponent_kind is not None:
        plan = plan.replace(opponent_kind=jnp.full((1,), opponent_kind, jnp.int32))
    if learner_kind is not None:
        plan = plan.replace(learner_kind=jnp.full((1,), learner_kind, jnp.int32))
    key_reset, key_play = jax.random.split(key)
    del key
    learner = PolicyParams(params=policy.params, obs_stats=policy.obs_stats)
    start = start_matches(spec, setup.network.initial_hidden, plan, key_reset)

    def body(carry, key):
        carry, _ = match_step(spec, learner, plan, carry, key)
        return carry, unwrap_state(carry.env_state)

    _, states = jax.lax.scan(body, start, jax.random.split(key_play, num_steps))
    first = unwrap_state(start.env_state)
    return jax.tree.map(lambda s0, s: jnp.concatenate([s0, s[:, 0]]), first, states)


def rule_policy_setup(overrides: dict) -> tuple[Setup, PolicyState]:
    """A Soccer setup (tiny, unused network) for scripted play through the match step."""
    config = Config(env=EnvConfig(name="Soccer", num_envs=1, kwargs=overrides))
    setup = make_setup(config)
    policy = PolicyState(
        params=init_params(setup, jax.random.key(0)),
        obs_stats=RunningStats.create(setup.obs_shape),
    )
    return setup, policy


def _renderer(env_name: str) -> tuple[Any, float]:
    """``(renderer module, seconds per env step)`` of ``env_name`` (imported on demand)."""
    if env_name == "Soccer":
        from envs.soccer import render  # noqa: PLC0415
        from envs.soccer.physics import STEP_DT  # noqa: PLC0415

        return render, STEP_DT
    if env_name == "MettaArena":
        from envs.grid import render  # noqa: PLC0415

        return render, render.STEP_DT
    raise ConfigError(f"no renderer for {env_name} runs")


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
    parser.add_argument(
        "--member", type=int, default=0, help="runs with several seeds: the member index"
    )
    args = parser.parse_args(argv)

    try:
        overrides = yaml.safe_load(args.env_kwargs) or {}
        if not isinstance(overrides, dict):
            raise ConfigError(f"--env-kwargs must be a mapping, got {args.env_kwargs!r}")
        key = jax.random.key(args.seed)
        if args.rule_policy:
            render, step_dt = _renderer("Soccer")
            num_steps = max(1, round(args.seconds / step_dt))
            setup, policy = rule_policy_setup(overrides)
            env_params = setup.env_params
            play = jax.jit(policy_states, static_argnums=(0, 4, 5))
            rule = int(setup.env.scripted_kinds["rule"])
            states = play(setup, policy, env_params, key, num_steps, True, rule)
        else:
            setup, policy, step = load_policy(args.run_dir, args.step)
            count = setup.members.count
            if count > 1:
                if not 0 <= args.member < count:
                    raise ValueError(f"--member must be in 0..{count - 1}, got {args.member}")
                policy = jax.tree.map(lambda x: x[args.member], policy)
            render, step_dt = _renderer(setup.config.env.name)
            num_steps = max(1, round(args.seconds / step_dt))
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
