"""Stable-Baselines3 PPO throughput on CartPole-v1: the external baseline jaxrl compares against.

Standalone: it does not import jaxrl, and nothing in the project (tests included) imports it.
It needs PyTorch and Stable-Baselines3 in a *separate* environment, e.g.::

    python3.11 -m venv /tmp/sb3venv
    /tmp/sb3venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu
    /tmp/sb3venv/bin/pip install stable-baselines3 gymnasium
    /tmp/sb3venv/bin/python bench/research/sb3_ppo.py --envs 8 --steps 100000

It times ``model.learn(total_timesteps)`` (rollouts and updates; model construction is
excluded) and prints one JSON line. By default the hyperparameters follow
``configs/cartpole.yaml`` as far as SB3 allows: 128-step rollouts, 4 epochs of 4 minibatches,
lr 2.5e-4 annealed linearly to 0, separate 64-64 tanh actor and critic, value clipping at 0.2.
(SB3's value loss is the mean squared error of the clipped prediction only, without jaxrl's
0.5 factor and max with the unclipped error.) ``--sb3-defaults`` uses SB3's own PPO defaults
instead (2048-step rollouts, batch 64, 10 epochs, lr 3e-4, no entropy bonus).

SB3 always finishes whole rollouts, so ``total_steps`` is ``--steps`` rounded up to a
multiple of ``envs * n_steps``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import stable_baselines3
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv


def jaxrl_cartpole_hyperparameters(n_envs: int) -> dict:
    """SB3 ``PPO`` keyword arguments matching ``configs/cartpole.yaml``."""
    n_steps = 128
    return dict(
        n_steps=n_steps,
        batch_size=n_envs * n_steps // 4,  # 4 minibatches
        n_epochs=4,
        learning_rate=lambda progress_remaining: 2.5e-4 * progress_remaining,  # 1 -> 0
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        clip_range_vf=0.2,
        ent_coef=0.01,
        vf_coef=0.5,
        max_grad_norm=0.5,
        policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=8, help="parallel CartPole envs")
    parser.add_argument("--steps", type=int, default=100_000, help="total env steps to train")
    parser.add_argument("--subproc", action="store_true", help="SubprocVecEnv (default Dummy)")
    parser.add_argument("--sb3-defaults", action="store_true", help="SB3's default PPO hparams")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    vec_env_cls = SubprocVecEnv if args.subproc else DummyVecEnv
    env = make_vec_env("CartPole-v1", n_envs=args.envs, seed=args.seed, vec_env_cls=vec_env_cls)
    hparams = {} if args.sb3_defaults else jaxrl_cartpole_hyperparameters(args.envs)
    model = PPO("MlpPolicy", env, seed=args.seed, device="cpu", verbose=0, **hparams)

    start = time.perf_counter()
    model.learn(total_timesteps=args.steps)
    seconds = time.perf_counter() - start
    env.close()

    returns = [info["r"] for info in list(model.ep_info_buffer)[-20:]]
    print(
        json.dumps(
            {
                "envs": args.envs,
                "vec_env": vec_env_cls.__name__,
                "total_steps": int(model.num_timesteps),
                "seconds": round(seconds, 3),
                "sps": round(model.num_timesteps / seconds, 1),
                "torch": torch.__version__,
                "sb3": stable_baselines3.__version__,
                "torch_threads": torch.get_num_threads(),  # torch's default, not set here
                "hyperparameters": "sb3-defaults" if args.sb3_defaults else "jaxrl-cartpole",
                "final_mean_return": float(np.mean(returns)) if returns else None,
            }
        )
    )


if __name__ == "__main__":
    main()
