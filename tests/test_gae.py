"""Hand-computed references for :mod:`jaxrl.core.gae` (time-major ``[T, B]``).

Each case runs with and without ``jax.jit`` (``chex.variants``) and is compared against
either literal arithmetic or a plain Python loop written here, independently of the
implementation's ``lax.scan``.
"""

from __future__ import annotations

import functools

import chex
import jax.numpy as jnp
import numpy as np
from absl.testing import parameterized

from jaxrl.core import gae as gae_lib

GAMMA = 0.5
LAMBDA = 0.5
DECAY = GAMMA * LAMBDA  # 0.25

# One env (B = 1), three steps (T = 3); numbers chosen so the arithmetic is exact in f32.
REWARDS = [1.0, 2.0, 3.0]
VALUES = [0.5, 1.0, 1.5]
LAST_VALUE = 2.0
FINAL_VALUES = [7.0, 4.0, 9.0]  # only read where truncated


def _column(xs, dtype=np.float32):
    """``[T] -> [T, 1]`` array."""
    return np.asarray(xs, dtype)[:, None]


def reference_gae(rewards, values, last_value, final_values, terminated, truncated, gamma, lam):
    """Straightforward per-env, per-step loop (float64)."""
    rewards, values, final_values = (
        np.asarray(x, np.float64) for x in (rewards, values, final_values)
    )
    last_value = np.asarray(last_value, np.float64)
    terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
    num_steps, num_envs = rewards.shape
    advantages = np.zeros((num_steps, num_envs))
    for b in range(num_envs):
        next_advantage = 0.0
        for t in reversed(range(num_steps)):
            if truncated[t, b]:
                next_value = final_values[t, b]  # s_{t+1} before the auto-reset
            elif t + 1 < num_steps:
                next_value = values[t + 1, b]
            else:
                next_value = last_value[b]
            bootstrap = 0.0 if terminated[t, b] else gamma * next_value
            delta = rewards[t, b] + bootstrap - values[t, b]
            done = terminated[t, b] or truncated[t, b]
            advantage = delta + (0.0 if done else gamma * lam * next_advantage)
            advantages[t, b] = advantage
            next_advantage = advantage
    return advantages, advantages + values


