"""CAGE2 (envs/cyber): contract, action layout, Blue table, Red agents, reward, baselines."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bench.research import cyber_fidelity
from jaxrl import envs
from jaxrl.envs.cyber import blue, red
from jaxrl.envs.cyber import env as cage
from jaxrl.envs.cyber import tables as tb

ENV, PARAMS = envs.make("CAGE2")
QUIET = PARAMS.replace(green_agent=False)  # no GreenAgent noise: deterministic tables
TRACES = {"step": 0, "rollout": 0}


@jax.jit
def _step(key, state, action, params):
    TRACES["step"] += 1
    return ENV.step(key, state, action, params)


@jax.jit
def _transition(key, state, action, params):
    return cage.transition(key, state, action, params)


_transition_with = jax.jit(cage.transition_with)


@jax.jit
def _apply_red(draws, state, kind, target, fix_bugs):
    return cage.apply_red(draws, state, kind, target, fix_bugs)


@functools.partial(jax.jit, static_argnames=("policy", "num_envs", "num_steps"))
def _rollout(key, params, policy, num_envs, num_steps):
    """Vmapped episodes of a Blue baseline: (reward, terminated, truncated, red_success,
    states), each [B, T]."""
    TRACES["rollout"] += 1

    def episode(key):
        played = blue.play(ENV, blue.BASELINES[policy], key, params, num_steps)
        red_success = played.info["red_success"]
        return played.reward, played.terminated, played.truncated, red_success, played.state

    return jax.vmap(episode)(jax.random.split(key, num_envs))


def _state(**changes) -> cage.EnvState:
    """The initial state (B_line on User1) with fields replaced."""
    state = cage.initial_state(jax.random.key(0), QUIET)
    state = state.replace(bline_user=jnp.int32(tb.USER1), red_agent=jnp.int32(red.BLINE_AGENT))
    return state.replace(**{k: jax.tree.map(jnp.asarray, v) for k, v in changes.items()})


def _hosts(*hosts, value=True, dtype=bool) -> np.ndarray:
    out = np.zeros(tb.NUM_HOSTS, dtype)
    out[list(hosts)] = value
    return out


# ---- contract ------------------------------------------------------------------------------


def test_registered_and_spaces():
    assert "CAGE2" in envs.registered_envs()
    assert ENV.action_space(PARAMS).n == tb.NUM_ACTIONS == 145
    assert ENV.observation_space(PARAMS).shape == (52,)
    assert ENV.observation_space(PARAMS.replace(obs_mode="extended")).shape == (79,)
    assert ENV.observation_space(PARAMS.replace(obs_mode="history")).shape == (151,)
    with pytest.raises(ValueError, match="obs_mode"):
        cage.EnvParams(obs_mode="pixels")


@pytest.fixture(scope="module")
def mixed_rollout():
    """Random Blue, Red and length drawn per episode: 8 envs x 120 steps."""
    params = PARAMS.replace(red_agent=-1, max_steps_in_episode=0)
    return params, jax.device_get(_rollout(jax.random.key(1), params, "random", 8, 120))


def test_contract_vmapped_rollout(mixed_rollout):
    _, (reward, terminated, truncated, _, states) = mixed_rollout
    assert reward.shape == (8, 120) and reward.dtype == np.float32
    assert np.all(np.isfinite(reward)) and np.all(reward <= 0)
    np.testing.assert_allclose(reward, np.round(reward * 10) / 10, atol=1e-5)
    assert not terminated.any()
    # Lengths are drawn among 30, 50, 100: each episode ends where its own length says.
    for env_index in range(8):
        ends = np.flatnonzero(truncated[env_index])
        starts = np.concatenate([[0], ends[:-1] + 1])
        assert set(ends - starts + 1) <= {30, 50, 100}
    assert set(np.unique(states.red_agent)) <= {red.BLINE_AGENT, red.MEANDER_AGENT}


def test_no_retrace_across_red_agents_lengths_and_bugs():
    key = jax.random.key(2)
    obs, state = ENV.reset(key, PARAMS)
    before = TRACES["step"]
    for red_agent, length, fix in [(0, 30, False), (1, 50, True), (2, 100, False), (-1, 0, True)]:
        params = PARAMS.replace(red_agent=red_agent, max_steps_in_episode=length, fix_bugs=fix)
        out = _step(key, state, jnp.int32(3), params)
        jax.block_until_ready(out)
    assert TRACES["step"] - before <= 1


def test_final_observation_and_auto_reset():
    params = QUIET.replace(max_steps_in_episode=2)
    key = jax.random.key(3)
    obs, state = ENV.reset(key, params)
    for _ in range(2):
        obs, state, _, _, truncated, info = _step(key, state, jnp.int32(0), params)
    assert bool(truncated) and int(state.time) == 0
    assert info["final_observation"].shape == (52,)


# ---- actions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("index", "name"),
    [
        (0, "Sleep"),
        (1, "Monitor"),
        (2, "Analyse Defender"),
        (14, "Analyse User4"),
        (15, "Remove Defender"),
        (27, "Remove User4"),
        (28, "DecoyApache Defender"),
        (41, "DecoyFemitter Defender"),
        (54, "DecoyHarakaSMPT Defender"),
        (67, "DecoySmss Defender"),
        (80, "DecoySSHD Defender"),
        (93, "DecoySvchost Defender"),
        (106, "DecoyTomcat Defender"),
        (119, "DecoyVsftpd Defender"),
        (131, "DecoyVsftpd User4"),
        (132, "Restore Defender"),
        (139, "Restore Op_Server0"),
        (144, "Restore User4"),
    ],
)
def test_action_layout(index, name):
    assert tb.action_name(index) == name


def test_decode_blue_masks():
    decoded = cage.decode_blue(jnp.int32(tb.DECOY + tb.NUM_HOSTS * tb.TOMCAT + tb.ENTERPRISE0))
    want = np.zeros((tb.NUM_HOSTS, tb.NUM_DECOYS), bool)
    want[tb.ENTERPRISE0, tb.TOMCAT] = True
    np.testing.assert_array_equal(decoded.decoy, want)
    assert not decoded.analyse.any() and not decoded.remove.any() and not decoded.restore.any()
    decoded = cage.decode_blue(jnp.int32(tb.RESTORE + tb.USER2))
    np.testing.assert_array_equal(decoded.restore, _hosts(tb.USER2))
    assert not np.asarray(decoded.decoy).any()
    for action in (tb.SLEEP, tb.MONITOR):
        decoded = cage.decode_blue(jnp.int32(action))
        assert not any(np.asarray(leaf).any() for leaf in jax.tree.leaves(decoded))


# ---- the reduced action set ----------------------------------------------------------------

REDUCED = QUIET.replace(action_set="reduced")


def test_reduced_action_set_space_and_validation():
    assert ENV.action_space(REDUCED).n == tb.NUM_REDUCED_ACTIONS == 36
    assert ENV.action_space(QUIET).n == 145
    with pytest.raises(ValueError, match="action_set"):
        cage.EnvParams(action_set="tiny")


@pytest.mark.parametrize(
    ("reduced", "name", "full"),
    [
        (0, "Analyse Enterprise0", 3),
        (8, "Analyse Defender", 2),
        (13, "Remove User1", 24),
        (17, "Remove Defender", 15),
        (27, "Restore Enterprise0", 133),
        (30, "Restore Op_Server0", 139),
        (35, "Restore Defender", 132),
        # decoy macros on an empty network: each host's first decoy in Cardiff's order
        (18, "Decoy Enterprise0", 28 + 13 * tb.HARAKA_SMTP + tb.ENTERPRISE0),
        (19, "Decoy Enterprise1", 28 + 13 * tb.FEMITTER + tb.ENTERPRISE1),
        (21, "Decoy Op_Server0", 28 + 13 * tb.HARAKA_SMTP + tb.OP_SERVER0),
        (23, "Decoy User2", 28 + 13 * tb.FEMITTER + tb.USER2),
        (26, "Decoy Defender", 28 + 13 * tb.HARAKA_SMTP + tb.DEFENDER),
    ],
)
def test_reduced_actions_expand_by_hand(reduced, name, full):
    assert tb.reduced_action_name(reduced) == name
    played = cage.expand_action(_state(), jnp.int32(reduced), "reduced", jnp.bool_(False))
    assert int(played) == full
    assert int(cage.expand_action(_state(), jnp.int32(full), "full", jnp.bool_(False))) == full


@pytest.mark.parametrize(("fix_bugs", "placed"), [(False, 3), (True, 4)])
def test_decoy_macro_fills_a_host_in_order_then_places_nothing(fix_bugs, placed):
    """Enterprise0 takes Haraka, Tomcat, Vsftpd, Apache in turn; in 2.1 Vsftpd holds port 80
    and Apache is refused, so the fourth macro plays Haraka again and places nothing."""
    params = REDUCED.replace(fix_bugs=fix_bugs)
    state = _state(red_agent=red.SLEEP_AGENT)
    order = (tb.HARAKA_SMTP, tb.TOMCAT, tb.VSFTPD, tb.APACHE)
    macro = jnp.int32(18)  # Decoy Enterprise0
    for step in range(5):
        _, state, _, _, _, info = _step(jax.random.key(step), state, macro, params)
        want = order[step] if step < placed else tb.HARAKA_SMTP
        assert int(info["blue_action"]) == tb.DECOY + tb.NUM_HOSTS * want + tb.ENTERPRISE0
        in_place = np.asarray(state.decoys[tb.ENTERPRISE0])
        assert in_place.sum() == min(step + 1, placed)
        assert in_place[list(order[: min(step + 1, placed)])].all()
    # A Restore clears the host's decoys; the macro starts the order again.
    _, state, reward, _, _, info = _step(jax.random.key(9), state, jnp.int32(27), params)
    assert int(info["blue_action"]) == tb.RESTORE + tb.ENTERPRISE0 and float(reward) == -1.0
    assert not np.asarray(state.decoys).any()
    assert int(cage.next_decoy(state, jnp.int32(tb.ENTERPRISE0), jnp.bool_(fix_bugs))) == (
        tb.HARAKA_SMTP
    )


def test_reduced_episode_plays_as_its_expanded_actions():
    """Random reduced actions against B_line and Meander give the same rewards and states as
    the CybORG actions they expand to, played on the full action set."""
    keys = jax.random.split(jax.random.key(3), 60)
    actions = jax.random.randint(jax.random.key(4), (60,), 0, tb.NUM_REDUCED_ACTIONS)
    for red_agent in (red.BLINE_AGENT, red.MEANDER_AGENT):
        reduced = full = _state(red_agent=red_agent)
        played = []
        for key, action in zip(keys, actions, strict=True):
            _, reduced, r_reduced, _, _, info = _step(key, reduced, action, REDUCED)
            _, full, r_full, _, _, _ = _step(key, full, info["blue_action"], QUIET)
            assert float(r_reduced) == float(r_full)
            played.append(int(info["blue_action"]))
        same = jax.tree.map(lambda a, b: bool(jnp.all(a == b)), reduced, full)
        assert all(jax.tree.leaves(same))
        assert played != [int(a) for a in actions]  # the indices were translated
        assert np.asarray(reduced.decoys).any() and int(reduced.access.sum()) > 2


# ---- observation ---------------------------------------------------------------------------


def test_observation_bits_of_hand_built_table():
    activity = _hosts(tb.ENTERPRISE1, value=cage.ACT_EXPLOIT, dtype=np.int32)
    activity[tb.USER3] = cage.ACT_SCAN
    compromised = _hosts(tb.ENTERPRISE1, value=cage.COMP_USER, dtype=np.int32)
    compromised[tb.OP_SERVER0] = cage.COMP_PRIVILEGED
    compromised[tb.USER2] = cage.COMP_UNKNOWN
    obs = np.asarray(
        cage.observe(_state(activity=activity, compromised=compromised), QUIET)
    ).reshape(13, 4)
    want = np.zeros((13, 4), np.float32)
    want[tb.ENTERPRISE1] = [1, 1, 0, 1]  # Exploit, User
    want[tb.USER3] = [1, 0, 0, 0]  # Scan, No
    want[tb.OP_SERVER0] = [0, 0, 1, 1]  # None, Privileged
    want[tb.USER2] = [0, 0, 1, 0]  # None, Unknown
    np.testing.assert_array_equal(obs, want)
    assert np.asarray(cage.observe(_state(), QUIET)).sum() == 0  # baseline: all zeros


def test_extended_observation():
    params = QUIET.replace(obs_mode="extended")
    decoys = np.zeros((13, 8), bool)
    decoys[tb.OP_SERVER0, [tb.APACHE, tb.TOMCAT]] = True
    history = _hosts(tb.USER1, value=2, dtype=np.int32)
    history[tb.USER2] = 1
    obs = np.asarray(cage.observe(_state(decoys=decoys, scan_history=history, time=40), params))
    assert obs.shape == (79,)
    np.testing.assert_allclose(obs[52 + tb.USER1], 1.0)
    np.testing.assert_allclose(obs[52 + tb.USER2], 0.5)
    np.testing.assert_allclose(obs[65 + tb.OP_SERVER0], 0.5)
    np.testing.assert_allclose(obs[78], 0.4)


@pytest.mark.parametrize(
    "action, kind, host",
    [
        (-1, None, None),  # before the first action
        (tb.SLEEP, 0, None),
        (tb.MONITOR, 0, None),
        (tb.ANALYSE + tb.DEFENDER, 1, tb.DEFENDER),
        (tb.REMOVE + tb.USER4, 2, tb.USER4),
        (tb.DECOY + 13 * tb.VSFTPD + tb.USER4, 3, tb.USER4),  # the last decoy id, 131
        (tb.DECOY + 13 * tb.APACHE + tb.DEFENDER, 3, tb.DEFENDER),  # the first, 28
        (tb.RESTORE + tb.OP_SERVER0, 4, tb.OP_SERVER0),
        (tb.NUM_ACTIONS - 1, 4, tb.NUM_HOSTS - 1),
    ],
)
def test_last_action_bits(action, kind, host):
    bits = np.asarray(cage.last_action_bits(jnp.int32(action)))
    want = np.zeros(5 + 13, np.float32)
    if kind is not None:
        want[kind] = 1
    if host is not None:
        want[5 + host] = 1
    np.testing.assert_array_equal(bits, want)


def test_history_observation():
    params = QUIET.replace(obs_mode="history")
    decoys = np.zeros((13, 8), bool)
    decoys[tb.USER2, [tb.FEMITTER, tb.TOMCAT]] = True
    decoys[tb.ENTERPRISE0, tb.HARAKA_SMTP] = True
    state = _state(
        decoys=decoys,
        time=3,
        last_action=np.int32(tb.DECOY + 13 * tb.TOMCAT + tb.USER2),
        last_seen=_hosts(tb.USER3),
    )
    obs = np.asarray(cage.observe(state, params))
    assert obs.shape == (cage.HISTORY_DIM,) == (151,)
    np.testing.assert_array_equal(obs[:79], cage.observe(state, QUIET.replace(obs_mode="extended")))
    last = obs[79 : 79 + 18]
    assert last[3] == 1 and last[5 + tb.USER2] == 1 and last.sum() == 2  # Decoy on User2
    slots = obs[97 : 97 + 41]
    pairs = list(zip(*(a.tolist() for a in cage.DECOY_SLOTS), strict=True))
    assert len(pairs) == 41 and all(tb.DECOY_COMPATIBLE[h][d] for h, d in pairs)
    placed = {(tb.USER2, tb.FEMITTER), (tb.USER2, tb.TOMCAT), (tb.ENTERPRISE0, tb.HARAKA_SMTP)}
    assert {pairs[i] for i in np.nonzero(slots)[0]} == placed
    np.testing.assert_array_equal(obs[138:], _hosts(tb.USER3).astype(np.float32))
    start = cage.initial_state(jax.random.key(1), params)
    assert np.asarray(cage.observe(start, params))[79:].sum() == 0  # nothing done, nothing seen


def test_history_keeps_blue_action_and_latest_red_activity():
    key = jax.random.key(4)
    # B_line stage 1 scans User1: the table shows it, and it becomes the latest activity.
    action = jnp.int32(tb.ANALYSE + tb.ENTERPRISE0)
    scanned, _, _ = _transition(key, _state(bline_stage=1, known=_hosts(8, 9, 10, 11, 12)),
                                action, QUIET)  # fmt: skip
    assert int(scanned.last_action) == int(action)
    np.testing.assert_array_equal(scanned.last_seen, _hosts(tb.USER1))
    # Red asleep shows nothing: the marker stays where it was; the last action moves on.
    quiet, _, _ = _transition(key, scanned.replace(red_agent=jnp.int32(red.SLEEP_AGENT)),
                              jnp.int32(tb.RESTORE + tb.USER3), QUIET)  # fmt: skip
    assert int(quiet.activity.sum()) == 0 and int(quiet.last_action) == tb.RESTORE + tb.USER3
    np.testing.assert_array_equal(quiet.last_seen, _hosts(tb.USER1))
    # The reduced set's macro is recorded as the CybORG action it played.
    reduced = QUIET.replace(action_set="reduced", obs_mode="history")
    macro = tb.REDUCED_KINDS.index("decoy") * len(tb.REDUCED_HOSTS)
    macro += list(tb.REDUCED_HOSTS).index(tb.USER2)
    _, after, _, _, _, info = _step(key, _state(), jnp.int32(macro), reduced)
    femitter_user2 = tb.DECOY + 13 * tb.FEMITTER + tb.USER2
    assert int(after.last_action) == int(info["blue_action"]) == femitter_user2


def test_scan_and_detected_exploit_show_in_table():
    key = jax.random.key(4)
    # B_line stage 1 scans User1; stage 2 exploits it (FTP or SSH: both work, SSH always seen).
    state, _, success = _transition(key, _state(bline_stage=1, known=_hosts(8, 9, 10, 11, 12)),
                                    jnp.int32(0), QUIET)  # fmt: skip
    assert bool(success) and int(state.activity[tb.USER1]) == cage.ACT_SCAN
    assert int(state.bline_stage) == 2
    seen = 0
    for i in range(40):
        after, _, success = _transition(jax.random.key(i), state, jnp.int32(0), QUIET)
        assert bool(success) and int(after.access[tb.USER1]) == 1
        shown = int(after.activity[tb.USER1])
        assert shown in (cage.ACT_SCAN, cage.ACT_EXPLOIT)
        assert (int(after.compromised[tb.USER1]) == cage.COMP_USER) == (shown == cage.ACT_EXPLOIT)
        seen += shown == cage.ACT_EXPLOIT
    assert seen >= 35  # 95% (FTP) or 100% (SSH)


def test_analyse_remove_restore_update_compromised():
    state = _state(
        access=_hosts(tb.USER0, tb.USER1, tb.USER2, value=2, dtype=np.int32) // 2
        + _hosts(tb.USER0, value=1, dtype=np.int32),
        malware=_hosts(tb.USER1),
        compromised=_hosts(tb.USER2, value=cage.COMP_USER, dtype=np.int32),
        red_agent=red.SLEEP_AGENT,
    )
    key = jax.random.key(5)
    analysed, _, _ = _transition(key, state, jnp.int32(tb.ANALYSE + tb.USER1), QUIET)
    assert int(analysed.compromised[tb.USER1]) == cage.COMP_PRIVILEGED
    removed, _, _ = _transition(key, state, jnp.int32(tb.REMOVE + tb.USER2), QUIET)
    assert int(removed.compromised[tb.USER2]) == cage.COMP_UNKNOWN
    assert int(removed.access[tb.USER2]) == 0
    restored, terms, _ = _transition(key, state, jnp.int32(tb.RESTORE + tb.USER2), QUIET)
    assert int(restored.compromised[tb.USER2]) == cage.COMP_NO
    assert int(restored.access[tb.USER2]) == 0
    np.testing.assert_allclose(terms["restore"], -1.0)


def test_remove_spares_root_shells_and_comes_before_red():
    key = jax.random.key(6)
    root_shell = _state(
        access=_hosts(tb.USER0, value=2, dtype=np.int32) + _hosts(tb.USER2, dtype=np.int32),
        root_shell=_hosts(tb.USER2),
        red_agent=red.SLEEP_AGENT,
    )
    after, _, _ = _transition(key, root_shell, jnp.int32(tb.REMOVE + tb.USER2), QUIET)
    assert int(after.access[tb.USER2]) == 1
    # B_line escalates Enterprise1 in the very step Blue removes its flagged shell there: Blue
    # acts first, so the shell is gone and the escalation fails (CybORG: StopProcess, then
    # PrivilegeEscalate finds no session; B_line falls back to stage 5).
    escalating = _state(
        bline_stage=6,
        access=_hosts(tb.USER0, tb.USER1, value=2, dtype=np.int32)
        + _hosts(tb.ENTERPRISE1, dtype=np.int32),
    )
    after, _, success = _transition(key, escalating, jnp.int32(tb.REMOVE + tb.ENTERPRISE1), QUIET)
    assert not bool(success) and int(after.access[tb.ENTERPRISE1]) == 0
    assert int(after.bline_stage) == 5


def test_remove_spares_shells_blue_never_flagged():
    # Monitor flags a shell's process only from a detected reverse-shell connection with a pid:
    # an SSH brute-force shell (Enterprise0) or an undetected exploit (Enterprise1's HTTP RFI)
    # survives Remove. B_line's stage 5 exploits the Enterprise host its user host reveals.
    cases = ((tb.USER3, tb.ENTERPRISE0, tb.SSH, 0.0, True),
             (tb.USER1, tb.ENTERPRISE1, tb.HTTP_RFI, 0.99, True),
             (tb.USER1, tb.ENTERPRISE1, tb.HTTP_RFI, 0.0, False))  # fmt: skip
    for user, host, exploit, detection, hidden in cases:
        ports = np.zeros((13, 8), bool)
        ports[host, exploit] = True
        state = _state(bline_stage=5, bline_user=user, red_ports=ports)
        after, _, success = cage.transition_with(
            _draws(detection=detection), state, jnp.int32(0), QUIET
        )
        assert bool(success) and int(after.access[host]) == 1 and not bool(after.root_shell[host])
        assert bool(after.hidden_shell[host]) == hidden
        sleeping = after.replace(red_agent=jnp.int32(red.SLEEP_AGENT))
        removed, _, _ = _transition(jax.random.key(0), sleeping, jnp.int32(tb.REMOVE + host),
                                    QUIET)  # fmt: skip
        assert int(removed.access[host]) == (1 if hidden else 0)
        restored, _, _ = _transition(jax.random.key(0), sleeping, jnp.int32(tb.RESTORE + host),
                                     QUIET)  # fmt: skip
        assert int(restored.access[host]) == 0 and not bool(restored.hidden_shell[host])


def test_impact_after_op_server0_restore_stops_nothing():
    # CybORG's host backup keeps no pid for Op_Server0's OT service: once Op_Server0 has been
    # restored, Impact succeeds but the service keeps running (no -10), for the whole episode.
    held = _hosts(tb.USER0, tb.OP_SERVER0, value=2, dtype=np.int32)
    state = _state(bline_stage=14, access=held)
    after, terms, success = _transition(jax.random.key(0), state, jnp.int32(0), QUIET)
    assert bool(success) and bool(after.impacted) and float(terms["impact"]) == -10.0
    restore = jnp.int32(tb.RESTORE + tb.OP_SERVER0)
    restored, terms, success = _transition(jax.random.key(0), after, restore, QUIET)
    assert not bool(success) and not bool(restored.impacted) and bool(restored.ot_lost)
    assert float(terms["impact"]) == 0.0
    # Red takes Op_Server0 back and impacts again: success, but nothing stops.
    back = restored.replace(access=jnp.asarray(held), bline_stage=jnp.int32(14))
    for i in range(3):
        back, terms, success = _transition(jax.random.key(i), back, jnp.int32(0), QUIET)
        assert bool(success) and not bool(back.impacted) and float(terms["impact"]) == 0.0


# ---- Red -----------------------------------------------------------------------------------


def test_bline_walks_its_stages_against_sleep():
    want = [
        (red.RED_SUBNET_SCAN, tb.USER),
        (red.RED_SCAN, tb.USER1),
        (red.RED_EXPLOIT, tb.USER1),
        (red.RED_PRIVESC, tb.USER1),
        (red.RED_SCAN, tb.ENTERPRISE1),
        (red.RED_EXPLOIT, tb.ENTERPRISE1),
        (red.RED_PRIVESC, tb.ENTERPRISE1),
        (red.RED_SUBNET_SCAN, tb.ENTERPRISE),
        (red.RED_SCAN, tb.ENTERPRISE2),
        (red.RED_EXPLOIT, tb.ENTERPRISE2),
        (red.RED_PRIVESC, tb.ENTERPRISE2),
        (red.RED_SCAN, tb.OP_SERVER0),
        (red.RED_EXPLOIT, tb.OP_SERVER0),
        (red.RED_PRIVESC, tb.OP_SERVER0),
        (red.RED_IMPACT, tb.OP_SERVER0),
        (red.RED_IMPACT, tb.OP_SERVER0),
    ]
    state = _state()
    got = []
    for i in range(len(want)):
        kind, target = red.bline_action(state.bline_stage, state.bline_user)
        got.append((int(kind), int(target)))
        # Retry failed exploits (EternalBlue is broken on Enterprise1/2) until one lands.
        for attempt in range(20):
            after, terms, success = _transition(jax.random.key(100 * i + attempt), state,
                                                jnp.int32(0), QUIET)  # fmt: skip
            if bool(success):
                break
            assert int(after.bline_stage) == int(red.BLINE_JUMPS[int(state.bline_stage)])
        state = after
    assert got == want
    assert bool(state.impacted) and int(state.access[tb.OP_SERVER0]) == 2
    assert float(terms["impact"]) == -10.0


@pytest.mark.parametrize(("stage", "jump"), [(3, 2), (6, 5), (10, 9), (13, 12), (14, 13)])
def test_bline_falls_back_on_failure(stage, jump):
    # No shell anywhere but User0: every escalation and the impact fail.
    after, _, success = _transition(jax.random.key(7), _state(bline_stage=stage), jnp.int32(0),
                                    QUIET)  # fmt: skip
    assert not bool(success) and int(after.bline_stage) == jump


def _belief(**changes) -> red.MeanderBelief:
    """Meander's initial beliefs with fields replaced (numpy bool arrays)."""
    belief = red.initial_belief()
    return belief.replace(**{k: jnp.asarray(v) for k, v in changes.items()})


