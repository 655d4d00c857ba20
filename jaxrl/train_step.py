"""The compiled training step: ``updates_per_chunk`` x (plan -> rollout -> GAE -> PPO -> features).

``make_train_step(setup)`` returns one ``jax.jit``-compiled function
``RunnerState -> (RunnerState, {tag: scalar})`` that donates its input. It compiles once
per run; the host only sees the reduced scalar metrics between chunks.

The features of the run (:mod:`jaxrl.features`: curriculum, self-play, evaluation lanes)
are folded in generically: each edits the plan before the rollout, updates its own state
after the PPO update and declares its metrics; the train step knows none of them by name.

Population-based training (:mod:`jaxrl.pbt`, ``pbt:``) acts on the whole population, so it
runs between the vmapped updates of the members: the chunk is a scan of (every member's
update, then the PBT step), and PBT's per-member state is carried as ``features["pbt"]``
(checkpointed as its own item, never copied from a parent).

The league's exploiters (:mod:`jaxrl.league.exploiters`, ``selfplay.exploiters``) act across
learners too: after the learner's update, :func:`exploiter_update` runs every exploiter's
update (vmapped, against the learner's policy as the update began) and hands those past the
threshold into the learner's pool; their runners ride in ``features["exploiters"]``. Without
exploiters none of this is traced, and the program is the one before they existed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxrl import pbt
from jaxrl.acting import PolicyParams, value_of
from jaxrl.config import ConfigError
from jaxrl.curriculum import Curriculum
from jaxrl.distributed import replicate
from jaxrl.features import UpdateResult, masked_sums
from jaxrl.gae import bootstrap_values, gae
from jaxrl.hyper import Hyper, base_hyper, member_env_params
from jaxrl.layout import sum_over_devices
from jaxrl.league import exploiters
from jaxrl.league.feature import SelfPlay
from jaxrl.league.lanes import RESULT_NAMES
from jaxrl.losses import Minibatch
from jaxrl.match import MatchPlan, idle_plan, start_matches
from jaxrl.metrics import MetricSpec, Scalar, idle_packed, mean_of, pack, reduce_packed
from jaxrl.normalize import normalize
from jaxrl.ppo import OptState, update_epochs
from jaxrl.rollout import rollout
from jaxrl.setup import Setup, current_learning_rate, init_params
from jaxrl.types import RunnerState, RunningStats

LOSS_TAGS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
PBT = "pbt"  # the features entry of PBT's per-member state (and its checkpoint item)


def core_metric_specs(
    outcome_names: tuple[str, ...], reward_term_names: tuple[str, ...] = ()
) -> tuple[MetricSpec, ...]:
    """The PPO core's metrics: losses, optimiser figures, training episodes and, for an env
    that reports ``info["reward_terms"]``, each term per episode (``rollout/reward/<term>``)."""
    return (
        *(MetricSpec(f"train/{name}") for name in LOSS_TAGS),
        MetricSpec("train/explained_variance"),
        MetricSpec("train/grad_norm"),
        MetricSpec("train/learning_rate"),
        MetricSpec("train/nonfinite_updates", "sum"),
        MetricSpec("train/updates", "sum"),
        MetricSpec("rollout/episode_return"),
        MetricSpec("rollout/episode_length"),
        MetricSpec("rollout/episodes", "sum"),
        *(MetricSpec(f"rollout/outcome/{name}") for name in outcome_names),
        *(MetricSpec(f"rollout/reward/{name}") for name in reward_term_names),
    )


def metric_specs(setup: Setup) -> tuple[MetricSpec, ...]:
    """Every metric a chunk returns: the core's, each feature's declarations, the exploiters'."""
    specs = core_metric_specs(setup.outcome_names, setup.reward_term_names)
    for feature in setup.features:
        specs += feature.metric_specs()
    if setup.exploiters is not None:
        specs += setup.exploiters.metric_specs()
    return specs


def make_plan(setup: Setup, feature_states: dict, hyper: Hyper | None = None) -> MatchPlan:
    """The plan of the next rollout: the run's env params with the member's own values of
    those that vary per member (``hyper.env``), edited by each feature in turn."""
    env_params = setup.env_params if hyper is None else member_env_params(setup.env_params, hyper)
    plan = idle_plan(setup.layout, env_params)
    for feature in setup.features:
        plan = feature.plan(feature_states[feature.name], plan)
    return plan


