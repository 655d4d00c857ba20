"""``jaxrl.core.losses.ppo_loss`` against an independent numpy computation.

A tiny ActorCritic (obs dim 2, one hidden layer of 4) gets fixed, non-trivial params; the
forward pass, softmax, Gaussian log-density and every loss term are recomputed by hand.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.config.ppo import MEMBER_VALUES
from jaxrl.core.hyper import Hyper
from jaxrl.core.losses import LossHyperparams, Minibatch, ppo_loss
from jaxrl.core.networks import ActorCritic, make_distribution

OBS_DIM = 2
HIDDEN = 4
NUM_ACTIONS = 3
ACTION_DIM = 2  # continuous case
CLIP_EPS = 0.2
VF_COEF = 0.5
ENT_COEF = 0.01

OBS = np.array([[0.5, -1.0], [1.5, 0.3], [-0.7, 0.8], [0.0, 0.0], [2.0, -2.0]], np.float32)
DISCRETE_ACTIONS = np.array([0, 2, 1, 1, 2], np.int32)
# log pi_new - log pi_old per sample: ratios e^0.5, e^-0.5, e^0.05, e^0.3, e^-0.1, i.e. three
# of the five outside [1 - 0.2, 1 + 0.2].
LOG_RATIOS = np.array([0.5, -0.5, 0.05, 0.3, -0.1])
ADVANTAGES = np.array([1.0, -2.0, 0.5, -0.3, 1.5], np.float32)
# V_old - V_new: two of five beyond +-clip_eps, so value clipping matters.
VALUE_OFFSETS = np.array([0.5, -0.5, 0.1, 0.0, -0.05])
TARGETS = np.array([1.0, -0.5, 0.3, 2.0, -1.0], np.float32)


def _hp(clip_value=True, normalize_advantages=False):
    zeros = Hyper(**{name: np.float32(0) for name in MEMBER_VALUES})
    return LossHyperparams(
        values=zeros.replace(clip_eps=CLIP_EPS, vf_coef=VF_COEF, ent_coef=ENT_COEF),
        clip_value=clip_value,
        normalize_advantages=normalize_advantages,
    )


def _dense(rng, n_in, n_out):
    return {
        "kernel": rng.normal(size=(n_in, n_out)).astype(np.float32),
        "bias": rng.normal(scale=0.5, size=(n_out,)).astype(np.float32),
    }


def _params(discrete):
    rng = np.random.default_rng(7)
    out = NUM_ACTIONS if discrete else ACTION_DIM
    params = {
        "actor_torso": {"Dense_0": _dense(rng, OBS_DIM, HIDDEN)},
        "critic_torso": {"Dense_0": _dense(rng, OBS_DIM, HIDDEN)},
        "actor_head": _dense(rng, HIDDEN, out),
        "critic_head": _dense(rng, HIDDEN, 1),
    }
    if not discrete:
        params["log_std"] = np.array([0.3, -0.5], np.float32)
    return {"params": params}


def _np_forward(params):
    """Numpy re-implementation of ActorCritic (separate tanh torsos, linear heads)."""
    p = params["params"]

    def torso(name):
        layer = p[name]["Dense_0"]
        return np.tanh(OBS.astype(np.float64) @ layer["kernel"] + layer["bias"])

    actor_out = torso("actor_torso") @ p["actor_head"]["kernel"] + p["actor_head"]["bias"]
    value = (torso("critic_torso") @ p["critic_head"]["kernel"] + p["critic_head"]["bias"])[:, 0]
    return actor_out, value


def _np_log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _np_gaussian(mean, log_std, actions):
    std = np.exp(log_std)
    log_prob = (-0.5 * ((actions - mean) / std) ** 2 - log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
    entropy = np.full(mean.shape[0], (0.5 + 0.5 * np.log(2 * np.pi) + log_std).sum())
    return log_prob, entropy


def _np_ppo(log_prob, entropy, value, hp):
    """Expected metrics; ``log_prob``/``entropy``/``value`` are the new policy's, float64."""
    old_log_prob = log_prob - LOG_RATIOS
    old_value = value + VALUE_OFFSETS
    adv = ADVANTAGES.astype(np.float64)
    if hp.normalize_advantages:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = np.exp(log_prob - old_log_prob)
    surrogate = np.minimum(ratio * adv, np.clip(ratio, 1 - CLIP_EPS, 1 + CLIP_EPS) * adv)
    policy_loss = -surrogate.mean()
    unclipped = (value - TARGETS) ** 2
    if hp.clip_value:
        clipped_v = old_value + np.clip(value - old_value, -CLIP_EPS, CLIP_EPS)
        value_loss = 0.5 * np.maximum(unclipped, (clipped_v - TARGETS) ** 2).mean()
    else:
        value_loss = 0.5 * unclipped.mean()
    ent = entropy.mean()
    return {
        "total_loss": policy_loss + VF_COEF * value_loss - ENT_COEF * ent,
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": ent,
        "approx_kl": ((ratio - 1) - np.log(ratio)).mean(),
        "clip_fraction": (np.abs(ratio - 1) > CLIP_EPS).mean(),
    }


