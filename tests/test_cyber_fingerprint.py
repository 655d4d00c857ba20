"""jaxrl.envs.cyber.fingerprint: telling B_line from Meander by what Blue sees."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.envs.cyber import Cage2, EnvParams, blue, fingerprint, observe, red

EPISODES = 48  # per Red, Blue and bug setting
STEPS = 30  # one 30-step episode each (the env's length is set longer: no reset inside)


@pytest.fixture(scope="module")
def verdicts() -> dict[tuple[str, int, bool], np.ndarray]:
    """Per (Blue, Red, fix_bugs): the verdict after each observation, int32 [E, STEPS + 1]."""
    env = Cage2()
    out = {}
    for blue_name in ("sleep", "random", "react_decoy"):  # random Removes and Restores too
        policy = blue.BASELINES[blue_name]

        @jax.jit
        def run(red_agent, fix_bugs, key, policy=policy):
            params = EnvParams(
                red_agent=red_agent, fix_bugs=fix_bugs, max_steps_in_episode=100,
                obs_mode="extended",
            )  # fmt: skip
            played = blue.play(env, policy, key, params, STEPS)
            first = env.reset(jax.random.split(key)[0], params)[0]  # play's own reset
            obs = jnp.concatenate([first[None], jax.vmap(observe, (0, None))(played.state, params)])
            is_first = jnp.arange(STEPS + 1) == 0

            def step(verdict, inputs):
                verdict = fingerprint.update_verdict(verdict, *inputs)
                return verdict, verdict

            start = jnp.full((), fingerprint.UNDECIDED, jnp.int32)
            return jax.lax.scan(step, start, (obs, is_first))[1]

        batch = jax.vmap(run, in_axes=(None, None, 0))
        keys = jax.random.split(jax.random.key(5), EPISODES)
        for red_agent in (red.BLINE_AGENT, red.MEANDER_AGENT):
            for fix_bugs in (False, True):
                out[blue_name, red_agent, fix_bugs] = np.asarray(batch(red_agent, fix_bugs, keys))
    return out


def test_the_verdict_names_the_red_from_step_3_on_whatever_blue_does(verdicts):
    for (blue_name, red_agent, fix_bugs), v in verdicts.items():
        case = f"{blue_name}, Red {red.RED_AGENTS[red_agent]}, fix_bugs={fix_bugs}"
        assert (v[:, : fingerprint.DECIDE_AT] == fingerprint.UNDECIDED).all(), case
        assert (v[:, fingerprint.DECIDE_AT :] == red_agent).all(), case


def test_hand_built_observations():
    obs = np.zeros((4, 79), np.float32)
    obs[:, -1] = 0.03  # step 3
    obs[1, 52 + 9] = 0.5  # one host touched before (User1): B_line's pattern
    obs[2, 52 + 9], obs[2, 52 + 10] = 0.5, 1.0  # two hosts: Meander's
    obs[3, 52 + 9], obs[3, 52 + 10] = 0.5, 1.0
    undecided = jnp.full((4,), fingerprint.UNDECIDED, jnp.int32)
    verdict = fingerprint.update_verdict(undecided, jnp.asarray(obs), jnp.zeros(4, bool))
    assert verdict.tolist() == [red.BLINE_AGENT, red.BLINE_AGENT] + [red.MEANDER_AGENT] * 2
    # Latched: later observations do not change it; a new episode clears it.
    later = obs.copy()
    later[:, 52:65] = 1.0
    later[:, -1] = 0.10
    is_first = jnp.array([False, False, False, True])
    again = fingerprint.update_verdict(verdict, jnp.asarray(later), is_first)
    assert again.tolist() == [
        red.BLINE_AGENT,
        red.BLINE_AGENT,
        red.MEANDER_AGENT,
        red.MEANDER_AGENT,
    ]
    early = later.copy()
    early[:, -1] = 0.02  # step 2: too early to decide
    cleared = fingerprint.update_verdict(verdict, jnp.asarray(early), jnp.ones(4, bool))
    assert cleared.tolist() == [fingerprint.UNDECIDED] * 4
