"""A PureJaxRL-style single-file PPO, kept as the speed and learning reference.

Written for this repository after the structure of PureJaxRL's ``ppo.py`` (one ``jit`` over
a ``lax.scan`` of all updates, separate actor and critic MLPs, gymnax env
with an episode-statistics wrapper, no truncation bootstrap). It is deliberately *not*
built from jaxrl's modules, so that ``bench.throughput --reference`` compares jaxrl's train
step against an independent implementation with identical hyperparameters. PureJaxRL nests
its steps as closures of ``train``; here they are module-level functions of one frozen
:class:`_Reference`, bound with ``functools.partial``: the same traced program.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, NamedTuple

import distrax
import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training.train_state import TrainState


class _ActorCritic(nn.Module):
    action_dim: int
    width: int = 64

    @nn.compact
    def __call__(self, x):
        dense = lambda n, s: nn.Dense(  # noqa: E731
            n, kernel_init=nn.initializers.orthogonal(s), bias_init=nn.initializers.zeros
        )
        a = nn.tanh(dense(self.width, np.sqrt(2))(x))
        a = nn.tanh(dense(self.width, np.sqrt(2))(a))
        logits = dense(self.action_dim, 0.01)(a)
        c = nn.tanh(dense(self.width, np.sqrt(2))(x))
        c = nn.tanh(dense(self.width, np.sqrt(2))(c))
        return distrax.Categorical(logits=logits), dense(1, 1.0)(c)[..., 0]


class _Transition(NamedTuple):
    done: jax.Array
    action: jax.Array
    value: jax.Array
    reward: jax.Array
    log_prob: jax.Array
    obs: jax.Array
    ret: jax.Array
    returned: jax.Array


@dataclasses.dataclass(frozen=True)
class _Reference:
    """The env, the network and the hyperparameters every step of the reference reads."""

    env: Any  # gymnax env
    env_params: Any
    network: _ActorCritic
    num_envs: int
    num_steps: int
    num_updates: int
    update_epochs: int
    num_minibatches: int
    minibatch: int  # num_envs * num_steps // num_minibatches
    lr: float
    gamma: float
    gae_lambda: float
    clip_eps: float
    ent_coef: float
    vf_coef: float
    max_grad_norm: float


def make_reference_train(
    env_name: str = "CartPole-v1",
    num_envs: int = 4,
    num_steps: int = 128,
    total_steps: int = 500_000,
    update_epochs: int = 4,
    num_minibatches: int = 4,
    lr: float = 2.5e-4,
    gamma: float = 0.99,
    gae_lambda: float = 0.95,
    clip_eps: float = 0.2,
    ent_coef: float = 0.01,
    vf_coef: float = 0.5,
    max_grad_norm: float = 0.5,
):
    """``train(key) -> (params, (return_sums, episodes) [num_updates])``, one function.

    Per update: the summed returns and the number of the episodes that ended in it, so
    callers can average over any window of updates by episode.
    """
    env, env_params = gymnax.make(env_name)
    num_updates = total_steps // (num_envs * num_steps)
    ref = _Reference(
        env=env,
        env_params=env_params,
        network=_ActorCritic(env.action_space(env_params).n),
        num_envs=num_envs,
        num_steps=num_steps,
        num_updates=num_updates,
        update_epochs=update_epochs,
        num_minibatches=num_minibatches,
        minibatch=num_envs * num_steps // num_minibatches,
        lr=lr,
        gamma=gamma,
        gae_lambda=gae_lambda,
        clip_eps=clip_eps,
        ent_coef=ent_coef,
        vf_coef=vf_coef,
        max_grad_norm=max_grad_norm,
    )
    return functools.partial(_train, ref), num_updates * num_envs * num_steps


def _schedule(ref: _Reference, count):
    """The learning rate, annealed linearly to 0 over the updates."""
    return ref.lr * (1.0 - (count // (ref.num_minibatches * ref.update_epochs)) / ref.num_updates)


def _train(ref: _Reference, key):
    """Every update, in one ``lax.scan``: ``(params, (return_sums, episodes) [num_updates])``."""
    env, env_params, network = ref.env, ref.env_params, ref.network
    key, key_init, key_reset = jax.random.split(key, 3)
    params = network.init(key_init, jnp.zeros(env.observation_space(env_params).shape))
    tx = optax.chain(
        optax.clip_by_global_norm(ref.max_grad_norm),
        optax.adam(functools.partial(_schedule, ref), eps=1e-5),
    )
    state = TrainState.create(apply_fn=network.apply, params=params, tx=tx)
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(key_reset, ref.num_envs), env_params
    )
    ep_ret = jnp.zeros(ref.num_envs)
    carry, returns = jax.lax.scan(
        functools.partial(_update_step, ref),
        (state, env_state, obs, ep_ret, key),
        None,
        ref.num_updates,
    )
    return carry[0].params, returns


def _env_step(ref: _Reference, c, _):
    """One vmapped env step of the rollout and its ``_Transition`` ``[num_envs]``."""
    state_, env_state, obs, ep_ret, key = c
    key, key_act, key_env = jax.random.split(key, 3)
    pi, value = ref.network.apply(state_.params, obs)
    action = pi.sample(seed=key_act)
    log_prob = pi.log_prob(action)
    obs, env_state, reward, term, trunc, _ = jax.vmap(ref.env.step, in_axes=(0, 0, 0, None))(
        jax.random.split(key_env, ref.num_envs), env_state, action, ref.env_params
    )
    done = jnp.logical_or(term, trunc)
    ret = ep_ret + reward
    t = _Transition(done, action, value, reward, log_prob, c[2], ret, done)
    return (state_, env_state, obs, jnp.where(done, 0.0, ret), key), t


def _gae_step(ref: _Reference, c, t):
    """One step of the reverse GAE scan (no truncation bootstrap, as PureJaxRL)."""
    gae, next_value = c
    delta = t.reward + ref.gamma * next_value * (1 - t.done) - t.value
    gae = delta + ref.gamma * ref.gae_lambda * (1 - t.done) * gae
    return (gae, t.value), gae


def _update_step(ref: _Reference, carry, _):
    """One update: a rollout of ``num_steps``, GAE, then ``update_epochs`` epochs."""
    state, env_state, obs, ep_ret, key = carry
    (_, env_state, obs, ep_ret, key), traj = jax.lax.scan(
        functools.partial(_env_step, ref),
        (state, env_state, obs, ep_ret, key),
        None,
        ref.num_steps,
    )
    _, last_val = ref.network.apply(state.params, obs)
    _, adv = jax.lax.scan(
        functools.partial(_gae_step, ref),
        (jnp.zeros_like(last_val), last_val),
        traj,
        reverse=True,
        unroll=16,
    )
    targets = adv + traj.value
    (state, key), _ = jax.lax.scan(
        functools.partial(_epoch, ref, (traj, adv, targets)), (state, key), None, ref.update_epochs
    )
    finished = traj.returned.sum().astype(jnp.float32)
    return (state, env_state, obs, ep_ret, key), ((traj.ret * traj.returned).sum(), finished)


def _epoch(ref: _Reference, batch, c, _):
    """One epoch: the ``(traj, adv, targets)`` batch shuffled, then one scan of minibatches."""
    state, key = c
    key, key_perm = jax.random.split(key)
    perm = jax.random.permutation(key_perm, ref.num_envs * ref.num_steps)
    batch = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:])[perm], batch)
    mbs = jax.tree.map(
        lambda x: x.reshape((ref.num_minibatches, ref.minibatch) + x.shape[1:]), batch
    )
    state, _ = jax.lax.scan(functools.partial(_minibatch_step, ref), state, mbs)
    return (state, key), None


def _minibatch_step(ref: _Reference, state, mb):
    """One gradient step on minibatch ``mb`` (``(traj, adv, targets)``)."""
    grads = jax.grad(functools.partial(_loss, ref))(state.params, *mb)
    return state.apply_gradients(grads=grads), None


def _loss(ref: _Reference, p, t, a, tgt):
    """The clipped PPO loss of params ``p`` on transitions ``t``, advantages ``a``, targets."""
    pi, v = ref.network.apply(p, t.obs)
    lp = pi.log_prob(t.action)
    vc = t.value + jnp.clip(v - t.value, -ref.clip_eps, ref.clip_eps)
    vl = 0.5 * jnp.maximum((v - tgt) ** 2, (vc - tgt) ** 2).mean()
    ratio = jnp.exp(lp - t.log_prob)
    an = (a - a.mean()) / (a.std() + 1e-8)
    clipped = jnp.clip(ratio, 1 - ref.clip_eps, 1 + ref.clip_eps)
    pl = -jnp.minimum(ratio * an, clipped * an).mean()
    return pl + ref.vf_coef * vl - ref.ent_coef * pi.entropy().mean()


class ReferenceRun(NamedTuple):
    """One timed reference run."""

    compile_s: float
    sps: float  # env steps per second of the compiled run
    return_sums: np.ndarray  # [num_updates] summed returns of the episodes ending per update
    episodes: np.ndarray  # [num_updates] number of those episodes


def time_reference(seed: int = 0, **kwargs) -> ReferenceRun:
    """Compile, then run and time the reference once."""
    train, steps = make_reference_train(**kwargs)
    key = jax.random.key(seed)
    t0 = time.perf_counter()
    compiled = jax.jit(train).lower(key).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, (return_sums, episodes) = jax.block_until_ready(compiled(key))
    run_s = time.perf_counter() - t0
    return ReferenceRun(compile_s, steps / run_s, np.asarray(return_sums), np.asarray(episodes))


def run_reference(seed: int = 0, **kwargs) -> dict[str, float]:
    """Compile and run the reference once; returns compile seconds, steps/s, final return."""
    run = time_reference(seed, **kwargs)
    return_sums, episodes = run.return_sums, run.episodes
    last = slice(-10, None)  # the episodes of the last 10 updates
    final_return = float(np.sum(return_sums[last]) / max(float(np.sum(episodes[last])), 1.0))
    return {
        "compile_s": run.compile_s,
        "sps": run.sps,
        "final_return": final_return,
    }


if __name__ == "__main__":
    print(run_reference())