def _batch(actions, log_prob, value):
    # Feed-forward minibatches are N sequences of length L = 1: fields are [1, N, ...].
    return Minibatch(
        obs=jnp.asarray(OBS)[None],
        is_first=jnp.ones((1, len(OBS)), bool),
        hidden=(),
        action=jnp.asarray(actions)[None],
        log_prob=jnp.asarray(log_prob - LOG_RATIOS, jnp.float32)[None],
        value=jnp.asarray(value + VALUE_OFFSETS, jnp.float32)[None],
        advantage=jnp.asarray(ADVANTAGES)[None],
        target=jnp.asarray(TARGETS)[None],
    )


def _forward(network, params):
    """Network outputs for OBS as one step of N sequences, with the step axis dropped."""
    n = len(OBS)
    _, policy_params, value = network.apply(
        params, (), jnp.asarray(OBS)[None], jnp.ones((1, n), bool)
    )
    if isinstance(policy_params, tuple):
        return (policy_params[0][0], policy_params[1]), value[0]
    return policy_params[0], value[0]


def _assert_metrics(loss, metrics, want):
    for name, value in want.items():
        np.testing.assert_allclose(
            getattr(metrics, name), value, rtol=1e-5, atol=1e-6, err_msg=name
        )
        assert getattr(metrics, name).dtype == jnp.float32, name
    np.testing.assert_allclose(loss, want["total_loss"], rtol=1e-5, atol=1e-6)
    assert loss.shape == () and loss.dtype == jnp.float32


@pytest.fixture(scope="module")
def discrete_case():
    network = ActorCritic(action_dim=NUM_ACTIONS, discrete=True, hidden_sizes=(HIDDEN,))
    params = _params(discrete=True)
    init = network.init(jax.random.key(0), (), jnp.zeros((1, 1, OBS_DIM)), jnp.ones((1, 1), bool))
    assert jax.tree.structure(init) == jax.tree.structure(params)
    logits, value = _np_forward(params)
    log_probs = _np_log_softmax(logits)
    log_prob = log_probs[np.arange(len(OBS)), DISCRETE_ACTIONS]
    entropy = -(np.exp(log_probs) * log_probs).sum(-1)
    return network, params, logits, log_prob, entropy, value


@pytest.fixture(scope="module")
def continuous_case():
    network = ActorCritic(action_dim=ACTION_DIM, discrete=False, hidden_sizes=(HIDDEN,))
    params = _params(discrete=False)
    init = network.init(jax.random.key(0), (), jnp.zeros((1, 1, OBS_DIM)), jnp.ones((1, 1), bool))
    assert jax.tree.structure(init) == jax.tree.structure(params)
    mean, value = _np_forward(params)
    actions = np.random.default_rng(3).normal(size=(len(OBS), ACTION_DIM)).astype(np.float32)
    log_prob, entropy = _np_gaussian(mean, params["params"]["log_std"], actions)
    return network, params, mean, actions, log_prob, entropy, value


def test_network_forward_matches_numpy(discrete_case):
    network, params, logits, _, _, value = discrete_case
    got_logits, got_value = _forward(network, params)
    np.testing.assert_allclose(got_logits, logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_value, value, rtol=1e-5, atol=1e-6)


def test_fixture_is_nontrivial(discrete_case):
    _, _, _, log_prob, _, value = discrete_case
    ratio = np.exp(LOG_RATIOS)
    assert (np.abs(ratio - 1) > CLIP_EPS).sum() == 3
    # The policy is far from uniform, so log-probs differ per sample.
    assert np.ptp(log_prob) > 0.5
    # Clipped and unclipped value losses differ for this batch.
    clipped = _np_ppo(log_prob, np.zeros(5), value, _hp(clip_value=True))["value_loss"]
    unclipped = _np_ppo(log_prob, np.zeros(5), value, _hp(clip_value=False))["value_loss"]
    assert abs(clipped - unclipped) > 1e-3


@pytest.mark.parametrize("clip_value", [True, False], ids=["clip_value", "no_clip_value"])
@pytest.mark.parametrize("normalize", [True, False], ids=["norm_adv", "raw_adv"])
def test_discrete_loss_matches_numpy(discrete_case, clip_value, normalize):
    network, params, _, log_prob, entropy, value = discrete_case
    hp = _hp(clip_value=clip_value, normalize_advantages=normalize)
    batch = _batch(DISCRETE_ACTIONS, log_prob, value)
    loss, metrics = ppo_loss(params, network, batch, hp, True)
    _assert_metrics(loss, metrics, _np_ppo(log_prob, entropy, value, hp))


def test_discrete_loss_known_values(discrete_case):
    # Metrics that depend only on the chosen ratios, written out by hand.
    network, params, _, log_prob, _, value = discrete_case
    _, metrics = ppo_loss(params, network, _batch(DISCRETE_ACTIONS, log_prob, value), _hp(), True)
    np.testing.assert_allclose(metrics.clip_fraction, 3 / 5, rtol=1e-6)
    kl = [np.exp(d) - 1 - d for d in LOG_RATIOS]
    np.testing.assert_allclose(metrics.approx_kl, sum(kl) / 5, rtol=1e-4)


