"""Builds a run from a :class:`Config`: env, network, optimizer, features (one direction).

``config -> make_setup -> Setup -> jaxrl.run.runner / jaxrl.run.train_step``: the :class:`Setup` is
the built run the train step closes over; nothing it builds calls back into the step. The
compiled step reads the config only through the narrow :class:`StepSpec`; the PPO core never
sees the setup whole (the update gets its :class:`~jaxrl.core.ppo.UpdateSpec`, the rollout the few
properties of :class:`~jaxrl.core.rollout.RolloutSpec`). The features come from the one registry
below (:data:`FEATURES`, a :class:`~jaxrl.features.Registration` each): first their layout
needs (opponent groups, per-env params) shape the env batch's :class:`Layout`; then the
per-member features are built, in the order their own declarations imply
(:func:`jaxrl.features.order_features`), then learner features, then population features.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh

from jaxrl import envs
from jaxrl.config import Config, ConfigError
from jaxrl.core import prng
from jaxrl.core.acting import PolicySpec
from jaxrl.core.encoders import plan_encoders
from jaxrl.core.hyper import Hyper, Members, base_hyper, make_members
from jaxrl.core.layout import DATA_AXIS, Layout, OpponentGroups, make_layout
from jaxrl.core.losses import LOSS_TAGS, LossHyperparams
from jaxrl.core.match import MatchSpec
from jaxrl.core.metrics import MetricSpec
from jaxrl.core.networks import ActorCritic
from jaxrl.core.ppo import LearnSpec, UpdateSpec
from jaxrl.core.precision import compute_dtype
from jaxrl.envs import protocols
from jaxrl.features import (
    BuildContext,
    Feature,
    LayoutNeeds,
    LearnerFeature,
    PopulationFeature,
    Registration,
    curriculum,
    eval_lanes,
    merge_needs,
    order_features,
    pbt,
)
from jaxrl.features.curriculum import CurriculumSpec
from jaxrl.league import exploiters, population
from jaxrl.league import feature as selfplay

# Every feature a run may have, one line each (adding a feature is its module and a line here).
# Within a kind the order breaks ties only: per-member features plan in the order their
# ``after``/``reads`` declarations imply. Population features run in this order: PBT first,
# so the league sees PBT's copies in the members' rosters (jaxrl.league.population).
FEATURES: tuple[Registration, ...] = (
    curriculum.REGISTRATION,
    selfplay.REGISTRATION,
    eval_lanes.REGISTRATION,
    exploiters.REGISTRATION,
    pbt.REGISTRATION,
    population.REGISTRATION,  # the population league
)


@dataclasses.dataclass(frozen=True)
class StepSpec:
    """What the compiled step reads of the config (static numbers and switches)."""

    num_updates: int  # the run's updates; the step idles past them
    chunk_updates: int  # updates per compiled chunk (one lax.scan)
    max_nonfinite_updates: int  # the step idles after this many non-finite updates in a row
    sequence_length: int  # L: steps per training sequence (T without a recurrent core)
    normalize_obs: bool  # the learner normalises observations with running moments
    num_steps: int  # T: steps per rollout
    rollout_chunk: int  # steps per chunk whose start hidden state is kept (T without a core)
    reward_scale: float  # training rewards are the env's times this


@dataclasses.dataclass(frozen=True, eq=False)
class Setup:
    """The built run: static pieces the compiled step closes over; hashed by identity.

    ``config`` is kept for the host side (summary, loggers, evaluation, the builders); the
    compiled step reads ``step`` and the narrow specs instead, never ``config``.
    """

    config: Config
    env: Any  # wrapped env: EpisodeStatistics(ActionRepeat?(gymnax env))
    env_params: Any  # EnvParams pytree
    network: nn.Module
    optimizer: optax.GradientTransformation
    loss_hp: LossHyperparams  # static loss switches; the member's Hyper is set in-graph
    discrete: bool
    obs_shape: tuple[int, ...]  # one actor's observation
    action_shape: tuple[int, ...]  # () discrete, (A,) continuous
    compute_dtype: Any
    outcome_names: tuple[str, ...]  # keys of the env's info["episode_outcome"], if any
    layout: Layout  # the env batch: training envs, evaluation lanes, opponent groups
    policy: PolicySpec  # what acting needs of the network
    match: MatchSpec  # what the match step needs
    features: tuple[Feature, ...]  # per-member features (curriculum, self-play, eval lanes)
    members: Members  # seeds and sweep points trained together (vmapped when more than one)
    mesh: Any  # jax Mesh over the devices the env batch is sharded over; None on one device
    update_spec: UpdateSpec  # what the PPO update needs (network, optimizer, epochs)
    step: StepSpec  # what the compiled step reads of the config
    learn: LearnSpec  # what one PPO update on a trajectory batch needs (jaxrl.core.ppo.learn)
    hyper: Hyper  # the config's own per-member values (float32 numpy scalars)
    reward_term_names: tuple[str, ...] = ()  # keys of the env's info["reward_terms"], if any
    learner_features: tuple[LearnerFeature, ...] = ()  # act after the learner's update
    population_features: tuple[PopulationFeature, ...] = ()  # act on the members [R]

    # What the rollout reads (jaxrl.core.rollout.RolloutSpec), from the step spec.
    @property
    def num_steps(self) -> int:
        """``T``: steps per rollout."""
        return self.step.num_steps

    @property
    def rollout_chunk(self) -> int:
        """Steps per chunk whose start hidden state is kept (``T`` without a core)."""
        return self.step.rollout_chunk

    @property
    def normalize_obs(self) -> bool:
        """The learner normalises observations with running moments."""
        return self.step.normalize_obs

    @property
    def reward_scale(self) -> float:
        """Training rewards are the env's times this."""
        return self.step.reward_scale

    @property
    def vmapped_members(self) -> bool:
        """Several members train in one vmapped step."""
        return self.members.count > 1

    @property
    def curriculum(self) -> CurriculumSpec | None:
        """The curriculum's stages, or None without a curriculum."""
        for feature in self.features:
            if feature.name == "curriculum":
                return feature.spec
        return None

    @property
    def exploiters(self) -> Any:
        """The league's exploiters (:class:`jaxrl.league.exploiters.ExploiterSpec`) or None;
        for host-side tools and tests (the step sees only ``learner_features``)."""
        for feature in self.learner_features:
            if feature.name == "exploiters":
                return feature.spec
        return None


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
    """Every metric one member's update packs: the core's, then each feature's and each
    learner feature's declarations, in the order the step calls them."""
    specs = core_metric_specs(setup.outcome_names, setup.reward_term_names)
    for feature in (*setup.features, *setup.learner_features):
        specs += feature.metric_specs()
    return specs


