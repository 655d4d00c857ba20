"""Play outside training: restored policies through the shared match step.

:mod:`jaxrl.commands.evaluate`, :mod:`jaxrl.commands.render`, :mod:`jaxrl.commands.tournament`
and :mod:`jaxrl.commands.exploit` share this module (a host-backend run plays through
:mod:`jaxrl.hostenv.play` instead; :func:`refuse_host` names what plays it):

- one policy type, :class:`jaxrl.core.acting.PolicyParams` (network params and observation
  normaliser), restored from a run's checkpoint by :func:`load_policy` into the template
  :func:`policy_like`;
- the env params of a play (:func:`play_params`: curriculum stage, EnvParams overrides, team
  size) and the scripted kinds a caller names (:func:`scripted_kind`), each refused in one
  line;
- the batch of a play (:func:`eval_layout`, :func:`eval_spec`, :func:`play_plan`): ``E``
  envs, no evaluation lanes, no opponent groups, one set of env params (``eval_``: play
  outside training, not the in-graph evaluation lanes of :mod:`jaxrl.features.eval_lanes`);
- the two loops around :func:`jaxrl.core.match.match_step`: :func:`play_first_episodes` (until
  every env's first episode has ended, folding each step's record) and :func:`play_steps` (a
  fixed number of steps, keeping something of each).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import yaml
from flax import struct

from jaxrl import envs
from jaxrl.config import load_run_config
from jaxrl.core.acting import PolicyParams
from jaxrl.core.layout import Layout, OpponentGroups
from jaxrl.core.match import (
    MatchCarry,
    MatchPlan,
    MatchRecord,
    MatchSpec,
    idle_plan,
    match_step,
    start_matches,
)
from jaxrl.core.types import RunningStats
from jaxrl.envs import protocols
from jaxrl.features.curriculum import stage_params
from jaxrl.run.checkpoint import Checkpointer, CheckpointError
from jaxrl.run.runner import init_params
from jaxrl.run.setup import Setup, make_setup

# How play outside training picks actions: sample from the policy (the default: what PPO
# trained, and a greedy policy can score far below its samples), or take its mode.
ACTIONS = ("sample", "greedy")


# What plays a host-backend run (env.backend: gymnasium | envpool, jaxrl.hostenv.play): named
# by every play tool that refuses one.
HOST_PLAY = "jaxrl evaluate, jaxrl export, jaxrl render (gymnasium) and jaxrl.load_policy play it"


class HostRunError(ValueError):
    """A play tool that steps JAX envs was given a host-backend run (one line, exit 2)."""


def host_backend(run_dir: str | Path) -> str | None:
    """The ``env.backend`` of the run in ``run_dir`` if it is a host one (gymnasium, envpool),
    else None (a JAX run, or no run there: the caller reports that)."""
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        return None
    data = yaml.safe_load(path.read_text()) or {}  # the key alone: no env is built to read it
    env = data.get("env") if isinstance(data, dict) else None
    backend = env.get("backend", "jax") if isinstance(env, dict) else "jax"
    return None if backend == "jax" else str(backend)


def refuse_host(run_dir: str | Path, why: str) -> None:
    """Refuse a host-backend run in ``run_dir`` (nothing for a JAX run).

    Raises:
      HostRunError: ``"{run_dir} is an env.backend=B run: {why}; {HOST_PLAY}"``.
    """
    backend = host_backend(run_dir)
    if backend is not None:
        raise HostRunError(f"{run_dir} is an env.backend={backend} run: {why}; {HOST_PLAY}")


# ----------------------------------------------------------------------------- policies


def policy_like(setup: Setup) -> PolicyParams:
    """A policy shaped like the run's (fresh params, empty normaliser): a restore template."""
    return PolicyParams(
        params=init_params(setup, jax.random.key(0)),
        obs_stats=RunningStats.create(setup.obs_shape),
    )


def members_policy_like(setup: Setup) -> PolicyParams:
    """:func:`policy_like` for every member of the run: a leading ``[R]`` axis when R > 1."""
    like = policy_like(setup)
    count = setup.members.count
    if count == 1:
        return like
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (count, *x.shape)), like)