def _subnets(*subnets) -> np.ndarray:
    out = np.zeros(len(tb.SUBNETS), bool)
    out[list(subnets)] = True
    return out


def test_meander_priorities():
    u = jnp.linspace(0.1, 0.9, tb.NUM_HOSTS)
    users = _hosts(tb.USER0, tb.USER1, tb.USER2, tb.USER3, tb.USER4)
    # At the start Red knows the User subnet only: sweep it.
    kind, target = red.meander_action(u, u, _belief(), _hosts(tb.USER0), _hosts())
    assert (int(kind), int(target)) == (red.RED_SUBNET_SCAN, tb.USER)
    # Swept, two user IPs unscanned: port-scan one of them.
    swept = _belief(swept=_subnets(tb.USER))
    kind, target = red.meander_action(u, u, swept, users, _hosts(8, 9, 10))
    assert int(kind) == red.RED_SCAN and int(target) in (tb.USER3, tb.USER4)
    # All scanned: escalate a known hostname first; User0's is known from the start
    # (RedMeanderAgent escalates the host it already holds).
    kind, target = red.meander_action(u, u, swept, users, users)
    assert (int(kind), int(target)) == (red.RED_PRIVESC, tb.USER0)
    # User0 escalated: exploit an IP it has not exploited, its own User0 included.
    done = _belief(swept=_subnets(tb.USER), escalated=_hosts(tb.USER0),
                   exploited=_hosts(tb.USER1, tb.USER2, tb.USER3, tb.USER4))  # fmt: skip
    kind, target = red.meander_action(u, u, done, users, users)
    assert (int(kind), int(target)) == (red.RED_EXPLOIT, tb.USER0)
    # A host tied to an IP it no longer believes exploited is not escalated: exploit instead.
    rolled_back = done.replace(
        exploited=jnp.asarray(_hosts(tb.USER0, tb.USER2, tb.USER3, tb.USER4)),
        mapped=jnp.asarray(_hosts(tb.USER1)),
        hostnames=jnp.asarray(_hosts(tb.USER0, tb.USER1)),
    )
    kind, target = red.meander_action(u, u, rolled_back, users, users)
    assert (int(kind), int(target)) == (red.RED_EXPLOIT, tb.USER1)
    # The Defender is a target like any other host.
    defender = done.replace(exploited=jnp.asarray(users))
    known = users | _hosts(tb.DEFENDER)
    kind, target = red.meander_action(u, u, defender, known, known)
    assert (int(kind), int(target)) == (red.RED_EXPLOIT, tb.DEFENDER)
    # A known subnet it has not swept comes before scans; believing Op_Server0 escalated,
    # Impact comes first of all.
    enterprise = done.replace(subnets=jnp.asarray(_subnets(tb.USER, tb.ENTERPRISE)))
    kind, target = red.meander_action(u, u, enterprise, users, _hosts())
    assert (int(kind), int(target)) == (red.RED_SUBNET_SCAN, tb.ENTERPRISE)
    impact = enterprise.replace(escalated=jnp.asarray(_hosts(tb.USER0, tb.OP_SERVER0)))
    kind, target = red.meander_action(u, u, impact, users, _hosts())
    assert (int(kind), int(target)) == (red.RED_IMPACT, tb.OP_SERVER0)


