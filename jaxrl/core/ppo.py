"""PPO optimisation: GAE, training sequences, epochs of shuffled minibatch steps.

:func:`learn` is the one entry point for "one PPO update on a given trajectory batch": the
compiled train step calls it after its rollout, and a trainer whose trajectories come from
elsewhere (a host env) can call it the same way. It reads a run through the narrow
:class:`LearnSpec` (network, optimiser, epoch and minibatch counts, loss switches, sequence
length), never the run's whole setup, and imports no feature.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl.core.gae import bootstrap_values, gae, turn_gae
from jaxrl.core.losses import LossHyperparams, Minibatch, ppo_loss
from jaxrl.core.permutation import permutation
from jaxrl.core.types import LossMetrics, RunningStats, Transition


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


# ---- one update on a trajectory batch --------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class LearnSpec:
    """What :func:`learn` needs of a run (static; hashed by identity)."""

    update: UpdateSpec  # network, optimiser, epochs, minibatches
    loss: LossHyperparams  # the loss's switches (its values are replaced by the member's)
    sequence_length: int  # L: steps per training sequence (T without a recurrent core)
    normalize_obs: bool  # observations are normalised with the rollout's per-step moments


class Learned(struct.PyTreeNode):
    """What one PPO update did."""

    state: OptState  # params and optimiser state after the epochs
    steps: StepMetrics  # leaves [epochs, minibatches]
    targets: jax.Array  # [T, B] float32 value targets (GAE returns)


def make_sequences(length: int, data: Minibatch, start_hidden) -> Minibatch:
    """Cut ``[T, B, ...]`` rollout data into ``N = B * T / L`` sequences ``[L, N, ...]``.

    Sequence ``c * B + b`` is actor ``b``'s steps ``c*L .. c*L + L - 1``; its hidden state is
    ``start_hidden[c, b]`` (``start_hidden`` is ``[C, B, ...]``, or ``()`` without a core).
    Without a core ``L = 1``: every step is its own sequence and minibatches shuffle steps.
    """

    def cut(x):
        num_steps, num_envs = x.shape[:2]
        x = x.reshape((num_steps // length, length, num_envs) + x.shape[2:])
        x = jnp.swapaxes(x, 0, 1)
        return x.reshape((length, -1) + x.shape[3:])

    sequences = jax.tree.map(cut, data.replace(hidden=()))
    hidden = jax.tree.map(lambda h: h.reshape((-1,) + h.shape[2:]), start_hidden)
    return sequences.replace(hidden=hidden)


def training_batch(
    spec: LearnSpec,
    traj: Transition,
    start_hidden,
    advantages: jax.Array,
    targets: jax.Array,
    weight: jax.Array | None = None,
) -> Minibatch:
    """All training sequences of one rollout (``[T, B]`` data with GAE results).

    ``weight``: ``[T, B]`` bool, the steps that train (a turn-based env's own known moves),
    combined with the active slots of ``traj.mask``; None: ``traj.mask``.
    """
    mask = traj.mask
    if weight is not None:
        mask = weight if mask is None else jnp.logical_and(mask, weight)
    data = Minibatch(
        obs=traj.obs,
        is_first=traj.is_first,
        hidden=(),
        action=traj.action,
        log_prob=traj.log_prob,
        value=traj.value,
        advantage=advantages,
        target=targets,
        mask=mask,
        step=None,
        legal=traj.legal,
    )
    if spec.normalize_obs:  # which step's moments normalise each observation
        num_steps, num_rows = traj.is_first.shape
        steps = jnp.arange(num_steps, dtype=jnp.int32)[:, None]
        data = data.replace(step=jnp.broadcast_to(steps, (num_steps, num_rows)))
    return make_sequences(spec.sequence_length, data, start_hidden)


def learn(
    spec: LearnSpec,
    state: OptState,
    hyper: Any,
    traj: Transition,
    start_hidden: Any,
    last_value: jax.Array,
    key: jax.Array,
    step_stats: RunningStats | None = None,
) -> Learned:
    """One PPO update on a given trajectory batch: GAE, sequences, the epochs.

    Args:
      spec: the run's :class:`LearnSpec`.
      state: params and optimiser state before the update.
      hyper: the member's ``jaxrl.core.hyper.Hyper`` (gamma, gae_lambda, lr, loss coefficients).
      traj: ``Transition`` leaves ``[T, B, ...]``, time-major; ``obs`` raw.
      start_hidden: ``[T // L, B, ...]`` the core's state at the start of every sequence
        (``()`` without a core).
      last_value: ``[B]`` float32, the value of the observation after the last step.
      key: the epochs' shuffling key.
      step_stats: the normaliser's moments per rollout step (leaves ``[T, *obs_shape]``) when
        ``spec.normalize_obs``, else None.
    """
    advantages, targets, weight = advantages_of(traj, last_value, hyper)
    batch = training_batch(spec, traj, start_hidden, advantages, targets, weight)
    loss = spec.loss.replace(values=hyper)  # masked for a turn-based env (setup.loss_switches)
    state, steps = update_epochs(spec.update, loss, hyper.lr, state, batch, key, step_stats)
    return Learned(state=state, steps=steps, targets=targets)


def advantages_of(
    traj: Transition, last_value: jax.Array, hyper: Any
) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """``(advantages [T, B], targets [T, B], weight)`` of a rollout: :func:`jaxrl.core.gae.gae`,
    or for a turn-based env (``traj.turn`` given) :func:`jaxrl.core.gae.turn_gae` over each row's
    own moves, whose ``weight [T, B]`` bool marks the moves that train (else None)."""
    if traj.turn is None:
        next_values = bootstrap_values(traj.value, last_value, traj.final_value, traj.truncated)
        advantages, targets = gae(
            traj.reward,
            traj.value,
            next_values,
            traj.terminated,
            traj.truncated,
            hyper.gamma,
            hyper.gae_lambda,
        )
        return advantages, targets, None
    return turn_gae(
        traj.reward,
        traj.value,
        traj.final_value,
        last_value,
        traj.turn,
        traj.next_turn[-1],
        traj.terminated,
        traj.truncated,
        hyper.gamma,
        hyper.gae_lambda,
    )
