"""How fast the fleet removes brokers that are gone, measured on the change log's clock.

- **silent**: brokers register with ``heartbeatTimeoutMillis = expiry_timeout_ms`` and then say
  nothing (their connections stay open, as a hung broker's would). Each one's deadline is its
  registration + timeout; the sweep's ``expire`` event carries both ``deadline`` and ``ts``
  (Redis time), so lag = ``ts - deadline``, and the broker was gone ``timeout + lag`` after its
  last registration. Registrations are staggered over one sweep interval, so deadlines fall at
  every phase of the workers' sweep timers.
- **crashed**: brokers register (long timeout), then their TCP connection is reset
  (``abort()``, an RST). Just before each reset the bench reads Redis ``TIME``; the ``close``
  event's ``ts`` minus that is the removal lag.

Brokers alternate between the workers, so both workers' sweepers and close handlers are in play.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.fleet import LONG_TIMEOUT_MS, Bench
from bench.redisstats import server_time_ms
from bench.stats import median
from namesrv.sim.broker import SimBroker, topic_configs


async def _last_event_id(b: Bench) -> str:
    last = await b.redis.xrevrange(b.events_key, count=1)
    return str(last[0][0]) if last else "0-0"


async def _wait_events(
    b: Bench, after: str, kind: str, addrs: set[str], timeout: float
) -> dict[str, dict[str, str]]:
    """The first ``kind`` event of each broker address in ``addrs``, polling the change log."""
    found: dict[str, dict[str, str]] = {}
    deadline = time.monotonic() + timeout
    cursor = after
    while len(found) < len(addrs) and time.monotonic() < deadline:
        entries: list[tuple[str, dict[str, str]]] = await b.redis.xrange(  # type: ignore[assignment]
            b.events_key, min=f"({cursor}", count=1000
        )
        for entry_id, fields in entries:
            cursor = str(entry_id)
            addr = fields.get("brokerAddr", "")
            if fields.get("kind") == kind and addr in addrs and addr not in found:
                found[addr] = fields
        if not entries:
            await asyncio.sleep(0.02)
    return found


async def _broker(b: Bench, cluster: str, name: str, addr: str, worker: int, timeout_ms: int) -> SimBroker:
    client = await b.connect(worker)
    # two topics: a first registration with exactly one topic is refused (RocketMQ's rule R7)
    topics = topic_configs([f"{name}-a", f"{name}-b"])
    return SimBroker(client, cluster, name, addr, topics=topics, timeout_ms=timeout_ms)


async def run_silent(b: Bench) -> dict[str, Any]:
    cfg = b.cfg
    brokers = [
        await _broker(
            b,
            "BenchExpiry",
            f"silent-{i}",
            f"127.0.8.{i + 1}:10911",
            i % len(b.workers),
            cfg.expiry_timeout_ms,
        )
        for i in range(cfg.expiry_brokers)
    ]
    after = await _last_event_id(b)
    stagger = cfg.sweep_ms / 1000 / max(1, len(brokers))
    for broker in brokers:
        await broker.register()
        await asyncio.sleep(stagger)
    wait = cfg.expiry_timeout_ms / 1000 + cfg.sweep_ms / 1000 + 10
    events = await _wait_events(b, after, "expire", {br.addr for br in brokers}, wait)
    for broker in brokers:
        await broker.client.aclose()
    lags = [int(e["ts"]) - int(float(e["deadline"])) for e in events.values()]
    return _result(lags, len(brokers), timeout_ms=cfg.expiry_timeout_ms)


async def run_crashed(b: Bench) -> dict[str, Any]:
    cfg = b.cfg
    brokers = [
        await _broker(
            b, "BenchCrash", f"crash-{i}", f"127.0.9.{i + 1}:10911", i % len(b.workers), LONG_TIMEOUT_MS
        )
        for i in range(cfg.crash_brokers)
    ]
    for broker in brokers:
        await broker.register()
    after = await _last_event_id(b)
    aborted: dict[str, int] = {}
    for broker in brokers:
        aborted[broker.addr] = await server_time_ms(b.redis)
        broker.client.abort()
        await asyncio.sleep(0.05)
    events = await _wait_events(b, after, "close", set(aborted), 10.0)
    lags = [int(e["ts"]) - aborted[addr] for addr, e in events.items()]
    return _result(lags, len(brokers))


def _result(lags_ms: list[int], expected: int, timeout_ms: int | None = None) -> dict[str, Any]:
    return {
        "brokers": expected,
        "removed": len(lags_ms),
        "lags_ms": sorted(lags_ms),
        "median_ms": median([float(x) for x in lags_ms]) if lags_ms else None,
        "max_ms": max(lags_ms) if lags_ms else None,
        "timeout_ms": timeout_ms,
    }
