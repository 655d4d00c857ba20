"""``rollout/reward/<term>`` against a hand count (issue 22).

The learner's actor head is set to one action (logit 50 on it, 0 elsewhere: no Gumbel or
inverse-CDF draw in float32 picks another), the train chunk runs one update, and a plain
Python loop steps the same wrapped env from the same env states with the same keys (split
from the runner's key as :func:`jaxrl.run.train_step.update` and :func:`jaxrl.core.rollout.rollout`
split it) and the same actions, summing each term per learner car and finished episode.
Episodes are 8 steps and rollouts 16, so every step belongs to an episode that ends in the
update and the in-graph metric (terms summed over the rollout, divided by the episodes that
ended) is exactly the per-episode mean.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.config import load_config
from jaxrl.core.match import step_keys
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_run, make_plan, train_chunk

REPO = Path(__file__).resolve().parents[1]
EPISODE, ROLLOUT = 8, 16
TINY = [
    "env.num_envs=2",
    f"env.kwargs.max_steps_in_episode={EPISODE}",
    f"ppo.num_steps={ROLLOUT}",
    "ppo.update_epochs=1",
    "ppo.num_minibatches=1",
    "network.hidden_sizes=[8]",
    "train.updates_per_chunk=1",
    "train.progress_bar=false",
    "precision=float32",
]
# config, overrides, the learner's one action
CASES = {
    # Soccer 1v1 against the full RulePolicy; action 15 = full throttle, straight, boost.
    "soccer": ("soccer_1v1.yaml", [], 15),
    # CAGE2 without its GRU (the core plays no part in a fixed action); action 0 = sleep.
    "cage2": ("cage2.yaml", ["network.core=none", "ppo.sequence_length=0"], 0),
}


def _one_action(params, action: int):
    """``params`` whose actor head gives logit 50 to ``action`` and 0 to every other."""
    head = params["params"]["actor_head"]
    fixed = {
        "kernel": jnp.zeros_like(head["kernel"]),
        "bias": jnp.zeros_like(head["bias"]).at[action].set(50.0),
    }
    return {**params, "params": {**params["params"], "actor_head": fixed}}


def _by_hand(setup, runner, action: int) -> tuple[dict[str, float], int]:
    """Each term's mean over the learner cars' finished episodes, and their count, from a
    Python loop of env steps."""
    layout, env = setup.layout, setup.match.env
    two_team = layout.two_team
    num_envs = layout.total_envs
    # The key splits of update() and rollout(): one key per rollout step, one per env in it.
    _, key_rollout, _, _ = jax.random.split(runner.key, 4)
    keys = [step_keys(setup.match, k) for k in jax.random.split(key_rollout, ROLLOUT)]
    params = make_plan(setup, runner.features, runner.hyper).env_params
    assert not layout.per_env_params
    env_step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))

    state = runner.match.env_state
    if two_team:  # the learner is blue (team 0) in every env: slots 0..2 blue, 3..5 orange
        np.testing.assert_array_equal(runner.match.side, 0)
        scripted = jax.jit(jax.vmap(env.scripted_team_actions, in_axes=(0, 0, None, None)))
        size = layout.team_size
        orange_obs = runner.match.opponent.obs.reshape((num_envs, size, -1))
    running, finished = None, None
    for t in range(ROLLOUT):
        if two_team:
            orange = scripted(
                keys[t].scripted, orange_obs, params.opponent_kind, params.opponent_skill
            )
            actions = jnp.concatenate([jnp.full((num_envs, size), action, jnp.int32), orange], 1)
        else:
            actions = jnp.full((num_envs,), action, jnp.int32)
        obs, state, _, terminated, truncated, info = env_step(keys[t].env, state, actions, params)
        terms = {name: np.asarray(value) for name, value in info["reward_terms"].items()}
        if two_team:  # the learner's cars, inactive slots zeroed: [N, S]
            mine = np.asarray(info["agent_mask"])[:, :size]
            terms = {name: np.where(mine, value[:, :size], 0.0) for name, value in terms.items()}
            orange_obs = obs[:, size:]
        else:  # one car an env: [N, 1]
            mine = np.ones((num_envs, 1), bool)
            terms = {name: value[:, None] for name, value in terms.items()}
        if running is None:
            running = {name: np.zeros_like(value, np.float64) for name, value in terms.items()}
            finished = {name: [] for name in terms}
        done = np.asarray(terminated | truncated)
        for name, value in terms.items():
            running[name] += value
            for e in np.flatnonzero(done):  # one episode per active learner car
                finished[name].extend(running[name][e][mine[e]])
                running[name][e] = 0.0
    # Every step lies in an episode that ended in the rollout: 2 per env and car.
    count = len(next(iter(finished.values())))
    assert done.all() and count == 2 * int(mine.sum())
    return {name: float(np.mean(values)) for name, values in finished.items()}, count


@pytest.mark.parametrize("case", list(CASES))
def test_reward_terms_per_episode_by_hand(case):
    config_name, overrides, action = CASES[case]
    config = load_config(REPO / "configs" / config_name, TINY + overrides)
    setup = make_setup(config)
    assert setup.reward_term_names, f"{case} reports no info['reward_terms']"
    runner = init_run(setup)
    runner = runner.replace(params=_one_action(runner.params, action))
    expected, episodes = _by_hand(setup, runner, action)

    _, metrics = jax.jit(lambda r: train_chunk(setup, r))(runner)
    assert float(metrics["rollout/episodes"]) == episodes
    got = {name: float(metrics[f"rollout/reward/{name}"]) for name in setup.reward_term_names}
    assert set(got) == set(expected)
    assert any(value != 0.0 for value in expected.values()), expected  # not vacuous
    for name in got:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)
    if case == "soccer":  # one car a team: team spirit blends a car with itself, so the
        # terms add up to the return
        total = sum(got.values())
        np.testing.assert_allclose(total, float(metrics["rollout/episode_return"]), rtol=1e-5)
