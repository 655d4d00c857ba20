"""The match step: every actor of every env acts, then one vmapped env step.

This is the one acting loop body of jaxrl. Training rollouts (:mod:`jaxrl.rollout`),
evaluation (:mod:`jaxrl.evaluate`), rendering (:mod:`jaxrl.render`) and tournaments
(:mod:`jaxrl.tournament`) all call :func:`match_step`; they differ only in the
:class:`MatchPlan` they pass and in what they keep of the :class:`MatchRecord`.

Single-team envs: the learner drives every agent slot (``A = num_agents`` actors per env).

Two-team envs (``num_teams == 2``, ``team_size = S`` slots per team, slots ``[0, S)`` team 0
and ``[S, 2S)`` team 1): the learner drives team ``side[e]`` of env ``e`` (``A = S``
actors) and an opponent drives the other team. Who the opponent is, per env, is the plan's
``opponent_kind``:

- ``FROM_PARAMS``: the scripted policy the env params name (``opponent_kind`` and
  ``opponent_skill`` of the env's ``EnvParams``, e.g. a curriculum stage's RulePolicy);
- a scripted kind of the env (``env.scripted_kinds``, e.g. ``{"idle": 0, "rule": 1,
  "random": 2}``) at full skill;
- ``NETWORK``: the current policy for the league's ``latest`` envs (computed in the
  learner's own forward pass), a pool snapshot for the pool lanes (one vmapped pass over
  lanes, each with its snapshot's params and normaliser); see :mod:`jaxrl.opponents`.

Both teams see the same mirrored egocentric observation, so any policy plays either side.

A two-team step is four small pure functions: :func:`learner_pass` (the learner's rows and
the current-policy opponents' rows in one forward pass), :func:`opponent_actions` (scripted
and network opponents), :func:`step_envs` (one vmapped env step) and the league's bookkeeping
(:func:`jaxrl.opponents.bookkeeping`: the pool lanes' results and next draws).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl import opponents
from jaxrl.acting import ActOutput, PolicyParams, PolicySpec, act
from jaxrl.layout import Layout, shard_rows
from jaxrl.opponents import LaneCarry, LeagueTally

FROM_PARAMS = -1  # opponent kind: the scripted policy the env params name
NETWORK = -2  # opponent (or learner) kind: a network


@dataclasses.dataclass(frozen=True)
class MatchSpec:
    """Static description of a batch of matches."""

    env: Any  # wrapped env (EpisodeStatistics outermost)
    policy: PolicySpec
    layout: Layout
    deterministic: bool  # learner rows of the training envs take the policy's mode
    eval_deterministic: bool  # learner rows of the evaluation lanes take the policy's mode


class MatchPlan(struct.PyTreeNode):
    """Per-env choices of one stretch of play (one update, one evaluation, one pairing)."""

    env_params: Any  # EnvParams: shared, or every leaf [N] when layout.per_env_params
    opponent_kind: jax.Array  # [N] int32: FROM_PARAMS, NETWORK or a scripted kind
    random_side: jax.Array  # [N] bool: the learner's team is drawn per match (else team 0)
    switches: dict  # {feature: [N] bool} features a curriculum switches per env
    pool: Any = None  # PolicyParams with leaves [K + 1, ...] (pool lanes only)
    lane_probs: Any = None  # [P] float32: distribution of a lane's next opponent (P pool entries)
    learner_kind: Any = None  # [N] int32 NETWORK or a scripted kind (tournaments), or None
    side: Any = None  # [N] int32 learner team where not random_side (None: team 0)


class StepKeys(struct.PyTreeNode):
    """Every key one match step consumes, drawn by :func:`step_keys` (before a rollout loop:
    on CPU each split inside the loop body is a loop of its own)."""

    learner: jax.Array  # () samples the learner's (and current-policy opponents') actions
    env: jax.Array  # [N] one per env step
    scripted: Any = None  # [N] scripted opponents (two-team envs)
    mine: Any = None  # [N] scripted players on the learner's side (tournaments)
    lanes: Any = None  # [L] the pool lanes' action sampling
    side: Any = None  # () teams of new matches
    draw: Any = None  # () the lanes' next opponents


def step_keys(spec: MatchSpec, key: jax.Array) -> StepKeys:
    """Split ``key`` into the keys of one match step (one split call).

    Per-env keys are drawn for the envs of every device and sliced to this device's
    (:func:`jaxrl.layout.shard_rows`): env ``e`` gets the same key on any number of devices.
    """
    layout = spec.layout
    num_envs, axis, devices = layout.total_envs, layout.axis, layout.devices
    every = num_envs * devices
    mine = lambda keys: shard_rows(keys, axis, num_envs)  # noqa: E731
    if not layout.two_team:
        keys = jax.random.split(key, 1 + every)
        return StepKeys(learner=keys[0], env=mine(keys[1:]))
    lanes = max(layout.pool_lanes, 1)
    keys = jax.random.split(key, 3 + 3 * every + lanes * devices)
    envs_at = lambda i: mine(keys[3 + i * every : 3 + (i + 1) * every])  # noqa: E731
    return StepKeys(
        learner=keys[0],
        side=keys[1],
        draw=keys[2],
        env=envs_at(0),
        scripted=envs_at(1),
        mine=envs_at(2),
        lanes=shard_rows(keys[3 + 3 * every :], axis, lanes),
    )


class OpponentCarry(struct.PyTreeNode):
    """The opponents' side of a two-team match batch."""

    obs: jax.Array  # [N * S, *obs_shape] raw observations of the opponent rows
    is_first: jax.Array  # [N * S] bool, the row's policy starts afresh (new match or opponent)
    hidden_latest: Any  # [latest * S, ...] carry of the current-policy opponents
    lanes: LaneCarry  # the pool lanes: hidden states, slots, draw bookkeeping


