"""The learner of a host run: one compiled PPO update on a rollout the actor hands over.

The update is the JAX path's own, :func:`jaxrl.core.ppo.learn` (GAE, recurrent sequences,
minibatching, ``apply_if_finite``'s NaN guard, :func:`jaxrl.core.losses.ppo_loss`), on the rollout
the actor handed over; :func:`jaxrl.core.acting.value_of` bootstraps it. The optimiser and its
annealing are :func:`jaxrl.run.setup.make_optimizer`'s. Metrics are reduced in-graph to float32
scalars.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.config import build_env
from jaxrl.config.root import Config
from jaxrl.core.acting import PolicyParams, PolicySpec, value_of
from jaxrl.core.hyper import base_hyper
from jaxrl.core.losses import LOSS_TAGS, LossHyperparams
from jaxrl.core.ppo import LearnSpec, OptState, UpdateSpec
from jaxrl.core.ppo import learn as ppo_learn
from jaxrl.core.precision import compute_dtype
from jaxrl.core.stats import explained_variance
from jaxrl.core.types import RunnerState, RunningStats, Transition
from jaxrl.hostenv.networks import make_network
from jaxrl.hostenv.spaces import HostSpaces
from jaxrl.run.setup import current_learning_rate, make_optimizer


@dataclasses.dataclass(frozen=True, eq=False)
class HostSpec:
    """What acting and learning need of a host run (static, hashed by identity)."""

    config: Config
    spaces: HostSpaces
    network: nn.Module
    policy: PolicySpec
    learn: LearnSpec  # the JAX path's PPO update (jaxrl.core.ppo.learn)
    hyper: Any  # jaxrl.core.hyper.Hyper: the config's gamma, gae_lambda, lr, loss coefficients

    @property
    def sequence_length(self) -> int:
        """Steps per training sequence (1 without a recurrent core)."""
        return self.config.sequence_length


class Trajectory(struct.PyTreeNode):
    """One rollout of ``T`` steps on ``B`` host envs, time-major (what the actor hands over)."""

    obs: jax.Array  # [T, B, *obs_shape] the env's dtype, the observation acted on
    is_first: jax.Array  # [T, B] bool, obs starts an episode
    action: jax.Array  # [T, B] int32 or [T, B, A] float32 (unclipped)
    log_prob: jax.Array  # [T, B] float32, behaviour log-prob
    value: jax.Array  # [T, B] float32, behaviour value
    reward: jax.Array  # [T, B] float32, the env's reward (before ppo.reward_scale)
    terminated: jax.Array  # [T, B] bool
    truncated: jax.Array  # [T, B] bool
    final_value: jax.Array  # [T, B] float32, V(pre-reset next obs) where truncated, else 0
    start_hidden: Any  # [C, B, ...] carry at the start of each of the C sequences (() if none)
    last_obs: jax.Array  # [B, *obs_shape] the observation after the rollout
    last_is_first: jax.Array  # [B] bool
    last_hidden: Any  # [B, ...] carry after the rollout (() without a core)


def host_spec(config: Config) -> HostSpec:
    """The spec of ``config``'s host run, its spaces read from one env of its backend
    (:func:`jaxrl.config.build_env`, as the config's checks read them).

    Raises:
      jaxrl.config.ConfigError: the backend is not installed or cannot make the env.
    """
    return make_host_spec(config, build_env(config).env)


def make_host_spec(config: Config, spaces: HostSpaces) -> HostSpec:
    """Network, optimiser and loss settings of a host run."""
    dtype = compute_dtype(config.precision)
    network = make_network(config, spaces, dtype, config.network.core_unroll or 1)
    ppo = config.ppo
    optimizer = make_optimizer(config)
    hyper = base_hyper(config)
    return HostSpec(
        config=config,
        spaces=spaces,
        network=network,
        policy=PolicySpec(network=network, discrete=spaces.discrete, normalize_obs=False),
        learn=LearnSpec(
            update=UpdateSpec(
                network=network,
                discrete=spaces.discrete,
                optimizer=optimizer,
                update_epochs=ppo.update_epochs,
                num_minibatches=ppo.num_minibatches,
            ),
            loss=LossHyperparams(
                values=hyper,
                clip_value=ppo.clip_value,
                normalize_advantages=ppo.normalize_advantages,
            ),
            sequence_length=config.sequence_length,
            normalize_obs=False,  # host observations are not normalised
        ),
        hyper=hyper,
    )


def init_runner(spec: HostSpec, key: jax.Array) -> RunnerState:
    """Fresh params and optimiser state; the host envs are not part of it (not checkpointed)."""
    key, key_params = jax.random.split(key)
    num_envs = spec.config.env.num_envs
    obs = jnp.zeros((1, num_envs) + spec.spaces.obs_shape, spec.spaces.obs_dtype)
    params = spec.network.init(
        key_params, spec.network.initial_hidden(num_envs), obs, jnp.zeros((1, num_envs), bool)
    )
    zero = lambda: jnp.zeros((), jnp.int32)  # noqa: E731 - distinct buffers: donated leaf by leaf
    return RunnerState(
        params=params,
        opt_state=spec.learn.update.optimizer.init(params),
        match=(),
        obs_stats=RunningStats.create(spec.spaces.obs_shape),
        key=key,
        update_step=zero(),
        nonfinite_streak=zero(),
        nonfinite_total=zero(),
        features={},
        hyper=(),
    )


def policy_of(runner: RunnerState) -> PolicyParams:
    """The weights the actor acts with."""
    return PolicyParams(params=runner.params, obs_stats=runner.obs_stats)


def learn(
    spec: HostSpec, runner: RunnerState, traj: Trajectory
) -> tuple[RunnerState, dict[str, jax.Array]]:
    """One PPO update on ``traj``: GAE, the epochs of minibatch steps, in-graph metrics.

    Returns the new runner and ``{tag: () float32}``.
    """
    ppo = spec.config.ppo
    key, key_epochs = jax.random.split(runner.key)
    last_value = value_of(
        spec.policy, runner.params, traj.last_hidden, traj.last_obs, traj.last_is_first
    )
    learned = ppo_learn(
        spec.learn,
        OptState(params=runner.params, opt_state=runner.opt_state),
        spec.hyper,
        Transition(
            obs=traj.obs,
            is_first=traj.is_first,
            action=traj.action,
            log_prob=traj.log_prob,
            value=traj.value,
            reward=traj.reward * ppo.reward_scale,
            terminated=traj.terminated,
            truncated=traj.truncated,
            final_value=traj.final_value,
            mask=None,
        ),
        traj.start_hidden,
        last_value,
        key_epochs,
    )
    opt, steps, targets = learned.state, learned.steps, learned.targets
    learning_rate = current_learning_rate(runner.opt_state) * jnp.float32(ppo.lr)
    nonfinite = steps.nonfinite.any()
    runner = runner.replace(
        params=opt.params,
        opt_state=opt.opt_state,
        key=key,
        update_step=runner.update_step + 1,
        nonfinite_streak=jnp.where(nonfinite, runner.nonfinite_streak + 1, 0),
        nonfinite_total=runner.nonfinite_total + nonfinite.astype(jnp.int32),
    )
    metrics = {
        **{f"train/{name}": getattr(steps.loss, name).mean() for name in LOSS_TAGS},
        "train/total_loss": steps.loss.total_loss.mean(),  # the host path logs the sum too
        "train/explained_variance": explained_variance(traj.value, targets),
        "train/grad_norm": steps.grad_norm.mean(),
        "train/learning_rate": learning_rate,
        "train/nonfinite_updates": nonfinite.astype(jnp.float32),
    }
    return runner, metrics
