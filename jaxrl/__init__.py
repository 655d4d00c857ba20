"""jaxrl: a JAX-native PPO trainer compiled end to end.

The Python API (:mod:`jaxrl.api`)::

    import jaxrl
    result = jaxrl.train("configs/cartpole.yaml", run_dir=None)  # in memory: no files
    jaxrl.evaluate(result, episodes=32)
    policy = jaxrl.load_policy("runs/cartpole-...")              # act(params, obs, key)
    jaxrl.export("runs/cartpole-...", "policy.onnx")             # runs without jaxrl

Nothing is imported until a name is used (JAX starts a backend when gymnax is imported,
and ``python -m jaxrl.train`` must join its processes before that). ``jaxrl.train``,
``jaxrl.evaluate`` and ``jaxrl.export`` are the modules of the command lines and, called, the
API functions.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Policy", "TrainOutput", "evaluate", "export", "load_policy", "train"]

# callable modules (jaxrl.api.TrainModule, EvaluateModule, ExportModule)
_MODULES = ("train", "evaluate", "export")
_API = ("load_policy", "Policy", "TrainOutput")


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"jaxrl.{name}")
    if name in _API:
        return getattr(importlib.import_module("jaxrl.api"), name)
    raise AttributeError(f"module 'jaxrl' has no attribute {name!r}")
