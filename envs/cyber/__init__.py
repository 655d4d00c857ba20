"""CAGE-2 (CybORG 2.1 Scenario 2) cyber defence in pure JAX: the env, Red agents, Blue baselines.

``Cage2`` (registered as ``CAGE2``) is the Blue defender's env; :mod:`jaxrl.envs.cyber.env` lists
its rules and every simplification. :mod:`jaxrl.envs.cyber.red` holds B_line and Meander,
:mod:`jaxrl.envs.cyber.blue` the scripted Blue baselines, :mod:`jaxrl.envs.cyber.fingerprint` which
Red is attacking as Blue sees it, :mod:`jaxrl.envs.cyber.tables` the scenario's static facts (hosts,
action layout, services, decoys, rewards).
"""

from jaxrl.envs.cyber import blue, fingerprint, red, tables
from jaxrl.envs.cyber.env import (
    EXTENDED_DIM,
    HISTORY_DIM,
    REWARD_TERMS,
    TABLE_DIM,
    Cage2,
    EnvParams,
    EnvState,
    observe,
)

__all__ = [
    "EXTENDED_DIM",
    "HISTORY_DIM",
    "REWARD_TERMS",
    "TABLE_DIM",
    "Cage2",
    "EnvParams",
    "EnvState",
    "blue",
    "fingerprint",
    "observe",
    "red",
    "tables",
]
