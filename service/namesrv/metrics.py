"""Prometheus metrics of one worker. Labels stay low-cardinality: never a topic or broker name."""

from __future__ import annotations

import bisect
import gc
import time
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector


class CacheStats(Protocol):
    """What a cache's collector reads (the route cache): its counters by name."""

    def stats(self) -> dict[str, int]: ...


class BudgetLevels(Protocol):
    """What the decode budget's collector reads."""

    @property
    def held(self) -> int: ...

    @property
    def high_water(self) -> int: ...


class Readiness(Protocol):
    def ready(self, redis_reachable: bool) -> bool: ...


class RedisLink(Protocol):
    @property
    def reachable(self) -> bool: ...

    def down_for(self) -> float: ...


class ProbeProcess(Protocol):
    restarts: int

    def alive(self) -> bool: ...


class FeedStats(Protocol):
    """What the change feed's collector reads."""

    poll_faults: int
    thread_restarts: int

    @property
    def probe(self) -> ProbeProcess | None: ...

    @property
    def probe_vouched(self) -> int: ...


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
        self.latency = LatencyHistogram(
            "namesrv_request_seconds",
            "Request latency, by transport and operation",
            ("transport", "operation"),
            LATENCY_BUCKETS,
        )
        r.register(self.latency)
        self._request_series: dict[tuple[str, str, str], tuple[Any, LatencySeries]] = {}
        r.register(gc_pauses())
        # How late the event loop ran a 10 ms timer: a time in which this worker answered nothing,
        # because it was busy elsewhere or the OS did not run it. Beside the request latency it
        # tells a slow answer from one that waited before the worker could read it.
        self.loop_lag = LatencyHistogram(
            "namesrv_event_loop_lag_seconds",
            "How late the event loop ran a 10 ms timer (busy, or not scheduled by the OS)",
            (),
            LATENCY_BUCKETS,
        )
        r.register(self.loop_lag)
        ProcessCollector(registry=r)  # CPU, RSS, open files: read from /proc at scrape time
        self.heal_replays = Counter(
            "namesrv_heal_replays",
            "Registrations this worker kept and replayed after Redis lost its data, by outcome "
            "(replayed; skipped: the broker registered on its own first, or its connection closed; "
            "failed; dropped: not kept, over healKeepMaxBytes)",
            ["outcome"],
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
            "Removals that removed nothing: registered again since (reason unregister, close), "
            "expired or removed already (close_gone), held by another open connection (close_held)",
            ["reason"],
            registry=r,
        )
        self.removals = Counter(
            "namesrv_removals", "Brokers removed, by reason (unregister, close)", ["reason"], registry=r
        )
        self.redis_errors = Counter(
            "namesrv_redis_errors",
            "Redis calls that failed for good: after retries, past redisTimeoutMillis, or refused at once "
            "while Redis was down",
            registry=r,
        )
        self.unreplicated_writes = Counter(
            "namesrv_redis_unreplicated_writes",
            "Writes answered with an error because fewer than redisWriteReplicas replicas confirmed "
            "them within redisWriteReplicaTimeoutMillis",
            registry=r,
        )
        self.script_latency = Histogram(
            "namesrv_script_seconds",
            "Lua script round-trip latency",
            ["script"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.connections = Gauge(
            "namesrv_remoting_connections",
            "Remoting connections holding a slot (maxConnections), TLS handshakes under way included",
            registry=r,
        )
        self.connection_peers = Gauge(
            "namesrv_remoting_connection_peers",
            "Peer addresses holding at least one remoting connection (maxConnectionsPerPeer)",
            registry=r,
        )
        self.route_read_pauses = Counter(
            "namesrv_remoting_route_read_pauses",
            "Times a remoting connection was left unread because redisMaxConnections route lookups "
            "were reading Redis already (not answered from memory): the backlog waits in the "
            "socket until half of them are done",
            registry=r,
        )
        self.redis_resets = Counter(
            "namesrv_redis_resets",
            "Times this worker found Redis holding other data than it had read (restart without "
            "persistence, FLUSHALL, failover to a lagging replica) and dropped its cached routes",
            ["reason"],
            registry=r,
        )
        self.limit_refusals = Counter(
            "namesrv_limit_refusals",
            "Requests and connections refused by a resource limit, by the option's name",
            ["limit"],
            registry=r,
        )
        self.partial_frame_bytes = Gauge(
            "namesrv_remoting_partial_frame_bytes", "Bytes held in unfinished remoting frames", registry=r
        )
        self.events_bytes = Gauge(
            "namesrv_events_stream_bytes",
            "Memory of the change-log stream as Redis last reported it",
            registry=r,
        )
        self.events_trimmed = Counter(
            "namesrv_events_trimmed",
            "Change-log entries trimmed to keep the stream within eventsMaxBytes",
            registry=r,
        )

    def request_series(self, transport: str, operation: str, outcome: str) -> tuple[Any, LatencySeries]:
        """The request counter and latency series of one label set, looked up once: a
        prometheus_client ``labels()`` call costs as much as a cached lookup's own work."""
        key = (transport, operation, outcome)
        found = self._request_series.get(key)
        if found is None:
            found = self._request_series[key] = (
                self.requests.labels(transport, operation, outcome),
                self.latency.labels(transport, operation),
            )
        return found

    def watch_route_cache(self, cache: CacheStats) -> None:
        self.registry.register(_RouteCacheCollector(cache))

    def watch_decode_budget(self, budget: BudgetLevels) -> None:
        self.registry.register(_DecodeBudgetCollector(budget))

    def watch_worker(self, worker: Readiness, health: RedisLink) -> None:
        self.registry.register(_WorkerCollector(worker, health))

    def watch_change_feed(self, feed: FeedStats) -> None:
        self.registry.register(_ChangeFeedCollector(feed))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class LatencySeries:
    """One label set of a :class:`LatencyHistogram`."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: list[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # per bucket, not cumulative; the last is +Inf
        self.total = 0.0

    def observe(self, seconds: float, count: int = 1) -> None:
        """Record ``count`` requests that each took ``seconds``."""
        self.counts[bisect.bisect_left(self.bounds, seconds)] += count
        self.total += seconds * count


class LatencyHistogram(Collector):
    """A Prometheus histogram that records many equal observations in one step, for the
    requests a worker answers together from memory: one prometheus_client ``observe`` per
    request (lock, bucket loop) costs as much as a tenth of such a request. Updated and
    scraped on the event loop's thread only, so it takes no lock."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = list(labelnames)
        self.bounds = sorted(buckets)
        self._series: dict[tuple[str, ...], LatencySeries] = {}

    def labels(self, *values: str) -> LatencySeries:
        series = self._series.get(values)
        if series is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name} takes labels {self.labelnames}, got {values}")
            series = self._series[values] = LatencySeries(self.bounds)
        return series

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, series in self._series.items():
            cumulative, buckets = 0, []
            for bound, count in zip([*self.bounds, float("inf")], series.counts, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            family.add_metric(list(values), buckets, series.total)
        yield family


class _RouteCacheCollector(Collector):
    """Reads the route cache's counters at scrape time (the hot path keeps plain ints)."""

    def __init__(self, cache: CacheStats) -> None:
        self.cache = cache

    def collect(self) -> Iterator[Metric]:
        stats = self.cache.stats()
        lookups = CounterMetricFamily(
            "namesrv_route_cache_lookups",
            "Route lookups by cache outcome (hit, miss, bypass = change feed could not catch up, so "
            "read from Redis; shed = answered SYSTEM_BUSY because too many were reading Redis; "
            "outage = served from the cache while Redis was unreachable; unavailable = not cached "
            "while Redis was unreachable: failed; heal = served as cached before Redis lost its "
            "data, while the fleet replays; heal_not_ready = not cached then, and Redis did not "
            "have it yet: 'name server not ready')",
            labels=["result"],
        )
        for label, counter in (
            ("hit", "hits"),
            ("miss", "misses"),
            ("bypass", "bypasses"),
            ("shed", "shed"),
            ("outage", "outage"),
            ("unavailable", "unavailable"),
            ("heal", "heal_hits"),
            ("heal_not_ready", "heal_refusals"),
        ):
            lookups.add_metric([label], stats[counter])
        yield lookups
        yield CounterMetricFamily(
            "namesrv_route_cache_invalidations",
            "Cached routes dropped by changes",
            value=stats["invalidations"],
        )
        refreshes = CounterMetricFamily(
            "namesrv_route_cache_refreshes",
            "Routes read again right after a change dropped them, because they were served lately "
            "(read = read and kept; overtaken = another change came first, so read again, at most "
            "3 times; failed = Redis did not answer)",
            labels=["result"],
        )
        refreshes.add_metric(["read"], stats["refreshed"])
        refreshes.add_metric(["overtaken"], stats["refresh_overtaken"])
        refreshes.add_metric(["failed"], stats["refresh_failures"])
        yield refreshes
        catch_ups = CounterMetricFamily(
            "namesrv_route_cache_catch_ups",
            "Waits of lookups that found the worker's knowledge of Redis older than the staleness "
            "bound (in_flight = the poll already on its way brought it back; read = a read issued "
            "for them; failed = neither within the deadline)",
            labels=["result"],
        )
        for how in ("in_flight", "read", "failed"):
            catch_ups.add_metric([how], stats[f"catch_ups_{how}"])
        yield catch_ups
        yield GaugeMetricFamily("namesrv_route_cache_entries", "Routes cached", value=stats["entries"])


class _DecodeBudgetCollector(Collector):
    """decodeBudgetBytes: what decodes hold now and the most they ever held together."""

    def __init__(self, budget: BudgetLevels) -> None:
        self.budget = budget

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "namesrv_decode_budget_held_bytes",
            "Memory (estimated) reserved by request bodies being decoded (decodeBudgetBytes)",
            value=self.budget.held,
        )
        yield GaugeMetricFamily(
            "namesrv_decode_budget_high_water_bytes",
            "The most memory (estimated) request bodies being decoded ever held at once",
            value=self.budget.high_water,
        )


class _ChangeFeedCollector(Collector):
    """The change feed's own faults, and its freshness probe (freshnessProbeEnabled): whether it
    runs, how often it spared lookups a catch-up."""

    def __init__(self, feed: FeedStats) -> None:
        self.feed = feed

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "namesrv_change_feed_poll_faults",
            "Change-log polls that failed in the worker's handling rather than in Redis (logged)",
            value=self.feed.poll_faults,
        )
        yield CounterMetricFamily(
            "namesrv_change_feed_thread_restarts",
            "Change-feed poll threads started again after one ended unexpectedly (logged)",
            value=self.feed.thread_restarts,
        )
        probe = self.feed.probe
        if probe is None:
            return
        yield GaugeMetricFamily(
            "namesrv_freshness_probe_up", "1 while the freshness probe process runs", value=int(probe.alive())
        )
        yield CounterMetricFamily(
            "namesrv_freshness_probe_restarts",
            "Freshness probe processes started again after exiting",
            value=probe.restarts,
        )
        yield CounterMetricFamily(
            "namesrv_freshness_probe_vouched",
            "Probe polls that kept this worker's knowledge of Redis fresh while its own poll was late",
            value=self.feed.probe_vouched,
        )


