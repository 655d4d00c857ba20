"""jaxrl: a JAX-native PPO trainer compiled end to end.

The Python API (:mod:`jaxrl.api`)::

    import jaxrl
    result = jaxrl.train("configs/cartpole.yaml", run_dir=None)  # in memory: no files
    jaxrl.evaluate(result, episodes=32)
    policy = jaxrl.load_policy("runs/cartpole-...")              # act(params, obs, key)
    jaxrl.export("runs/cartpole-...", "policy.onnx")             # runs without jaxrl

The folders are the layers, each importing only the ones before it
(``tests/test_import_graph.py``; docs/developer.md): ``config`` (the typed config), ``core``
(the PPO core and the match step), ``features`` (what rides on the step: curriculum,
evaluation lanes, PBT), ``league`` (self-play and its population), ``run`` (build, compose,
drive and checkpoint a run), ``hostenv`` (envs stepped on the host), ``commands`` (the command
lines). The envs are :mod:`jaxrl.envs`.

Nothing is imported until a name is used (JAX starts a backend when gymnax is imported,
and ``python -m jaxrl.train`` must join its processes before that).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Policy", "TrainOutput", "evaluate", "export", "load_policy", "train"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("jaxrl.api"), name)
    raise AttributeError(f"module 'jaxrl' has no attribute {name!r}")
