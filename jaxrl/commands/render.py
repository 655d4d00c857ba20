"""Render an episode of a trained policy (or of the scripted RulePolicy) to a GIF.

    python -m jaxrl.render --run-dir DIR --out match.gif [--step S] [--stage N] [--member M]
        [--seconds 20] [--fps 15] [--seed 0] [--actions sample|greedy]
        [--env-kwargs '{blue_size: 2}']
    python -m jaxrl.render --rule-policy --out rule.gif [--seconds 20] [--fps 15] [--seed 0]
        [--env-kwargs '{blue_size: 2}']

Both go through the shared match step (:mod:`jaxrl.run.play`); with ``--rule-policy`` the
learner's team of a Soccer match plays the env's scripted RulePolicy.

Environments that declare a renderer render (:class:`jaxrl.envs.protocols.RenderableEnv`: ours,
e.g. ``Soccer``, ``MettaArena``, Craftax, and a user's env that declares
one). A gymnasium-backend run renders through gymnasium's ``render_mode="rgb_array"``
(:mod:`jaxrl.hostenv.play`); an EnvPool run does not render.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import jax
import yaml

from jaxrl import envs
from jaxrl.commands.cli import HelpFormatter, prog
from jaxrl.config import Config, ConfigError, EnvConfig
from jaxrl.core.acting import PolicyParams
from jaxrl.core.match import MatchCarry
from jaxrl.envs import protocols
from jaxrl.envs.protocols import Renderer
from jaxrl.run.checkpoint import CheckpointError, error_line
from jaxrl.run.play import (
    add_actions_flag,
    eval_layout,
    eval_spec,
    greedy,
    host_backend,
    load_policy,
    play_params,
    play_plan,
    play_steps,
    policy_like,
    scripted_kind,
)
from jaxrl.run.setup import Setup, make_setup


def policy_states(
    setup: Setup,
    policy: PolicyParams,
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
    plan = play_plan(layout, env_params, opponent_kind, learner_kind)

    def env_state(carry: MatchCarry) -> Any:
        return jax.tree.map(lambda x: x[0], envs.unwrap_state(carry.env_state))

    return play_steps(spec, setup.network.initial_hidden, policy, plan, key, num_steps, env_state)


def rule_policy_setup(overrides: dict) -> tuple[Setup, PolicyParams]:
    """A Soccer setup (tiny, unused network) for scripted play through the match step."""
    config = Config(env=EnvConfig(name="Soccer", num_envs=1, kwargs=overrides))
    setup = make_setup(config)
    return setup, policy_like(setup)


def _renderer(setup: Setup) -> Renderer:
    """The renderer the run's env declares (:class:`jaxrl.envs.protocols.RenderableEnv`)."""
    render = protocols.renderer(setup.env)
    if render is None:
        raise ConfigError(
            f"no renderer for {setup.config.env.name} runs (an env declares one: "
            "jaxrl.envs.protocols.RenderableEnv)"
        )
    return render


def build_parser() -> argparse.ArgumentParser:
    """Command line of ``python -m jaxrl.render``."""
    parser = argparse.ArgumentParser(
        prog=prog("jaxrl.commands.render"),
        description="Render an episode of a trained policy, or of the env's scripted "
        "RulePolicy, to a GIF. Envs that declare a renderer render (e.g. Soccer, MettaArena, "
        "Craftax, the Corridor example), and gymnasium-backend runs (render_mode rgb_array).",
        formatter_class=HelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--run-dir",
        help="a run directory written by jaxrl train (its env has a renderer, or a gymnasium run)",
    )
    source.add_argument(
        "--rule-policy", action="store_true", help="blue plays the scripted RulePolicy"
    )
    parser.add_argument("--out", required=True, help="output GIF path")
    parser.add_argument("--step", type=int, help="checkpoint update step (default: latest)")
    parser.add_argument("--stage", type=int, help="curriculum stage (default: the last)")
    parser.add_argument("--env-kwargs", default="{}", help="YAML mapping of EnvParams overrides")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the clip")
    parser.add_argument("--fps", type=int, default=15, help="GIF frames per second")
    parser.add_argument("--seed", type=int, default=0, help="episode seed")
    add_actions_flag(parser)
    parser.add_argument(
        "--member", type=int, default=0, help="runs with several seeds: the member index"
    )
    return parser


