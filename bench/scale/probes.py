"""What the bench asks a NameServer or its Redis: is every route whole, the three admin
listings (a reply over the frame limit must come back as a clear error, never a hang), and route
lookups at peak and at a fraction of it (open loop)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson
from redis.asyncio import Redis

from bench import core_speed
from bench.core_speed import CoreSpeedProbe
from bench.fleet import worker_counters
from bench.load_jobs import LoadJob, LoadResult
from bench.loadgen import LoadPool
from bench.lookups import window_p99s
from bench.procs import CpuMeter, CpuWaitMeter, with_other
from bench.redisstats import commandstats, reset_stats
from bench.scale.shapes import CLUSTER, Shape
from namesrv.domain.codes import RequestCode
from namesrv.protocol.remoting import DEFAULT_MAX_FRAME
from namesrv.sim.client import RemotingClient, RemotingClientError
from namesrv.store.keyspace import Keyspace

ROUTE_VERSION = 479
CHECK_SAMPLE = 200  # topics whose route width is checked (every group's topic count is checked too)
ADMIN_TIMEOUT_S = 30.0
ADMIN_CALLS = {
    "all_topic_list": (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, None),
    "cluster_info": (RequestCode.GET_BROKER_CLUSTER_INFO, None),
    "topics_by_cluster": (RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": CLUSTER}),
}


async def whole_in_redis(redis: Redis, namespace: str, shape: Shape) -> dict[str, Any]:
    """Redis holds every topic, every group's every topic, and the full width of a sample of
    routes, read straight from the keys (a worker's cache would hide a hole)."""
    keys = Keyspace(namespace)
    sample = list(shape.groups_of)[:CHECK_SAMPLE]
    pipe = redis.pipeline(transaction=False)
    pipe.scard(keys.topics)
    for spec in shape.masters:
        pipe.scard(keys.btopics(spec.name))
    for topic in sample:
        pipe.hlen(keys.topic(topic))
    pipe.hlen(keys.live)
    got = await pipe.execute()
    topics, groups, widths, live = (
        got[0],
        got[1 : 1 + len(shape.masters)],
        got[1 + len(shape.masters) : -1],
        got[-1],
    )
    groups_whole = sum(1 for spec, n in zip(shape.masters, groups, strict=True) if n == len(spec.topics))
    routes_whole = sum(1 for t, n in zip(sample, widths, strict=True) if n == shape.groups_of[t])
    return {
        "topics": int(topics),
        "groups_whole": groups_whole,
        "routes_whole_of_sample": routes_whole,
        "sample": len(sample),
        "live_brokers": int(live),
        "whole": topics == shape.topics_total
        and groups_whole == len(shape.masters)
        and routes_whole == len(sample)
        and live == len(shape.brokers),
    }


async def whole_by_lookup(address: str, shape: Shape) -> dict[str, Any]:
    """For a peer (no Redis to read): the route of a sample of topics has every group."""
    sample = list(shape.groups_of)[:CHECK_SAMPLE]
    client = await RemotingClient.connect(address)
    try:
        replies = await asyncio.gather(
            *(
                client.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t}, version=ROUTE_VERSION)
                for t in sample
            )
        )
    finally:
        await client.aclose()
    whole = 0
    for topic, reply in zip(sample, replies, strict=True):
        if reply.code == 0 and reply.body:
            width = len(orjson.loads(reply.body).get("queueDatas", []))
            whole += width == shape.groups_of[topic]
    return {"routes_whole_of_sample": whole, "sample": len(sample), "whole": whole == len(sample)}


async def wait_whole(
    check: Callable[[], Awaitable[dict[str, Any]]], limit: float, every: float = 0.05
) -> tuple[float | None, dict[str, Any]]:
    """Seconds until ``check`` says whole (None if not within ``limit``), and its last answer."""
    started = time.perf_counter()
    last: dict[str, Any] = {}
    while True:
        try:
            last = await check()
        except Exception as exc:  # Redis still restarting: not whole yet
            last = {"whole": False, "error": f"{type(exc).__name__}: {exc}"}
        if last.get("whole"):
            return time.perf_counter() - started, last
        if time.perf_counter() - started > limit:
            return None, last
        await asyncio.sleep(every)


async def admin_calls(address: str) -> dict[str, dict[str, Any]]:
    """Each listing once, on its own connection, with a deadline: what came back and how long it
    took, or what happened instead (error code and remark, timeout, connection closed)."""
    out: dict[str, dict[str, Any]] = {}
    for name, (code, fields) in ADMIN_CALLS.items():
        client = await RemotingClient.connect(address)
        started = time.perf_counter()
        row: dict[str, Any]
        try:
            reply = await client.invoke(code, fields, timeout=ADMIN_TIMEOUT_S)
            size = len(reply.body or b"")
            row = {
                "outcome": "ok" if reply.code == 0 else f"error {reply.code}: {reply.remark}",
                "code": reply.code,
                "body_bytes": size,
                "over_frame_limit": size > DEFAULT_MAX_FRAME,
            }
        except TimeoutError:
            row = {"outcome": f"no reply within {ADMIN_TIMEOUT_S:g} s (hang)", "code": None, "body_bytes": 0}
        except RemotingClientError as exc:
            row = {"outcome": f"connection failed: {exc}", "code": None, "body_bytes": 0}
        row["ms"] = (time.perf_counter() - started) * 1000
        await client.aclose()
        out[name] = row
    return out


