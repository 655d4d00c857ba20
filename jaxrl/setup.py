"""Builds the static pieces of a run (env, network, optimizer, features) from a :class:`Config`.

The :class:`Setup` is what the train step closes over. The PPO core never sees it whole: the
update gets its :class:`~jaxrl.ppo.UpdateSpec` and the rollout reads the few properties of
:class:`~jaxrl.rollout.RolloutSpec`. The features come from :data:`FEATURE_BUILDERS`, in the
order their own declarations imply (:func:`jaxrl.features.order_features`).
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

import envs
from envs import protocols
from jaxrl import prng
from jaxrl.acting import PolicySpec
from jaxrl.config import Config, ConfigError
from jaxrl.curriculum import CurriculumSpec, make_curriculum, stage_params
from jaxrl.eval_lanes import make_eval_lanes
from jaxrl.features import BuildContext, Feature, order_features
from jaxrl.hyper import Members, make_members
from jaxrl.layout import DATA_AXIS, Layout, make_layout
from jaxrl.league import exploiters as league_exploiters
from jaxrl.league.feature import SelfPlay, make_selfplay
from jaxrl.league.groups import group_sizes
from jaxrl.league.lanes import RESULT_NAMES
from jaxrl.losses import LossHyperparams
from jaxrl.match import MatchSpec
from jaxrl.networks import ActorCritic
from jaxrl.ppo import UpdateSpec
from jaxrl.precision import compute_dtype

# Every feature a run may have: ``builder(BuildContext)`` returns the feature or None. The
# order here only breaks ties: the features' ``after`` declarations decide who plans first.
FEATURE_BUILDERS = (make_curriculum, make_selfplay, make_eval_lanes)


@dataclasses.dataclass(frozen=True, eq=False)
class Setup:
    """Static pieces the compiled step closes over; hashed by identity (``eq=False``)."""

    config: Config
    env: Any  # wrapped env: EpisodeStatistics(ActionRepeat?(gymnax env))
    env_params: Any  # EnvParams pytree
    network: nn.Module
    optimizer: optax.GradientTransformation
    loss_hp: LossHyperparams
    discrete: bool
    obs_shape: tuple[int, ...]  # one actor's observation
    action_shape: tuple[int, ...]  # () discrete, (A,) continuous
    compute_dtype: Any
    outcome_names: tuple[str, ...]  # keys of the env's info["episode_outcome"], if any
    layout: Layout  # the env batch: training envs, evaluation lanes, opponent groups
    policy: PolicySpec  # what acting needs of the network
    match: MatchSpec  # what the match step needs
    features: tuple[Feature, ...]  # curriculum, self-play, evaluation lanes (those configured)
    members: Members  # seeds and sweep points trained together (vmapped when more than one)
    mesh: Any  # jax Mesh over the devices the env batch is sharded over; None on one device
    update_spec: UpdateSpec  # what the PPO update needs (network, optimizer, epochs)
    reward_term_names: tuple[str, ...] = ()  # keys of the env's info["reward_terms"], if any
    # jaxrl.league.exploiters.ExploiterSpec: the league's exploiters, or None without them
    exploiters: Any = None

    # What the rollout reads (jaxrl.rollout.RolloutSpec), from the config.
    @property
    def num_steps(self) -> int:
        """``T``: steps per rollout."""
        return self.config.ppo.num_steps

    @property
    def rollout_chunk(self) -> int:
        """Steps per chunk whose start hidden state is kept (``T`` without a core)."""
        if self.config.network.core == "none":
            return self.config.ppo.num_steps
        return self.config.sequence_length

    @property
    def normalize_obs(self) -> bool:
        """The learner normalises observations with running moments."""
        return self.config.env.normalize_obs

    @property
    def reward_scale(self) -> float:
        """Training rewards are the env's times this."""
        return self.config.ppo.reward_scale

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


