"""Scripted car-soccer policies on observations: RulePolicy, random, idle.

Every policy here is a pure function of one team's own observation rows, float32
[3, OBS_DIM] (rows 0..2 of the env's observation for blue, 3..5 for orange), and returns that
team's int32 [3] actions, so one code path plays either side and a caller (the trainer,
:func:`jaxrl.envs.soccer.scripted_play.scripted_rollout`, rendering) decides per env who drives
which team. This module reads only :mod:`jaxrl.envs.soccer.physics` (the observation layout is
defined there), so the env can import it without a cycle; scripted play, which steps the env, lives
in :mod:`jaxrl.envs.soccer.scripted_play`.

The RulePolicy reasons in the team's own frame (attack +y): :func:`team_view_from_obs` undoes
the observation's normalisations, then :func:`rule_controls` acts. Roles: the active car
closest to the ball attacks; the others hold a defensive point between the ball and their own
goal.

Attacker, in order of precedence:
  1. *Defend* if the ball is behind it (closer to its own goal line than the car): drive to a
     point goal-side of the ball, offset sideways so it goes around the ball, not through it.
  2. *Shoot* if the car->ball direction points at the opponent goal (within ``SHOOT_COS``):
     drive through the ball.
  3. *Approach*: drive to a point behind the ball on the line from the opponent goal through
     the ball, ``APPROACH_DIST`` beyond it.
Targets are clamped inside the walls. A target close behind the car is reached in reverse;
far off-axis targets at speed make the car lift off the throttle to turn tighter. Boost when
facing the target and either far from it or shooting.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.envs.soccer import physics
from jaxrl.envs.soccer.physics import (
    BALL_SPEED_SCALE,
    CAR_SPEED_SCALE,
    CORNER,
    GOAL_DEPTH,
    HALF_LENGTH,
    HALF_WIDTH,
    MAX_PER_TEAM,
    NOOP_ACTION,
    NUM_ACTIONS,
    OTHER_FEATURES,
    OWN_FEATURES,
)

# Scripted policy kinds (``EnvParams.opponent_kind``, :func:`scripted_team_actions`).
IDLE, RULE, RANDOM = 0, 1, 2
NUM_SCRIPTED_KINDS = 3

APPROACH_DIST = 0.45  # how far behind the ball (away from the target goal) to line up
SHOOT_COS = 0.97  # cos of the max angle between car->ball and ball->goal to go for the shot
DEFEND_SIDE_OFFSET = 0.7  # sideways offset when getting back goal-side of the ball
DEFEND_BACK_DIST = 1.0  # how far goal-side of the ball to go when defending
SUPPORT_FRACTION = 0.35  # supporters wait this far along own goal -> ball
STEER_DEADZONE = 0.06  # radians; inside it the car drives straight
BOOST_ANGLE = 0.25  # radians; boost only when this well aligned
BOOST_DIST = 1.5  # and the target is at least this far (or we are shooting)
SLOW_ANGLE = 1.3  # radians; above it and fast, lift off the throttle to turn tighter
SLOW_SPEED = 1.0
REVERSE_ANGLE = 2.2  # radians; a target this far behind and close is reached in reverse
REVERSE_DIST = 1.5
TARGET_MARGIN = 0.35  # targets are kept this far inside the walls


def _normalize(v: jax.Array) -> jax.Array:
    return v / jnp.sqrt(jnp.sum(v * v, axis=-1, keepdims=True) + 1e-12)


def clamp_to_field(point: jax.Array, margin: float = TARGET_MARGIN) -> jax.Array:
    """Move points [..., 2] at least ``margin`` inside the field walls (goal boxes excluded)."""
    x = jnp.clip(point[..., 0], -(HALF_WIDTH - margin), HALF_WIDTH - margin)
    y = jnp.clip(point[..., 1], -(HALF_LENGTH - margin), HALF_LENGTH - margin)
    excess = jnp.abs(x) + jnp.abs(y) - (HALF_WIDTH + HALF_LENGTH - CORNER - margin * 1.4142)
    shift = 0.5 * jnp.maximum(excess, 0.0)
    return jnp.stack([x - jnp.sign(x) * shift, y - jnp.sign(y) * shift], axis=-1)


def rule_targets(view: physics.TeamView) -> tuple[jax.Array, jax.Array]:
    """Where each own car wants to go, in the team frame.

    Args:
      view: the team's view.

    Returns:
      ``(target, shooting)``: target [3, 2], shooting [3] bool.
    """
    ball = view.ball_pos  # [2]
    pos = view.own_pos  # [3, 2]
    opp_goal = jnp.array([0.0, HALF_LENGTH + 0.5 * GOAL_DEPTH], jnp.float32)
    own_goal = jnp.array([0.0, -HALF_LENGTH], jnp.float32)

    dist_ball = jnp.sqrt(jnp.sum((ball - pos) ** 2, axis=-1))  # [3]
    attacker = jnp.argmin(jnp.where(view.own_active, dist_ball, jnp.inf))
    is_attacker = jnp.arange(MAX_PER_TEAM) == attacker  # [3]

    goal_to_ball = _normalize(ball - opp_goal)  # [2], points away from the opponent goal
    car_to_ball = _normalize(ball - pos)  # [3, 2]
    shooting = jnp.sum(car_to_ball * -goal_to_ball, axis=-1) > SHOOT_COS
    shoot_target = ball - 0.3 * goal_to_ball
    approach_target = ball + APPROACH_DIST * goal_to_ball
    attack = jnp.where(shooting[:, None], shoot_target, approach_target)

    ball_behind = ball[1] < pos[:, 1]  # [3]
    side = jnp.where(pos[:, 0] >= ball[0], 1.0, -1.0)  # pass the ball on the car's side
    defend = ball + DEFEND_BACK_DIST * _normalize(own_goal - ball)
    defend = defend + jnp.stack([side * DEFEND_SIDE_OFFSET, jnp.zeros_like(side)], -1)
    attacker_target = clamp_to_field(jnp.where(ball_behind[:, None], defend, attack))

    support = own_goal + SUPPORT_FRACTION * (ball - own_goal)  # [2]
    target = jnp.where(is_attacker[:, None], attacker_target, support)
    return target, shooting & is_attacker & ~ball_behind


def rule_controls(view: physics.TeamView) -> jax.Array:
    """int32 [3] actions for the team's own cars from its view (inactive slots: no-op)."""
    target, shooting = rule_targets(view)
    local = physics.to_local(target - view.own_pos, view.own_heading)  # [3, 2] (fwd, left)
    angle = jnp.arctan2(local[:, 1], local[:, 0])  # >0: target to the left
    dist = jnp.sqrt(jnp.sum(local**2, axis=-1))
    speed = jnp.sqrt(jnp.sum(view.own_vel**2, axis=-1))

    # Steering left (-1) turns toward a target on the left both forward and in reverse.
    steer = jnp.where(angle > STEER_DEADZONE, -1, jnp.where(angle < -STEER_DEADZONE, 1, 0))
    reverse = (jnp.abs(angle) > REVERSE_ANGLE) & (dist < REVERSE_DIST)
    throttle = jnp.where((jnp.abs(angle) > SLOW_ANGLE) & (speed > SLOW_SPEED), 0, 1)
    throttle = jnp.where(reverse, -1, throttle)
    boost = (
        ~reverse
        & (jnp.abs(angle) < BOOST_ANGLE)
        & ((dist > BOOST_DIST) | shooting)
        & (view.own_boost > 0.0)
    )
    actions = physics.encode_actions(throttle, steer, boost)
    return jnp.where(view.own_active, actions, physics.NOOP_ACTION).astype(jnp.int32)


