"""The match step: every actor of every env acts, then one vmapped env step.

This is the one acting loop body of jaxrl. Training rollouts (:mod:`jaxrl.core.rollout`),
evaluation (:mod:`jaxrl.commands.evaluate`), rendering (:mod:`jaxrl.commands.render`) and
tournaments (:mod:`jaxrl.commands.tournament`) all call :func:`match_step`; they differ only in the
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
- ``NETWORK``: the current policy for the layout's ``current`` group (computed in the
  learner's own forward pass), an entry of the plan's :class:`~jaxrl.core.opponents.OpponentPlan`
  for the lanes (one vmapped pass over lanes, each with its entry's params and normaliser);
  see :mod:`jaxrl.core.opponents`. A feature fills both (the league: its pool).

Both teams see the same mirrored egocentric observation, so any policy plays either side.

A two-team step is four small pure functions: :func:`learner_pass` (the learner's rows and
the current-policy opponents' rows in one forward pass), :func:`opponent_actions` (scripted
and network opponents), :func:`step_envs` (one vmapped env step) and the lanes' bookkeeping
(:func:`jaxrl.core.opponents.bookkeeping`: the lanes' results and next draws).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.core import opponents
from jaxrl.core.acting import ActOutput, PolicyParams, PolicySpec, act
from jaxrl.core.layout import Layout, shard_rows
from jaxrl.core.networks import mask_logits
from jaxrl.core.opponents import LaneCarry, LeagueTally, OpponentPlan
from jaxrl.envs import protocols
from jaxrl.envs.wrappers import legal_actions, player_to_move

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

    @property
    def masked(self) -> bool:
        """The env says which actions are legal (:class:`jaxrl.envs.protocols.ActionMaskEnv`)."""
        return protocols.action_masked(self.env) is not None

    @property
    def turn_based(self) -> bool:
        """One slot moves per step (:class:`jaxrl.envs.protocols.TurnBasedEnv`)."""
        return protocols.turn_based(self.env) is not None


class MatchPlan(struct.PyTreeNode):
    """Per-env choices of one stretch of play (one update, one evaluation, one pairing)."""

    env_params: Any  # EnvParams: shared, or every leaf [N] when layout.per_env_params
    opponent_kind: jax.Array  # [N] int32: FROM_PARAMS, NETWORK or a scripted kind
    random_side: jax.Array  # [N] bool: the learner's team is drawn per match (else team 0)
    opponents: OpponentPlan | None = None  # what the layout's lanes play (a feature's), or None
    learner_kind: Any = None  # [N] int32 NETWORK or a scripted kind (tournaments), or None
    side: Any = None  # [N] int32 learner team where not random_side (None: team 0)


class StepKeys(struct.PyTreeNode):
    """Every key one match step consumes, drawn by :func:`step_keys` (before a rollout loop:
    on CPU each split inside the loop body is a loop of its own)."""

    learner: jax.Array  # () samples the learner's (and current-policy opponents') actions
    env: jax.Array  # [N] one per env step
    scripted: Any = None  # [N] scripted opponents (two-team envs)
    mine: Any = None  # [N] scripted players on the learner's side (tournaments)
    lanes: Any = None  # [L] the lanes' action sampling
    side: Any = None  # () teams of new matches
    draw: Any = None  # () the lanes' next opponents
    legal: Any = None  # [N] scripted opponents' illegal actions redrawn (ActionMaskEnv only)
    legal_mine: Any = None  # [N] the same for scripted players on the learner's side


def step_keys(spec: MatchSpec, key: jax.Array) -> StepKeys:
    """Split ``key`` into the keys of one match step (one split call).

    Per-env keys are drawn for the envs of every device and sliced to this device's
    (:func:`jaxrl.core.layout.shard_rows`): env ``e`` gets the same key on any number of devices.
    """
    layout = spec.layout
    num_envs, axis, devices = layout.total_envs, layout.axis, layout.devices
    every = num_envs * devices
    mine = lambda keys: shard_rows(keys, axis, num_envs)  # noqa: E731
    if not layout.two_team:
        keys = jax.random.split(key, 1 + every)
        return StepKeys(learner=keys[0], env=mine(keys[1:]))
    lanes = max(layout.opponents.lanes, 1)
    # A masked env draws two more per-env keys, after all others: an env without masks splits
    # exactly as before.
    extra = 2 if spec.masked else 0
    keys = jax.random.split(key, 3 + (3 + extra) * every + lanes * devices)
    envs_at = lambda i: mine(keys[3 + i * every : 3 + (i + 1) * every])  # noqa: E731
    lane_at, legal_at = 3 + 3 * every, 3 + 3 * every + lanes * devices
    legal_at_ = lambda i: mine(keys[legal_at + i * every : legal_at + (i + 1) * every])  # noqa: E731
    return StepKeys(
        learner=keys[0],
        side=keys[1],
        draw=keys[2],
        env=envs_at(0),
        scripted=envs_at(1),
        mine=envs_at(2),
        lanes=shard_rows(keys[lane_at:legal_at], axis, lanes),
        legal=legal_at_(0) if extra else None,
        legal_mine=legal_at_(1) if extra else None,
    )


class OpponentCarry(struct.PyTreeNode):
    """The opponents' side of a two-team match batch."""

    obs: jax.Array  # [N * S, *obs_shape] raw observations of the opponent rows
    is_first: jax.Array  # [N * S] bool, the row's policy starts afresh (new match or opponent)
    hidden_latest: Any  # [current * S, ...] carry of the current-policy opponents
    lanes: LaneCarry  # the lanes: hidden states, entries, draw bookkeeping


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
    tally: Any  # the lanes' count of this step (LeagueTally, with lanes), or None
    # {name: [N * A] float32} the learner rows' weighted reward terms this step (envs that
    # report info["reward_terms"]; empty otherwise)
    reward_terms: dict = struct.field(default_factory=dict)
    legal: Any = None  # [N * A, num_actions] bool legal actions the rows acted under (masked envs)
    turn: Any = None  # [N * A] bool, the row's slot moved this step (turn-based envs)
    next_turn: Any = None  # [N * A] bool, the row's slot moves next step (turn-based envs)


