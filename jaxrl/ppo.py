"""PPO optimisation: epochs of shuffled minibatch steps over one rollout.

The update reads a run through the narrow :class:`UpdateSpec` (network, optimiser, epoch
and minibatch counts), never the run's whole setup.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl.losses import LossHyperparams, Minibatch, ppo_loss
from jaxrl.permutation import permutation
from jaxrl.types import LossMetrics, RunningStats


@dataclasses.dataclass(frozen=True, eq=False)
class UpdateSpec:
    """What the PPO update needs of a run; static, hashed by identity (``eq=False``)."""

    network: nn.Module  # the actor-critic whose params are trained
    discrete: bool  # categorical (else Gaussian) actions
    optimizer: optax.GradientTransformation  # unit-rate step; scaled by the traced lr
    update_epochs: int  # passes over each rollout
    num_minibatches: int  # minibatches per pass


class OptState(struct.PyTreeNode):
    """Params and optimizer state threaded through the minibatch scan."""

    params: Any
    opt_state: Any


class StepMetrics(struct.PyTreeNode):
    """Scalars of one minibatch step."""

    loss: LossMetrics
    grad_norm: jax.Array  # () float32, global norm before clipping
    nonfinite: jax.Array  # () bool, the step was skipped


def minibatch_step(
    spec: UpdateSpec,
    hp: LossHyperparams,
    lr: jax.Array,
    state: OptState,
    batch: Minibatch,
    obs_stats: RunningStats | None = None,
) -> tuple[OptState, StepMetrics]:
    """One gradient step; optax's ``apply_if_finite`` skips it if the gradient is not finite.

    ``lr`` scales the optimizer's (annealed, unit-rate) Adam step: it is traced, so sweep
    members differ in it without a recompile. Data-parallel (``hp.axis``): each device's loss
    and gradient are its share of the global mean and are summed over devices.
    """
    grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)
    (loss, metrics), grads = grad_fn(
        state.params, spec.network, batch, hp, spec.discrete, obs_stats
    )
    if hp.axis:
        grads, metrics = jax.lax.psum((grads, metrics), hp.axis)
    updates, opt_state = spec.optimizer.update(grads, state.opt_state, state.params)
    updates = jax.tree.map(lambda u: u * lr, updates)
    params = optax.apply_updates(state.params, updates)
    # apply_if_finite applied zero updates and kept Adam's state if the gradient was not finite.
    skipped = jnp.logical_not(opt_state.last_finite)
    step_metrics = StepMetrics(loss=metrics, grad_norm=optax.tree.norm(grads), nonfinite=skipped)
    return OptState(params=params, opt_state=opt_state), step_metrics


def shuffle_minibatches(batch: Minibatch, key: jax.Array, num_minibatches: int) -> Minibatch:
    """Permute whole sequences and cut them into ``num_minibatches`` minibatches.

    ``batch`` holds ``N`` sequences (axis 1 of the ``[L, N, ...]`` fields, axis 0 of the
    hidden state); time is never shuffled. Returns fields with a leading minibatch axis:
    ``[M, L, N // M, ...]`` and hidden ``[M, N // M, ...]``.
    """
    size = batch.advantage.shape[1]
    perm = permutation(key, size)  # sort-free: jax.random.permutation sorts (slow on CPU)

    def cut_time_major(x):
        x = jnp.take(x, perm, axis=1)
        x = x.reshape((x.shape[0], num_minibatches, -1) + x.shape[2:])
        return jnp.swapaxes(x, 0, 1)

    def cut_batch_major(x):
        return jnp.take(x, perm, axis=0).reshape((num_minibatches, -1) + x.shape[1:])

    hidden = jax.tree.map(cut_batch_major, batch.hidden)
    rest = jax.tree.map(cut_time_major, batch.replace(hidden=()))
    return rest.replace(hidden=hidden)


def update_epochs(
    spec: UpdateSpec,
    hp: LossHyperparams,
    lr: jax.Array,
    state: OptState,
    batch: Minibatch,
    key: jax.Array,
    obs_stats: RunningStats | None = None,
) -> tuple[OptState, StepMetrics]:
    """``update_epochs`` passes of ``num_minibatches`` steps over ``N`` sequences.

    ``obs_stats``: the rollout's per-step normaliser moments (see :func:`ppo_loss`).

    Data-parallel, each device shuffles its own sequences (its key folded with its index),
    so a global minibatch is every device's local minibatch together.

    Returns the final state and the step metrics stacked ``[epochs, minibatches]``.
    """
    if hp.axis:
        key = jax.random.fold_in(key, jax.lax.axis_index(hp.axis))
    keys = jax.random.split(key, spec.update_epochs)

    def epoch(carry: OptState, key_perm: jax.Array):
        minibatches = shuffle_minibatches(batch, key_perm, spec.num_minibatches)
        step = lambda s, mb: minibatch_step(spec, hp, lr, s, mb, obs_stats)  # noqa: E731
        return jax.lax.scan(step, carry, minibatches)

    return jax.lax.scan(epoch, state, keys)