class MatchCarry(struct.PyTreeNode):
    """Carried from one match step to the next."""

    env_state: Any  # [N] env state
    obs: jax.Array  # [N * A, *obs_shape] raw observations of the learner's rows (env dtype)
    is_first: jax.Array  # [N * A] bool, the row starts an episode
    hidden: Any  # [N * A, ...] learner carry (() without a core)
    side: jax.Array  # [N] int32, the learner's team (0 for single-team envs)
    opponent: Any  # OpponentCarry (two-team envs) or None


class MatchRecord(struct.PyTreeNode):
    """What one match step produced, per learner row ``[N * A]`` or per env ``[N]``."""

    act: ActOutput  # the learner's step (action, log_prob, value, hidden)
    is_first: jax.Array  # [N * A] bool, the observation acted on started an episode
    reward: jax.Array  # [N * A] float32, unscaled
    terminated: jax.Array  # [N * A] bool
    truncated: jax.Array  # [N * A] bool, cut by a time limit and not terminated
    final_obs: jax.Array  # [N * A, *obs_shape] raw pre-reset observation
    mask: Any  # [N * A] bool active rows, or None (single-agent envs)
    done: jax.Array  # [N] bool, the env's episode (match) ended
    episode_return: jax.Array  # [N * A] float32, return of the row's episode (valid where done)
    episode_length: jax.Array  # [N] int32 (valid where done)
    outcome: dict  # {name: [N] float32} the learner team's episode outcome (valid where done)
    tally: Any  # the league's count of this step (LeagueTally, pool lanes), or None
    # {name: [N * A] float32} the learner rows' weighted reward terms this step (envs that
    # report info["reward_terms"]; empty otherwise)
    reward_terms: dict = struct.field(default_factory=dict)


# ----------------------------------------------------------------------------- rows


def per_actor(layout: Layout, x: jax.Array, per_agent: bool) -> jax.Array:
    """Single-team env data ``[N, A, ...]`` (``per_agent``) or ``[N, ...]`` as ``[N * A, ...]``."""
    if layout.num_agents == 1:
        return x
    if per_agent:
        return x.reshape((-1,) + x.shape[2:])
    return jnp.repeat(x, layout.num_agents, axis=0)


