"""Return of a uniform-random policy: the baseline a trained policy is compared with.

    python -m bench.random_policy --run-dir runs/craftax [--episodes 16] [--seed 0] [--json]
    python -m bench.random_policy --env jumanji:Snake-v1 [--make-kwargs JSON] [--episodes 64]

Plays the first episode of each of ``episodes`` vmapped envs (a run's ``env.name``,
``env.make_kwargs`` and ``env.kwargs``, as ``jaxrl.commands.evaluate`` builds them, or
``--env``) with actions drawn uniformly, one per agent slot: among the legal actions where the
env declares an action mask (:class:`jaxrl.envs.protocols.ActionMaskEnv`), from the whole action
space otherwise.
Prints the mean and standard deviation of the episode returns, each the mean over the env's
agent slots (the statistic ``python -m jaxrl.evaluate`` reports). Two-team envs are not
covered (their baseline is the league's scripted opponent).
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

from jaxrl import envs
from jaxrl.envs import EpisodeStatistics, protocols
from jaxrl.envs.wrappers import legal_actions


class RandomCarry(struct.PyTreeNode):
    """The random episodes' loop carry; every field but ``key`` is ``[E]`` (one per episode)."""

    key: jax.Array  # () the loop's key
    state: Any  # [E] env states
    episode_return: jax.Array  # [E] float32, the first episode's return (mean over slots)
    done: jax.Array  # [E] bool, the first episode has ended


def random_action(env: Any, params: Any, state: Any, key: jax.Array) -> jax.Array:
    """One uniform action per agent slot of one env: ``[*action]``, or ``[A, *action]``; legal
    where the env declares a mask (uniform over the legal actions of each slot)."""
    slots = protocols.num_agents(env)
    mask = legal_actions(env, state, params)
    if mask is not None:
        logits = jnp.where(mask, 0.0, -jnp.inf)  # [n] or [A, n]
        return jax.random.categorical(key, logits).astype(jnp.int32)
    space = env.action_space(params)
    if slots > 1:
        return jax.vmap(space.sample)(jax.random.split(key, slots))
    return space.sample(key)


def random_returns(env: Any, params: Any, episodes: int, seed: int) -> jax.Array:
    """float32 ``[episodes]`` returns of uniform-random first episodes (one jitted loop)."""
    env = EpisodeStatistics(env)

    def step(carry: RandomCarry) -> RandomCarry:
        key, key_act, key_step = jax.random.split(carry.key, 3)
        act = jax.vmap(random_action, (None, None, 0, 0))
        actions = act(env, params, carry.state, jax.random.split(key_act, episodes))
        keys = jax.random.split(key_step, episodes)
        _, state, _, _, _, info = jax.vmap(env.step, (0, 0, 0, None))(
            keys, carry.state, actions, params
        )
        ended = info["episode_done"] & ~carry.done
        returns = info["episode_return"].reshape(episodes, -1).mean(-1)
        episode_return = jnp.where(ended, returns, carry.episode_return)
        done = carry.done | info["episode_done"]
        return RandomCarry(key=key, state=state, episode_return=episode_return, done=done)

    key, key_reset = jax.random.split(jax.random.key(seed))
    _, state = jax.vmap(env.reset, (0, None))(jax.random.split(key_reset, episodes), params)
    zeros = jnp.zeros(episodes, jnp.float32)
    init = RandomCarry(key=key, state=state, episode_return=zeros, done=zeros > 0)
    run = jax.jit(lambda c: jax.lax.while_loop(lambda c: ~c.done.all(), step, c))
    return run(init).episode_return


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m bench.random_policy``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.random_policy", description=__doc__.splitlines()[0]
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--run-dir", help="a run directory of jaxrl train (its env and params)"
    )
    where.add_argument("--env", help="an env name, e.g. jumanji:Snake-v1 (default params)")
    parser.add_argument(
        "--make-kwargs", default="{}", help="with --env: the factory's arguments (JSON)"
    )
    parser.add_argument("--episodes", type=int, default=16, help="episodes (vmapped)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


def make_env(args: argparse.Namespace) -> tuple[str, Any, Any]:
    """``(name, env, params)`` of the run directory's config, or of ``--env``."""
    if args.env:
        return (args.env, *envs.make(args.env, make_kwargs=json.loads(args.make_kwargs)))
    config = yaml.safe_load((Path(args.run_dir) / "config.yaml").read_text())["env"]
    env, params = envs.make(
        config["name"], source=config.get("source", ""),
        make_kwargs=config.get("make_kwargs") or {}, **(config.get("kwargs") or {}),
    )  # fmt: skip
    return config["name"], env, params


def main(argv: list[str] | None = None) -> dict:
    """Parse arguments, play the random episodes and print the result."""
    args = build_parser().parse_args(argv)
    name, env, params = make_env(args)
    returns = random_returns(env, params, args.episodes, args.seed)
    result = {
        "env": name,
        "episodes": args.episodes,
        "legal_only": protocols.action_masked(env) is not None,
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
    }
    legal = " (legal actions only)" if result["legal_only"] else ""
    print(json.dumps(result) if args.json else
          f"random policy on {name}{legal}: {result['mean_return']:.3f} "
          f"+- {result['std_return']:.3f} over {args.episodes} episodes")  # fmt: skip
    return result


if __name__ == "__main__":
    main()
