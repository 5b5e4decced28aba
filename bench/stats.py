"""Small statistics helpers (nearest-rank percentiles on sorted samples)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of already sorted values; NaN when there are none."""
    if not sorted_values:
        return float("nan")
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


def percentile_ms(sorted_seconds: Sequence[float], pct: float) -> float:
    return percentile(sorted_seconds, pct) * 1000


def median(values: Sequence[float]) -> float:
    return percentile(sorted(values), 50)


def bucketed(
    offsets: Sequence[float], latencies: Sequence[float], start: float, end: float, bucket_s: float
) -> list[list[float]]:
    # rounded first: 0.6 / 0.1 is 5.999..., and a 0.6 s window has six buckets
    buckets = max(1, math.floor(round((end - start) / bucket_s, 9)))
    samples: list[list[float]] = [[] for _ in range(buckets)]
    for offset, latency in zip(offsets, latencies, strict=True):
        i = math.floor((offset - start) / bucket_s)
        if 0 <= i < buckets:
            samples[i].append(latency)
    return samples


def bucket_p99s(
    offsets: Sequence[float],
    latencies: Sequence[float],
    start: float,
    end: float,
    *,
    bucket_s: float = 0.1,
) -> list[float | None]:
    """p99 (ms) of each ``bucket_s`` bucket from ``start`` to ``end``, by intended send time
    (None: nothing was sent in it)."""
    samples = bucketed(offsets, latencies, start, end, bucket_s)
    return [percentile_ms(sorted(values), 99) if values else None for values in samples]