# ----------------------------------------------------------------------------- observations

# Feature offsets of an observation row (the table in :mod:`jaxrl.envs.soccer.env`).
_POS_SCALE = np.array([HALF_WIDTH, HALF_LENGTH], np.float32)
_OPPONENTS = OWN_FEATURES + (MAX_PER_TEAM - 1) * OTHER_FEATURES  # 38: first opponent block


def _from_local(vec: jax.Array, heading: jax.Array) -> jax.Array:
    """Inverse of ``physics.to_local``: (forward, left) vectors [..., 2] back to the frame."""
    c, s = jnp.cos(heading), jnp.sin(heading)
    return jnp.stack([c * vec[..., 0] - s * vec[..., 1], s * vec[..., 0] + c * vec[..., 1]], -1)


def team_view_from_obs(team_obs: jax.Array) -> physics.TeamView:
    """A team's view (team frame) rebuilt from its own observation rows.

    Undoes the normalisations of ``env.observe``; headings are ``atan2(sin, cos)``. A slot is
    active iff its row is not all zero (an active row holds a unit heading vector). Ball and
    opponents are read from the first active row (every active row holds the same values).
    Equals ``physics.team_view`` on active slots up to float rounding; inactive slots are zeros
    (``team_view`` has their parking spots).

    Args:
      team_obs: float32 [3, OBS_DIM], one team's rows.

    Returns:
      physics.TeamView.
    """
    obs = jnp.asarray(team_obs, jnp.float32)
    active = jnp.any(obs != 0.0, axis=-1)  # [3]
    first = obs[MAX_PER_TEAM - 1]
    for i in reversed(range(MAX_PER_TEAM - 1)):
        first = jnp.where(active[i], obs[i], first)  # [OBS_DIM], a select: no gather
    own_vel = obs[:, 2:4] * CAR_SPEED_SCALE
    own_heading = jnp.arctan2(obs[:, 5], obs[:, 4])
    opp = first[_OPPONENTS:].reshape(MAX_PER_TEAM, OTHER_FEATURES)  # [3, 9]
    ref_heading = jnp.arctan2(first[5], first[4])
    opp_vel = _from_local(opp[:, 3:5] * CAR_SPEED_SCALE, ref_heading) + first[2:4] * (
        CAR_SPEED_SCALE
    )
    opp_active = opp[:, 0] > 0.5
    return physics.TeamView(
        own_pos=obs[:, 0:2] * _POS_SCALE,
        own_vel=own_vel,
        own_heading=own_heading,
        own_boost=obs[:, 6],
        own_active=active,
        opp_pos=opp[:, 5:7] * _POS_SCALE,
        opp_vel=jnp.where(opp_active[:, None], opp_vel, 0.0),
        opp_heading=jnp.arctan2(opp[:, 8], opp[:, 7]),
        opp_active=opp_active,
        ball_pos=first[8:10] * _POS_SCALE,
        ball_vel=first[10:12] * BALL_SPEED_SCALE,
    )


