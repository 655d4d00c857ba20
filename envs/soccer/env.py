"""Top-down 2-D car soccer, 1v1 up to 3v3, as a gymnax 1.0 environment in pure JAX.

The learner controls the blue team (team 0) with one shared policy: every env step takes one
action per blue car slot and returns one observation row and one reward per slot. The orange
team (team 1) is driven inside ``step`` by :func:`opponent_actions` (idle, RulePolicy or
random, weakened by ``opponent_skill``). Team sizes, opponent choice and reward weights are
array leaves of :class:`EnvParams`, so a curriculum changes them with ``params.replace`` and
nothing recompiles. Arrays are always sized for 3v3; inactive cars are parked off-field and
masked out of physics, observations and rewards.

Observation, float32 [3, OBS_DIM=65], one egocentric row per blue slot (zeros for inactive
slots). "Team frame" is the world rotated so the car's team attacks +y (identity for blue, 180
degrees for orange); "car frame" is the team frame rotated into the car's (forward, left) axes.

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
    38:65  3x9   opponents (slots 0, 1, 2); each block of 9:
                   active flag; relative position, car frame (/ HALF_LENGTH, 2);
                   relative velocity, car frame (/ CAR_SPEED_SCALE, 2);
                   position, team frame (x / HALF_WIDTH, y / HALF_LENGTH, 2);
                   heading (cos, sin), team frame (2). All zero when inactive.

Action, int32 [3] (``action_space`` is ``Discrete(18)`` per car; the env expects shape [3]):
``a = (throttle + 1) * 6 + (steer + 1) * 2 + boost``, throttle in {-1, 0, 1} (reverse, coast,
forward), steer in {-1, 0, 1} (+1 = right/clockwise), boost in {0, 1}; 8 is the no-op.
Actions of inactive slots are ignored.

Reward, float32 [3]: the weighted terms of :class:`RewardWeights` per blue slot, blended with
the team mean by ``team_spirit``; 0 for inactive slots.

Termination: a goal when ``goal_ends_episode``; otherwise a goal resets to kickoff and play
continues. Truncation: ``time >= max_steps_in_episode`` (the match clock).

Info (same keys and shapes every step):
    agent_mask    bool [3]     active blue slots (the cars that acted this step)
    goal_blue     float32 ()   1 if blue scored this step
    goal_orange   float32 ()   1 if orange scored this step
    score_blue    float32 ()   blue goals so far this episode, this step included
    score_orange  float32 ()   orange goals so far this episode, this step included
    ball_touch    float32 [3]  1 if that blue car touched the ball this step
    reward_terms  dict name -> float32 [3], each weighted term (before team_spirit)
  plus ``terminated``, ``truncated`` and ``final_observation`` from the gymnax base class.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import yaml
from flax import struct
from gymnax.environments import environment, spaces

from envs.soccer import physics
from envs.soccer.physics import (
    HALF_LENGTH,
    HALF_WIDTH,
    MAX_PER_TEAM,
    NOOP_ACTION,
    NUM_ACTIONS,
    Bodies,
    PhysicsParams,
    StepEvents,
    cast_python_scalars,
)
from envs.soccer.rule_policy import rule_policy_actions

CAR_SPEED_SCALE = 2.3  # velocity normalisers for observations (top car / ball speeds)
BALL_SPEED_SCALE = 6.0
OTHER_FEATURES = 9
OBS_DIM = 20 + (MAX_PER_TEAM - 1) * OTHER_FEATURES + MAX_PER_TEAM * OTHER_FEATURES  # 65

# Opponent (and scripted learner) kinds, values of ``EnvParams.opponent_kind``.
IDLE, RULE, RANDOM = 0, 1, 2
NUM_SCRIPTED_KINDS = 3

DEFAULT_REWARD_PATH = Path(__file__).resolve().parents[2] / "configs" / "rewards" / "soccer.yaml"

# For blue slot i, its teammates are the other two slots in increasing order.
_TEAMMATES = np.array([[j for j in range(MAX_PER_TEAM) if j != i] for i in range(MAX_PER_TEAM)])
_POS_SCALE = np.array([HALF_WIDTH, HALF_LENGTH], np.float32)
_OPP_GOAL = np.array([0.0, HALF_LENGTH], np.float32)  # team frame
_OWN_GOAL = np.array([0.0, -HALF_LENGTH], np.float32)

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

    Each term is ``weight * feature`` per blue car; signs live in the weights.
    """

    goal_scored: jax.Array = np.float32(10.0)  # x 1 when blue scores
    goal_conceded: jax.Array = np.float32(-10.0)  # x 1 when orange scores
    touch: jax.Array = np.float32(0.5)  # x 1 when this car touched the ball this step
    vel_to_ball: jax.Array = np.float32(0.01)  # x car velocity toward the ball / 2.3, [-1, 1]
    vel_ball_to_goal: jax.Array = np.float32(0.05)  # x ball vel toward opp. goal / 6, [-1, 1]
    ball_goal_potential: jax.Array = np.float32(1.0)  # x (gamma * phi(s') - phi(s))
    boost_use: jax.Array = np.float32(-0.01)  # x fraction of the step spent boosting
    time: jax.Array = np.float32(-0.001)  # x 1 every step
    team_spirit: jax.Array = np.float32(0.3)  # blend: (1 - ts) * own + ts * team mean
    potential_gamma: jax.Array = np.float32(1.0)  # gamma of the potential shaping (1: difference)
    sparse: jax.Array = np.bool_(False)  # keep only the goal terms

    def __post_init__(self):
        """Cast Python scalars to the leaf dtypes (see ``physics.cast_python_scalars``)."""
        cast_python_scalars(self)


