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
handedness, so steering needs no remapping and the dynamics are equivariant (up to float
rounding).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.envs.domains import DOMAIN_KEY, NON_NEGATIVE, POSITIVE, UNIT, param
from jaxrl.envs.protocols import Domain

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

# --- Observation layout (the env's ``observe`` encodes it, the RulePolicy decodes it) ---
CAR_SPEED_SCALE = 2.3  # velocity normalisers for observations (top car / ball speeds)
BALL_SPEED_SCALE = 6.0
OWN_FEATURES = 20  # a row's own car, ball and goal features, before the teammate blocks
OTHER_FEATURES = 9  # features per teammate or opponent block
OBS_DIM = OWN_FEATURES + (MAX_PER_TEAM - 1) * OTHER_FEATURES + MAX_PER_TEAM * OTHER_FEATURES  # 65

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


def array_field(values, dtype, domain: Domain | None = None) -> dataclasses.Field:
    """A struct field whose default is the numpy array ``values`` of ``dtype`` (a pytree leaf).

    :func:`cast_python_scalars` casts Python lists and tuples given for it (a config file's
    ``[0.5, 0.25, 0.25]``) to a numpy array of ``dtype``, so they trace like the default.
    ``domain``: the values each element allows (:mod:`jaxrl.envs.domains`).
    """
    default = np.asarray(values, dtype)
    metadata = {"array_dtype": np.dtype(dtype)}
    if domain is not None:
        metadata[DOMAIN_KEY] = domain
    return struct.field(default_factory=lambda: default.copy(), metadata=metadata)


def cast_python_scalars(obj: struct.PyTreeNode) -> None:
    """``__post_init__`` helper: cast Python values to the dtype of the field's numpy default.

    ``params.replace(blue_size=2)`` would otherwise store a weakly typed Python int, whose jit
    signature differs from the default's strong int32 (a retrace, or a scan carry mismatch).
    Plain ``bool``/``int``/``float`` values are cast for scalar fields, and Python lists and
    tuples (and numpy arrays of another dtype) for :func:`array_field` fields; jax arrays and
    tracers pass through. (So a ``vmap`` ``in_axes`` tree built by mapping over params should
    use ``None`` leaves or a prefix such as ``0``; integer leaves would be cast like any other
    field.)
    """
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, (bool, int, float)) and isinstance(f.default, np.generic):
            object.__setattr__(obj, f.name, np.asarray(value, f.default.dtype)[()])
        elif "array_dtype" in f.metadata and (
            isinstance(value, (list, tuple))
            or (isinstance(value, np.ndarray) and value.dtype != f.metadata["array_dtype"])
        ):
            object.__setattr__(obj, f.name, np.asarray(value, f.metadata["array_dtype"]))


class PhysicsParams(struct.PyTreeNode):
    """Dynamics constants; every field is a () float32 leaf, so they can vary without retracing."""

    car_mass: jax.Array = param(np.float32(1.0), POSITIVE)
    ball_mass: jax.Array = param(np.float32(0.3), POSITIVE)
    car_accel: jax.Array = param(np.float32(2.0), NON_NEGATIVE)  # throttle acceleration, m/s^2
    # throttle against the motion, m/s^2
    brake_accel: jax.Array = param(np.float32(4.0), NON_NEGATIVE)
    # extra forward acceleration while boosting
    boost_accel: jax.Array = param(np.float32(3.0), NON_NEGATIVE)
    # throttle cannot push the car faster than this
    max_speed: jax.Array = param(np.float32(1.4), POSITIVE)
    boost_max_speed: jax.Array = param(np.float32(2.3), POSITIVE)  # hard speed cap for cars
    car_drag: jax.Array = param(np.float32(0.3), NON_NEGATIVE)  # linear drag, 1/s
    # decay rate of sideways (skid) velocity, 1/s
    lateral_friction: jax.Array = param(np.float32(10.0), NON_NEGATIVE)
    # turning radius at standstill
    turn_radius_min: jax.Array = param(np.float32(0.35), NON_NEGATIVE)
    # radius growth per m/s of speed
    turn_radius_per_speed: jax.Array = param(np.float32(0.3), NON_NEGATIVE)
    # lets a stopped car still turn (unsticks walls)
    pivot_speed: jax.Array = param(np.float32(0.25), NON_NEGATIVE)
    ball_drag: jax.Array = param(np.float32(0.3), NON_NEGATIVE)  # 1/s
    ball_max_speed: jax.Array = param(np.float32(6.0), POSITIVE)
    restitution_ball_wall: jax.Array = param(np.float32(0.6), UNIT)
    restitution_car_ball: jax.Array = param(np.float32(0.8), UNIT)
    restitution_car_car: jax.Array = param(np.float32(0.3), UNIT)
    restitution_car_wall: jax.Array = param(np.float32(0.1), UNIT)
    # meter per second of boosting (full = 3 s)
    boost_use_rate: jax.Array = param(np.float32(1.0 / 3.0), NON_NEGATIVE)
    # passive refill per second (no pads)
    boost_regen_rate: jax.Array = param(np.float32(0.05), NON_NEGATIVE)
    kickoff_boost: jax.Array = param(np.float32(1.0 / 3.0), UNIT)  # meter at every kickoff

    def __post_init__(self):
        """Cast Python scalars to the leaf dtypes (see :func:`cast_python_scalars`)."""
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


