"""The compiled training step: ``updates_per_chunk`` x (rollout -> GAE -> PPO epochs).

``make_train_step(setup)`` returns one ``jax.jit``-compiled function
``RunnerState -> (RunnerState, ChunkMetrics)`` that donates its input. It compiles once
per run; the host only sees the scalar metrics between chunks.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxrl.curriculum import CurriculumState, advance, stage_params, window_mean
from jaxrl.gae import bootstrap_values, gae
from jaxrl.losses import Minibatch
from jaxrl.normalize import normalize
from jaxrl.ppo import OptState, update_epochs
from jaxrl.rollout import RolloutCarry, reset_actors, rollout, value_of
from jaxrl.setup import Setup, current_learning_rate, init_params
from jaxrl.types import ChunkMetrics, LossMetrics, RunnerState, RunningStats, UpdateMetrics


def init_runner_state(setup: Setup, key: jax.Array) -> RunnerState:
    """Fresh params, optimizer state and env instances for a run seeded by ``key``."""
    key_params, key_reset, key_runner = jax.random.split(key, 3)
    del key
    params = init_params(setup, key_params)
    fresh = reset_actors(
        setup,
        setup.env_params,
        key_reset,
        setup.config.env.num_envs,
        RunningStats.create(setup.obs_shape),
    )
    return RunnerState(
        params=params,
        opt_state=setup.optimizer.init(params),
        env_state=fresh.env_state,
        obs=fresh.obs,
        is_first=fresh.is_first,
        hidden=fresh.hidden,
        obs_stats=fresh.obs_stats,
        key=key_runner,
        update_step=jnp.zeros((), jnp.int32),
        nonfinite_streak=jnp.zeros((), jnp.int32),
        nonfinite_total=jnp.zeros((), jnp.int32),
        curriculum=CurriculumState.create(
            int(setup.curriculum.window.max()) if setup.curriculum is not None else 1
        ),
    )


def reset_envs(setup: Setup, runner: RunnerState, env_params, key: jax.Array) -> RunnerState:
    """Start a new episode in every env (after a curriculum promotion)."""
    fresh = reset_actors(setup, env_params, key, setup.config.env.num_envs, runner.obs_stats)
    return runner.replace(
        env_state=fresh.env_state, obs=fresh.obs, is_first=fresh.is_first, hidden=fresh.hidden
    )


def explained_variance(values: jax.Array, returns: jax.Array) -> jax.Array:
    """``1 - Var[returns - values] / Var[returns]`` (nan when the returns are constant)."""
    var_returns = jnp.var(returns)
    return jnp.where(var_returns > 0, 1.0 - jnp.var(returns - values) / var_returns, jnp.nan)


def make_sequences(setup: Setup, data: Minibatch, start_hidden) -> Minibatch:
    """Cut ``[T, B, ...]`` rollout data into ``N = B * T / L`` sequences ``[L, N, ...]``.

    Sequence ``c * B + b`` is env ``b``'s steps ``c*L .. c*L + L - 1``; its hidden state is
    ``start_hidden[c, b]`` (``start_hidden`` is ``[C, B, ...]``, or ``()`` without a core).
    Without a core ``L = 1``: every step is its own sequence and minibatches shuffle steps.
    """
    length = setup.config.sequence_length

    def cut(x):
        num_steps, num_envs = x.shape[:2]
        x = x.reshape((num_steps // length, length, num_envs) + x.shape[2:])
        x = jnp.swapaxes(x, 0, 1)
        return x.reshape((length, -1) + x.shape[3:])

    sequences = jax.tree.map(cut, data.replace(hidden=()))
    hidden = jax.tree.map(lambda h: h.reshape((-1,) + h.shape[2:]), start_hidden)
    return sequences.replace(hidden=hidden)


def rollout_carry(runner: RunnerState) -> RolloutCarry:
    """The part of the runner state the rollout advances."""
    return RolloutCarry(
        env_state=runner.env_state,
        obs=runner.obs,
        is_first=runner.is_first,
        hidden=runner.hidden,
        obs_stats=runner.obs_stats,
    )


def training_batch(
    setup: Setup, traj, start_hidden, advantages: jax.Array, targets: jax.Array
) -> Minibatch:
    """All training sequences of one rollout (``[T, B]`` data with GAE results)."""
    data = Minibatch(
        obs=traj.obs,
        is_first=traj.is_first,
        hidden=(),
        action=traj.action,
        log_prob=traj.log_prob,
        value=traj.value,
        advantage=advantages,
        target=targets,
        mask=traj.mask,
    )
    return make_sequences(setup, data, start_hidden)


def update(setup: Setup, runner: RunnerState) -> tuple[RunnerState, UpdateMetrics]:
    """One PPO update: a rollout of ``T`` steps on ``B`` envs, GAE, then the epochs."""
    ppo = setup.config.ppo
    key, key_rollout, key_epochs, key_reset = jax.random.split(runner.key, 4)
    env_params = stage_params(setup.curriculum, setup.env_params, runner.curriculum.stage)

    carry, traj, start_hidden, sums = rollout(
        setup, runner.params, env_params, rollout_carry(runner), key_rollout
    )

    last_obs = normalize(carry.obs_stats, carry.obs, setup.config.env.normalize_obs)
    # is_first resets the core before the value: an episode that just began has no history.
    last_value = value_of(setup, runner.params, carry.hidden, last_obs, carry.is_first)
    next_values = bootstrap_values(traj.value, last_value, traj.final_value, traj.truncated)
    advantages, targets = gae(
        traj.reward,
        traj.value,
        next_values,
        traj.terminated,
        traj.truncated,
        ppo.gamma,
        ppo.gae_lambda,
    )
    batch = training_batch(setup, traj, start_hidden, advantages, targets)
    learning_rate = current_learning_rate(runner.opt_state)
    opt, steps = update_epochs(
        setup, OptState(params=runner.params, opt_state=runner.opt_state), batch, key_epochs
    )

    nonfinite = steps.nonfinite.any()
    new_runner = runner.replace(
        params=opt.params,
        opt_state=opt.opt_state,
        env_state=carry.env_state,
        obs=carry.obs,
        is_first=carry.is_first,
        hidden=carry.hidden,
        obs_stats=carry.obs_stats,
        key=key,
        update_step=runner.update_step + 1,
        nonfinite_streak=jnp.where(nonfinite, runner.nonfinite_streak + 1, 0),
        nonfinite_total=runner.nonfinite_total + nonfinite.astype(jnp.int32),
    )
    promoted = jnp.zeros((), bool)
    if setup.curriculum is not None:
        # Episodes of active actors only (multi-agent envs have empty slots).
        has_episodes = sums.episodes > 0
        per_episode = jnp.maximum(sums.episodes, 1.0)
        stage_metrics = {
            "episode_return": (sums.return_sum / per_episode, has_episodes),
            "episode_length": (sums.length_sum / per_episode, has_episodes),
            **{
                f"outcome/{name}": (total / per_episode, has_episodes)
                for name, total in sums.outcome_sums.items()
            },
        }
        curriculum, promoted = advance(setup.curriculum, runner.curriculum, stage_metrics)
        new_runner = new_runner.replace(curriculum=curriculum)
        # A new stage starts every env afresh with the stage's params.
        new_params = stage_params(setup.curriculum, setup.env_params, curriculum.stage)
        new_runner = jax.lax.cond(
            promoted,
            lambda r: reset_envs(setup, r, new_params, key_reset),
            lambda r: r,
            new_runner,
        )

    metrics = UpdateMetrics(
        loss=jax.tree.map(jnp.mean, steps.loss),
        grad_norm=steps.grad_norm.mean(),
        learning_rate=jnp.asarray(learning_rate, jnp.float32),
        explained_variance=explained_variance(traj.value, targets),
        episode_return_sum=sums.return_sum,
        episode_length_sum=sums.length_sum,
        outcome_sums=sums.outcome_sums,
        episodes=sums.episodes,
        nonfinite=nonfinite,
        promoted=promoted,
        active=jnp.asarray(True),
    )
    return new_runner, metrics


def _idle_metrics(outcome_names: tuple[str, ...]) -> UpdateMetrics:
    zero = jnp.zeros((), jnp.float32)
    return UpdateMetrics(
        loss=LossMetrics(
            total_loss=zero,
            policy_loss=zero,
            value_loss=zero,
            entropy=zero,
            approx_kl=zero,
            clip_fraction=zero,
        ),
        grad_norm=zero,
        learning_rate=zero,
        explained_variance=zero,
        episode_return_sum=zero,
        episode_length_sum=zero,
        outcome_sums={name: zero for name in outcome_names},
        episodes=zero,
        nonfinite=jnp.asarray(False),
        promoted=jnp.asarray(False),
        active=jnp.asarray(False),
    )


def guarded_update(setup: Setup, runner: RunnerState) -> tuple[RunnerState, UpdateMetrics]:
    """:func:`update` while training is on; a no-op past the last update or a NaN streak."""
    train = setup.config.train
    active = jnp.logical_and(
        runner.update_step < setup.config.num_updates,
        runner.nonfinite_streak < train.max_nonfinite_updates,
    )
    return jax.lax.cond(
        active,
        lambda r: update(setup, r),
        lambda r: (r, _idle_metrics(setup.outcome_names)),
        runner,
    )


def reduce_metrics(setup: Setup, runner: RunnerState, metrics: UpdateMetrics) -> ChunkMetrics:
    """Reduce ``UpdateMetrics[K]`` of a chunk to scalars (means over the updates that ran).

    Curriculum figures are read from ``runner``, the state at the end of the chunk.
    """
    active = metrics.active.astype(jnp.float32)
    runs = active.sum()
    mean = lambda x: jnp.where(runs > 0, (x * active).sum() / jnp.maximum(runs, 1.0), jnp.nan)  # noqa: E731
    episodes = metrics.episodes.sum()
    per_episode = lambda x: jnp.where(  # noqa: E731
        episodes > 0, x.sum() / jnp.maximum(episodes, 1.0), jnp.nan
    )
    return ChunkMetrics(
        policy_loss=mean(metrics.loss.policy_loss),
        value_loss=mean(metrics.loss.value_loss),
        entropy=mean(metrics.loss.entropy),
        approx_kl=mean(metrics.loss.approx_kl),
        clip_fraction=mean(metrics.loss.clip_fraction),
        explained_variance=mean(metrics.explained_variance),
        grad_norm=mean(metrics.grad_norm),
        learning_rate=mean(metrics.learning_rate),
        episode_return=per_episode(metrics.episode_return_sum),
        episode_length=per_episode(metrics.episode_length_sum),
        outcomes={name: per_episode(total) for name, total in metrics.outcome_sums.items()},
        episodes=episodes,
        nonfinite_updates=metrics.nonfinite.astype(jnp.int32).sum(),
        updates=metrics.active.astype(jnp.int32).sum(),
        curriculum_stage=runner.curriculum.stage,
        curriculum_metric=(
            window_mean(
                runner.curriculum,
                jnp.asarray(setup.curriculum.window)[runner.curriculum.stage],
            )
            if setup.curriculum is not None
            else jnp.asarray(jnp.nan, jnp.float32)
        ),
        curriculum_promotions=metrics.promoted.astype(jnp.int32).sum(),
    )


def train_chunk(setup: Setup, runner: RunnerState) -> tuple[RunnerState, ChunkMetrics]:
    """``chunk_updates`` guarded updates in one ``lax.scan``, metrics reduced in-graph."""
    runner, metrics = jax.lax.scan(
        lambda r, _: guarded_update(setup, r), runner, None, length=setup.config.chunk_updates
    )
    return runner, reduce_metrics(setup, runner, metrics)


def make_train_step(setup: Setup) -> Callable[[RunnerState], tuple[RunnerState, ChunkMetrics]]:
    """The jitted chunk function; the runner state passed in is donated."""
    return jax.jit(lambda runner: train_chunk(setup, runner), donate_argnums=0)
