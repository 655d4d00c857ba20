"""The population league: the members of one run play each other, rated by one Elo table.

With ``selfplay.cross_member`` > 0 in a run of several members (``train.num_seeds`` x sweep
points), each member's pool lanes draw another member's current policy with that
probability (PFSP on the expected score the league's ratings give, :func:`member_probs
<jaxrl.league.pool.member_probs>`), else a snapshot of the member's own pool. Everything
stays inside the one compiled step:

- each member's self-play state carries a :class:`~jaxrl.league.pool.Roster`: every
  member's current policy (appended to its pool, entries ``K + 1 ..``), the league's
  ratings and its own row; its self-play feature counts its pure matches against each
  member (``Roster.last``, from the match step's per-entry tally);
- after every member's update, :class:`MemberLeague` (a population feature) gathers those
  counts into a pair table ``[R, R, 3]`` (each game from both players' views), rates every
  member by damped Newton steps (:func:`jaxrl.core.elo.newton_elo`) against the other members and
  the RulePolicy (fixed at 1500, as :mod:`jaxrl.league.rating`'s anchor), and writes the
  members' new policies, the ratings and each member's row back into every roster.

PBT (listed before the league) ranks the members on the ``league/rating`` their self-play
feature reports and copies a parent's self-play state, pool and roster included, to a
child. The league then sees the copy (the child's roster names the parent's row): the
child's rating and rows of the pair table become the parent's, and its games of this update
(the parent's, copied) are not counted twice.

Members are not sharded over devices (each device holds every member and a slice of its
envs; the tally is already summed over devices), so every device computes the same table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.config import SelfPlayConfig
from jaxrl.core.acting import PolicyParams
from jaxrl.core.elo import newton_elo
from jaxrl.core.metrics import MetricSpec, Scalar
from jaxrl.features import PopulationFeature, Registration
from jaxrl.league.feature import SELFPLAY
from jaxrl.league.rating import ELO_ITERATIONS, RULE_ELO, RULE_PRIOR_GAMES

LEAGUE = "league"  # the runner's features entry (and checkpoint item) of the league's table


class LeagueState(struct.PyTreeNode):
    """The league's table over the members (population state, checkpointed as ``league``)."""

    ratings: jax.Array  # [R] float32, each member's league Elo (RulePolicy = 1500)
    results: jax.Array  # [R, R, 3] float32, decayed W/D/L of the row member against the column
    games: jax.Array  # [R, R] float32, games played between the pair, ever (both views)


def pair_table(last: jax.Array, counted: jax.Array) -> jax.Array:
    """``[R, R, 3]`` this update's games between members, each from both players' views.

    Args:
      last: [R, R, 3] W/D/L of the row member (the learner) against the column member's
        policy, as each member's roster counted them.
      counted: [R] bool, the member's own counts are its own (it trained and was not just
        overwritten by a copy of its parent).
    """
    own = jnp.where(counted[:, None, None], last, 0.0)
    table = own + jnp.swapaxes(own, 0, 1)[..., ::-1]  # the column's loss is the row's win
    eye = jnp.eye(last.shape[0], dtype=bool)
    return jnp.where(eye[..., None], 0.0, table)


def rate_members(
    ratings: jax.Array, results: jax.Array, rule_results: jax.Array, damping_games: float
) -> jax.Array:
    """[R] new ratings: each member against the others (held at ``ratings``) and the
    RulePolicy (1500, with the anchor's virtual draws), from decayed counts.

    Args:
      ratings: [R] float32, the ratings after the previous update.
      results: [R, R, 3] decayed W/D/L of each member against each member.
      rule_results: [R, 3] decayed W/D/L of each member against the RulePolicy.
      damping_games: prior on the previous rating, in games between equals.
    """
    opponents = jnp.concatenate([ratings, jnp.full((1,), RULE_ELO, jnp.float32)])

    def one(rating, vs_members, vs_rule):
        counts = jnp.concatenate([vs_members, vs_rule[None]])  # [R + 1, 3]
        prior = jnp.zeros((counts.shape[0],), jnp.float32).at[-1].set(RULE_PRIOR_GAMES)
        points = counts[:, 0] + 0.5 * counts[:, 1] + 0.5 * prior
        games = counts.sum(-1) + prior
        return newton_elo(
            rating, opponents, points, games, damping_games, iterations=ELO_ITERATIONS
        )

    return jax.vmap(one)(ratings, results, rule_results)


