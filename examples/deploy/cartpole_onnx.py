"""Play gymnasium's CartPole-v1 with an exported policy: onnxruntime and NumPy, no JAX.

    jaxrl export --run-dir runs/cartpole --format onnx --out cartpole.onnx
    python examples/deploy/cartpole_onnx.py cartpole.onnx --episodes 5

The file's input is ``obs [b, 4]`` float32 and its outputs ``action [b]`` int32, ``logits
[b, 2]`` and ``value [b]``; the observation normaliser is inside the file.
"""

import argparse

import gymnasium as gym
import numpy as np
import onnxruntime as ort


def play(model: str, episodes: int, seed: int) -> list[float]:
    """The return of each of ``episodes`` episodes, acting with the file's ``action``."""
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    env = gym.make("CartPole-v1")
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            (action,) = session.run(["action"], {"obs": obs[None].astype(np.float32)})
            obs, reward, terminated, truncated, _ = env.step(int(action[0]))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="the .onnx file written by jaxrl export")
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    returns = play(args.model, args.episodes, args.seed)
    print(f"returns {returns}; mean {np.mean(returns):.1f}")