def _update(belief, kind, target, success):
    return red.update_belief(belief, jnp.int32(kind), jnp.int32(target), jnp.bool_(success))


def test_meander_belief_updates_and_roll_backs():
    belief = _belief()
    # A successful exploit is recorded, ties the host to its IP and names it.
    belief = _update(belief, red.RED_EXPLOIT, tb.ENTERPRISE1, True)
    assert belief.exploited[tb.ENTERPRISE1] and belief.mapped[tb.ENTERPRISE1]
    assert belief.hostnames[tb.ENTERPRISE1]
    # A successful escalation is recorded and shows the host's own subnet.
    belief = _update(belief, red.RED_PRIVESC, tb.ENTERPRISE1, True)
    assert belief.escalated[tb.ENTERPRISE1] and belief.subnets[tb.ENTERPRISE]
    belief = _update(belief, red.RED_EXPLOIT, tb.OP_SERVER0, True)
    belief = _update(belief, red.RED_PRIVESC, tb.OP_SERVER0, True)
    # A failed exploit forgets its IP and every escalated Op host (not the Enterprise ones).
    failed = _update(belief, red.RED_EXPLOIT, tb.DEFENDER, False)
    assert not failed.exploited[tb.DEFENDER]
    assert not failed.escalated[tb.OP_SERVER0] and not failed.exploited[tb.OP_SERVER0]
    assert failed.escalated[tb.ENTERPRISE1] and failed.exploited[tb.ENTERPRISE1]
    # With no Op host escalated, the next failed exploit forgets the Enterprise hosts.
    failed = _update(failed, red.RED_EXPLOIT, tb.DEFENDER, False)
    assert not failed.escalated[tb.ENTERPRISE1] and not failed.exploited[tb.ENTERPRISE1]
    assert failed.mapped[tb.ENTERPRISE1]  # host_ip_map keeps its entries
    # A failed escalation or impact forgets that host and its IP.
    for kind in (red.RED_PRIVESC, red.RED_IMPACT):
        after = _update(belief, kind, tb.OP_SERVER0, False)
        assert not after.escalated[tb.OP_SERVER0] and not after.exploited[tb.OP_SERVER0]
        assert after.escalated[tb.ENTERPRISE1]
    # Sweeps are recorded whatever the outcome.
    assert _update(belief, red.RED_SUBNET_SCAN, tb.OPERATIONAL, True).swept[tb.OPERATIONAL]