class EnvParams(struct.PyTreeNode):
    """Everything an episode is conditioned on; every field is an array leaf (no retrace)."""

    max_steps_in_episode: jax.Array = np.int32(900)  # () match clock in env steps (60 s)
    blue_size: jax.Array = np.int32(1)  # () active learner cars, 1..3 (0 allowed: empty team)
    orange_size: jax.Array = np.int32(1)  # () active opponent cars, 0..3
    opponent_kind: jax.Array = np.int32(RULE)  # () 0 idle, 1 RulePolicy, 2 uniform random
    opponent_skill: jax.Array = np.float32(1.0)  # () per car and step, p(random action) = 1 - skill
    goal_ends_episode: jax.Array = np.bool_(False)  # () a goal terminates (else: kickoff)
    reward: RewardWeights = struct.field(default_factory=RewardWeights)
    physics: PhysicsParams = struct.field(default_factory=PhysicsParams)

    def __post_init__(self):
        """Cast Python scalars to the leaf dtypes (see ``physics.cast_python_scalars``)."""
        cast_python_scalars(self)


class EnvState(struct.PyTreeNode):
    """Per-instance dynamic state."""

    time: jax.Array  # () int32, env steps since the episode started
    bodies: Bodies  # cars [6] and ball
    car_active: jax.Array  # [6] bool, fixed at reset from the team sizes
    score: jax.Array  # [2] int32, goals of (blue, orange) this episode


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


def _other_features(
    self_pos: jax.Array,
    self_vel: jax.Array,
    self_heading: jax.Array,
    pos: jax.Array,
    vel: jax.Array,
    heading: jax.Array,
    active: jax.Array,
) -> jax.Array:
    """Features of K other cars seen from each of 3 own cars.

    Args:
      self_pos: [3, 2] own positions (team frame).
      self_vel: [3, 2] own velocities.
      self_heading: [3] own headings.
      pos: [3, K, 2] positions of the K others, per own car.
      vel: [3, K, 2] their velocities.
      heading: [3, K] their headings.
      active: [3, K] bool, whether each of them plays.

    Returns:
      float32 [3, K * 9].
    """
    rel_pos = physics.to_local(pos - self_pos[:, None], self_heading[:, None]) / HALF_LENGTH
    rel_vel = physics.to_local(vel - self_vel[:, None], self_heading[:, None]) / CAR_SPEED_SCALE
    feats = jnp.concatenate(
        [
            jnp.ones_like(heading)[..., None],
            rel_pos,
            rel_vel,
            pos / _POS_SCALE,
            physics.unit(heading),
        ],
        axis=-1,
    )  # [3, K, 9]
    feats = jnp.where(active[..., None], feats, 0.0)
    return feats.reshape(feats.shape[0], -1)