class Situation(struct.PyTreeNode):
    """What an env's state says about the next step, per env: every slot's legal actions
    (:class:`jaxrl.envs.protocols.ActionMaskEnv`) and the slot to move
    (:class:`jaxrl.envs.protocols.TurnBasedEnv`); None for an env without them."""

    legal: Any = None  # [N, (A,) num_actions] bool
    mover: Any = None  # [N] int32, the slot whose action the next step applies


def situation(spec: MatchSpec, plan: MatchPlan, env_state: Any) -> Situation:
    """The :class:`Situation` of ``env_state [N]`` (the state the carry's observations show).

    Both are static decisions: an env without masks or turns adds nothing to the graph.
    """
    params_axis = 0 if spec.layout.per_env_params else None

    def of(fn):
        return jax.vmap(lambda s, p: fn(spec.env, s, p), in_axes=(0, params_axis))(
            env_state, plan.env_params
        )

    return Situation(
        legal=of(legal_actions) if spec.masked else None,
        mover=of(player_to_move).astype(jnp.int32) if spec.turn_based else None,
    )


def slot_moves(mover: Any, slots: jax.Array) -> Any:
    """``[N, A]`` bool: slot ``slots[n, a]`` of env ``n`` is the one to move (None: no turns)."""
    return None if mover is None else slots == mover[:, None]


def random_legal(legal: jax.Array, keys: jax.Array) -> jax.Array:
    """``[N, S]`` int32 uniformly random legal actions of ``legal [N, S, n]`` (``keys [N]``)."""
    draw = lambda key, rows: jax.random.categorical(key, mask_logits(jnp.zeros(rows.shape), rows))  # noqa: E731
    return jax.vmap(draw)(keys, legal).astype(jnp.int32)


