"""The compiled training step: ``updates_per_chunk`` x (plan -> rollout -> PPO -> features).

``make_train_step(setup)`` returns one ``jax.jit``-compiled function
``RunnerState -> (RunnerState, {tag: scalar})`` that donates its input. It compiles once
per run; the host only sees the reduced scalar metrics between chunks.

Every feature of the run is folded in through its interface (:mod:`jaxrl.features`), in the
order the built run lists them, and the step knows none of them by name:

- per-member features (:class:`~jaxrl.features.Feature`) edit the plan before the rollout,
  update their own state after the PPO update and declare their metrics;
- learner features (:class:`~jaxrl.features.LearnerFeature`) act after the learner's whole
  update, given its runner before and after and the step's own functions
  (:data:`LEARNER_OPS`: they train learners of their own with them);
- population features (:class:`~jaxrl.features.PopulationFeature`) act on every member
  ``[R]`` after every member's update: the chunk is then a scan of (every member's update,
  vmapped, then each population feature), their states carried beside the members'.

One PPO update on a trajectory batch is :func:`jaxrl.core.ppo.learn`; :func:`update` wraps it
with the plan, the rollout and the features.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxrl.core.acting import value_of
from jaxrl.core.layout import sum_over_devices
from jaxrl.core.losses import LOSS_TAGS
from jaxrl.core.metrics import Scalar, idle_packed, mean_of, pack, reduce_packed
from jaxrl.core.normalize import normalize
from jaxrl.core.ppo import Learned, OptState, StepMetrics, learn
from jaxrl.core.ppo import make_sequences as _make_sequences
from jaxrl.core.ppo import training_batch as _training_batch
from jaxrl.core.rollout import RolloutOutput, rollout
from jaxrl.core.stats import explained_variance
from jaxrl.core.types import RunnerState
from jaxrl.features import LearnerOps, UpdateResult, masked_sums, reads_of, visible, written
from jaxrl.run.runner import (  # noqa: F401 - re-exported: the step's entry points
    as_restored,
    feature_views,
    init_member_params,
    init_params,
    init_run,
    init_runner_state,
    make_plan,
    member_params,
    member_params_program,
    restart_matches,
    runner_specs,
    without_population,
)
from jaxrl.run.setup import Setup, current_learning_rate, metric_specs


def make_sequences(setup: Setup, data, start_hidden):
    """:func:`jaxrl.core.ppo.make_sequences` at the run's sequence length."""
    return _make_sequences(setup.step.sequence_length, data, start_hidden)


def training_batch(setup: Setup, traj, start_hidden, advantages, targets):
    """:func:`jaxrl.core.ppo.training_batch` of the run."""
    return _training_batch(setup.learn, traj, start_hidden, advantages, targets)


def learn_from_rollout(
    setup: Setup, runner: RunnerState, match, out: RolloutOutput, key: jax.Array
) -> Learned:
    """:func:`jaxrl.core.ppo.learn` on a rollout that left the envs at ``match``: the value of the
    next observation bootstraps the last step."""
    rows = setup.layout.num_envs * setup.layout.actors_per_env
    last_obs = normalize(out.obs_stats, match.obs[:rows], setup.step.normalize_obs)
    last_hidden = jax.tree.map(lambda h: h[:rows], match.hidden)
    # is_first resets the core before the value: an episode that just began has no history.
    last_value = value_of(setup.policy, runner.params, last_hidden, last_obs, match.is_first[:rows])
    state = OptState(params=runner.params, opt_state=runner.opt_state)
    return learn(
        setup.learn,
        state,
        runner.hyper,
        out.transitions,
        out.start_hidden,
        last_value,
        key,
        out.step_stats,
    )


def features_after_update(
    setup: Setup, runner: RunnerState, result: UpdateResult
) -> tuple[dict, dict, list]:
    """``(states, metrics, resets)``: every per-member feature's answer to one update (each
    handed the views, as the update began, of the features it declares in ``reads``)."""
    states, metrics, resets = {}, {}, []
    views = feature_views(setup, runner.features)
    for feature in setup.features:
        reads = reads_of(feature, views)
        state, output = feature.after_update(runner.features[feature.name], result, reads)
        states[feature.name] = state
        metrics.update(output.metrics)
        if feature.resets:
            resets.append(output.reset)
    return states, metrics, resets


