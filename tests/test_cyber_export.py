"""bench.cyber_export and cyber_peer.PolicyBlue: a jaxrl defender played with numpy only.

PolicyBlue plays the exported defender in real CybORG from what a Blue agent has there (the
52-bit table, its own actions and their success). Here it plays beside jaxrl's CAGE2: at every
step its observation must equal ``jaxrl.envs.cyber.env.observe``, its logits the network's, and
its CybORG action ``expand_action``'s.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bench import cyber_export
from bench.research.cyber_peer import PairBlue, PolicyBlue, make_blue
from jaxrl.envs.cyber import env as cage
from jaxrl.envs.cyber import fingerprint, red
from jaxrl.envs.cyber import tables as tb
from jaxrl.run.driver import train
from jaxrl.run.play import load_policy
from tests.conftest import make_tiny_config
from tests.test_cyber_defender import TINY_CAGE

TINY_HISTORY = (*TINY_CAGE, "env.kwargs.action_set=reduced", "env.kwargs.obs_mode=history")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A tiny reduced-set, history-observation run, its export and its restored policy."""
    root = tmp_path_factory.mktemp("cage_export")
    run_dir = root / "run"
    train(make_tiny_config(*TINY_HISTORY, config="cage2.yaml"), run_dir, quiet=True)
    path = root / "defender.npz"
    assert cyber_export.main(["--run-dir", str(run_dir), "--out", str(path)]) == 0
    setup, policy, _ = load_policy(run_dir)
    return run_dir, path, setup, policy


