"""``ppo:`` PPO hyperparameters."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jaxrl.config.errors import require

if TYPE_CHECKING:
    from jaxrl.config.root import Config


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters."""

    num_steps: int = 128  # rollout length T per update
    update_epochs: int = 4  # passes over each rollout
    num_minibatches: int = 4  # minibatches per epoch
    sequence_length: int = 0  # recurrent: BPTT chunk length (divides num_steps); 0 = num_steps
    lr: float = 2.5e-4  # Adam learning rate
    anneal_lr: bool = True  # linear decay of lr to 0 over training
    adam_eps: float = 1e-5  # Adam epsilon
    gamma: float = 0.99  # discount
    gae_lambda: float = 0.95  # GAE lambda
    clip_eps: float = 0.2  # policy ratio clip
    clip_value: bool = True  # clip the value update to +-clip_eps around the old value
    ent_coef: float = 0.01  # entropy bonus weight
    vf_coef: float = 0.5  # value loss weight
    max_grad_norm: float = 0.5  # global-norm gradient clip
    normalize_advantages: bool = True  # per-minibatch advantage normalisation
    reward_scale: float = 1.0  # rewards are multiplied by this before GAE


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
    require(0 < ppo.lr < math.inf, f"ppo.lr must be a finite number > 0, got {ppo.lr}")
    require(ppo.adam_eps > 0, f"ppo.adam_eps must be > 0, got {ppo.adam_eps}")
    require(0 <= ppo.gamma <= 1, f"ppo.gamma must be in [0, 1], got {ppo.gamma}")
    require(0 <= ppo.gae_lambda <= 1, f"ppo.gae_lambda must be in [0, 1], got {ppo.gae_lambda}")
    require(ppo.clip_eps > 0, f"ppo.clip_eps must be > 0, got {ppo.clip_eps}")
    require(ppo.ent_coef >= 0, f"ppo.ent_coef must be >= 0, got {ppo.ent_coef}")
    require(ppo.vf_coef >= 0, f"ppo.vf_coef must be >= 0, got {ppo.vf_coef}")
    require(ppo.max_grad_norm > 0, f"ppo.max_grad_norm must be > 0, got {ppo.max_grad_norm}")
    require(ppo.reward_scale > 0, f"ppo.reward_scale must be > 0, got {ppo.reward_scale}")
