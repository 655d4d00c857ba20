"""Pure-JAX 2-D car-soccer physics: field geometry, car driving, collisions, goals, kickoff.

Units are arbitrary "metres" and seconds. The field is centred at the origin, x across, y along:

    y = +HALF_LENGTH + GOAL_DEPTH   back of the orange goal (blue attacks +y)
    y = +HALF_LENGTH                orange goal line; mouth |x| < GOAL_HALF_WIDTH
    y = -HALF_LENGTH                blue goal line (blue defends -y)
    |x| = HALF_WIDTH                side walls; the four corners are cut at 45 degrees
                                    (legs of length CORNER)

Cars 0..2 are blue (team 0), cars 3..5 orange (team 1); car ``3 + i`` is the mirror partner of
car ``i``. Cars and ball are circles. Every function here is pure and shape-polymorphic only in
the ways documented; nothing loops over cars in Python.

Mirror convention: the orange view of the world is the blue view rotated by 180 degrees,
``(x, y) -> (-x, -y)``, heading ``-> heading + pi``. A rotation (not a reflection) keeps
handedness, so steering needs no remapping and the dynamics are exactly equivariant.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

# --- Geometry (static: it fixes nothing about shapes, but rendering and normalisation use it) ---
HALF_WIDTH = 4.0  # field half-width (x)
HALF_LENGTH = 5.0  # field half-length (y), goal line to centre
CORNER = 1.0  # leg length of the 45-degree corner cuts
GOAL_HALF_WIDTH = 1.0  # half-width of each goal mouth
GOAL_DEPTH = 0.8  # depth of each goal box behind its goal line
BALL_RADIUS = 0.2
CAR_RADIUS = 0.25

MAX_PER_TEAM = 3
NUM_CARS = 2 * MAX_PER_TEAM
NUM_ACTIONS = 18  # throttle {-1,0,1} x steer {-1,0,1} x boost {0,1}
NOOP_ACTION = 8  # throttle 0, steer 0, boost 0
NUM_SUBSTEPS = 3  # physics substeps per env step (stability at top speed)
STEP_DT = 1.0 / 15.0  # seconds per env step (Rocket League bots: 120 Hz / tick-skip 8)
SUBSTEP_DT = STEP_DT / NUM_SUBSTEPS

# Where inactive cars wait: far outside the field, spread so they never overlap each other.
PARK_POSITIONS = np.array([[50.0 + 5.0 * i, 50.0] for i in range(NUM_CARS)], np.float32)  # [6, 2]

# Corner-cut lines: x*sx + y*sy <= CHAMFER_OFFSET, normal (sx, sy)/sqrt(2).
_CHAMFER_OFFSET = HALF_WIDTH + HALF_LENGTH - CORNER
_INV_SQRT2 = 1.0 / math.sqrt(2.0)

# Kickoff spots for blue (Rocket League layout scaled): diagonal L/R, off-centre L/R, goalie.
_KICKOFF_SPOTS = np.array(
    [[-2.0, -2.5], [2.0, -2.5], [-0.4, -3.8], [0.4, -3.8], [0.0, -4.4]], np.float32
)  # [5, 2]
# Layout k puts blue slot j on spot (k + j) % 5, so 1v1 kickoffs vary over all five spots.
KICKOFF_LAYOUTS = np.stack(
    [_KICKOFF_SPOTS[[(k + j) % 5 for j in range(MAX_PER_TEAM)]] for k in range(5)]
)  # [5, 3, 2]
KICKOFF_JITTER = 0.1  # uniform +- jitter of each blue kickoff x (mirrored onto orange)


def cast_python_scalars(obj: struct.PyTreeNode) -> None:
    """``__post_init__`` helper: cast Python scalars to the dtype of the field's numpy default.

    ``params.replace(blue_size=2)`` would otherwise store a weakly typed Python int, whose jit
    signature differs from the default's strong int32 (a retrace, or a scan carry mismatch).
    Only plain ``bool``/``int``/``float`` values are touched; arrays and tracers pass through.
    """
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, (bool, int, float)) and isinstance(f.default, np.generic):
            object.__setattr__(obj, f.name, np.asarray(value, f.default.dtype)[()])


class PhysicsParams(struct.PyTreeNode):
    """Dynamics constants; every field is a () float32 leaf, so they can vary without retracing."""

    car_mass: jax.Array = np.float32(1.0)
    ball_mass: jax.Array = np.float32(0.3)
    car_accel: jax.Array = np.float32(2.0)  # throttle acceleration, m/s^2
    brake_accel: jax.Array = np.float32(4.0)  # throttle against the motion, m/s^2
    boost_accel: jax.Array = np.float32(3.0)  # extra forward acceleration while boosting
    max_speed: jax.Array = np.float32(1.4)  # throttle cannot push the car faster than this
    boost_max_speed: jax.Array = np.float32(2.3)  # hard speed cap for cars
    car_drag: jax.Array = np.float32(0.3)  # linear drag, 1/s
    lateral_friction: jax.Array = np.float32(10.0)  # decay rate of sideways (skid) velocity, 1/s
    turn_radius_min: jax.Array = np.float32(0.35)  # turning radius at standstill
    turn_radius_per_speed: jax.Array = np.float32(0.3)  # radius growth per m/s of speed
    pivot_speed: jax.Array = np.float32(0.25)  # lets a stopped car still turn (unsticks walls)
    ball_drag: jax.Array = np.float32(0.3)  # 1/s
    ball_max_speed: jax.Array = np.float32(6.0)
    restitution_ball_wall: jax.Array = np.float32(0.6)
    restitution_car_ball: jax.Array = np.float32(0.8)
    restitution_car_car: jax.Array = np.float32(0.3)
    restitution_car_wall: jax.Array = np.float32(0.1)
    boost_use_rate: jax.Array = np.float32(1.0 / 3.0)  # meter per second of boosting (full = 3 s)
    boost_regen_rate: jax.Array = np.float32(0.05)  # passive refill per second (no pads)
    kickoff_boost: jax.Array = np.float32(1.0 / 3.0)  # meter at every kickoff

    def __post_init__(self):
        cast_python_scalars(self)


class Bodies(struct.PyTreeNode):
    """Kinematic state of all moving bodies (cars 0..2 blue, 3..5 orange)."""

    car_pos: jax.Array  # [6, 2] float32
    car_vel: jax.Array  # [6, 2] float32
    car_heading: jax.Array  # [6] float32, radians in [-pi, pi), 0 = +x, counter-clockwise
    car_boost: jax.Array  # [6] float32 boost meter in [0, 1]
    ball_pos: jax.Array  # [2] float32
    ball_vel: jax.Array  # [2] float32


class Controls(struct.PyTreeNode):
    """Decoded car controls."""

    throttle: jax.Array  # [6] float32 in {-1, 0, 1}
    steer: jax.Array  # [6] float32 in {-1, 0, 1}; +1 steers right (clockwise)
    boost: jax.Array  # [6] bool


class StepEvents(struct.PyTreeNode):
    """What happened during the substeps of one env step."""

    touch: jax.Array  # [6] bool, car touched the ball in some substep
    boosting: jax.Array  # [6] float32, fraction of substeps the car boosted (meter > 0)
    goal_blue: jax.Array  # () bool, ball fully inside the orange goal (blue scored)
    goal_orange: jax.Array  # () bool, ball fully inside the blue goal (orange scored)


class PhysicsCarry(struct.PyTreeNode):
    """Carry of the substep loop in :func:`step_physics`."""

    bodies: Bodies
    events: StepEvents  # latched over the substeps so far


class TeamView(struct.PyTreeNode):
    """The world seen by one team, rotated so that the team attacks +y ("upward")."""

    own_pos: jax.Array  # [3, 2]
    own_vel: jax.Array  # [3, 2]
    own_heading: jax.Array  # [3]
    own_boost: jax.Array  # [3]
    own_active: jax.Array  # [3] bool
    opp_pos: jax.Array  # [3, 2]
    opp_vel: jax.Array  # [3, 2]
    opp_heading: jax.Array  # [3]
    opp_active: jax.Array  # [3] bool
    ball_pos: jax.Array  # [2]
    ball_vel: jax.Array  # [2]


# ----------------------------------------------------------------------------- actions


def decode_actions(actions: jax.Array) -> Controls:
    """Discrete actions -> controls.

    Layout: ``a = (throttle + 1) * 6 + (steer + 1) * 2 + boost`` with throttle, steer in
    {-1, 0, 1} and boost in {0, 1}; ``a = 8`` is the no-op.

    Args:
      actions: int32 [...] in [0, 18).

    Returns:
      Controls with leaves shaped like ``actions``.
    """
    actions = actions.astype(jnp.int32)
    throttle = (actions // 6 - 1).astype(jnp.float32)
    steer = ((actions // 2) % 3 - 1).astype(jnp.float32)
    boost = (actions % 2) == 1
    return Controls(throttle=throttle, steer=steer, boost=boost)


def encode_actions(throttle: jax.Array, steer: jax.Array, boost: jax.Array) -> jax.Array:
    """Inverse of :func:`decode_actions`: int32 action index from integer-valued controls."""
    throttle = jnp.asarray(throttle).astype(jnp.int32)
    steer = jnp.asarray(steer).astype(jnp.int32)
    boost = jnp.asarray(boost).astype(jnp.int32)
    return (throttle + 1) * 6 + (steer + 1) * 2 + boost


# ----------------------------------------------------------------------------- helpers


def _dot(a: jax.Array, b: jax.Array) -> jax.Array:
    """Dot product over the last axis (size 2)."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1]