def legalize(action: jax.Array, legal: Any, keys: Any) -> jax.Array:
    """``action [N, S]`` with each action ``legal [N, S, n]`` forbids replaced by a uniformly
    random legal one (a scripted policy that knows no masks); None: ``action`` as is."""
    if legal is None:
        return action
    allowed = jnp.take_along_axis(legal, action[..., None].astype(jnp.int32), axis=-1)[..., 0]
    return jnp.where(allowed, action, random_legal(legal, keys)).astype(action.dtype)


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
        hidden_latest=policy_hidden(layout.opponents.current_envs * size),
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
            np.full(layout.num_measured_envs * rows, spec.eval_deterministic),
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


def _slot_mask(info: dict, rows: int, rows_of) -> jax.Array:
    """``[rows]`` bool active slots: the env's ``info["agent_mask"]`` (as ``rows_of`` picks the
    learner's rows), or every slot where the env gives none."""
    if "agent_mask" in info:
        return rows_of(info["agent_mask"])
    return jnp.ones((rows,), bool)


def _single_team_step(spec, learner, plan, carry, keys: StepKeys):
    layout = spec.layout
    now = situation(spec, plan, carry.env_state)
    rows_of = lambda x: None if x is None else per_actor(layout, x, per_agent=True)  # noqa: E731
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
        legal=rows_of(now.legal),
    )
    num_envs = layout.total_envs
    action = out.action
    if layout.num_agents > 1:
        action = _env_major(action, layout.num_agents)
    step = step_envs(spec, plan, carry.env_state, action, keys.env)
    info = step.info
    mask = None
    if layout.num_agents > 1:
        mask = _slot_mask(info, num_envs * layout.num_agents, rows_of)
    slots = jnp.broadcast_to(jnp.arange(layout.num_agents), (num_envs, layout.num_agents))
    record = _record(
        out,
        carry,
        step,
        reward=rows_of(step.reward),
        per_env=lambda x: per_actor(layout, x, per_agent=False),
        final_obs=rows_of(info["final_observation"]),
        mask=mask,
        returns=per_actor(layout, info["episode_return"], info["episode_return"].ndim > 1),
        outcome={
            name: (value[:, 0] if value.ndim > 1 else value).astype(jnp.float32)
            for name, value in info.get("episode_outcome", {}).items()
        },
        tally=None,
        terms={
            name: per_actor(layout, value, per_agent=value.ndim > 1)
            for name, value in info.get("reward_terms", {}).items()
        },
    )
    nxt = situation(spec, plan, step.env_state) if spec.turn_based else Situation()
    record = record.replace(
        legal=rows_of(now.legal),
        turn=rows_of(slot_moves(now.mover, slots)),
        next_turn=rows_of(slot_moves(nxt.mover, slots)),
    )
    new_carry = MatchCarry(
        env_state=step.env_state,
        obs=rows_of(step.obs),
        is_first=per_actor(layout, step.done, per_agent=False),
        hidden=out.hidden,
        side=carry.side,
        opponent=None,
    )
    return new_carry, record


def _record(out, carry, step, *, reward, per_env, final_obs, mask, returns, outcome, tally, terms):
    """The :class:`MatchRecord` of a step: the learner's rows, from ``per_env`` ``[N]`` data."""
    return MatchRecord(
        act=out,
        is_first=carry.is_first,
        reward=reward.astype(jnp.float32),
        terminated=per_env(step.terminated),
        truncated=per_env(step.truncated),
        final_obs=final_obs,
        mask=mask,
        done=step.done,
        episode_return=returns,
        episode_length=step.info["episode_length"],
        outcome=outcome,
        tally=tally,
        reward_terms={name: value.astype(jnp.float32) for name, value in terms.items()},
    )


