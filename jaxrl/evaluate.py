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

import envs
from jaxrl.acting import PolicyParams
from jaxrl.checkpoint import Checkpointer, CheckpointError, PolicyState
from jaxrl.config import ConfigError, load_run_config, parse_overrides
from jaxrl.curriculum import stage_params
from jaxrl.layout import Layout
from jaxrl.match import MatchCarry, MatchSpec, idle_plan, match_step, start_matches
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
    seed: int | None = None  # the member's seed (runs with several members)
    member: str | None = None  # the member's name (its TensorBoard run)
    sweep: dict = dataclasses.field(default_factory=dict)  # the member's swept values

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return dataclasses.asdict(self)


class EpisodeStats(struct.PyTreeNode):
    """First-episode results of ``E`` evaluation envs."""

    episode_return: jax.Array  # [E] float32, mean over the env's active learner actors
    episode_length: jax.Array  # [E] int32
    outcome: Any  # {name: [E] float32} env-reported outcomes, learner's side (e.g. soccer win)


class EvalCarry(struct.PyTreeNode):
    """State of the evaluation loop over ``E`` envs, one episode each."""

    match: MatchCarry
    done: jax.Array  # [E] bool, the env's first episode has ended
    stats: EpisodeStats
    key: jax.Array


def eval_layout(setup: Setup, episodes: int) -> Layout:
    """``episodes`` envs, no evaluation lanes, no opponent groups, shared env params."""
    return dataclasses.replace(
        setup.layout,
        num_envs=episodes,
        eval_lane_envs=(),
        latest_envs=0,
        rule_envs=0,
        pool_lanes=0,
        lane_envs=0,
        pool_size=0,
        per_env_params=False,
    )


def eval_spec(setup: Setup, layout: Layout, deterministic: bool) -> MatchSpec:
    """The match spec of play outside training: every learner row samples, or takes the mode."""
    return MatchSpec(
        env=setup.env,
        policy=setup.policy,
        layout=layout,
        deterministic=deterministic,
        eval_deterministic=deterministic,
    )