class GaeTest(chex.TestCase):
    """``bootstrap_values`` + ``gae`` against hand-computed and loop references."""

    def _run(
        self,
        rewards,
        values,
        last_value,
        final_values,
        terminated,
        truncated,
        gamma=GAMMA,
        lam=LAMBDA,
    ):
        def fn(rewards, values, last_value, final_values, terminated, truncated):
            next_values = gae_lib.bootstrap_values(values, last_value, final_values, truncated)
            return gae_lib.gae(
                rewards, values, next_values, terminated, truncated, gamma=gamma, gae_lambda=lam
            )

        return self.variant(fn)(
            jnp.asarray(rewards, jnp.float32),
            jnp.asarray(values, jnp.float32),
            jnp.asarray(last_value, jnp.float32),
            jnp.asarray(final_values, jnp.float32),
            jnp.asarray(terminated, bool),
            jnp.asarray(truncated, bool),
        )

    def _run_t3(self, terminated, truncated):
        return self._run(
            _column(REWARDS),
            _column(VALUES),
            np.asarray([LAST_VALUE], np.float32),
            _column(FINAL_VALUES),
            _column(terminated, bool),
            _column(truncated, bool),
        )

    # ---- fully hand-computed T=3, B=1 cases ------------------------------------------------

    @chex.variants(with_jit=True, without_jit=True)
    def test_hand_computed_no_episode_end(self):
        advantages, returns = self._run_t3([False] * 3, [False] * 3)
        delta0 = 1.0 + 0.5 * 1.0 - 0.5  # r_0 + gamma V_1 - V_0 = 1.0
        delta1 = 2.0 + 0.5 * 1.5 - 1.0  # r_1 + gamma V_2 - V_1 = 1.75
        delta2 = 3.0 + 0.5 * 2.0 - 1.5  # r_2 + gamma V_last - V_2 = 2.5
        a2 = delta2  # 2.5
        a1 = delta1 + 0.25 * a2  # 2.375
        a0 = delta0 + 0.25 * a1  # 1.59375
        np.testing.assert_allclose(advantages[:, 0], [a0, a1, a2], rtol=1e-6)
        np.testing.assert_allclose(returns[:, 0], [a0 + 0.5, a1 + 1.0, a2 + 1.5], rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_hand_computed_termination_zeroes_bootstrap_and_cuts_trace(self):
        advantages, _ = self._run_t3([False, True, False], [False] * 3)
        a2 = 3.0 + 0.5 * 2.0 - 1.5  # 2.5, new episode
        a1 = 2.0 + 0.0 - 1.0  # 1.0: no bootstrap, no trace from a2
        a0 = (1.0 + 0.5 * 1.0 - 0.5) + 0.25 * a1  # 1.25
        np.testing.assert_allclose(advantages[:, 0], [a0, a1, a2], rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_hand_computed_truncation_bootstraps_from_final_value(self):
        advantages, _ = self._run_t3([False] * 3, [False, True, False])
        a2 = 3.0 + 0.5 * 2.0 - 1.5  # 2.5, new episode
        a1 = 2.0 + 0.5 * 4.0 - 1.0  # 3.0: bootstrap from FINAL_VALUES[1], not VALUES[2]
        a0 = (1.0 + 0.5 * 1.0 - 0.5) + 0.25 * a1  # 1.75
        np.testing.assert_allclose(advantages[:, 0], [a0, a1, a2], rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_hand_computed_terminated_and_truncated_is_terminated(self):
        both, _ = self._run_t3([False, True, False], [False, True, False])
        terminated_only, _ = self._run_t3([False, True, False], [False] * 3)
        np.testing.assert_allclose(both[:, 0], [1.25, 1.0, 2.5], rtol=1e-6)
        np.testing.assert_allclose(both, terminated_only, rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_hand_computed_truncation_at_last_step_ignores_last_value(self):
        advantages, _ = self._run_t3([False] * 3, [False, False, True])
        a2 = 3.0 + 0.5 * 9.0 - 1.5  # 6.0: FINAL_VALUES[2], not LAST_VALUE
        a1 = (2.0 + 0.5 * 1.5 - 1.0) + 0.25 * a2  # 3.25
        a0 = (1.0 + 0.5 * 1.0 - 0.5) + 0.25 * a1  # 1.8125
        np.testing.assert_allclose(advantages[:, 0], [a0, a1, a2], rtol=1e-6)

    # ---- loop reference on random data -----------------------------------------------------

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.named_parameters(
        ("no_episode_end", 0.0, 0.0),
        ("terminations", 0.3, 0.0),
        ("truncations", 0.0, 0.3),
        ("both", 0.3, 0.3),
        ("dense_ends", 0.7, 0.7),
    )
    def test_matches_loop_reference(self, p_term, p_trunc):
        rng = np.random.default_rng(42)
        num_steps, num_envs = 7, 4
        rewards = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
        values = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
        last_value = rng.normal(size=(num_envs,)).astype(np.float32)
        final_values = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
        terminated = rng.random((num_steps, num_envs)) < p_term
        truncated = rng.random((num_steps, num_envs)) < p_trunc
        gamma, lam = 0.9, 0.8
        advantages, returns = self._run(
            rewards, values, last_value, final_values, terminated, truncated, gamma, lam
        )
        want_adv, want_ret = reference_gae(
            rewards, values, last_value, final_values, terminated, truncated, gamma, lam
        )
        np.testing.assert_allclose(advantages, want_adv, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(returns, want_ret, rtol=1e-5, atol=1e-5)

    # ---- properties --------------------------------------------------------------------------

    @chex.variants(with_jit=True, without_jit=True)
    def test_mid_rollout_reset_isolates_episodes(self):
        # B=2; env 0 terminates at t=2, env 1 truncates at t=2. obs_3 (VALUES[3]) is the
        # first observation of the next episode: changing it must leave every advantage of
        # the finished episode (t <= 2) unchanged.
        rng = np.random.default_rng(0)
        rewards = rng.normal(size=(6, 2)).astype(np.float32)
        values = rng.normal(size=(6, 2)).astype(np.float32)
        last_value = rng.normal(size=(2,)).astype(np.float32)
        final_values = rng.normal(size=(6, 2)).astype(np.float32)
        terminated = np.zeros((6, 2), bool)
        truncated = np.zeros((6, 2), bool)
        terminated[2, 0] = True
        truncated[2, 1] = True
        adv_a, _ = self._run(rewards, values, last_value, final_values, terminated, truncated)
        values_b = values.copy()
        values_b[3] += 100.0
        adv_b, _ = self._run(rewards, values_b, last_value, final_values, terminated, truncated)
        np.testing.assert_allclose(adv_a[:3], adv_b[:3], rtol=1e-6)
        # ...while the new episode's own advantage at t=3 does see the change.
        np.testing.assert_allclose(adv_b[3] - adv_a[3], [-100.0, -100.0], rtol=1e-5)
        # And the truncated env's pre-reset final value does flow into the old episode.
        final_values_c = final_values.copy()
        final_values_c[2, 1] += 1.0
        adv_c, _ = self._run(rewards, values, last_value, final_values_c, terminated, truncated)
        np.testing.assert_allclose(adv_c[2, 1] - adv_a[2, 1], GAMMA, rtol=1e-5)
        np.testing.assert_allclose(adv_c[1, 1] - adv_a[1, 1], GAMMA * DECAY, rtol=1e-5)
        np.testing.assert_allclose(adv_c[:, 0], adv_a[:, 0], rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_returns_are_advantages_plus_values(self):
        rng = np.random.default_rng(1)
        values = rng.normal(size=(5, 3)).astype(np.float32)
        advantages, returns = self._run(
            rng.normal(size=(5, 3)),
            values,
            rng.normal(size=(3,)),
            rng.normal(size=(5, 3)),
            rng.random((5, 3)) < 0.3,
            rng.random((5, 3)) < 0.3,
        )
        np.testing.assert_allclose(returns, advantages + values, rtol=1e-6, atol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_shapes_and_dtypes(self):
        num_steps, num_envs = 5, 3
        zeros = np.zeros((num_steps, num_envs), np.float32)
        flags = np.zeros((num_steps, num_envs), bool)
        advantages, returns = self._run(zeros, zeros, np.zeros(num_envs), zeros, flags, flags)
        chex.assert_shape([advantages, returns], (num_steps, num_envs))
        chex.assert_type([advantages, returns], jnp.float32)

    @chex.variants(with_jit=True, without_jit=True)
    def test_bootstrap_values(self):
        values = _column(VALUES)
        last_value = np.asarray([LAST_VALUE], np.float32)
        final_values = _column(FINAL_VALUES)
        fn = self.variant(gae_lib.bootstrap_values)
        none = fn(values, last_value, final_values, _column([False] * 3, bool))
        np.testing.assert_array_equal(none[:, 0], [1.0, 1.5, 2.0])
        mid = fn(values, last_value, final_values, _column([False, True, False], bool))
        np.testing.assert_array_equal(mid[:, 0], [1.0, 4.0, 2.0])
        last = fn(values, last_value, final_values, _column([False, False, True], bool))
        np.testing.assert_array_equal(last[:, 0], [1.0, 1.5, 9.0])
        chex.assert_shape(mid, (3, 1))
        chex.assert_type(mid, jnp.float32)

    @chex.variants(with_jit=True, without_jit=True)
    def test_variant_matches_eager_call(self):
        rng = np.random.default_rng(3)
        args = (
            jnp.asarray(rng.normal(size=(20, 3)), jnp.float32),
            jnp.asarray(rng.normal(size=(20, 3)), jnp.float32),
            jnp.asarray(rng.normal(size=(20, 3)), jnp.float32),
            jnp.asarray(rng.random((20, 3)) < 0.2),
            jnp.asarray(rng.random((20, 3)) < 0.2),
        )
        fn = functools.partial(gae_lib.gae, gamma=0.99, gae_lambda=0.95)
        got = self.variant(fn)(*args)
        want = fn(*args)
        chex.assert_trees_all_close(got, want, rtol=1e-6, atol=1e-6)
