"""Top-down 2-D car soccer, 1v1 up to 3v3, as a symmetric two-team gymnax 1.0 environment.

Two-team contract: the caller drives both teams. Every env step takes one action per car slot
and returns one observation row and one reward per slot, for all six slots: 0..2 are blue
(team 0), 3..5 orange (team 1). Who drives which team (a learning policy, a frozen snapshot,
the RulePolicy, a random policy) is the caller's choice, per env; ``step`` runs no policy. The
scripted policies live in :mod:`jaxrl.envs.soccer.rule_policy` and read nothing but a team's own
observation rows, so a caller drives either side with them (``scripted_team_actions``), and
``EnvParams.opponent_kind``/``opponent_skill`` name the scripted policy a caller puts on the
team it does not control. Team sizes, team-size sampling, the scripted opponent and reward
weights are array leaves of :class:`EnvParams`, so a curriculum changes them with
``params.replace`` and nothing recompiles. Arrays are always sized for 3v3; inactive cars are
parked off-field and masked out of physics, observations and rewards.

The game is symmetric: each team sees, and is rewarded for, the world rotated so that it
attacks +y (orange's view is blue's view of the world rotated by 180 degrees with the teams
swapped). In mirrored situations both teams get identical observations, rewards and outcomes.

Observation, float32 [6, OBS_DIM=65]: row ``3 * team + i`` is ``observe(state, params,
team)[i]``, the egocentric row of slot i of that team (zeros for inactive slots). "Team frame"
is the world rotated so the car's team attacks +y (identity for blue, 180 degrees for orange);
"car frame" is the team frame rotated into the car's (forward, left) axes.

    idx    size  feature (normalisation)
    0:2    2     own position, team frame (x / HALF_WIDTH, y / HALF_LENGTH)
    2:4    2     own velocity, team frame (/ CAR_SPEED_SCALE)
    4:6    2     own heading (cos, sin), team frame
    6      1     own boost meter in [0, 1]
    7      1     match time left, 1 -> 0
    8:10   2     ball position, team frame (x / HALF_WIDTH, y / HALF_LENGTH)
    10:12  2     ball velocity, team frame (/ BALL_SPEED_SCALE)
    12:14  2     ball position relative to the car, car frame (/ HALF_LENGTH)
    14:16  2     ball velocity relative to the car, car frame (/ BALL_SPEED_SCALE)
    16:18  2     opponent goal centre relative to the car, car frame (/ HALF_LENGTH)
    18:20  2     own goal centre relative to the car, car frame (/ HALF_LENGTH)
    20:38  2x9   teammates (the other two own slots, in slot order), then
    38:65  3x9   opponents (their slots 0, 1, 2); with ``nearest_first`` both lists are
                   ordered by distance from the car instead, nearest first, inactive last;
                   each block of 9:
                   active flag; relative position, car frame (/ HALF_LENGTH, 2);
                   relative velocity, car frame (/ CAR_SPEED_SCALE, 2);
                   position, team frame (x / HALF_WIDTH, y / HALF_LENGTH, 2);
                   heading (cos, sin), team frame (2). All zero when inactive.

Action, int32 [6] (``action_space`` is ``Discrete(18)`` per car; the env expects shape [6]):
``a = (throttle + 1) * 6 + (steer + 1) * 2 + boost``, throttle in {-1, 0, 1} (reverse, coast,
forward), steer in {-1, 0, 1} (+1 = right/clockwise, in the car's own frame, so the same for
both teams), boost in {0, 1}; 8 is the no-op. Actions of inactive slots are ignored.

Reward, float32 [6]: per slot, the weighted terms of :class:`RewardWeights` computed from its
own team's side (its goals scored and conceded, its potential and ball-velocity terms toward
the goal it attacks), blended with its team's mean by ``team_spirit``; 0 for inactive slots.

Termination: a goal when ``goal_ends_episode``; otherwise a goal resets to kickoff and play
continues. Truncation: ``time >= max_steps_in_episode`` (the match clock).

Info (same keys and shapes every step):
    agent_mask       bool [6]     active slots (the cars that acted this step)
    goal_blue        float32 ()   1 if blue scored this step
    goal_orange      float32 ()   1 if orange scored this step
    score_blue       float32 ()   blue goals so far this episode, this step included
    score_orange     float32 ()   orange goals so far this episode, this step included
    ball_touch       float32 [6]  1 if that car touched the ball this step
    reward_terms     dict name -> float32 [6], each weighted term (before team_spirit)
    episode_outcome  dict win, draw, loss, goals_for, goals_against -> float32 [6]: the match
                     so far from each slot's own team's side (orange's win is blue's loss);
                     read where the episode ends
  plus ``terminated``, ``truncated`` and ``final_observation`` from the gymnax base class.
"""

