"""Play gymnasium's CartPole-v1 with an exported recurrent policy, stepping its carry by hand.

    jaxrl train --config configs/cartpole_lstm.yaml --run-dir runs/cartpole_lstm
    jaxrl export --run-dir runs/cartpole_lstm --format onnx --out lstm.onnx
    python examples/deploy/recurrent_onnx.py lstm.onnx --envs 4 --steps 1000

A recurrent file takes ``obs [b, 4]``, ``carry_in [b, C]`` float32 and ``reset [b]`` bool and
returns ``action [b]``, ``logits``, ``value`` and ``carry_out [b, C]``. Feed each step's
``carry_out`` back as the next ``carry_in``; ``reset`` is True on the first step of an episode
(the file zeroes that row's carry itself). onnxruntime and NumPy only, no JAX.
"""

import argparse

import gymnasium as gym
import numpy as np
import onnxruntime as ort


def play(model: str, envs: int, steps: int, seed: int) -> list[float]:
    """Returns of the episodes that end within ``steps`` steps of ``jaxrl.envs`` envs."""
    ort.set_default_logger_severity(3)  # errors only
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    width = next(i.shape[1] for i in session.get_inputs() if i.name == "carry_in")
    same_step = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}  # done: obs is the next
    vec = gym.make_vec("CartPole-v1", envs, vectorization_mode="sync", vector_kwargs=same_step)
    obs, _ = vec.reset(seed=seed)
    carry = np.zeros((envs, width), np.float32)  # any value: reset clears it
    reset = np.ones(envs, bool)  # every row starts an episode
    total, returns = np.zeros(envs), []
    for _ in range(steps):
        action, carry = session.run(
            ["action", "carry_out"],
            {"obs": obs.astype(np.float32), "carry_in": carry, "reset": reset},
        )
        obs, reward, terminated, truncated, _ = vec.step(action)
        total += reward
        reset = terminated | truncated  # SAME_STEP: obs already starts the next episode
        returns += total[reset].tolist()
        total[reset] = 0.0
    vec.close()
    return returns


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="the .onnx file written by jaxrl export")
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    returns = play(args.model, args.envs, args.steps, args.seed)
    mean = np.mean(returns) if returns else float("nan")
    print(f"{len(returns)} episodes; mean return {mean:.1f}")
