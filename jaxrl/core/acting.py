"""One policy step: normalise observations, run the network, pick actions.

:func:`act` is the only place a network chooses actions. The match step
(:mod:`jaxrl.core.match`) calls it for the learner and for network opponents, and through the
match step it serves training rollouts, evaluation, rendering and tournaments.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.core.layout import shard_rows
from jaxrl.core.networks import make_distribution, mask_logits
from jaxrl.core.normalize import normalize
from jaxrl.core.types import RunningStats


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """What acting needs to know about the network (static)."""

    network: nn.Module
    discrete: bool
    normalize_obs: bool  # observations pass through the running normaliser


class PolicyParams(struct.PyTreeNode):
    """A policy's weights: network params and the observation normaliser."""

    params: Any
    obs_stats: RunningStats


class ActOutput(struct.PyTreeNode):
    """One policy step for ``B`` rows."""

    hidden: Any  # [B, ...] recurrent carry after the step (() without a core)
    action: jax.Array  # [B, *action_shape]
    log_prob: jax.Array  # [B] float32, log pi(action | obs)
    value: jax.Array  # [B] float32, V(obs)


def act(
    spec: PolicySpec,
    policy: PolicyParams,
    hidden: Any,
    obs: jax.Array,
    is_first: jax.Array,
    key: jax.Array,
    deterministic: bool | jax.Array = False,
    axis: str | None = None,
    devices: int = 1,
    legal: jax.Array | None = None,
) -> ActOutput:
    """Choose actions for one step of raw observations ``obs [B, ...]``.

    Args:
      spec, policy: the network; its params and normaliser.
      hidden: the rows' recurrent carry (reset where ``is_first`` [B] bool).
      obs, is_first: raw observations; the row starts an episode.
      key: samples the actions.
      deterministic: take the mode instead of sampling: a Python bool for all rows, or a
        [B] bool array per row (evaluation rows next to training rows).
      axis: data-parallel mesh axis; these rows are this device's share of ``devices * B``
        rows, and the sampling noise is drawn for all of them and sliced, so every row gets
        the number it would get on one device.
      devices: devices along ``axis``.
      legal: bool ``[B, num_actions]`` legal actions (an ActionMaskEnv's), or None (all).
    """
    obs_norm = normalize(policy.obs_stats, obs, spec.normalize_obs)
    hidden, policy_out, value = spec.network.apply(
        policy.params, hidden, obs_norm[None], is_first[None]
    )
    if spec.discrete:
        dist_params = mask_logits(policy_out[0], legal)  # logits [B, num_actions]
    else:
        mean, log_std = policy_out
        dist_params = (mean[0], log_std)  # mean [B, A], log_std [A]
    dist = make_distribution(dist_params, spec.discrete)
    if deterministic is False and not axis:
        action, log_prob = dist.sample_and_log_prob(seed=key)
    else:
        if deterministic is True:
            action = dist.mode()
        else:
            sample = (
                sample_rows(dist_params, spec.discrete, key, axis, devices)
                if axis
                else dist.sample(seed=key)
            )
            if deterministic is False:
                action = sample
            else:
                select = deterministic.reshape(deterministic.shape + (1,) * (sample.ndim - 1))
                action = jnp.where(select, dist.mode(), sample)
        log_prob = dist.log_prob(action)
    return ActOutput(
        hidden=hidden,
        action=action,
        log_prob=log_prob,
        value=value[0],
    )


def sample_rows(dist_params, discrete: bool, key, axis: str, devices: int) -> jax.Array:
    """This device's rows of one draw for all ``devices`` devices' rows.

    The noise is what distrax draws for the global batch (Gumbel for a categorical, normal
    for a diagonal Gaussian, shape ``[1, devices * B, ...]``), sliced to this device's rows:
    the same actions as one device stepping every row (tested).
    """
    logits_or_mean = dist_params if discrete else dist_params[0]
    rows = logits_or_mean.shape[0]
    shape = (1, devices * rows) + logits_or_mean.shape[1:]
    if discrete:
        noise = shard_rows(jax.random.gumbel(key, shape, logits_or_mean.dtype)[0], axis, rows)
        return jnp.argmax(noise + logits_or_mean, axis=-1)
    mean, log_std = dist_params
    noise = shard_rows(jax.random.normal(key, shape, mean.dtype)[0], axis, rows)
    return mean + jnp.exp(log_std) * noise


def value_of(
    spec: PolicySpec, params: Any, hidden: Any, obs_norm: jax.Array, is_first
) -> jax.Array:
    """``V(obs) [B]`` of one step of normalised observations, after ``hidden``."""
    _, _, value = spec.network.apply(params, hidden, obs_norm[None], is_first[None])
    return value[0]