def init_runner_state(
    setup: Setup, key: jax.Array, hyper: Hyper | None = None, params=None
) -> RunnerState:
    """Fresh params, optimizer state, features and env instances for a run seeded by ``key``.

    ``hyper``: the member's hyperparameters (default: the config's own). ``params``: the
    params :func:`member_params` gives for ``key`` (computed here when None).
    """
    hyper = base_hyper(setup.config) if hyper is None else hyper
    key_params, key_reset, key_runner = jax.random.split(key, 3)
    params = init_params(setup, key_params) if params is None else params
    obs_stats = RunningStats.create(setup.obs_shape)
    features = {f.name: f.init(params, obs_stats) for f in setup.features}
    hyper = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), hyper)
    if setup.exploiters is not None:  # a key stream of their own: the learner's is unchanged
        key_exploiters = jax.random.fold_in(key, exploiters.KEY_STREAM)
        features[exploiters.EXPLOITERS] = init_exploiters(
            setup.exploiters, key_exploiters, hyper, params
        )
    del key
    plan = make_plan(setup, features, hyper)
    return RunnerState(
        params=params,
        opt_state=setup.optimizer.init(params),
        match=start_matches(setup.match, setup.network.initial_hidden, plan, key_reset),
        obs_stats=obs_stats,
        key=key_runner,
        update_step=jnp.zeros((), jnp.int32),
        nonfinite_streak=jnp.zeros((), jnp.int32),
        nonfinite_total=jnp.zeros((), jnp.int32),
        features=features,
        hyper=hyper,
    )


def init_exploiters(
    spec: exploiters.ExploiterSpec, key: jax.Array, hyper: Hyper, params
) -> exploiters.ExploiterState:
    """The exploiters at the start of a run: the learner's initial params, a fresh optimiser
    state and normaliser, their own envs and key. Their first update replaces the weights
    with the main agent's (:func:`jaxrl.league.exploiters.start_fresh`)."""
    keys = jax.random.split(key, spec.count)
    del key
    learners = jax.vmap(lambda k: init_runner_state(spec.setup, k, hyper, params))(keys)
    return exploiters.ExploiterState(
        learners=learners, handoffs=jnp.zeros((spec.count,), jnp.int32)
    )


def exploiter_update(
    setup: Setup, before: RunnerState, after: RunnerState
) -> tuple[RunnerState, dict[str, Scalar]]:
    """The exploiters' part of one learner update (:mod:`jaxrl.league.exploiters`).

    Every exploiter's PPO update (vmapped) against the learner's policy as it was in
    ``before`` (or, with ``selfplay.exploiter_target: frozen``, as it was at the exploiter's
    last restart), then the hand-off of those past the threshold into the league of ``after``
    (the learner after its update, whose weights they restart from), then the refresh of
    frozen targets past ``exploiter_refresh_updates``.
    """
    spec = setup.exploiters
    state = before.features[exploiters.EXPLOITERS]
    target = PolicyParams(params=before.params, obs_stats=before.obs_stats)
    learners = exploiters.aim_at_start(spec, state.learners, target)
    start = exploiters.Learner(
        params=before.params, opt_state=before.opt_state, obs_stats=before.obs_stats
    )

    def train(learners):  # their first update starts from the main agent's weights
        return jax.vmap(lambda r: update(spec.setup, r))(exploiters.start_fresh(learners, start))

    if spec.active_stages is None:
        active = True
        learners, packed = train(learners)
    else:  # only while the learner's curriculum stage has self-play on
        active = jnp.asarray(spec.active_stages)[before.features[Curriculum.name].stage]
        idle = jax.vmap(lambda _: idle_packed(metric_specs(spec.setup)))(learners.update_step)
        learners, packed = jax.lax.cond(
            active,
            train,
            lambda waiting: (waiting, idle),  # unchanged; no games, every weight 0
            learners,
        )
    index = {metric.tag: i for i, metric in enumerate(metric_specs(spec.setup))}
    rates = {  # this update's rates against the learner, Scalar [N] (weights: games)
        name: Scalar(
            value=packed.value[:, index[f"exploiter/{name}"]],
            weight=packed.weight[:, index[f"exploiter/{name}"]],
        )
        for name in RESULT_NAMES
    }
    results = learners.features[exploiters.TARGET].results
    main = exploiters.Learner(
        params=after.params, opt_state=after.opt_state, obs_stats=after.obs_stats
    )
    learners, league, handed = exploiters.handoff(
        spec, learners, after.features[SelfPlay.name], main, after.update_step, active
    )
    learners, refreshed = exploiters.refresh(spec, learners, main, active)
    state = state.replace(learners=learners, handoffs=state.handoffs + handed.astype(jnp.int32))
    features = {**after.features, SelfPlay.name: league, exploiters.EXPLOITERS: state}
    out = exploiters.metrics(spec, rates, results, handed, refreshed)
    return after.replace(features=features), out