def _safe_norm(v: jax.Array) -> jax.Array:
    """Euclidean norm over the last axis with a finite gradient at 0."""
    return jnp.sqrt(_dot(v, v) + 1e-12)


def wrap_angle(a: jax.Array) -> jax.Array:
    """Wrap radians into [-pi, pi)."""
    return (a + jnp.pi) % (2.0 * jnp.pi) - jnp.pi


def unit(angle: jax.Array) -> jax.Array:
    """[...] angle -> [..., 2] unit vector."""
    return jnp.stack([jnp.cos(angle), jnp.sin(angle)], axis=-1)


def to_local(vec: jax.Array, heading: jax.Array) -> jax.Array:
    """Rotate world-frame vectors [..., 2] into the car frame (forward, left) of ``heading`` [...]."""
    c, s = jnp.cos(heading), jnp.sin(heading)
    return jnp.stack([c * vec[..., 0] + s * vec[..., 1], -s * vec[..., 0] + c * vec[..., 1]], -1)


# ----------------------------------------------------------------------------- driving


def drive(
    bodies: Bodies, controls: Controls, active: jax.Array, pp: PhysicsParams, dt: float
) -> tuple[Bodies, jax.Array]:
    """Advance the cars by ``dt`` under their controls (no collisions).

    Tyre model: the car keeps its forward speed through turns; sideways velocity (after hits)
    decays at ``lateral_friction``. Yaw rate is ``speed / radius`` with a radius that grows with
    speed, so fast cars turn wider. Throttle cannot accelerate past ``max_speed``; boost can, up
    to ``boost_max_speed``, and drains the meter, which refills slowly on its own.

    Args:
      bodies: current bodies.
      controls: [6] controls.
      active: [6] bool; inactive cars do not move.
      pp: physics constants.
      dt: seconds.

    Returns:
      ``(bodies, boosting)`` with ``boosting`` [6] bool.
    """
    heading = bodies.car_heading
    vel = bodies.car_vel
    v_fwd = _dot(vel, unit(heading))  # [6]
    v_lat = _dot(vel, unit(heading + 0.5 * jnp.pi))  # [6]

    # Steering: +1 is clockwise (right). Reversing turns the nose the other way, like a car.
    direction = jnp.where(v_fwd < 0.0, -1.0, 1.0)
    radius = pp.turn_radius_min + pp.turn_radius_per_speed * jnp.abs(v_fwd)
    yaw_rate = -controls.steer * (v_fwd + direction * pp.pivot_speed) / radius
    heading = wrap_angle(heading + yaw_rate * dt)

    braking = controls.throttle * v_fwd < 0.0
    accel = jnp.where(braking, pp.brake_accel, pp.car_accel) * controls.throttle
    accel = jnp.where(controls.throttle * v_fwd >= pp.max_speed, 0.0, accel)
    boosting = controls.boost & (bodies.car_boost > 0.0) & active
    accel = accel + jnp.where(boosting, pp.boost_accel, 0.0)

    v_fwd = (v_fwd + accel * dt) * (1.0 - pp.car_drag * dt)
    v_lat = v_lat * jnp.exp(-pp.lateral_friction * dt)
    new_vel = v_fwd[:, None] * unit(heading) + v_lat[:, None] * unit(heading + 0.5 * jnp.pi)
    speed = _safe_norm(new_vel)
    new_vel = new_vel * jnp.minimum(1.0, pp.boost_max_speed / speed)[:, None]

    boost = bodies.car_boost - jnp.where(boosting, pp.boost_use_rate * dt, 0.0)
    boost = jnp.clip(boost + pp.boost_regen_rate * dt, 0.0, 1.0)

    act2 = active[:, None]
    return (
        bodies.replace(
            car_pos=jnp.where(act2, bodies.car_pos + new_vel * dt, bodies.car_pos),
            car_vel=jnp.where(act2, new_vel, bodies.car_vel),
            car_heading=jnp.where(active, heading, bodies.car_heading),
            car_boost=jnp.where(active, boost, bodies.car_boost),
        ),
        boosting,
    )


