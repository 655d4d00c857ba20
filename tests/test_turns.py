"""Turn-based envs (:class:`jaxrl.envs.protocols.TurnBasedEnv`): each row trains on its own moves.

The turn-aware GAE against hand-computed numbers (termination on the opponent's move,
truncation, a pending move at the rollout's end), the match step's turn flags on
:class:`jaxrl.envs.probes.Nim` (two teams) and :class:`jaxrl.envs.probes.CoopNim` (one learner for
both slots), an env without ``info["agent_mask"]``, and a tiny Nim league (self-play with a pool,
PFSP, Elo) that compiles once and whose checkpoints play a tournament.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.commands.tournament import load_players, main, make_play_batch, pair_key
from jaxrl.config import config_from_dict
from jaxrl.core.acting import PolicyParams
from jaxrl.core.gae import bootstrap_values, gae, turn_gae
from jaxrl.core.match import NETWORK, MatchSpec, idle_plan, match_step, start_matches
from jaxrl.core.ppo import advantages_of, training_batch
from jaxrl.core.types import RunningStats, Transition
from jaxrl.envs.probes import NIM_RANDOM, NIM_RULE, MaskedBandit, Nim
from jaxrl.run.driver import train
from jaxrl.run.play import eval_layout
from jaxrl.run.runner import init_params
from jaxrl.run.setup import make_setup
from jaxrl.run.train_step import init_runner_state, train_chunk

GAMMA, LAMBDA = 0.9, 0.8


def _columns():
    """Four rows of six steps; see :func:`test_turn_gae_by_hand` for what each shows."""
    x = 9.0  # values at steps the row does not move: never read
    turn = np.asarray(
        [[1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1], [0, 1, 0, 1, 0, 1], [1, 0, 1, 0, 1, 0]], bool
    ).T
    reward = np.asarray(
        [[0.1, 0.2, 0.0, -1.0, 0.3, 0.0], [1.0, 0, 0, 0.5, 0, 0], [1.0, 0, 0, 0.5, 0, 0], [0.0] * 6]
    ).T
    value = np.asarray(
        [
            [0.5, x, 0.4, x, 0.2, x],
            [x, 0.3, x, 0.1, x, 0.2],
            [x, 0.3, x, 0.1, x, 0.2],
            [0.1, x, 0.2, x, 0.3, x],
        ]
    ).T
    terminated = np.zeros((6, 4), bool)
    terminated[3, 0] = True  # row 0's game ends on the opponent's move
    truncated = np.zeros((6, 4), bool)
    truncated[3, 1:3] = True  # rows 1, 2: cut by a time limit
    final_value = np.where(truncated, 0.6, 0.0)
    last_value = np.full((4,), 0.7)
    last_turn = np.asarray([True, False, True, False])
    return reward, value, final_value, last_value, turn, last_turn, terminated, truncated


def test_turn_gae_by_hand():
    args = [jnp.asarray(a, jnp.float32 if a.dtype == np.float64 else bool) for a in _columns()]
    adv, target, known = (np.asarray(a) for a in turn_gae(*args, GAMMA, LAMBDA))
    g, gl = GAMMA, GAMMA * LAMBDA
    # Row 0: move 4 collects r4 + r5, bootstraps V(obs_T) (it moves next); move 2 collects
    # r2 + r3 (the opponent's winning move ends the game: terminated, no bootstrap); move 0
    # bootstraps from move 2 and carries its trace.
    a4 = 0.3 + g * 0.7 - 0.2
    a2 = 0.0 - 1.0 - 0.4
    a0 = (0.1 + 0.2 + g * 0.4 - 0.5) + gl * a2
    # Row 1: move 3 ends a truncated episode: r3 + gamma V(final obs); move 1 bootstraps
    # from move 3. Move 5 is pending and the row does not move at T: unknown. The reward of
    # step 0 belongs to a move before the rollout.
    a3 = 0.5 + g * 0.6 - 0.1
    a1 = (0.0 + g * 0.1 - 0.3) + gl * a3
    # Row 2: row 1 but moving at T: move 5 bootstraps V(obs_T).
    a5 = 0.0 + g * 0.7 - 0.2
    # Row 3: move 4 pending, unknown: the trace of move 2 stops there.
    b2 = g * 0.3 - 0.2
    b0 = (g * 0.2 - 0.1) + gl * b2
    expected = {
        0: ({0: a0, 2: a2, 4: a4}, [1, 0, 1, 0, 1, 0]),
        1: ({1: a1, 3: a3}, [0, 1, 0, 1, 0, 0]),
        2: ({1: a1, 3: a3, 5: a5}, [0, 1, 0, 1, 0, 1]),
        3: ({0: b0, 2: b2}, [1, 0, 1, 0, 0, 0]),
    }
    values = _columns()[1]
    for row, (moves, known_row) in expected.items():
        np.testing.assert_array_equal(known[:, row], np.asarray(known_row, bool))
        for t, a in moves.items():
            np.testing.assert_allclose(adv[t, row], a, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(target[t, row], a + values[t, row], rtol=1e-5)
        idle = ~_columns()[4][:, row]
        np.testing.assert_array_equal(adv[idle, row], 0.0)  # no advantage off-turn


def test_turn_gae_with_every_move_is_gae():
    keys = jax.random.split(jax.random.key(0), 5)
    shape = (7, 5)
    reward, value, final = (jax.random.normal(k, shape) for k in keys[:3])
    last_value = jax.random.normal(keys[3], (5,))
    ends = jax.random.randint(keys[4], shape, 0, 5)
    terminated, truncated = ends == 0, ends == 1
    final = jnp.where(truncated, final, 0.0)
    expected, _ = gae(
        reward,
        value,
        bootstrap_values(value, last_value, final, truncated),
        terminated,
        truncated,
        GAMMA,
        LAMBDA,
    )
    every = jnp.ones(shape, bool)
    got, _, known = turn_gae(
        reward, value, final, last_value, every, every[0], terminated, truncated, GAMMA, LAMBDA
    )
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert np.asarray(known).all()


def test_loss_weight_is_the_rows_own_known_moves():
    reward, value, final_value, last_value, turn, last_turn, terminated, truncated = (
        jnp.asarray(a) for a in _columns()
    )
    traj = Transition(
        obs=jnp.zeros((6, 4, 1)),
        is_first=jnp.zeros((6, 4), bool),
        action=jnp.zeros((6, 4), jnp.int32),
        log_prob=jnp.zeros((6, 4)),
        value=value,
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        final_value=final_value,
        mask=jnp.ones((6, 4), bool).at[:, 3].set(False),  # row 3's slot is inactive
        turn=turn,
        next_turn=jnp.zeros((6, 4), bool).at[-1].set(last_turn),
    )
    hyper = type("H", (), {"gamma": GAMMA, "gae_lambda": LAMBDA})()
    advantages, targets, weight = advantages_of(traj, last_value, hyper)
    spec = type("S", (), {"normalize_obs": False, "sequence_length": 1})()
    batch = training_batch(spec, traj, (), advantages, targets, weight)
    expected = np.asarray(_columns()[4]).copy()
    expected[5, 1] = expected[4, 3] = False  # pending moves with no known successor
    expected[:, 3] = False  # inactive slot
    np.testing.assert_array_equal(np.asarray(batch.mask).reshape(6, 4), expected)


@pytest.fixture(scope="module")
def nim_setup():
    return make_setup(
        config_from_dict(
            {
                "env": {"name": "jaxrl.envs.probes:Nim", "num_envs": 8},
                "network": {"hidden_sizes": [8]},
                "ppo": {"num_steps": 4, "num_minibatches": 1},
            }
        )
    )


def _play(setup, steps: int, opponent_kind: int):
    layout = eval_layout(setup, setup.layout.num_envs)
    spec = MatchSpec(setup.env, setup.policy, layout, deterministic=False, eval_deterministic=False)
    learner = PolicyParams(
        params=init_params(setup, jax.random.key(0)),
        obs_stats=RunningStats.create(setup.obs_shape),
    )
    plan = idle_plan(layout, setup.env_params)
    plan = plan.replace(
        opponent_kind=jnp.full_like(plan.opponent_kind, opponent_kind),
        random_side=jnp.ones_like(plan.random_side),
    )

    @jax.jit
    def run(key):
        carry = start_matches(spec, setup.network.initial_hidden, plan, jax.random.key(1))

        def step(c, k):
            inner = c.env_state.env_state
            c, record = match_step(spec, learner, plan, c, k)
            return c, (inner.player, inner.pile, c.side, record)

        carry0 = carry
        return carry0.side, jax.lax.scan(step, carry, jax.random.split(key, steps))[1]

    return run(jax.random.key(2))


def test_two_team_turns_rewards_and_no_agent_mask(nim_setup):
    first_side, (player, pile, side_after, record) = _play(nim_setup, 40, NIM_RANDOM)
    side = np.concatenate([np.asarray(first_side)[None], np.asarray(side_after)[:-1]])
    player, pile = np.asarray(player), np.asarray(pile)
    turn, next_turn = np.asarray(record.turn), np.asarray(record.next_turn)
    np.testing.assert_array_equal(turn, player == side)  # team_size 1: slot = side
    # The learner's next turn: the player after the step (of the next episode where it ended).
    np.testing.assert_array_equal(next_turn[:-1], player[1:] == np.asarray(side_after)[:-1])
    assert turn.any() and (~turn).any()
    np.testing.assert_array_equal(np.asarray(record.mask), True)  # Nim gives no agent_mask
    # Legal: the learner never takes more than the pile; when it loses, on the other's move.
    action = np.asarray(record.act.action)
    assert (action[turn] + 1 <= pile[turn]).all()
    reward, done = np.asarray(record.reward), np.asarray(record.done)
    lost_off_turn = (reward == -1.0) & ~turn
    assert lost_off_turn.any() and (done[lost_off_turn]).all()
    np.testing.assert_array_equal(reward[~done], 0.0)


def test_single_team_rows_move_on_their_own_slot():
    """CoopNim: one learner drives both slots; slot ``j``'s row moves where ``player == j``."""
    setup = make_setup(
        config_from_dict(
            {
                "env": {"name": "jaxrl.envs.probes:CoopNim", "num_envs": 4},
                "network": {"hidden_sizes": [8]},
                "ppo": {"num_steps": 4, "num_minibatches": 1},
            }
        )
    )
    layout = eval_layout(setup, 4)
    spec = MatchSpec(setup.env, setup.policy, layout, deterministic=False, eval_deterministic=False)
    learner = PolicyParams(
        params=init_params(setup, jax.random.key(0)),
        obs_stats=RunningStats.create(setup.obs_shape),
    )
    plan = idle_plan(layout, setup.env_params)

    def step(c, k):
        player = c.env_state.env_state.player
        c, record = match_step(spec, learner, plan, c, k)
        return c, (player, c.env_state.env_state.player, record.turn, record.next_turn)

    carry = start_matches(spec, setup.network.initial_hidden, plan, jax.random.key(1))
    keys = jax.random.split(jax.random.key(2), 12)
    player, after, turn, next_turn = (
        np.asarray(x) for x in jax.jit(lambda c: jax.lax.scan(step, c, keys)[1])(carry)
    )
    slots = np.tile(np.arange(2), 4)  # rows [N * 2]: env-major
    np.testing.assert_array_equal(turn, np.repeat(player, 2, axis=1) == slots)
    np.testing.assert_array_equal(next_turn, np.repeat(after, 2, axis=1) == slots)
    assert turn.reshape(12, 4, 2).sum(-1).max() == 1  # one slot per env moves


