"""A PureJaxRL-style single-file PPO, kept as the speed and learning reference.

Written for this repository after the structure of PureJaxRL's ``ppo.py`` (one ``jit`` over
a ``lax.scan`` of all updates, nested closures, separate actor and critic MLPs, gymnax env
with an episode-statistics wrapper, no truncation bootstrap). It is deliberately *not*
built from jaxrl's modules, so that ``bench.throughput --reference`` compares jaxrl's train
step against an independent implementation with identical hyperparameters.
"""

from __future__ import annotations

import time
from typing import NamedTuple

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
    minibatch = num_envs * num_steps // num_minibatches
    network = _ActorCritic(env.action_space(env_params).n)

    def schedule(count):
        return lr * (1.0 - (count // (num_minibatches * update_epochs)) / num_updates)

    def train(key):
        key, key_init, key_reset = jax.random.split(key, 3)
        params = network.init(key_init, jnp.zeros(env.observation_space(env_params).shape))
        tx = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(schedule, eps=1e-5))
        state = TrainState.create(apply_fn=network.apply, params=params, tx=tx)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(key_reset, num_envs), env_params
        )
        ep_ret = jnp.zeros(num_envs)

        def update_step(carry, _):
            state, env_state, obs, ep_ret, key = carry

            def env_step(c, _):
                state_, env_state, obs, ep_ret, key = c
                key, key_act, key_env = jax.random.split(key, 3)
                pi, value = network.apply(state_.params, obs)
                action = pi.sample(seed=key_act)
                log_prob = pi.log_prob(action)
                obs, env_state, reward, term, trunc, _ = jax.vmap(
                    env.step, in_axes=(0, 0, 0, None)
                )(jax.random.split(key_env, num_envs), env_state, action, env_params)
                done = jnp.logical_or(term, trunc)
                ret = ep_ret + reward
                t = _Transition(done, action, value, reward, log_prob, c[2], ret, done)
                return (state_, env_state, obs, jnp.where(done, 0.0, ret), key), t

            (_, env_state, obs, ep_ret, key), traj = jax.lax.scan(
                env_step, (state, env_state, obs, ep_ret, key), None, num_steps
            )
            _, last_val = network.apply(state.params, obs)

            def gae_step(c, t):
                gae, next_value = c
                delta = t.reward + gamma * next_value * (1 - t.done) - t.value
                gae = delta + gamma * gae_lambda * (1 - t.done) * gae
                return (gae, t.value), gae

            _, adv = jax.lax.scan(
                gae_step, (jnp.zeros_like(last_val), last_val), traj, reverse=True, unroll=16
            )
            targets = adv + traj.value

            def epoch(c, _):
                state, key = c
                key, key_perm = jax.random.split(key)
                batch = (traj, adv, targets)
                perm = jax.random.permutation(key_perm, num_envs * num_steps)
                batch = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:])[perm], batch)
                mbs = jax.tree.map(
                    lambda x: x.reshape((num_minibatches, minibatch) + x.shape[1:]), batch
                )

                def mb_step(state, mb):
                    t, a, tgt = mb

                    def loss_fn(p):
                        pi, v = network.apply(p, t.obs)
                        lp = pi.log_prob(t.action)
                        vc = t.value + jnp.clip(v - t.value, -clip_eps, clip_eps)
                        vl = 0.5 * jnp.maximum((v - tgt) ** 2, (vc - tgt) ** 2).mean()
                        ratio = jnp.exp(lp - t.log_prob)
                        an = (a - a.mean()) / (a.std() + 1e-8)
                        pl = -jnp.minimum(
                            ratio * an, jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * an
                        ).mean()
                        return pl + vf_coef * vl - ent_coef * pi.entropy().mean()

                    grads = jax.grad(loss_fn)(state.params)
                    return state.apply_gradients(grads=grads), None

                state, _ = jax.lax.scan(mb_step, state, mbs)
                return (state, key), None

            (state, key), _ = jax.lax.scan(epoch, (state, key), None, update_epochs)
            finished = traj.returned.sum().astype(jnp.float32)
            return (state, env_state, obs, ep_ret, key), (
                (traj.ret * traj.returned).sum(),
                finished,
            )

        carry, returns = jax.lax.scan(
            update_step, (state, env_state, obs, ep_ret, key), None, num_updates
        )
        return carry[0].params, returns

    return train, num_updates * num_envs * num_steps


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
