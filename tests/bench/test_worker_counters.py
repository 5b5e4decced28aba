"""The bench reads the workers' /metrics page to tell a latency tail inside a worker from one
outside it: every series it counts must match the page the worker really renders."""

from __future__ import annotations

import gc

from bench.fleet import _counters
from namesrv.metrics import Metrics, gc_pauses


def _counted(page: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for line in page.splitlines():
        for key in _counters(line):
            totals[key] = totals.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


def test_fast_and_slow_requests_gc_pauses_and_loop_ticks_are_told_apart() -> None:
    metrics = Metrics()
    _, latency = metrics.request_series("remoting", "GET_ROUTEINFO_BY_TOPIC", "ok")
    for seconds in (0.0001, 0.002, 0.004, 0.02):
        latency.observe(seconds)
    metrics.request_series("http", "route", "ok")[1].observe(0.5)  # HTTP is not counted
    for seconds in (0.0, 0.003, 0.009):
        metrics.loop_lag.labels().observe(seconds)
    pauses = gc_pauses()  # process-wide: count what this test adds to it
    # A real collection between the two pages would count too (seen after a test that left
    # much garbage): none runs while the collector is off.
    collecting = gc.isenabled()
    gc.disable()
    try:
        before = _counted(metrics.render().decode())
        pauses.labels("0").observe(0.001)
        pauses.labels("2").observe(0.030)
        after = _counted(metrics.render().decode())
    finally:
        if collecting:
            gc.enable()
    assert (after["requests"], after["requests.fast"]) == (4.0, 3.0)
    assert (after["loop"], after["loop.fast"]) == (3.0, 2.0)
    assert after["gc"] - before.get("gc", 0.0) == 2.0
    assert after["gc.fast"] - before.get("gc.fast", 0.0) == 1.0
    assert after["gc2"] - before.get("gc2", 0.0) == 1.0  # the full collection, also counted above
    assert after["gc2.fast"] - before.get("gc2.fast", 0.0) == 0.0