from __future__ import annotations

import dataclasses
import math
import types
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import yaml
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl.envs.domains import NON_NEGATIVE, UNIT, Choices, Interval, param
from jaxrl.envs.protocols import EntityGroup, EntityLayout
from jaxrl.envs.soccer import physics
from jaxrl.envs.soccer.physics import (
    BALL_SPEED_SCALE,
    CAR_SPEED_SCALE,
    HALF_LENGTH,
    HALF_WIDTH,
    MAX_PER_TEAM,
    NOOP_ACTION,
    NUM_ACTIONS,
    NUM_CARS,
    OBS_DIM,
    OTHER_FEATURES,
    OWN_FEATURES,
    Bodies,
    PhysicsParams,
    StepEvents,
    array_field,
    cast_python_scalars,
)

# The scripted policy kinds (``EnvParams.opponent_kind``) and the policies themselves; the
# rule_policy module reads only physics, so this import runs one way.
from jaxrl.envs.soccer.rule_policy import IDLE, RANDOM, RULE, scripted_team_actions

OPPONENT_KINDS = Choices({IDLE: "idle", RULE: "RulePolicy", RANDOM: "random"})
TEAM_SIZE = Interval(0, MAX_PER_TEAM)  # active cars a side

NUM_TEAMS = 2
# The teammate and opponent blocks of an observation row (module docstring), each led by its
# active flag: ``network.entity_width`` encodes them with shared weights per group.
ENTITY_LAYOUT = EntityLayout(
    size=OBS_DIM,
    groups=(
        EntityGroup("teammates", OWN_FEATURES, MAX_PER_TEAM - 1, OTHER_FEATURES, presence=0),
        EntityGroup(
            "opponents",
            OWN_FEATURES + (MAX_PER_TEAM - 1) * OTHER_FEATURES,
            MAX_PER_TEAM,
            OTHER_FEATURES,
            presence=0,
        ),
    ),
)

DEFAULT_REWARD_PATH = Path(__file__).resolve().parents[2] / "configs" / "rewards" / "soccer.yaml"

# For blue slot i, its teammates are the other two slots in increasing order.
_TEAMMATES = np.array([[j for j in range(MAX_PER_TEAM) if j != i] for i in range(MAX_PER_TEAM)])
_POS_SCALE = np.array([HALF_WIDTH, HALF_LENGTH], np.float32)
_OPP_GOAL = np.array([0.0, HALF_LENGTH], np.float32)  # team frame
_OWN_GOAL = np.array([0.0, -HALF_LENGTH], np.float32)
# World -> team frame is a multiplication by this sign (rotation by 0 or 180 degrees); negation
# is exact in floating point, so mirrored situations give bit-identical team-frame rewards.
_TEAM_SIGN = np.array([1.0, -1.0], np.float32)  # [2]

REWARD_TERMS = (
    "goal_scored",
    "goal_conceded",
    "touch",
    "vel_to_ball",
    "vel_ball_to_goal",
    "ball_goal_potential",
    "boost_use",
    "time",
)


class RewardWeights(struct.PyTreeNode):
    """Reward weights (all array leaves). Defaults equal ``configs/rewards/soccer.yaml``.

    Each term is ``weight * feature`` per car, the feature taken from the car's own team's side
    (both teams use the same weights); signs live in the weights.
    """

    goal_scored: jax.Array = np.float32(10.0)  # x 1 when the car's team scores
    goal_conceded: jax.Array = np.float32(-10.0)  # x 1 when the other team scores
    touch: jax.Array = np.float32(0.5)  # x 1 when this car touched the ball this step
    vel_to_ball: jax.Array = np.float32(0.01)  # x car velocity toward the ball / 2.3, [-1, 1]
    vel_ball_to_goal: jax.Array = np.float32(0.05)  # x ball vel toward opp. goal / 6, [-1, 1]
    ball_goal_potential: jax.Array = np.float32(1.0)  # x (gamma * phi(s') - phi(s))
    boost_use: jax.Array = np.float32(-0.01)  # x fraction of the step spent boosting
    time: jax.Array = np.float32(-0.001)  # x 1 every step
    team_spirit: jax.Array = param(np.float32(0.3), UNIT)  # blend: (1 - ts) * own + ts * team mean
    # gamma of the potential shaping (1: difference)
    potential_gamma: jax.Array = param(np.float32(1.0), UNIT)
    sparse: jax.Array = np.bool_(False)  # keep only the goal terms
    # The touch term pays a car only when it was not the ball's last toucher (see
    # ``new_touches``): dribbling, pinning or tapping the ball pays once until another car
    # touches it, so touching cannot be farmed. False: every step of contact pays.
    touch_once: jax.Array = np.bool_(False)

    def __post_init__(self):
        """Cast Python scalars to the leaf dtypes (see ``physics.cast_python_scalars``)."""
        cast_python_scalars(self)