def core_unroll(config: Config) -> int:
    """The recurrent core's scan unroll: ``network.core_unroll``, or for 0 (auto) 1 on a CPU and
    the whole training sequence on a GPU or TPU.

    On one H100 (2026-11-26, ``bench/RESULTS.md``) unrolling CartPole's GRU-128 over its
    16-step sequences took training from 8.08M to 11.3M steps/s: a rolled loop copies its
    carried state between iterations (1,220 device-to-device copies per update, the largest
    item of the profile). On a CPU the rolled loop is as fast and compiles sooner.
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
    """Build env (with wrappers), network and optimizer for ``config``.

    Also installs the loop-free CPU lowering of the PRNG hash (:mod:`jaxrl.prng`; same bits).
    """
    prng.install()
    env, env_params = envs.make(config.env.name, **config.env.kwargs)
    discrete = envs.is_discrete(env, env_params)
    if config.env.action_repeat > 1:
        env = envs.ActionRepeat(env, config.env.action_repeat)
    env = envs.EpisodeStatistics(env)
    devices = mesh_devices(config)
    groups = group_sizes(config.selfplay, config.env.num_envs // len(devices))
    layout = make_layout(config, env, groups, len(devices))
    obs_shape = tuple(env.observation_space(env_params).shape)
    if layout.num_agents > 1:
        obs_shape = obs_shape[1:]  # [A, *obs_shape] per env: one row per agent
    space = env.action_space(env_params)
    if discrete:
        action_dim, action_shape = int(space.n), ()
    else:
        action_shape = tuple(space.shape) or (1,)
        action_dim = int(np.prod(action_shape))
    dtype = compute_dtype(config.precision)
    network = ActorCritic(
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
    )
    ppo = config.ppo
    names = outcome_names(env, env_params)
    if layout.selfplay and not all(name in names for name in RESULT_NAMES):
        raise ValueError(
            f"self-play needs {config.env.name} to report win/draw/loss in info['episode_outcome']"
        )
    policy = PolicySpec(network=network, discrete=discrete, normalize_obs=config.env.normalize_obs)
    context = BuildContext(
        config=config, layout=layout, env=env, env_params=env_params, outcome_names=names
    )
    built = (build(context) for build in FEATURE_BUILDERS)
    features = order_features([feature for feature in built if feature is not None])
    optimizer = make_optimizer(config)
    setup = Setup(
        config=config,
        env=env,
        env_params=env_params,
        network=network,
        optimizer=optimizer,
        loss_hp=LossHyperparams(  # coefficients are replaced by the member's Hyper in-graph
            clip_eps=ppo.clip_eps,
            vf_coef=ppo.vf_coef,
            ent_coef=ppo.ent_coef,
            clip_value=ppo.clip_value,
            normalize_advantages=ppo.normalize_advantages,
            masked=layout.actors_per_env > 1,
            axis=layout.axis,
        ),
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
        features=features,
        members=make_members(config),
        mesh=Mesh(np.asarray(devices), (DATA_AXIS,)) if len(devices) > 1 else None,
        update_spec=UpdateSpec(
            network=network,
            discrete=discrete,
            optimizer=optimizer,
            update_epochs=ppo.update_epochs,
            num_minibatches=ppo.num_minibatches,
        ),
    )
    return dataclasses.replace(setup, exploiters=exploiter_spec(setup))


def exploiter_spec(setup: Setup) -> league_exploiters.ExploiterSpec | None:
    """The run's exploiters (None without ``selfplay.exploiters``): one exploiter's setup is
    the learner's on its own env batch (:func:`jaxrl.league.exploiters.exploiter_layout`),
    with the target as its only feature.

    With a curriculum, the exploiters play its last stage's env params (the task it leads
    to) and train only while the learner's stage has self-play on. ``selfplay.exploiter_env``
    overrides sit on top (checked at load: :func:`jaxrl.config.selfplay.validate_env`)."""
    config = setup.config.selfplay
    if not config.exploiters:
        return None
    layout = league_exploiters.exploiter_layout(setup.layout, config)
    curriculum = setup.curriculum
    env_params = setup.env_params
    active_stages = None
    if curriculum is not None:
        last = jnp.asarray(curriculum.num_stages - 1, jnp.int32)
        env_params = jax.device_get(stage_params(curriculum, setup.env_params, last))
        switch = curriculum.switches.get(SelfPlay.name)
        active_stages = np.ones(curriculum.num_stages, bool) if switch is None else switch
    env_params = envs.override_params(env_params, config.exploiter_env)
    own = dataclasses.replace(
        setup,
        env_params=env_params,
        layout=layout,
        match=dataclasses.replace(setup.match, layout=layout),
        features=(league_exploiters.ExploiterTarget(config=config, layout=layout),),
        mesh=None,
        exploiters=None,
    )
    names = () if curriculum is None else curriculum.names
    return league_exploiters.make_spec(config, own, active_stages, names)


def mesh_devices(config: Config) -> list:
    """The devices the env batch is sharded over: ``mesh.devices`` of every process's."""
    devices = jax.devices()
    wanted = config.mesh.devices
    if wanted == "all":
        return devices
    if wanted > len(devices):
        raise ConfigError(f"mesh.devices: {wanted} devices asked for, {len(devices)} available")
    return devices[:wanted]


def init_params(setup: Setup, key: jax.Array) -> Any:
    """Freshly initialised network params (float32), traced on a one-step dummy sequence."""
    return setup.network.init(
        key,
        setup.network.initial_hidden(1),
        jnp.zeros((1, 1) + setup.obs_shape, jnp.float32),
        jnp.ones((1, 1), bool),
    )


def reward_term_names(env: Any, env_params: Any) -> tuple[str, ...]:
    """Keys of ``info["reward_terms"]`` (traced abstractly, no compute)."""
    _, (*_, info) = envs.abstract_step(env, env_params)
    return tuple(sorted(info.get("reward_terms", {})))


def outcome_names(env: Any, env_params: Any) -> tuple[str, ...]:
    """Keys of ``info["episode_outcome"]`` (traced abstractly, no compute)."""
    _, (*_, info) = envs.abstract_step(env, env_params)
    return tuple(sorted(info.get("episode_outcome", {})))