def team_rows(x: jax.Array, side: jax.Array, own: bool) -> jax.Array:
    """One team's slots ``[N, S, ...]`` of two-team data ``[N, 2S, ...]``.

    ``own``: the team ``side`` names, else the other one.
    """
    size = x.shape[1] // 2
    first, second = x[:, :size], x[:, size:]
    pick_first = (side == 0) if own else (side == 1)
    return jnp.where(pick_first.reshape((-1,) + (1,) * (x.ndim - 1)), first, second)


def join_teams(own: jax.Array, other: jax.Array, side: jax.Array) -> jax.Array:
    """``[N, 2S, ...]`` from the learner team's ``own`` and the other team's rows."""
    select = (side == 0).reshape((-1,) + (1,) * (own.ndim - 1))
    return jnp.concatenate([jnp.where(select, own, other), jnp.where(select, other, own)], axis=1)


def _rows(x: jax.Array) -> jax.Array:
    return x.reshape((-1,) + x.shape[2:])


def _env_major(x: jax.Array, size: int) -> jax.Array:
    return x.reshape((-1, size) + x.shape[1:])


def _concat(a: Any, b: Any) -> Any:
    return jax.tree.map(lambda x, y: jnp.concatenate([x, y]), a, b)


# ----------------------------------------------------------------------------- start


def draw_sides(layout: Layout, plan: MatchPlan, key: jax.Array) -> jax.Array:
    """[N] int32: the learner's team for new matches (random where ``plan.random_side``)."""
    num_envs = plan.random_side.shape[0]
    bits = jax.random.bernoulli(key, 0.5, (num_envs * layout.devices,)).astype(jnp.int32)
    bits = shard_rows(bits, layout.axis, num_envs)
    fixed = 0 if plan.side is None else plan.side
    return jnp.where(plan.random_side, bits, fixed).astype(jnp.int32)


def start_matches(
    spec: MatchSpec, policy_hidden: Any, plan: MatchPlan, key: jax.Array
) -> MatchCarry:
    """Fresh episodes in every env, sides drawn, empty hidden states, lanes on slot K.

    ``policy_hidden(batch)`` returns the initial hidden state of ``batch`` rows.
    """
    layout = spec.layout
    num_envs = layout.total_envs
    key_reset, key_side = jax.random.split(key)
    del key
    params_axis = 0 if layout.per_env_params else None
    keys = shard_rows(jax.random.split(key_reset, num_envs * layout.devices), layout.axis, num_envs)
    # Observations stay in the env's dtype (float32, or uint8 for byte grids) in the carry and
    # the rollout buffer; the policy casts them when it normalises them.
    obs, env_state = jax.vmap(spec.env.reset, in_axes=(0, params_axis))(keys, plan.env_params)
    num_rows = num_envs * layout.actors_per_env
    if not layout.two_team:
        return MatchCarry(
            env_state=env_state,
            obs=per_actor(layout, obs, per_agent=True),
            is_first=jnp.ones((num_rows,), bool),
            hidden=policy_hidden(num_rows),
            side=jnp.zeros((num_envs,), jnp.int32),
            opponent=None,
        )
    side = draw_sides(layout, plan, key_side)
    size = layout.team_size
    opponent = OpponentCarry(
        obs=_rows(team_rows(obs, side, own=False)),
        is_first=jnp.ones((num_envs * size,), bool),
        hidden_latest=policy_hidden(layout.latest_envs * size),
        lanes=opponents.start_lanes(layout, policy_hidden),
    )
    return MatchCarry(
        env_state=env_state,
        obs=_rows(team_rows(obs, side, own=True)),
        is_first=jnp.ones((num_rows,), bool),
        hidden=policy_hidden(num_rows),
        side=side,
        opponent=opponent,
    )


# ----------------------------------------------------------------------------- step


def _learner_deterministic(spec: MatchSpec, extra_rows: int) -> bool | np.ndarray:
    """Per-row determinism of the learner's forward pass (static)."""
    layout = spec.layout
    rows = layout.actors_per_env
    flags = np.concatenate(
        [
            np.full(layout.num_envs * rows, spec.deterministic),
            np.full(layout.num_eval_envs * rows, spec.eval_deterministic),
            np.zeros(extra_rows, bool),  # current-policy opponents sample
        ]
    )
    if flags.all():
        return True
    if not flags.any():
        return False
    return flags


