"""Latency summaries shared by the benchmarks."""

from __future__ import annotations

import statistics


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p95/p99/mean/max of a sample (nearest-rank), rounded to microseconds, and n."""
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "p50": round(pick(0.50), 3),
        "p95": round(pick(0.95), 3),
        "p99": round(pick(0.99), 3),
        "mean": round(statistics.fmean(values), 3),
        "max": round(ordered[-1], 3),
        "n": len(values),
    }
