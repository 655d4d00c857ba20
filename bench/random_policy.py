"""The return of a uniform random policy: the baseline a trained policy is compared with.

``python -m bench.random_policy --env jumanji:Snake-v1 --episodes 64 --max-steps 4000`` plays the
first episode of each of ``--episodes`` vmapped envs with uniform random actions (one per agent
slot; no action mask) and prints the mean and std of the episode returns, each the mean over the
env's agent slots: the statistic ``python -m jaxrl.evaluate`` reports for a trained policy.
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs import EpisodeStatistics, protocols


def first_episode_returns(
    name: str, episodes: int, max_steps: int, seed: int = 0, make_kwargs: dict | None = None
) -> np.ndarray:
    """float64 ``[episodes]``: each env's first episode return (mean over agent slots) under
    uniform random actions; an episode unfinished after ``max_steps`` steps counts as NaN."""
    env, params = envs.make(name, make_kwargs=make_kwargs)
    env = EpisodeStatistics(env)
    slots = protocols.num_agents(env)
    space = env.action_space(params)

    def sample(key):  # one action per agent slot
        return (
            jax.vmap(space.sample)(jax.random.split(key, slots)) if slots > 1 else space.sample(key)
        )

    def one_env(key):
        key_reset, key_run = jax.random.split(key)
        _, state = env.reset(key_reset, params)

        def body(carry, key_t):
            state, done, ret = carry
            key_act, key_step = jax.random.split(key_t)
            _, state, _, _, _, info = env.step(key_step, state, sample(key_act), params)
            ended = info["episode_done"] & ~done
            ret = jnp.where(ended, jnp.mean(info["episode_return"]), ret)
            return (state, done | info["episode_done"], ret), None

        init = (state, jnp.zeros((), bool), jnp.full((), jnp.nan, jnp.float32))
        (_, _, ret), _ = jax.lax.scan(body, init, jax.random.split(key_run, max_steps))
        return ret

    keys = jax.random.split(jax.random.key(seed), episodes)
    return np.asarray(jax.jit(jax.vmap(one_env))(keys), np.float64)


def main(argv: list[str] | None = None) -> None:
    """Command line: print ``{"env", "episodes", "mean_return", "std_return", "unfinished"}``."""
    parser = argparse.ArgumentParser(prog="python -m bench.random_policy", description=__doc__)
    parser.add_argument("--env", required=True, help="env name, e.g. jumanji:Snake-v1")
    parser.add_argument("--episodes", type=int, default=64, help="vmapped envs, one episode each")
    parser.add_argument("--max-steps", type=int, default=1000, help="steps played per env")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed")
    args = parser.parse_args(argv)
    returns = first_episode_returns(args.env, args.episodes, args.max_steps, args.seed)
    done = returns[~np.isnan(returns)]
    print(
        json.dumps(
            {
                "env": args.env,
                "episodes": int(done.size),
                "mean_return": float(done.mean()) if done.size else None,
                "std_return": float(done.std()) if done.size else None,
                "unfinished": int(np.isnan(returns).sum()),
            }
        )
    )


if __name__ == "__main__":
    main()
