"""``ppo:`` PPO hyperparameters.

A field declared with :func:`member_value` is a *member value*: traced in the compiled step
(``jaxrl.core.hyper.Hyper`` gets a float32 leaf of that name), so a sweep may vary it and PBT may
explore it without a recompile, and the loss reads it as ``hp.values.<name>``. Its rule is
checked here for the config, every swept value and every bound PBT keeps it in. Adding a loss
coefficient PBT may explore is one such field here and its use in ``jaxrl/core/losses.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from jaxrl.config.errors import require

if TYPE_CHECKING:
    from jaxrl.config.root import Config

MEMBER = "member_value"  # field metadata key: (rule, text) of a member value


Rule = tuple[Callable[[float], bool], str]  # a check of a value and its text ("> 0")
FINITE_POSITIVE: Rule = (lambda v: 0 < v < math.inf, "a finite number > 0")
POSITIVE: Rule = (lambda v: v > 0, "> 0")
NON_NEGATIVE: Rule = (lambda v: v >= 0, ">= 0")
UNIT: Rule = (lambda v: 0 <= v <= 1, "in [0, 1]")


def member_value(default: float, rule: Rule) -> float:
    """A PPO field that is traced per member (sweepable, explorable by PBT); every value of
    it must satisfy ``rule``."""
    return field(default=default, metadata={MEMBER: rule})


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters."""

    num_steps: int = 128  # rollout length T per update
    update_epochs: int = 4  # passes over each rollout
    num_minibatches: int = 4  # minibatches per epoch
    sequence_length: int = 0  # recurrent: BPTT chunk length (divides num_steps); 0 = num_steps
    lr: float = member_value(2.5e-4, FINITE_POSITIVE)  # Adam learning rate
    anneal_lr: bool = True  # linear decay of lr to 0 over training
    adam_eps: float = 1e-5  # Adam epsilon
    gamma: float = member_value(0.99, UNIT)  # discount
    gae_lambda: float = member_value(0.95, UNIT)  # GAE lambda
    clip_eps: float = member_value(0.2, POSITIVE)  # policy ratio clip
    clip_value: bool = True  # clip the value update to +-clip_eps around the old value
    ent_coef: float = member_value(0.01, NON_NEGATIVE)  # entropy bonus weight
    vf_coef: float = member_value(0.5, NON_NEGATIVE)  # value loss weight
    max_grad_norm: float = 0.5  # global-norm gradient clip
    normalize_advantages: bool = True  # per-minibatch advantage normalisation
    reward_scale: float = 1.0  # rewards are multiplied by this before GAE


# {field name: (rule, text)} of every member value, in declaration order.
MEMBER_VALUES = {f.name: f.metadata[MEMBER] for f in fields(PPOConfig) if MEMBER in f.metadata}


def validate(config: Config) -> None:
    """Values of ``ppo:``, and its minibatches against the batch (``env.num_envs`` x T)."""
    ppo = config.ppo
    require(ppo.num_steps >= 1, f"ppo.num_steps must be >= 1, got {ppo.num_steps}")
    require(
        ppo.sequence_length == 0
        or (ppo.sequence_length > 0 and ppo.num_steps % ppo.sequence_length == 0),
        f"ppo.sequence_length ({ppo.sequence_length}) must divide ppo.num_steps "
        f"({ppo.num_steps}) (0 = whole rollout)",
    )
    require(ppo.update_epochs >= 1, f"ppo.update_epochs must be >= 1, got {ppo.update_epochs}")
    require(
        ppo.num_minibatches >= 1,
        f"ppo.num_minibatches must be >= 1, got {ppo.num_minibatches}",
    )
    require(
        config.batch_size % ppo.num_minibatches == 0,
        f"ppo.num_minibatches: batch of {config.batch_size} (env.num_envs x ppo.num_steps) "
        f"does not divide into {ppo.num_minibatches} minibatches",
    )
    require(
        config.num_sequences % ppo.num_minibatches == 0,
        f"ppo.num_minibatches: {config.num_sequences} sequences of {config.sequence_length} "
        f"steps (env.num_envs x ppo.num_steps / sequence_length) do not divide into "
        f"{ppo.num_minibatches} minibatches",
    )
    for name, (rule, text) in MEMBER_VALUES.items():
        value = getattr(ppo, name)
        require(rule(value), f"ppo.{name} must be {text}, got {value}")
    require(ppo.adam_eps > 0, f"ppo.adam_eps must be > 0, got {ppo.adam_eps}")
    require(ppo.max_grad_norm > 0, f"ppo.max_grad_norm must be > 0, got {ppo.max_grad_norm}")
    require(ppo.reward_scale > 0, f"ppo.reward_scale must be > 0, got {ppo.reward_scale}")
