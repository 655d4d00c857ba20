"""Return of a uniform-random policy on a run's env: the baseline of ``jaxrl.evaluate``.

    python -m bench.random_policy --run-dir runs/craftax [--episodes 16] [--seed 0] [--json]

Plays one episode in each of ``episodes`` vmapped envs (the run's ``env.name``,
``env.make_kwargs`` and ``env.kwargs``, as ``jaxrl.evaluate`` builds them) with actions drawn
uniformly from the env's action space, until every episode has ended (terminated or
truncated); prints the mean and standard deviation of the episode returns.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import yaml
from flax import struct

import envs


class RandomCarry(struct.PyTreeNode):
    """The random episodes' loop carry; every field ``[E]`` (one per episode)."""

    key: jax.Array  # () the loop's key
    state: Any  # [E] env states
    episode_return: jax.Array  # [E] float32, summed reward until the first episode end
    done: jax.Array  # [E] bool, the first episode has ended


def random_returns(env: Any, params: Any, episodes: int, seed: int) -> jax.Array:
    """float32 ``[episodes]`` returns of uniform-random first episodes (one jitted loop)."""
    space = env.action_space(params)

    def step(carry: RandomCarry) -> RandomCarry:
        key, key_act, key_step = jax.random.split(carry.key, 3)
        actions = jax.vmap(space.sample)(jax.random.split(key_act, episodes))
        keys = jax.random.split(key_step, episodes)
        _, state, reward, terminated, truncated, _ = jax.vmap(env.step, (0, 0, 0, None))(
            keys, carry.state, actions, params
        )
        episode_return = carry.episode_return + jnp.where(carry.done, 0.0, reward)
        done = carry.done | terminated | truncated
        return RandomCarry(key=key, state=state, episode_return=episode_return, done=done)

    key, key_reset = jax.random.split(jax.random.key(seed))
    _, state = jax.vmap(env.reset, (0, None))(jax.random.split(key_reset, episodes), params)
    zeros = jnp.zeros(episodes, jnp.float32)
    init = RandomCarry(key=key, state=state, episode_return=zeros, done=zeros > 0)
    run = jax.jit(lambda c: jax.lax.while_loop(lambda c: ~c.done.all(), step, c))
    return run(init).episode_return


def main(argv: list[str] | None = None) -> dict:
    """Parse arguments, play the random episodes and print the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, help="a run directory of jaxrl.train")
    parser.add_argument("--episodes", type=int, default=16, help="episodes (vmapped)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    config = yaml.safe_load((Path(args.run_dir) / "config.yaml").read_text())["env"]
    env, params = envs.make(
        config["name"], source=config.get("source", ""),
        make_kwargs=config.get("make_kwargs") or {}, **(config.get("kwargs") or {}),
    )  # fmt: skip
    returns = random_returns(env, params, args.episodes, args.seed)
    result = {
        "env": config["name"],
        "episodes": args.episodes,
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
    }
    print(json.dumps(result) if args.json else
          f"random policy on {result['env']}: {result['mean_return']:.3f} "
          f"+- {result['std_return']:.3f} over {args.episodes} episodes")  # fmt: skip
    return result


if __name__ == "__main__":
    main()