def wrap_angle(a: jax.Array) -> jax.Array:
    """Wrap radians into [-pi, pi)."""
    return (a + jnp.pi) % (2.0 * jnp.pi) - jnp.pi


def unit(angle: jax.Array) -> jax.Array:
    """[...] angle -> [..., 2] unit vector."""
    return jnp.stack([jnp.cos(angle), jnp.sin(angle)], axis=-1)


def to_local(vec: jax.Array, heading: jax.Array) -> jax.Array:
    """Rotate world vectors [..., 2] into the (forward, left) frame of ``heading`` [...]."""
    c, s = jnp.cos(heading), jnp.sin(heading)
    return jnp.stack([c * vec[..., 0] + s * vec[..., 1], -s * vec[..., 0] + c * vec[..., 1]], -1)


# ----------------------------------------------------------------------------- kinematics
#
# Inside the substeps every 2-D quantity is kept as separate x and y arrays (structure of
# arrays): on CPU, [..., 2] arrays are much slower, their size-2 minor axis defeating
# vectorisation (figures: docs/results/speed.md#why-the-code-is-as-it-is); headings ride
# as unit vectors rotated by a small-angle series, so the substeps need no trigonometry.


class Kinematics(struct.PyTreeNode):
    """Structure-of-arrays working copy of :class:`Bodies` used inside :func:`step_physics`."""

    car_x: jax.Array  # [6]
    car_y: jax.Array  # [6]
    car_vx: jax.Array  # [6]
    car_vy: jax.Array  # [6]
    car_cos: jax.Array  # [6] heading unit vector
    car_sin: jax.Array  # [6]
    car_boost: jax.Array  # [6]
    ball_x: jax.Array  # ()
    ball_y: jax.Array  # ()
    ball_vx: jax.Array  # ()
    ball_vy: jax.Array  # ()


def to_kinematics(bodies: Bodies) -> Kinematics:
    """[..., 2] bodies -> structure of arrays."""
    return Kinematics(
        car_x=bodies.car_pos[..., 0],
        car_y=bodies.car_pos[..., 1],
        car_vx=bodies.car_vel[..., 0],
        car_vy=bodies.car_vel[..., 1],
        car_cos=jnp.cos(bodies.car_heading),
        car_sin=jnp.sin(bodies.car_heading),
        car_boost=bodies.car_boost,
        ball_x=bodies.ball_pos[..., 0],
        ball_y=bodies.ball_pos[..., 1],
        ball_vx=bodies.ball_vel[..., 0],
        ball_vy=bodies.ball_vel[..., 1],
    )


def to_bodies(kin: Kinematics) -> Bodies:
    """Structure of arrays -> [..., 2] bodies (headings wrapped into [-pi, pi))."""
    return Bodies(
        car_pos=jnp.stack([kin.car_x, kin.car_y], axis=-1),
        car_vel=jnp.stack([kin.car_vx, kin.car_vy], axis=-1),
        car_heading=wrap_angle(jnp.arctan2(kin.car_sin, kin.car_cos)),
        car_boost=kin.car_boost,
        ball_pos=jnp.stack([kin.ball_x, kin.ball_y], axis=-1),
        ball_vel=jnp.stack([kin.ball_vx, kin.ball_vy], axis=-1),
    )


