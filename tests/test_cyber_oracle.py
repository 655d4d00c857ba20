"""bench.research.cyber_oracle: the full-state B_line yardstick's rules, by hand, and its play."""

import jax
import jax.numpy as jnp
import numpy as np

from bench.research import cyber_oracle
from jaxrl import envs
from jaxrl.envs.cyber import env as cage
from jaxrl.envs.cyber import red
from jaxrl.envs.cyber import tables as tb


def _state(user: int) -> cage.EnvState:
    _, params = envs.make("CAGE2", max_steps_in_episode=100)
    state = cage.initial_state(jax.random.key(0), params.replace(red_agent=red.BLINE_AGENT))
    return state.replace(bline_user=jnp.int32(user))


def _name(state: cage.EnvState) -> str:
    return tb.action_name(int(cyber_oracle.oracle_action(state)))


def test_oracle_opens_on_user2_only_when_b_line_drew_it_then_decoys_the_hop():
    assert _name(_state(tb.USER1)) == "DecoyFemitter Enterprise1"
    assert _name(_state(tb.USER3)) == "DecoyHarakaSMPT Enterprise0"
    state = _state(tb.USER2)
    assert _name(state) == "DecoyFemitter User2"
    state = state.replace(decoys=state.decoys.at[tb.USER2, tb.FEMITTER].set(True), time=1)
    assert _name(state) == "DecoyTomcat User2"
    state = state.replace(time=2)  # B_line has scanned User2: its decoys buy nothing now
    assert _name(state) == "DecoyFemitter Enterprise1"
    state = state.replace(decoys=state.decoys.at[tb.ENTERPRISE1, tb.FEMITTER].set(True))
    assert _name(state) == "DecoyFemitter Enterprise2"


def test_oracle_removes_what_remove_kills_and_restores_the_rest():
    state = _state(tb.USER1)
    user_shell = state.replace(access=state.access.at[tb.ENTERPRISE1].set(1))
    assert _name(user_shell) == "Remove Enterprise1"
    root = user_shell.replace(root_shell=user_shell.root_shell.at[tb.ENTERPRISE1].set(True))
    assert _name(root) == "Restore Enterprise1"
    hidden = user_shell.replace(hidden_shell=user_shell.hidden_shell.at[tb.ENTERPRISE1].set(True))
    assert _name(hidden) == "Restore Enterprise1"  # brute force: Remove cannot kill it
    escalated = state.replace(access=state.access.at[tb.ENTERPRISE0].set(2))
    both = escalated.replace(access=escalated.access.at[tb.OP_SERVER0].set(1))
    assert _name(escalated) == "Restore Enterprise0"
    assert _name(both) == "Remove Op_Server0"  # Op_Server0 first


def test_oracle_play_is_deterministic_and_returns_only_fall():
    returns, users = cyber_oracle.play(64, seed=3)
    again, _ = cyber_oracle.play(64, seed=3)
    np.testing.assert_array_equal(returns, again)
    assert returns.shape == (3, 64) and set(users.tolist()) <= set(cyber_oracle.USERS)
    assert np.all(returns[0] >= returns[1]) and np.all(returns[1] >= returns[2])
    assert np.all(returns[2] < 0.0)  # every episode pays for a foothold