def inherit_rows(state: LeagueState, source: jax.Array) -> LeagueState:
    """The table after member ``m`` became a copy of ``source[m]``: its rating and its rows
    and columns of decayed results are the source's, none between a parent and its copies
    (games played stay as they were)."""
    results = jnp.take(jnp.take(state.results, source, axis=0), source, axis=1)
    same = source[:, None] == source[None, :]  # a member and itself, a parent and its copy
    return state.replace(
        ratings=jnp.take(state.ratings, source), results=jnp.where(same[..., None], 0.0, results)
    )


def write_rosters(members: Any, ratings: jax.Array) -> Any:
    """``members`` with every roster holding every member's current policy, the ratings and
    the member's own row."""
    count = ratings.shape[0]
    policies = PolicyParams(params=members.params, obs_stats=members.obs_stats)
    selfplay = members.features[SELFPLAY]
    roster = selfplay.roster.replace(
        policies=jax.tree.map(lambda x: jnp.broadcast_to(x, (count,) + x.shape), policies),
        ratings=jnp.broadcast_to(ratings, (count, count)),
        index=jnp.arange(count, dtype=jnp.int32),
    )
    features = {**members.features, SELFPLAY: selfplay.replace(roster=roster)}
    return members.replace(features=features)


@dataclasses.dataclass(frozen=True, eq=False)
class MemberLeague(PopulationFeature):
    """The league's table over the members (see the module docstring): it reads the
    members' self-play states (their rosters' counts) and writes them (the new rosters)."""

    name = LEAGUE
    reads = (SELFPLAY,)
    writes = (SELFPLAY,)
    config: SelfPlayConfig

    def init(self, seeds: Sequence[int]) -> LeagueState:
        """Every member at 1500, no games."""
        count = len(seeds)
        return LeagueState(
            ratings=jnp.full((count,), RULE_ELO, jnp.float32),
            results=jnp.zeros((count, count, 3), jnp.float32),
            games=jnp.zeros((count, count), jnp.float32),
        )

    def after_members(
        self, state: LeagueState, members: Any, ran: jax.Array, packed: Scalar, replica_axis=None
    ) -> tuple[LeagueState, Any, dict[str, Scalar]]:
        """Rate this update's games, follow PBT's copies, write the rosters back."""
        del packed, replica_axis  # members are whole on every device; counts already summed
        selfplay = members.features[SELFPLAY]
        roster = selfplay.roster
        rows = jnp.arange(ran.shape[0], dtype=jnp.int32)
        copied = (roster.index >= 0) & (roster.index != rows)  # PBT made it its parent's copy
        table = pair_table(roster.last, ran & ~copied)
        results = state.results * self.config.result_decay + table
        ratings = rate_members(
            state.ratings, results, selfplay.rule_results, self.config.elo_damping_games
        )
        games = table.sum(-1)
        state = state.replace(ratings=ratings, results=results, games=state.games + games)
        state = inherit_rows(state, jnp.where(copied, roster.index, rows))
        weight = ran.astype(jnp.float32)
        metrics = {
            "league/member_rating": Scalar.of(state.ratings, weight),
            "league/member_games_played": Scalar.of(games.sum(-1), weight),
            "league/copied": Scalar.of(copied, weight),
        }
        return state, write_rosters(members, state.ratings), metrics

    def metric_specs(self, hyper: Any) -> tuple[MetricSpec, ...]:
        """Each member's league rating, its games against the others, PBT copies seen."""
        del hyper
        return (
            MetricSpec("league/member_rating", "last"),
            MetricSpec("league/member_games_played", "sum"),
            MetricSpec("league/copied", "sum"),
        )

    def summary(self, state: LeagueState) -> list[str]:
        """The league's size and draw share."""
        count = state.ratings.shape[0]
        return [
            f"league       {count} members play each other: a pool lane draws another member "
            f"with probability {self.config.cross_member:g} (PFSP {self.config.pfsp} on the "
            "league's Elo)"
        ]


def make_member_league(setup: Any, metric_tags: Sequence[str]) -> MemberLeague | None:
    """The population league of a built run (None unless ``selfplay.cross_member`` > 0)."""
    del metric_tags
    config = setup.config.selfplay
    if config.pool_size == 0 or config.cross_member <= 0 or setup.members.count < 2:
        return None
    return MemberLeague(config=config)


REGISTRATION = Registration(build=make_member_league, kind="population")