def test_normalisation_changes_policy_loss(discrete_case):
    network, params, _, log_prob, _, value = discrete_case
    batch = _batch(DISCRETE_ACTIONS, log_prob, value)
    _, raw = ppo_loss(params, network, batch, _hp(normalize_advantages=False), True)
    _, norm = ppo_loss(params, network, batch, _hp(normalize_advantages=True), True)
    assert abs(float(raw.policy_loss) - float(norm.policy_loss)) > 1e-2
    # Normalisation touches only the policy term.
    np.testing.assert_allclose(raw.value_loss, norm.value_loss, rtol=1e-6)
    np.testing.assert_allclose(raw.entropy, norm.entropy, rtol=1e-6)


def test_on_policy_batch(discrete_case):
    # Behaviour == current policy: ratio 1, no KL, no clipping, loss = -mean(A).
    network, params, _, log_prob, _, value = discrete_case
    batch = _batch(DISCRETE_ACTIONS, log_prob, value).replace(
        log_prob=jnp.asarray(log_prob, jnp.float32)
    )
    _, metrics = ppo_loss(params, network, batch, _hp(), True)
    np.testing.assert_allclose(metrics.approx_kl, 0.0, atol=1e-6)
    np.testing.assert_allclose(metrics.clip_fraction, 0.0)
    np.testing.assert_allclose(metrics.policy_loss, -ADVANTAGES.mean(), rtol=1e-5)


def test_loss_is_jittable_and_differentiable(discrete_case):
    network, params, _, log_prob, entropy, value = discrete_case
    hp = _hp()
    batch = _batch(DISCRETE_ACTIONS, log_prob, value)
    fn = jax.jit(ppo_loss, static_argnums=(1, 4))  # hp traced, as in the step
    loss, metrics = fn(params, network, batch, hp, True)
    _assert_metrics(loss, metrics, _np_ppo(log_prob, entropy, value, hp))
    grads = jax.grad(lambda p: ppo_loss(p, network, batch, hp, True)[0])(params)
    leaves = jax.tree.leaves(grads)
    assert all(np.all(np.isfinite(g)) for g in leaves)
    assert any(np.abs(g).max() > 0 for g in leaves)


def test_continuous_distribution_closed_form(continuous_case):
    network, params, mean, actions, log_prob, entropy, _ = continuous_case
    policy_params, _ = _forward(network, params)
    got_mean, got_log_std = policy_params
    np.testing.assert_allclose(got_mean, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_log_std, params["params"]["log_std"])
    dist = make_distribution(policy_params, discrete=False)
    np.testing.assert_allclose(dist.log_prob(jnp.asarray(actions)), log_prob, rtol=1e-5)
    np.testing.assert_allclose(dist.entropy(), entropy, rtol=1e-5)
    # sigma = (e^0.3, e^-0.5): entropy = 2 * (0.5 + 0.5 log 2 pi) + 0.3 - 0.5.
    np.testing.assert_allclose(dist.entropy()[0], 1.0 + np.log(2 * np.pi) - 0.2, rtol=1e-6)


@pytest.mark.parametrize("clip_value", [True, False], ids=["clip_value", "no_clip_value"])
def test_continuous_loss_matches_numpy(continuous_case, clip_value):
    network, params, _, actions, log_prob, entropy, value = continuous_case
    hp = _hp(clip_value=clip_value, normalize_advantages=True)
    loss, metrics = ppo_loss(params, network, _batch(actions, log_prob, value), hp, False)
    _assert_metrics(loss, metrics, _np_ppo(log_prob, entropy, value, hp))


def test_value_clip_stops_a_value_short_of_a_goal_sized_target(discrete_case):
    """With ``clip_value`` a value already 0.3 above its rollout value gets no pull toward a
    target 10 above that (a soccer goal): the clip holds each update's move to +-clip_eps in
    reward units. Unclipped, the critic head's bias gets ``vf_coef * mean(V - R)``, by hand
    ``0.5 * (0.3 - 10) = -4.85``, since every sample has ``V - R = -9.7``."""
    network, params, _, log_prob, _, value = discrete_case
    old_value = value - 0.3
    batch = _batch(DISCRETE_ACTIONS, log_prob, value).replace(
        value=jnp.asarray(old_value, jnp.float32)[None],
        target=jnp.asarray(old_value + 10.0, jnp.float32)[None],
    )

    def bias_grad(clip_value):
        def loss(p):
            return ppo_loss(p, network, batch, _hp(clip_value=clip_value), True)[0]

        return float(jax.grad(loss)(params)["params"]["critic_head"]["bias"][0])

    assert bias_grad(True) == 0.0
    np.testing.assert_allclose(bias_grad(False), VF_COEF * -9.7, rtol=1e-5)
