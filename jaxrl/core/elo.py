"""Elo arithmetic of the self-play league and the tournament.

Two halves:

* In-graph, pure ``jax.numpy`` (usable inside ``jax.jit``): :func:`expected_score`,
  :func:`newton_elo` (a player's rating against opponents of known rating from win/draw/loss
  counts, damped so that it holds at any number of games) and :func:`elo_from_score` (rating
  that a mean score against a known opponent implies).
* Host-side, float64 numpy (run in the Python outer loop): :func:`fit_elo`, the maximum-likelihood
  Bradley-Terry/Elo fit of a whole results matrix, and :func:`bootstrap_elo`, its percentile
  confidence intervals.

All ratings are on the usual logistic Elo scale: a gap of ``ELO_WIDTH`` (400) points means odds
of ``ELO_BASE`` (10) to 1. Internally the fit works in natural units
``theta = rating * ln(10) / 400``, so that ``p_ij = sigmoid(theta_i - theta_j)``.
"""

from __future__ import annotations

import math
import warnings
from types import ModuleType

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

ELO_BASE = 10.0
ELO_WIDTH = 400.0

# Natural-log units per Elo point: expected_score = sigmoid(_NAT_PER_ELO * (r_a - r_b)).
_NAT_PER_ELO = math.log(ELO_BASE) / ELO_WIDTH
# Samples refitted together by bootstrap_elo; bounds the [chunk, P, P] work arrays.
_BOOTSTRAP_CHUNK = 256
# Largest number of step halvings of one Newton line search.
_MAX_HALVINGS = 50


def _array_module(*xs: ArrayLike) -> ModuleType:
    """``jax.numpy`` if any input is a jax array (tracers included), else ``numpy``."""
    return jnp if any(isinstance(x, jax.Array) for x in xs) else np


def expected_score(rating_a: ArrayLike, rating_b: ArrayLike) -> np.ndarray | jax.Array:
    """Expected score of ``a`` against ``b``: ``1 / (1 + 10 ** ((rating_b - rating_a) / 400))``.

    Computed as ``(1 + tanh(x / 2)) / 2`` with ``x = ln(10) * (rating_a - rating_b) / 400``, the
    same logistic function without overflow for large gaps.

    Args:
      rating_a: ratings of the first player, any shape broadcasting against ``rating_b``.
      rating_b: ratings of the second player.

    Returns:
      Broadcast shape of the inputs, in ``[0, 1]``. A jax array if either input is one (so it works
      under ``jax.jit``), else a numpy array (float64 for Python numbers).
    """
    xp = _array_module(rating_a, rating_b)
    half_logit = 0.5 * _NAT_PER_ELO * (xp.asarray(rating_a) - xp.asarray(rating_b))
    return 0.5 * (1.0 + xp.tanh(half_logit))