def load_policy(run_dir: str | Path, step: int | None = None) -> tuple[Setup, PolicyParams, int]:
    """Config, env and network of a run, with its policy restored from a checkpoint.

    ``step``: the checkpoint's update step (default: the latest). A run with several members
    (seeds, sweep points) gives a policy with a leading ``[R]`` axis. Only the replicated
    policy item is read, so a run trained on any number of devices restores here.

    Raises:
      CheckpointError: not a run directory, no checkpoints, or one that does not match.
      HostRunError: a host-backend run (:mod:`jaxrl.hostenv.play` restores those).
    """
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise CheckpointError(f"{run_dir} is not a run directory (no config.yaml)")
    refuse_host(run_dir, "this tool plays JAX envs")
    config = load_run_config(run_dir)
    setup = make_setup(config)
    like = members_policy_like(setup)
    checkpointer = Checkpointer(run_dir, keep=config.checkpoint.keep, create=False)
    try:
        policy, step = checkpointer.restore_policy(like, step)
    finally:
        checkpointer.close()
    return setup, policy, step


def greedy(actions: str) -> bool:
    """Whether ``actions`` (one of :data:`ACTIONS`) takes the mode of the policy.

    Raises:
      ValueError: another value, in one line.
    """
    if actions not in ACTIONS:
        raise ValueError(f"actions must be one of {', '.join(ACTIONS)}, got {actions!r}")
    return actions == "greedy"


def add_actions_flag(parser: argparse.ArgumentParser) -> None:
    """``--actions sample|greedy`` (default sample). ``--stochastic``, the old flag, stays
    accepted and hidden: sampling is the default now, so it changes nothing."""
    parser.add_argument(
        "--actions",
        choices=ACTIONS,
        default="sample",
        help="sample: draw actions from the policy, as PPO trained it; greedy: take the mode "
        "of each action distribution (argmax, or the mean)",
    )
    parser.add_argument("--stochastic", action="store_true", help=argparse.SUPPRESS)


# ----------------------------------------------------------------------------- env params


def stage_env_params(setup: Setup, stage: int | None = None) -> Any:
    """The run's env params at curriculum ``stage`` (default: the last, the task it leads to).

    Raises:
      ValueError: a stage the run does not have.
    """
    if setup.curriculum is None:
        if stage not in (None, 0):
            raise ValueError("this run has no curriculum stages")
        return setup.env_params
    last = setup.curriculum.num_stages - 1
    stage = last if stage is None else stage
    if not 0 <= stage <= last:
        raise ValueError(f"stage must be in 0..{last}, got {stage}")
    return stage_params(setup.curriculum, setup.env_params, jnp.asarray(stage))


def with_team_size(setup: Setup, env_params: Any, size: int, flag: str = "--team-size") -> Any:
    """``env_params`` with ``size`` players a side (:class:`jaxrl.envs.protocols.VariableTeamSize`;
    a two-team env of fixed size takes only its own ``team_size``, params unchanged).

    Raises:
      ValueError: ``"{flag}: ..."``, an env without team sizes or a size out of range.
    """
    sized = protocols.variable_team_size(setup.env)
    teams = protocols.two_team(setup.env)
    if sized is None and teams is not None and size == int(teams.team_size):
        return env_params
    if sized is None:
        raise ValueError(f"{flag}: {setup.config.env.name} has no team sizes")
    if not 1 <= size <= sized.team_size:
        raise ValueError(f"{flag}: {size} is not in 1..{sized.team_size}")
    return sized.with_team_size(env_params, size)


def play_params(
    setup: Setup,
    stage: int | None = None,
    overrides: dict | None = None,
    team_size: int | None = None,
    overrides_flag: str = "--env-param",
) -> Any:
    """The env params of a play: curriculum ``stage``, then ``overrides``, then ``team_size``.

    ``overrides`` is a nested mapping of EnvParams fields (``{"reward": {"touch": 0.0}}``),
    each value cast to its leaf's dtype (``fix_bugs=1`` is True) or refused.

    Raises:
      ValueError: one line naming the option (``overrides_flag``, ``--team-size``).
    """
    env_params = stage_env_params(setup, stage)
    if overrides:
        try:
            env_params = envs.override_params(env_params, overrides)
        except ValueError as err:
            raise ValueError(f"{overrides_flag} {err}") from None
    if team_size is not None:
        env_params = with_team_size(setup, env_params, team_size)
    return env_params


def scripted_kind(setup: Setup, name: str, flag: str = "--opponent") -> int:
    """The kind of the env's scripted policy ``name`` (:class:`jaxrl.envs.protocols.TwoTeamEnv`).

    Raises:
      ValueError: ``"{flag}..."``, an env without an opponent team or an unknown name.
    """
    teams = protocols.two_team(setup.env)
    if teams is None:
        raise ValueError(f"{flag}: {setup.config.env.name} has no opponent team")
    kinds = protocols.scripted_kinds(setup.env)  # "rule": the anchor, a random mover if no rule
    if name not in kinds:
        raise ValueError(f"{flag} must be one of {', '.join(kinds)}, got {name!r}")
    return int(kinds[name])