class EnvParams(struct.PyTreeNode):
    """Everything an episode is conditioned on; every field is an array leaf (no retrace).

    ``opponent_kind`` and ``opponent_skill`` are not read by ``step`` (the caller drives both
    teams): they name the scripted policy (``rule_policy.scripted_team_actions``) that a caller
    puts on the team it does not control, e.g. the trainer, ``scripted_rollout`` (orange) and
    rendering. Python lists given for ``team_size_weights`` become float32 [3] arrays.
    """

    max_steps_in_episode: jax.Array = param(np.int32(900), Interval(1))  # () clock, steps (60 s)
    blue_size: jax.Array = param(np.int32(1), TEAM_SIZE)  # () active blue cars (w/o weights)
    orange_size: jax.Array = param(np.int32(1), TEAM_SIZE)  # () active orange cars (likewise)
    # [3] p(n v n) for n = 1, 2, 3, up to scale, drawn at every reset; all zero (the default):
    # blue_size and orange_size apply instead.
    team_size_weights: jax.Array = array_field([0.0, 0.0, 0.0], np.float32, NON_NEGATIVE)
    opponent_kind: jax.Array = param(np.int32(RULE), OPPONENT_KINDS)  # () scripted opponent
    opponent_skill: jax.Array = param(np.float32(1.0), UNIT)  # () p(random action) = 1 - skill
    goal_ends_episode: jax.Array = np.bool_(False)  # () a goal terminates (else: kickoff)
    # () list each car's teammates and opponents nearest first (inactive ones last), instead of
    # in slot order: a canonical order, so the policy need not learn every permutation.
    nearest_first: jax.Array = np.bool_(False)
    reward: RewardWeights = struct.field(default_factory=RewardWeights)
    physics: PhysicsParams = struct.field(default_factory=PhysicsParams)

    def __post_init__(self):
        """Cast Python scalars to the leaf dtypes (see ``physics.cast_python_scalars``)."""
        cast_python_scalars(self)


class EnvState(struct.PyTreeNode):
    """Per-instance dynamic state."""

    time: jax.Array  # () int32, env steps since the episode started
    bodies: Bodies  # cars [6] and ball
    car_active: jax.Array  # [6] bool, fixed at reset from the (drawn) team sizes
    score: jax.Array  # [2] int32, goals of (blue, orange) this episode
    # [6] bool, the car(s) that touched the ball last (all false until a touch after a kickoff;
    # several when they touched it first in the same step)
    last_touch: jax.Array


def load_reward_weights(path: str | Path = DEFAULT_REWARD_PATH) -> RewardWeights:
    """Read reward weights from YAML (keys = :class:`RewardWeights` fields, all required).

    Raises:
      ValueError: a missing or unknown key, or a value of the wrong type.
    """
    with open(path) as f:
        raw = yaml.safe_load(f) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of reward weights")
    fields = {f.name: f for f in dataclasses.fields(RewardWeights)}
    for key in raw:
        if key not in fields:
            raise ValueError(f"{path}: unknown reward weight {key!r}; known: {sorted(fields)}")
    values = {}
    for name, f in fields.items():
        if name not in raw:
            raise ValueError(f"{path}: missing reward weight {name!r}")
        value = raw[name]
        if f.default.dtype == np.bool_:
            if not isinstance(value, bool):
                raise ValueError(f"{path}: {name} must be true or false, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{path}: {name} must be a number, got {value!r}")
        elif not math.isfinite(value):
            raise ValueError(f"{path}: {name} must be finite, got {value!r}")
        values[name] = np.asarray(value, f.default.dtype)[()]
    return RewardWeights(**values)


# ----------------------------------------------------------------------------- observations


