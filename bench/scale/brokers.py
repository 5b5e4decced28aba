"""The simulated brokers of one shape against one NameServer (ours or a peer): registering them
all (bodies encoded once per topic table, split and compressed as the shape says), one
re-registration cycle, heartbeats that keep their connections open, and their departure."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.scale.shapes import CLUSTER, BrokerSpec, Shape
from namesrv.domain.codes import RequestCode
from namesrv.sim.broker import SimBroker
from namesrv.sim.client import RemotingClient

LONG_TIMEOUT_MS = 3_600_000  # brokers must outlive the run: no expiry while a phase pauses them
KEEPALIVE_S = 10.0  # under the server's 120 s idle limit for a connection, as real brokers do
REGISTER_TIMEOUT_S = 120.0
REREGISTER_S = 30.0
RETRIED = frozenset({1, 2})  # SYSTEM_ERROR ("Redis unavailable: ..."), SYSTEM_BUSY
RETRIES = 5
SPREAD_SEED = 27
RETRY_WAIT_S = 0.5  # a peer without BROKER_HEARTBEAT: what a broker does


@dataclass
class Registered:
    """Simulated brokers, each over its own connection to one of ``addresses``: as many on each,
    shuffled (a Service in front of the fleet sends each connection to any worker; taken in
    turn, every group's master, first slave and second slave each landed on one worker, so one
    worker held every master)."""

    shape: Shape
    addresses: Sequence[str]
    brokers: list[SimBroker] = field(default_factory=list)
    specs: list[BrokerSpec] = field(default_factory=list)
    paused: bool = False  # True: the keep-alive sends nothing (the heal must see no broker traffic)
    # False (a Java 4.9.x peer: no BROKER_HEARTBEAT, 120 s expiry): keep alive by re-registering
    heartbeats: bool = True
    latencies: list[float] = field(default_factory=list)
    retries: int = 0  # registrations sent again after SYSTEM_ERROR / SYSTEM_BUSY
    _bodies: dict[tuple[int, int], bytes] = field(default_factory=dict)
    _connected: set[int] = field(default_factory=set)
    _homes: list[int] = field(default_factory=list)  # broker index -> index in ``addresses``
    _keepalive: asyncio.Task[None] | None = None
    _stamp: int = field(default_factory=lambda: int(time.time() * 1000))

    async def connect(self) -> None:
        """The brokers, each connecting just before its first registration: a server closes a
        connection that sends nothing for firstFrameDeadlineSeconds (10 s), and brokers waiting
        for a registration slot, or for the bench to encode their bodies, would."""
        for spec in self.shape.brokers:
            broker = SimBroker(
                RemotingClient(),  # not connected yet: it gives body() the protocol version
                CLUSTER,
                spec.name,
                spec.addr,
                broker_id=spec.broker_id,
                topics=spec.topics,
                timestamp=self._stamp,  # one DataVersion for all: equal tables encode to one body
                timeout_ms=LONG_TIMEOUT_MS,
                compressed=self.shape.compressed,
            )
            self.brokers.append(broker)
            self.specs.append(spec)
        self._homes = [i % len(self.addresses) for i in range(len(self.brokers))]
        random.Random(SPREAD_SEED).shuffle(self._homes)
        self._keepalive = asyncio.create_task(self._keep_alive(), name="scale-keepalive")

    def _batches(self, spec: BrokerSpec) -> list[dict[str, object]]:
        names = list(spec.topics)
        size = self.shape.split or max(1, len(names))
        return [{n: spec.topics[n] for n in names[i : i + size]} for i in range(0, max(1, len(names)), size)]

    def _body(self, broker: SimBroker, spec: BrokerSpec, batch: int, topics: dict[str, object]) -> bytes:
        key = (id(spec.topics), batch)
        body = self._bodies.get(key)
        if body is None:
            full = broker.topics
            broker.topics = topics  # type: ignore[assignment]
            try:
                body = broker.body()
            finally:
                broker.topics = full
            self._bodies[key] = body
        return body

    async def register_one(self, index: int) -> int:
        """Every request of broker ``index`` (one, or its split batches in turn, as a 5.x broker
        sends them); returns the requests sent."""
        broker, spec = self.brokers[index], self.specs[index]
        if index not in self._connected:
            broker.client = await RemotingClient.connect(self.addresses[self._homes[index]])
            self._connected.add(index)
        batches = self._batches(spec)
        for n, topics in enumerate(batches):
            body = self._body(broker, spec, n, topics)
            for attempt in range(RETRIES + 1):
                started = time.perf_counter()
                reply = await broker.client.invoke(
                    RequestCode.REGISTER_BROKER, broker.header(body), body, timeout=REGISTER_TIMEOUT_S
                )
                self.latencies.append(time.perf_counter() - started)
                if reply.code not in RETRIED or attempt == RETRIES:
                    break
                # Redis answering late (a starved machine) or the worker shedding load: a broker
                # tries again (at its next period; sooner here, and counted)
                self.retries += 1
                await asyncio.sleep(RETRY_WAIT_S)
            if reply.code != 0:
                raise RuntimeError(
                    f"REGISTER_BROKER of {spec.name}/{spec.broker_id}: {reply.code} {reply.remark}"
                )
        return len(batches)

    def encode_all(self) -> None:
        """Encode every body before a clock starts (the bench's encoder is not the server's time)."""
        for broker, spec in zip(self.brokers, self.specs, strict=True):
            for n, topics in enumerate(self._batches(spec)):
                self._body(broker, spec, n, topics)

    async def register_all(self, concurrency: int) -> int:
        """Every broker registers; at most ``concurrency`` at once. Returns the requests sent."""
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> int:
            async with gate:
                return await self.register_one(i)

        return sum(await asyncio.gather(*(one(i) for i in range(len(self.brokers)))))

    async def cycle(self, seconds: float) -> tuple[int, list[str]]:
        """One re-registration cycle: every broker once (unchanged DataVersion, as every 30 s),
        started evenly over ``seconds``. Returns the requests sent and the brokers' failures (a
        broker that fails tries again at its next period, as a real one does)."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        step = seconds / max(1, len(self.brokers))
        tasks = []
        for i in range(len(self.brokers)):
            await asyncio.sleep(max(0.0, start + i * step - loop.time()))
            tasks.append(asyncio.create_task(self.register_one(i)))
        done = await asyncio.gather(*tasks, return_exceptions=True)
        failed = [f"{type(d).__name__}: {d}" for d in done if isinstance(d, BaseException)]
        return sum(d for d in done if isinstance(d, int)), failed

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(KEEPALIVE_S if self.heartbeats else REREGISTER_S)
            if self.paused:
                continue
            for i, broker in enumerate(self.brokers):
                if i not in self._connected:
                    continue
                with contextlib.suppress(Exception):
                    if self.heartbeats:
                        broker.heartbeat()
                    else:
                        await self.register_one(i)

    async def close(self) -> None:
        if self._keepalive is not None:
            self._keepalive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keepalive
        for i in sorted(self._connected):
            with contextlib.suppress(Exception):
                await self.brokers[i].unregister()
            await self.brokers[i].client.aclose()