def learner_pass(
    spec: MatchSpec,
    learner: PolicyParams,
    carry: MatchCarry,
    key: jax.Array,
    legal: jax.Array | None = None,
    opp_legal: jax.Array | None = None,
) -> tuple[ActOutput, ActOutput | None]:
    """The learner's rows and the current-policy opponents' rows: one forward pass.

    ``legal``, ``opp_legal``: ``[N * S, num_actions]`` bool legal actions of the learner's
    and the opponents' rows (masked envs), else None.

    Returns:
      ``(mine, latest)``: the learner's ``[N * S]`` rows, and the ``[latest * S]`` rows of
      the current-policy opponents (None without that group).
    """
    layout = spec.layout
    opp = carry.opponent
    latest_rows = layout.opponents.current_envs * layout.team_size
    learner_rows = layout.total_envs * layout.team_size
    rows, hidden, first = carry.obs, carry.hidden, carry.is_first
    if latest_rows:
        rows = jnp.concatenate([rows, opp.obs[:latest_rows]])
        hidden = _concat(hidden, opp.hidden_latest)
        first = jnp.concatenate([first, opp.is_first[:latest_rows]])
        if legal is not None:
            legal = jnp.concatenate([legal, opp_legal[:latest_rows]])
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
        legal=legal,
    )
    mine = jax.tree.map(lambda x: x[:learner_rows], out)
    if not latest_rows:
        return mine, None
    return mine, jax.tree.map(lambda x: x[learner_rows:], out)


def learner_actions(
    spec: MatchSpec,
    plan: MatchPlan,
    mine: ActOutput,
    carry: MatchCarry,
    keys: StepKeys,
    legal: jax.Array | None = None,
) -> jax.Array:
    """[N, S] actions of the learner's team: the network's, or a scripted player's where the
    plan's ``learner_kind`` names one (tournaments; illegal ones redrawn, ``legal [N * S, n]``)."""
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
    if legal is not None:
        scripted = legalize(scripted, _env_major(legal, size), keys.legal_mine)
    return jnp.where((plan.learner_kind == NETWORK)[:, None], action, scripted)


def default_kind(env: Any) -> int:
    """The scripted kind ``FROM_PARAMS`` means for env params that name none (params without
    :class:`jaxrl.envs.protocols.ScriptedOpponentParams`): the league's anchor ``"rule"``
    (:func:`jaxrl.envs.protocols.scripted_kinds`), else the env's first kind."""
    kinds = protocols.scripted_kinds(env)  # "rule": the env's, or its random mover
    return kinds.get(protocols.LEAGUE_ANCHOR, next(iter(kinds.values())))