Hook = Callable[[], Awaitable[None]]


async def lookup_window(
    pool: LoadPool,
    job: LoadJob,
    roles: dict[str, list[int]],
    redis: Redis | None,
    on_start: Hook | None = None,
    worker_urls: Sequence[str] = (),
) -> dict[str, Any]:
    """One load job; over its window the cores of each role, with ``redis`` what Redis did per
    lookup (its commandstats reset at the window's start), and with ``worker_urls`` what those
    workers counted meanwhile (route cache outcomes, catch-ups, requests and loop ticks over
    5 ms by their own clocks: a tail made inside the workers, or by a stale cache, shows there),
    and how long the ``server`` processes waited for a CPU (a tail the scheduler made)."""
    meter = CpuMeter(roles)
    waits = CpuWaitMeter(roles.get("server", []))
    speed = CoreSpeedProbe()
    cores_speed: dict[str, Any] = {}
    waited: dict[str, Any] = {}
    cores: dict[str, float] = {}
    stats: dict[str, dict[str, float]] = {}
    counted: list[dict[str, float]] = []

    async def read_counters() -> None:
        await speed.launch()
        # in the warm-up: a scrape of /metrics at the window's start made its first 100 ms a tail
        if worker_urls:
            counted.append(await worker_counters(list(worker_urls)))

    async def start() -> None:
        if redis is not None:
            await reset_stats(redis)
        meter.start()
        waits.start()
        await speed.start()
        if on_start is not None:
            await on_start()

    async def end() -> None:
        cores.update(meter.stop())
        waited.update(waits.stop() or {})
        cores_speed.update(await speed.stop() or {})
        if worker_urls:
            counted.append(await worker_counters(list(worker_urls)))
        if redis is not None:
            with contextlib.suppress(Exception):  # a restarted Redis: no stats for this window
                stats.update(await commandstats(redis))

    raw: list[LoadResult] = []
    summary = await pool.run(
        job,
        before_window=read_counters,
        on_window_start=start,
        on_window_end=end,
        raw=raw,
    )
    done = max(summary.completed, 1)
    row: dict[str, Any] = {
        k: getattr(summary, k)
        for k in (
            "mode",
            "target_rate",
            "rps",
            "completed",
            "errors",
            "error_codes",
            "p50_ms",
            "p99_ms",
            "max_ms",
            # the generator's own state: sends late on their schedule, its busiest process's core
            "late_fraction",
            "loadgen_core_max",
        )
    }
    # open loop: when in the window the slow replies were (a one-off stall or a steady tail)
    row["p99_ms_by_bucket"] = window_p99s(raw, job.duration) if job.rate else None
    row["cores"] = with_other(cores)
    server = row["cores"].get("server", 0.0)
    row["server_us_per_lookup"] = server * 1e6 / summary.rps if summary.rps else None
    if stats:
        row["redis_us_per_lookup"] = sum(v["usec"] for v in stats.values()) / done
        row["redis_calls_per_lookup"] = sum(v["calls"] for v in stats.values()) / done
    row["server_cpu_wait"] = waited or None
    row["core_speed"] = cores_speed or None
    if len(counted) == 2:
        before, after = counted
        row["workers_counted"] = {k: after[k] - before.get(k, 0.0) for k in sorted(after)}
    return row


def inside_workers(row: dict[str, Any]) -> str:
    """What the workers counted over a lookup window, in a few words: requests and event-loop
    ticks over 5 ms by their own clocks, GC pauses over 5 ms, and catch-up reads (a cached worker
    that thought itself stale)."""
    seen = row.get("workers_counted") or {}
    if not seen.get("requests"):
        return "workers counted nothing"
    slow, ticks, gc = (seen.get(f"{k}.slow", 0) for k in ("requests", "loop", "gc"))
    read, in_flight = seen.get("catch_up.read", 0), seen.get("catch_up.in_flight", 0)
    words = (
        f"inside the workers >5 ms: {slow:,.0f} of {seen['requests']:,.0f} requests, "
        f"{ticks:,.0f} loop ticks, {gc:,.0f} GC pauses; "
        f"catch-ups read {read:,.0f}, in flight {in_flight:,.0f}"
    )
    waited = row.get("server_cpu_wait")
    if waited:
        most = waited["max_step_ms"]
        words += f"; waited for a CPU {waited['ms']:,.0f} ms, one at most {most:.0f} ms of 100 ms"
    slow_cores = core_speed.describe(row.get("core_speed"))
    if slow_cores:
        words += f"; {slow_cores}"
    return words
