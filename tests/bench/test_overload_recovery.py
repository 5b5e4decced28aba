"""The overload row's recovery time: from the load drop until the first 100 ms bucket from which
on p99 is within 5 ms, that bucket's own p99 and the whole rest of the window's (by when
requests were meant to be sent)."""

from __future__ import annotations

from bench.overload import recovery_seconds, slow_buckets_after
from bench.stats import bucket_p99s


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


def test_an_isolated_hiccup_later_is_counted_not_taken_for_the_backlog() -> None:
    spec = [(2.0 + i / 10, 0.001) for i in range(100)]
    spec[0] = (2.0, 0.08)  # the backlog, drained within the first bucket after the drop
    offsets, latencies = _samples(spec)
    for j in range(4700, 4750):  # half of one bucket at 6.7 s: 50 of 9,900 requests after 2.1 s
        latencies[j] = 0.02
    assert recovery_seconds(offsets, latencies, 2.0, 12.0) == 0.1
    p99s = bucket_p99s(offsets, latencies, 2.0, 12.0)
    assert [i for i, p in enumerate(p99s) if p is not None and p > 5] == [0, 47]
    assert slow_buckets_after(p99s, 0, 0.1) == 1


def test_slow_for_more_than_one_percent_of_the_rest_is_not_recovered() -> None:
    spec = [(2.0 + i / 10, 0.001) for i in range(10)]
    spec[5] = (2.5, 0.02)  # one whole slow bucket in the last 0.5 s: 20% of the tail
    offsets, latencies = _samples(spec)
    assert recovery_seconds(offsets, latencies, 2.0, 3.0) == 0.6
