"""The PPO loss: clipped surrogate, clipped value loss, entropy bonus."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.core.networks import make_distribution
from jaxrl.core.normalize import normalize_steps
from jaxrl.core.types import LossMetrics, RunningStats

# The loss terms both learners log as ``train/<name>`` (the means over the update's minibatches).
LOSS_TAGS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


class LossHyperparams(struct.PyTreeNode):
    """Loss settings: the member's values (traced: sweeps and PBT vary them) and switches."""

    # jaxrl.core.hyper.Hyper: () float32 leaves; the loss reads clip_eps (ratio and value clip),
    # vf_coef (value loss weight) and ent_coef (entropy bonus weight) by name
    values: Any
    clip_value: bool = struct.field(pytree_node=False)
    normalize_advantages: bool = struct.field(pytree_node=False)
    masked: bool = struct.field(pytree_node=False, default=False)  # multi-agent: mask slots
    axis: str | None = struct.field(pytree_node=False, default=None)  # data-parallel mesh axis


class Minibatch(struct.PyTreeNode):
    """``N`` training sequences of ``L`` steps, time-major (``L = 1`` without a core)."""

    obs: jax.Array  # [L, N, *obs_shape] the env's dtype (raw), or float32 if normalised
    is_first: jax.Array  # [L, N] bool, the core resets before this step
    hidden: Any  # [N, ...] float32 carry each sequence started from (() without a core)
    action: jax.Array  # [L, N] int32 or [L, N, A] float32
    log_prob: jax.Array  # [L, N] float32, behaviour log-prob
    value: jax.Array  # [L, N] float32, behaviour value
    advantage: jax.Array  # [L, N] float32
    target: jax.Array  # [L, N] float32, value target (GAE return)
    # [L, N] bool, active actor, and in a turn-based env one that moved (used only when
    # ``LossHyperparams.masked``)
    mask: Any = None
    step: Any = None  # [L, N] int32 rollout step of each obs (with ``ppo_loss``'s ``obs_stats``)
    legal: Any = None  # [L, N, num_actions] bool legal actions of each obs (masked envs), or None


def ppo_loss(
    params,
    network: nn.Module,
    batch: Minibatch,
    hp: LossHyperparams,
    discrete: bool,
    obs_stats: RunningStats | None = None,
) -> tuple[jax.Array, LossMetrics]:
    """PPO loss of one minibatch; the network re-runs each sequence from its stored state.

    ``loss = policy_loss + vf_coef * value_loss - ent_coef * entropy`` with
    ``policy_loss = -E[min(r A, clip(r, 1-eps, 1+eps) A)]`` and
    ``value_loss = 0.5 E[max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2)]``
    (the unclipped square alone when ``clip_value`` is off). All float32; the coefficients
    are ``hp.values``'. Where ``batch.legal`` is given, the policy is the one acting used: its
    illegal actions' logits masked (:func:`jaxrl.core.networks.mask_logits`), so the log-probs,
    the ratio and the entropy see only the legal actions and no gradient reaches the others.

    ``obs_stats``: the rollout's normaliser moments per step (leaves ``[T, *obs_shape]``);
    raw ``batch.obs`` are normalised with the moments of their ``batch.step``. None: the
    observations go to the network as they are (it casts them to its compute dtype).

    Returns:
      ``(loss (), LossMetrics)``.
    """
    coef = hp.values
    obs = batch.obs if obs_stats is None else normalize_steps(obs_stats, batch.step, batch.obs)
    _, policy_params, value = network.apply(params, batch.hidden, obs, batch.is_first)
    # Masked envs: the log-probs and the entropy are over the legal actions alone.
    dist = make_distribution(policy_params, discrete, batch.legal)
    log_prob = dist.log_prob(batch.action)
    total, mean = reducers(hp, batch)
    entropy = mean(dist.entropy())

    advantage = batch.advantage
    if hp.normalize_advantages:
        # Statistics of the whole minibatch (all devices); advantages carry no gradient.
        centred = advantage - total(mean(advantage))
        advantage = centred / (jnp.sqrt(total(mean(jnp.square(centred)))) + 1e-8)

    log_ratio = log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)
    surrogate = ratio * advantage
    clipped_surrogate = jnp.clip(ratio, 1.0 - coef.clip_eps, 1.0 + coef.clip_eps) * advantage
    policy_loss = -mean(jnp.minimum(surrogate, clipped_surrogate))

    value_loss = 0.5 * mean(value_error(hp, value, batch))
    loss = policy_loss + coef.vf_coef * value_loss - coef.ent_coef * entropy
    metrics = LossMetrics(
        total_loss=loss,
        policy_loss=policy_loss,
        value_loss=value_loss,
        entropy=entropy,
        approx_kl=jax.lax.stop_gradient(mean((ratio - 1.0) - log_ratio)),
        clip_fraction=jax.lax.stop_gradient(
            mean((jnp.abs(ratio - 1.0) > coef.clip_eps).astype(jnp.float32))
        ),
    )
    return loss, metrics


def value_error(hp: LossHyperparams, value: jax.Array, batch: Minibatch) -> jax.Array:
    """``[L, N]`` float32: ``(V - R)^2``, or with ``clip_value`` the larger of it and the
    square error of the old value moved at most ``clip_eps`` towards the new one."""
    error = jnp.square(value - batch.target)
    if not hp.clip_value:
        return error
    clip_eps = hp.values.clip_eps
    clipped_value = batch.value + jnp.clip(value - batch.value, -clip_eps, clip_eps)
    return jnp.maximum(error, jnp.square(clipped_value - batch.target))


def reducers(
    hp: LossHyperparams, batch: Minibatch
) -> tuple[Callable[[jax.Array], jax.Array], Callable[[jax.Array], jax.Array]]:
    """``(total, mean)``: the sum over devices, and the mean over the minibatch's samples.

    Data-parallel: each device holds a slice of the minibatch. Means divide local sums by
    the global count, so the loss, its gradient and the metrics are this device's share of
    the global mean: the train step sums them over devices. Multi-agent (``hp.masked``):
    empty agent slots count for nothing.
    """
    total = (lambda x: jax.lax.psum(x, hp.axis)) if hp.axis else (lambda x: x)  # noqa: E731
    if hp.masked:
        weight = batch.mask.astype(jnp.float32)
        count = jnp.maximum(total(weight.sum()), 1.0)
        return total, lambda x: (x * weight).sum() / count
    if hp.axis:
        count = total(jnp.asarray(batch.advantage.size, jnp.float32))
        return total, lambda x: x.sum() / count
    return total, jnp.mean
