"""Elo arithmetic (:mod:`jaxrl.core.elo`) against literal formulas and synthetic leagues.

Synthetic leagues have known true ratings; their results are either the expected counts (so the
fit must return the true ratings up to the small pull of the virtual draws) or multinomial draws
with a fixed seed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.core.elo import bootstrap_elo, elo_from_score, expected_score, fit_elo, newton_elo

TRUE_RATINGS = np.array([1500.0, 1250.0, 1620.0, 1800.0, 2000.0, 1400.0])  # index 0: the anchor


def _p_win(ratings):
    """``[P, P]`` expected score of ``i`` against ``j``, the literal Elo formula."""
    return 1.0 / (1.0 + 10.0 ** ((ratings[None, :] - ratings[:, None]) / 400.0))


def _expected_results(ratings, games, draw_model):
    """``(wins, draws)`` ``[P, P]`` with exactly the expected score ``p_ij`` per pair.

    Draws are taken evenly from both sides so that each pair's score stays ``p_ij``:
    ``"none"``: no draws; ``"uniform"``: 2% of every pair's games are draws;
    ``"underdog"``: half of the underdog's points come from draws (up to 50% draws).
    """
    p = _p_win(ratings)
    if draw_model == "none":
        share = np.zeros_like(p)
    elif draw_model == "uniform":
        share = np.full_like(p, 0.02)
    else:
        share = np.minimum(p, 1.0 - p)
    wins = games * (p - share / 2.0)
    draws = games * share
    np.fill_diagonal(wins, 0.0)
    np.fill_diagonal(draws, 0.0)
    return wins, draws


def _sampled_results(ratings, games, draw_share, seed):
    """``(wins, draws)`` ``[P, P]``: ``games`` multinomial games per pair.

    A share of ``draw_share`` of the games (at most what the underdog's score allows) are draws,
    taken evenly from both sides, so the expected score of each pair stays ``p_ij``.
    """
    num_players = len(ratings)
    rows, cols = np.triu_indices(num_players, k=1)
    p = _p_win(ratings)[rows, cols]
    share = np.minimum(draw_share, 2.0 * np.minimum(p, 1.0 - p))
    probs = np.stack([p - share / 2, share, 1 - p - share / 2], axis=-1)
    counts = np.random.default_rng(seed).multinomial(games, probs)
    wins = np.zeros((num_players, num_players))
    draws = np.zeros((num_players, num_players))
    wins[rows, cols], wins[cols, rows] = counts[:, 0], counts[:, 2]
    draws[rows, cols] = draws[cols, rows] = counts[:, 1]
    return wins, draws


# ----------------------------------------------------------------------------- expected_score


def test_expected_score_matches_formula_and_is_complementary():
    a = np.array([1500.0, 1600.0, 1000.0, 2400.0, 1234.5])
    b = np.array([1500.0, 1400.0, 1800.0, 1300.0, 1234.5])
    literal = 1.0 / (1.0 + 10.0 ** ((b - a) / 400.0))
    got = expected_score(a, b)
    assert isinstance(got, np.ndarray) and got.dtype == np.float64
    np.testing.assert_allclose(got, literal, rtol=1e-12)
    np.testing.assert_allclose(got + expected_score(b, a), 1.0, atol=1e-12)
    assert expected_score(1500.0, 1500.0) == 0.5
    got_jax = expected_score(jnp.asarray(a), jnp.asarray(b))
    assert isinstance(got_jax, jax.Array)
    np.testing.assert_allclose(got_jax, literal, rtol=1e-5)
    np.testing.assert_allclose(got_jax + expected_score(jnp.asarray(b), a), 1.0, atol=1e-6)


def test_expected_score_broadcasts():
    a = np.array([[1400.0], [1500.0], [1600.0]])
    b = np.array([1400.0, 1500.0, 1600.0, 1700.0])
    got = expected_score(a, b)
    assert got.shape == (3, 4)
    np.testing.assert_allclose(got[1, 2], 1.0 / (1.0 + 10.0**0.25), rtol=1e-12)


# ----------------------------------------------------------------------------- elo_from_score


def test_elo_from_score_values():
    assert elo_from_score(0.5) == 1500.0
    assert elo_from_score(0.5, anchor=1234.0) == 1234.0
    assert abs(elo_from_score(0.76) - 1700.0) < 1.0
    assert abs(elo_from_score(0.24, anchor=1000.0) - 800.0) < 1.0
    ratings = np.linspace(900.0, 2100.0, 13)
    np.testing.assert_allclose(elo_from_score(expected_score(ratings, 1500.0)), ratings, atol=1e-6)


def test_elo_from_score_clips():
    np.testing.assert_allclose(elo_from_score(np.array([0.0, 1.0])), [700.0, 2300.0], atol=1e-6)
    np.testing.assert_allclose(elo_from_score(0.999, max_gap=300.0), 1800.0, atol=1e-6)
    np.testing.assert_allclose(
        elo_from_score(0.001, anchor=1000.0, max_gap=300.0), 700.0, atol=1e-6
    )
    # Just inside the clip the inverse is still exact.
    assert abs(elo_from_score(expected_score(2250.0, 1500.0)) - 2250.0) < 1e-6


def test_elo_from_score_under_jit_is_finite_with_finite_gradients():
    scores = jnp.array([0.0, 0.24, 0.5, 0.76, 1.0])
    got = jax.jit(elo_from_score)(scores, 1500.0)
    np.testing.assert_allclose(got, [700.0, 1299.76, 1500.0, 1700.24, 2300.0], atol=0.1)
    grads = jax.vmap(jax.grad(elo_from_score))(scores)
    assert np.isfinite(grads).all()
    assert grads[2] > 0.0


# ----------------------------------------------------------------------------- newton_elo

LN10_OVER_400 = np.log(10.0) / 400.0


def test_newton_elo_single_step_by_hand():
    # Equals, 7 points of 10 games, damping worth 4 games: gradient 7 - 10 / 2 = 2, curvature
    # 10 / 4 + 4 / 4 = 3.5, step 2 / 3.5 natural units = (4 / 7) * 400 / ln(10) Elo.
    new = newton_elo(jnp.float32(1500.0), jnp.array([1500.0]), jnp.array([7.0]), [10.0], 4.0, 1)
    assert new.dtype == jnp.float32
    np.testing.assert_allclose(new, 1500.0 + (4.0 / 7.0) / LN10_OVER_400, atol=1e-3)  # 1599.27
    # Two opponents 200 apart, no damping: p = E(1600, 1400) = 0.7597 and 1 - p against 1800.
    p = 1.0 / (1.0 + 10.0 ** (-0.5))
    gradient = (3.0 - 4.0 * p) + (1.0 - 4.0 * (1.0 - p))
    curvature = 8.0 * p * (1.0 - p)
    new = newton_elo(jnp.float32(1600.0), jnp.array([1400.0, 1800.0]), [3.0, 1.0], [4.0, 4.0])
    one = newton_elo(jnp.float32(1600.0), [1400.0, 1800.0], [3.0, 1.0], [4.0, 4.0], 0.0, 1)
    np.testing.assert_allclose(one, 1600.0 + gradient / curvature / LN10_OVER_400, atol=1e-3)
    # Converged: the plain maximum-likelihood rating, where expected points equal the points.
    expected = 4.0 * (_p_win(np.array([float(new), 1400.0, 1800.0]))[0, 1:]).sum()
    np.testing.assert_allclose(expected, 4.0, atol=1e-4)


def test_newton_elo_clips_the_step_and_keeps_the_rating_without_games():
    # A rating 2500 above its opponent that only draws: Newton's step would be huge.
    new = newton_elo(jnp.float32(4000.0), [1500.0], [50.0], [100.0], 0.0, 1, max_step=400.0)
    np.testing.assert_allclose(new, 3600.0)
    same = newton_elo(jnp.float32(1777.0), [1500.0, 1600.0], [0.0, 0.0], [0.0, 0.0], 8.0)
    np.testing.assert_allclose(same, 1777.0)


def test_newton_elo_under_jit_and_vmap_matches_eager():
    rating = jnp.array([1500.0, 1900.0, 1200.0], jnp.float32)
    opponent = jnp.array([[1500.0, 1700.0], [1500.0, 2100.0], [1500.0, 1300.0]], jnp.float32)
    points = jnp.array([[3.0, 1.5], [9.0, 0.0], [0.5, 4.0]], jnp.float32)
    games = jnp.array([[4.0, 3.0], [10.0, 2.0], [6.0, 4.0]], jnp.float32)
    eager = newton_elo(rating, opponent, points, games, 16.0)
    jitted = jax.jit(newton_elo, static_argnums=5)(rating, opponent, points, games, 16.0, 4)
    mapped = jax.vmap(newton_elo, in_axes=(0, 0, 0, 0, None))(rating, opponent, points, games, 16.0)
    assert eager.shape == (3,) and jitted.dtype == jnp.float32
    np.testing.assert_allclose(jitted, eager, rtol=1e-6)
    np.testing.assert_allclose(mapped, eager, rtol=1e-6)


def _updates(true, opponent, games_per_update, start, updates, decay=0.98, seed=None):
    """The rating after each of ``updates`` updates of ``games_per_update`` games.

    Games are spread evenly over ``opponent``; each update's counts are the expected ones
    (``seed`` None) or multinomial draws with 10% draws, added to counts decayed by ``decay``.
    """
    opponent = np.asarray(opponent, float)
    p = _p_win(np.concatenate([[true], opponent]))[0, 1:]
    share = np.minimum(0.1, 2.0 * np.minimum(p, 1.0 - p))
    probs = np.stack([p - share / 2, share, 1 - p - share / 2], axis=-1)
    rng = np.random.default_rng(seed)
    step = jax.jit(lambda r, pts, n: newton_elo(r, jnp.float32(opponent), pts, n, 16.0))
    points, games = np.zeros(len(opponent)), np.zeros(len(opponent))
    rating, history = jnp.float32(start), []
    for _ in range(updates):
        if seed is None:
            new_games = np.full(len(opponent), games_per_update / len(opponent))
            new_points = new_games * p
        else:
            per = rng.multinomial(games_per_update, np.full(len(opponent), 1 / len(opponent)))
            counts = np.stack([rng.multinomial(n, q) for n, q in zip(per, probs, strict=True)])
            new_points, new_games = counts[:, 0] + 0.5 * counts[:, 1], counts.sum(-1)
        points, games = decay * points + new_points, decay * games + new_games
        rating = step(rating, jnp.float32(points), jnp.float32(games))
        history.append(float(rating))
    return np.asarray(history)


@pytest.mark.parametrize(
    ("true", "start", "opponent"),
    [
        (1950.0, 1500.0, [1500.0]),  # the league's case: a learner that beats the anchor
        (1500.0, 4000.0, [1500.0]),  # a far-off start (the old update's 4047 at scale)
        (2400.0, 1500.0, [1500.0]),  # near-perfect record, little curvature to go on
        (1800.0, 1500.0, [1500.0, 1700.0, 1900.0, 2100.0]),  # several known opponents
        (1200.0, 2500.0, [1500.0, 1700.0]),
    ],
)
def test_newton_elo_fixed_point_is_the_true_rating_at_any_number_of_games(true, start, opponent):
    # Expected counts: the fixed point is the true rating, approached monotonically, whether
    # 10 or 2,000 games arrive per update.
    direction = np.sign(true - start)
    for games_per_update in (10, 2000):
        history = _updates(true, opponent, games_per_update, start, updates=300)
        np.testing.assert_allclose(history[-1], true, atol=0.05)
        assert (direction * np.diff(history)).min() > -0.05  # monotone (float32 round-off)
        assert (direction * (history - true)).max() < 0.05  # never past the true rating
    # More games per update converge in fewer updates (at most a few at 2,000).
    fast = _updates(true, opponent, 2000, start, updates=6)
    assert abs(fast[-1] - true) < 2.0


@pytest.mark.parametrize("games_per_update", [10, 2000])
def test_newton_elo_sampled_results_converge_without_oscillation(games_per_update):
    # Sampled games, five seeds: the rating settles at the true one within its noise, and an
    # early overshoot (noise of the first few games, damped) stays bounded.
    true, start = 1950.0, 1500.0
    for seed in range(5):
        history = _updates(true, [1500.0], games_per_update, start, updates=200, seed=seed)
        late = history[100:]
        if games_per_update == 10:  # ~500 games in the decayed counts, noise ~30 Elo
            assert abs(late.mean() - true) < 40.0
            assert history.max() < true + 250.0 and history.min() > start - 50.0
        else:  # ~100,000 games: a few Elo
            assert abs(late.mean() - true) < 3.0 and np.abs(late - true).max() < 15.0
            assert history.max() < true + 25.0  # no overshoot beyond the noise
            assert np.abs(history[3:] - true).max() < 25.0  # there within a few updates


# ----------------------------------------------------------------------------- fit_elo


@pytest.mark.parametrize("draw_model", ["none", "uniform", "underdog"])
def test_fit_elo_recovers_ratings_from_expected_counts(draw_model):
    wins, draws = _expected_results(TRUE_RATINGS, 4000.0, draw_model)
    ratings = fit_elo(wins, draws, anchor=0)
    assert ratings.shape == (6,) and ratings.dtype == np.float64
    # Exact data: only the 0.5 virtual draws per player pull (by ~0.05 Elo); 10 Elo is the spec.
    np.testing.assert_allclose(ratings, TRUE_RATINGS, atol=1.0)


def test_fit_elo_recovers_ratings_from_sampled_games():
    # 20000 games per pair: over 300 seeds the largest error was 7.3 Elo (median 2.8).
    wins, draws = _sampled_results(TRUE_RATINGS, 20000, draw_share=0.02, seed=0)
    ratings = fit_elo(wins, draws, anchor=0)
    np.testing.assert_allclose(ratings, TRUE_RATINGS, atol=10.0)


def test_fit_elo_holds_the_anchor_exactly():
    wins, draws = _expected_results(TRUE_RATINGS, 4000.0, "uniform")
    assert fit_elo(wins, draws, anchor=0)[0] == 1500.0
    ratings = fit_elo(wins, draws, anchor=3, anchor_elo=1000.0)
    assert ratings[3] == 1000.0
    np.testing.assert_allclose(ratings - 1000.0, TRUE_RATINGS - TRUE_RATINGS[3], atol=1.0)


def test_fit_elo_two_players_closed_form_with_virtual_draws():
    """Against the anchor alone the MLE is ``elo_from_score`` of the score with virtual draws."""
    prior = 0.5
    # 30 wins, 20 draws, 10 losses: 40 points of 60; the virtual draws add prior / 2 points.
    closed_form = 1500.0 + 400.0 * np.log10((40.0 + prior / 2) / (20.0 + prior / 2))
    same_points = [(30.0, 20.0, 10.0), (40.0, 0.0, 20.0), (20.0, 40.0, 0.0)]
    for won, drawn, lost in same_points:
        wins = np.array([[0.0, lost], [won, 0.0]])
        draws = np.array([[0.0, drawn], [drawn, 0.0]])
        ratings = fit_elo(wins, draws, anchor=0, prior_games=prior)
        np.testing.assert_allclose(ratings[1], closed_form, atol=1e-6)
    np.testing.assert_allclose(
        ratings[1], elo_from_score((40.0 + prior / 2) / (60.0 + prior), max_gap=1e4), atol=1e-6
    )


def test_fit_elo_perfect_record_and_missing_players_stay_finite():
    # 0, 1, 2 play each other; 3 beats all three 10-0; 4 plays nobody; 5 and 6 play only each
    # other (6 wins 8-0), so they reach the anchor only through the virtual draws.
    wins = np.zeros((7, 7))
    wins[0, 1], wins[1, 0], wins[0, 2], wins[2, 0], wins[1, 2], wins[2, 1] = 6, 4, 3, 7, 5, 5
    wins[3, :3] = 10.0
    wins[6, 5] = 8.0
    draws = np.zeros((7, 7))
    draws[1, 2] = draws[2, 1] = 4.0
    ratings = fit_elo(wins, draws, anchor=0)
    assert np.isfinite(ratings).all()
    assert ratings[3] > ratings[[0, 1, 2]].max() + 200.0
    np.testing.assert_allclose(ratings[4], 1500.0, atol=1e-9)
    assert ratings[6] > ratings[5] + 200.0
    np.testing.assert_allclose(ratings[5] + ratings[6], 2 * 1500.0, atol=1e-6)  # symmetric pair
    # The virtual draws are what bound the perfect record: fewer of them, higher rating.
    weaker_prior = fit_elo(wins, draws, anchor=0, prior_games=0.05)
    assert weaker_prior[3] > ratings[3] + 100.0


@pytest.mark.parametrize(
    ("wins", "draws", "anchor"),
    [
        (np.zeros((3, 3)), np.triu(np.ones((3, 3)), 1), 0),  # asymmetric draws
        (np.zeros((3, 3)), np.zeros((3, 3)), 3),  # anchor out of range
        (-np.eye(3)[::-1], np.zeros((3, 3)), 0),  # negative wins
        (np.zeros((3, 2)), np.zeros((3, 2)), 0),  # not square
    ],
)
def test_fit_elo_rejects_bad_input(wins, draws, anchor):
    with pytest.raises(ValueError):
        fit_elo(wins, draws, anchor=anchor)


# ----------------------------------------------------------------------------- bootstrap_elo


def test_bootstrap_elo_intervals_contain_fit_and_shrink_with_games():
    anchor, anchor_elo = 2, 1200.0
    widths = []
    for games in (100, 1600):
        wins, draws = _sampled_results(TRUE_RATINGS, games, draw_share=0.02, seed=games)
        ratings = fit_elo(wins, draws, anchor=anchor, anchor_elo=anchor_elo)
        intervals = bootstrap_elo(wins, draws, anchor=anchor, samples=500, anchor_elo=anchor_elo)
        assert intervals.shape == (6, 2)
        assert intervals[anchor, 0] == anchor_elo and intervals[anchor, 1] == anchor_elo
        assert (intervals[:, 0] <= ratings).all() and (ratings <= intervals[:, 1]).all()
        widths.append(np.delete(intervals[:, 1] - intervals[:, 0], anchor))
    assert (widths[0] > 5.0).all()
    # Width ~ 1 / sqrt(games): 16x the games should give ~1/4 the width.
    assert (widths[1] < 0.5 * widths[0]).all()


def test_bootstrap_elo_level_and_seed():
    wins, draws = _sampled_results(TRUE_RATINGS, 200, draw_share=0.1, seed=1)
    wide = bootstrap_elo(wins, draws, anchor=0, samples=400, level=0.95)
    narrow = bootstrap_elo(wins, draws, anchor=0, samples=400, level=0.5)
    assert (narrow[1:, 0] > wide[1:, 0]).all() and (narrow[1:, 1] < wide[1:, 1]).all()
    np.testing.assert_array_equal(wide, bootstrap_elo(wins, draws, anchor=0, samples=400))
    assert not np.array_equal(wide, bootstrap_elo(wins, draws, anchor=0, samples=400, seed=1))


def test_bootstrap_elo_twenty_players_covers_the_true_ratings():
    true = np.random.default_rng(0).normal(1500.0, 200.0, 20)
    true[0] = 1500.0
    wins, draws = _sampled_results(true, 100, draw_share=0.1, seed=2)
    intervals = bootstrap_elo(wins, draws, anchor=0, samples=1000)
    covered = (intervals[:, 0] <= true) & (true <= intervals[:, 1])
    assert covered.sum() >= 16  # nominal 95%
