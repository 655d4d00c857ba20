"""Evaluation lanes: envs that measure the learner inside the compiled step.

Each lane of ``evaluation.lanes`` adds ``jaxrl.envs`` envs after the training envs, on its own
env params (``env.kwargs`` plus the lane's overrides, e.g. the RulePolicy at one team size).
The learner acts in them with the same forward pass as in training (the mode of its policy
by default), but their steps never reach the loss, the normaliser or any other feature. A
lane counts the matches that end; every ``evaluation.every_updates`` updates it reports
and restarts its counts:

    eval/<lane>/return   mean episode return
    eval/<lane>/games    matches counted
    eval/<lane>/win, /draw, /loss   (two-team envs reporting outcomes)
    eval/<lane>/elo      Elo implied by the score (draws half) against a 1500 opponent
    eval/return_sum      the lanes' mean returns summed, reported when every lane has an
                         episode (a benchmark's total over its cells, e.g. CAGE-2's six
                         Red x length cells; a PBT ``metric``)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl import envs
from jaxrl.config import EvaluationConfig
from jaxrl.core.elo import elo_from_score
from jaxrl.core.layout import Layout, sum_over_devices
from jaxrl.core.match import MatchPlan
from jaxrl.core.metrics import MetricSpec, Scalar
from jaxrl.features import (
    NO_READS,
    BuildContext,
    Feature,
    FeatureOutput,
    LayoutNeeds,
    Registration,
    UpdateResult,
    set_rows,
)

RESULTS = ("win", "draw", "loss")


class EvalLanesState(struct.PyTreeNode):
    """Counts since the last report, per lane; checkpointed as ``evaluation``."""

    matches: jax.Array  # [Ln] float32
    episodes: jax.Array  # [Ln] float32, actor-episodes
    return_sum: jax.Array  # [Ln] float32
    outcome_sums: Any  # {win, draw, loss: [Ln] float32} (two-team envs)
    updates: jax.Array  # () int32, updates since the last report


@dataclasses.dataclass(frozen=True, eq=False)
class EvalLanes(Feature):
    """The evaluation lanes (see the module docstring)."""

    name = "evaluation"
    config: EvaluationConfig
    layout: Layout
    lane_params: Any  # EnvParams with leaves [num_measured_envs]: each eval env's params
    outcomes: bool  # the env reports win/draw/loss

    @property
    def names(self) -> tuple[str, ...]:
        """Lane names."""
        return tuple(lane.name for lane in self.config.lanes)

    def init(self, params, obs_stats) -> EvalLanesState:
        """No counts."""
        del params, obs_stats
        zero = lambda: jnp.zeros((len(self.names),), jnp.float32)  # noqa: E731
        return EvalLanesState(
            matches=zero(),
            episodes=zero(),
            return_sum=zero(),
            outcome_sums={name: zero() for name in RESULTS} if self.outcomes else {},
            updates=jnp.zeros((), jnp.int32),
        )

    def plan(
        self, state: EvalLanesState, plan: MatchPlan, reads: Mapping[str, Any] = NO_READS
    ) -> MatchPlan:
        """The lanes' env params on their rows (opponents from those params, team 0)."""
        del state, reads
        params = set_rows(plan.env_params, self.layout.num_envs, self.lane_params)
        return plan.replace(env_params=params)

    def after_update(
        self, state: EvalLanesState, result: UpdateResult, reads: Mapping[str, Any] = NO_READS
    ) -> tuple[EvalLanesState, FeatureOutput]:
        """Count the lanes' finished matches; report every ``every_updates`` updates."""
        del reads
        lanes = jnp.asarray(self.layout.measured_group_of_env())
        count = len(self.names)

        def per_lane(x):  # [N] -> [Ln] over the evaluation envs of every device
            lane_sums = jax.ops.segment_sum(x[self.layout.num_envs :], lanes, num_segments=count)
            return sum_over_devices(lane_sums, self.layout.axis)

        sums = result.sums
        state = EvalLanesState(
            matches=state.matches + per_lane(sums.matches),
            episodes=state.episodes + per_lane(sums.episodes),
            return_sum=state.return_sum + per_lane(sums.return_sum),
            outcome_sums={
                name: state.outcome_sums[name] + per_lane(sums.outcome_sums[name])
                for name in state.outcome_sums
            },
            updates=state.updates + 1,
        )
        report = state.updates >= self.config.every_updates
        metrics = {}
        for i, lane in enumerate(self.names):
            games = state.matches[i]
            weight = (report & (games > 0)).astype(jnp.float32)
            per_game = jnp.maximum(games, 1.0)
            metrics[f"eval/{lane}/games"] = Scalar.of(games, report)
            metrics[f"eval/{lane}/return"] = Scalar.of(
                state.return_sum[i] / jnp.maximum(state.episodes[i], 1.0),
                (report & (state.episodes[i] > 0)).astype(jnp.float32),
            )
            if self.outcomes:
                win, draw = state.outcome_sums["win"][i], state.outcome_sums["draw"][i]
                for name in RESULTS:
                    metrics[f"eval/{lane}/{name}"] = Scalar.of(
                        state.outcome_sums[name][i] / per_game, weight
                    )
                score = (win + 0.5 * draw) / per_game
                metrics[f"eval/{lane}/elo"] = Scalar.of(elo_from_score(score), weight)
        every_lane = (report & jnp.all(state.episodes > 0)).astype(jnp.float32)
        mean_returns = state.return_sum / jnp.maximum(state.episodes, 1.0)  # [Ln]
        metrics["eval/return_sum"] = Scalar.of(jnp.sum(mean_returns), every_lane)
        fresh = self.init(None, None)
        state = jax.tree.map(lambda new, old: jnp.where(report, new, old), fresh, state)
        return state, FeatureOutput.of(metrics)

    def metric_specs(self) -> tuple[MetricSpec, ...]:
        """Per lane and their sum: the last report of the chunk."""
        specs = [MetricSpec("eval/return_sum", "last")]
        for lane in self.names:
            specs += [
                MetricSpec(f"eval/{lane}/games", "last"),
                MetricSpec(f"eval/{lane}/return", "last"),
            ]
            if self.outcomes:
                specs += [MetricSpec(f"eval/{lane}/{name}", "last") for name in (*RESULTS, "elo")]
        return tuple(specs)

    def summary(self, state) -> list[str]:
        """Lane names and sizes."""
        del state
        lanes = ", ".join(f"{lane.name} x {lane.envs}" for lane in self.config.lanes)
        return [
            f"evaluation   lanes {lanes} (envs), reported every {self.config.every_updates} updates"
        ]


def eval_lanes_layout(config: Any, num_envs: int) -> LayoutNeeds:
    """The lanes are measuring groups after one device's ``num_envs`` training envs, each with
    env params of its own (so env params differ per env)."""
    devices = config.env.num_envs // num_envs
    lanes = tuple(lane.envs // devices for lane in config.evaluation.lanes)
    return LayoutNeeds(per_env_params=bool(lanes), measured_envs=lanes)


def make_eval_lanes(context: BuildContext) -> EvalLanes | None:
    """The evaluation-lane feature of the run (None without lanes)."""
    config, layout = context.config, context.layout
    base_params, outcome_names = context.env_params, context.outcome_names
    if not config.evaluation.lanes:
        return None
    per_env = []
    for lane, count in zip(config.evaluation.lanes, layout.measured_envs, strict=True):
        params = envs.override_params(base_params, lane.env)
        per_env += [params] * count  # this device's envs of the lane
    stacked = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *per_env)
    return EvalLanes(
        config=config.evaluation,
        layout=layout,
        lane_params=stacked,
        outcomes=all(name in outcome_names for name in RESULTS),
    )


REGISTRATION = Registration(build=make_eval_lanes, layout=eval_lanes_layout)