def move_ball(bodies: Bodies, pp: PhysicsParams, dt: float) -> Bodies:
    """Ball drag, speed cap and position update over ``dt``."""
    vel = bodies.ball_vel * (1.0 - pp.ball_drag * dt)
    vel = vel * jnp.minimum(1.0, pp.ball_max_speed / _safe_norm(vel))
    return bodies.replace(ball_pos=bodies.ball_pos + vel * dt, ball_vel=vel)


# ----------------------------------------------------------------------------- collisions


def circle_impulse(
    pos_a: jax.Array,
    vel_a: jax.Array,
    inv_mass_a: jax.Array,
    pos_b: jax.Array,
    vel_b: jax.Array,
    inv_mass_b: jax.Array,
    radius_sum: jax.Array,
    restitution: jax.Array,
    mask: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Restitution impulse and overlap correction between circles a and b (broadcasting).

    For a contact (overlap > 0, ``mask``) that is closing, the normal impulse
    ``j = -(1 + e) (v_a - v_b).n / (1/m_a + 1/m_b)`` is applied as ``+j n`` to a and ``-j n``
    to b, so momentum is conserved exactly and the normal relative velocity becomes
    ``-e`` times its value. Positions are separated along ``n`` split by inverse mass.

    Args:
      pos_a, vel_a, pos_b, vel_b: [..., 2].
      inv_mass_a, inv_mass_b: [...] or scalars (1 / mass).
      radius_sum: [...] or scalar.
      restitution: scalar e in [0, 1].
      mask: [...] bool, pairs that may interact.

    Returns:
      ``(impulse, push, contact)``: impulse [..., 2] on a (b gets its negative), separation
      [..., 2] to add to a's position per unit inverse mass (a moves ``push * inv_mass_a``, b
      moves ``-push * inv_mass_b``), contact [...] bool.
    """
    delta = pos_a - pos_b
    dist = _safe_norm(delta)
    normal = delta / jnp.maximum(dist, 1e-6)[..., None]  # from b to a
    overlap = radius_sum - dist
    contact = mask & (overlap > 0.0)
    v_n = _dot(vel_a - vel_b, normal)
    inv_mass_sum = inv_mass_a + inv_mass_b
    j = jnp.where(contact & (v_n < 0.0), -(1.0 + restitution) * v_n / inv_mass_sum, 0.0)
    push = jnp.where(contact, overlap / inv_mass_sum, 0.0)
    return j[..., None] * normal, push[..., None] * normal, contact


def collide_cars(bodies: Bodies, active: jax.Array, pp: PhysicsParams) -> Bodies:
    """All car pairs at once (Jacobi: impulses of one substep are summed); [6, 6] pair grid."""
    inv_m = 1.0 / pp.car_mass
    pair_mask = active[:, None] & active[None, :] & ~jnp.eye(NUM_CARS, dtype=bool)
    impulse, push, _ = circle_impulse(
        bodies.car_pos[:, None, :],
        bodies.car_vel[:, None, :],
        inv_m,
        bodies.car_pos[None, :, :],
        bodies.car_vel[None, :, :],
        inv_m,
        2.0 * CAR_RADIUS,
        pp.restitution_car_car,
        pair_mask,
    )
    # Pair (i, j) and (j, i) each carry the impulse on their first car: sum over the second.
    return bodies.replace(
        car_vel=bodies.car_vel + inv_m * impulse.sum(axis=1),
        car_pos=bodies.car_pos + inv_m * push.sum(axis=1),
    )


def collide_ball(
    bodies: Bodies, active: jax.Array, pp: PhysicsParams
) -> tuple[Bodies, jax.Array]:
    """Ball against every car at once. Returns ``(bodies, touch)``, touch [6] bool."""
    inv_mc = 1.0 / pp.car_mass
    inv_mb = 1.0 / pp.ball_mass
    impulse, push, contact = circle_impulse(
        bodies.car_pos,
        bodies.car_vel,
        inv_mc,
        bodies.ball_pos[None, :],
        bodies.ball_vel[None, :],
        inv_mb,
        CAR_RADIUS + BALL_RADIUS,
        pp.restitution_car_ball,
        active,
    )  # [6, 2] on the cars
    bodies = bodies.replace(
        car_vel=bodies.car_vel + inv_mc * impulse,
        car_pos=bodies.car_pos + inv_mc * push,
        ball_vel=bodies.ball_vel - inv_mb * impulse.sum(axis=0),
        ball_pos=bodies.ball_pos - inv_mb * push.sum(axis=0),
    )
    return bodies, contact


def _reflect(vel: jax.Array, normal: jax.Array, hit: jax.Array, e: jax.Array) -> jax.Array:
    """Remove the outward (along ``normal``) velocity where ``hit`` and bounce it back by ``e``."""
    v_n = _dot(vel, normal)
    return vel - jnp.where(hit & (v_n > 0.0), (1.0 + e) * v_n, 0.0)[..., None] * normal


def _wall_planes() -> np.ndarray:
    """[12, 4] rows (n_x, n_y, offset, kind): keep ``n . p <= offset - radius`` (n outward).

    kind 0 always applies; kind 1 (end walls) only where the centre is outside the goal
    mouth's x-range; kind 2 (goal side walls) only beyond the goal line and inside that range.
    """
    h = _INV_SQRT2
    rows = [
        (1.0, 0.0, HALF_WIDTH, 0), (-1.0, 0.0, HALF_WIDTH, 0),  # side walls
        (0.0, 1.0, HALF_LENGTH + GOAL_DEPTH, 0), (0.0, -1.0, HALF_LENGTH + GOAL_DEPTH, 0),  # backs
        (h, h, _CHAMFER_OFFSET * h, 0), (h, -h, _CHAMFER_OFFSET * h, 0),  # corner cuts
        (-h, h, _CHAMFER_OFFSET * h, 0), (-h, -h, _CHAMFER_OFFSET * h, 0),
        (0.0, 1.0, HALF_LENGTH, 1), (0.0, -1.0, HALF_LENGTH, 1),  # end walls
        (1.0, 0.0, GOAL_HALF_WIDTH, 2), (-1.0, 0.0, GOAL_HALF_WIDTH, 2),  # goal side walls
    ]  # fmt: skip
    return np.array(rows, np.float32)


_PLANES = _wall_planes()  # [12, 4]
_POSTS = np.array(
    [[sx * GOAL_HALF_WIDTH, sy * HALF_LENGTH] for sx in (1, -1) for sy in (1, -1)], np.float32
)  # [4, 2]
WALL_PASSES = 2  # deepest-plane passes per substep: two resolve any corner exactly


def _wall_depths(pos: jax.Array, radius: jax.Array) -> jax.Array:
    """Penetration depth [..., 12] of circles into each wall plane (-inf where it is absent)."""
    nx, ny, offset, kind = (jnp.asarray(_PLANES[:, i]) for i in range(4))
    depth = pos[..., 0:1] * nx + pos[..., 1:2] * ny - (offset - radius[..., None])
    in_mouth = jnp.abs(pos[..., 0:1]) < GOAL_HALF_WIDTH
    beyond_line = jnp.abs(pos[..., 1:2]) > HALF_LENGTH
    present = (kind == 0) | ((kind == 1) & ~in_mouth) | ((kind == 2) & in_mouth & beyond_line)
    return jnp.where(present, depth, -jnp.inf)


def resolve_walls(
    pos: jax.Array, vel: jax.Array, radius: jax.Array, restitution: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Push circles back inside the field-plus-goals and bounce them off what they hit.

    Walls are half-planes (side, back, corner-cut, end and goal-side walls, see
    ``_wall_planes``); each of ``WALL_PASSES`` passes resolves the deepest one, which is what
    sequential resolution does at corners without unrolling every wall. The four goal posts
    are points, resolved together (a circle can touch at most one).

    Args:
      pos, vel: [..., 2].
      radius: [...] or scalar.
      restitution: [...] or scalar.

    Returns:
      ``(pos, vel)``, same shapes.
    """
    radius = jnp.broadcast_to(jnp.asarray(radius, jnp.float32), pos.shape[:-1])
    normals = jnp.asarray(_PLANES[:, :2])  # [12, 2]
    for _ in range(WALL_PASSES):
        depth = _wall_depths(pos, radius)  # [..., 12]
        deepest = jnp.max(depth, axis=-1)
        normal = normals[jnp.argmax(depth, axis=-1)]  # [..., 2]
        hit = deepest > 0.0
        pos = pos - jnp.where(hit, deepest, 0.0)[..., None] * normal
        vel = _reflect(vel, normal, hit, restitution)

    delta = pos[..., None, :] - jnp.asarray(_POSTS)  # [..., 4, 2]
    dist = _safe_norm(delta)  # [..., 4]
    hit = dist < radius[..., None]
    normal = delta / jnp.maximum(dist, 1e-6)[..., None]  # away from the post
    pos = pos + jnp.sum(jnp.where(hit, radius[..., None] - dist, 0.0)[..., None] * normal, -2)
    post_normal = jnp.sum(jnp.where(hit[..., None], normal, 0.0), axis=-2)  # [..., 2]
    vel = _reflect(vel, -post_normal, jnp.any(hit, axis=-1), restitution)
    return pos, vel