def core_metrics(
    setup: Setup, out: RolloutOutput, learned: Learned, learning_rate: jax.Array
) -> dict[str, Scalar]:
    """The PPO core's declared metrics of one update (:func:`jaxrl.run.setup.core_metric_specs`)."""
    layout = setup.layout
    steps: StepMetrics = learned.steps
    train_envs = np.zeros(layout.total_envs, bool)
    train_envs[: layout.num_envs] = True
    sums = masked_sums(out.sums, jnp.asarray(train_envs), layout.axis)
    # Each term's total over the training envs' steps, per training episode that ended.
    terms = masked_sums(out.reward_terms, jnp.asarray(train_envs), layout.axis)
    values = out.transitions.value
    return {
        **{f"train/{name}": Scalar.of(getattr(steps.loss, name).mean()) for name in LOSS_TAGS},
        "train/explained_variance": Scalar.of(
            explained_variance(values, learned.targets, layout.axis)
        ),
        "train/grad_norm": Scalar.of(steps.grad_norm.mean()),
        "train/learning_rate": Scalar.of(learning_rate),
        "train/nonfinite_updates": Scalar.of(steps.nonfinite.any()),
        "train/updates": Scalar.of(1.0),
        "rollout/episode_return": mean_of(sums.return_sum, sums.episodes),
        "rollout/episode_length": mean_of(sums.length_sum, sums.episodes),
        "rollout/episodes": Scalar.of(sums.episodes),
        **{
            f"rollout/outcome/{name}": mean_of(outcome_sum, sums.matches)
            for name, outcome_sum in sums.outcome_sums.items()
        },
        **{
            f"rollout/reward/{name}": mean_of(total, sums.episodes) for name, total in terms.items()
        },
    }


def update(setup: Setup, runner: RunnerState) -> tuple[RunnerState, Scalar]:
    """One update: plan, a rollout of ``T`` steps on every env, PPO (:func:`jaxrl.core.ppo.learn`),
    then the per-member features and the learner features.

    Returns the new runner and the update's metrics packed in declaration order.
    """
    key, key_rollout, key_epochs, key_reset = jax.random.split(runner.key, 4)
    plan = make_plan(setup, runner.features, runner.hyper)
    match, out = rollout(setup, runner.params, runner.obs_stats, plan, runner.match, key_rollout)
    learning_rate = current_learning_rate(runner.opt_state) * runner.hyper.lr
    learned = learn_from_rollout(setup, runner, match, out, key_epochs)
    nonfinite = learned.steps.nonfinite.any()
    update_step = runner.update_step + 1
    result = UpdateResult(
        params=learned.state.params,
        obs_stats=out.obs_stats,
        sums=out.sums,
        tally=jax.tree.map(lambda x: sum_over_devices(x, setup.layout.axis), out.tally),
        plan=plan,
        update_step=update_step,
    )
    feature_states, feature_metrics, resets = features_after_update(setup, runner, result)
    new_runner = runner.replace(
        params=learned.state.params,
        opt_state=learned.state.opt_state,
        match=match,
        obs_stats=out.obs_stats,
        key=key,
        update_step=update_step,
        nonfinite_streak=jnp.where(nonfinite, runner.nonfinite_streak + 1, 0),
        nonfinite_total=runner.nonfinite_total + nonfinite.astype(jnp.int32),
        features=feature_states,
    )
    if resets:  # a feature asked for every env to start afresh
        new_runner = jax.lax.cond(
            jnp.any(jnp.stack(resets)),
            lambda r: restart_matches(setup, r, key_reset),
            lambda r: r,
            new_runner,
        )
    for feature in setup.learner_features:  # they see the runner before and after
        own = runner.features[feature.name]
        before, after = visible(runner, feature, own), visible(new_runner, feature, own)
        returned, metrics = feature.after_learner(LEARNER_OPS, before, after)
        new_runner = written(new_runner, returned, (feature.name, *feature.writes))
        feature_metrics.update(metrics)
    metrics = {**core_metrics(setup, out, learned, learning_rate), **feature_metrics}
    return new_runner, pack(metric_specs(setup), metrics)


