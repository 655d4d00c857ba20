"""The PPO loss: clipped surrogate, clipped value loss, entropy bonus."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.networks import make_distribution
from jaxrl.types import LossMetrics


class LossHyperparams(struct.PyTreeNode):
    """Static loss settings (Python values, fixed at trace time)."""

    clip_eps: float = struct.field(pytree_node=False)
    vf_coef: float = struct.field(pytree_node=False)
    ent_coef: float = struct.field(pytree_node=False)
    clip_value: bool = struct.field(pytree_node=False)
    normalize_advantages: bool = struct.field(pytree_node=False)
    masked: bool = struct.field(pytree_node=False, default=False)  # multi-agent: mask slots


class Minibatch(struct.PyTreeNode):
    """``N`` training sequences of ``L`` steps, time-major (``L = 1`` without a core)."""

    obs: jax.Array  # [L, N, *obs_shape] float32
    is_first: jax.Array  # [L, N] bool, the core resets before this step
    hidden: Any  # [N, ...] float32 carry each sequence started from (() without a core)
    action: jax.Array  # [L, N] int32 or [L, N, A] float32
    log_prob: jax.Array  # [L, N] float32, behaviour log-prob
    value: jax.Array  # [L, N] float32, behaviour value
    advantage: jax.Array  # [L, N] float32
    target: jax.Array  # [L, N] float32, value target (GAE return)
    mask: Any = None  # [L, N] bool, active actor (used only when ``LossHyperparams.masked``)


def ppo_loss(
    params,
    network: nn.Module,
    batch: Minibatch,
    hp: LossHyperparams,
    discrete: bool,
) -> tuple[jax.Array, LossMetrics]:
    """PPO loss of one minibatch; the network re-runs each sequence from its stored state.

    ``loss = policy_loss + vf_coef * value_loss - ent_coef * entropy`` with
    ``policy_loss = -E[min(r A, clip(r, 1-eps, 1+eps) A)]`` and
    ``value_loss = 0.5 E[max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2)]``
    (the unclipped square alone when ``clip_value`` is off). All float32.

    Returns:
      ``(loss (), LossMetrics)``.
    """
    _, policy_params, value = network.apply(params, batch.hidden, batch.obs, batch.is_first)
    dist = make_distribution(policy_params, discrete)
    log_prob = dist.log_prob(batch.action)
    if hp.masked:
        # Empty agent slots of multi-agent envs count for nothing.
        weight = batch.mask.astype(jnp.float32)
        count = jnp.maximum(weight.sum(), 1.0)
        mean = lambda x: (x * weight).sum() / count  # noqa: E731
    else:
        mean = jnp.mean
    entropy = mean(dist.entropy())

    advantage = batch.advantage
    if hp.normalize_advantages:
        centred = advantage - mean(advantage)
        advantage = centred / (jnp.sqrt(mean(jnp.square(centred))) + 1e-8)

    log_ratio = log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)
    surrogate = ratio * advantage
    clipped_surrogate = jnp.clip(ratio, 1.0 - hp.clip_eps, 1.0 + hp.clip_eps) * advantage
    policy_loss = -mean(jnp.minimum(surrogate, clipped_surrogate))

    value_error = jnp.square(value - batch.target)
    if hp.clip_value:
        clipped_value = batch.value + jnp.clip(value - batch.value, -hp.clip_eps, hp.clip_eps)
        value_error = jnp.maximum(value_error, jnp.square(clipped_value - batch.target))
    value_loss = 0.5 * mean(value_error)

    loss = policy_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy
    metrics = LossMetrics(
        total_loss=loss,
        policy_loss=policy_loss,
        value_loss=value_loss,
        entropy=entropy,
        approx_kl=jax.lax.stop_gradient(mean((ratio - 1.0) - log_ratio)),
        clip_fraction=jax.lax.stop_gradient(
            mean((jnp.abs(ratio - 1.0) > hp.clip_eps).astype(jnp.float32))
        ),
    )
    return loss, metrics