def test_meander_notices_a_restore_only_when_escalation_fails():
    # Meander believes User1 exploited and escalated; Blue has restored it. It goes on with
    # its list (exploit User2), and comes back to User1 only after an escalation there fails.
    users = _hosts(tb.USER0, tb.USER1, tb.USER2, tb.USER3, tb.USER4)
    belief = _belief(swept=_subnets(tb.USER), exploited=_hosts(tb.USER0, tb.USER1, tb.USER3,
                                                                  tb.USER4),
                     escalated=_hosts(tb.USER0, tb.USER1), mapped=_hosts(tb.USER1),
                     hostnames=_hosts(tb.USER0, tb.USER1))  # fmt: skip
    ports = np.zeros((13, 8), bool)
    ports[tb.USER2, tb.ETERNAL_BLUE] = True
    ports[tb.USER1, tb.FTP] = True
    state = _state(red_agent=red.MEANDER_AGENT, meander=belief, known=users, scanned=users,
                   red_ports=ports)  # fmt: skip
    after, _, success = _transition(jax.random.key(3), state, jnp.int32(0), QUIET)
    assert bool(success) and int(after.access[tb.USER2]) == 1  # exploited User2
    assert bool(after.meander.exploited[tb.USER1]) and bool(after.meander.escalated[tb.USER1])
    # Once it escalated User2, User1 comes up again only if Meander forgets it escalated it;
    # then the escalation fails (no shell) and rolls User1 back...
    belief = after.meander.replace(escalated=jnp.asarray(_hosts(tb.USER0, tb.USER2)))
    after, _, success = _transition(jax.random.key(4), after.replace(meander=belief),
                                    jnp.int32(0), QUIET)  # fmt: skip
    assert not bool(success) and not bool(after.meander.exploited[tb.USER1])
    # ... and the next step exploits it again.
    after, _, success = _transition(jax.random.key(5), after, jnp.int32(0), QUIET)
    assert bool(success) and int(after.access[tb.USER1]) == 1


def test_rescan_replaces_what_red_knew_of_the_ports():
    # Red scans Enterprise1 with a Femitter decoy there (FTP on offer), Blue restores it, Red
    # rescans: FTP is gone from Red's ports (DiscoverNetworkServices clears them first).
    params = QUIET.replace(fix_bugs=True)
    decoys = np.zeros((13, 8), bool)
    decoys[tb.ENTERPRISE1, tb.FEMITTER] = True
    state = _state(bline_stage=4, decoys=decoys, bline_user=tb.USER1)  # scan Enterprise1
    after, _, _ = _transition(jax.random.key(5), state, jnp.int32(0), params)
    assert bool(after.red_ports[tb.ENTERPRISE1, tb.FTP])
    restore = jnp.int32(tb.RESTORE + tb.ENTERPRISE1)
    after, _, _ = _transition(jax.random.key(6), after.replace(bline_stage=jnp.int32(4)), restore,
                              params)  # fmt: skip
    assert not bool(after.red_ports[tb.ENTERPRISE1, tb.FTP])
    assert bool(after.red_ports[tb.ENTERPRISE1, tb.HTTPS_RFI])


def test_operational_subnet_needs_an_enterprise_session():
    # The Operational subnet refuses the User subnet's traffic unless Red holds a session on an
    # Enterprise host (CybORG's check_for_enterprise_sessions).
    ports = np.zeros((13, 8), bool)
    ports[tb.OP_SERVER0, tb.SSH] = True
    users = _hosts(tb.USER0, tb.USER1, value=2, dtype=np.int32)
    cut = _state(bline_stage=12, access=users, red_ports=ports)
    for i in range(5):
        after, _, success = _transition(jax.random.key(i), cut, jnp.int32(0), QUIET)
        assert not bool(success) and int(after.access[tb.OP_SERVER0]) == 0
        assert int(after.activity[tb.OP_SERVER0]) == cage.ACT_NONE
    routed = cut.replace(access=jnp.asarray(users + _hosts(tb.ENTERPRISE0, dtype=np.int32)))
    after, _, success = _transition(jax.random.key(0), routed, jnp.int32(0), QUIET)
    assert bool(success) and int(after.access[tb.OP_SERVER0]) == 1
    # An unrouted port scan succeeds (B_line moves on) but learns and shows nothing.
    scan = cut.replace(bline_stage=jnp.int32(11), red_ports=jnp.zeros((13, 8), bool))
    after, _, success = _transition(jax.random.key(0), scan, jnp.int32(0), QUIET)
    assert bool(success) and int(after.bline_stage) == 12
    assert not np.asarray(after.red_ports).any()
    assert int(after.activity[tb.OP_SERVER0]) == cage.ACT_NONE
    # An unrouted sweep of the Operational subnet fails; Meander records it as swept anyway.
    belief = _belief(swept=_subnets(tb.USER, tb.ENTERPRISE),
                     subnets=_subnets(tb.USER, tb.ENTERPRISE, tb.OPERATIONAL))  # fmt: skip
    sweep = _state(red_agent=red.MEANDER_AGENT, meander=belief, access=users)
    after, _, success = _transition(jax.random.key(0), sweep, jnp.int32(0), QUIET)
    assert not bool(success) and bool(after.meander.swept[tb.OPERATIONAL])
    assert not np.asarray(after.known)[[tb.OP_HOST0, tb.OP_SERVER0]].any()


def test_exploit_choice_prefers_top_weight():
    options = jnp.asarray([True, False, False, False, True, False, False, True])  # FTP,HTTP,SSH
    other = jnp.linspace(0.0, 1.0, 8)
    assert int(cage.choose_exploit(jnp.float32(0.5), other, options)) == tb.FTP
    assert int(cage.choose_exploit(jnp.float32(0.8), other, options)) == tb.SSH
    only_ssh = jnp.zeros(8, bool).at[tb.SSH].set(True)
    assert int(cage.choose_exploit(jnp.float32(0.9), other, only_ssh)) == tb.SSH
    assert int(cage.choose_exploit(jnp.float32(0.9), other, jnp.zeros(8, bool))) == -1


# ---- decoys --------------------------------------------------------------------------------


def _decoy(decoy, host):
    return jnp.int32(tb.DECOY + tb.NUM_HOSTS * decoy + host)


def test_decoy_placement_rules():
    key = jax.random.key(8)
    sleeping = _state(red_agent=red.SLEEP_AGENT)
    placed, _, _ = _transition(key, sleeping, _decoy(tb.FEMITTER, tb.ENTERPRISE1), QUIET)
    assert bool(placed.decoys[tb.ENTERPRISE1, tb.FEMITTER])
    # Enterprise1 does not accept Apache (port 80 in use).
    refused, _, _ = _transition(key, sleeping, _decoy(tb.APACHE, tb.ENTERPRISE1), QUIET)
    assert not np.asarray(refused.decoys).any()
    # In 2.1 Vsftpd opens port 80 and collides with Apache; fixed, it opens 21 and does not.
    apache = sleeping.replace(decoys=sleeping.decoys.at[tb.OP_SERVER0, tb.APACHE].set(True))
    buggy, _, _ = _transition(key, apache, _decoy(tb.VSFTPD, tb.OP_SERVER0), QUIET)
    fixed, _, _ = _transition(key, apache, _decoy(tb.VSFTPD, tb.OP_SERVER0),
                              QUIET.replace(fix_bugs=True))  # fmt: skip
    assert not bool(buggy.decoys[tb.OP_SERVER0, tb.VSFTPD])
    assert bool(fixed.decoys[tb.OP_SERVER0, tb.VSFTPD])