def _scripted(spec: MatchSpec, kind, skill, team_obs, keys) -> jax.Array:
    """[N, S] int32 actions of the env's scripted policies (``kind``, ``skill``, ``keys`` [N])."""
    return jax.vmap(spec.env.scripted_team_actions)(keys, team_obs, jnp.maximum(kind, 0), skill)


def _per_env(leaf: Any, num_envs: int) -> jax.Array:
    """An env-param leaf as ``[N]`` (shared params broadcast, per-env params as they are)."""
    return jnp.broadcast_to(jnp.asarray(leaf), (num_envs,))


def match_step(
    spec: MatchSpec,
    learner: PolicyParams,
    plan: MatchPlan,
    carry: MatchCarry,
    keys: StepKeys | jax.Array,
) -> tuple[MatchCarry, MatchRecord]:
    """Every actor acts, every env steps once (auto-reset); see the module docstring.

    ``keys``: the step's keys from :func:`step_keys`, or one key to split here.
    """
    if not isinstance(keys, StepKeys):
        keys = step_keys(spec, keys)
    if spec.layout.two_team:
        return _two_team_step(spec, learner, plan, carry, keys)
    return _single_team_step(spec, learner, plan, carry, keys)


class EnvStep(struct.PyTreeNode):
    """One vmapped env step of every env (``[N, A, ...]`` leaves: every agent slot)."""

    obs: jax.Array  # [N, (A,) *obs_shape] next observations (post-reset where done)
    env_state: Any  # [N] env state
    reward: jax.Array  # [N, (A)]
    terminated: jax.Array  # [N] bool
    truncated: jax.Array  # [N] bool, cut by a time limit and not terminated
    done: jax.Array  # [N] bool, the episode (match) ended
    info: dict  # the env's info, [N, ...] leaves


def step_envs(
    spec: MatchSpec, plan: MatchPlan, env_state: Any, actions: jax.Array, keys: jax.Array
) -> EnvStep:
    """Every env steps once on ``actions`` (auto-reset), each with its ``keys [N]`` key."""
    params_axis = 0 if spec.layout.per_env_params else None
    obs, env_state, reward, terminated, truncated, info = jax.vmap(
        spec.env.step, in_axes=(0, 0, 0, params_axis)
    )(keys, env_state, actions, plan.env_params)
    return EnvStep(
        obs=obs,
        env_state=env_state,
        reward=reward,
        terminated=terminated,
        truncated=jnp.logical_and(truncated, jnp.logical_not(terminated)),
        done=jnp.logical_or(terminated, truncated),
        info=info,
    )


def _single_team_step(spec, learner, plan, carry, keys: StepKeys):
    layout = spec.layout
    out = act(
        spec.policy,
        learner,
        carry.hidden,
        carry.obs,
        carry.is_first,
        keys.learner,
        _learner_deterministic(spec, 0),
        layout.axis,
        layout.devices,
    )
    num_envs = layout.total_envs
    action = out.action
    if layout.num_agents > 1:
        action = _env_major(action, layout.num_agents)
    step = step_envs(spec, plan, carry.env_state, action, keys.env)
    info = step.info
    mask = None
    if layout.num_agents > 1:
        mask = (
            per_actor(layout, info["agent_mask"], per_agent=True)
            if "agent_mask" in info
            else jnp.ones((num_envs * layout.num_agents,), bool)
        )
    returns = info["episode_return"]
    record = MatchRecord(
        act=out,
        is_first=carry.is_first,
        reward=per_actor(layout, step.reward, per_agent=True).astype(jnp.float32),
        terminated=per_actor(layout, step.terminated, per_agent=False),
        truncated=per_actor(layout, step.truncated, per_agent=False),
        final_obs=per_actor(layout, info["final_observation"], per_agent=True),
        mask=mask,
        done=step.done,
        episode_return=per_actor(layout, returns, per_agent=returns.ndim > 1),
        episode_length=info["episode_length"],
        outcome={
            name: (value[:, 0] if value.ndim > 1 else value).astype(jnp.float32)
            for name, value in info.get("episode_outcome", {}).items()
        },
        tally=None,
        reward_terms={
            name: per_actor(layout, value, per_agent=value.ndim > 1).astype(jnp.float32)
            for name, value in info.get("reward_terms", {}).items()
        },
    )
    new_carry = MatchCarry(
        env_state=step.env_state,
        obs=per_actor(layout, step.obs, per_agent=True),
        is_first=per_actor(layout, step.done, per_agent=False),
        hidden=out.hidden,
        side=carry.side,
        opponent=None,
    )
    return new_carry, record