def observe(state: EnvState, params: EnvParams, team: int) -> jax.Array:
    """Egocentric observations of one team's cars (layout in the module docstring).

    Serves both teams: ``team`` 0 is blue, 1 is orange (a Python int); orange sees the world
    rotated by 180 degrees so that it, too, attacks +y.

    Args:
      state: one env's state (no batch axis).
      params: its params (for the match clock).
      team: 0 or 1.

    Returns:
      float32 [3, OBS_DIM]; rows of inactive slots are zeros.
    """
    view = physics.team_view(state.bodies, state.car_active, team)
    pos, vel, heading = view.own_pos, view.own_vel, view.own_heading  # [3, 2], [3, 2], [3]
    time_left = jnp.clip(
        1.0 - state.time.astype(jnp.float32) / params.max_steps_in_episode, 0.0, 1.0
    )
    ones = jnp.ones((MAX_PER_TEAM, 1), jnp.float32)

    def local(vec):
        return physics.to_local(vec, heading)

    own = jnp.concatenate(
        [
            pos / _POS_SCALE,
            vel / CAR_SPEED_SCALE,
            physics.unit(heading),
            view.own_boost[:, None],
            ones * time_left,
        ],
        axis=-1,
    )  # [3, 8]
    ball = jnp.concatenate(
        [
            ones * (view.ball_pos / _POS_SCALE),
            ones * (view.ball_vel / BALL_SPEED_SCALE),
            local(view.ball_pos - pos) / HALF_LENGTH,
            local(view.ball_vel - vel) / BALL_SPEED_SCALE,
            local(_OPP_GOAL - pos) / HALF_LENGTH,
            local(_OWN_GOAL - pos) / HALF_LENGTH,
        ],
        axis=-1,
    )  # [3, 12]
    mates = _other_features(
        pos,
        vel,
        heading,
        pos[_TEAMMATES],
        vel[_TEAMMATES],
        heading[_TEAMMATES],
        view.own_active[_TEAMMATES],
    )  # [3, 18]
    opps = _other_features(
        pos,
        vel,
        heading,
        jnp.broadcast_to(view.opp_pos, (MAX_PER_TEAM, MAX_PER_TEAM, 2)),
        jnp.broadcast_to(view.opp_vel, (MAX_PER_TEAM, MAX_PER_TEAM, 2)),
        jnp.broadcast_to(view.opp_heading, (MAX_PER_TEAM, MAX_PER_TEAM)),
        jnp.broadcast_to(view.opp_active, (MAX_PER_TEAM, MAX_PER_TEAM)),
    )  # [3, 27]
    obs = jnp.concatenate([own, ball, mates, opps], axis=-1)
    return jnp.where(view.own_active[:, None], obs, 0.0).astype(jnp.float32)


# ----------------------------------------------------------------------------- opponents


def scripted_actions(
    key: jax.Array, state: EnvState, params: EnvParams, kind: jax.Array, team: int
) -> jax.Array:
    """int32 [3] actions of a scripted policy ``kind`` (IDLE, RULE, RANDOM) for ``team``.

    ``kind`` is traced: under ``vmap`` with an unbatched ``kind`` only the chosen branch runs.
    """
    key_rule, key_random = jax.random.split(key)
    del key
    random_actions = jax.random.randint(key_random, (MAX_PER_TEAM,), 0, NUM_ACTIONS, jnp.int32)
    branches = (
        lambda: jnp.full((MAX_PER_TEAM,), NOOP_ACTION, jnp.int32),
        lambda: rule_policy_actions(key_rule, state, params, team),
        lambda: random_actions,
    )
    return jax.lax.switch(jnp.clip(kind, 0, NUM_SCRIPTED_KINDS - 1), branches)


def opponent_actions(key: jax.Array, state: EnvState, params: EnvParams) -> jax.Array:
    """The orange team's actions for this step: the one place opponents are chosen.

    ``params.opponent_kind`` picks the policy (IDLE, RULE, RANDOM); each car then takes a
    uniformly random action with probability ``1 - params.opponent_skill``. A self-play
    opponent (a network whose params ride in ``EnvParams``) would be one more branch here,
    fed ``observe(state, params, team=1)``.

    Returns:
      int32 [3], one action per orange slot (inactive slots are ignored by the physics).
    """
    key_policy, key_weaken = jax.random.split(key)
    del key
    actions = scripted_actions(key_policy, state, params, params.opponent_kind, team=1)
    # One draw per car: u < 1 - skill replaces the action by floor(u / (1 - skill) * 18),
    # which is uniform over the 18 actions given the replacement.
    u = jax.random.uniform(key_weaken, (MAX_PER_TEAM,))
    p_random = 1.0 - params.opponent_skill
    weaken = u < p_random
    random_actions = jnp.minimum(
        (u / jnp.maximum(p_random, 1e-6) * NUM_ACTIONS).astype(jnp.int32), NUM_ACTIONS - 1
    )
    return jnp.where(weaken, random_actions, actions)