def test_rule_beats_random_at_nim(nim_setup):
    setup = nim_setup
    games = 256
    play = make_play_batch(setup, games, deterministic=True)
    kinds = jnp.asarray([NIM_RULE, NIM_RANDOM])
    keys = jnp.stack([jax.random.key(0)])
    dummy = PolicyParams(
        params=init_params(setup, jax.random.key(0)),
        obs_stats=RunningStats.create(setup.obs_shape),
    )
    policies = jax.tree.map(lambda x: jnp.stack([x, x]), dummy)
    won, drew, lost = np.asarray(
        play(policies, kinds, jnp.asarray([0]), jnp.asarray([1]), setup.env_params, keys)
    )[0]
    assert won + drew + lost == games and drew == 0
    assert won / games > 0.75, (won, lost)  # perfect play from a random start wins most


LEAGUE = {
    "seed": 0,
    "env": {"name": "jaxrl.envs.probes:Nim", "num_envs": 16},
    "network": {"hidden_sizes": [16]},
    "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 2, "lr": 0.003},
    "train": {"total_steps": 16 * 16 * 4, "updates_per_chunk": 2, "progress_bar": False},
    "checkpoint": {"every_updates": 2},
    "selfplay": {
        "pool_size": 2,
        "snapshot_every": 2,
        "latest_fraction": 0.25,
        "rule_fraction": 0.25,
        "lanes": 2,
        "pfsp": "hard",
    },
}


