"""Top-down 2-D car soccer in pure JAX: the env, its physics, the scripted RulePolicy, rendering.

``Soccer`` follows the gymnax 1.0 contract with multi-agent arrays (learner = blue team,
3 car slots); see :mod:`envs.soccer.env` for the observation, action, reward and info layout.
"""

from envs.soccer.env import (
    IDLE,
    OBS_DIM,
    RANDOM,
    REWARD_TERMS,
    RULE,
    EnvParams,
    EnvState,
    RewardWeights,
    Soccer,
    load_reward_weights,
    observe,
    opponent_actions,
    rollout_states,
    scripted_rollout,
)
from envs.soccer.physics import MAX_PER_TEAM, NUM_ACTIONS, PhysicsParams
from envs.soccer.rule_policy import rule_policy_actions

__all__ = [
    "IDLE",
    "MAX_PER_TEAM",
    "NUM_ACTIONS",
    "OBS_DIM",
    "RANDOM",
    "REWARD_TERMS",
    "RULE",
    "EnvParams",
    "EnvState",
    "PhysicsParams",
    "RewardWeights",
    "Soccer",
    "load_reward_weights",
    "observe",
    "opponent_actions",
    "rollout_states",
    "rule_policy_actions",
    "scripted_rollout",
]
