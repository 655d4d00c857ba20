"""Restore a policy from a run's checkpoint and measure its return.

    python -m jaxrl.evaluate --run-dir DIR [--episodes N] [--step S] [--actions sample|greedy]
        [--json]

The same as a function for notebooks::

    from jaxrl.commands.evaluate import evaluate
    result = evaluate("runs/cartpole-...", episodes=32)
    print(result.mean_return, result.std_return)

Actions are sampled from the policy by default (``actions="sample"``): PPO trains a
stochastic policy, and its samples are the policy it learned. ``"greedy"`` takes the mode of
each action distribution (argmax, or the Gaussian's mean), a different policy that can score
far lower: on Craftax-Classic the greedy policy of a trained run scored 0.72, below a random
policy's 1.31, where its samples scored 3.29 (issue 67).
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

from jaxrl import envs
from jaxrl.commands.cli import HelpFormatter, prog
from jaxrl.config import ConfigError, parse_overrides
from jaxrl.core.acting import PolicyParams
from jaxrl.core.match import MatchRecord
from jaxrl.run.checkpoint import CheckpointError, error_line
from jaxrl.run.eval_result import EvalResult
from jaxrl.run.play import (
    add_actions_flag,
    eval_layout,
    eval_spec,
    greedy,
    host_backend,
    load_policy,
    play_first_episodes,
    play_params,
    play_plan,
    scripted_kind,
)
from jaxrl.run.setup import Setup


class EpisodeStats(struct.PyTreeNode):
    """First-episode results of ``E`` evaluation envs."""

    episode_return: jax.Array  # [E] float32, mean over the env's active learner actors
    episode_length: jax.Array  # [E] int32
    outcome: Any  # {name: [E] float32} env-reported outcomes, learner's side (e.g. soccer win)


def run_episodes(
    setup: Setup,
    policy: PolicyParams,
    key: jax.Array,
    episodes: int,
    deterministic: bool = True,
    env_params: Any = None,
    opponent_kind: Any = None,
) -> EpisodeStats:
    """Play one episode in each of ``episodes`` vmapped envs (the shared match step).

    Deterministic play takes the mode of the action distribution (argmax or the mean).
    ``env_params`` defaults to the run's env params. In a two-team env the learner plays
    team 0 against ``opponent_kind`` (a scripted kind of the env), or against the scripted
    policy the env params name when it is None. In a multi-agent env an episode's return is
    the mean return of its active learner agents.
    """
    env_params = setup.env_params if env_params is None else env_params
    layout = eval_layout(setup, episodes)
    spec = eval_spec(setup, layout, deterministic)
    plan = play_plan(layout, env_params, opponent_kind)
    actors = layout.actors_per_env

    def fold(stats: EpisodeStats, record: MatchRecord, finished: jax.Array) -> EpisodeStats:
        mask = jnp.ones((episodes * actors,), bool) if record.mask is None else record.mask
        mask = mask.reshape(episodes, actors)
        returns = record.episode_return.reshape(episodes, actors)
        mean_return = (returns * mask).sum(-1) / jnp.maximum(mask.sum(-1), 1)
        return EpisodeStats(
            episode_return=jnp.where(finished, mean_return, stats.episode_return),
            episode_length=jnp.where(finished, record.episode_length, stats.episode_length),
            outcome={
                name: jnp.where(finished, record.outcome[name], value)
                for name, value in stats.outcome.items()
            },
        )

    zeros = jnp.zeros(episodes, jnp.float32)
    init = EpisodeStats(
        episode_return=zeros,
        episode_length=jnp.zeros(episodes, jnp.int32),
        outcome={name: zeros for name in setup.outcome_names},
    )
    return play_first_episodes(spec, setup.network.initial_hidden, policy, plan, key, init, fold)


def evaluate(
    run_dir: str | Path,
    episodes: int = 16,
    step: int | None = None,
    seed: int = 0,
    actions: str = "sample",
    stage: int | None = None,
    opponent: str | None = None,
    env_overrides: dict | None = None,
    team_size: int | None = None,
) -> EvalResult | list[EvalResult]:
    """Restore params (latest checkpoint or ``step``) and play ``episodes`` episodes.

    ``actions``: ``"sample"`` draws each action from the policy (what PPO trained),
    ``"greedy"`` takes the mode of its distribution (:data:`jaxrl.run.play.ACTIONS`).

    For a curriculum run, the episodes use the params of curriculum ``stage`` (default:
    the last stage, the task the curriculum leads to). ``env_overrides`` (a nested mapping
    of EnvParams fields, e.g. ``{"blue_size": 2, "orange_size": 2}``) apply on top. In a
    two-team env the learner plays team 0 against ``opponent`` (a scripted policy of the
    env: ``rule``, ``random``, ``idle``), by default the one the env params name, with
    ``team_size`` cars a side if given (``env.with_team_size``, applied last).

    A run with several members (``train.num_seeds``, ``sweep``) gives one result per member,
    in member order, each naming its seed and swept values.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    greedy(actions)  # refused before anything is restored
    backend = host_backend(run_dir)
    if backend is not None:  # gymnasium / EnvPool runs play on their host envs
        from jaxrl.hostenv.play import evaluate_host  # noqa: PLC0415

        refuse_host_options(backend, stage, opponent, env_overrides, team_size)
        return evaluate_host(run_dir, episodes, step, seed, greedy(actions))
    setup, policy, step = load_policy(run_dir, step)
    return evaluate_policy(
        setup, policy, step, episodes, seed, actions, stage, opponent, env_overrides, team_size
    )


