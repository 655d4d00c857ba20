"""Printing, saving and comparing benchmark results (the table, ``--json``, ``--compare``)."""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import sys
from typing import Any

import jax
import jaxlib

from .figures import UsageError


def fmt(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1e4:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def machine_meta(profile_name: str) -> dict[str, Any]:
    """Where and when the figures were taken."""
    device = jax.devices()[0]
    return {
        "device_kind": device.device_kind,
        "platform": device.platform,
        "device_count": jax.device_count(),
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "loadavg_start": list(os.getloadavg()),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "profile": profile_name,
        "argv": sys.argv[1:],
    }


def header(meta: dict[str, Any]) -> str:
    """The table's first line: device, jax version, CPU count, date, load, profile."""
    load = " ".join(f"{x:.2f}" for x in meta.get("loadavg_start", []))
    return (
        f"# jaxrl bench | device {meta.get('device_kind', '?')} "
        f"(platform {meta.get('platform', '?')}) x{meta.get('device_count', '?')} | "
        f"jax {meta.get('jax_version', '?')} | {meta.get('cpu_count', '?')} CPUs | "
        f"{meta.get('date', '?')} | load {load or '?'} | profile {meta.get('profile', '?')}"
        + (f" | XLA_FLAGS={meta['xla_flags']}" if meta.get("xla_flags") else "")
    )


def table(results: dict[str, dict[str, Any]]) -> str:
    """Rows of name, median, spread (min - max), unit and repeats."""
    rows = [("name", "median", "spread (min - max)", "unit", "repeats")]
    for name, r in results.items():
        spread = f"{fmt(r['min'])} - {fmt(r['max'])}"
        rows.append((name, fmt(r["median"]), spread, r["unit"], str(r["repeats"])))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = []
    for row in rows:
        cells = [
            row[0].ljust(widths[0]),
            row[1].rjust(widths[1]),
            row[2].rjust(widths[2]),
            row[3].ljust(widths[3]),
            row[4].rjust(widths[4]),
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def read_results(path: str, flag: str) -> dict[str, Any]:
    """Read and check a ``--json`` file; raise :class:`UsageError` naming the problem."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as err:
        raise UsageError(f"{flag}: cannot read {path}: {err.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"{flag}: {path} is not valid JSON: {err}") from None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, dict):
        raise UsageError(f"{flag}: {path} has no 'results' mapping (not a bench JSON file)")
    for name, r in results.items():
        ok = (
            isinstance(r, dict)
            and all(isinstance(r.get(k), (int, float)) for k in ("median", "min", "max"))
            and isinstance(r.get("higher_is_better"), bool)
        )
        if not ok:
            raise UsageError(
                f"{flag}: {path}: results[{name!r}] lacks a numeric median/min/max "
                "or a boolean higher_is_better"
            )
    return data


def compare(new: dict[str, Any], old: dict[str, Any], tolerance: float) -> tuple[str, list[str]]:
    """Ratios new/old of the figures present in both: ``(report, regressed names)``."""
    shared = [name for name in new["results"] if name in old["results"]]
    rows = [("name", "old", "new", "new/old", "verdict")]
    regressed = []
    for name in shared:
        n, o = new["results"][name], old["results"][name]
        ratio = n["median"] / o["median"] if o["median"] else math.inf
        if n["higher_is_better"]:
            worse = n["median"] < o["median"] * (1 - tolerance)
            better = n["median"] > o["median"] * (1 + tolerance)
            overlap = n["max"] >= o["min"]
        else:
            worse = n["median"] > o["median"] * (1 + tolerance)
            better = n["median"] < o["median"] * (1 - tolerance)
            overlap = n["min"] <= o["max"]
        if worse:
            regressed.append(name)
            verdict = "REGRESSED" + (" (spreads overlap)" if overlap else "")
        else:
            verdict = "better" if better else "ok"
        rows.append((name, fmt(o["median"]), fmt(n["median"]), f"{ratio:.3f}", verdict))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        f"# compare: new/old medians, {len(shared)} figures in both; regression past "
        f"{tolerance:.0%} (rates: lower, latency/compile/memory: higher)"
    ]
    for row in rows:
        lines.append(
            "  ".join(
                [row[0].ljust(widths[0])]
                + [c.rjust(w) for c, w in zip(row[1:4], widths[1:4], strict=True)]
                + [row[4]]
            ).rstrip()
        )
    only_new = len(new["results"]) - len(shared)
    only_old = len(old["results"]) - len(shared)
    if only_new or only_old:
        lines.append(f"# not compared: {only_new} only in new, {only_old} only in old")
    if old.get("meta", {}).get("profile") != new.get("meta", {}).get("profile"):
        lines.append(
            f"# warning: profiles differ (old {old.get('meta', {}).get('profile')}, "
            f"new {new.get('meta', {}).get('profile')})"
        )
    return "\n".join(lines), regressed