def learner_pass(
    spec: MatchSpec, learner: PolicyParams, carry: MatchCarry, key: jax.Array
) -> tuple[ActOutput, ActOutput | None]:
    """The learner's rows and the current-policy opponents' rows: one forward pass.

    Returns:
      ``(mine, latest)``: the learner's ``[N * S]`` rows, and the ``[latest * S]`` rows of
      the league's current-policy opponents (None without that group).
    """
    layout = spec.layout
    opp = carry.opponent
    latest_rows = layout.latest_envs * layout.team_size
    learner_rows = layout.total_envs * layout.team_size
    rows, hidden, first = carry.obs, carry.hidden, carry.is_first
    if latest_rows:
        rows = jnp.concatenate([rows, opp.obs[:latest_rows]])
        hidden = _concat(hidden, opp.hidden_latest)
        first = jnp.concatenate([first, opp.is_first[:latest_rows]])
    out = act(
        spec.policy,
        learner,
        hidden,
        rows,
        first,
        key,
        _learner_deterministic(spec, latest_rows),
        layout.axis,
        layout.devices,
    )
    mine = jax.tree.map(lambda x: x[:learner_rows], out)
    if not latest_rows:
        return mine, None
    return mine, jax.tree.map(lambda x: x[learner_rows:], out)


def learner_actions(
    spec: MatchSpec, plan: MatchPlan, mine: ActOutput, carry: MatchCarry, keys: StepKeys
) -> jax.Array:
    """[N, S] actions of the learner's team: the network's, or a scripted player's where the
    plan's ``learner_kind`` names one (tournaments)."""
    size = spec.layout.team_size
    action = _env_major(mine.action, size)
    if plan.learner_kind is None:
        return action
    num_envs = spec.layout.total_envs
    scripted = _scripted(
        spec,
        plan.learner_kind,
        jnp.ones((num_envs,), jnp.float32),
        _env_major(carry.obs, size),
        keys.mine,
    )
    return jnp.where((plan.learner_kind == NETWORK)[:, None], action, scripted)


def opponent_kinds(plan: MatchPlan, num_envs: int) -> tuple[jax.Array, jax.Array]:
    """``(kind [N] int32, skill [N] float32)`` of every env's opponent: the plan's kind, or
    the env params' kind and skill where the plan says ``FROM_PARAMS``."""
    kind_param = _per_env(plan.env_params.opponent_kind, num_envs)
    skill_param = _per_env(plan.env_params.opponent_skill, num_envs)
    from_params = plan.opponent_kind == FROM_PARAMS
    kind = jnp.where(from_params, kind_param, plan.opponent_kind)
    skill = jnp.where(from_params, skill_param, 1.0).astype(jnp.float32)
    return kind, skill


def opponent_actions(
    spec: MatchSpec,
    plan: MatchPlan,
    opp: OpponentCarry,
    latest: ActOutput | None,
    kind: jax.Array,
    skill: jax.Array,
    keys: StepKeys,
) -> tuple[jax.Array, OpponentCarry]:
    """[N, S] int32 opponent actions: scripted for every env (cheap), networks on the league's
    static groups where ``kind`` is ``NETWORK``.

    ``latest``: the current-policy opponents' part of :func:`learner_pass`. Returns the
    actions and ``opp`` with the networks' new hidden states.
    """
    layout = spec.layout
    size = layout.team_size
    action = _scripted(spec, kind, skill, _env_major(opp.obs, size), keys.scripted)
    hidden_latest, lanes = opp.hidden_latest, opp.lanes
    latest_action = lane_action = None
    if latest is not None:
        hidden_latest = latest.hidden
        latest_action = _env_major(latest.action, size)
    if layout.pool_lanes:
        rows = opponents.pool_rows(layout)
        lane_action, lane_hidden = opponents.lane_actions(
            spec.policy,
            layout,
            plan.pool,
            opp.lanes,
            opp.obs[rows],
            opp.is_first[rows],
            keys.lanes[: layout.pool_lanes],
        )
        lanes = lanes.replace(hidden=lane_hidden)
    network = opponents.group_actions(layout, layout.total_envs, latest_action, lane_action)
    if network is not None:
        action = jnp.where((kind == NETWORK)[:, None], network, action)
    return action.astype(jnp.int32), opp.replace(hidden_latest=hidden_latest, lanes=lanes)