def _render_rule(args: argparse.Namespace, overrides: dict) -> tuple[list, Renderer]:
    """Frames of the scripted RulePolicy playing the learner's team of a Soccer match."""
    setup, policy = rule_policy_setup(overrides)
    render = _renderer(setup)
    num_steps = max(1, round(args.seconds / render.STEP_DT))
    play = jax.jit(policy_states, static_argnums=(0, 4, 5))
    rule = scripted_kind(setup, "rule", flag="--rule-policy")
    states = play(setup, policy, setup.env_params, jax.random.key(args.seed), num_steps, True, rule)
    return render.render_frames(jax.device_get(states), setup.env_params), render


def _render_run(args: argparse.Namespace, overrides: dict) -> tuple[list, Renderer]:
    """Frames of a JAX run's policy (``--member`` of a run of several) on its env."""
    setup, policy, _ = load_policy(args.run_dir, args.step)
    count = setup.members.count
    if count > 1:
        if not 0 <= args.member < count:
            raise ValueError(f"--member must be in 0..{count - 1}, got {args.member}")
        policy = jax.tree.map(lambda x: x[args.member], policy)
    render = _renderer(setup)
    num_steps = max(1, round(args.seconds / render.STEP_DT))
    env_params = play_params(setup, args.stage, overrides, overrides_flag="--env-kwargs")
    play = jax.jit(policy_states, static_argnums=(0, 4, 5))
    key = jax.random.key(args.seed)
    states = play(setup, policy, env_params, key, num_steps, greedy(args.actions))
    return render.render_frames(jax.device_get(states), env_params), render


def _render_host(args: argparse.Namespace, overrides: dict, backend: str) -> list:
    """Frames of a host run's policy on one gymnasium env (``render_mode="rgb_array"``)."""
    from jaxrl.hostenv import play as host_play  # noqa: PLC0415 - host runs only

    for flag, given in (("--stage", args.stage is not None), ("--env-kwargs", bool(overrides)),
                        ("--member", args.member != 0)):  # fmt: skip
        if given:
            raise ValueError(
                f"{flag}: an env.backend={backend} run has one member and no curriculum stages "
                "or EnvParams (its env is configured by env.kwargs)"
            )
    return host_play.render_host(
        args.run_dir, args.step, args.seconds, args.seed, greedy(args.actions)
    )


def _frames(args: argparse.Namespace) -> int:
    """Render what ``args`` asks for to ``--out``; returns the number of frames written."""
    overrides = yaml.safe_load(args.env_kwargs) or {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"--env-kwargs must be a mapping, got {args.env_kwargs!r}")
    if args.seconds <= 0:
        raise ValueError(f"--seconds must be > 0, got {args.seconds}")
    if args.fps < 1:
        raise ValueError(f"--fps must be >= 1, got {args.fps}")
    backend = None if args.rule_policy else host_backend(args.run_dir)
    if backend is not None:
        from jaxrl.hostenv.play import save_gif  # noqa: PLC0415 - host runs only

        frames = _render_host(args, overrides, backend)
        save_gif(frames, Path(args.out), fps=args.fps)
        return len(frames)
    frames, render = (_render_rule if args.rule_policy else _render_run)(args, overrides)
    render.save_gif(frames, Path(args.out), fps=args.fps)
    return len(frames)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m jaxrl.render``."""
    args = build_parser().parse_args(argv)
    try:
        count = _frames(args)
    except (ConfigError, ValueError, yaml.YAMLError) as err:  # bad input: exit 2
        print(f"error: {err}", file=sys.stderr)
        return 2
    except CheckpointError as err:
        line, status = error_line(err, "--step")  # an unreadable checkpoint: 2, a step to pick
        print(f"error: {line}", file=sys.stderr)
        return status
    print(f"wrote {count} frames to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
