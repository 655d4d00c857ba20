"""The learner's in-graph rating against the RulePolicy.

``selfplay/elo`` is the learner's Bradley-Terry rating against the RulePolicy, the anchor
fixed at 1500 as in :mod:`jaxrl.commands.tournament`. Every update adds the rollout's RulePolicy
matches to decayed win/draw/loss counts (``result_decay`` per update, as the pool's), and
:func:`learner_rating` moves the rating by damped Newton steps toward the maximum-likelihood
rating of those counts (draws half, plus the tournament's 1/2 virtual draw). Its fixed point
is the rating that the win/draw/loss *rates* imply, so 64 and 4096 envs read the same; more
games only make it less noisy. (The per-game K update it replaces moved ``K * (score - n E)``
per update: hundreds of K with hundreds of matches, which overshot and oscillated.)

Snapshots are not used to rate the learner. A snapshot plays only the learner, so in a joint
Bradley-Terry fit its rating is a free parameter that absorbs its own results and says nothing
about the learner's; holding it instead at the learner's rating when it was taken feeds the
learner's past estimate, error included, back into the current one (and re-rating both from
their games against each other lets them drift together, the K update's second failure).
The RulePolicy is the one player whose rating is known, and the tournament's anchor, so the
learner is rated against it alone. Each snapshot keeps the learner's rating at the time it was
taken (``SelfPlayState.elo``), a record that nothing feeds back from.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.core.elo import newton_elo

RULE_ELO = 1500.0  # the RulePolicy's fixed rating (the anchor)
# Virtual draws against the anchor, as jaxrl.commands.tournament's fit: a perfect record stays
# finite.
RULE_PRIOR_GAMES = 0.5
# Newton steps per update; warm-started at the last rating, one or two already converge.
ELO_ITERATIONS = 4


def learner_rating(rating: jax.Array, rule_results: jax.Array, damping_games: float) -> jax.Array:
    """The learner's Elo from its decayed results against the RulePolicy (fixed at 1500).

    Damped Newton steps (:func:`jaxrl.core.elo.newton_elo`) from ``rating`` toward the
    maximum-likelihood rating of ``rule_results`` plus ``RULE_PRIOR_GAMES`` virtual draws,
    with a prior worth ``damping_games`` even games centred on ``rating``.

    Args:
      rating: () float32, the learner's rating after the previous update.
      rule_results: [3] float32, decayed wins/draws/losses against the RulePolicy.
      damping_games: weight of the prior on the previous rating, in games between equals.

    Returns:
      () float32, the new rating.
    """
    wins, draws, losses = rule_results[0], rule_results[1], rule_results[2]
    points = wins + 0.5 * draws + 0.5 * RULE_PRIOR_GAMES
    games = wins + draws + losses + RULE_PRIOR_GAMES
    return newton_elo(
        rating,
        jnp.full((1,), RULE_ELO, jnp.float32),
        points[None],
        games[None],
        damping_games,
        iterations=ELO_ITERATIONS,
    )