def test_decoy_on_a_genuine_services_port_lures_nothing():
    # CybORG 2.1's Vsftpd decoy opens port 80; on User3, whose genuine web server holds 80, an
    # HTTP RFI takes the genuine server (first in the process list) and works.
    decoys = np.zeros((13, 8), bool)
    decoys[tb.USER3, tb.VSFTPD] = True
    ports = np.zeros((13, 8), bool)
    ports[tb.USER3, tb.HTTP_RFI] = True
    state = _state(bline_stage=2, bline_user=tb.USER3, decoys=decoys, red_ports=ports)
    after, _, success = _transition(jax.random.key(0), state, jnp.int32(0), QUIET)
    assert bool(success) and int(after.access[tb.USER3]) == 1
    # The same decoy on Op_Server0 (no genuine web server) stops it.
    decoys = np.zeros((13, 8), bool)
    decoys[tb.OP_SERVER0, tb.VSFTPD] = True
    ports = np.zeros((13, 8), bool)
    ports[tb.OP_SERVER0, tb.HTTP_RFI] = True
    held = _hosts(tb.USER0, tb.ENTERPRISE2, value=2, dtype=np.int32)
    state = _state(bline_stage=12, decoys=decoys, red_ports=ports, access=held)
    after, _, success = _transition(jax.random.key(0), state, jnp.int32(0), QUIET)
    assert not bool(success) and int(after.access[tb.OP_SERVER0]) == 0


def test_user0_takes_user1s_decoys():
    # User0 runs User1's image: Blue can place User1's decoys there (Red keeps its session).
    sleeping = _state(red_agent=red.SLEEP_AGENT)
    for decoy in range(tb.NUM_DECOYS):
        placed, _, _ = _transition(jax.random.key(0), sleeping, _decoy(decoy, tb.USER0), QUIET)
        want = bool(tb.DECOY_COMPATIBLE[tb.USER1, decoy])
        assert bool(placed.decoys[tb.USER0, decoy]) == want
    assert tb.DECOY_COMPATIBLE[tb.USER0].any()


def test_decoy_seen_in_scan_stops_exploit_and_restore_clears_it():
    key = jax.random.key(9)
    decoys = np.zeros((13, 8), bool)
    decoys[tb.OP_SERVER0, tb.HARAKA_SMTP] = True
    # B_line scans Op_Server0 (stage 11) with a Haraka decoy there: Red learns SSH and Haraka.
    held = _hosts(tb.USER0, tb.ENTERPRISE2, value=2, dtype=np.int32)  # the route to Op_Server0
    state = _state(bline_stage=11, decoys=decoys, access=held)
    scanned, _, _ = _transition(key, state, jnp.int32(0), QUIET)
    np.testing.assert_array_equal(
        np.flatnonzero(scanned.red_ports[tb.OP_SERVER0]), [tb.HARAKA, tb.SSH]
    )
    # Its exploit takes Haraka 75% of the time and fails (seen as a scan), else SSH works.
    outcomes = set()
    for i in range(40):
        after, _, success = _transition(jax.random.key(i), scanned, jnp.int32(0), QUIET)
        if bool(success):
            outcomes.add("ssh")
            assert int(after.activity[tb.OP_SERVER0]) == cage.ACT_EXPLOIT  # brute force: seen
        else:
            outcomes.add("decoy")
            assert int(after.activity[tb.OP_SERVER0]) == cage.ACT_SCAN
            assert int(after.bline_stage) == 9
    assert outcomes == {"ssh", "decoy"}
    restored, _, _ = _transition(key, scanned, jnp.int32(tb.RESTORE + tb.OP_SERVER0), QUIET)
    assert not np.asarray(restored.decoys).any()


def test_decoy_placed_in_the_step_of_a_decoy_hit_shows_as_exploit():
    # CybORG's table reads a host's new processes of the step together. A decoy hit is two
    # connections on one port (Scan); with the decoy Blue places there in the same step it is
    # three items on one port: Exploit, and the host is marked User (found by playing a trained
    # defender in real CybORG: it restored Enterprise1 again and again).
    held = _hosts(tb.USER0, tb.ENTERPRISE2, value=2, dtype=np.int32)  # the route to Op_Server0
    ports = np.zeros((13, 8), bool)
    ports[tb.OP_SERVER0, tb.HARAKA] = True  # Red's last scan saw Haraka there
    haraka = np.zeros((13, 8), bool)
    haraka[tb.OP_SERVER0, tb.HARAKA_SMTP] = True
    cases = [  # (decoys before the step, Blue's action, activity, compromised)
        (haraka, jnp.int32(0), cage.ACT_SCAN, cage.COMP_NO),  # in place before: a scan
        (np.zeros((13, 8), bool), _decoy(tb.HARAKA_SMTP, tb.OP_SERVER0), cage.ACT_EXPLOIT,
         cage.COMP_USER),  # placed now, hit now
        (haraka, _decoy(tb.APACHE, tb.OP_SERVER0), cage.ACT_EXPLOIT, cage.COMP_USER),
        (haraka, _decoy(tb.HARAKA_SMTP, tb.ENTERPRISE0), cage.ACT_SCAN, cage.COMP_NO),
        (haraka, _decoy(tb.HARAKA_SMTP, tb.OP_SERVER0), cage.ACT_SCAN, cage.COMP_NO),  # refused
    ]  # fmt: skip
    for fix_bugs in (False, True):
        for decoys, action, activity, compromised in cases:
            state = _state(bline_stage=12, access=held, red_ports=ports, decoys=decoys)
            params = QUIET.replace(fix_bugs=fix_bugs)
            after, _, success = _transition(jax.random.key(0), state, action, params)
            assert not bool(success) and int(after.access[tb.OP_SERVER0]) == 0
            assert int(after.activity[tb.OP_SERVER0]) == activity
            assert int(after.compromised[tb.OP_SERVER0]) == compromised


def test_missed_exploit_behind_a_new_decoy_shows_nothing():
    # A successful exploit Monitor misses (5%) leaves one connection: a Scan; with a decoy
    # Blue placed on the host in the same step listed first, the table reads None.
    ports = np.zeros((13, 8), bool)
    ports[tb.USER1, tb.FTP] = True
    state = _state(bline_stage=2, red_ports=ports)

    def shown(i):
        return int(_transition(jax.random.key(i), state, jnp.int32(0), QUIET)[0].activity[tb.USER1])

    missed = [i for i in range(200) if shown(i) == cage.ACT_SCAN]
    assert 2 <= len(missed) <= 25  # about 5% of 200
    for i in missed[:3]:
        after, _, success = _transition(
            jax.random.key(i), state, _decoy(tb.APACHE, tb.USER1), QUIET
        )
        assert bool(success) and bool(after.decoys[tb.USER1, tb.APACHE])
        assert int(after.activity[tb.USER1]) == cage.ACT_NONE
        assert int(after.compromised[tb.USER1]) == cage.COMP_NO


@pytest.mark.parametrize("fix_bugs", [False, True])
def test_exploit_at_a_restored_decoy_fails_and_shows_nothing(fix_bugs):
    # B_line scans Enterprise1 while Blue's Femitter decoy is there (Red learns FTP, port 21);
    # Blue restores Enterprise1, removing the decoy; B_line's exploit takes FTP (the top
    # weight). No process answers on port 21 (ExploitAction.sim_exploit appends a connection
    # event only for a process serving the port): it fails and Blue's table shows nothing, as
    # real CybORG 2.1's did in 1442 of 1442 such exploits by a trained defender's 1000 episodes.
    params = QUIET.replace(fix_bugs=fix_bugs)
    femitter = _decoy(tb.FEMITTER, tb.ENTERPRISE1)
    held = _hosts(tb.USER0, tb.USER1, value=2, dtype=np.int32)
    state = _state(bline_stage=4, access=held)  # scan Enterprise1 (User1's next hop)
    scanned, _, _ = _transition(jax.random.key(0), state, femitter, params)
    assert bool(scanned.decoys[tb.ENTERPRISE1, tb.FEMITTER])
    assert bool(scanned.red_ports[tb.ENTERPRISE1, tb.FTP])
    restore = jnp.int32(tb.RESTORE + tb.ENTERPRISE1)
    after, _, success = _transition_with(_draws(), scanned, restore, params)
    assert not bool(success) and int(after.bline_stage) == 2  # B_line falls back
    assert int(after.activity[tb.ENTERPRISE1]) == cage.ACT_NONE
    assert int(after.compromised[tb.ENTERPRISE1]) == cage.COMP_NO
    # With the decoy still in place the same exploit is a decoy hit: a Scan.
    hit, _, success = _transition_with(_draws(), scanned, jnp.int32(0), params)
    assert not bool(success) and int(hit.activity[tb.ENTERPRISE1]) == cage.ACT_SCAN


@pytest.mark.parametrize("fix_bugs", [False, True])
def test_user4_runs_sshd_and_no_rdp(fix_bugs):
    # User4's image (linux_user_host2) listens on 22 (sshd), 25, 80, 443 and 3390, not 3389:
    # Red's scan offers SSH brute force and no BlueKeep (real CybORG: 380 brute forces of User4
    # and no BlueKeep in a trained defender's 1000 B_line episodes). The brute-force shell is a
    # user shell that shows as an Exploit, drops no file and survives Remove.
    params = QUIET.replace(fix_bugs=fix_bugs)
    state = _state(bline_stage=1, bline_user=tb.USER4)  # port-scan User4
    scanned, _, _ = _transition(jax.random.key(0), state, jnp.int32(0), params)
    np.testing.assert_array_equal(
        np.flatnonzero(scanned.red_ports[tb.USER4]),
        [tb.HARAKA, tb.SQL, tb.HTTPS_RFI, tb.HTTP_RFI, tb.SSH],
    )
    ssh_only = np.zeros((13, 8), bool)
    ssh_only[tb.USER4, tb.SSH] = True
    brute = scanned.replace(red_ports=jnp.asarray(ssh_only))
    after, _, success = _transition_with(_draws(), brute, jnp.int32(0), params)
    assert bool(success) and int(after.access[tb.USER4]) == 1
    assert not bool(after.root_shell[tb.USER4]) and not bool(after.malware[tb.USER4])
    assert int(after.activity[tb.USER4]) == cage.ACT_EXPLOIT
    assert int(after.compromised[tb.USER4]) == cage.COMP_USER
    # Blue's Remove comes first and spares it, so B_line's escalation there works.
    remove = jnp.int32(tb.REMOVE + tb.USER4)
    kept, _, success = _transition_with(_draws(), after, remove, params)
    assert bool(success) and int(kept.access[tb.USER4]) == 2


