"""The batched latency histogram renders exactly what prometheus_client's Histogram would."""

from __future__ import annotations

import gc

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from namesrv.metrics import LATENCY_BUCKETS, Metrics

NAME = "namesrv_request_seconds"


def _lines(text: bytes) -> list[str]:
    return [line for line in text.decode().splitlines() if NAME in line and "_created" not in line]


def test_batched_observations_render_as_single_ones() -> None:
    ours = Metrics()
    ours.latency.labels("remoting", "GET_ROUTEINFO_BY_TOPIC").observe(0.0003)
    ours.latency.labels("remoting", "GET_ROUTEINFO_BY_TOPIC").observe(0.001, 3)  # a bound: le includes it
    ours.latency.labels("http", "route").observe(7.0)  # past the last bound: +Inf only
    registry = CollectorRegistry()
    reference = Histogram(
        NAME,
        "Request latency, by transport and operation",
        ["transport", "operation"],
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    for value in (0.0003, 0.001, 0.001, 0.001):
        reference.labels("remoting", "GET_ROUTEINFO_BY_TOPIC").observe(value)
    reference.labels("http", "route").observe(7.0)
    assert _lines(ours.render()) == _lines(generate_latest(registry))
    assert 'namesrv_request_seconds_count{operation="GET_ROUTEINFO_BY_TOPIC",transport="remoting"} 4.0' in (
        ours.render().decode()
    )


def test_a_wrong_number_of_labels_is_refused() -> None:
    with pytest.raises(ValueError, match="takes labels"):
        Metrics().latency.labels("remoting")


def _gc_count(text: str, generation: int) -> float:
    prefix = f'namesrv_gc_pause_seconds_count{{generation="{generation}"}} '
    return next(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


def test_every_full_collection_is_recorded_as_a_pause() -> None:
    metrics = Metrics()
    before = _gc_count(metrics.render().decode(), 2)
    gc.collect(2)
    gc.collect(2)
    assert _gc_count(metrics.render().decode(), 2) == before + 2
    assert _gc_count(Metrics().render().decode(), 2) == before + 2  # one process, one collector
