"""Registry, gymnax 1.0 contract, EpisodeStatistics and ActionRepeat."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.wrappers.purerl import GymnaxWrapper

from bench.hlo_audit import UNOPTIMIZED_CODEGEN
from jaxrl import envs
from jaxrl.envs import ActionRepeat, EpisodeStatistics, protocols

CONTRACT_ENVS = ["CartPole-v1", "Pendulum-v1", "Acrobot-v1", "Breakout-MinAtar"]
# Every registered env meets the contract, except one that needs the network to be built.
NEEDS_DOWNLOAD = {"MNISTBandit-bsuite": "downloads MNIST when built; CI has no network"}
ALL_ENVS = [
    pytest.param(name, marks=pytest.mark.skip(reason=NEEDS_DOWNLOAD[name]))
    if name in NEEDS_DOWNLOAD
    else name
    for name in envs.registered_envs()
]
NUM_ENVS = 3
NUM_STEPS = 4

# One instance of each env for the whole module: env params are traced leaves, so runs with
# different params (e.g. max_steps_in_episode) share one compilation.
_ENVS = {}


def _make(name, **overrides):
    if name not in _ENVS:
        _ENVS[name] = envs.make(name)[0]
    return _ENVS[name], envs.make(name, **overrides)[1]


@functools.cache
def _with_stats(env):
    """One EpisodeStatistics wrapper per env, so its rollouts share a compilation."""
    return EpisodeStatistics(env)


@functools.cache
def _runner(env, num_envs, num_steps, action):
    """Jit'd ``run(params, key)``: vmapped reset + ``num_steps`` steps in one ``lax.scan``.

    ``action``: a fixed action for every env and step, or None to sample uniformly.
    """

    @jax.jit
    def run(params, key):
        key, key_reset = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(key_reset, num_envs), params
        )

        def body(state, key):
            key_act, key_step = jax.random.split(key)
            agents = protocols.num_agents(env)  # multi-agent: one action a slot
            shape = (num_envs, agents) if agents > 1 else (num_envs,)
            if action is None:
                sample = env.action_space(params).sample
                actions = jax.vmap(sample)(jax.random.split(key_act, num_envs * agents))
                actions = actions.reshape(shape + actions.shape[1:])
            else:
                actions = jnp.full(shape, action)
            obs, state, reward, terminated, truncated, info = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(key_step, num_envs), state, actions, params)
            return state, (obs, reward, terminated, truncated, info)

        state, outs = jax.lax.scan(body, state, jax.random.split(key, num_steps))
        return obs, state, outs

    return run


def _rollout(env, params, num_envs, num_steps, key, action=None, compiler_options=None):
    """Returns ``(obs0 [B, ...], final state, outs)`` as numpy, where ``outs`` is
    ``(obs, reward, terminated, truncated, info)`` stacked to ``[num_steps, B, ...]``.

    ``compiler_options``: XLA options of a one-off compile (e.g. ``UNOPTIMIZED_CODEGEN``).
    """
    run = _runner(env, num_envs, num_steps, action)
    if compiler_options is not None:
        run = run.lower(params, key).compile(compiler_options)
    return jax.device_get(run(params, key))


# ---- registry ------------------------------------------------------------------------------


def test_registered_envs_lists_gymnax_names():
    names = envs.registered_envs()
    assert isinstance(names, list) and names == sorted(names)
    for name in CONTRACT_ENVS:
        assert name in names


def test_make_returns_env_and_default_params():
    env, params = envs.make("CartPole-v1")
    assert params.max_steps_in_episode == 500
    assert env.name == "CartPole-v1"


def test_make_applies_overrides():
    _, default = envs.make("CartPole-v1")
    _, params = envs.make("CartPole-v1", max_steps_in_episode=5, gravity=3.0)
    assert params.max_steps_in_episode == 5
    assert params.gravity == 3.0
    assert params.force_mag == default.force_mag


def test_make_unknown_override_names_it():
    with pytest.raises(ValueError, match="not_a_param"):
        envs.make("CartPole-v1", not_a_param=1)


def test_make_unknown_env_names_it():
    with pytest.raises(ValueError, match="NoSuchEnv-v0"):
        envs.make("NoSuchEnv-v0")


@pytest.mark.parametrize(
    ("name", "discrete"),
    [
        ("CartPole-v1", True),
        ("Acrobot-v1", True),
        ("Breakout-MinAtar", True),
        ("Pendulum-v1", False),
    ],
)
def test_is_discrete(name, discrete):
    env, params = envs.make(name)
    assert envs.is_discrete(env, params) is discrete


# ---- gymnax 1.0 contract --------------------------------------------------------------------


def _check_contract(env, params, outs, obs0):
    obs_shape = env.observation_space(params).shape
    # float32, or uint8 for byte grids (MettaArena); the trainer casts at the policy input.
    assert obs0.shape == (NUM_ENVS, *obs_shape) and obs0.dtype in (jnp.float32, jnp.uint8)
    if obs0.dtype == jnp.uint8:  # a byte grid says so in its space (gymnax's may not)
        assert env.observation_space(params).dtype == jnp.uint8
    assert np.all(np.isfinite(obs0))
    obs, reward, terminated, truncated, info = outs
    assert obs.shape == (NUM_STEPS, NUM_ENVS, *obs_shape) and obs.dtype == obs0.dtype
    assert np.all(np.isfinite(obs))
    agents = protocols.num_agents(env)
    per_env = (NUM_STEPS, NUM_ENVS) + ((agents,) if agents > 1 else ())
    assert reward.shape == per_env and reward.dtype == jnp.float32
    assert np.all(np.isfinite(reward))
    assert terminated.shape == (NUM_STEPS, NUM_ENVS) and terminated.dtype == jnp.bool_
    assert truncated.shape == (NUM_STEPS, NUM_ENVS) and truncated.dtype == jnp.bool_
    final_obs = info["final_observation"]
    assert final_obs.shape == obs.shape and np.all(np.isfinite(final_obs))


@pytest.mark.parametrize("name", ALL_ENVS)
def test_contract(name):
    env, params = _make(name)
    assert isinstance(env, protocols.Env)
    # Shapes, dtypes and finite values only: compiled without LLVM's optimisation, which would
    # cost seconds per env here (one after another; docs/results/ci.md#how-the-tests-compile).
    obs0, _, outs = _rollout(
        env, params, NUM_ENVS, NUM_STEPS, jax.random.key(0), compiler_options=UNOPTIMIZED_CODEGEN
    )
    _check_contract(env, params, outs, obs0)


@pytest.fixture(scope="module")
def repeat_stats_rollout():
    """EpisodeStatistics(ActionRepeat(CartPole, 3)), 4-step limit, random actions."""
    env, params = _make("CartPole-v1", max_steps_in_episode=4)
    env = EpisodeStatistics(ActionRepeat(env, 3))
    obs0, _, outs = _rollout(env, params, NUM_ENVS, NUM_STEPS, jax.random.key(5))
    return env, params, obs0, outs


def test_contract_wrapped(repeat_stats_rollout):
    env, params, obs0, outs = repeat_stats_rollout
    _check_contract(env, params, outs, obs0)
    _, _, terminated, truncated, info = outs
    assert info["episode_done"].dtype == jnp.bool_
    np.testing.assert_array_equal(info["episode_done"], terminated | truncated)
    assert info["episode_return"].dtype == jnp.float32
    assert info["episode_length"].dtype == jnp.int32


# ---- EpisodeStatistics ----------------------------------------------------------------------


def test_episode_statistics_truncation():
    env, params = _make("CartPole-v1", max_steps_in_episode=5)
    env = _with_stats(env)
    _, state, outs = _rollout(env, params, 2, 12, jax.random.key(1), action=1)
    _, rewards, terminated, truncated, info = outs
    # Five steps of pushing right never topple the pole: every end is the time limit.
    want_done = np.zeros((12, 2), bool)
    want_done[[4, 9]] = True
    np.testing.assert_array_equal(info["episode_done"], want_done)
    np.testing.assert_array_equal(truncated, want_done)
    assert not terminated.any()
    np.testing.assert_array_equal(rewards, 1.0)
    # Running counters: 1..5, reset, 1..5, reset, 1..2.
    want_len = np.array([1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2])[:, None].repeat(2, axis=1)
    np.testing.assert_array_equal(info["episode_length"], want_len)
    np.testing.assert_allclose(info["episode_return"], want_len.astype(np.float32))
    np.testing.assert_array_equal(state.episode_length, [2, 2])
    np.testing.assert_allclose(state.episode_return, [2.0, 2.0])


def test_episode_statistics_termination():
    env, params = _make("CartPole-v1")
    env = _with_stats(env)
    _, _, outs = _rollout(env, params, 2, 12, jax.random.key(2), action=1)
    _, _, terminated, truncated, info = outs
    terminated = terminated[:, 0]
    assert terminated.any(), "always pushing right should topple the pole within 12 steps"
    first = int(np.argmax(terminated))
    assert info["episode_done"][first, 0] and not truncated[first, 0]
    assert info["episode_length"][first, 0] == first + 1
    np.testing.assert_allclose(info["episode_return"][first, 0], first + 1.0)
    # Counters restart in the next episode.
    assert info["episode_length"][first + 1, 0] == 1


# ---- action shapes --------------------------------------------------------------------------


def _step_shapes(env, params, action):
    """Trace (no compute) a reset and one step of ``EpisodeStatistics(env)`` with ``action``."""
    wrapped = EpisodeStatistics(env)

    def one_step(key):
        _, state = wrapped.reset(key, params)
        return wrapped.step(key, state, action, params)

    return jax.eval_shape(one_step, jax.random.key(0))


@pytest.mark.parametrize(
    "name, good, bad, message",
    [
        (
            "MettaArena",
            jnp.zeros(24, jnp.int32),
            jnp.zeros((), jnp.int32),
            "MettaArena: expected actions of shape (24,), got ()",
        ),
        (
            "CartPole-v1",
            jnp.zeros((), jnp.int32),
            jnp.zeros(2, jnp.int32),
            "CartPole-v1: expected actions of shape (), got (2,)",
        ),
        (
            "Pendulum-v1",
            jnp.zeros(1, jnp.float32),
            jnp.zeros((), jnp.float32),
            "Pendulum-v1: expected actions of shape (1,), got ()",
        ),
    ],
)
def test_wrong_action_shape_is_a_one_line_value_error_at_trace_time(name, good, bad, message):
    env, params = _make(name)
    assert envs.action_shape(env, params) == good.shape
    _step_shapes(env, params, good)
    with pytest.raises(ValueError) as err:
        _step_shapes(env, params, bad)
    assert str(err.value) == message  # one line, raised before the env's own code runs


def test_wrapper_is_gymnax_wrapper_and_forwards_attributes():
    env, _ = _make("CartPole-v1")
    wrapped = EpisodeStatistics(ActionRepeat(env, 2))
    assert isinstance(wrapped, GymnaxWrapper)
    assert wrapped.unwrapped is env and wrapped.repeat == 2
    assert (wrapped.name, wrapped.num_actions) == (env.name, env.num_actions)


# ---- ActionRepeat ---------------------------------------------------------------------------


def _manual_steps(env, params, state, action, key, repeat):
    """Step the bare env with the same sub-keys the wrapper uses, without stopping."""
    results = []
    for key_step in jax.random.split(key, repeat):
        out = env.step(key_step, state, action, params)
        state = out[1]
        results.append(out)
    return results


def test_action_repeat_sums_rewards():
    env, params = _make("Pendulum-v1")
    wrapped = ActionRepeat(env, 3)
    key_reset, key_step = jax.random.split(jax.random.key(3))
    obs0, state = wrapped.reset(key_reset, params)
    _, env_state = env.reset(key_reset, params)
    np.testing.assert_array_equal(obs0, env.reset(key_reset, params)[0])
    action = jnp.array([1.5])
    obs, new_state, reward, terminated, truncated, _ = jax.jit(wrapped.step)(
        key_step, state, action, params
    )
    manual = _manual_steps(env, params, env_state, action, key_step, 3)
    rewards = [float(m[2]) for m in manual]
    assert len(set(rewards)) == 3  # Pendulum rewards differ per sub-step
    np.testing.assert_allclose(reward, sum(rewards), rtol=1e-5)
    np.testing.assert_allclose(obs, manual[-1][0], rtol=1e-6)
    assert int(new_state.env_state.time) == 3
    assert not bool(terminated) and not bool(truncated)


def test_action_repeat_stops_at_episode_end():
    env, params = _make("CartPole-v1", max_steps_in_episode=4)
    wrapped = ActionRepeat(env, 3)
    step = jax.jit(wrapped.step)
    key_reset, key_a, key_b = jax.random.split(jax.random.key(4), 3)
    _, state = wrapped.reset(key_reset, params)
    _, env_state = env.reset(key_reset, params)

    # First decision: three full sub-steps, reward 3, episode still running.
    obs, state, reward, terminated, truncated, _ = step(key_a, state, 1, params)
    manual = _manual_steps(env, params, env_state, 1, key_a, 3)
    np.testing.assert_allclose(reward, 3.0)
    assert not bool(terminated) and not bool(truncated)
    assert int(state.env_state.time) == 3
    np.testing.assert_allclose(obs, manual[-1][0], rtol=1e-6)

    # Second decision: the first sub-step hits the 4-step limit; the other two are skipped.
    obs, state, reward, terminated, truncated, info = step(key_b, state, 1, params)
    (m_obs, m_state, m_reward, m_term, m_trunc, m_info) = _manual_steps(
        env, params, manual[-1][1], 1, key_b, 1
    )[0]
    assert bool(m_trunc)  # the bare env's step itself truncates here
    np.testing.assert_allclose(reward, 1.0)
    assert bool(truncated) and not bool(terminated)
    # Returned obs is the auto-reset one; the pre-reset obs is in final_observation.
    np.testing.assert_allclose(obs, m_obs, rtol=1e-6)
    assert np.all(np.abs(np.asarray(obs)) <= 0.05)  # CartPole resets uniformly in +-0.05
    np.testing.assert_allclose(info["final_observation"], m_info["final_observation"], rtol=1e-6)
    assert not np.allclose(info["final_observation"], obs)
    assert int(state.env_state.time) == 0
    for got, want in zip(jax.tree.leaves(state.env_state), jax.tree.leaves(m_state), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_action_repeat_with_episode_statistics_counts_decisions(repeat_stats_rollout):
    # 4-step limit, 3 sub-steps per decision: decisions take 3, 1, 3, 1 env steps, whatever
    # the actions (CartPole cannot fall within 4 steps).
    _, _, _, outs = repeat_stats_rollout
    _, rewards, terminated, truncated, info = outs
    want_done = np.array([False, True, False, True])[:, None].repeat(NUM_ENVS, axis=1)
    np.testing.assert_array_equal(info["episode_done"], want_done)
    np.testing.assert_array_equal(truncated, want_done)
    assert not terminated.any()
    np.testing.assert_allclose(rewards, np.where(want_done, 1.0, 3.0))
    np.testing.assert_array_equal(info["episode_length"][[1, 3]], 2)  # agent decisions
    np.testing.assert_allclose(info["episode_return"][[1, 3]], 4.0)  # 3 + 1 env rewards
    np.testing.assert_array_equal(info["episode_length"][[0, 2]], 1)


def test_action_repeat_one_is_identity():
    env, params = _make("Pendulum-v1")
    key_reset, key_step = jax.random.split(jax.random.key(6))
    _, state = ActionRepeat(env, 1).reset(key_reset, params)
    got = ActionRepeat(env, 1).step(key_step, state, jnp.array([0.7]), params)
    _, env_state = env.reset(key_reset, params)
    want = _manual_steps(env, params, env_state, jnp.array([0.7]), key_step, 1)[0]
    np.testing.assert_allclose(got[0], want[0])
    np.testing.assert_allclose(got[2], want[2])


def test_action_repeat_rejects_zero():
    env, _ = envs.make("CartPole-v1")
    with pytest.raises(ValueError, match="repeat"):
        ActionRepeat(env, 0)