@pytest.mark.parametrize("fix_bugs", [False, True])
def test_port_scan_behind_a_first_decoy_on_a_one_port_host_shows_nothing(fix_bugs):
    # A port scan logs one connection per open port; BlueTableWrapper reads it as a Scan only
    # with three ports or more, and Blue's decoy placed on the host in the same step is listed
    # first (a service): Enterprise0 (sshd alone) with its first decoy has two ports, so the
    # scan reads None. Real CybORG 2.1 (B_line scanning Enterprise0 at step 4 while Blue places
    # DecoyHarakaSMPT there): None in 7 of 7 episodes, Scan in 7 of 7 with a Tomcat decoy
    # placed a step earlier.
    params = QUIET.replace(fix_bugs=fix_bugs)
    held = _hosts(tb.USER0, tb.USER3, value=2, dtype=np.int32)
    tomcat = np.zeros((13, 8), bool)
    tomcat[tb.ENTERPRISE0, tb.TOMCAT] = True
    femitter = _decoy(tb.FEMITTER, tb.ENTERPRISE1)
    cases = [  # (B_line's user host, decoys before, Blue's action, activity on the hop)
        (tb.USER3, np.zeros((13, 8), bool), jnp.int32(0), cage.ACT_SCAN),
        (tb.USER3, np.zeros((13, 8), bool), _decoy(tb.HARAKA_SMTP, tb.ENTERPRISE0), cage.ACT_NONE),
        (tb.USER3, tomcat, _decoy(tb.HARAKA_SMTP, tb.ENTERPRISE0), cage.ACT_SCAN),  # 3 ports
        (tb.USER3, tomcat, _decoy(tb.TOMCAT, tb.ENTERPRISE0), cage.ACT_SCAN),  # refused
        (tb.USER1, np.zeros((13, 8), bool), femitter, cage.ACT_SCAN),  # Enterprise1: 8 ports
    ]  # fmt: skip
    for user, decoys, action, shown in cases:
        hop = int(tb.NEXT_HOP[user])
        state = _state(bline_stage=4, bline_user=user, access=held, decoys=decoys)
        after, _, success = _transition(jax.random.key(0), state, action, params)
        assert bool(success) and int(after.bline_stage) == 5
        assert int(after.activity[hop]) == shown
        # Red learns the ports all the same, the new decoy's among them.
        assert bool(after.red_ports[hop, tb.SSH])
        assert bool(after.red_ports[hop, tb.HARAKA]) == (action == _decoy(tb.HARAKA_SMTP, hop))


@pytest.mark.parametrize(
    ("fix_bugs", "offered"),
    [(False, [tb.HARAKA, tb.HTTPS_RFI, tb.HTTP_RFI, tb.BLUE_KEEP]),
     (True, [tb.HARAKA, tb.SQL, tb.HTTPS_RFI, tb.HTTP_RFI])],
)  # fmt: skip
def test_user3s_mysql_port_decides_sql_or_bluekeep(fix_bugs, offered):
    # CybORG 2.1's linux_user_host1 runs MySQL on 3389 (a typo): Red's scan offers BlueKeep,
    # which fails there. CybORG++ moves it to 3390: SQL injection, and no BlueKeep at all
    # (real CybORG++: 512 SQL injections of User3 and no BlueKeep in a trained defender's 1000
    # B_line episodes; jaxrl offered BlueKeep too, and it landed as SYSTEM). MySQL runs as
    # root, so an SQL injection there lands as root (CybORG++: 18 of 18 from no shell).
    params = QUIET.replace(fix_bugs=fix_bugs)
    state = _state(bline_stage=1, bline_user=tb.USER3)  # port-scan User3
    scanned, _, _ = _transition(jax.random.key(0), state, jnp.int32(0), params)
    np.testing.assert_array_equal(np.flatnonzero(scanned.red_ports[tb.USER3]), offered)
    if fix_bugs:
        sql = np.zeros((13, 8), bool)
        sql[tb.USER3, tb.SQL] = True
        after, _, success = _transition_with(
            _draws(), scanned.replace(red_ports=jnp.asarray(sql)), jnp.int32(0), params
        )
        assert bool(success) and int(after.access[tb.USER3]) == 1
        assert bool(after.root_shell[tb.USER3])  # counted by the reward at once


def test_decoy_placed_after_the_scan_is_not_chosen():
    # Red scanned Op_Server0 (SSH only); Blue then put a Haraka decoy there.
    state = _state(bline_stage=12, access=_hosts(tb.USER0, tb.ENTERPRISE2, value=2, dtype=np.int32))
    ports = np.zeros((13, 8), bool)
    ports[tb.OP_SERVER0, tb.SSH] = True
    decoys = np.zeros((13, 8), bool)
    decoys[tb.OP_SERVER0, tb.HARAKA_SMTP] = True
    state = state.replace(red_ports=jnp.asarray(ports), decoys=jnp.asarray(decoys))
    for i in range(10):
        after, _, success = _transition(jax.random.key(i), state, jnp.int32(0), QUIET)
        assert bool(success) and int(after.access[tb.OP_SERVER0]) == 1


# ---- reward --------------------------------------------------------------------------------


def test_reward_of_hand_built_state():
    access = np.zeros(13, np.int32)
    access[[tb.USER0, tb.ENTERPRISE1, tb.OP_SERVER0]] = 2  # escalated
    access[[tb.USER2, tb.USER3, tb.ENTERPRISE0]] = 1  # shells
    root_shell = _hosts(tb.USER2)  # EternalBlue on User2 lands as SYSTEM
    state = _state(access=access, root_shell=root_shell, impacted=True)
    none = cage.decode_blue(jnp.int32(0))
    terms = cage.reward_terms(state, none)
    # Enterprise1 1.0 + Op_Server0 1.0 + User2 0.1; User0 is worth 0, plain shells nothing.
    np.testing.assert_allclose(terms["access"], -2.1, rtol=1e-6)
    np.testing.assert_allclose(terms["impact"], -10.0)
    np.testing.assert_allclose(terms["restore"], 0.0)
    restore = cage.decode_blue(jnp.int32(tb.RESTORE + tb.USER4))
    np.testing.assert_allclose(cage.reward_terms(state, restore)["restore"], -1.0)


def test_fixed_reward_counts_every_shell():
    # CybORG++ counts sessions of every username Red's exploits run as: a plain shell on
    # Enterprise0 (SSH as pi) or User3 (HTTP RFI as www-data) costs as much as root there.
    access = np.zeros(13, np.int32)
    access[[tb.USER0, tb.ENTERPRISE1]] = 2
    access[[tb.USER3, tb.ENTERPRISE0, tb.OP_SERVER0]] = 1
    state = _state(access=access)
    none = cage.decode_blue(jnp.int32(0))
    np.testing.assert_allclose(cage.reward_terms(state, none, False)["access"], -1.0, rtol=1e-6)
    np.testing.assert_allclose(cage.reward_terms(state, none, True)["access"], -3.1, rtol=1e-6)


def test_step_reward_is_rounded_sum_of_terms():
    access = _hosts(tb.USER0, value=2, dtype=np.int32) + _hosts(tb.USER1, tb.USER2, tb.USER3,
                                                                 dtype=np.int32)  # fmt: skip
    state = _state(access=access, root_shell=_hosts(tb.USER1, tb.USER2, tb.USER3),
                   red_agent=red.SLEEP_AGENT)  # fmt: skip
    _, _, reward, _, _, info = _step(jax.random.key(10), state, jnp.int32(tb.RESTORE + 0), QUIET)
    assert float(reward) == pytest.approx(-1.3, abs=1e-6)
    total = sum(float(v) for v in info["reward_terms"].values())
    assert total == pytest.approx(-1.3, abs=1e-5)


def test_sleep_blue_vs_sleep_red_scores_exactly_zero():
    params = PARAMS.replace(red_agent=red.SLEEP_AGENT)
    reward, _, _, _, _ = jax.device_get(_rollout(jax.random.key(11), params, "sleep", 16, 100))
    assert np.all(reward == 0.0)


# ---- Blue baselines ------------------------------------------------------------------------


def test_react_restore_restores_lowest_pending_host_once():
    obs = np.zeros((13, 4), np.float32)
    obs[[tb.ENTERPRISE2, tb.USER1], 3] = 1.0  # both show User
    state = blue.init_policy_state()
    action, state = blue.react_restore(state, jnp.asarray(obs.reshape(-1)), jax.random.key(0))
    assert int(action) == tb.RESTORE + tb.ENTERPRISE2
    action, state = blue.react_restore(state, jnp.zeros(52), jax.random.key(0))
    assert int(action) == tb.RESTORE + tb.USER1
    action, state = blue.react_restore(state, jnp.zeros(52), jax.random.key(0))
    assert int(action) == tb.SLEEP


def test_react_decoy_places_its_plan_when_idle():
    state = blue.init_policy_state()
    actions = []
    for _ in range(len(blue.DECOY_PLAN) + 1):
        action, state = blue.react_decoy(state, jnp.zeros(52), jax.random.key(0))
        actions.append(int(action))
    assert actions[:-1] == blue.DECOY_PLAN.tolist() and actions[-1] == tb.SLEEP
    assert tb.action_name(actions[0]) == "DecoyFemitter Enterprise2"


def test_fidelity_sleep_rows_and_tolerance():
    assert cyber_fidelity.within(-100.0, 1.0, -103.0, 0.0)  # 3% of 103
    assert not cyber_fidelity.within(-100.0, 0.1, -110.0, 1.0)
    returns = np.asarray(cyber_fidelity._player("sleep", 32, False)(jax.random.key(0), 1))
    assert returns.shape == (3, 32)
    assert np.all(returns[0] >= returns[1]) and np.all(returns[1] >= returns[2])


