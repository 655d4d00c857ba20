"""A run's runner states: initial params, the plan of a rollout, fresh matches, the members.

All initialisation lives here, in one direction: a built run (:class:`jaxrl.run.setup.Setup`) in,
a :class:`~jaxrl.core.types.RunnerState` out. Every feature's state is initialised through its own
interface (:mod:`jaxrl.features`): per-member features from the initial params, learner
features from the member's key (they build runners of their own with
:func:`init_runner_state`, handed to them), population features from the members' seeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from jaxrl.core.hyper import Hyper, member_env_params
from jaxrl.core.match import MatchPlan, idle_plan, start_matches
from jaxrl.core.types import RunnerState, RunningStats
from jaxrl.features import reads_of
from jaxrl.run.distributed import replicate
from jaxrl.run.setup import Setup


def init_params(setup: Setup, key: jax.Array) -> Any:
    """Freshly initialised network params (float32), traced on a one-step dummy sequence."""
    return setup.network.init(
        key,
        setup.network.initial_hidden(1),
        jnp.zeros((1, 1) + setup.obs_shape, jnp.float32),
        jnp.ones((1, 1), bool),
    )


def make_plan(setup: Setup, feature_states: dict, hyper: Hyper | None = None) -> MatchPlan:
    """The plan of the next rollout: the run's env params with the member's own values of
    those that vary per member (``hyper.env``), edited by each feature in turn (each handed
    the views of the features it declares in ``reads``: :func:`feature_views`)."""
    env_params = setup.env_params if hyper is None else member_env_params(setup.env_params, hyper)
    plan = idle_plan(setup.layout, env_params)
    views = feature_views(setup, feature_states)
    for feature in setup.features:
        plan = feature.plan(feature_states[feature.name], plan, reads_of(feature, views))
    return plan


def feature_views(setup: Setup, feature_states: dict) -> dict:
    """``{name: view}`` of the per-member features some feature declares in ``reads``: what
    those are handed (:meth:`jaxrl.features.Feature.view`)."""
    wanted = {name for feature in setup.features for name in feature.reads}
    return {f.name: f.view(feature_states[f.name]) for f in setup.features if f.name in wanted}


def restart_matches(setup: Setup, runner: RunnerState, key: jax.Array) -> RunnerState:
    """Every env starts a new episode under the plan of ``runner``'s feature states."""
    plan = make_plan(setup, runner.features, runner.hyper)
    return runner.replace(match=start_matches(setup.match, setup.network.initial_hidden, plan, key))


def init_runner_state(
    setup: Setup, key: jax.Array, hyper: Hyper | None = None, params=None
) -> RunnerState:
    """Fresh params, optimizer state, features and env instances for a run seeded by ``key``.

    ``hyper``: the member's values (default: the config's own). ``params``: the params
    :func:`member_params` gives for ``key`` (computed here when None). The state of the
    population features is not part of one member's (:func:`init_run` adds it).
    """
    hyper = setup.hyper if hyper is None else hyper
    key_params, key_reset, key_runner = jax.random.split(key, 3)
    params = init_params(setup, key_params) if params is None else params
    obs_stats = RunningStats.create(setup.obs_shape)
    features = {f.name: f.init(params, obs_stats) for f in setup.features}
    hyper = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), hyper)
    for feature in setup.learner_features:  # key streams of their own, folded from ``key``
        features[feature.name] = feature.init(init_runner_state, key, hyper, params)
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
    population = {f.name: f.init(members.seeds) for f in setup.population_features}
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
            out_specs=specs.replace(features=without_population(setup, specs.features)),
            check_vma=False,  # see jaxrl.run.train_step.make_train_step
        )
        # Replicated over the mesh from host values: the mesh may span several processes.
        inputs = replicate((jax.random.key_data(keys), hypers, params), setup.mesh)
        runner = jax.jit(sharded)(*inputs)
        population = {name: _replicated(state, setup.mesh) for name, state in population.items()}
    runner = runner.replace(features={**runner.features, **population})
    return as_restored(setup, runner)


def _replicated(state: Any, mesh: Any) -> Any:
    """A host pytree (typed keys allowed) replicated over ``mesh``."""
    is_key = lambda x: jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)  # noqa: E731
    data = jax.tree.map(lambda x: jax.random.key_data(x) if is_key(x) else x, state)
    data = replicate(data, mesh)  # keys as data: replicate reads host arrays
    return jax.tree.map(
        lambda x, like: jax.random.wrap_key_data(x) if is_key(like) else x, data, state
    )


def without_population(setup: Setup, features: dict) -> dict:
    """``features`` without the population features' states (one member's features)."""
    names = {feature.name for feature in setup.population_features}
    return {name: state for name, state in features.items() if name not in names}


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
    :func:`init_runner_state` (which, called without them, makes the same)."""
    return init_params(setup, jax.random.split(key, 3)[0])


def one_device(setup: Setup) -> Setup:
    """``setup`` with its env batch's layout as one device's, outside any mesh axis (its
    learner features' setups too)."""
    local = dataclasses.replace(setup.layout, axis=None, devices=1)
    return dataclasses.replace(
        setup,
        layout=local,
        match=dataclasses.replace(setup.match, layout=local),
        learner_features=tuple(f.without_mesh(one_device) for f in setup.learner_features),
    )


def runner_specs(setup: Setup) -> RunnerState:
    """Partition specs of a runner state: the match carry (env states, observations, hidden
    states) is split over the devices along its env axis, learner features' states as they
    say (:meth:`jaxrl.features.LearnerFeature.partition`); everything else is replicated."""
    axis = setup.layout.axis
    lead = (None,) if setup.members.count > 1 else ()
    # The structure of one device's runner (collectives need the mesh, shapes do not).
    runner = jax.eval_shape(lambda: init_runner_state(one_device(setup), jax.random.key(0)))
    specs = jax.tree.map(lambda _: P(), runner)
    specs = specs.replace(match=jax.tree.map(lambda _: P(*lead, axis), runner.match))
    features = dict(specs.features)
    for feature in setup.learner_features:
        features[feature.name] = feature.partition(runner.features[feature.name], lead, axis)
    for feature in setup.population_features:
        shape = jax.eval_shape(lambda f=feature: f.init(setup.members.seeds))
        features[feature.name] = jax.tree.map(lambda _: P(), shape)
    return specs.replace(features=features)