def _rotate(c: jax.Array, s: jax.Array, angle: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Rotate unit vectors (c, s) by small ``angle`` (series to 5th order, then renormalise)."""
    a2 = angle * angle
    cos_a = 1.0 - a2 * (0.5 - a2 / 24.0)
    sin_a = angle * (1.0 - a2 * (1.0 / 6.0 - a2 / 120.0))
    c, s = c * cos_a - s * sin_a, s * cos_a + c * sin_a
    inv = jax.lax.rsqrt(c * c + s * s)
    return c * inv, s * inv


# ----------------------------------------------------------------------------- driving


def drive(
    kin: Kinematics, controls: Controls, active: jax.Array, pp: PhysicsParams, dt: float
) -> tuple[Kinematics, jax.Array]:
    """Advance the cars by ``dt`` under their controls (no collisions).

    Tyre model: the car keeps its forward speed through turns; sideways velocity (after hits)
    decays at ``lateral_friction``. Yaw rate is ``speed / radius`` with a radius that grows with
    speed, so fast cars turn wider; ``pivot_speed`` lets a stopped car turn slowly. Throttle
    cannot accelerate past ``max_speed``; boost can, up to ``boost_max_speed``, and drains the
    meter, which refills slowly on its own (no pads).

    Args:
      kin: current kinematics.
      controls: [6] controls.
      active: [6] bool; inactive cars do not move.
      pp: physics constants.
      dt: seconds.

    Returns:
      ``(kin, boosting)`` with ``boosting`` [6] bool.
    """
    c, s = kin.car_cos, kin.car_sin
    v_fwd = kin.car_vx * c + kin.car_vy * s  # [6]
    v_lat = -kin.car_vx * s + kin.car_vy * c  # [6]

    # Steering: +1 is clockwise (right). Reversing turns the nose the other way, like a car.
    # The pivot term follows the throttle (the driver's intent), not the sign of a tiny speed,
    # so a car pressed against a wall turns steadily instead of flickering both ways.
    direction = jnp.where(
        controls.throttle != 0.0, controls.throttle, jnp.where(v_fwd < 0.0, -1.0, 1.0)
    )
    radius = pp.turn_radius_min + pp.turn_radius_per_speed * jnp.abs(v_fwd)
    yaw = -controls.steer * (v_fwd + direction * pp.pivot_speed) / radius * dt
    c, s = _rotate(c, s, yaw)

    braking = controls.throttle * v_fwd < 0.0
    accel = jnp.where(braking, pp.brake_accel, pp.car_accel) * controls.throttle
    accel = jnp.where(controls.throttle * v_fwd >= pp.max_speed, 0.0, accel)
    boosting = controls.boost & (kin.car_boost > 0.0) & active
    accel = accel + jnp.where(boosting, pp.boost_accel, 0.0)

    v_fwd = (v_fwd + accel * dt) * (1.0 - pp.car_drag * dt)
    v_lat = v_lat * jnp.exp(-pp.lateral_friction * dt)
    vx = v_fwd * c - v_lat * s
    vy = v_fwd * s + v_lat * c
    scale = jnp.minimum(1.0, pp.boost_max_speed * jax.lax.rsqrt(vx * vx + vy * vy + 1e-12))
    vx, vy = vx * scale, vy * scale

    boost = kin.car_boost - jnp.where(boosting, pp.boost_use_rate * dt, 0.0)
    boost = jnp.clip(boost + pp.boost_regen_rate * dt, 0.0, 1.0)

    def keep(new, old):
        return jnp.where(active, new, old)

    return (
        kin.replace(
            car_x=keep(kin.car_x + vx * dt, kin.car_x),
            car_y=keep(kin.car_y + vy * dt, kin.car_y),
            car_vx=keep(vx, kin.car_vx),
            car_vy=keep(vy, kin.car_vy),
            car_cos=keep(c, kin.car_cos),
            car_sin=keep(s, kin.car_sin),
            car_boost=keep(boost, kin.car_boost),
        ),
        boosting,
    )


def move_ball(kin: Kinematics, pp: PhysicsParams, dt: float) -> Kinematics:
    """Ball drag, speed cap and position update over ``dt``."""
    vx = kin.ball_vx * (1.0 - pp.ball_drag * dt)
    vy = kin.ball_vy * (1.0 - pp.ball_drag * dt)
    scale = jnp.minimum(1.0, pp.ball_max_speed * jax.lax.rsqrt(vx * vx + vy * vy + 1e-12))
    vx, vy = vx * scale, vy * scale
    return kin.replace(
        ball_x=kin.ball_x + vx * dt, ball_y=kin.ball_y + vy * dt, ball_vx=vx, ball_vy=vy
    )


# ----------------------------------------------------------------------------- collisions


class Contact(struct.PyTreeNode):
    """Resolution of circle pairs (a, b); every leaf has the pairs' broadcast shape."""

    impulse_x: jax.Array  # impulse on a; b receives its negative
    impulse_y: jax.Array
    push_x: jax.Array  # separation: a moves push * inv_mass_a, b moves -push * inv_mass_b
    push_y: jax.Array
    touching: jax.Array  # bool, the circles overlap (and may interact)


def contact(
    dx: jax.Array,
    dy: jax.Array,
    dvx: jax.Array,
    dvy: jax.Array,
    inv_mass_sum: jax.Array,
    radius_sum: jax.Array,
    restitution: jax.Array,
    mask: jax.Array,
) -> Contact:
    """Restitution impulse and overlap correction between circle pairs (a, b).

    For an overlapping pair that may interact (``mask``) and is closing, the normal impulse
    ``j = -(1 + e) (v_a - v_b) . n / (1/m_a + 1/m_b)`` goes ``+j n`` to a and ``-j n`` to b:
    momentum is conserved exactly and the normal relative velocity becomes ``-e`` times its
    value. The overlap is removed along ``n`` in proportion to inverse mass.

    Args:
      dx: x of a minus x of b (any shape broadcastable with the other arguments).
      dy: y of a minus y of b.
      dvx: x velocity of a minus that of b.
      dvy: y velocity of a minus that of b.
      inv_mass_sum: ``1/m_a + 1/m_b``.
      radius_sum: ``r_a + r_b``.
      restitution: e in [0, 1].
      mask: bool, pairs that may interact.

    Returns:
      Contact.
    """
    dist = jnp.sqrt(dx * dx + dy * dy + 1e-12)
    inv_dist = 1.0 / jnp.maximum(dist, 1e-6)
    nx, ny = dx * inv_dist, dy * inv_dist  # from b to a
    overlap = radius_sum - dist
    touching = mask & (overlap > 0.0)
    v_n = dvx * nx + dvy * ny
    j = jnp.where(touching & (v_n < 0.0), -(1.0 + restitution) * v_n / inv_mass_sum, 0.0)
    push = jnp.where(touching, overlap / inv_mass_sum, 0.0)
    return Contact(
        impulse_x=j * nx, impulse_y=j * ny, push_x=push * nx, push_y=push * ny, touching=touching
    )


# The 15 unordered car pairs (i < j) as incidence matrices: x @ _PAIR_DIFF = x_i - x_j per
# pair, and pair values @ _PAIR_DIFF.T add +v to car i and -v to car j. Small matmuls beat a
# [6, 6] grid with size-6 reductions on CPU and touch each pair once.
_PAIR_I, _PAIR_J = np.triu_indices(NUM_CARS, k=1)
_PAIR_DIFF = np.zeros((NUM_CARS, len(_PAIR_I)), np.float32)  # [6, 15]
_PAIR_DIFF[_PAIR_I, np.arange(len(_PAIR_I))] = 1.0
_PAIR_DIFF[_PAIR_J, np.arange(len(_PAIR_I))] = -1.0


def collide_cars(kin: Kinematics, active: jax.Array, pp: PhysicsParams) -> Kinematics:
    """All 15 car pairs at once (Jacobi: one substep's impulses are summed per car)."""
    inv_m = 1.0 / pp.car_mass
    diff = jnp.asarray(_PAIR_DIFF)  # [6, 15]

    def pairwise(values):  # [6] -> [15]: value_i - value_j
        # HIGHEST: accelerators would otherwise run f32 matmuls in TF32/bf16 and blur positions.
        return jnp.matmul(values, diff, precision=jax.lax.Precision.HIGHEST)

    def spread(per_pair):  # [15] -> [6]: +value on car i, -value on car j
        return jnp.matmul(per_pair, diff.T, precision=jax.lax.Precision.HIGHEST)

    pair_mask = active[_PAIR_I] & active[_PAIR_J]  # [15]
    hit = contact(
        pairwise(kin.car_x),
        pairwise(kin.car_y),
        pairwise(kin.car_vx),
        pairwise(kin.car_vy),
        2.0 * inv_m,
        2.0 * CAR_RADIUS,
        pp.restitution_car_car,
        pair_mask,
    )  # leaves [15], a = car i, b = car j
    return kin.replace(
        car_x=kin.car_x + inv_m * spread(hit.push_x),
        car_y=kin.car_y + inv_m * spread(hit.push_y),
        car_vx=kin.car_vx + inv_m * spread(hit.impulse_x),
        car_vy=kin.car_vy + inv_m * spread(hit.impulse_y),
    )


def collide_ball(
    kin: Kinematics, active: jax.Array, pp: PhysicsParams
) -> tuple[Kinematics, jax.Array]:
    """The ball against every car at once. Returns ``(kin, touch)``, touch [6] bool."""
    inv_mc = 1.0 / pp.car_mass
    inv_mb = 1.0 / pp.ball_mass
    hit = contact(
        kin.car_x - kin.ball_x,
        kin.car_y - kin.ball_y,
        kin.car_vx - kin.ball_vx,
        kin.car_vy - kin.ball_vy,
        inv_mc + inv_mb,
        CAR_RADIUS + BALL_RADIUS,
        pp.restitution_car_ball,
        active,
    )  # leaves [6], a = car, b = ball
    kin = kin.replace(
        car_x=kin.car_x + inv_mc * hit.push_x,
        car_y=kin.car_y + inv_mc * hit.push_y,
        car_vx=kin.car_vx + inv_mc * hit.impulse_x,
        car_vy=kin.car_vy + inv_mc * hit.impulse_y,
        ball_x=kin.ball_x - inv_mb * hit.push_x.sum(),
        ball_y=kin.ball_y - inv_mb * hit.push_y.sum(),
        ball_vx=kin.ball_vx - inv_mb * hit.impulse_x.sum(),
        ball_vy=kin.ball_vy - inv_mb * hit.impulse_y.sum(),
    )
    return kin, hit.touching


def _bounce(vx, vy, nx, ny, hit, e):
    """Reflect the outward (along n) velocity component where ``hit``, scaled by ``e``."""
    v_n = vx * nx + vy * ny
    k = jnp.where(hit & (v_n > 0.0), (1.0 + e) * v_n, 0.0)
    return vx - k * nx, vy - k * ny


def resolve_walls(
    x: jax.Array,
    y: jax.Array,
    vx: jax.Array,
    vy: jax.Array,
    radius: jax.Array,
    restitution: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Push circles back inside the field-plus-goals and bounce them off what they hit.

    The field is symmetric in x and y, so each circle is tested only against the walls of its
    own quadrant (signs ``sx``, ``sy``), one after another (Gauss-Seidel, which handles the
    corners): side wall, goal back wall, end wall (outside the goal mouth), goal side wall
    (beyond the goal line), 45-degree corner cut, goal post (a point). All element-wise, so the
    whole function fuses into one loop.

    Args:
      x: x positions, any shape.
      y: y positions, like ``x``.
      vx: x velocities, like ``x``.
      vy: y velocities, like ``x``.
      radius: circle radii, broadcastable to ``x``.
      restitution: bounce coefficients, broadcastable to ``x``.

    Returns:
      ``(x, y, vx, vy)``.
    """
    e = restitution
    sx = jnp.where(x >= 0.0, 1.0, -1.0)
    sy = jnp.where(y >= 0.0, 1.0, -1.0)

    def x_wall(x, vx, limit, cond):
        """Keep |x| <= limit where ``cond``."""
        hit = cond & (jnp.abs(x) > limit)
        return jnp.where(hit, sx * limit, x), jnp.where(hit & (sx * vx > 0.0), -e * vx, vx)

    def y_wall(y, vy, limit, cond):
        hit = cond & (jnp.abs(y) > limit)
        return jnp.where(hit, sy * limit, y), jnp.where(hit & (sy * vy > 0.0), -e * vy, vy)

    true = jnp.ones_like(x, dtype=bool)
    x, vx = x_wall(x, vx, HALF_WIDTH - radius, true)
    y, vy = y_wall(y, vy, HALF_LENGTH + GOAL_DEPTH - radius, true)
    in_mouth = jnp.abs(x) < GOAL_HALF_WIDTH
    y, vy = y_wall(y, vy, HALF_LENGTH - radius, ~in_mouth)
    beyond_line = jnp.abs(y) > HALF_LENGTH
    x, vx = x_wall(x, vx, GOAL_HALF_WIDTH - radius, in_mouth & beyond_line)

    # Corner cut: (|x| + |y|) / sqrt(2) <= CHAMFER_OFFSET / sqrt(2) - radius.
    nx, ny = sx * _INV_SQRT2, sy * _INV_SQRT2
    depth = (jnp.abs(x) + jnp.abs(y)) * _INV_SQRT2 - (_CHAMFER_OFFSET * _INV_SQRT2 - radius)
    hit = depth > 0.0
    push = jnp.where(hit, depth, 0.0)
    x, y = x - push * nx, y - push * ny
    vx, vy = _bounce(vx, vy, nx, ny, hit, e)

    # Nearest goal post (a point).
    dx, dy = x - sx * GOAL_HALF_WIDTH, y - sy * HALF_LENGTH
    dist = jnp.sqrt(dx * dx + dy * dy + 1e-12)
    hit = dist < radius
    inv = jnp.where(hit, 1.0 / jnp.maximum(dist, 1e-6), 0.0)
    nx, ny = dx * inv, dy * inv  # away from the post
    push = jnp.where(hit, radius - dist, 0.0)
    x, y = x + push * nx, y + push * ny
    vx, vy = _bounce(vx, vy, -nx, -ny, hit, e)
    return x, y, vx, vy


def inside_field(pos: jax.Array, radius: float, tol: float = 1e-3) -> jax.Array:
    """Whether circles at ``pos`` [..., 2] lie inside the field-plus-goals (up to ``tol``)."""
    x, y = jnp.abs(pos[..., 0]), jnp.abs(pos[..., 1])
    r = radius - tol
    in_field = (
        (x <= HALF_WIDTH - r)
        & (y <= HALF_LENGTH - r)
        & ((x + y) <= _CHAMFER_OFFSET - r * math.sqrt(2.0))
    )
    in_goal = (x <= GOAL_HALF_WIDTH - r) & (y <= HALF_LENGTH + GOAL_DEPTH - r)
    # A circle straddling the goal line inside the mouth is in neither box but is legal.
    in_mouth = (x < GOAL_HALF_WIDTH) & (y <= HALF_LENGTH + GOAL_DEPTH - r)
    return in_field | in_goal | in_mouth


def goals(ball_y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(goal_blue, goal_orange)``: the ball has fully crossed a goal line inside its mouth.

    Past the goal line the walls keep the ball inside the mouth, so the y test suffices.
    """
    return ball_y > HALF_LENGTH + BALL_RADIUS, ball_y < -(HALF_LENGTH + BALL_RADIUS)


# ----------------------------------------------------------------------------- stepping


def substep(
    kin: Kinematics, controls: Controls, active: jax.Array, pp: PhysicsParams
) -> tuple[Kinematics, StepEvents]:
    """One physics substep: drive, move ball, car-car, car-ball, walls, goal test."""
    kin, boosting = drive(kin, controls, active, pp, SUBSTEP_DT)
    kin = move_ball(kin, pp, SUBSTEP_DT)
    kin = collide_cars(kin, active, pp)
    kin, touch = collide_ball(kin, active, pp)

    # Cars and ball against the walls in one batch of 7 circles.
    radius = jnp.array([CAR_RADIUS] * NUM_CARS + [BALL_RADIUS], jnp.float32)  # [7]
    restitution = jnp.concatenate(
        [
            jnp.full(NUM_CARS, pp.restitution_car_wall, jnp.float32),
            jnp.asarray(pp.restitution_ball_wall, jnp.float32)[None],
        ]
    )  # [7]
    x, y, vx, vy = resolve_walls(
        jnp.concatenate([kin.car_x, kin.ball_x[None]]),
        jnp.concatenate([kin.car_y, kin.ball_y[None]]),
        jnp.concatenate([kin.car_vx, kin.ball_vx[None]]),
        jnp.concatenate([kin.car_vy, kin.ball_vy[None]]),
        radius,
        restitution,
    )  # [7] each

    def cars(new, old):
        return jnp.where(active, new[:NUM_CARS], old)

    kin = kin.replace(
        car_x=cars(x, kin.car_x),
        car_y=cars(y, kin.car_y),
        car_vx=cars(vx, kin.car_vx),
        car_vy=cars(vy, kin.car_vy),
        ball_x=x[NUM_CARS],
        ball_y=y[NUM_CARS],
        ball_vx=vx[NUM_CARS],
        ball_vy=vy[NUM_CARS],
    )
    goal_blue, goal_orange = goals(kin.ball_y)
    events = StepEvents(
        touch=touch,
        boosting=boosting.astype(jnp.float32),
        goal_blue=goal_blue,
        goal_orange=goal_orange,
    )
    return kin, events


class PhysicsCarry(struct.PyTreeNode):
    """What :func:`step_physics` passes from one substep to the next."""

    kin: Kinematics
    events: StepEvents  # latched over the substeps so far


def step_physics(
    bodies: Bodies, controls: Controls, active: jax.Array, pp: PhysicsParams
) -> tuple[Bodies, StepEvents]:
    """One env step: ``NUM_SUBSTEPS`` physics substeps.

    The substeps are a fixed Python unroll: on CPU that runs about twice as fast as a
    ``fori_loop``, whose iterations XLA cannot fuse across.

    Touches and goals are latched over the substeps; once a goal is latched the bodies freeze
    for the rest of the step so the goal is counted once and the ball stays in the net.

    Args:
      bodies: bodies at the start of the step.
      controls: [6] controls, held for the whole step.
      active: [6] bool.
      pp: physics constants.

    Returns:
      ``(bodies, events)``.
    """
    carry = PhysicsCarry(
        kin=to_kinematics(bodies),
        events=StepEvents(
            touch=jnp.zeros(NUM_CARS, bool),
            boosting=jnp.zeros(NUM_CARS, jnp.float32),
            goal_blue=jnp.zeros((), bool),
            goal_orange=jnp.zeros((), bool),
        ),
    )
    for _ in range(NUM_SUBSTEPS):
        carry = _latched_substep(carry, controls, active, pp)
    return to_bodies(carry.kin), carry.events


def _latched_substep(
    carry: PhysicsCarry, controls: Controls, active: jax.Array, pp: PhysicsParams
) -> PhysicsCarry:
    """A substep that does nothing once a goal has been latched, and latches its events."""
    events = carry.events
    scored = events.goal_blue | events.goal_orange
    new_kin, new = substep(carry.kin, controls, active, pp)
    kin = jax.tree.map(lambda old, upd: jnp.where(scored, old, upd), carry.kin, new_kin)
    live = ~scored
    events = StepEvents(
        touch=events.touch | (new.touch & live),
        boosting=events.boosting + jnp.where(live, new.boosting, 0.0) / NUM_SUBSTEPS,
        goal_blue=events.goal_blue | (new.goal_blue & live),
        goal_orange=events.goal_orange | (new.goal_orange & live),
    )
    return PhysicsCarry(kin=kin, events=events)


# ----------------------------------------------------------------------------- kickoff


def team_active(blue_size: jax.Array, orange_size: jax.Array) -> jax.Array:
    """[6] bool: slot i of each team is active iff i < that team's size."""
    slot = jnp.arange(MAX_PER_TEAM)
    return jnp.concatenate([slot < blue_size, slot < orange_size])


KICKOFF_UNIFORMS = 1 + MAX_PER_TEAM  # uniforms a kickoff consumes: layout, then x jitters


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
    return kickoff_from_uniforms(jax.random.uniform(key, (KICKOFF_UNIFORMS,)), active, pp)


def kickoff_from_uniforms(u: jax.Array, active: jax.Array, pp: PhysicsParams) -> Bodies:
    """:func:`kickoff` from its random numbers ``u``, float32 [KICKOFF_UNIFORMS] in [0, 1).

    For callers that draw more numbers in the same call (one PRNG draw is cheaper than a key
    split and two draws).
    """
    # [0] picks the layout, [1:] jitter the blue x positions.
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
