"""The truth check: the real service (Lua scripts on a real Redis) → export → pipeline.

Brokers are driven through :class:`ServiceDriver`; when the broker simulator lands, a driver
with the same methods that speaks to the service over the wire replaces it (one line in the
``driver`` fixture). Route lookups are recorded with the Redis server time around them, and
the pipeline's ``--as-of`` reconstruction must equal every one of them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis as sync_redis
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from redis.asyncio import Redis

from namesrv.domain.model import TopicRouteData
from namesrv.events.export import Exporter
from namesrv.pipeline import io
from namesrv.pipeline import schemas as S
from namesrv.pipeline.job import PipelineConfig, run
from namesrv.registry.service import RegistryService
from namesrv.store.keyspace import Keyspace
from tests.builders import register

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow, pytest.mark.timeout(300)]
CLUSTER = "DefaultCluster"
A, B = "127.0.0.1:10911", "127.0.0.2:10911"
TOPICS = ("TopicA", "TopicB", "TopicShared")
RouteSet = frozenset[tuple[object, ...]]


def route_set(route: TopicRouteData | None) -> RouteSet:
    """A route as comparable facts: one per queue, with its broker's visible addresses."""
    if route is None:
        return frozenset()
    brokers = {b.brokerName: b for b in route.brokerDatas}
    return frozenset(
        (
            q.brokerName,
            brokers[q.brokerName].cluster,
            tuple(sorted(brokers[q.brokerName].brokerAddrs.items())),
            q.perm,
            q.readQueueNums,
            q.writeQueueNums,
            q.topicSysFlag,
        )
        for q in route.queueDatas
    )


@dataclass
class Lookup:
    at_ms: int  # Redis server time between two reads that returned this route
    before_ms: int
    topic: str
    route: RouteSet


@dataclass
class ServiceDriver:
    """Drives brokers and admin actions through the service's use-cases (RegistryService)."""

    service: RegistryService
    redis: Redis
    lookups: list[Lookup] = field(default_factory=list)
    epochs: dict[str, int] = field(default_factory=dict)

    async def now_ms(self) -> int:
        seconds, micros = await self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    async def register(self, name: str, addr: str, topics: list[str], timeout_ms: int | None = None) -> None:
        request = register(CLUSTER, name, addr, 0, topics, timeout=timeout_ms)
        _, reg = await self.service.register_broker(request)
        assert reg is not None
        self.epochs[addr] = reg.epoch

    async def heartbeat(self, addr: str) -> None:
        assert await self.service.heartbeat(CLUSTER, addr)

    async def sweep(self) -> int:
        return await self.service.sweep()

    async def wipe(self, name: str, wipe: bool = True) -> None:
        await self.service.change_write_perm(name, wipe=wipe)

    async def unregister(self, name: str, addr: str) -> None:
        assert await self.service.unregister_broker(CLUSTER, addr, name, 0)

    async def stale_close(self, name: str, addr: str, epoch: int) -> None:
        assert not await self.service.unregister_broker(
            CLUSTER, addr, name, 0, fence_epoch=epoch, reason="close"
        )

    async def look(self) -> None:
        """Record every topic's route as of one server instant: each --as-of instant is a plan of
        its own in the pipeline, so one instant per look keeps the Spark tier's cost down. The
        routes are read before and after that instant; nothing writes meanwhile and time only
        hides brokers (a deadline passing), so when both reads agree, that is the route at the
        instant; else the look is taken again. Times have millisecond resolution, like event
        times, so keep other events out of the lookups' milliseconds."""
        await asyncio.sleep(0.003)
        while True:
            before = await self.now_ms()
            first = [route_set(await self.service.route(topic)) for topic in TOPICS]
            instant = await self.now_ms()
            second = [route_set(await self.service.route(topic)) for topic in TOPICS]
            if first == second:
                break
        self.lookups.extend(Lookup(instant, before, t, r) for t, r in zip(TOPICS, first, strict=True))
        await asyncio.sleep(0.003)


@pytest.fixture
def driver(service: RegistryService, redis: Redis) -> ServiceDriver:
    return ServiceDriver(service, redis)


