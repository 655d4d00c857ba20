"""A short real training run must learn (CartPole, the shipped config)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxrl.commands.evaluate import evaluate
from jaxrl.config import load_config
from jaxrl.run.driver import train

REPO = Path(__file__).resolve().parents[1]
RANDOM_POLICY_RETURN = 22.0  # mean CartPole-v1 return of uniformly random actions


def test_cartpole_learns_in_300k_steps(tmp_path):
    config = load_config(
        REPO / "configs" / "cartpole.yaml",
        ["train.total_steps=300000", "train.progress_bar=false", "checkpoint.every_updates=0"],
    )
    result = train(config, tmp_path / "cartpole", quiet=True)
    returns = [row["rollout/episode_return"] for row in result.history]
    first, last = returns[0], np.nanmean(returns[-2:])
    assert first < 100, returns
    assert last > 10 * RANDOM_POLICY_RETURN, returns
    greedy = evaluate(result.run_dir, episodes=8, actions="greedy")
    assert greedy.mean_return > 10 * RANDOM_POLICY_RETURN, greedy