def inside_field(pos: jax.Array, radius: float, tol: float = 1e-3) -> jax.Array:
    """Whether circles at ``pos`` [..., 2] lie inside the field-plus-goals (up to ``tol``)."""
    x, y = jnp.abs(pos[..., 0]), jnp.abs(pos[..., 1])
    r = radius - tol
    in_field = (x <= HALF_WIDTH - r) & (y <= HALF_LENGTH - r) & (
        (x + y) <= _CHAMFER_OFFSET - r * math.sqrt(2.0)
    )
    in_goal = (x <= GOAL_HALF_WIDTH - r) & (y <= HALF_LENGTH + GOAL_DEPTH - r)
    # A circle straddling the goal line inside the mouth is in neither box but is legal.
    in_mouth = (x < GOAL_HALF_WIDTH) & (y <= HALF_LENGTH + GOAL_DEPTH - r)
    return in_field | in_goal | in_mouth


def goals(ball_pos: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(goal_blue, goal_orange)``: the ball has fully crossed a goal line inside its mouth.

    Past the goal line the walls keep the ball inside the mouth, so the y test suffices.
    """
    return ball_pos[1] > HALF_LENGTH + BALL_RADIUS, ball_pos[1] < -(HALF_LENGTH + BALL_RADIUS)


# ----------------------------------------------------------------------------- stepping


def substep(
    bodies: Bodies, controls: Controls, active: jax.Array, pp: PhysicsParams
) -> tuple[Bodies, StepEvents]:
    """One physics substep: drive, move ball, car-car, car-ball, walls, goal test."""
    bodies, boosting = drive(bodies, controls, active, pp, SUBSTEP_DT)
    bodies = move_ball(bodies, pp, SUBSTEP_DT)
    bodies = collide_cars(bodies, active, pp)
    bodies, touch = collide_ball(bodies, active, pp)
    # Cars and ball against the walls in one batch of 7 circles.
    radius = jnp.array([CAR_RADIUS] * NUM_CARS + [BALL_RADIUS], jnp.float32)  # [7]
    restitution = jnp.concatenate(
        [jnp.full(NUM_CARS, pp.restitution_car_wall), jnp.asarray(pp.restitution_ball_wall)[None]]
    )  # [7]
    pos, vel = resolve_walls(
        jnp.concatenate([bodies.car_pos, bodies.ball_pos[None]]),
        jnp.concatenate([bodies.car_vel, bodies.ball_vel[None]]),
        radius,
        restitution,
    )  # [7, 2]
    act2 = active[:, None]
    bodies = bodies.replace(
        car_pos=jnp.where(act2, pos[:NUM_CARS], bodies.car_pos),
        car_vel=jnp.where(act2, vel[:NUM_CARS], bodies.car_vel),
        ball_pos=pos[NUM_CARS],
        ball_vel=vel[NUM_CARS],
    )
    goal_blue, goal_orange = goals(bodies.ball_pos)
    events = StepEvents(
        touch=touch,
        boosting=boosting.astype(jnp.float32),
        goal_blue=goal_blue,
        goal_orange=goal_orange,
    )
    return bodies, events


def step_physics(
    bodies: Bodies, controls: Controls, active: jax.Array, pp: PhysicsParams
) -> tuple[Bodies, StepEvents]:
    """One env step = ``NUM_SUBSTEPS`` substeps (a ``fori_loop``: one copy in the program).

    Touches and goals are latched over the substeps; once a goal is latched the bodies freeze
    for the rest of the step so the goal is counted once and the ball stays in the net.
    """

    def body(_, carry: PhysicsCarry) -> PhysicsCarry:
        events = carry.events
        scored = events.goal_blue | events.goal_orange
        new_bodies, new = substep(carry.bodies, controls, active, pp)
        bodies = jax.tree.map(
            lambda old, upd: jnp.where(scored, old, upd), carry.bodies, new_bodies
        )
        live = ~scored
        events = StepEvents(
            touch=events.touch | (new.touch & live),
            boosting=events.boosting + jnp.where(live, new.boosting, 0.0) / NUM_SUBSTEPS,
            goal_blue=events.goal_blue | (new.goal_blue & live),
            goal_orange=events.goal_orange | (new.goal_orange & live),
        )
        return PhysicsCarry(bodies=bodies, events=events)

    events = StepEvents(
        touch=jnp.zeros(NUM_CARS, bool),
        boosting=jnp.zeros(NUM_CARS, jnp.float32),
        goal_blue=jnp.zeros((), bool),
        goal_orange=jnp.zeros((), bool),
    )
    carry = jax.lax.fori_loop(
        0, NUM_SUBSTEPS, body, PhysicsCarry(bodies=bodies, events=events)
    )
    return carry.bodies, carry.events


# ----------------------------------------------------------------------------- kickoff


def team_active(blue_size: jax.Array, orange_size: jax.Array) -> jax.Array:
    """[6] bool: slot i of each team is active iff i < that team's size."""
    slot = jnp.arange(MAX_PER_TEAM)
    return jnp.concatenate([slot < blue_size, slot < orange_size])


def kickoff(key: jax.Array, active: jax.Array, pp: PhysicsParams) -> Bodies:
    """Kickoff bodies: ball at rest at the centre, cars on mirrored spots facing the ball.

    A random layout (one of 5 rotations of the spot list) and a small x jitter are drawn from
    ``key``; orange car i always sits at the point mirror of blue car i, so the layout is
    symmetric. Inactive cars are parked off-field with zero velocity.

    Args:
      key: PRNG key.
      active: [6] bool.
      pp: physics constants (for the kickoff boost).

    Returns:
      Bodies.
    """
    # One draw: [0] picks the layout, [1:] jitter the blue x positions.
    u = jax.random.uniform(key, (1 + MAX_PER_TEAM,))
    layout = jnp.minimum((u[0] * KICKOFF_LAYOUTS.shape[0]).astype(jnp.int32), 4)
    blue = jnp.asarray(KICKOFF_LAYOUTS)[layout]  # [3, 2]
    jitter = (2.0 * u[1:] - 1.0) * KICKOFF_JITTER
    blue = blue.at[:, 0].add(jitter)
    pos = jnp.concatenate([blue, -blue])  # [6, 2]
    heading = jnp.arctan2(-pos[:, 1], -pos[:, 0])  # face the ball at the origin
    act2 = active[:, None]
    return Bodies(
        car_pos=jnp.where(act2, pos, jnp.asarray(PARK_POSITIONS)),
        car_vel=jnp.zeros((NUM_CARS, 2), jnp.float32),
        car_heading=jnp.where(active, heading, jnp.float32(0.5 * math.pi)),
        car_boost=jnp.where(active, pp.kickoff_boost, 0.0).astype(jnp.float32),
        ball_pos=jnp.zeros(2, jnp.float32),
        ball_vel=jnp.zeros(2, jnp.float32),
    )


# ----------------------------------------------------------------------------- team frames


def mirror_bodies(bodies: Bodies) -> Bodies:
    """Rotate the world by 180 degrees and swap the teams (car i <-> car 3 + i)."""
    swap = jnp.asarray(np.r_[MAX_PER_TEAM:NUM_CARS, 0:MAX_PER_TEAM])
    return Bodies(
        car_pos=-bodies.car_pos[swap],
        car_vel=-bodies.car_vel[swap],
        car_heading=wrap_angle(bodies.car_heading[swap] + jnp.pi),
        car_boost=bodies.car_boost[swap],
        ball_pos=-bodies.ball_pos,
        ball_vel=-bodies.ball_vel,
    )


def team_view(bodies: Bodies, active: jax.Array, team: int) -> TeamView:
    """The world from ``team``'s side (0 blue, 1 orange; a Python int), attacking +y.

    Orange's view is blue's view of the 180-degree-rotated, team-swapped world, so both teams
    see the same picture in mirrored situations.
    """
    if team not in (0, 1):
        raise ValueError(f"team must be 0 or 1, got {team!r}")
    if team == 1:
        swap = np.r_[MAX_PER_TEAM:NUM_CARS, 0:MAX_PER_TEAM]
        bodies = mirror_bodies(bodies)
        active = active[swap]
    own, opp = slice(0, MAX_PER_TEAM), slice(MAX_PER_TEAM, NUM_CARS)
    return TeamView(
        own_pos=bodies.car_pos[own],
        own_vel=bodies.car_vel[own],
        own_heading=bodies.car_heading[own],
        own_boost=bodies.car_boost[own],
        own_active=active[own],
        opp_pos=bodies.car_pos[opp],
        opp_vel=bodies.car_vel[opp],
        opp_heading=bodies.car_heading[opp],
        opp_active=active[opp],
        ball_pos=bodies.ball_pos,
        ball_vel=bodies.ball_vel,
    )