# ----------------------------------------------------------------------------- rewards


def _normalize(v: jax.Array) -> jax.Array:
    return v / jnp.sqrt(jnp.sum(v * v, axis=-1, keepdims=True) + 1e-12)


def ball_goal_potential(ball_pos: jax.Array) -> jax.Array:
    """Blue's potential phi () in [-1, 1]: +1 with the ball at the orange goal, -1 at its own."""
    d_own = jnp.sqrt(jnp.sum((ball_pos - _OWN_GOAL) ** 2))
    d_opp = jnp.sqrt(jnp.sum((ball_pos - _OPP_GOAL) ** 2))
    return (d_own - d_opp) / (2.0 * HALF_LENGTH)


def reward_terms(
    prev: Bodies, bodies: Bodies, events: StepEvents, agent_mask: jax.Array, w: RewardWeights
) -> dict[str, jax.Array]:
    """Weighted reward terms for the blue cars, each float32 [3], zero for inactive slots.

    Args:
      prev: bodies at the start of the step.
      bodies: bodies after the physics, before any kickoff reset (ball still in the net).
      events: what happened during the step.
      agent_mask: [3] bool, active blue slots.
      w: weights.

    Returns:
      ``{name: float32 [3]}`` for every name in ``REWARD_TERMS``.
    """
    dense = jnp.where(w.sparse, 0.0, 1.0)
    ones = jnp.ones(MAX_PER_TEAM, jnp.float32)
    car_pos, car_vel = bodies.car_pos[:MAX_PER_TEAM], bodies.car_vel[:MAX_PER_TEAM]
    vel_to_ball = jnp.sum(car_vel * _normalize(bodies.ball_pos - car_pos), -1) / CAR_SPEED_SCALE
    ball_to_goal = jnp.sum(bodies.ball_vel * _normalize(_OPP_GOAL - bodies.ball_pos))
    potential = w.potential_gamma * ball_goal_potential(bodies.ball_pos) - ball_goal_potential(
        prev.ball_pos
    )
    terms = {
        "goal_scored": w.goal_scored * events.goal_blue * ones,
        "goal_conceded": w.goal_conceded * events.goal_orange * ones,
        "touch": dense * w.touch * events.touch[:MAX_PER_TEAM],
        "vel_to_ball": dense * w.vel_to_ball * vel_to_ball,
        "vel_ball_to_goal": dense * w.vel_ball_to_goal * ball_to_goal / BALL_SPEED_SCALE * ones,
        "ball_goal_potential": dense * w.ball_goal_potential * potential * ones,
        "boost_use": dense * w.boost_use * events.boosting[:MAX_PER_TEAM],
        "time": dense * w.time * ones,
    }
    return {k: jnp.where(agent_mask, v, 0.0).astype(jnp.float32) for k, v in terms.items()}


def blend_team_spirit(
    individual: jax.Array, agent_mask: jax.Array, team_spirit: jax.Array
) -> jax.Array:
    """``(1 - ts) * own + ts * mean over active teammates``; float32 [3], 0 where inactive."""
    count = jnp.maximum(jnp.sum(agent_mask), 1)
    team_mean = jnp.sum(jnp.where(agent_mask, individual, 0.0)) / count
    blended = (1.0 - team_spirit) * individual + team_spirit * team_mean
    return jnp.where(agent_mask, blended, 0.0).astype(jnp.float32)


# ----------------------------------------------------------------------------- env


