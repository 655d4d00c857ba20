"""Action masks (:class:`jaxrl.envs.protocols.ActionMaskEnv`): acting, the loss and a tiny run.

Hand-computed log-probabilities and entropy on a mask, actions never illegal over many
draws (sampled, the mode, the data-parallel sampler, scripted players), the loss's gradient
zero on illegal logits, and :class:`jaxrl.envs.probes.MaskedBandit` learning its best legal play
(its illegal action pays more, so a learner blind to the mask would learn to cheat).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.commands.evaluate import evaluate
from jaxrl.config import config_from_dict
from jaxrl.core.acting import PolicyParams, act, sample_rows
from jaxrl.core.losses import LossHyperparams, Minibatch, ppo_loss
from jaxrl.core.match import MatchSpec, idle_plan, legalize, match_step, start_matches
from jaxrl.core.networks import make_distribution, mask_logits
from jaxrl.core.types import RunningStats
from jaxrl.envs.probes import CoopNim, MaskedBandit
from jaxrl.run.driver import train
from jaxrl.run.play import eval_layout
from jaxrl.run.runner import init_params
from jaxrl.run.setup import make_setup

LOGITS = np.asarray([[1.0, 2.0, 3.0, 0.5], [0.0, -1.0, 4.0, 2.0]], np.float32)
LEGAL = np.asarray([[True, False, True, True], [False, True, False, True]])


def _masked_log_softmax(logits, legal):
    """numpy: log pi over the legal actions, -inf elsewhere."""
    z = np.where(legal, logits, -np.inf)
    return (
        z
        - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - z.max(-1, keepdims=True)
    )


def test_masked_distribution_by_hand():
    log_pi = _masked_log_softmax(LOGITS, LEGAL)
    # Row 1 by hand: legal {1, 3}, logits -1 and 2.
    np.testing.assert_allclose(log_pi[1, 3], 2 - np.log(np.exp(-1) + np.exp(2)), rtol=1e-6)
    dist = make_distribution(jnp.asarray(LOGITS), True, jnp.asarray(LEGAL))
    np.testing.assert_array_equal(np.asarray(dist.probs)[~LEGAL], 0.0)
    for action in range(4):
        got = np.asarray(dist.log_prob(jnp.full((2,), action)))
        legal = LEGAL[:, action]
        np.testing.assert_allclose(got[legal], log_pi[legal, action], rtol=1e-5)
        assert (got[~legal] < -1e30).all()  # illegal: (practically) log 0
    probs = np.exp(log_pi)
    entropy = -np.where(LEGAL, probs * np.where(LEGAL, log_pi, 0.0), 0.0).sum(-1)
    np.testing.assert_allclose(np.asarray(dist.entropy()), entropy, rtol=1e-5)
    assert np.isfinite(np.asarray(dist.entropy())).all()
    # The mode is the best legal action, though the best logit of row 1 (action 2) is illegal.
    np.testing.assert_array_equal(np.asarray(dist.mode()), [2, 3])
    assert mask_logits(jnp.asarray(LOGITS), None) is not None  # None: logits as they are
    np.testing.assert_array_equal(mask_logits(jnp.asarray(LOGITS), None), LOGITS)


@pytest.fixture(scope="module")
def bandit_setup():
    return make_setup(
        config_from_dict(
            {
                "env": {"name": "jaxrl.envs.probes:MaskedBandit", "num_envs": 8},
                "network": {"hidden_sizes": [16]},
                "ppo": {"num_steps": 8, "num_minibatches": 2, "update_epochs": 2},
            }
        )
    )


def test_act_never_picks_an_illegal_action(bandit_setup):
    setup = bandit_setup
    rows = 4096
    policy = PolicyParams(
        params=init_params(setup, jax.random.key(0)), obs_stats=RunningStats.create((2,))
    )
    key_obs, key_legal, key_act = jax.random.split(jax.random.key(1), 3)
    obs = jax.nn.one_hot(jax.random.randint(key_obs, (rows,), 0, 2), 2)
    legal = jax.random.bernoulli(key_legal, 0.4, (rows, 4)).at[:, 2].set(False)
    legal = legal.at[jnp.arange(rows), jnp.arange(rows) % 2 * 3].set(True)  # >= 1 legal
    first = jnp.ones((rows,), bool)
    for deterministic in (False, True, jnp.arange(rows) % 2 == 0):
        out = act(setup.policy, policy, (), obs, first, key_act, deterministic, legal=legal)
        assert np.asarray(legal)[np.arange(rows), np.asarray(out.action)].all()
        assert np.isfinite(np.asarray(out.log_prob)).all()
    # The data-parallel sampler draws from the masked logits too.
    logits = mask_logits(jnp.zeros((rows, 4)), legal)
    drawn = np.asarray(sample_rows(logits, True, key_act, None, 1))
    assert np.asarray(legal)[np.arange(rows), drawn].all()
    # Unmasked, the same draws do take action 2: the test can fail.
    out = act(setup.policy, policy, (), obs, first, key_act)
    assert (np.asarray(out.action) == 2).any()


def test_scripted_illegal_actions_are_redrawn_uniformly_among_legal():
    envs = 20000
    legal = jnp.broadcast_to(jnp.asarray([[True, False, True, True]]), (envs, 1, 4))
    action = jnp.broadcast_to(jnp.asarray([[1]], jnp.int32), (envs, 1))  # always illegal
    keys = jax.random.split(jax.random.key(3), envs)
    fixed = np.asarray(legalize(action, legal, keys))[:, 0]
    counts = np.bincount(fixed, minlength=4) / envs
    np.testing.assert_allclose(counts, [1 / 3, 0, 1 / 3, 1 / 3], atol=0.02)
    kept = np.asarray(legalize(jnp.full((envs, 1), 3, jnp.int32), legal, keys))
    np.testing.assert_array_equal(kept, 3)  # legal actions stay
    assert legalize(action, None, keys) is action


class _LogitTable(nn.Module):
    """A stand-in network: sample ``i`` (its one-hot ``obs``) has logits ``table[i]``."""

    rows: int
    actions: int

    @nn.compact
    def __call__(self, hidden, obs, is_first):
        del is_first
        table = self.param("table", nn.initializers.normal(1.0), (self.rows, self.actions))
        value = self.param("value", nn.initializers.zeros, (self.rows,))
        return hidden, obs @ table, obs @ value


def _loss_grad(legal):
    rows = LOGITS.shape[0]
    net = _LogitTable(rows, 4)
    obs = jnp.eye(rows)[None]  # [L=1, N, N]
    params = {"params": {"table": jnp.asarray(LOGITS), "value": jnp.zeros((rows,))}}
    batch = Minibatch(
        obs=obs,
        is_first=jnp.ones((1, rows), bool),
        hidden=(),
        action=jnp.asarray([[0, 3]], jnp.int32),
        log_prob=jnp.asarray([[-1.5, -0.7]], jnp.float32),
        value=jnp.zeros((1, rows)),
        advantage=jnp.asarray([[1.0, -0.5]]),
        target=jnp.ones((1, rows)),
        legal=None if legal is None else jnp.asarray(legal)[None],
    )
    values = type("V", (), {"clip_eps": 0.2, "vf_coef": 0.5, "ent_coef": 0.1})()
    hp = LossHyperparams(values=values, clip_value=True, normalize_advantages=False)
    (loss, metrics), grads = jax.value_and_grad(ppo_loss, has_aux=True)(
        params, net, batch, hp, True
    )
    return loss, metrics, np.asarray(grads["params"]["table"])


def test_loss_gradient_on_illegal_logits_is_zero():
    loss, metrics, grad = _loss_grad(LEGAL)
    assert np.isfinite(loss) and np.isfinite(grad).all()
    np.testing.assert_array_equal(grad[~LEGAL], 0.0)
    assert (np.abs(grad[LEGAL]) > 0).all()
    # The loss's entropy is the masked entropy of the hand computation.
    log_pi = _masked_log_softmax(LOGITS, LEGAL)
    entropy = -np.where(LEGAL, np.exp(log_pi) * np.where(LEGAL, log_pi, 0.0), 0.0).sum(-1)
    np.testing.assert_allclose(metrics.entropy, entropy.mean(), rtol=1e-5)
    # Without the mask the same loss pushes on every logit.
    _, _, unmasked = _loss_grad(None)
    assert (np.abs(unmasked[~LEGAL]) > 0).all()


def test_multi_agent_rows_act_under_their_slots_masks():
    """A single-team multi-agent env's ``[A, n]`` masks reach each slot's row."""
    setup = make_setup(
        config_from_dict(
            {
                "env": {"name": "jaxrl.envs.probes:CoopNim", "num_envs": 16},
                "network": {"hidden_sizes": [8]},
                "ppo": {"num_steps": 4, "num_minibatches": 1},
            }
        )
    )
    layout = eval_layout(setup, 16)
    spec = MatchSpec(setup.env, setup.policy, layout, deterministic=False, eval_deterministic=False)
    learner = PolicyParams(
        params=init_params(setup, jax.random.key(0)),
        obs_stats=RunningStats.create(setup.obs_shape),
    )
    plan = idle_plan(layout, setup.env_params)

    @jax.jit
    def run(key):
        carry = start_matches(spec, setup.network.initial_hidden, plan, jax.random.key(1))

        def step(c, k):
            pile = c.env_state.env_state.pile
            c, record = match_step(spec, learner, plan, c, k)
            return c, (pile, record.legal, record.act.action)

        return jax.lax.scan(step, carry, jax.random.split(key, 24))[1]

    pile, legal, action = (np.asarray(x) for x in run(jax.random.key(2)))
    expected = np.arange(1, 4) <= pile[..., None]  # [T, N, 3]
    np.testing.assert_array_equal(legal, np.repeat(expected, 2, axis=1))  # [T, N * 2, 3]
    assert np.take_along_axis(legal, action[..., None], -1).all()
    assert (pile < 3).any()  # some steps did forbid a take


@pytest.fixture(scope="module")
def bandit_run(tmp_path_factory):
    config = config_from_dict(
        {
            "seed": 0,
            "env": {"name": "jaxrl.envs.probes:MaskedBandit", "num_envs": 8},
            "network": {"hidden_sizes": [16]},
            "ppo": {
                "num_steps": 8,
                "num_minibatches": 2,
                "update_epochs": 2,
                "lr": 0.01,
                "ent_coef": 0.0,
                "anneal_lr": False,
            },
            "train": {"total_steps": 8 * 8 * 30, "updates_per_chunk": 10, "progress_bar": False},
            "checkpoint": {"every_updates": 0},
        }
    )
    return train(config, tmp_path_factory.mktemp("bandit") / "run", quiet=True)


def test_masked_bandit_learns_its_best_legal_play(bandit_run):
    history = bandit_run.history
    # An illegal action pays 2: a single one would show in the returns and the illegal term.
    assert all(row["rollout/reward/illegal"] == 0.0 for row in history)
    returns = [row["rollout/episode_return"] for row in history]
    assert returns[0] < 0.45 < returns[-1], returns  # 0.5 per episode is the best legal play
    assert np.isfinite([row["train/entropy"] for row in history]).all()
    # Greedy evaluation goes through the match step: legal too (never a 2), and the best
    # legal play (1 in context 1, and nothing better exists in context 0).
    greedy = evaluate(bandit_run.run_dir, episodes=64)
    assert set(greedy.returns) == {0.0, 1.0}, greedy
    assert np.mean(np.equal(greedy.returns, 1.0)) > 0.3, greedy  # about half are context 1


def test_probe_masks_by_hand():
    env = MaskedBandit()
    _, state = env.reset(jax.random.key(0), env.default_params)
    for context, legal in ((0, [1, 1, 1, 0]), (1, [0, 1, 1, 1])):
        got = env.action_mask(state.replace(context=jnp.asarray(context)), env.default_params)
        np.testing.assert_array_equal(got, np.asarray(legal, bool))
    nim = CoopNim()
    _, state = nim.reset(jax.random.key(0), nim.default_params)
    got = nim.action_mask(state.replace(pile=jnp.asarray(2)), nim.default_params)
    np.testing.assert_array_equal(got, [[True, True, False]] * 2)