def newton_elo(
    rating: ArrayLike,
    opponent: ArrayLike,
    points: ArrayLike,
    games: ArrayLike,
    damping_games: ArrayLike = 0.0,
    iterations: int = 4,
    max_step: float = 400.0,
) -> jax.Array:
    """A player's rating against opponents of known rating: damped Newton on Bradley-Terry.

    Starting from ``rating`` (``r0``), takes ``iterations`` Newton steps toward the maximum of

        sum_j [s_j log E_j(r) + (n_j - s_j) log(1 - E_j(r))] - damping_games / 8 * x^2

    over the player's rating ``r``, with ``E_j(r) = expected_score(r, opponent_j)``, the
    opponents held, and ``x = ln(10) * (r - r0) / 400`` (natural units). The log-likelihood
    scores a draw as half a win, as :func:`fit_elo` does. The last term is a Gaussian prior
    centred on the previous rating whose curvature, ``damping_games / 4``, is that of
    ``damping_games`` games between equals: a handful of games moves the rating by a fraction
    of their Newton step, thousands of games by nearly all of it, and the step never grows
    with the number of games (it is bounded by the distance to the likelihood's maximum, in
    the quadratic model). Repeated with the same counts, the centre follows the iterate and
    the rating converges to the plain maximum-likelihood rating, whatever the damping and
    the number of games: the fixed point depends only on the win/draw/loss *rates*.

    Each Newton step is clipped to ``max_step`` Elo: far from the optimum the logistic's
    curvature can vanish, and an unclipped step would overshoot.

    Pure ``jax.numpy``, float32 for float32 inputs; works under ``jax.jit`` and ``jax.vmap``.

    Args:
      rating: ``[...]`` the player's previous rating (start and prior centre).
      opponent: ``[..., M]`` the opponents' ratings.
      points: ``[..., M]`` the player's points against each (win 1, draw 1/2); real or
        decayed counts.
      games: ``[..., M]`` games against each (``>= points``).
      damping_games: weight of the prior centred on ``rating``, in games between equals
        (``>= 0``; 0 is plain Newton).
      iterations: Newton steps (a static Python int).
      max_step: largest change of one Newton step, in Elo.

    Returns:
      ``[...]`` the new rating; ``rating`` itself without games.
    """
    rating = jnp.asarray(rating)
    opponent = jnp.asarray(opponent, rating.dtype)
    points = jnp.asarray(points, rating.dtype)
    games = jnp.asarray(games, rating.dtype)
    curvature = jnp.asarray(damping_games, rating.dtype) / 4.0
    new = rating
    for _ in range(iterations):
        logit = _NAT_PER_ELO * (new[..., None] - opponent)
        p = 0.5 * (1.0 + jnp.tanh(0.5 * logit))  # expected_score(new, opponent)
        gradient = (points - games * p).sum(-1) - curvature * _NAT_PER_ELO * (new - rating)
        hessian = (games * p * (1.0 - p)).sum(-1) + curvature  # minus the second derivative
        step = gradient / jnp.maximum(hessian, jnp.finfo(hessian.dtype).tiny) / _NAT_PER_ELO
        new = new + jnp.clip(step, -max_step, max_step)
    return new


def elo_from_score(
    score: ArrayLike, anchor: ArrayLike = 1500.0, max_gap: float = 800.0
) -> np.ndarray | jax.Array:
    """Rating of a player that scores ``score`` on average against an opponent rated ``anchor``.

    ``anchor + 400 * log10(s / (1 - s))``, the inverse of :func:`expected_score`, with the gap
    clipped to ``[-max_gap, max_gap]``. The score is clipped first to the scores those gaps imply,
    so ``s = 0`` and ``s = 1`` give ``anchor -/+ max_gap`` without infinities (or NaN gradients).

    Args:
      score: mean points per game in ``[0, 1]`` (draws count 1/2), any shape.
      anchor: the opponent's rating, broadcasting against ``score``.
      max_gap: largest rating gap returned, in Elo (> 0).

    Returns:
      Broadcast shape of the inputs. A jax array if ``score`` or ``anchor`` is one (works under
      ``jax.jit``), else a numpy array.
    """
    xp = _array_module(score, anchor)
    top = 1.0 / (1.0 + ELO_BASE ** (-max_gap / ELO_WIDTH))  # score at a gap of +max_gap
    s = xp.clip(xp.asarray(score), 1.0 - top, top)
    gap = ELO_WIDTH * (xp.log10(s) - xp.log10(1.0 - s))
    return xp.asarray(anchor) + xp.clip(gap, -max_gap, max_gap)


def _points_and_games(
    wins: np.ndarray, draws: np.ndarray, anchor: int, prior_games: float
) -> tuple[np.ndarray, np.ndarray]:
    """Points and games per ordered pair, the virtual draws against the anchor included.

    Args:
      wins: ``[..., P, P]`` games ``i`` won against ``j``.
      draws: ``[..., P, P]`` symmetric draws between ``i`` and ``j``.
      anchor: index of the anchor player.
      prior_games: virtual games (all draws) of every other player against the anchor.

    Returns:
      ``(points [..., P, P], games [..., P, P])``, float64, zero diagonals:
      ``points_ij = wins_ij + draws_ij / 2 (+ prior_games / 2 with the anchor)`` and
      ``games = points + points^T``.
    """
    num_players = wins.shape[-1]
    off_diagonal = 1.0 - np.eye(num_players)
    points = (wins + 0.5 * draws) * off_diagonal
    virtual = np.zeros((num_players, num_players))
    virtual[:, anchor] = virtual[anchor, :] = 0.5 * prior_games
    virtual[anchor, anchor] = 0.0
    points = points + virtual
    return points, points + np.swapaxes(points, -1, -2)


