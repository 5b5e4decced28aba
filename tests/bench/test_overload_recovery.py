"""The overload row's recovery time: from the load drop until every 100 ms bucket's p99 is
back within 5 ms (by when requests were meant to be sent)."""

from __future__ import annotations

from bench.overload import recovery_seconds


def _samples(spec: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """(offset s, latency s) pairs: 100 samples in each 100 ms bucket starting at offset."""
    offsets, latencies = [], []
    for start, latency in spec:
        for i in range(100):
            offsets.append(start + i * 0.001)
            latencies.append(latency)
    return offsets, latencies


def test_no_slow_bucket_after_the_drop_is_zero() -> None:
    offsets, latencies = _samples([(1.9, 0.5), (2.0, 0.001), (2.1, 0.001)])
    assert recovery_seconds(offsets, latencies, 2.0, 2.2) == 0.0


def test_recovered_after_the_last_slow_bucket() -> None:
    offsets, latencies = _samples([(2.0, 0.2), (2.1, 0.001), (2.2, 0.03), (2.3, 0.001), (2.4, 0.002)])
    assert recovery_seconds(offsets, latencies, 2.0, 2.5) == 0.3


def test_still_slow_at_the_end_is_never() -> None:
    offsets, latencies = _samples([(2.0, 0.001), (2.1, 0.2)])
    assert recovery_seconds(offsets, latencies, 2.0, 2.2) is None


def test_one_slow_request_in_a_hundred_is_within_p99() -> None:
    offsets, latencies = _samples([(2.0, 0.001)])
    latencies[50] = 1.0
    assert recovery_seconds(offsets, latencies, 2.0, 2.1) == 0.0