def core_unroll(config: Config) -> int:
    """The recurrent core's scan unroll: ``network.core_unroll``, or for 0 (auto) 1 on a CPU and
    the whole training sequence on a GPU or TPU.

    On a GPU a rolled loop copies its carried state between iterations (the largest item of a
    GRU's profile), so unrolling trains faster; on a CPU the rolled loop is as fast and
    compiles sooner. Figures: docs/results/speed.md#on-one-gpu.
    """
    if config.network.core_unroll:
        return config.network.core_unroll
    return 1 if jax.default_backend() == "cpu" else config.sequence_length


def learning_rate_schedule(config: Config) -> optax.Schedule:
    """The fraction of the learning rate in use: 1, or PureJaxRL's linear decay (constant
    within an update, 0 at the end). The train step multiplies it by the member's traced
    ``Hyper.lr``."""
    ppo = config.ppo
    if not ppo.anneal_lr:
        return optax.constant_schedule(1.0)
    steps_per_update = ppo.update_epochs * ppo.num_minibatches

    def schedule(count):
        return 1.0 - (count // steps_per_update) / config.num_updates

    return schedule


def make_optimizer(config: Config) -> optax.GradientTransformation:
    """Adam with global-norm clipping at a unit learning rate times the annealing fraction;
    the train step scales the step by the member's learning rate. Non-finite steps are
    skipped and counted by optax.

    ``apply_if_finite`` is outermost, so a skipped step leaves Adam's moments and step
    count untouched. Its own give-up limit is disabled (huge): the train step counts
    non-finite updates itself and the host stops training.
    """
    ppo = config.ppo
    inner = optax.chain(
        optax.clip_by_global_norm(ppo.max_grad_norm),
        optax.inject_hyperparams(optax.adam)(
            learning_rate=learning_rate_schedule(config), eps=ppo.adam_eps
        ),
    )
    return optax.apply_if_finite(inner, max_consecutive_errors=2**30)


def current_learning_rate(opt_state) -> Any:
    """The annealing fraction the next optimizer step uses (from ``inject_hyperparams``).

    Found by name with optax's tree utilities; the array filter skips the schedule's own
    ``learning_rate`` entry, which is a function.
    """
    return optax.tree_utils.tree_get(
        opt_state, "learning_rate", filtering=lambda _, value: isinstance(value, jax.Array)
    )


def make_setup(config: Config) -> Setup:
    """Build the run of ``config``: env (with wrappers), network, optimizer, features.

    Also installs the loop-free CPU lowering of the PRNG hash (:mod:`jaxrl.core.prng`; same bits).
    """
    prng.install()
    env, env_params, discrete = make_env(config)
    devices = mesh_devices(config)
    layout = features_layout(config, env, len(devices))
    obs_shape, action_shape, action_dim = spaces(env, env_params, layout, discrete)
    dtype = compute_dtype(config.precision)
    network = make_network(config, env, obs_shape, action_dim, discrete, dtype)
    names = outcome_names(env, env_params)
    policy = PolicySpec(network=network, discrete=discrete, normalize_obs=config.env.normalize_obs)
    context = BuildContext(
        config=config, layout=layout, env=env, env_params=env_params, outcome_names=names
    )
    built = (entry.build(context) for entry in registered("member"))
    optimizer = make_optimizer(config)
    update_spec = make_update_spec(config, network, discrete, optimizer)
    loss_hp = loss_switches(config, layout, env)
    setup = Setup(
        config=config,
        env=env,
        env_params=env_params,
        network=network,
        optimizer=optimizer,
        loss_hp=loss_hp,
        discrete=discrete,
        obs_shape=obs_shape,
        action_shape=action_shape,
        compute_dtype=jnp.dtype(dtype),
        outcome_names=names,
        reward_term_names=reward_term_names(env, env_params),
        layout=layout,
        policy=policy,
        match=MatchSpec(
            env=env,
            policy=policy,
            layout=layout,
            deterministic=False,
            eval_deterministic=config.evaluation.deterministic,
        ),
        features=order_features([feature for feature in built if feature is not None]),
        members=make_members(config),
        mesh=Mesh(np.asarray(devices), (DATA_AXIS,)) if len(devices) > 1 else None,
        update_spec=update_spec,
        step=make_step_spec(config),
        learn=LearnSpec(
            update=update_spec,
            loss=loss_hp,
            sequence_length=config.sequence_length,
            normalize_obs=config.env.normalize_obs,
        ),
        hyper=base_hyper(config),
    )
    return with_outer_features(setup)


def declared(setup: Setup, names: tuple[str, ...]) -> dict[str, Any]:
    """The built member features among ``names`` (a registration's ``reads``), by name."""
    return {feature.name: feature for feature in setup.features if feature.name in names}


def registered(kind: str) -> tuple[Registration, ...]:
    """The registry's features of ``kind`` (member, learner, population), in its order."""
    return tuple(entry for entry in FEATURES if entry.kind == kind)


def features_layout(config: Config, env: Any, devices: int) -> Layout:
    """One device's layout of the env batch, with what the registered features need of it."""
    needs = layout_needs(config, config.env.num_envs // devices)
    groups = needs.opponents or OpponentGroups()
    return make_layout(config, env, devices, groups, needs.per_env_params, needs.measured_envs)


def layout_needs(config: Config, num_envs: int) -> LayoutNeeds:
    """What the registered features need of the layout of one device's ``num_envs``
    training envs (:class:`jaxrl.features.LayoutNeeds`), merged."""
    return merge_needs([entry.layout(config, num_envs) for entry in FEATURES if entry.layout])


def with_outer_features(setup: Setup) -> Setup:
    """``setup`` with its learner features, then its population features (which read what
    the members' update packs, learner features included)."""
    learner = (entry.build(setup, declared(setup, entry.reads)) for entry in registered("learner"))
    setup = dataclasses.replace(setup, learner_features=tuple(f for f in learner if f))
    tags = [spec.tag for spec in metric_specs(setup)]
    population = (entry.build(setup, tags) for entry in registered("population"))
    return dataclasses.replace(setup, population_features=tuple(f for f in population if f))


def make_env(config: Config) -> tuple[Any, Any, bool]:
    """``(env, env_params, discrete)``: the registered env in the run's wrappers."""
    env, env_params = envs.make(
        config.env.name, make_kwargs=config.env.make_kwargs, **config.env.kwargs
    )
    discrete = envs.is_discrete(env, env_params)
    if config.env.action_repeat > 1:
        env = envs.ActionRepeat(env, config.env.action_repeat)
    return envs.EpisodeStatistics(env), env_params, discrete


def spaces(
    env: Any, env_params: Any, layout: Layout, discrete: bool
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """``(obs_shape, action_shape, action_dim)`` of one actor."""
    obs_shape = tuple(env.observation_space(env_params).shape)
    if layout.num_agents > 1:
        obs_shape = obs_shape[1:]  # [A, *obs_shape] per env: one row per agent
    space = env.action_space(env_params)
    if discrete:
        return obs_shape, (), int(space.n)
    action_shape = tuple(space.shape) or (1,)
    return obs_shape, action_shape, int(np.prod(action_shape))


def make_network(
    config: Config, env: Any, obs_shape: tuple[int, ...], action_dim: int, discrete: bool, dtype
) -> ActorCritic:
    """The actor-critic of ``network:`` for one actor's observation: image observations (or
    image leaves of a structured one) get the CNN of ``network.encoder`` before each torso."""
    encoders = plan_encoders(
        config.network.encoder, obs_shape, protocols.observation_leaves(env), config.env.name
    )
    return ActorCritic(
        action_dim=action_dim,
        discrete=discrete,
        hidden_sizes=tuple(config.network.hidden_sizes),
        activation=config.network.activation,
        shared_torso=config.network.shared_torso,
        core=config.network.core,
        core_size=config.network.core_size,
        core_unroll=core_unroll(config),
        dtype=dtype,
        obs_ndim=len(obs_shape),
        entities=protocols.entity_layout(env),
        entity_width=config.network.entity_width,
        encoders=encoders,
        cnn_channels=tuple(config.network.cnn_channels),
    )


def loss_switches(config: Config, layout: Layout, env: Any) -> LossHyperparams:
    """The loss's static switches; its coefficients are the member's ``Hyper``, set in-graph
    (the config's own until then). The loss weighs rows by a mask where several actors share
    an env (empty slots) and where the env is turn-based (each row's own moves)."""
    ppo = config.ppo
    return LossHyperparams(
        values=base_hyper(config),
        clip_value=ppo.clip_value,
        normalize_advantages=ppo.normalize_advantages,
        masked=layout.actors_per_env > 1 or protocols.turn_based(env) is not None,
        axis=layout.axis,
    )


def make_update_spec(config: Config, network, discrete: bool, optimizer) -> UpdateSpec:
    """What the PPO update needs of the run."""
    return UpdateSpec(
        network=network,
        discrete=discrete,
        optimizer=optimizer,
        update_epochs=config.ppo.update_epochs,
        num_minibatches=config.ppo.num_minibatches,
    )


def make_step_spec(config: Config) -> StepSpec:
    """What the compiled step reads of ``config``."""
    return StepSpec(
        num_updates=config.num_updates,
        chunk_updates=config.chunk_updates,
        max_nonfinite_updates=config.train.max_nonfinite_updates,
        sequence_length=config.sequence_length,
        normalize_obs=config.env.normalize_obs,
        num_steps=config.ppo.num_steps,
        rollout_chunk=(
            config.ppo.num_steps if config.network.core == "none" else config.sequence_length
        ),
        reward_scale=config.ppo.reward_scale,
    )


def mesh_devices(config: Config) -> list:
    """The devices the env batch is sharded over: ``mesh.devices`` of every process's."""
    devices = jax.devices()
    wanted = config.mesh.devices
    if wanted == "all":
        return devices
    if wanted > len(devices):
        raise ConfigError(f"mesh.devices: {wanted} devices asked for, {len(devices)} available")
    return devices[:wanted]


def reward_term_names(env: Any, env_params: Any) -> tuple[str, ...]:
    """Keys of ``info["reward_terms"]`` (traced abstractly, no compute)."""
    _, (*_, info) = envs.abstract_step(env, env_params)
    return tuple(sorted(info.get("reward_terms", {})))


def outcome_names(env: Any, env_params: Any) -> tuple[str, ...]:
    """Keys of ``info["episode_outcome"]`` (traced abstractly, no compute)."""
    _, (*_, info) = envs.abstract_step(env, env_params)
    return tuple(sorted(info.get("episode_outcome", {})))