async def test_export_pipeline_and_as_of_match_the_live_service(
    driver: ServiceDriver, spark: SparkSession, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    d = driver
    await d.register("broker-a", A, ["TopicA", "TopicShared"], timeout_ms=1000)  # expires below
    await d.register("broker-b", B, ["TopicB", "TopicShared"], timeout_ms=60_000)
    await d.look()
    await d.heartbeat(A)
    await d.wipe("broker-b")
    await d.look()
    await asyncio.sleep(1.3)  # broker-a passes its deadline: lookups hide it before any sweep
    await d.look()
    assert await d.sweep() == 1
    await d.look()
    await d.wipe("broker-b", wipe=False)
    await d.register("broker-a", A, ["TopicA", "TopicShared"], timeout_ms=60_000)
    await d.look()
    old_epoch = d.epochs[B]
    await d.unregister("broker-b", B)
    await d.look()
    await d.register("broker-b", B, ["TopicB", "TopicShared"], timeout_ms=60_000)
    await d.stale_close("broker-b", B, old_epoch)
    await d.look()

    export = tmp_path / "export"
    client = sync_redis.Redis.from_url(redis_url)
    try:
        result = Exporter(client, Keyspace(namespace).events, export, batch=7).run()
        assert result.exported > 0 and not result.gap_found
        assert Exporter(client, Keyspace(namespace).events, export).run().exported == 0
    finally:
        client.close()

    instants = tuple(sorted({lk.at_ms for lk in d.lookups}))
    cfg = PipelineConfig(inputs=(str(export),), output=str(tmp_path / "tables"), as_of_ms=instants)
    summary = run(spark, cfg)
    assert summary.events == result.exported and summary.rejected == 0

    # --as-of equals every recorded lookup
    routes = io.read_table(spark, cfg.output, "route_as_of", S.ROUTE_AS_OF).collect()
    rebuilt: dict[tuple[int, str], set[tuple[object, ...]]] = {}
    for r in routes:
        if r["broker_name"] == "":  # a topic without a route: the lookup returned nothing
            rebuilt.setdefault((r["as_of_ts"], r["topic"]), set())
            continue
        rebuilt.setdefault((r["as_of_ts"], r["topic"]), set()).add(
            (
                r["broker_name"],
                r["cluster"],
                tuple(sorted(r["broker_addrs"].items())),
                r["perm"],
                r["read_queue_nums"],
                r["write_queue_nums"],
                r["topic_sys_flag"],
            )
        )
    assert any(lk.route == frozenset() for lk in d.lookups)  # hidden and expired states were seen
    for lk in d.lookups:
        assert frozenset(rebuilt.get((lk.at_ms, lk.topic), set())) == lk.route, (lk.topic, lk.at_ms)

    # the numbers
    events = io.read_table(spark, cfg.output, "events", S.EVENTS)
    kinds = {r["kind"]: r["count"] for r in events.groupBy("kind").count().collect()}
    assert kinds == kinds | {"expire": 1, "unregister": 1, "fenced": 1, "wipePerm": 1, "addPerm": 1}
    sessions = (
        io.read_table(spark, cfg.output, "sessions", S.SESSIONS)
        .orderBy("broker_addr", "session_no")
        .collect()
    )
    assert [(s["broker_addr"], s["end_kind"]) for s in sessions] == [
        (A, "expire"),
        (A, "open"),
        (B, "unregister"),
        (B, "open"),
    ]
    expire = events.filter(F.col("kind") == "expire").collect()[0]
    assert sessions[0]["end_ts"] == expire["deadline"] < expire["ts"]  # ended at its deadline, swept later
    assert sessions[0]["end_ts"] == sessions[0]["last_deadline"]
    daily = io.read_table(spark, cfg.output, "broker_daily", S.BROKER_DAILY)
    totals = daily.groupBy("broker_addr").agg(
        *[F.sum(c).alias(c) for c in ("expiries", "unregisters", "fenced")]
    )
    assert {r["broker_addr"]: (r["expiries"], r["unregisters"], r["fenced"]) for r in totals.collect()} == {
        A: (1, 0, 0),
        B: (0, 1, 1),
    }
    unwritable = io.read_table(spark, cfg.output, "topic_unwritable", S.TOPIC_UNWRITABLE)
    causes = {(r["topic"], r["cause"]) for r in unwritable.collect()}
    assert ("TopicB", "no_writable_queue") in causes  # broker-b's write permission wiped
    # broker-a past its deadline (no live master), then swept with its queues: TopicA had no
    # route until broker-a registered again, one interval named by its worst state
    assert ("TopicA", "no_route") in causes
    assert ("TopicB", "no_route") in causes  # broker-b unregistered, then registered again
    gaps = io.read_table(spark, cfg.output, "heartbeat_gaps", S.HEARTBEAT_GAPS).collect()
    assert {r["broker_addr"] for r in gaps} == {A, B}