def _log_likelihood(theta: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``sum_ij points_ij * log(sigmoid(theta_i - theta_j))``, ``[B, P], [B, P, P] -> [B]``."""
    logits = theta[:, :, None] - theta[:, None, :]
    return -(points * np.logaddexp(0.0, -logits)).sum(axis=(-2, -1))


def _newton_fit(
    points: np.ndarray,
    games: np.ndarray,
    anchor: int,
    theta: np.ndarray,
    max_iter: int,
    tol: float,
) -> np.ndarray:
    """Maximise the Bradley-Terry log-likelihood of ``B`` result matrices at once.

    Damped Newton on the ``P - 1`` free ratings (the anchor's ``theta`` stays fixed): the
    negative Hessian is the anchor-grounded Laplacian of the weights
    ``games_ij * p_ij * (1 - p_ij)``, positive definite when every player is connected to the
    anchor (the virtual draws make sure of it). The log-likelihood is concave, so backtracking
    on it makes every step an ascent step.

    Args:
      points: ``[B, P, P]`` float64 points of ``i`` against ``j``, zero diagonal.
      games: ``[B, P, P]`` float64 ``points + points^T``.
      anchor: index of the player whose ``theta`` is held.
      theta: ``[B, P]`` float64 starting ratings in natural units.
      max_iter: most Newton iterations.
      tol: stop once every Newton step is below this, in Elo.

    Returns:
      ``[B, P]`` float64 ratings in natural units, ``theta[:, anchor]`` unchanged.
    """
    free = np.flatnonzero(np.arange(points.shape[-1]) != anchor)
    tol_nat = tol * _NAT_PER_ELO
    log_lik = _log_likelihood(theta, points)
    for _ in range(max_iter):
        step, gradient = _newton_step(theta, points, games, free)
        # A step already below tolerance is taken whole: near the optimum the likelihood
        # change is at round-off level and cannot guide a line search.
        converged = np.abs(step).max(axis=-1) < tol_nat
        theta, log_lik = _line_search(theta, log_lik, step, gradient, points, converged)
        if converged.all():
            return theta
    warnings.warn(
        f"fit_elo: Newton did not converge to tol={tol} Elo in max_iter={max_iter} iterations",
        RuntimeWarning,
        stacklevel=3,
    )
    return theta


def _newton_step(
    theta: np.ndarray, points: np.ndarray, games: np.ndarray, free: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(step, gradient)`` ``[B, P]``: the Newton step on the free ratings (0 at the anchor)
    and the log-likelihood's gradient."""
    p = 0.5 * (1.0 + np.tanh(0.5 * (theta[:, :, None] - theta[:, None, :])))  # p_ij
    gradient = (points - games * p).sum(axis=-1)
    weights = games * p * (1.0 - p)
    laplacian = np.eye(p.shape[-1]) * weights.sum(axis=-1)[:, None, :] - weights
    step = np.zeros_like(theta)
    grounded = laplacian[:, free[:, None], free]  # [B, P - 1, P - 1]
    step[:, free] = np.linalg.solve(grounded, gradient[:, free, None])[..., 0]
    return step, gradient


def _line_search(
    theta: np.ndarray,
    log_lik: np.ndarray,
    step: np.ndarray,
    gradient: np.ndarray,
    points: np.ndarray,
    converged: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``(theta, log_lik)`` after a backtracking (Armijo) step along ``step`` per sample;
    a converged sample takes its step whole, and one whose search fails (round-off only)
    keeps its ratings."""
    scale = np.ones(theta.shape[0])
    # Slack for the summation error of the log-likelihood, so that steps of a size near
    # convergence are not rejected for noise.
    round_off = 1e3 * np.finfo(np.float64).eps * (np.abs(log_lik) + 1.0)
    slope = (gradient * step).sum(axis=-1)  # >= 0: step is an ascent direction
    for _ in range(_MAX_HALVINGS):
        candidate = theta + scale[:, None] * step
        candidate_log_lik = _log_likelihood(candidate, points)
        gain = candidate_log_lik - log_lik - 1e-4 * scale * slope
        accepted = converged | (gain >= -round_off)
        if accepted.all():
            break
        scale = np.where(accepted, scale, 0.5 * scale)
    theta = np.where(accepted[:, None], candidate, theta)
    return theta, np.where(accepted, candidate_log_lik, log_lik)


def _check_results(
    wins: ArrayLike, draws: ArrayLike, anchor: int, prior_games: float
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a results matrix; returns ``(wins, draws)`` as float64 ``[P, P]``."""
    wins = np.asarray(wins, dtype=np.float64)
    draws = np.asarray(draws, dtype=np.float64)
    if wins.ndim != 2 or wins.shape[0] != wins.shape[1] or draws.shape != wins.shape:
        raise ValueError(f"wins and draws must both be [P, P], got {wins.shape}, {draws.shape}")
    if not 0 <= anchor < wins.shape[0]:
        raise ValueError(f"anchor {anchor} out of range for {wins.shape[0]} players")
    if (wins < 0).any() or (draws < 0).any() or not np.isfinite(wins + draws).all():
        raise ValueError("wins and draws must be finite and non-negative")
    if not np.allclose(draws, draws.T):
        raise ValueError("draws must be symmetric")
    if prior_games < 0:
        raise ValueError(f"prior_games must be >= 0, got {prior_games}")
    return wins, draws


def fit_elo(
    wins: ArrayLike,
    draws: ArrayLike,
    anchor: int,
    anchor_elo: float = 1500.0,
    prior_games: float = 0.5,
    max_iter: int = 100,
    tol: float = 1e-6,
) -> np.ndarray:
    """Maximum-likelihood Bradley-Terry/Elo ratings of ``P`` players from a results matrix.

    Maximises ``sum_{i<j} s_ij log p_ij + (n_ij - s_ij) log(1 - p_ij)`` with
    ``p_ij = expected_score(r_i, r_j)``, ``n_ij = wins_ij + wins_ji + draws_ij`` and
    ``s_ij = wins_ij + draws_ij / 2``: a draw counts as half a win for each side. The rating of
    player ``anchor`` is held at ``anchor_elo`` exactly (ratings are only defined up to a shift).

    Regularisation: every player except the anchor gets ``prior_games`` virtual games against the
    anchor, each scored 1/2 (virtual draws). This is a prior pulling each rating toward
    ``anchor_elo``; it keeps every rating finite, for perfect (or zero) records and for players
    not connected to the anchor by real games, and makes the optimum unique. A player without games
    gets exactly ``anchor_elo``. Its weight is that of ``prior_games`` real games, so it shifts
    well-measured ratings little. ``prior_games = 0`` gives the plain MLE, which exists only when
    no rating is infinite; otherwise the solver warns that it did not converge or raises
    ``numpy.linalg.LinAlgError``.

    Solved in float64 numpy by Newton's method with a backtracking line search on the (concave)
    log-likelihood.

    Args:
      wins: ``[P, P]``, ``wins[i, j]`` = games ``i`` won against ``j`` (diagonal ignored).
      draws: ``[P, P]`` symmetric, draws between ``i`` and ``j`` (diagonal ignored).
      anchor: index of the anchor player.
      anchor_elo: rating of the anchor.
      prior_games: virtual drawn games of every other player against the anchor (>= 0).
      max_iter: most Newton iterations.
      tol: convergence tolerance on the Newton step, in Elo.

    Returns:
      ``[P]`` float64 ratings, ``ratings[anchor] == anchor_elo``.
    """
    wins, draws = _check_results(wins, draws, anchor, prior_games)
    points, games = _points_and_games(wins, draws, anchor, prior_games)
    theta = _newton_fit(
        points[None], games[None], anchor, np.zeros((1, wins.shape[0])), max_iter, tol
    )[0]
    return anchor_elo + theta / _NAT_PER_ELO


def _pair_outcomes(
    wins: np.ndarray, draws: np.ndarray, rows: np.ndarray, cols: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(num_games [M] int64, probs [M, 3])``: the games of each pair ``i < j`` and the
    observed frequencies of (i wins, draw, j wins)."""
    counts = np.stack([wins[rows, cols], draws[rows, cols], wins[cols, rows]], axis=-1)
    counts = np.rint(counts).astype(np.int64)
    num_games = counts.sum(axis=-1)
    # Pairs without games get a dummy distribution; multinomial(0, .) draws nothing anyway.
    probs = np.where(num_games[:, None] > 0, counts / np.maximum(num_games, 1)[:, None], 1.0 / 3)
    return num_games, probs


def _result_matrices(
    drawn: np.ndarray, rows: np.ndarray, cols: np.ndarray, num_players: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(wins, draws)`` ``[S, P, P]`` of ``S`` samples of pair outcomes ``drawn [S, M, 3]``."""
    size = drawn.shape[0]
    sample_wins = np.zeros((size, num_players, num_players))
    sample_draws = np.zeros((size, num_players, num_players))
    sample_wins[:, rows, cols] = drawn[..., 0]
    sample_wins[:, cols, rows] = drawn[..., 2]
    sample_draws[:, rows, cols] = sample_draws[:, cols, rows] = drawn[..., 1]
    return sample_wins, sample_draws


def bootstrap_elo(
    wins: ArrayLike,
    draws: ArrayLike,
    anchor: int,
    samples: int = 1000,
    seed: int = 0,
    anchor_elo: float = 1500.0,
    prior_games: float = 0.5,
    level: float = 0.95,
) -> np.ndarray:
    """Percentile-bootstrap confidence intervals of the :func:`fit_elo` ratings.

    Each sample redraws every pair's games: as many games as were played, multinomial over the
    pair's observed win/draw/loss frequencies, and is refitted like :func:`fit_elo` (same anchor
    and virtual draws). Samples are refitted together, in chunks, by a batched Newton solver that
    starts from the fit of the observed results.

    Args:
      wins: ``[P, P]``, ``wins[i, j]`` = games ``i`` won against ``j`` (integer counts).
      draws: ``[P, P]`` symmetric, draws between ``i`` and ``j`` (integer counts).
      anchor: index of the anchor player.
      samples: number of bootstrap samples.
      seed: seed of the numpy generator that draws them.
      anchor_elo: rating of the anchor.
      prior_games: virtual drawn games of every other player against the anchor.
      level: coverage of the interval, in ``(0, 1)``.

    Returns:
      ``[P, 2]`` float64 ``(low, high)``: the ``(1 - level) / 2`` and ``(1 + level) / 2``
      percentiles of each rating over the samples; the anchor's row is
      ``[anchor_elo, anchor_elo]``.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    wins, draws = _check_results(wins, draws, anchor, prior_games)
    num_players = wins.shape[0]
    rows, cols = np.triu_indices(num_players, k=1)
    num_games, probs = _pair_outcomes(wins, draws, rows, cols)
    points, games = _points_and_games(wins, draws, anchor, prior_games)
    theta_fit = _newton_fit(
        points[None], games[None], anchor, np.zeros((1, num_players)), 100, 1e-6
    )
    rng = np.random.default_rng(seed)
    ratings = np.empty((samples, num_players))
    for start in range(0, samples, _BOOTSTRAP_CHUNK):
        size = min(_BOOTSTRAP_CHUNK, samples - start)
        drawn = rng.multinomial(num_games, probs, size=(size, len(num_games))).astype(np.float64)
        sample_wins, sample_draws = _result_matrices(drawn, rows, cols, num_players)
        points, games = _points_and_games(sample_wins, sample_draws, anchor, prior_games)
        theta0 = np.broadcast_to(theta_fit, (size, num_players))
        theta = _newton_fit(points, games, anchor, theta0, 100, 1e-6)
        ratings[start : start + size] = anchor_elo + theta / _NAT_PER_ELO
    tail = 100.0 * (1.0 - level) / 2.0
    intervals = np.percentile(ratings, [tail, 100.0 - tail], axis=0).T
    intervals[anchor] = anchor_elo
    return intervals