def opponent_kinds(
    plan: MatchPlan, num_envs: int, fallback: int = 0
) -> tuple[jax.Array, jax.Array]:
    """``(kind [N] int32, skill [N] float32)`` of every env's opponent: the plan's kind, or
    the env params' kind and skill where the plan says ``FROM_PARAMS`` (``fallback`` at full
    skill for params that name no opponent, :func:`default_kind`)."""
    params = plan.env_params
    if isinstance(params, protocols.ScriptedOpponentParams):
        kind_param = _per_env(params.opponent_kind, num_envs)
        skill_param = _per_env(params.opponent_skill, num_envs)
    else:
        kind_param = jnp.full((num_envs,), fallback, jnp.int32)
        skill_param = jnp.ones((num_envs,), jnp.float32)
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
    legal: jax.Array | None = None,
) -> tuple[jax.Array, OpponentCarry]:
    """[N, S] int32 opponent actions: scripted for every env (cheap; actions ``legal``
    ``[N * S, n]`` forbids redrawn uniformly among the legal ones), networks on the layout's
    static groups where ``kind`` is ``NETWORK``.

    ``latest``: the current-policy opponents' part of :func:`learner_pass`. Returns the
    actions and ``opp`` with the networks' new hidden states.
    """
    layout = spec.layout
    size = layout.team_size
    action = _scripted(spec, kind, skill, _env_major(opp.obs, size), keys.scripted)
    if legal is not None:
        action = legalize(action, _env_major(legal, size), keys.legal)
    hidden_latest, lanes = opp.hidden_latest, opp.lanes
    latest_action = lane_action = None
    if latest is not None:
        hidden_latest = latest.hidden
        latest_action = _env_major(latest.action, size)
    if layout.opponents.lanes:
        rows = opponents.lane_rows(layout)
        lane_action, lane_hidden = opponents.lane_actions(
            spec.policy,
            layout,
            plan.opponents.params,
            opp.lanes,
            opp.obs[rows],
            opp.is_first[rows],
            keys.lanes[: layout.opponents.lanes],
            None if legal is None else legal[rows],
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
    now = situation(spec, plan, carry.env_state)
    mine_legal, opp_legal = _team_legal(now.legal, side)
    mine, latest = learner_pass(spec, learner, carry, keys.learner, mine_legal, opp_legal)
    learner_action = learner_actions(spec, plan, mine, carry, keys, mine_legal)
    kind, skill = opponent_kinds(plan, layout.total_envs, default_kind(spec.env))
    opponent_action, opp = opponent_actions(
        spec, plan, carry.opponent, latest, kind, skill, keys, opp_legal
    )
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
        layout, opp.lanes, step.done, kind == NETWORK, outcome, plan.opponents, keys.draw
    )
    record = _record(
        mine,
        carry,
        step,
        reward=mine_of(step.reward),
        per_env=lambda x: jnp.repeat(x, size),  # [N] -> [N * S]
        final_obs=mine_of(step.info["final_observation"]),
        mask=_slot_mask(step.info, layout.total_envs * size, mine_of),
        returns=mine_of(step.info["episode_return"]),
        outcome=outcome,
        tally=tally,
        terms={name: mine_of(v) for name, v in step.info.get("reward_terms", {}).items()},
    )
    record = record.replace(legal=mine_legal, **_turns(spec, plan, now, step, side, new_side))
    new_carry = MatchCarry(
        env_state=step.env_state,
        obs=_rows(team_rows(step.obs, new_side, own=True)),
        is_first=jnp.repeat(step.done, size),
        hidden=mine.hidden,
        side=new_side,
        opponent=opp.replace(
            obs=_rows(team_rows(step.obs, new_side, own=False)),
            is_first=opponent_first,
            lanes=lanes,
        ),
    )
    return new_carry, record


def _team_legal(legal: Any, side: jax.Array) -> tuple[Any, Any]:
    """``(learner rows, opponent rows)`` ``[N * S, n]`` of ``legal [N, 2S, n]`` (None: None)."""
    if legal is None:
        return None, None
    return _rows(team_rows(legal, side, own=True)), _rows(team_rows(legal, side, own=False))


def _turns(spec, plan, now: Situation, step: EnvStep, side, new_side) -> dict:
    """``{turn, next_turn}`` ``[N * S]`` bool of the learner's rows (turn-based envs), else {}.

    The learner's slot ``j`` of env ``n`` is env slot ``side[n] * S + j``.
    """
    if not spec.turn_based:
        return {}
    size = spec.layout.team_size
    slots = lambda s: s[:, None] * size + jnp.arange(size)  # noqa: E731 - [N] -> [N, S]
    nxt = situation(spec, plan, step.env_state)
    return {
        "turn": _rows(slot_moves(now.mover, slots(side))),
        "next_turn": _rows(slot_moves(nxt.mover, slots(new_side))),
    }


def empty_tally(spec: MatchSpec, plan: MatchPlan | None = None) -> LeagueTally | None:
    """The zero of the ``MatchRecord.tally`` a rollout under ``plan`` sums over its steps
    (None: no lanes); one row per entry of the plan's opponents."""
    if not spec.layout.two_team:
        return None
    planned = None if plan is None else plan.opponents
    return opponents.empty_tally(spec.layout, opponents.plan_entries(spec.layout, planned))


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
    )
