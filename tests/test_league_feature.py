"""The league as a train-step feature: where it plans among the features.

Self-play reads the curriculum's per-env switch of it; it declares so
(``reads = ("curriculum",)``), and the order follows from the declarations, not from the
order the features are registered in.
"""

from __future__ import annotations

import dataclasses

import pytest

from jaxrl.features import Feature, order_features
from jaxrl.features.curriculum import Curriculum
from jaxrl.features.eval_lanes import EvalLanes
from jaxrl.league.feature import SelfPlay


def _bare(cls: type[Feature]) -> Feature:
    """An instance that only carries the class's name and declarations (no fields needed)."""
    return object.__new__(cls)


def _named(name: str, after: tuple[str, ...] = ()) -> Feature:
    return type(name, (_Stub,), {"name": name, "after": after})()


@dataclasses.dataclass(frozen=True)
class _Stub(Feature):
    def init(self, params, obs_stats):
        return None

    def after_update(self, state, result, reads=None):
        return state, None

    def metric_specs(self):
        return ()


def test_selfplay_plans_after_the_curriculum_in_any_listed_order():
    curriculum, selfplay, lanes = _bare(Curriculum), _bare(SelfPlay), _bare(EvalLanes)
    assert SelfPlay.reads == ("curriculum",)
    for listed in ((selfplay, curriculum, lanes), (lanes, selfplay, curriculum)):
        names = [f.name for f in order_features(listed)]
        assert names.index("curriculum") < names.index("selfplay")
    # Ties keep the listed order (it fixes the metrics' order).
    assert [f.name for f in order_features((curriculum, selfplay, lanes))] == [
        "curriculum",
        "selfplay",
        "evaluation",
    ]
    # Without a curriculum self-play runs on its own (a declaration constrains only the present).
    assert [f.name for f in order_features((selfplay,))] == ["selfplay"]


def test_order_refuses_cycles_and_duplicates():
    a, b = _named("a", after=("b",)), _named("b", after=("a",))
    with pytest.raises(ValueError, match="cycle"):
        order_features((a, b))
    with pytest.raises(ValueError, match="same name"):
        order_features((_named("a"), _named("a")))
    c = _named("c", after=("a", "b"))
    assert [f.name for f in order_features((c, _named("b"), _named("a")))] == ["b", "a", "c"]