def init_run(setup: Setup) -> RunnerState:
    """The runner state of every member: one run, or leaves ``[R, ...]`` for R members.

    Data-parallel, built by the sharded init: every device resets its own envs (their
    slice of the global keys) and holds the same params, keys and feature states.
    """
    members = setup.members
    keys = jnp.stack([jax.random.key(seed) for seed in members.seeds])
    hypers = jax.tree.map(jnp.asarray, members.hyper)
    if members.count == 1:
        first = lambda tree: jax.tree.map(lambda x: x[0], tree)  # noqa: E731
        init = lambda k, h, p: init_runner_state(setup, k[0], first(h), first(p))  # noqa: E731
    else:
        init = jax.vmap(lambda k, h, p: init_runner_state(setup, k, h, p))
    params = init_member_params(setup, keys)
    spec = pbt_spec(setup)
    population = None if spec is None else pbt.init_population(spec, members.seeds)
    if setup.mesh is None:
        runner = (
            jax.jit(init)(keys, hypers, params) if members.count > 1 else init(keys, hypers, params)
        )
    else:
        specs = runner_specs(setup)
        sharded = jax.shard_map(
            lambda key_data, h, p: init(jax.random.wrap_key_data(key_data), h, p),
            mesh=setup.mesh,
            in_specs=(P(), P(), P()),
            out_specs=specs.replace(features=_without_pbt(specs.features)),
            check_vma=False,  # see make_train_step
        )
        # Replicated over the mesh from host values: the mesh may span several processes.
        inputs = replicate((jax.random.key_data(keys), hypers, params), setup.mesh)
        runner = jax.jit(sharded)(*inputs)
        if population is not None:
            data = population.replace(key=jax.random.key_data(population.key))
            data = replicate(data, setup.mesh)  # keys as data: replicate reads host arrays
            population = data.replace(key=jax.random.wrap_key_data(data.key))
    if population is not None:
        runner = runner.replace(features={**runner.features, PBT: population})
    return as_restored(setup, runner)


def as_restored(setup: Setup, runner: RunnerState) -> RunnerState:
    """A fresh runner state typed and placed as a restored one.

    Checkpoints come back without weak types (gymnax's counters start as Python ints) and
    committed to their devices; a fresh state gets the same, so a resumed run traces the same
    program as a fresh one (one entry in a persistent compilation cache for both).
    """

    def strong(x: jax.Array) -> jax.Array:
        weak = not jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) and x.weak_type
        return jnp.asarray(x, dtype=x.dtype) if weak else x

    runner = jax.tree.map(strong, runner)
    if setup.mesh is None:  # with a mesh the sharded init placed every leaf already
        runner = jax.device_put(runner, jax.local_devices()[0])
    return runner


def pbt_spec(setup: Setup) -> pbt.PBTSpec | None:
    """The run's population-based training (None without ``pbt:``).

    Raises:
      ConfigError: ``pbt.metric`` names a tag no part of the train step declares.
    """
    config = setup.config
    try:
        return pbt.make_spec(
            config.pbt,
            num_members=setup.members.count,
            num_updates=config.num_updates,
            metric_tags=[spec.tag for spec in metric_specs(setup)],
            sweep=config.sweep,
            copied_features=tuple(feature.name for feature in setup.features),
            max_nonfinite=config.train.max_nonfinite_updates,
            merged_features=(
                ((exploiters.EXPLOITERS, exploiters.inherit),) if setup.exploiters else ()
            ),
        )
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _without_pbt(features: dict) -> dict:
    return {name: state for name, state in features.items() if name != PBT}