def test_nim_league_compiles_once_with_finite_metrics():
    setup = make_setup(config_from_dict(LEAGUE))
    runner = init_runner_state(setup, jax.random.key(0))
    step = jax.jit(chex.assert_max_traces(lambda r: train_chunk(setup, r), n=1), donate_argnums=0)
    rows = []
    for _ in range(2):
        runner, metrics = step(runner)
        rows.append(jax.device_get(metrics))
    last = {name: float(np.asarray(v)) for name, v in rows[-1].items()}
    for name in ("train/policy_loss", "train/value_loss", "train/entropy", "selfplay/elo"):
        assert np.isfinite(last[name]), (name, last)
    assert last["selfplay/pool_size"] == 2.0
    assert 0.0 < last["rollout/outcome/win"] < 1.0
    assert np.isfinite(last["selfplay/vs_pool/win"])  # pool lanes played and counted


def test_tournament_between_two_checkpoints(tmp_path, capsys):
    run_dir = tmp_path / "nim"
    train(config_from_dict(LEAGUE), run_dir, quiet=True)
    out = tmp_path / "elo.json"
    args = ["--run-dir", str(run_dir), "--players", "2,4,rule", "--team-sizes", "1", "--games", "8"]
    assert main([*args, "--bootstrap", "10", "--json", str(out)]) == 0
    assert "1v1: 3 pairings" in capsys.readouterr().err
    setup, players, policies = load_players([str(run_dir)], ["2", "4"])
    assert [p.kind for p in players] == [NETWORK, NETWORK]
    play = make_play_batch(setup, 8, deterministic=False)
    keys = pair_key(0, players[0], players[1], 1)[None]
    wdl = np.asarray(
        play(
            policies,
            jnp.asarray([NETWORK] * 2),
            jnp.asarray([0]),
            jnp.asarray([1]),
            setup.env_params,
            keys,
        )
    )[0]
    assert wdl.sum() == 8 and wdl[1] == 0


class _NoRuleNim(Nim):
    scripted_kinds = {"random": NIM_RANDOM}  # noqa: RUF012 - a class constant


class _NoAnchorNim(Nim):
    scripted_kinds = {"perfect": 1}  # noqa: RUF012 - a class constant


def test_league_requirements_of_a_two_player_env():
    from jaxrl.envs.protocols import league_problem, scripted_kinds  # noqa: PLC0415

    assert league_problem(Nim()) is None
    # no rule policy: the random (legal) mover is the anchor, under the name "rule"
    assert league_problem(_NoRuleNim()) is None
    assert scripted_kinds(_NoRuleNim()) == {"random": NIM_RANDOM, "rule": NIM_RANDOM}
    assert scripted_kinds(Nim())["rule"] != scripted_kinds(Nim())["random"]
    assert "has no scripted kind 'rule' or 'random'" in league_problem(_NoAnchorNim())
    assert "not a two-team env" in league_problem(MaskedBandit())
