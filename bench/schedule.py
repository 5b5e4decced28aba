"""An open-loop send schedule whose rate changes in steps (the overload row: 100% of the peak,
120%, then 50%), shared by every load process: the k-th request's intended send time and how
many requests are due at a moment, without drift between steps."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence


class StepSchedule:
    """``steps`` are (seconds, requests/s) from ``start``; past the last step its rate goes on."""

    def __init__(self, start: float, steps: Sequence[tuple[float, float]]) -> None:
        if not steps or any(seconds <= 0 or rate <= 0 for seconds, rate in steps):
            raise ValueError(f"steps need positive lengths and rates: {steps!r}")
        self.rates = [rate for _, rate in steps]
        self.starts: list[float] = []  # when each step begins
        self.firsts: list[int] = []  # the index of each step's first request
        at, count = start, 0
        for seconds, rate in steps:
            self.starts.append(at)
            self.firsts.append(count)
            at += seconds
            count += math.ceil(seconds * rate)

    def due(self, now: float) -> int:
        """How many requests are due by ``now`` (the first at ``start``)."""
        if now < self.starts[0]:
            return 0
        i = bisect_right(self.starts, now) - 1
        due = self.firsts[i] + int((now - self.starts[i]) * self.rates[i]) + 1
        return min(due, self.firsts[i + 1]) if i + 1 < len(self.firsts) else due

    def intended(self, k: int) -> float:
        """When the k-th request (from 0) is meant to be sent."""
        i = bisect_right(self.firsts, k) - 1
        return self.starts[i] + (k - self.firsts[i]) / self.rates[i]