def init_member_params(setup: Setup, keys: jax.Array):
    """:func:`member_params` of every member, stacked ``[R, ...]``: one program, called once
    a member, outside any mesh, and done before anything else is dispatched.

    Not vmapped: on the CPU, jaxlib's LAPACK kernels split a batched QR (the orthogonal
    initialiser's, over the members) into tasks on XLA's intra-op pool and wait for them on
    a pool thread; two such QRs in flight at once (two layers, two devices, or a program
    dispatched beside them) took every pool thread while waiting and hung for good (jax
    0.10.2: ``bench.throughput`` of ``configs/breakout_minatar_pbt.yaml`` hung at once on a
    quiet 2-core machine). A QR of one matrix runs inline on its own thread. The per-member
    calls give the vmapped program's bits (``tests/test_hyper.py``).
    """
    one = member_params_program(setup)
    params = [jax.block_until_ready(one(keys[i])) for i in range(keys.shape[0])]
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *params)


def member_params_program(setup: Setup) -> Callable[[jax.Array], Any]:
    """:func:`member_params` of one member's key, jitted (its QRs are of single matrices)."""
    return jax.jit(lambda key: member_params(setup, key))


def member_params(setup: Setup, key: jax.Array):
    """The initial params of the member seeded by ``key``: :func:`init_run` passes them to
    :func:`init_runner_state` (which, called without them and without exploiters, makes the
    same)."""
    return init_params(setup, jax.random.split(key, 3)[0])


def _one_device(setup: Setup) -> Setup:
    """``setup`` with its env batch's layout as one device's, outside any mesh axis."""
    local = dataclasses.replace(setup.layout, axis=None, devices=1)
    return dataclasses.replace(
        setup, layout=local, match=dataclasses.replace(setup.match, layout=local)
    )


def runner_specs(setup: Setup) -> RunnerState:
    """Partition specs of a runner state: the match carry (env states, observations, hidden
    states) is split over the devices along its env axis; everything else is replicated."""
    axis = setup.layout.axis
    lead = (None,) if setup.members.count > 1 else ()
    # The structure of one device's runner (collectives need the mesh, shapes do not).
    unsharded = _one_device(setup)
    if setup.exploiters is not None:
        own = setup.exploiters
        unsharded = dataclasses.replace(
            unsharded, exploiters=dataclasses.replace(own, setup=_one_device(own.setup))
        )
    runner = jax.eval_shape(lambda: init_runner_state(unsharded, jax.random.key(0)))
    specs = jax.tree.map(lambda _: P(), runner)
    specs = specs.replace(match=jax.tree.map(lambda _: P(*lead, axis), runner.match))
    if setup.exploiters is not None:  # their envs too: leaves [R?, N, envs, ...]
        match = runner.features[exploiters.EXPLOITERS].learners.match
        mine = specs.features[exploiters.EXPLOITERS]
        mine = mine.replace(
            learners=mine.learners.replace(
                match=jax.tree.map(lambda _: P(*lead, None, axis), match)
            )
        )
        specs = specs.replace(features={**specs.features, exploiters.EXPLOITERS: mine})
    spec = pbt_spec(setup)
    if spec is None:
        return specs
    population = jax.eval_shape(lambda: pbt.init_population(spec, setup.members.seeds))
    return specs.replace(features={**specs.features, PBT: jax.tree.map(lambda _: P(), population)})


def restart_matches(setup: Setup, runner: RunnerState, key: jax.Array) -> RunnerState:
    """Every env starts a new episode under the plan of ``runner``'s feature states."""
    plan = make_plan(setup, runner.features, runner.hyper)
    return runner.replace(match=start_matches(setup.match, setup.network.initial_hidden, plan, key))


def global_var(x: jax.Array, axis: str | None) -> jax.Array:
    """Variance of every element of ``x`` on every device of ``axis``."""
    if not axis:
        return jnp.var(x)
    count = sum_over_devices(jnp.asarray(x.size, jnp.float32), axis)
    mean = sum_over_devices(x.sum(), axis) / count
    return sum_over_devices(jnp.square(x - mean).sum(), axis) / count