class TeamFrames(struct.PyTreeNode):
    """Both teams' views of the world, each in its own team frame; leading axis [2] = team.

    Like ``physics.TeamView``, but headings are unit vectors (cos, sin): the orange frame is
    the world negated, so its vectors are exact negations of blue's and need no trigonometry.
    """

    own_pos: jax.Array  # [2, 3, 2]
    own_vel: jax.Array  # [2, 3, 2]
    own_dir: jax.Array  # [2, 3, 2] heading (cos, sin)
    own_boost: jax.Array  # [2, 3]
    own_active: jax.Array  # [2, 3] bool
    opp_pos: jax.Array  # [2, 3, 2]
    opp_vel: jax.Array  # [2, 3, 2]
    opp_dir: jax.Array  # [2, 3, 2]
    opp_active: jax.Array  # [2, 3] bool
    ball_pos: jax.Array  # [2, 2]
    ball_vel: jax.Array  # [2, 2]


def team_frames(bodies: Bodies, active: jax.Array) -> TeamFrames:
    """Both teams' frames: blue's is the world, orange's the world rotated by 180 degrees."""
    car_dir = physics.unit(bodies.car_heading)  # [6, 2]
    # A fusion barrier: the observation is one big elementwise fusion over [6, OBS_DIM], and
    # without it XLA recomputes the trigonometry of the headings for every output entry
    # (figures: docs/results/speed.md#why-the-code-is-as-it-is).
    car_pos, car_vel, car_dir = jax.lax.optimization_barrier(
        (bodies.car_pos, bodies.car_vel, car_dir)
    )
    sign = jnp.asarray(_TEAM_SIGN)

    def split(x, flip):  # [6, ...] -> (own [2, 3, ...], opponents [2, 3, ...])
        blue, orange = x[:MAX_PER_TEAM], x[MAX_PER_TEAM:]
        if flip:  # vectors: orange sees them negated
            return jnp.stack([blue, -orange]), jnp.stack([orange, -blue])
        return jnp.stack([blue, orange]), jnp.stack([orange, blue])

    own_pos, opp_pos = split(car_pos, flip=True)
    own_vel, opp_vel = split(car_vel, flip=True)
    own_dir, opp_dir = split(car_dir, flip=True)
    own_boost, _ = split(bodies.car_boost, flip=False)
    own_active, opp_active = split(active, flip=False)
    return TeamFrames(
        own_pos=own_pos,
        own_vel=own_vel,
        own_dir=own_dir,
        own_boost=own_boost,
        own_active=own_active,
        opp_pos=opp_pos,
        opp_vel=opp_vel,
        opp_dir=opp_dir,
        opp_active=opp_active,
        ball_pos=sign[:, None] * bodies.ball_pos,
        ball_vel=sign[:, None] * bodies.ball_vel,
    )


def _local(vec: jax.Array, direction: jax.Array) -> jax.Array:
    """Vectors [..., 2] in the (forward, left) frame of unit ``direction`` [..., 2]."""
    c, s = direction[..., 0], direction[..., 1]
    return jnp.stack([c * vec[..., 0] + s * vec[..., 1], -s * vec[..., 0] + c * vec[..., 1]], -1)


def _other_features(
    self_pos: jax.Array,
    self_vel: jax.Array,
    self_dir: jax.Array,
    pos: jax.Array,
    vel: jax.Array,
    direction: jax.Array,
    active: jax.Array,
    nearest_first: jax.Array,
) -> jax.Array:
    """Features of K other cars seen from each of 3 own cars, for both teams.

    Args:
      self_pos: [2, 3, 2] own positions (team frame).
      self_vel: [2, 3, 2] own velocities.
      self_dir: [2, 3, 2] own heading unit vectors.
      pos: [2, 3, K, 2] positions of the K others, per own car.
      vel: [2, 3, K, 2] their velocities.
      direction: [2, 3, K, 2] their heading unit vectors.
      active: [2, 3, K] bool, whether each of them plays.
      nearest_first: () bool: list the K blocks by distance from the own car, nearest first and
        inactive ones last (ties keep slot order); else in slot order.

    Returns:
      float32 [2, 3, K * 9].
    """
    own_dir = self_dir[:, :, None]
    rel_pos = _local(pos - self_pos[:, :, None], own_dir) / HALF_LENGTH
    rel_vel = _local(vel - self_vel[:, :, None], own_dir) / CAR_SPEED_SCALE
    feats = jnp.concatenate(
        [
            jnp.ones_like(active, jnp.float32)[..., None],
            rel_pos,
            rel_vel,
            pos / _POS_SCALE,
            direction,
        ],
        axis=-1,
    )  # [2, 3, K, 9]
    feats = jnp.where(active[..., None], feats, 0.0)
    feats = jnp.where(
        nearest_first, _nearest_first(pos - self_pos[:, :, None], active, feats), feats
    )
    return feats.reshape(*feats.shape[:2], -1)


