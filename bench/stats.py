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
