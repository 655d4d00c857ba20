"""Metric declarations: chunk reductions and the declared-equals-produced check."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.core.metrics import MetricSpec, Scalar, mean_of, reduce_chunk


def _stack(values, weights):
    return Scalar(value=jnp.asarray(values, jnp.float32), weight=jnp.asarray(weights, jnp.float32))


def test_reductions_by_hand():
    specs = (MetricSpec("a/mean"), MetricSpec("a/sum", "sum"), MetricSpec("a/last", "last"))
    out = reduce_chunk(
        specs,
        {
            "a/mean": _stack([1.0, 5.0, 100.0], [1.0, 3.0, 0.0]),
            "a/sum": _stack([1.0, 2.0, 4.0], [1.0, 0.0, 1.0]),
            "a/last": _stack([7.0, 8.0, 9.0], [1.0, 1.0, 0.0]),
        },
    )
    assert float(out["a/mean"]) == pytest.approx((1.0 + 15.0) / 4.0)
    assert float(out["a/sum"]) == 5.0
    assert float(out["a/last"]) == 8.0


def test_no_weight_gives_nan_for_mean_and_last_and_zero_for_sum():
    specs = (MetricSpec("m"), MetricSpec("s", "sum"), MetricSpec("l", "last"))
    zero = _stack([3.0, 4.0], [0.0, 0.0])
    out = reduce_chunk(specs, {"m": zero, "s": zero, "l": zero})
    assert np.isnan(out["m"]) and np.isnan(out["l"]) and float(out["s"]) == 0.0


def test_mean_of_weights_by_count():
    # Two updates: 2 episodes averaging 10, then 6 averaging 2 -> (20 + 12) / 8 = 4 per episode.
    first, second = mean_of(20.0, 2.0), mean_of(12.0, 6.0)
    stacked = _stack([first.value, second.value], [first.weight, second.weight])
    assert float(reduce_chunk((MetricSpec("r"),), {"r": stacked})["r"]) == pytest.approx(4.0)
    assert float(mean_of(0.0, 0.0).weight) == 0.0


def test_undeclared_or_missing_metrics_are_refused():
    with pytest.raises(KeyError, match="produced but not declared"):
        reduce_chunk((MetricSpec("a"),), {"a": _stack([1.0], [1.0]), "b": _stack([1.0], [1.0])})
    with pytest.raises(KeyError, match="declared but not produced"):
        reduce_chunk((MetricSpec("a"), MetricSpec("b")), {"a": _stack([1.0], [1.0])})
    with pytest.raises(ValueError, match="reduce must be one of"):
        MetricSpec("x", "median")