def guarded_update(setup: Setup, runner: RunnerState) -> tuple[RunnerState, Scalar]:
    """:func:`update` while training is on; a no-op past the last update or a NaN streak."""
    active = jnp.logical_and(
        runner.update_step < setup.step.num_updates,
        runner.nonfinite_streak < setup.step.max_nonfinite_updates,
    )
    idle = idle_packed(metric_specs(setup))
    return jax.lax.cond(active, lambda r: update(setup, r), lambda r: (r, idle), runner)


# The step's functions on one learner's runner, handed to learner features.
LEARNER_OPS = LearnerOps(update=update, metric_specs=metric_specs)


def train_chunk(setup: Setup, runner: RunnerState) -> tuple[RunnerState, dict[str, jax.Array]]:
    """``chunk_updates`` guarded updates in one ``lax.scan``, metrics reduced in-graph."""
    runner, metrics = jax.lax.scan(
        lambda r, _: guarded_update(setup, r), runner, None, length=setup.step.chunk_updates
    )
    return runner, reduce_packed(metric_specs(setup), metrics)


def population_update(
    setup: Setup, runner: RunnerState
) -> tuple[RunnerState, tuple[Scalar, tuple[Scalar, ...]]]:
    """Every member's guarded update (vmapped), then each population feature in turn.

    Returns the runner (leaves ``[R, ...]``) and the packed metrics ``[R, M]`` of the
    update and of each population feature.
    """
    population = {f.name: runner.features[f.name] for f in setup.population_features}
    members = runner.replace(features=without_population(setup, runner.features))
    before = members.update_step
    members, packed = jax.vmap(lambda r: guarded_update(setup, r))(members)
    ran = members.update_step > before
    outputs = []
    for feature in setup.population_features:
        handed = members if feature.owns_members else visible(members, feature, None)
        state, returned, metrics = feature.after_members(
            population[feature.name], handed, ran, packed, setup.layout.axis
        )
        members = returned if feature.owns_members else written(members, returned, feature.writes)
        population[feature.name] = state
        outputs.append(pack(feature.metric_specs(members.hyper), metrics))
    runner = members.replace(features={**members.features, **population})
    return runner, (packed, tuple(outputs))


def train_population_chunk(
    setup: Setup, runner: RunnerState
) -> tuple[RunnerState, dict[str, jax.Array]]:
    """:func:`train_chunk` for a population: metrics ``[R]`` per tag, the features' too."""
    runner, (packed, outputs) = jax.lax.scan(
        lambda r, _: population_update(setup, r), runner, None, length=setup.step.chunk_updates
    )

    def per_member(specs, stacked):  # [K, R, M] -> {tag: [R]}
        return jax.vmap(lambda p: reduce_packed(specs, p), in_axes=1)(stacked)

    metrics = per_member(metric_specs(setup), packed)
    for feature, stacked in zip(setup.population_features, outputs, strict=True):
        metrics.update(per_member(feature.metric_specs(runner.hyper), stacked))
    return runner, metrics


def make_train_step(
    setup: Setup,
) -> Callable[[RunnerState], tuple[RunnerState, dict[str, jax.Array]]]:
    """The jitted chunk function; the runner state passed in is donated.

    With several members (seeds, sweep points) it is vmapped over their leading ``[R]``
    axis, and every metric is ``[R]``; with population features the scan runs over the
    vmapped update and those features (:func:`train_population_chunk`). With a mesh it is a
    ``shard_map`` over the devices.
    """
    if setup.population_features:
        chunk = lambda runner: train_population_chunk(setup, runner)  # noqa: E731
    elif setup.members.count > 1:
        chunk = jax.vmap(lambda runner: train_chunk(setup, runner))
    else:
        chunk = lambda runner: train_chunk(setup, runner)  # noqa: E731
    if setup.mesh is not None:
        # Every device runs the chunk on its envs; gradients, normaliser moments and episode
        # totals are summed over devices inside, so the outputs are the same everywhere.
        # No varying-axis type checks: an env's own code (a lax.switch whose branches return
        # constants, say) would have to know about the mesh. Replication of the outputs is
        # by construction and tested: 2 devices give the 1-device run's params.
        specs = runner_specs(setup)
        chunk = jax.shard_map(
            chunk,
            mesh=setup.mesh,
            in_specs=(specs,),
            out_specs=(specs, P()),
            check_vma=False,
        )
    return jax.jit(chunk, donate_argnums=0)