def evaluate_policy(
    setup: Setup,
    policy: PolicyParams,
    step: int,
    episodes: int = 16,
    seed: int = 0,
    actions: str = "sample",
    stage: int | None = None,
    opponent: str | None = None,
    env_overrides: dict | None = None,
    team_size: int | None = None,
) -> EvalResult | list[EvalResult]:
    """:func:`evaluate` of a policy in hand (``[R]`` leaves for a run of several members)."""
    deterministic = greedy(actions)
    opponent_kind = None if opponent is None else scripted_kind(setup, opponent)
    env_params = play_params(setup, stage, env_overrides, team_size)

    def play(policy):
        return run_episodes(
            setup, policy, jax.random.key(seed), episodes, deterministic, env_params, opponent_kind
        )

    members = setup.members
    if members.count == 1:
        return _result(jax.device_get(jax.jit(play)(policy)), step, episodes, actions)
    stats = jax.device_get(jax.jit(jax.vmap(play))(policy))  # every member, one compile
    return [
        dataclasses.replace(
            _result(jax.tree.map(lambda x, i=i: x[i], stats), step, episodes, actions),
            seed=members.seeds[i],
            member=members.names[i],
            sweep=dict(members.points[i]),
        )
        for i in range(members.count)
    ]


def refuse_host_options(
    backend: str, stage: Any, opponent: Any, env_overrides: Any, team_size: Any
) -> None:
    """Refuse the options a host run's env does not have (in one line, naming the option).

    Raises:
      ValueError: a stage, opponent, EnvParams override or team size for a host run.
    """
    given = {
        "stage": stage is not None,
        "opponent": opponent is not None,
        "env-param": bool(env_overrides),
        "team-size": team_size is not None,
    }
    for name, on in given.items():
        if on:
            raise ValueError(
                f"{name}: an env.backend={backend} run has no curriculum stages, opponents, "
                "EnvParams or team sizes (its env is configured by env.kwargs)"
            )


def _result(stats: EpisodeStats, step: int, episodes: int, actions: str) -> EvalResult:
    returns = np.asarray(stats.episode_return, dtype=np.float64)
    return EvalResult(
        mean_return=float(returns.mean()),
        std_return=float(returns.std()),
        mean_length=float(np.mean(stats.episode_length)),
        returns=tuple(float(r) for r in returns),
        step=int(step),
        episodes=episodes,
        actions=actions,
        outcomes={name: float(np.mean(v)) for name, v in stats.outcome.items()},
    )


def build_parser() -> argparse.ArgumentParser:
    """Command line of ``python -m jaxrl.evaluate``."""
    parser = argparse.ArgumentParser(
        prog=prog("jaxrl.commands.evaluate"),
        description="Evaluate a checkpointed policy.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--run-dir", required=True, help="a run directory written by jaxrl train")
    parser.add_argument("--episodes", type=int, default=16, help="episodes to play (vmapped)")
    parser.add_argument("--step", type=int, help="checkpoint update step (default: latest)")
    parser.add_argument("--seed", type=int, default=0, help="evaluation seed")
    add_actions_flag(parser)
    parser.add_argument(
        "--stage", type=int, help="curriculum stage to play (default: the last stage)"
    )
    parser.add_argument(
        "--opponent", help="two-team envs: the scripted opponent (rule, random, idle)"
    )
    parser.add_argument(
        "--env-param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="EnvParams override, dotted for struct fields (blue_size=2, reward.touch=0)",
    )
    parser.add_argument("--team-size", type=int, help="two-team envs: cars a side (e.g. 2 for 2v2)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m jaxrl.evaluate``."""
    args = build_parser().parse_args(argv)
    try:
        result = evaluate(
            args.run_dir,
            args.episodes,
            args.step,
            args.seed,
            args.actions,
            args.stage,
            args.opponent,
            envs.nest_dotted(parse_overrides(args.env_param)),
            args.team_size,
        )
    except (ConfigError, ValueError) as err:  # bad input: a flag or a value out of range
        print(f"error: {err}", file=sys.stderr)
        return 2
    except CheckpointError as err:
        line, status = error_line(err, "--step")  # an unreadable checkpoint: 2, a step to pick
        print(f"error: {line}", file=sys.stderr)
        return status
    results = result if isinstance(result, list) else [result]
    if args.json:
        if isinstance(result, list):
            print(json.dumps({"seeds": [_member_json(r) for r in results]}))
        else:
            print(json.dumps(_single_json(result)))
        return 0
    for r in results:
        print(summary_line(r))
    return 0


def summary_line(result: EvalResult) -> str:
    """``step S: return M +- SD over N episodes (mean length L, actions: sample)``, led by
    the member's name in a run of several members and followed by the env's outcomes."""
    return (
        (f"{result.member}: " if result.member else "")
        + f"step {result.step}: return {result.mean_return:.2f} +- {result.std_return:.2f} "
        f"over {result.episodes} episodes (mean length {result.mean_length:.1f}, "
        f"actions: {result.actions})"
        + "".join(f", {k} {v:.3f}" for k, v in result.outcomes.items())
    )


def _single_json(result: EvalResult) -> dict:
    """A one-member run's JSON (as before members existed)."""
    data = result.to_dict()
    for key in ("seed", "member", "sweep"):
        data.pop(key)
    return data


def _member_json(result: EvalResult) -> dict:
    """One entry of ``{"seeds": [...]}``: seed first, then the result."""
    data = result.to_dict()
    return {"seed": data.pop("seed"), **data}