def _two_team_step(spec, learner, plan, carry, keys: StepKeys):
    layout = spec.layout
    size = layout.team_size
    side = carry.side
    mine, latest = learner_pass(spec, learner, carry, keys.learner)
    learner_action = learner_actions(spec, plan, mine, carry, keys)
    kind, skill = opponent_kinds(plan, layout.total_envs)
    opponent_action, opp = opponent_actions(spec, plan, carry.opponent, latest, kind, skill, keys)
    actions = join_teams(learner_action, opponent_action, side)
    step = step_envs(spec, plan, carry.env_state, actions, keys.env)
    new_side = jnp.where(step.done, draw_sides(layout, plan, keys.side), side)

    def mine_of(x):  # [N, 2S, ...] of this step -> learner rows [N * S, ...]
        return _rows(team_rows(x, side, own=True))

    outcome = {
        name: team_rows(value, side, own=True)[:, 0].astype(jnp.float32)
        for name, value in step.info.get("episode_outcome", {}).items()
    }
    lanes, tally, opponent_first = opponents.bookkeeping(
        layout, opp.lanes, step.done, kind == NETWORK, outcome, plan.lane_probs, keys.draw
    )
    repeat = lambda x: jnp.repeat(x, size)  # noqa: E731 - [N] -> [N * S]
    record = MatchRecord(
        act=mine,
        is_first=carry.is_first,
        reward=mine_of(step.reward).astype(jnp.float32),
        terminated=repeat(step.terminated),
        truncated=repeat(step.truncated),
        final_obs=mine_of(step.info["final_observation"]),
        mask=mine_of(step.info["agent_mask"]),
        done=step.done,
        episode_return=mine_of(step.info["episode_return"]),
        episode_length=step.info["episode_length"],
        outcome=outcome,
        tally=tally,
        reward_terms={
            name: mine_of(value).astype(jnp.float32)
            for name, value in step.info.get("reward_terms", {}).items()
        },
    )
    new_carry = MatchCarry(
        env_state=step.env_state,
        obs=_rows(team_rows(step.obs, new_side, own=True)),
        is_first=repeat(step.done),
        hidden=mine.hidden,
        side=new_side,
        opponent=opp.replace(
            obs=_rows(team_rows(step.obs, new_side, own=False)),
            is_first=opponent_first,
            lanes=lanes,
        ),
    )
    return new_carry, record


def empty_tally(spec: MatchSpec, plan: MatchPlan | None = None) -> LeagueTally | None:
    """The zero of the ``MatchRecord.tally`` a rollout under ``plan`` sums over its steps
    (None: no league); one row per entry of the plan's pool."""
    if not spec.layout.two_team:
        return None
    lane_probs = None if plan is None else plan.lane_probs
    return opponents.empty_tally(spec.layout, opponents.pool_entries(spec.layout, lane_probs))


def idle_plan(layout: Layout, env_params: Any) -> MatchPlan:
    """Every env on ``env_params`` (shared), opponents from the params, learner on team 0."""
    num_envs = layout.total_envs
    if layout.per_env_params:
        env_params = jax.tree.map(
            lambda x: jnp.broadcast_to(jnp.asarray(x), (num_envs,) + jnp.shape(x)), env_params
        )
    return MatchPlan(
        env_params=env_params,
        opponent_kind=jnp.full((num_envs,), FROM_PARAMS, jnp.int32),
        random_side=jnp.zeros((num_envs,), bool),
        switches={},
    )