def test_blind_mixes_agree_with_the_peer():
    # bench/research/cyber_peer.py draws the same mixes in CybORG (it imports CybORG only when it
    # runs).
    from bench.research import cyber_peer

    assert cyber_peer.KINDS == blue.KINDS
    assert cyber_peer.KIND_SIZES == tuple(int(n) for n in blue.KIND_SIZES)
    assert set(cyber_peer.MIXES) == set(blue.MIXES)
    for name, weights in blue.MIXES.items():
        np.testing.assert_allclose(cyber_peer.MIXES[name], weights)
    # mix_action: kinds drawn with the mix's chances, uniform within a kind.
    keys = jax.random.split(jax.random.key(0), 20000)
    for name in ("random", "remove_mix"):
        weights = jnp.asarray(blue.MIXES[name])
        actions = np.asarray(jax.vmap(blue.mix_action, in_axes=(None, 0))(weights, keys))
        kinds = np.searchsorted(blue.KIND_FIRST, actions, side="right") - 1
        freq = np.bincount(kinds, minlength=len(blue.KINDS)) / len(actions)
        np.testing.assert_allclose(freq, np.asarray(weights) / np.sum(weights), atol=0.015)
        assert actions.min() >= 0 and actions.max() < tb.NUM_ACTIONS
    assert len(np.unique(actions[kinds == 3])) == tb.NUM_HOSTS  # every Remove host drawn


def test_cyborg_reference_json_holds_every_gated_cell():
    # CI has no CybORG: the gate reads real CybORG's scores from the committed JSON, one cell
    # per (bugs, Red agent, Blue, length), each with the sample it came from.
    import json

    with open(cyber_fidelity.REFERENCE_JSON) as f:
        cells = json.load(f)["cells"]
    keys = [(c["bugs"], c["red"], c["blue"], c["steps"]) for c in cells]
    want = {
        (bugs, red_name, blue_name, steps)
        for bugs in cyber_fidelity.BUGS
        for red_name in ("B_line", "Meander")
        for blue_name in cyber_fidelity.BLUES
        for steps in cyber_fidelity.LENGTHS
    }
    assert len(keys) == len(set(keys)) == len(want) == 2 * 2 * 7 * 3
    assert set(keys) == want
    for c in cells:
        assert c["episodes"] >= 200 and c["seeds"] and c["se"] >= 0.0
        assert cyber_fidelity.REFERENCE[(c["bugs"], c["red"], c["blue"], c["steps"])] == (
            c["mean"],
            c["se"],
        )
    # A return only falls with the episode: every cell's 30-step mean is above its 100-step one.
    means = dict(zip(keys, (c["mean"] for c in cells), strict=True))
    for bugs, red_name, blue_name, steps in want:
        if steps == 30:
            assert means[(bugs, red_name, blue_name, 30)] > means[(bugs, red_name, blue_name, 100)]


def test_fidelity_blind_mixes_match_cyborg_at_a_small_count():
    # CI's gate on the blind-mix cells: 128 episodes a cell, one compile for every mix, Red
    # and bug setting, against the CybORG references in bench/research/cage2_cyborg_reference.json.
    # At this count our standard error dominates, so the gate is 3 combined SE or 5%; the
    # full-count table (docs/results/log.md) holds them to 1.96 SE or 5%.
    rows = cyber_fidelity.run(128, seed=0, blues=cyber_fidelity.MIX_BLUES)
    cells = [r for r in rows if "cyborg" in r]
    assert len(cells) == 2 * 3 * 3 * 3  # bugs x Red (B_line, Meander, Sleep) x mix x length
    bad = [
        r
        for r in cells
        if not cyber_fidelity.within(r["mean"], r["se"], r["cyborg"], r["cyborg_se"], 3.0, 0.05)
    ]
    assert not bad, bad


def test_fidelity_hop_guard_matches_cyborg_at_a_small_count():
    # CI's gate on hop_guard, the table-reading B_line guard (restores and decoys timed to
    # Red's scans at the hop): 128 episodes a cell against its CybORG references, 3 combined SE
    # or 5% (the full-count table in docs/results/log.md: 1.96 SE or 5%); 0 against a sleeping Red.
    rows = cyber_fidelity.run(128, seed=0, blues=("hop_guard",))
    cells = [r for r in rows if "cyborg" in r]
    assert len(cells) == 2 * 3 * 3  # bugs x Red (B_line, Meander, Sleep) x length
    bad = [
        r
        for r in cells
        if not cyber_fidelity.within(r["mean"], r["se"], r["cyborg"], r["cyborg_se"], 3.0, 0.05)
    ]
    assert not bad, bad


def test_trained_defenders_match_cyborg_at_a_small_count():
    # A trained defender exercises what no scripted or blind Blue does: the committed one was
    # trained before the same-step decoy rule and scored 19 better here than in CybORG. 64
    # episodes a cell through the numpy player that also ran in CybORG, 3 SE or 5%.
    import json

    with open(cyber_fidelity.POLICY_REFERENCE_JSON) as f:
        cells = json.load(f)["cells"]
    defenders = sorted(p.stem for p in cyber_fidelity.DEFENDERS_DIR.glob("*.npz"))
    want = {
        (bugs, red_name, f"policy:{name}", steps)
        for bugs in cyber_fidelity.BUGS
        for red_name in ("B_line", "Meander")
        for name in defenders
        for steps in cyber_fidelity.LENGTHS
    }
    assert defenders and {(c["bugs"], c["red"], c["blue"], c["steps"]) for c in cells} == want
    assert all(c["episodes"] >= 500 and c["seeds"] for c in cells)
    rows = cyber_fidelity.policy_fidelity(64, seed=0, z=3.0)
    assert len(rows) == len(want)
    assert all(r["ok"] for r in rows), cyber_fidelity.format_table(rows)
    _, step = cyber_fidelity._cage2_and_step()
    assert step._cache_size() == 1  # one compile for every (Red, bugs, defender) run


def test_blue_table_matches_cyborg_under_blind_mixes():
    # Scores can agree while the table a policy reads does not (a failed brute force on the
    # Defender scored the same and showed nothing here): how often each host's row shows each
    # state, 128 of our episodes (the compiled player of the test above) against 150 of
    # CybORG's (bench/research/cage2_cyborg_table_reference.json), within 4 combined SE or 0.02.
    rows = cyber_fidelity.table_fidelity(128, seed=0)
    assert [(r["bugs"], r["red"], r["blue"]) for r in rows] == [
        ("2.1", "B_line", "random"),
        ("2.1", "Meander", "remove_mix"),
        ("fixed", "Meander", "decoy_mix"),
    ]
    for r in rows:
        assert r["mean"].shape == r["cyborg"].shape == (tb.NUM_HOSTS, 5)
        assert r["ok"], cyber_fidelity.format_table_states([r])
    # The rates themselves: a state the Defender's row can show only through Meander's failed
    # brute force, and User0's row never shows an exploit against B_line.
    defender_user = rows[1]["mean"][tb.DEFENDER, 3]
    assert 0.1 < defender_user < 0.3 and rows[0]["mean"][tb.USER0, 1] == 0.0


