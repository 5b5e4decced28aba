"""Legitimate traffic beside the attacks, from 127.0.0.1: simulated brokers re-registering, and
clients looking routes up over remoting and HTTP, every request's outcome and latency recorded.

A lookup is *answered* when it got code 0 (HTTP 200) with the whole route: every legitimate
broker in it. A timeout (3 s by default, a RocketMQ client's default), a closed connection, another code or
a route missing a broker is not. A registration is answered when it got code 0 within 6 s (by default).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from bench.abuse.plan import BrokerRef
from bench.procs import Worker
from namesrv.domain.codes import RequestCode
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient, RemotingClientError

CONNECT_TIMEOUT = 2.0
CLUSTER = "LegitCluster"
BUMP_EVERY = 5  # every 5th registration carries a new DataVersion: a real write, not a no-op


def now() -> float:
    return time.monotonic()


@dataclass(eq=False)  # one per request, hashed by identity (the set of pending ones)
class Request:
    """One legitimate request and what became of it."""

    kind: str  # "remoting", "http", "register"
    worker: int
    sent: float
    latency: float
    outcome: str  # "ok", or why not: "timeout", "closed", "code 1", "HTTP 503", "route without broker-1"

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


@dataclass(frozen=True)
class TrafficConfig:
    brokers: int = 4  # every broker holds every topic: a route names all of them
    topics: int = 50
    register_period: float = 1.0  # s between a broker's registrations (time-compressed: 30 s in life)
    lookup_loops: int = 4  # remoting lookup loops per worker, each on its own connection
    http_loops: int = 1  # HTTP lookup loops per worker
    interval: float = 0.01  # s between two lookups of one loop, whether the last was answered or not
    # A slower machine (make test beside other tests) stretches both, as tests/polling.py's
    # load factor stretches every deadline: the bounds judge the fleet, not the machine's speed.
    lookup_timeout: float = 3.0  # s: a RocketMQ client's default timeout for a route lookup
    register_timeout: float = 6.0  # s: a broker's registerBroker timeout


class Connection:
    """A client's connection to one worker, opened again in the background when it closed: a
    request due while there is none fails ('not connected'), as it would for a real client."""

    def __init__(self, address: str, client: RemotingClient | None = None) -> None:
        self.address = address
        self.client = client
        self._opening: asyncio.Task[None] | None = None

    def current(self) -> RemotingClient | None:
        if self.client is not None and not self.client.closed.is_set():
            return self.client
        self.client = None
        if self._opening is None or self._opening.done():
            self._opening = asyncio.ensure_future(self._open())
        return None

    async def _open(self) -> None:
        try:
            self.client = await asyncio.wait_for(RemotingClient.connect(self.address), CONNECT_TIMEOUT)
        except (OSError, TimeoutError):
            await asyncio.sleep(0.1)  # then the next request due tries again

    def abort(self) -> None:
        if self._opening is not None:
            self._opening.cancel()
        if self.client is not None:
            self.client.abort()


@dataclass
class Traffic:
    """Open loop: every lookup loop sends one request per ``interval`` whatever became of the
    ones before, so a worker that stops answering for a second fails a second's worth of
    lookups (a closed loop, waiting for each answer, would send one and count one failure)."""

    workers: list[Worker]
    cfg: TrafficConfig
    records: list[Request] = field(default_factory=list)
    pending: set[Request] = field(default_factory=set)  # sent, not yet answered or failed
    topics: list[str] = field(default_factory=list)
    brokers: list[SimBroker] = field(default_factory=list)
    _loops: list[asyncio.Task[None]] = field(default_factory=list)
    _in_flight: set[asyncio.Task[Request]] = field(default_factory=set)
    _connections: list[Connection] = field(default_factory=list)
    _finished: asyncio.Event = field(default_factory=asyncio.Event)  # set as each request ends
    skipped: list[tuple[float, int]] = field(default_factory=list)  # (when, ticks) not run in time

    @property
    def broker_refs(self) -> tuple[BrokerRef, ...]:
        return tuple(BrokerRef(b.cluster, b.name, b.addr) for b in self.brokers)

    async def start(self) -> None:
        """Register every broker (each through its own worker), then start every loop."""
        self.topics = [f"legit-topic-{i:03d}" for i in range(self.cfg.topics)]
        for i in range(self.cfg.brokers):
            client = await RemotingClient.connect(self._remoting(i))
            broker = SimBroker(
                client,
                CLUSTER,
                f"legit-broker-{i}",
                f"10.77.0.{i + 1}:10911",  # not the attacker's address: it may not pass for the broker
                topics=topic_configs(self.topics, queues=4),
            )
            await broker.register()
            self.brokers.append(broker)
        loops = [self._broker(i, broker) for i, broker in enumerate(self.brokers)]
        for w in range(len(self.workers)):
            loops.extend(self._remoting_lookups(w, n) for n in range(self.cfg.lookup_loops))
            loops.extend(self._http_lookups(w, n) for n in range(self.cfg.http_loops))
        self._loops = [asyncio.ensure_future(loop) for loop in loops]

    async def stop(self) -> None:
        tasks = [*self._loops, *self._in_flight]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for connection in self._connections:
            connection.abort()

    async def serving(self, timeout: float = 30.0) -> None:
        """Until every worker has answered each kind of lookup with the whole route."""
        deadline = now() + timeout
        wanted = {(kind, w) for w in range(len(self.workers)) for kind in ("remoting", "http")}
        while now() < deadline:
            seen = {(r.kind, r.worker) for r in self.records[-2000:] if r.ok}
            if wanted <= seen:
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"legitimate lookups not answered within {timeout:g} s: {self.failures(0.0)}")

    async def resolved(self, until: float) -> None:
        """Until every request sent before ``until`` has its outcome (each has a timeout)."""
        while any(r.sent <= until for r in self.pending):
            self._finished.clear()
            await self._finished.wait()

    def failures(self, since: float) -> dict[str, int]:
        return dict(Counter(f"{r.kind} {r.outcome}" for r in self.records if r.sent >= since and not r.ok))

    def summary(self, start: float, end: float) -> dict[str, Any]:
        """Per kind of request, over those *sent* in [start, end]; and the lookups this process
        should have sent then but could not (it was not given the CPU in time)."""
        inside = [r for r in self.records if start <= r.sent <= end]
        out: dict[str, Any] = {
            kind: summarize([r for r in inside if r.kind == kind])
            for kind in ("remoting", "http", "register")
        }
        out["client_skipped_ticks"] = sum(n for at, n in self.skipped if start <= at <= end)
        return out

    # ---- requests ----
    def _remoting(self, worker: int) -> str:
        return f"127.0.0.1:{self.workers[worker % len(self.workers)].remoting_port}"

    def _connection(self, worker: int, client: RemotingClient | None = None) -> Connection:
        connection = Connection(self._remoting(worker), client)
        self._connections.append(connection)
        return connection

    async def _track(self, kind: str, worker: int, call: Awaitable[str]) -> Request:
        record = Request(kind, worker, now(), 0.0, "pending")
        self.pending.add(record)
        try:
            record.outcome = await call
        finally:
            record.latency = now() - record.sent
            self.pending.discard(record)
            self.records.append(record)
            self._finished.set()
        return record

    def _fire(self, kind: str, worker: int, call: Awaitable[str]) -> None:
        task = asyncio.ensure_future(self._track(kind, worker, call))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    def _failed(self, kind: str, worker: int, outcome: str) -> None:
        self.records.append(Request(kind, worker, now(), 0.0, outcome))

    async def _ticks(self, interval: float) -> AsyncIterator[None]:
        """Yield every ``interval`` s. Ticks this process itself could not run in time (the
        machine busy) are skipped, not sent late in a burst, and counted in ``skipped``: a
        client that was not run cannot say how the server did."""
        next_at = now()
        while True:
            yield
            next_at += interval
            delay = next_at - now()
            if delay < -interval:
                self.skipped.append((next_at, int(-delay / interval)))
                next_at = now()
            await asyncio.sleep(max(0.0, delay))

    # ---- the loops ----
    async def _remoting_lookups(self, worker: int, offset: int) -> None:
        connection = self._connection(worker)
        n = offset
        async for _ in self._ticks(self.cfg.interval):
            topic = self.topics[n % len(self.topics)]
            n += self.cfg.lookup_loops
            client = connection.current()
            if client is None:
                self._failed("remoting", worker, "not connected")
            else:
                self._fire("remoting", worker, self._lookup(client, topic))

    async def _lookup(self, client: RemotingClient, topic: str) -> str:
        try:
            reply = await client.invoke(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout=self.cfg.lookup_timeout
            )
        except TimeoutError:
            return "timeout"
        except (RemotingClientError, OSError):
            return "closed"
        if reply.code != 0:
            return f"code {reply.code}"
        return self._whole(reply.body)

    def _whole(self, body: bytes | None) -> str:
        try:
            names = {b["brokerName"] for b in orjson.loads(body or b"{}").get("brokerDatas") or ()}
        except (orjson.JSONDecodeError, TypeError, KeyError):
            return "unreadable route"
        missing = sorted(b.name for b in self.brokers if b.name not in names)
        return f"route without {', '.join(missing)}" if missing else "ok"

    async def _http_lookups(self, worker: int, offset: int) -> None:
        base = self.workers[worker].url
        n = offset
        # aiohttp's default pool (up to 100 keep-alive connections): a request waiting for a
        # connection would be the client's delay, not the worker's
        timeout = aiohttp.ClientTimeout(total=self.cfg.lookup_timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async for _ in self._ticks(self.cfg.interval):
                topic = self.topics[n % len(self.topics)]
                n += self.cfg.http_loops
                self._fire("http", worker, self._http_lookup(session, f"{base}/v1/routes/{topic}"))

    async def _http_lookup(self, session: aiohttp.ClientSession, url: str) -> str:
        try:
            async with session.get(url) as resp:
                body = await resp.read()
                if resp.status != 200:
                    return f"HTTP {resp.status}"
        except TimeoutError:
            return "timeout"
        except (aiohttp.ClientError, OSError) as exc:
            return type(exc).__name__
        return self._whole(body)

    async def _broker(self, index: int, broker: SimBroker) -> None:
        """Re-register every ``register_period`` s through the broker's worker, on a new
        connection when the last one closed, as a broker's BrokerOuterAPI does; one
        registration at a time (a broker's scheduled task does not overlap itself)."""
        worker = index % len(self.workers)
        connection = self._connection(worker, broker.client)
        await asyncio.sleep(self.cfg.register_period)
        async for _ in self._ticks(self.cfg.register_period):
            client = connection.current()
            if client is None:
                self._failed("register", worker, "not connected")
                continue
            broker.client = client
            if broker.registrations % BUMP_EVERY == 0:
                broker.bump()
            await self._track("register", worker, self._register(broker))

    async def _register(self, broker: SimBroker) -> str:
        try:
            reply = await asyncio.wait_for(broker.register(check=False), self.cfg.register_timeout)
        except TimeoutError:
            return "timeout"
        except (RemotingClientError, OSError):
            return "closed"
        return "ok" if reply.code == 0 else f"code {reply.code}"


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least ``q`` of the values at or below it."""
    if not sorted_values:
        return math.nan
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def summarize(records: list[Request]) -> dict[str, Any]:
    """How many were answered, and latency percentiles over *all* of them with every unanswered
    one ranked slowest: a p99 is a time only when at least 99% were answered."""
    answered = [r.latency for r in records if r.ok]
    ranked = sorted(answered) + [math.inf] * (len(records) - len(answered))
    ms = [v * 1000 for v in ranked]
    return {
        "sent": len(records),
        "answered": len(answered),
        "answered_pct": 100.0 * len(answered) / len(records) if records else math.nan,
        "p50_ms": percentile(ms, 0.50),
        "p99_ms": percentile(ms, 0.99),
        "max_answered_ms": max(answered) * 1000 if answered else math.nan,
        "failures": dict(Counter(r.outcome for r in records if not r.ok).most_common()),
        "by_worker": {
            str(w): sum(1 for r in records if r.worker == w and r.ok)
            for w in sorted({r.worker for r in records})
        },
    }
