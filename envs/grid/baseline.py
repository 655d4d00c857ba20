"""Hearts per agent per episode of the uniform random policy in MettaArena (the learning yardstick).

    python -m jaxrl.envs.grid.baseline [--episodes 32] [--reward-mode 1] [--seed 0]

Plays ``--episodes`` full episodes (vmapped envs, 1000 steps each) with every agent drawing
its actions uniformly from the 16, and prints one JSON line: the mean over agents and
episodes of the hearts each agent took from altars, and the mean episode return per agent.
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp

from jaxrl.envs.grid.env import EnvParams, MettaArena
from jaxrl.envs.grid.rules import NUM_ACTIONS


def random_play(key: jax.Array, env: MettaArena, params: EnvParams, episodes: int, steps: int):
    """``(hearts [episodes, A], return [episodes, A])``: ``steps`` random steps per env."""
    key_reset, key_play = jax.random.split(key)
    del key
    _, state = jax.vmap(env.reset_env, (0, None))(jax.random.split(key_reset, episodes), params)

    def body(carry, key):
        state, total = carry
        key_act, key_step = jax.random.split(key)
        action = jax.random.randint(key_act, (episodes, env.num_agents), 0, NUM_ACTIONS)
        state, reward, _ = jax.vmap(env.transition, (0, 0, 0, None))(
            jax.random.split(key_step, episodes), state, action, params
        )
        return (state, total + reward), None

    zeros = jnp.zeros((episodes, env.num_agents), jnp.float32)
    (state, total), _ = jax.lax.scan(body, (state, zeros), jax.random.split(key_play, steps))
    return state.world.hearts, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=32, help="episodes (vmapped envs)")
    parser.add_argument("--reward-mode", type=int, default=1, help="0 hearts, 1 shaped")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    env = MettaArena()
    params = env.default_params.replace(reward_mode=args.reward_mode)
    play = jax.jit(random_play, static_argnums=(1, 3, 4))
    steps = int(params.max_steps_in_episode)
    hearts, total = play(jax.random.key(args.seed), env, params, args.episodes, steps)
    print(
        json.dumps(
            {
                "policy": "uniform random",
                "episodes": args.episodes,
                "agents": env.num_agents,
                "reward_mode": args.reward_mode,
                "hearts_per_agent_per_episode": float(hearts.mean()),
                "episodes_with_a_heart": int((hearts.sum(-1) > 0).sum()),
                "return_per_agent": float(total.mean()),
            }
        )
    )


if __name__ == "__main__":
    main()
