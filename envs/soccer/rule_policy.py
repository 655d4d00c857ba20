"""Scripted car-soccer baseline (the ``RulePolicy``), in pure JAX.

All reasoning happens in the team's own frame (``physics.team_view``: attack +y), so one code
path plays either side. Roles: the active car closest to the ball attacks; the others hold a
defensive point between the ball and their own goal.

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

from typing import Any

import jax
import jax.numpy as jnp

from envs.soccer import physics
from envs.soccer.physics import CORNER, GOAL_DEPTH, HALF_LENGTH, HALF_WIDTH, MAX_PER_TEAM

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


def rule_policy_actions(key: jax.Array, state: Any, params: Any, team: int) -> jax.Array:
    """RulePolicy actions for one team.

    Args:
      key: PRNG key (unused: the policy is deterministic; weakening lives in the env's
        ``opponent_actions``).
      state: a soccer ``EnvState`` (needs ``bodies`` and ``car_active``).
      params: the soccer ``EnvParams`` (unused today; kept for a uniform policy signature).
      team: 0 (blue) or 1 (orange), a Python int.

    Returns:
      int32 [3], one action per slot of ``team``.
    """
    del key, params
    return rule_controls(physics.team_view(state.bodies, state.car_active, team))