# ----------------------------------------------------------------------------- policies


def rule_policy(team_obs: jax.Array) -> jax.Array:
    """The RulePolicy: int32 [3] actions from one team's observation rows [3, OBS_DIM].

    Deterministic; inactive slots get ``NOOP_ACTION``.
    """
    return rule_controls(team_view_from_obs(team_obs))


def random_policy(key: jax.Array, team_obs: jax.Array) -> jax.Array:
    """int32 [3] actions drawn uniformly from the 18, independently per car."""
    del team_obs
    return jax.random.randint(key, (MAX_PER_TEAM,), 0, NUM_ACTIONS, jnp.int32)


def idle_policy(team_obs: jax.Array) -> jax.Array:
    """int32 [3] no-ops."""
    del team_obs
    return jnp.full((MAX_PER_TEAM,), NOOP_ACTION, jnp.int32)


def scripted_team_actions(
    key: jax.Array, team_obs: jax.Array, kind: jax.Array, skill: jax.Array
) -> jax.Array:
    """A scripted policy's int32 [3] actions for one team, from its rows [3, OBS_DIM].

    ``kind`` (int32: IDLE, RULE or RANDOM) picks the policy; each car then takes a uniformly
    random action with probability ``1 - skill``. Both are traced: under ``vmap`` they may be
    batched (every branch then runs, selected per env); unbatched, only the chosen branch runs.
    """
    key_random, key_weaken = jax.random.split(key)
    del key
    branches = (idle_policy, rule_policy, functools.partial(random_policy, key_random))
    kind = jnp.clip(jnp.asarray(kind, jnp.int32), 0, NUM_SCRIPTED_KINDS - 1)
    actions = jax.lax.switch(kind, branches, team_obs)
    # One draw per car: u < 1 - skill replaces the action by floor(u / (1 - skill) * 18),
    # which is uniform over the 18 actions given the replacement.
    u = jax.random.uniform(key_weaken, (MAX_PER_TEAM,))
    p_random = 1.0 - skill
    weaken = u < p_random
    random_actions = jnp.minimum(
        (u / jnp.maximum(p_random, 1e-6) * NUM_ACTIONS).astype(jnp.int32), NUM_ACTIONS - 1
    )
    return jnp.where(weaken, random_actions, actions)