class _WorkerCollector(Collector):
    """Readiness and the Redis link, read at scrape time from the state the worker acts on."""

    def __init__(self, worker: Readiness, health: RedisLink) -> None:
        self.worker = worker
        self.health = health

    def collect(self) -> Iterator[Metric]:
        up = self.health.reachable
        yield GaugeMetricFamily(
            "namesrv_ready", "1 when this worker reports ready", value=int(self.worker.ready(up))
        )
        yield GaugeMetricFamily(
            "namesrv_redis_up", "1 while the change feed's polls of Redis succeed", value=int(up)
        )
        yield GaugeMetricFamily(
            "namesrv_redis_down_seconds",
            "How long Redis has been unreachable (0 while up)",
            value=self.health.down_for(),
        )


_gc_pauses: LatencyHistogram | None = None


def gc_pauses() -> LatencyHistogram:
    """The process's cyclic-GC pauses by generation (one histogram per process: the collector is
    process-wide). A full collection walks every tracked object while the event loop waits, so
    its length shows directly in lookup latency and in how late the change feed reads."""
    global _gc_pauses
    if _gc_pauses is None:
        histogram = LatencyHistogram(
            "namesrv_gc_pause_seconds",
            "Pauses of Python's cyclic garbage collector, by generation",
            ("generation",),
            LATENCY_BUCKETS,
        )
        series = [histogram.labels(str(generation)) for generation in range(3)]
        started = [0.0]

        def on_gc(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                series[info["generation"]].observe(time.perf_counter() - started[0])

        gc.callbacks.append(on_gc)
        _gc_pauses = histogram
    return _gc_pauses