def run_episodes(
    setup: Setup,
    policy: PolicyState,
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
    plan = idle_plan(layout, env_params)
    if opponent_kind is not None:
        plan = plan.replace(opponent_kind=jnp.full((episodes,), opponent_kind, jnp.int32))
    key_reset, key_loop = jax.random.split(key)
    del key
    learner = PolicyParams(params=policy.params, obs_stats=policy.obs_stats)
    actors = layout.actors_per_env

    def body(c: EvalCarry) -> EvalCarry:
        key, key_step = jax.random.split(c.key)
        match, record = match_step(spec, learner, plan, c.match, key_step)
        # Record each env's first episode only; later episodes (after auto-reset) are ignored.
        finished = jnp.logical_and(record.done, ~c.done)  # [E]
        mask = jnp.ones((episodes * actors,), bool) if record.mask is None else record.mask
        mask = mask.reshape(episodes, actors)
        returns = record.episode_return.reshape(episodes, actors)
        mean_return = (returns * mask).sum(-1) / jnp.maximum(mask.sum(-1), 1)
        return EvalCarry(
            match=match,
            done=jnp.logical_or(c.done, finished),
            stats=EpisodeStats(
                episode_return=jnp.where(finished, mean_return, c.stats.episode_return),
                episode_length=jnp.where(finished, record.episode_length, c.stats.episode_length),
                outcome={
                    name: jnp.where(finished, record.outcome[name], value)
                    for name, value in c.stats.outcome.items()
                },
            ),
            key=key,
        )

    zeros = jnp.zeros(episodes, jnp.float32)
    init = EvalCarry(
        match=start_matches(spec, setup.network.initial_hidden, plan, key_reset),
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
    """Config, env and network of a run, with params restored from a checkpoint.

    A run with several members (seeds, sweep points) gives policies with a leading ``[R]``.
    Only the replicated policy item is read, so any number of devices restores it.
    """
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise CheckpointError(f"{run_dir} is not a run directory (no config.yaml)")
    config = load_run_config(run_dir)
    setup = make_setup(config)
    like = PolicyState(
        params=init_params(setup, jax.random.key(0)),
        obs_stats=RunningStats.create(setup.obs_shape),
    )
    count = setup.members.count
    if count > 1:  # a leading [R] axis: one policy per member
        like = jax.tree.map(lambda x: jnp.broadcast_to(x, (count,) + x.shape), like)
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
    opponent: str | None = None,
    env_overrides: dict | None = None,
    team_size: int | None = None,
) -> EvalResult | list[EvalResult]:
    """Restore params (latest checkpoint or ``step``) and play ``episodes`` episodes.

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
    setup, policy, step = load_policy(run_dir, step)
    opponent_kind = None
    if opponent is not None:
        kinds = getattr(setup.env, "scripted_kinds", None)
        if kinds is None or not setup.layout.two_team:
            raise ValueError(f"--opponent: {setup.config.env.name} has no opponent team")
        if opponent not in kinds:
            raise ValueError(f"--opponent must be one of {', '.join(kinds)}, got {opponent!r}")
        opponent_kind = int(kinds[opponent])
    env_params = setup.env_params
    if setup.curriculum is not None:
        last = setup.curriculum.num_stages - 1
        stage = last if stage is None else stage
        if not 0 <= stage <= last:
            raise ValueError(f"stage must be in 0..{last}, got {stage}")
        env_params = stage_params(setup.curriculum, setup.env_params, jnp.asarray(stage))
    elif stage not in (None, 0):
        raise ValueError("this run has no curriculum stages")
    if env_overrides:  # cast to each leaf's dtype (fix_bugs=1 is True), or refused in one line
        try:
            env_params = envs.override_params(env_params, env_overrides)
        except ValueError as err:
            raise ValueError(f"--env-param {err}") from None
    if team_size is not None:
        if not hasattr(setup.env, "with_team_size"):
            raise ValueError(f"--team-size: {setup.config.env.name} has no team sizes")
        if not 1 <= team_size <= setup.layout.team_size:
            raise ValueError(f"--team-size must be in 1..{setup.layout.team_size}, got {team_size}")
        env_params = setup.env.with_team_size(env_params, team_size)

    def play(policy):
        return run_episodes(
            setup, policy, jax.random.key(seed), episodes, deterministic, env_params, opponent_kind
        )

    members = setup.members
    if members.count == 1:
        return _result(jax.device_get(jax.jit(play)(policy)), step, episodes, deterministic)
    stats = jax.device_get(jax.jit(jax.vmap(play))(policy))  # every member, one compile
    return [
        dataclasses.replace(
            _result(jax.tree.map(lambda x, i=i: x[i], stats), step, episodes, deterministic),
            seed=members.seeds[i],
            member=members.names[i],
            sweep=dict(members.points[i]),
        )
        for i in range(members.count)
    ]


def _result(stats: EpisodeStats, step: int, episodes: int, deterministic: bool) -> EvalResult:
    returns = np.asarray(stats.episode_return, dtype=np.float64)
    return EvalResult(
        mean_return=float(returns.mean()),
        std_return=float(returns.std()),
        mean_length=float(np.mean(stats.episode_length)),
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
    args = parser.parse_args(argv)
    try:
        result = evaluate(
            args.run_dir,
            args.episodes,
            args.step,
            args.seed,
            not args.stochastic,
            args.stage,
            args.opponent,
            envs.nest_dotted(parse_overrides(args.env_param)),
            args.team_size,
        )
    except (CheckpointError, ConfigError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    results = result if isinstance(result, list) else [result]
    if args.json:
        if isinstance(result, list):
            print(json.dumps({"seeds": [_member_json(r) for r in results]}))
        else:
            print(json.dumps(_single_json(result)))
        return 0
    for r in results:
        print(
            (f"{r.member}: " if r.member else "")
            + f"step {r.step}: return {r.mean_return:.2f} +- {r.std_return:.2f} "
            f"over {r.episodes} episodes (mean length {r.mean_length:.1f}, "
            f"{'deterministic' if r.deterministic else 'stochastic'} actions)"
            + "".join(f", {k} {v:.3f}" for k, v in r.outcomes.items())
        )
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