def _nearest_first(offset: jax.Array, active: jax.Array, feats: jax.Array) -> jax.Array:
    """``feats`` [2, 3, K, F] reordered on the K axis by ``|offset|`` [2, 3, K, 2], nearest first.

    Inactive cars (``active`` [2, 3, K] false) go last; ties keep slot order. Computed as ranks
    from pairwise comparisons and a masked sum, not a sort, gather or dot: elementwise work
    that fuses with the rest of the observation (K is 2 or 3).
    """
    k = feats.shape[2]
    distance = jnp.where(active, jnp.sum(offset * offset, axis=-1), jnp.inf)  # [2, 3, K]
    before = distance[..., None, :] < distance[..., :, None]  # [.., i, j]: j ahead of i
    tie = (distance[..., None, :] == distance[..., :, None]) & (
        np.arange(k) < np.arange(k)[:, None]
    )
    rank = jnp.sum(before | tie, axis=-1)  # [2, 3, K] each car's place, a permutation of 0..K-1
    at = rank[..., None, :] == np.arange(k)[:, None]  # [2, 3, place, K]
    return jnp.sum(jnp.where(at[..., None], feats[..., None, :, :], 0.0), axis=-2)


def _time_left(state: EnvState, params: EnvParams) -> jax.Array:
    """Match time left () in [0, 1]."""
    return jnp.clip(1.0 - state.time.astype(jnp.float32) / params.max_steps_in_episode, 0.0, 1.0)


def _ball_features(
    pos: jax.Array, vel: jax.Array, direction: jax.Array, ball_pos: jax.Array, ball_vel: jax.Array
) -> jax.Array:
    """float32 [2, 3, 12]: the ball in each team's frame (``ball_pos``, ``ball_vel``
    [2, 1, 2]), and the ball and both goals relative to each car (``pos``, ``vel``,
    ``direction`` [2, 3, 2]) in the car's own frame."""
    ones = jnp.ones((*pos.shape[:2], 1), jnp.float32)
    return jnp.concatenate(
        [
            ones * (ball_pos / _POS_SCALE),
            ones * (ball_vel / BALL_SPEED_SCALE),
            _local(ball_pos - pos, direction) / HALF_LENGTH,
            _local(ball_vel - vel, direction) / BALL_SPEED_SCALE,
            _local(_OPP_GOAL - pos, direction) / HALF_LENGTH,
            _local(_OWN_GOAL - pos, direction) / HALF_LENGTH,
        ],
        axis=-1,
    )


def observe_teams(state: EnvState, params: EnvParams) -> jax.Array:
    """Both teams' egocentric observations, float32 [6, OBS_DIM] (layout in the module docstring).

    Rows 0..2 are blue's slots, 3..5 orange's; orange sees the world rotated by 180 degrees so
    that it, too, attacks +y. Rows of inactive slots are zeros.

    Args:
      state: one env's state (no batch axis).
      params: its params (for the match clock).

    Returns:
      float32 [6, OBS_DIM].
    """
    f = team_frames(state.bodies, state.car_active)
    pos, vel, direction = f.own_pos, f.own_vel, f.own_dir  # [2, 3, 2] each
    ones = jnp.ones((NUM_TEAMS, MAX_PER_TEAM, 1), jnp.float32)
    own = jnp.concatenate(
        [
            pos / _POS_SCALE,
            vel / CAR_SPEED_SCALE,
            direction,
            f.own_boost[..., None],
            ones * _time_left(state, params),
        ],
        axis=-1,
    )  # [2, 3, 8]
    ball = _ball_features(pos, vel, direction, f.ball_pos[:, None], f.ball_vel[:, None])
    mates = _other_features(
        pos,
        vel,
        direction,
        pos[:, _TEAMMATES],
        vel[:, _TEAMMATES],
        direction[:, _TEAMMATES],
        f.own_active[:, _TEAMMATES],
        params.nearest_first,
    )  # [2, 3, 18]
    others = (NUM_TEAMS, MAX_PER_TEAM, MAX_PER_TEAM)
    opps = _other_features(
        pos,
        vel,
        direction,
        jnp.broadcast_to(f.opp_pos[:, None], (*others, 2)),
        jnp.broadcast_to(f.opp_vel[:, None], (*others, 2)),
        jnp.broadcast_to(f.opp_dir[:, None], (*others, 2)),
        jnp.broadcast_to(f.opp_active[:, None], others),
        params.nearest_first,
    )  # [2, 3, 27]
    obs = jnp.concatenate([own, ball, mates, opps], axis=-1)
    obs = jnp.where(f.own_active[..., None], obs, 0.0).astype(jnp.float32)
    return obs.reshape(NUM_CARS, OBS_DIM)