@pytest.mark.parametrize("red_agent", [red.BLINE_AGENT, red.MEANDER_AGENT])
def test_policy_blue_sees_and_plays_as_jaxrl(exported, red_agent):
    _, path, setup, policy = exported
    params = setup.env_params.replace(red_agent=red_agent, max_steps_in_episode=100)
    assert (params.obs_mode, params.action_set) == ("history", "reduced")
    network = setup.network

    @jax.jit
    def forward(hidden, obs, is_first):
        return network.apply(policy.params, hidden, obs[None, None], is_first[None, None])

    @jax.jit
    def step(key, state, action):
        played = cage.expand_action(state, action, "reduced", params.fix_bugs)
        after, _, _ = cage.transition(key, state, played, params)
        return after, played

    blue = PolicyBlue(str(path))
    rng = np.random.default_rng(red_agent)
    # Random reduced actions, decoy macros and Restores often (the bookkeeping they need).
    weights = np.repeat([0.15, 0.1, 0.55, 0.2], len(tb.REDUCED_HOSTS))
    kinds_played = set()
    for episode in range(3):
        state = cage.initial_state(jax.random.key(episode), params)
        hidden = network.initial_hidden(1)
        blue.reset()
        success = None
        for t in range(100):
            obs = cage.observe(state, params)
            blue._record(np.asarray(obs[:52]), success)
            mine = blue.observation(np.asarray(obs[:52]))
            np.testing.assert_array_equal(mine, np.asarray(obs), err_msg=f"step {t}")
            hidden, logits, _ = forward(hidden, obs, jnp.asarray(t == 0))
            np.testing.assert_allclose(blue.logits(mine), logits[0, 0], rtol=1e-4, atol=1e-5)
            action = int(rng.choice(tb.NUM_REDUCED_ACTIONS, p=weights / weights.sum()))
            before = state
            state, played = step(jax.random.key(1000 * episode + t), state, jnp.int32(action))
            assert blue.cyborg_action(action) == int(played), f"step {t}"
            blue.last_action = int(played)
            blue.time += 1
            placed = np.asarray(state.decoys & ~before.decoys)
            # A Decoy action succeeds where it placed its decoy (CybORG's success flag).
            success = bool(placed.any())
            kinds_played.add(tb.REDUCED_KINDS[action // len(tb.REDUCED_HOSTS)])
    assert kinds_played == set(tb.REDUCED_KINDS)


def test_act_chains_record_observe_and_network(exported):
    _, path, _, _ = exported
    blue, again = PolicyBlue(str(path)), PolicyBlue(str(path))
    table = np.zeros(52, np.float32)
    table[4 * tb.USER1] = 1  # a scan of User1
    first = blue.act(table, None)
    again._record(table, None)
    logits = again.logits(again.observation(table))
    assert first == again.cyborg_action(int(np.argmax(logits)))
    assert blue.time == 1 and blue.last_action == first
    assert blue.scan_history[tb.USER1] == 2 and blue.last_seen[tb.USER1]


def test_decoy_macro_follows_the_greedy_order_and_ports(exported):
    _, path, _, _ = exported
    macro = tb.REDUCED_KINDS.index("decoy") * len(tb.REDUCED_HOSTS)
    macro += list(tb.REDUCED_HOSTS).index(tb.ENTERPRISE0)
    wanted = [tb.HARAKA_SMTP, tb.TOMCAT, tb.VSFTPD]  # 2.1: Vsftpd holds port 80, so no Apache
    for bugs, order in ((False, wanted), (True, [*wanted, tb.APACHE])):
        blue = PolicyBlue(str(path), fix_bugs=bugs)
        for decoy in order:
            assert blue.cyborg_action(macro) == tb.DECOY + 13 * decoy + tb.ENTERPRISE0
            blue.decoys[tb.ENTERPRISE0, decoy] = True  # CybORG said it succeeded
        # Nothing left: the first type again (CybORG refuses it; nothing changes).
        assert blue.cyborg_action(macro) == tb.DECOY + 13 * tb.HARAKA_SMTP + tb.ENTERPRISE0
    # A Restore clears the host's decoys in the bookkeeping.
    blue.last_action = tb.RESTORE + tb.ENTERPRISE0
    blue._record(np.zeros(52), True)
    assert not blue.decoys[tb.ENTERPRISE0].any()


def test_export_bad_input_is_one_line(exported, tmp_path, capsys):
    run_dir, _, _, _ = exported
    out = str(tmp_path / "x.npz")
    cases = [
        (["--run-dir", str(tmp_path), "--out", out], "not a run directory"),
        (["--run-dir", str(run_dir), "--member", "1", "--out", out], "has members 0..0"),
    ]
    for argv, message in cases:
        assert cyber_export.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:") and message in err, err
    with pytest.raises(ValueError, match="needs --policy"):
        make_blue("policy", 0)


def _flipped(path, tmp_path):
    """The exported defender with its actor head negated: another network, same format."""
    data = dict(np.load(path))
    for leaf in ("kernel", "bias"):
        data[f"params/actor_head/{leaf}"] = -data[f"params/actor_head/{leaf}"]
    flipped = tmp_path / "flipped.npz"
    np.savez(flipped, **data)
    return str(flipped)


@pytest.mark.parametrize("red_agent", [red.BLINE_AGENT, red.MEANDER_AGENT])
def test_pair_blue_plays_b_line_until_the_fingerprint_names_meander(exported, tmp_path, red_agent):
    _, path, setup, _ = exported
    assert PairBlue.DECIDE_AT == fingerprint.DECIDE_AT
    assert PairBlue.UNDECIDED == fingerprint.UNDECIDED
    assert (PairBlue.BLINE, PairBlue.MEANDER) == (red.BLINE_AGENT, red.MEANDER_AGENT)
    params = setup.env_params.replace(red_agent=red_agent, max_steps_in_episode=100)
    meander = _flipped(path, tmp_path)
    pair = make_blue("policy", 0, str(path), meander_policy=meander)
    alone = (PolicyBlue(str(path)), PolicyBlue(meander))
    transition = jax.jit(lambda key, state, action: cage.transition(key, state, action, params)[0])
    for episode in range(2):
        state = cage.initial_state(jax.random.key(episode), params)
        pair.reset()
        for player in alone:
            player.reset()
        verdict = jnp.full((1,), fingerprint.UNDECIDED, jnp.int32)
        success, chose = None, []
        for t in range(50):
            obs = cage.observe(state, params)
            table = np.asarray(obs[:52])
            verdict = fingerprint.update_verdict(verdict, obs[None], jnp.asarray([t == 0]))
            for player in alone:
                player._record(table, success)
            wanted = [
                p.cyborg_action(int(np.argmax(p.logits(p.observation(table))))) for p in alone
            ]
            played = pair.act(table, success)
            assert pair.verdict == int(verdict[0]), f"step {t}"
            meander_plays = pair.verdict == red.MEANDER_AGENT
            assert played == wanted[int(meander_plays)], f"step {t}"
            chose.append(meander_plays)
            for player in alone:
                player.last_action, player.time = played, player.time + 1
            before = state
            state = transition(jax.random.key(100 * episode + t), state, jnp.int32(played))
            success = bool(np.asarray(state.decoys & ~before.decoys).any())
        # The first DECIDE_AT steps are B_line's; the verdict names this episode's Red.
        decided = [red_agent == red.MEANDER_AGENT] * (50 - fingerprint.DECIDE_AT)
        assert chose == [False] * fingerprint.DECIDE_AT + decided
        assert pair.verdict == red_agent


def test_pair_blue_networks_differ_and_bad_input_is_refused(exported, tmp_path):
    _, path, _, _ = exported
    b_line, meander = PolicyBlue(str(path)), PolicyBlue(_flipped(path, tmp_path))
    obs = b_line.observation(np.zeros(52))
    assert np.argmax(b_line.logits(obs)) != np.argmax(meander.logits(obs))
    with pytest.raises(ValueError, match="needs --blue policy"):
        make_blue("sleep", 0, meander_policy=str(path))