# ----------------------------------------------------------------------------- the batch


def eval_layout(setup: Setup, num_envs: int) -> Layout:
    """``num_envs`` envs, no evaluation lanes, no opponent groups, shared env params."""
    return dataclasses.replace(
        setup.layout,
        num_envs=num_envs,
        measured_envs=(),
        opponents=OpponentGroups(),
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


def play_plan(
    layout: Layout, env_params: Any, opponent_kind: Any = None, learner_kind: Any = None
) -> MatchPlan:
    """Every env on ``env_params``; the learner on team 0 (two-team envs).

    ``opponent_kind`` (default: what the env params name) plays the other team;
    ``learner_kind`` (default: the network) is a scripted kind to play team 0 instead.
    """
    plan = idle_plan(layout, env_params)
    num_envs = layout.total_envs
    if opponent_kind is not None:
        plan = plan.replace(opponent_kind=jnp.full((num_envs,), opponent_kind, jnp.int32))
    if learner_kind is not None:
        plan = plan.replace(learner_kind=jnp.full((num_envs,), learner_kind, jnp.int32))
    return plan


# ----------------------------------------------------------------------------- loops


class FirstEpisodes(struct.PyTreeNode):
    """Carry of :func:`play_first_episodes` over ``E`` envs."""

    match: MatchCarry
    done: jax.Array  # [E] bool, the env's first episode has ended
    acc: Any  # what the steps' records fold into
    key: jax.Array


def play_first_episodes(
    spec: MatchSpec,
    initial_hidden: Callable[[int], Any],
    learner: PolicyParams,
    plan: MatchPlan,
    key: jax.Array,
    acc: Any,
    fold: Callable[[Any, MatchRecord, jax.Array], Any],
) -> Any:
    """Step every env through the match step until each env's first episode has ended.

    Args:
      spec: the batch (``E = spec.layout.total_envs`` envs).
      initial_hidden: ``batch -> hidden state`` of the policy's core.
      learner: the policy of the learner's rows.
      plan: who plays, on which params.
      key: the play's key (resets, then one key per step).
      acc: the initial accumulator.
      fold: ``(acc, record, finished [E] bool) -> acc``; ``finished`` marks the envs whose
        first episode ended on this step (later episodes, after the auto-reset, never count).

    Returns:
      The final accumulator.
    """
    key_reset, key_loop = jax.random.split(key)
    del key
    num_envs = spec.layout.total_envs

    def body(c: FirstEpisodes) -> FirstEpisodes:
        key, key_step = jax.random.split(c.key)
        match, record = match_step(spec, learner, plan, c.match, key_step)
        finished = jnp.logical_and(record.done, ~c.done)  # [E]
        return FirstEpisodes(
            match=match,
            done=jnp.logical_or(c.done, finished),
            acc=fold(c.acc, record, finished),
            key=key,
        )

    init = FirstEpisodes(
        match=start_matches(spec, initial_hidden, plan, key_reset),
        done=jnp.zeros((num_envs,), bool),
        acc=acc,
        key=key_loop,
    )
    return jax.lax.while_loop(lambda c: ~c.done.all(), body, init).acc


def play_steps(
    spec: MatchSpec,
    initial_hidden: Callable[[int], Any],
    learner: PolicyParams,
    plan: MatchPlan,
    key: jax.Array,
    num_steps: int,
    keep: Callable[[MatchCarry], Any],
) -> Any:
    """``keep(carry)`` at the start and after each of ``num_steps`` match steps.

    Returns:
      ``keep``'s pytree with a leading ``[num_steps + 1]`` axis.
    """
    key_reset, key_play = jax.random.split(key)
    del key
    start = start_matches(spec, initial_hidden, plan, key_reset)

    def body(carry: MatchCarry, key_step: jax.Array) -> tuple[MatchCarry, Any]:
        carry, _ = match_step(spec, learner, plan, carry, key_step)
        return carry, keep(carry)

    _, kept = jax.lax.scan(body, start, jax.random.split(key_play, num_steps))
    return jax.tree.map(lambda s0, s: jnp.concatenate([s0[None], s]), keep(start), kept)
