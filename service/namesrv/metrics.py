"""Prometheus metrics of one worker. Labels stay low-cardinality: never a topic or broker name."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from namesrv.registry.route_cache import RouteCache

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "namesrv_requests",
            "Requests handled, by transport, operation and outcome",
            ["transport", "operation", "outcome"],
            registry=r,
        )
        self.latency = Histogram(
            "namesrv_request_seconds",
            "Request latency, by transport and operation",
            ["transport", "operation"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.registrations = Counter(
            "namesrv_registrations", "REGISTER_BROKER results (ok, refused, ignored)", ["result"], registry=r
        )
        self.expired = Counter(
            "namesrv_expired_brokers", "Brokers removed by this worker's sweeps", registry=r
        )
        self.fenced = Counter(
            "namesrv_fenced_removals",
            "Removals refused because a newer registration owns the broker",
            ["reason"],
            registry=r,
        )
        self.removals = Counter(
            "namesrv_removals", "Brokers removed, by reason (unregister, close)", ["reason"], registry=r
        )
        self.redis_errors = Counter(
            "namesrv_redis_errors", "Redis calls that failed after retries", registry=r
        )
        self.script_latency = Histogram(
            "namesrv_script_seconds",
            "Lua script round-trip latency",
            ["script"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.connections = Gauge("namesrv_remoting_connections", "Open remoting connections", registry=r)
        self.ready = Gauge("namesrv_ready", "1 when this worker reports ready", registry=r)

    def watch_route_cache(self, cache: RouteCache) -> None:
        self.registry.register(_RouteCacheCollector(cache))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _RouteCacheCollector(Collector):
    """Reads the route cache's counters at scrape time (the hot path keeps plain ints)."""

    def __init__(self, cache: RouteCache) -> None:
        self.cache = cache

    def collect(self) -> Iterator[Metric]:
        stats = self.cache.stats()
        lookups = CounterMetricFamily(
            "namesrv_route_cache_lookups",
            "Route lookups by cache outcome (hit, miss, bypass = change feed not fresh)",
            labels=["result"],
        )
        for result in ("hits", "misses", "bypasses"):
            lookups.add_metric([result.rstrip("es") if result != "bypasses" else "bypass"], stats[result])
        yield lookups
        yield CounterMetricFamily(
            "namesrv_route_cache_invalidations",
            "Cached routes dropped by changes",
            value=stats["invalidations"],
        )
        yield GaugeMetricFamily("namesrv_route_cache_entries", "Routes cached", value=stats["entries"])
