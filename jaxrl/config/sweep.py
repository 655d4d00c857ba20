"""``sweep:`` hyperparameter lists trained together (``{ppo.lr: [1e-4, 3e-4]}``, zipped)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from jaxrl.config.errors import require, suggest

if TYPE_CHECKING:
    from jaxrl.config.root import Config

# Hyperparameters a sweep may vary (traced: no recompile per value) -> Hyper field.
SWEEPABLE = {
    "ppo.lr": "lr",
    "ppo.ent_coef": "ent_coef",
    "ppo.clip_eps": "clip_eps",
    "ppo.gamma": "gamma",
    "ppo.gae_lambda": "gae_lambda",
    "ppo.vf_coef": "vf_coef",
}

# Each sweepable value must satisfy the rule of its ppo field.
_SWEEP_RULES = {
    "ppo.lr": (lambda v: 0 < v < math.inf, "a finite number > 0"),
    "ppo.ent_coef": (lambda v: v >= 0, ">= 0"),
    "ppo.clip_eps": (lambda v: v > 0, "> 0"),
    "ppo.gamma": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "ppo.gae_lambda": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "ppo.vf_coef": (lambda v: v >= 0, ">= 0"),
}


def validate(config: Config) -> None:
    """Sweepable keys, valid values, and lists of one length."""
    lengths = set()
    for key, values in config.sweep.items():
        require(
            key in SWEEPABLE,
            f"sweep: {key!r} cannot be swept (sweepable: {', '.join(SWEEPABLE)})"
            + suggest(str(key), list(SWEEPABLE)),
        )
        require(
            isinstance(values, (list, tuple)) and len(values) >= 1,
            f"sweep.{key}: expected a non-empty list of numbers, got {values!r}",
        )
        rule, text = _SWEEP_RULES[key]
        for value in values:
            require(
                isinstance(value, (int, float)) and not isinstance(value, bool),
                f"sweep.{key}: expected numbers, got {value!r}",
            )
            require(rule(float(value)), f"sweep.{key}: every value must be {text}, got {value}")
        lengths.add(len(values))
    require(
        len(lengths) <= 1,
        "sweep: every list must have the same length (values are zipped), got lengths "
        f"{sorted(lengths)}",
    )
