"""Top-down 2-D car soccer in pure JAX: the env, its physics, the scripted policies, rendering.

``Soccer`` is a symmetric two-team game under the gymnax 1.0 contract with multi-agent arrays:
the caller drives all 6 car slots (blue 0..2, orange 3..5) and gets one observation row and
one reward per slot; see :mod:`jaxrl.envs.soccer.env` for the layout. The scripted policies
(:func:`rule_policy`, :func:`random_policy`, :func:`idle_policy`, combined and weakened by
:func:`scripted_team_actions`) read only one team's own observation rows.
"""

from jaxrl.envs.soccer.env import (
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
    observe_teams,
)
from jaxrl.envs.soccer.physics import MAX_PER_TEAM, NUM_ACTIONS, PhysicsParams
from jaxrl.envs.soccer.rule_policy import (
    idle_policy,
    random_policy,
    rule_policy,
    scripted_team_actions,
    team_view_from_obs,
)
from jaxrl.envs.soccer.scripted_play import ScriptedTrace, rollout_states, scripted_rollout

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
    "ScriptedTrace",
    "Soccer",
    "idle_policy",
    "load_reward_weights",
    "observe",
    "observe_teams",
    "random_policy",
    "rollout_states",
    "rule_policy",
    "scripted_rollout",
    "scripted_team_actions",
    "team_view_from_obs",
]