def observe(state: EnvState, params: EnvParams, team: int) -> jax.Array:
    """One team's rows of :func:`observe_teams`: float32 [3, OBS_DIM] (``team`` 0 or 1)."""
    if team not in (0, 1):
        raise ValueError(f"team must be 0 or 1, got {team!r}")
    return observe_teams(state, params)[team * MAX_PER_TEAM : (team + 1) * MAX_PER_TEAM]


# ----------------------------------------------------------------------------- rewards


def _normalize(v: jax.Array) -> jax.Array:
    return v / jnp.sqrt(jnp.sum(v * v, axis=-1, keepdims=True) + 1e-12)


def ball_goal_potential(ball_pos: jax.Array) -> jax.Array:
    """A team's potential phi [...] in [-1, 1] from the ball position [..., 2] in its frame.

    +1 with the ball at the goal the team attacks, -1 at its own goal.
    """
    d_own = jnp.sqrt(jnp.sum((ball_pos - _OWN_GOAL) ** 2, axis=-1))
    d_opp = jnp.sqrt(jnp.sum((ball_pos - _OPP_GOAL) ** 2, axis=-1))
    return (d_own - d_opp) / (2.0 * HALF_LENGTH)


def new_touches(touch: jax.Array, last_touch: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Which touches are new, and who touched the ball last after them.

    A touch is new when the car was not the ball's last toucher. Cars that touch it first in
    the same step are all last touchers after it; a step without a new touch keeps the last.

    Args:
      touch: [6] bool, cars touching the ball this step.
      last_touch: [6] bool, the last toucher(s) before the step.

    Returns:
      ``(new [6] bool, last_touch [6] bool)``.
    """
    new = touch & ~last_touch
    return new, jnp.where(jnp.any(new), new, last_touch)


def reward_terms(
    prev: Bodies,
    bodies: Bodies,
    events: StepEvents,
    agent_mask: jax.Array,
    w: RewardWeights,
    new_touch: jax.Array | None = None,
) -> dict[str, jax.Array]:
    """Weighted reward terms of every car slot from its team's side, each float32 [6].

    Team-level features (goals, the ball's velocity toward the goal the team attacks, its
    potential) are computed in each team's frame (world times ``_TEAM_SIGN``), car-level ones
    (touch, velocity toward the ball, boost) are frame-free. So orange's terms equal the terms
    blue would get in the mirrored world (``physics.mirror_bodies`` with the goal events
    swapped), bit for bit.

    Args:
      prev: bodies at the start of the step.
      bodies: bodies after the physics, before any kickoff reset (ball still in the net).
      events: what happened during the step.
      agent_mask: [6] bool, active slots.
      w: weights.
      new_touch: [6] bool, the step's new touches (:func:`new_touches`), paid instead of
        ``events.touch`` when ``w.touch_once``; None: every touch is new.

    Returns:
      ``{name: float32 [6]}`` for every name in ``REWARD_TERMS``; zero for inactive slots.
    """
    dense = jnp.where(w.sparse, 0.0, 1.0)
    sign = jnp.asarray(_TEAM_SIGN)[:, None]  # [2, 1]
    ball_pos, ball_vel = sign * bodies.ball_pos, sign * bodies.ball_vel  # [2, 2], team frames
    vel_to_ball = (
        jnp.sum(bodies.car_vel * _normalize(bodies.ball_pos - bodies.car_pos), -1) / CAR_SPEED_SCALE
    )  # [6]
    ball_to_goal = jnp.sum(ball_vel * _normalize(_OPP_GOAL - ball_pos), -1)  # [2]
    potential = w.potential_gamma * ball_goal_potential(ball_pos) - ball_goal_potential(
        sign * prev.ball_pos
    )  # [2]
    goal_for = jnp.stack([events.goal_blue, events.goal_orange])  # [2]
    paid_touch = events.touch if new_touch is None else new_touch  # [6], when touch_once

    def per_car(team_values):  # [2] -> [6]
        return jnp.repeat(team_values, MAX_PER_TEAM, total_repeat_length=NUM_CARS)

    terms = {
        "goal_scored": w.goal_scored * per_car(goal_for),
        "goal_conceded": w.goal_conceded * per_car(goal_for[::-1]),
        "touch": dense * w.touch * jnp.where(w.touch_once, paid_touch, events.touch),
        "vel_to_ball": dense * w.vel_to_ball * vel_to_ball,
        "vel_ball_to_goal": dense * w.vel_ball_to_goal * per_car(ball_to_goal / BALL_SPEED_SCALE),
        "ball_goal_potential": dense * w.ball_goal_potential * per_car(potential),
        "boost_use": dense * w.boost_use * events.boosting,
        "time": dense * w.time * jnp.ones(NUM_CARS, jnp.float32),
    }
    return {k: jnp.where(agent_mask, v, 0.0).astype(jnp.float32) for k, v in terms.items()}


def blend_team_spirit(
    individual: jax.Array, agent_mask: jax.Array, team_spirit: jax.Array
) -> jax.Array:
    """``(1 - ts) * own + ts * mean over active teammates``, 0 where inactive.

    Args:
      individual: float32 [..., 3], one team's individual rewards on the last axis.
      agent_mask: bool, like ``individual``.
      team_spirit: ts, broadcastable.

    Returns:
      float32, shaped like ``individual``.
    """
    count = jnp.maximum(jnp.sum(agent_mask, axis=-1, keepdims=True), 1)
    team_mean = jnp.sum(jnp.where(agent_mask, individual, 0.0), axis=-1, keepdims=True) / count
    blended = (1.0 - team_spirit) * individual + team_spirit * team_mean
    return jnp.where(agent_mask, blended, 0.0).astype(jnp.float32)


def episode_outcome(score: jax.Array) -> dict[str, jax.Array]:
    """The match result so far from each slot's team's side: ``{name: float32 [6]}``.

    Args:
      score: int32 [2], goals of (blue, orange).
    """
    goals_for = jnp.repeat(score, MAX_PER_TEAM, total_repeat_length=NUM_CARS)  # [6]
    goals_against = jnp.repeat(score[::-1], MAX_PER_TEAM, total_repeat_length=NUM_CARS)
    return {
        "win": (goals_for > goals_against).astype(jnp.float32),
        "draw": (goals_for == goals_against).astype(jnp.float32),
        "loss": (goals_for < goals_against).astype(jnp.float32),
        "goals_for": goals_for.astype(jnp.float32),
        "goals_against": goals_against.astype(jnp.float32),
    }


def draw_team_active(u: jax.Array, params: EnvParams) -> jax.Array:
    """[6] bool active slots for a new episode, from a uniform ``u`` () in [0, 1).

    With ``params.team_size_weights`` summing to > 0, both teams get n cars, n in {1, 2, 3}
    drawn with probabilities proportional to the weights; otherwise ``blue_size`` and
    ``orange_size`` apply.
    """
    weights = jnp.maximum(jnp.asarray(params.team_size_weights, jnp.float32), 0.0)  # [3]
    cumulative = jnp.cumsum(weights)
    # Inverse CDF: n - 1 = how many of the first two cumulative weights are <= u * total. A
    # zero weight gives an empty bin, and u < 1 keeps u * total strictly below the total.
    x = u * cumulative[-1]
    drawn = 1 + jnp.sum(cumulative[:-1] <= x).astype(jnp.int32)
    use = cumulative[-1] > 0.0
    blue = jnp.where(use, drawn, params.blue_size)
    orange = jnp.where(use, drawn, params.orange_size)
    return physics.team_active(blue, orange)


# ----------------------------------------------------------------------------- env


class Soccer(environment.Environment[EnvState, EnvParams]):
    """Top-down car soccer for two teams, both driven by the caller.

    See the module docstring for the obs, action, reward and info layout: every per-agent
    array has one entry per car slot, blue 0..2 then orange 3..5. Implements
    :class:`jaxrl.envs.protocols.VariableTeamSize`, :class:`jaxrl.envs.protocols.RenderableEnv` and
    :class:`jaxrl.envs.protocols.EntityObservation`.
    """

    num_agents = NUM_CARS  # car slots per env: 0..2 blue (team 0), 3..5 orange (team 1)
    num_teams = NUM_TEAMS
    team_size = MAX_PER_TEAM  # slots per team; slot 3 * team + i is car i of that team
    # The scripted policies a caller can put on a team (values of ``EnvParams.opponent_kind``).
    scripted_kinds = types.MappingProxyType({"idle": IDLE, "rule": RULE, "random": RANDOM})
    renderer = "jaxrl.envs.soccer.render"  # frames and GIFs of stacked states (needs Pillow)
    entity_layout = ENTITY_LAYOUT  # teammate and opponent blocks of an observation row

    @staticmethod
    def scripted_team_actions(
        key: jax.Array, team_obs: jax.Array, kind: jax.Array, skill: jax.Array
    ) -> jax.Array:
        """``rule_policy.scripted_team_actions``: a scripted team's int32 [3] actions."""
        return scripted_team_actions(key, team_obs, kind, skill)

    @staticmethod
    def with_team_size(params: EnvParams, size: int) -> EnvParams:
        """``params`` with ``size`` cars a side (team-size sampling off)."""
        return params.replace(
            blue_size=size, orange_size=size, team_size_weights=np.zeros(3, np.float32)
        )

    @property
    def default_params(self) -> EnvParams:
        """1v1, 60 s matches, default reward weights (scripted opponent: full RulePolicy)."""
        return EnvParams()

    @property
    def name(self) -> str:
        """Environment name."""
        return "Soccer"

    @property
    def num_actions(self) -> int:
        """Discrete actions per car."""
        return NUM_ACTIONS

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        """Per-car action space; ``step`` expects int32 [num_agents] actions."""
        del params
        return spaces.Discrete(NUM_ACTIONS)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """float32 [num_agents, OBS_DIM]; features are O(1) but not strictly bounded."""
        del params
        return spaces.Box(-jnp.inf, jnp.inf, (NUM_CARS, OBS_DIM), jnp.float32)

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """Kickoff with the (drawn) team sizes; returns ``(obs [6, OBS_DIM], state)``."""
        # One draw for the team size and the kickoff: reset runs at every step (gymnax's
        # auto-reset), and a key split would cost as much again.
        u = jax.random.uniform(key, (physics.KICKOFF_UNIFORMS + 1,))
        active = draw_team_active(u[-1], params)
        state = EnvState(
            time=jnp.zeros((), jnp.int32),
            bodies=physics.kickoff_from_uniforms(u[:-1], active, params.physics),
            car_active=active,
            score=jnp.zeros(2, jnp.int32),
            last_touch=jnp.zeros(NUM_CARS, bool),
        )
        return observe_teams(state, params), state

    def step_env(
        self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict[str, Any]]:
        """One env step (``NUM_SUBSTEPS`` physics substeps) with ``action`` int32 [6]."""
        agent_mask = state.car_active
        actions = jnp.where(agent_mask, jnp.asarray(action, jnp.int32), NOOP_ACTION)
        controls = physics.decode_actions(actions)
        bodies, events = physics.step_physics(state.bodies, controls, agent_mask, params.physics)

        new_touch, last_touch = new_touches(events.touch & agent_mask, state.last_touch)
        terms = reward_terms(state.bodies, bodies, events, agent_mask, params.reward, new_touch)
        individual = sum(terms.values())
        reward = blend_team_spirit(
            individual.reshape(NUM_TEAMS, MAX_PER_TEAM),
            agent_mask.reshape(NUM_TEAMS, MAX_PER_TEAM),
            params.reward.team_spirit,
        ).reshape(NUM_CARS)

        scored = events.goal_blue | events.goal_orange
        score = state.score + jnp.stack([events.goal_blue, events.goal_orange]).astype(jnp.int32)
        terminated = scored & params.goal_ends_episode
        restart = scored & ~params.goal_ends_episode
        kickoff = physics.kickoff(key, state.car_active, params.physics)
        bodies = jax.tree.map(lambda k, b: jnp.where(restart, k, b), kickoff, bodies)

        last_touch = last_touch & ~restart  # a kickoff: nobody has touched the new ball
        state = state.replace(
            time=state.time + 1, bodies=bodies, score=score, last_touch=last_touch
        )
        info = {
            "agent_mask": agent_mask,
            "goal_blue": events.goal_blue.astype(jnp.float32),
            "goal_orange": events.goal_orange.astype(jnp.float32),
            "score_blue": score[0].astype(jnp.float32),
            "score_orange": score[1].astype(jnp.float32),
            "ball_touch": jnp.where(agent_mask, events.touch, False).astype(jnp.float32),
            "reward_terms": terms,
            # Valid where the episode ends (the trainer reads them only there): the match
            # result from each slot's side, for logs and curriculum promotion.
            "episode_outcome": episode_outcome(score),
        }
        return observe_teams(state, params), state, reward, terminated, info

    def get_obs(self, state: EnvState, params: EnvParams | None = None, key=None) -> jax.Array:
        """Both teams' observations float32 [6, OBS_DIM] (gymnax legacy hook)."""
        del key
        return observe_teams(state, self.default_params if params is None else params)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Goals terminate through the transition (``step_env``), never from a state alone."""
        del state, params
        return jnp.zeros((), bool)