class Soccer(environment.Environment[EnvState, EnvParams]):
    """Top-down car soccer; see the module docstring for obs, action, reward and info."""

    num_agents = MAX_PER_TEAM  # learner car slots per env (parameter sharing)

    @property
    def default_params(self) -> EnvParams:
        """1v1 against the full-strength RulePolicy, 60 s matches, default reward weights."""
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
        return spaces.Box(-jnp.inf, jnp.inf, (MAX_PER_TEAM, OBS_DIM), jnp.float32)

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """Kickoff with the team sizes of ``params``; returns ``(obs [3, OBS_DIM], state)``."""
        active = physics.team_active(params.blue_size, params.orange_size)
        state = EnvState(
            time=jnp.zeros((), jnp.int32),
            bodies=physics.kickoff(key, active, params.physics),
            car_active=active,
            score=jnp.zeros(2, jnp.int32),
        )
        return observe(state, params, team=0), state

    def step_env(
        self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict[str, Any]]:
        """One env step (``NUM_SUBSTEPS`` physics substeps) with blue ``action`` int32 [3]."""
        key_opponent, key_kickoff = jax.random.split(key)
        del key
        blue_actions = jnp.where(
            state.car_active[:MAX_PER_TEAM], jnp.asarray(action, jnp.int32), NOOP_ACTION
        )
        orange_actions = opponent_actions(key_opponent, state, params)
        controls = physics.decode_actions(jnp.concatenate([blue_actions, orange_actions]))
        bodies, events = physics.step_physics(
            state.bodies, controls, state.car_active, params.physics
        )

        agent_mask = state.car_active[:MAX_PER_TEAM]
        terms = reward_terms(state.bodies, bodies, events, agent_mask, params.reward)
        individual = sum(terms.values())
        reward = blend_team_spirit(individual, agent_mask, params.reward.team_spirit)

        scored = events.goal_blue | events.goal_orange
        score = state.score + jnp.stack([events.goal_blue, events.goal_orange]).astype(jnp.int32)
        terminated = scored & params.goal_ends_episode
        restart = scored & ~params.goal_ends_episode
        kickoff = physics.kickoff(key_kickoff, state.car_active, params.physics)
        bodies = jax.tree.map(lambda k, b: jnp.where(restart, k, b), kickoff, bodies)

        state = state.replace(time=state.time + 1, bodies=bodies, score=score)
        info = {
            "agent_mask": agent_mask,
            "goal_blue": events.goal_blue.astype(jnp.float32),
            "goal_orange": events.goal_orange.astype(jnp.float32),
            "score_blue": score[0].astype(jnp.float32),
            "score_orange": score[1].astype(jnp.float32),
            "ball_touch": jnp.where(agent_mask, events.touch[:MAX_PER_TEAM], False).astype(
                jnp.float32
            ),
            "reward_terms": terms,
            # Valid where the episode ends (the trainer reads them only there): the match
            # result from blue's side, for logs and curriculum promotion.
            "episode_outcome": {
                "win": (score[0] > score[1]).astype(jnp.float32),
                "draw": (score[0] == score[1]).astype(jnp.float32),
                "loss": (score[0] < score[1]).astype(jnp.float32),
                "goals_for": score[0].astype(jnp.float32),
                "goals_against": score[1].astype(jnp.float32),
            },
        }
        return observe(state, params, team=0), state, reward, terminated, info

    def get_obs(self, state: EnvState, params: EnvParams | None = None, key=None) -> jax.Array:
        """Blue observations float32 [3, OBS_DIM] (gymnax legacy hook)."""
        del key
        return observe(state, self.default_params if params is None else params, team=0)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Goals terminate through the transition (``step_env``), never from a state alone."""
        del state, params
        return jnp.zeros((), bool)


# ----------------------------------------------------------------------------- scripted play


class ScriptedTrace(struct.PyTreeNode):
    """Per-step record of :func:`scripted_rollout`; every leaf is time-major [T, B, ...]."""

    reward: jax.Array  # [T, B, 3] float32
    reward_terms: dict[str, jax.Array]  # name -> [T, B, 3] float32, weighted terms
    terminated: jax.Array  # [T, B] bool
    truncated: jax.Array  # [T, B] bool
    agent_mask: jax.Array  # [T, B, 3] bool
    goal_blue: jax.Array  # [T, B] float32
    goal_orange: jax.Array  # [T, B] float32
    score_blue: jax.Array  # [T, B] float32, episode score after the step (before auto-reset)
    score_orange: jax.Array  # [T, B] float32
    ball_touch: jax.Array  # [T, B, 3] float32
    ball_pos: jax.Array  # [T, B, 2] float32, after the step (and after any reset)
    obs_finite: jax.Array  # [T, B] bool, every observation entry is finite
    obs_masked: jax.Array  # [T, B] bool, rows of inactive blue slots are exactly zero
    parked: jax.Array  # [T, B] bool, every inactive car sits on its parking spot


class ScriptedCarry(struct.PyTreeNode):
    """Scan carry of :func:`scripted_rollout`."""

    key: jax.Array
    env_state: EnvState  # [B]


def scripted_step(
    env: Soccer, params: EnvParams, learner_kind: jax.Array, carry: ScriptedCarry, _: Any
) -> tuple[ScriptedCarry, ScriptedTrace]:
    """One vmapped env step with a scripted blue team (a ``lax.scan`` body)."""
    key, key_act, key_step = jax.random.split(carry.key, 3)
    state = carry.env_state
    num_envs = state.time.shape[0]
    actions = jax.vmap(scripted_actions, in_axes=(0, 0, None, None, None))(
        jax.random.split(key_act, num_envs), state, params, learner_kind, 0
    )  # [B, 3]
    obs, next_state, reward, terminated, truncated, info = jax.vmap(
        env.step, in_axes=(0, 0, 0, None)
    )(jax.random.split(key_step, num_envs), state, actions, params)
    inactive = ~state.car_active  # [B, 6]
    on_spot = jnp.all(next_state.bodies.car_pos == physics.PARK_POSITIONS, axis=-1)  # [B, 6]
    trace = ScriptedTrace(
        reward=reward,
        reward_terms=info["reward_terms"],
        terminated=terminated,
        truncated=truncated,
        agent_mask=info["agent_mask"],
        goal_blue=info["goal_blue"],
        goal_orange=info["goal_orange"],
        score_blue=info["score_blue"],
        score_orange=info["score_orange"],
        ball_touch=info["ball_touch"],
        ball_pos=next_state.bodies.ball_pos,
        obs_finite=jnp.all(jnp.isfinite(obs), axis=(1, 2)),
        obs_masked=jnp.all(jnp.where(info["agent_mask"][..., None], True, obs == 0.0), (1, 2)),
        parked=jnp.all(jnp.where(inactive, on_spot, True), axis=-1),
    )
    return ScriptedCarry(key=key, env_state=next_state), trace


def scripted_rollout(
    env: Soccer,
    key: jax.Array,
    state: EnvState,
    params: EnvParams,
    learner_kind: jax.Array,
    num_steps: int,
) -> tuple[EnvState, ScriptedTrace]:
    """``num_steps`` steps of B envs with a scripted blue team against ``params``' opponent.

    Blue plays ``learner_kind`` (IDLE, RULE or RANDOM); for "RulePolicy vs X" evaluations,
    benchmarks and tests. Jit it with ``env`` and ``num_steps`` static: ``state`` (any batch
    size B), ``params`` and ``learner_kind`` are traced, so team sizes, opponents and the blue
    policy change without recompiling, and calls chain (pass the returned state back in).

    Args:
      env: the env.
      key: PRNG key.
      state: EnvState with a leading batch axis [B].
      params: unbatched EnvParams.
      learner_kind: int32 (), the blue team's scripted policy.
      num_steps: scan length T.

    Returns:
      ``(state [B], trace [T, B])``.
    """
    carry = ScriptedCarry(key=key, env_state=state)
    carry, trace = jax.lax.scan(
        functools.partial(scripted_step, env, params, jnp.asarray(learner_kind, jnp.int32)),
        carry,
        None,
        length=num_steps,
    )
    return carry.env_state, trace


def rollout_states(
    env: Soccer,
    key: jax.Array,
    params: EnvParams,
    learner_kind: jax.Array,
    num_steps: int,
) -> EnvState:
    """One scripted episode's states, stacked time-major: EnvState with leaves [T + 1, ...].

    For rendering (:func:`envs.soccer.render.render_frames`); jit with ``env`` and
    ``num_steps`` static.
    """
    key_reset, key_play = jax.random.split(key)
    del key
    _, state = env.reset(key_reset, params)

    def body(state, key):
        key_act, key_step = jax.random.split(key)
        action = scripted_actions(key_act, state, params, learner_kind, 0)
        _, state, _, _, _, _ = env.step(key_step, state, action, params)
        return state, state

    _, states = jax.lax.scan(body, state, jax.random.split(key_play, num_steps))
    return jax.tree.map(lambda s0, s: jnp.concatenate([s0[None], s]), state, states)
