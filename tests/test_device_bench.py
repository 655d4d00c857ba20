"""The device section of the bench: busy fraction and launch counts from trace events."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bench.device_bench import busy_union_ns, top_ops, trace_device_events, trace_figures


def test_busy_union_counts_overlapping_streams_once():
    assert busy_union_ns([(0, 10), (5, 15), (20, 30), (22, 25)]) == 25
    assert busy_union_ns([]) == 0


def test_trace_figures_count_kernels_and_copies_per_update():
    events = [
        ("fusion_1", 0, 400),
        ("loop_add_fusion", 300, 600),  # another stream, overlapping
        ("MemcpyD2H", 700, 800),
        ("MemcpyH2D", 800, 900),
        ("Memset", 900, 950),
        ("gemm", 950, 1000),
    ]
    figures = {f.name: f.median for f in trace_figures("d", 2e-6, {"/device:GPU:0": events}, 2)}
    assert figures["d/kernels_per_update"] == 1.5  # 3 kernels over 2 updates
    assert figures["d/d2h_per_update"] == 0.5
    assert figures["d/h2d_per_update"] == 0.5
    assert abs(figures["d/busy"] - 900 / 2000) < 1e-9  # [0, 600) and [700, 1000) of 2 us


def test_a_cpu_trace_has_no_device_plane(tmp_path):
    # On a CPU the figures are "n/a", never guessed: no accelerator plane in the trace.
    f = jax.jit(lambda x: jnp.sin(x).sum())
    f(jnp.ones(8)).block_until_ready()
    wall, planes = trace_device_events(lambda: f(jnp.ones(8)).block_until_ready(), str(tmp_path))
    assert wall > 0
    assert planes == {}
    assert trace_figures("d", wall, planes, 1) == []


def test_top_ops_rank_by_time_per_update():
    events = [("a", 0, 1000), ("b", 0, 5000), ("a", 0, 1000)]
    lines = top_ops(events, updates=2)
    assert lines[0].endswith("b") and "2.5 us" in lines[0]  # 5 us over 2 updates
    assert "x    1.0  a" in lines[1]