def test_table_rates_of_a_hand_built_table():
    from bench.research.cyber_peer import table_rates

    tables = np.zeros((2, 4, 52), np.int8)
    tables[0, :2, 0:2] = (1, 1)  # Defender: Exploit in 2 of episode 0's 4 steps
    tables[1, :, 4 * tb.USER1 + 2 : 4 * tb.USER1 + 4] = (1, 1)  # User1 Privileged throughout
    tables[0, 3, 4 * tb.USER1 + 2] = 1  # and Unknown once in episode 0
    mean, se = table_rates(tables)
    assert mean.shape == se.shape == (tb.NUM_HOSTS, 5)
    np.testing.assert_allclose(mean[tb.DEFENDER], [0.0, 0.25, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(mean[tb.USER1], [0.0, 0.0, 0.125, 0.0, 0.5])
    np.testing.assert_allclose(se[tb.USER1, 4], 0.5)  # episodes 0 and 1: std 0.7071 / sqrt 2
    assert mean.sum() == 0.875


def _draws(**changes) -> cage.StepDraws:
    """Step uniforms: all 0 (top exploit, detected, GreenAgent acting on User0) unless given."""
    zeros = {
        "meander_scan": jnp.zeros(13),
        "meander_exploit": jnp.zeros(13),
        "exploit_top": jnp.float32(0),
        "exploit_other": jnp.zeros(8),
        "detection": jnp.float32(0),
        "green_acts": jnp.float32(0),
        "green_host": jnp.float32(0),
    }
    return cage.StepDraws(**{**zeros, **{k: jnp.float32(v) for k, v in changes.items()}})


@pytest.mark.parametrize("fix_bugs", [False, True])
def test_failed_brute_force_on_an_ssh_process_shows_as_exploit(fix_bugs):
    # CybORG's SSHBruteForce appends its ten port-22 connection events before it checks for a
    # brute-forceable user or a decoy; BlueTableWrapper reads >= 3 connections on one port as
    # an Exploit and marks the host User. Red gets nothing.
    decoys = np.zeros((13, 8), bool)
    decoys[tb.USER2, tb.SSHD] = True
    decoys[tb.ENTERPRISE0, tb.APACHE] = True
    ports = np.zeros((13, 8), bool)
    ports[tb.DEFENDER, tb.SSH] = True  # genuine sshd, no brute-forceable user
    ports[tb.USER2, tb.SSH] = True  # User2 runs no sshd: only the decoy answers
    ports[tb.USER3, tb.SSH] = True  # Red saw an SSHD decoy there that a Restore has removed
    ports[tb.ENTERPRISE0, tb.HTTP_RFI] = True  # only the Apache decoy serves port 80 there
    state = _state(decoys=decoys, red_ports=ports)
    cases = (  # (target, activity shown, marked User)
        (tb.DEFENDER, cage.ACT_EXPLOIT, True),
        (tb.USER2, cage.ACT_EXPLOIT, True),
        (tb.USER3, cage.ACT_NONE, False),  # no process on port 22: nothing logged
    )
    for target, shown, marked in cases:
        exploit = jnp.int32(red.RED_EXPLOIT)
        outcome = _apply_red(_draws(), state, exploit, jnp.int32(target), jnp.bool_(fix_bugs))
        after = outcome.state
        assert not bool(outcome.success) and int(after.access[target]) == 0
        assert int(after.activity[target]) == shown
        assert bool(outcome.exploit_seen[target]) == marked
        comp = cage.update_table(state, cage.decode_blue(jnp.int32(0)), outcome.exploit_seen)
        assert int(comp[target]) == (cage.COMP_USER if marked else cage.COMP_NO)
        assert not bool(after.malware[target])
    # Any other exploit that hits a decoy shows as a Scan and marks nothing.
    exploit = jnp.int32(red.RED_EXPLOIT)
    outcome = _apply_red(_draws(), state, exploit, jnp.int32(tb.ENTERPRISE0), jnp.bool_(fix_bugs))
    after = outcome.state
    assert not bool(outcome.success) and int(after.activity[tb.ENTERPRISE0]) == cage.ACT_SCAN
    assert not bool(outcome.exploit_seen[tb.ENTERPRISE0])


def test_ftp_exploit_at_cyborg_plus_plus_vsftpd_decoy_fails_unseen():
    # CybORG++'s Vsftpd decoy opens port 21 as a web-server process: Red's scan offers FTP, and
    # FTPDirectoryTraversal, which looks for a femitter process on 21, finds none: it fails and
    # logs nothing (real CybORG++: 14511 of 14511 such exploits on Enterprise0 read None in a
    # trained defender's 1000 Meander episodes). In 2.1 the Vsftpd decoy is a web server on 80,
    # where HTTP RFI finds it: a decoy hit, a Scan.
    decoys = np.zeros((13, 8), bool)
    decoys[tb.ENTERPRISE0, tb.VSFTPD] = True
    ports = np.zeros((13, 8), bool)
    ports[tb.ENTERPRISE0, [tb.FTP, tb.HTTP_RFI]] = True
    exploit, target = jnp.int32(red.RED_EXPLOIT), jnp.int32(tb.ENTERPRISE0)
    for fix_bugs, choice, shown in ((True, tb.FTP, cage.ACT_NONE),
                                    (False, tb.HTTP_RFI, cage.ACT_SCAN)):  # fmt: skip
        only = np.zeros((13, 8), bool)
        only[tb.ENTERPRISE0, choice] = True
        state = _state(decoys=decoys, red_ports=ports & only)
        outcome = _apply_red(_draws(), state, exploit, target, jnp.bool_(fix_bugs))
        assert not bool(outcome.success) and int(outcome.state.access[tb.ENTERPRISE0]) == 0
        assert int(outcome.state.activity[tb.ENTERPRISE0]) == shown
        assert not bool(outcome.exploit_seen[tb.ENTERPRISE0])
    # Placed in the step of the exploit, it still shows nothing (no connection behind it).
    state = _state(bline_stage=5, bline_user=tb.USER3, red_ports=ports & (np.arange(8) == tb.FTP),
                   access=_hosts(tb.USER0, tb.USER3, value=2, dtype=np.int32))  # fmt: skip
    params = QUIET.replace(fix_bugs=True)
    after, _, success = _transition_with(_draws(), state, _decoy(tb.VSFTPD, tb.ENTERPRISE0), params)
    assert bool(after.decoys[tb.ENTERPRISE0, tb.VSFTPD]) and not bool(success)
    assert int(after.activity[tb.ENTERPRISE0]) == cage.ACT_NONE
    assert int(after.compromised[tb.ENTERPRISE0]) == cage.COMP_NO


def test_escalation_drops_a_file_only_for_a_user_shell():
    # CybORG's PrivilegeEscalate succeeds at once where Red holds a root/SYSTEM session and
    # runs no escalation (no escalate.exe/.sh for Analyse to find): User0 from the start, or
    # a shell that landed as SYSTEM. A user shell is escalated and drops the file.
    access = _hosts(tb.USER0, value=2, dtype=np.int32) + _hosts(tb.USER1, tb.USER2, dtype=np.int32)
    state = _state(access=access, root_shell=_hosts(tb.USER2))
    for target, file_dropped in ((tb.USER0, False), (tb.USER1, True), (tb.USER2, False)):
        privesc = jnp.int32(red.RED_PRIVESC)
        outcome = _apply_red(_draws(), state, privesc, jnp.int32(target), jnp.bool_(False))
        assert bool(outcome.success) and int(outcome.state.access[target]) == 2
        assert bool(outcome.state.malware[target]) == file_dropped
        # Blue's Analyse of the host in the next step shows Privileged only where the file is.
        escalated = outcome.state.replace(red_agent=jnp.int32(red.SLEEP_AGENT))
        analyse = jnp.int32(tb.ANALYSE + target)
        analysed, _, _ = _transition(jax.random.key(0), escalated, analyse, QUIET)
        want = cage.COMP_PRIVILEGED if file_dropped else cage.COMP_NO
        assert int(analysed.compromised[target]) == want


@pytest.mark.parametrize(("fix_bugs", "seen"), [(False, False), (True, True)])
def test_green_scan_masks_exploit_in_2_1_only(fix_bugs, seen):
    ports = np.zeros((13, 8), bool)
    ports[tb.USER1, tb.FTP] = True
    state = _state(bline_stage=2, red_ports=ports)  # B_line exploits User1 with FTP
    params = PARAMS.replace(green_agent=True, fix_bugs=fix_bugs)
    green_on_user1 = (list(cage.GREEN_HOSTS).index(tb.USER1) + 0.5) / len(cage.GREEN_HOSTS)
    after, _, success = cage.transition_with(
        _draws(green_host=green_on_user1), state, jnp.int32(0), params
    )
    assert bool(success) and int(after.access[tb.USER1]) == 1 and bool(after.root_shell[tb.USER1])
    want = cage.ACT_EXPLOIT if seen else cage.ACT_SCAN
    assert int(after.activity[tb.USER1]) == want
    assert (int(after.compromised[tb.USER1]) == cage.COMP_USER) == seen
    # Without GreenAgent the same draws show the exploit in both settings.
    quiet, _, _ = cage.transition_with(
        _draws(), state, jnp.int32(0), params.replace(green_agent=False)
    )
    assert int(quiet.activity[tb.USER1]) == cage.ACT_EXPLOIT


def _hop_guard_record(red_agent: int, episodes: int):
    """jaxrl's hop_guard over ``episodes`` 100-step episodes: Blue's observations float32
    [E, 100, 52] (the table before each action) and its actions int32 [E, 100]."""
    env, params = envs.make("CAGE2", max_steps_in_episode=100)
    params = params.replace(red_agent=red_agent)

    def episode(key):
        key_reset, key_steps = jax.random.split(key)
        obs, state = env.reset(key_reset, params)

        def body(carry, key_t):
            obs, state, guard = carry
            action, guard = blue.hop_guard(guard, obs, key_t)
            next_obs, state, *_ = env.step(key_t, state, action, params)
            return (next_obs, state, guard), (obs, action)

        carry = (obs, state, blue.init_policy_state())
        return jax.lax.scan(body, carry, jax.random.split(key_steps, 100))[1]

    keys = jax.random.split(jax.random.key(red_agent), episodes)
    obs, actions = jax.jit(jax.vmap(episode))(keys)
    return np.asarray(obs), np.asarray(actions)


def test_hop_guard_opens_on_user2_then_guards_the_hop_it_reads():
    state = blue.init_policy_state()
    actions = []
    for _ in range(2):
        action, state = blue.hop_guard(state, jnp.zeros(52), jax.random.key(0))
        actions.append(tb.action_name(int(action)))
    assert actions == ["DecoyFemitter User2", "DecoyTomcat User2"]
    scan = np.zeros((13, 4), np.float32)
    scan[tb.USER3, 0] = 1.0  # B_line's port scan of User3: it hops through Enterprise0
    action, state = blue.hop_guard(state, jnp.asarray(scan.reshape(-1)), jax.random.key(0))
    assert int(state.hop) == tb.ENTERPRISE0
    assert tb.action_name(int(action)) == "DecoyHarakaSMPT Enterprise0"
    busy = np.zeros((13, 4), np.float32)
    busy[tb.ENTERPRISE0, 0] = 1.0  # Red scans the hop: no decoy there this step
    action, state = blue.hop_guard(state, jnp.asarray(busy.reshape(-1)), jax.random.key(0))
    assert tb.action_name(int(action)) == "DecoyFemitter Enterprise2"
    marked = np.zeros((13, 4), np.float32)
    marked[tb.ENTERPRISE0, 1:] = 1.0  # an exploit marked the hop User: restore it
    action, state = blue.hop_guard(state, jnp.asarray(marked.reshape(-1)), jax.random.key(0))
    assert int(action) == tb.RESTORE + tb.ENTERPRISE0
    assert not bool(state.placed[tb.ENTERPRISE0].any()) and int(state.restored_at) == 4
    # The step after its Restore Red exploits the hop with the ports it saw: no decoy there.
    action, state = blue.hop_guard(state, jnp.zeros(52), jax.random.key(0))
    assert tb.action_name(int(action)) == "DecoyHarakaSMPT Op_Server0"
    action, state = blue.hop_guard(state, jnp.zeros(52), jax.random.key(0))
    assert tb.action_name(int(action)) == "DecoyHarakaSMPT Enterprise0"


def test_hop_guard_agrees_with_the_peer_step_by_step():
    # bench/research/cyber_peer.py's HopGuardBlue plays hop_guard in real CybORG from the same
    # table.
    from bench.research import cyber_peer

    for red_agent in (1, 2):  # B_line, Meander
        obs, actions = _hop_guard_record(red_agent, 24)
        assert len(np.unique(actions)) > 5  # restores and decoys, not a constant
        for episode_obs, episode_actions in zip(obs, actions, strict=True):
            guard = cyber_peer.HopGuardBlue()
            peer = [guard.act(o) for o in episode_obs]
            np.testing.assert_array_equal(peer, episode_actions)