def explained_variance(values: jax.Array, returns: jax.Array, axis: str | None = None) -> jax.Array:
    """``1 - Var[returns - values] / Var[returns]`` (nan when the returns are constant)."""
    var_returns = global_var(returns, axis)
    residual = global_var(returns - values, axis)
    return jnp.where(var_returns > 0, 1.0 - residual / var_returns, jnp.nan)


def make_sequences(setup: Setup, data: Minibatch, start_hidden) -> Minibatch:
    """Cut ``[T, B, ...]`` rollout data into ``N = B * T / L`` sequences ``[L, N, ...]``.

    Sequence ``c * B + b`` is actor ``b``'s steps ``c*L .. c*L + L - 1``; its hidden state is
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
        step=None,
    )
    if setup.config.env.normalize_obs:  # which step's moments normalise each observation
        num_steps, num_rows = traj.is_first.shape
        steps = jnp.arange(num_steps, dtype=jnp.int32)[:, None]
        data = data.replace(step=jnp.broadcast_to(steps, (num_steps, num_rows)))
    return make_sequences(setup, data, start_hidden)


def update(setup: Setup, runner: RunnerState) -> tuple[RunnerState, Scalar]:
    """One PPO update: plan, a rollout of ``T`` steps on every env, GAE, the epochs, features.

    Returns the new runner and the update's metrics packed in declaration order.
    """
    layout = setup.layout
    key, key_rollout, key_epochs, key_reset = jax.random.split(runner.key, 4)
    hyper = runner.hyper
    plan = make_plan(setup, runner.features, hyper)

    match, out = rollout(setup, runner.params, runner.obs_stats, plan, runner.match, key_rollout)
    traj = out.transitions

    rows = layout.num_envs * layout.actors_per_env
    last_obs = normalize(out.obs_stats, match.obs[:rows], setup.config.env.normalize_obs)
    last_hidden = jax.tree.map(lambda h: h[:rows], match.hidden)
    # is_first resets the core before the value: an episode that just began has no history.
    last_value = value_of(setup.policy, runner.params, last_hidden, last_obs, match.is_first[:rows])
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
    batch = training_batch(setup, traj, out.start_hidden, advantages, targets)
    learning_rate = current_learning_rate(runner.opt_state) * hyper.lr
    loss_hp = setup.loss_hp.replace(
        clip_eps=hyper.clip_eps, vf_coef=hyper.vf_coef, ent_coef=hyper.ent_coef
    )
    opt, steps = update_epochs(
        setup.update_spec,
        loss_hp,
        hyper.lr,
        OptState(params=runner.params, opt_state=runner.opt_state),
        batch,
        key_epochs,
        out.step_stats,
    )
    nonfinite = steps.nonfinite.any()
    update_step = runner.update_step + 1

    result = UpdateResult(
        params=opt.params,
        obs_stats=out.obs_stats,
        sums=out.sums,
        tally=jax.tree.map(lambda x: sum_over_devices(x, layout.axis), out.tally),
        plan=plan,
        update_step=update_step,
    )
    feature_states, feature_metrics, resets = {}, {}, []
    for feature in setup.features:
        state, output = feature.after_update(runner.features[feature.name], result)
        feature_states[feature.name] = state
        feature_metrics.update(output.metrics)
        if feature.resets:
            resets.append(output.reset)

    new_runner = runner.replace(
        params=opt.params,
        opt_state=opt.opt_state,
        match=match,
        obs_stats=out.obs_stats,
        key=key,
        update_step=update_step,
        nonfinite_streak=jnp.where(nonfinite, runner.nonfinite_streak + 1, 0),
        nonfinite_total=runner.nonfinite_total + nonfinite.astype(jnp.int32),
        features=feature_states,
    )
    if resets:  # a feature asked for a fresh start (a curriculum promotion)
        new_runner = jax.lax.cond(
            jnp.any(jnp.stack(resets)),
            lambda r: restart_matches(setup, r, key_reset),
            lambda r: r,
            new_runner,
        )
    if setup.exploiters is not None:
        new_runner, exploiter_metrics = exploiter_update(setup, runner, new_runner)
        feature_metrics.update(exploiter_metrics)

    train_envs = np.zeros(layout.total_envs, bool)
    train_envs[: layout.num_envs] = True
    sums = masked_sums(out.sums, jnp.asarray(train_envs), layout.axis)
    # Each term's total over the training envs' steps, per training episode that ended.
    terms = masked_sums(out.reward_terms, jnp.asarray(train_envs), layout.axis)
    metrics = {
        **{f"train/{name}": Scalar.of(getattr(steps.loss, name).mean()) for name in LOSS_TAGS},
        "train/explained_variance": Scalar.of(explained_variance(traj.value, targets, layout.axis)),
        "train/grad_norm": Scalar.of(steps.grad_norm.mean()),
        "train/learning_rate": Scalar.of(learning_rate),
        "train/nonfinite_updates": Scalar.of(nonfinite),
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
        **feature_metrics,
    }
    return new_runner, pack(metric_specs(setup), metrics)


def guarded_update(setup: Setup, runner: RunnerState) -> tuple[RunnerState, Scalar]:
    """:func:`update` while training is on; a no-op past the last update or a NaN streak."""
    train = setup.config.train
    active = jnp.logical_and(
        runner.update_step < setup.config.num_updates,
        runner.nonfinite_streak < train.max_nonfinite_updates,
    )
    idle = idle_packed(metric_specs(setup))
    return jax.lax.cond(active, lambda r: update(setup, r), lambda r: (r, idle), runner)


def train_chunk(setup: Setup, runner: RunnerState) -> tuple[RunnerState, dict[str, jax.Array]]:
    """``chunk_updates`` guarded updates in one ``lax.scan``, metrics reduced in-graph."""
    runner, metrics = jax.lax.scan(
        lambda r, _: guarded_update(setup, r), runner, None, length=setup.config.chunk_updates
    )
    return runner, reduce_packed(metric_specs(setup), metrics)


def population_update(
    setup: Setup, spec: pbt.PBTSpec, runner: RunnerState
) -> tuple[RunnerState, tuple[Scalar, Scalar]]:
    """Every member's guarded update (vmapped), then the PBT step on the population.

    Returns the runner (leaves ``[R, ...]``) and the packed metrics ``[R, M]`` of the
    update and of PBT.
    """
    population = runner.features[PBT]
    members = runner.replace(features=_without_pbt(runner.features))
    before = members.update_step
    members, packed = jax.vmap(lambda r: guarded_update(setup, r))(members)
    population, members, metrics = pbt.population_step(
        spec,
        population,
        members,
        members.update_step > before,
        packed,
        replica_axis=setup.layout.axis,
    )
    runner = members.replace(features={**members.features, PBT: population})
    return runner, (packed, pack(pbt.metric_specs(members.hyper), metrics))


def train_population_chunk(
    setup: Setup, spec: pbt.PBTSpec, runner: RunnerState
) -> tuple[RunnerState, dict[str, jax.Array]]:
    """:func:`train_chunk` for a population with PBT: metrics ``[R]`` per tag, PBT's too."""
    runner, (packed, pbt_packed) = jax.lax.scan(
        lambda r, _: population_update(setup, spec, r),
        runner,
        None,
        length=setup.config.chunk_updates,
    )

    def per_member(specs, stacked):  # [K, R, M] -> {tag: [R]}
        return jax.vmap(lambda p: reduce_packed(specs, p), in_axes=1)(stacked)

    pbt_specs = pbt.metric_specs(runner.hyper)
    return runner, {**per_member(metric_specs(setup), packed), **per_member(pbt_specs, pbt_packed)}


def make_train_step(
    setup: Setup,
) -> Callable[[RunnerState], tuple[RunnerState, dict[str, jax.Array]]]:
    """The jitted chunk function; the runner state passed in is donated.

    With several members (seeds, sweep points) it is vmapped over their leading ``[R]``
    axis, and every metric is ``[R]``; with PBT the scan runs over the vmapped update and
    the PBT step (:func:`train_population_chunk`). With a mesh it is a ``shard_map`` over
    the devices.
    """
    spec = pbt_spec(setup)
    if spec is not None:
        chunk = lambda runner: train_population_chunk(setup, spec, runner)  # noqa: E731
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
