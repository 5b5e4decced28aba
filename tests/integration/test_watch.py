"""Watch API across two workers on one Redis: route long-poll, SSE, resume, bounds."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from namesrv.client.watch import RouteFollower, SseEvent, sse_events
from namesrv.config import Settings
from namesrv.domain.codes import Version
from namesrv.domain.model import TopicConfig
from namesrv.keys import FEED, REMOTING, WATCH, WORKER
from namesrv.registry import console_facts
from namesrv.registry.watch import to_event
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from namesrv.store.changelog import entry_key
from namesrv.store.keyspace import Keyspace
from tests.builders import register_json
from tests.conftest import close_client, start_client
from tests.polling import eventually, scaled

Client = TestClient[Any, Any]


async def put_broker(client: Client, name: str, queues: int) -> None:
    """Register ``name`` with ``queues`` queues of T1 (and T2, which does not change: Java refuses
    a first registration of exactly one topic)."""
    topics = {"T1": (queues, queues, 6, 0), "T2": (1, 1, 6, 0)}
    body = register_json("C1", name, "10.0.0.1:10911", 0, topics, counter=queues)
    resp = await client.post("/v1/brokers/register", json=body)
    assert resp.status == 200, await resp.text()


async def watched_log(redis: Redis, namespace: str, after: str = "-") -> list[tuple[str, str]]:
    """(id, kind) of every change-log entry a watcher is told about, oldest first."""
    entries = await redis.xrange(Keyspace(namespace).events, min=after if after == "-" else f"({after}")
    out = []
    for entry_id, fields in entries:
        event = to_event(entry_id, fields.get("kind", ""), fields)
        if event is not None:
            out.append((entry_id, event.kind))
    return out


async def next_events(events: AsyncIterator[SseEvent], count: int) -> list[SseEvent]:
    got: list[SseEvent] = []

    async def take() -> None:
        async for event in events:
            got.append(event)
            if len(got) == count:
                return

    await asyncio.wait_for(take(), scaled(10))
    return got


async def test_route_etag_and_long_poll_across_workers(pair: tuple[Client, Client]) -> None:
    a, b = pair
    await put_broker(a, "b1", 4)
    resp = await b.get("/v1/routes/T1")
    assert resp.status == 200
    first = resp.headers["ETag"]
    assert (await b.get("/v1/routes/T1")).headers["ETag"] == first  # same route, same version
    assert (await a.get("/v1/routes/T1")).headers["ETag"] == first  # on every worker

    # A version the client does not hold: answered at once with the current one.
    resp = await asyncio.wait_for(b.get("/v1/routes/T1", params={"watch": '"old"', "wait": "60"}), scaled(10))
    assert resp.headers["ETag"] == first

    # The current version: blocks until a write on the other worker changes the route.
    poll = asyncio.create_task(b.get("/v1/routes/T1", params={"watch": first, "wait": "60"}))
    await asyncio.sleep(0.2)
    assert not poll.done()
    await put_broker(a, "b1", 8)
    resp = await asyncio.wait_for(poll, scaled(10))
    assert resp.status == 200
    assert resp.headers["ETag"] != first
    body = await resp.json()
    assert [q["readQueueNums"] for q in body["queueDatas"]] == [8]

    # wait=0 with the current version answers the same version.
    resp = await b.get("/v1/routes/T1", params={"watch": resp.headers["ETag"], "wait": "0"})
    assert resp.headers["ETag"] != first
    bad = await b.get("/v1/routes/T1", params={"watch": first, "wait": "61"})
    assert bad.status == 400
    assert (await bad.json())["remark"] == "wait must be between 0 and 60 seconds"


async def test_sse_names_topics_and_brokers_with_change_log_ids(
    pair: tuple[Client, Client], redis: Redis, namespace: str
) -> None:
    a, b = pair
    async with b.get("/v1/watch", params={"topics": "T1"}) as stream:
        assert stream.status == 200
        assert stream.headers["Content-Type"] == "text/event-stream"
        events = sse_events(stream)
        await put_broker(a, "b1", 4)
        got = await next_events(events, 2)
        assert [(e.event, sorted(e.json()["topics"]), e.json()["brokers"]) for e in got] == [
            ("register", [], ["b1"]),
            ("registerQueues", ["T1", "T2"], ["b1"]),
        ]
        assert got[0].json()["state"] == "up"
        assert [(e.id, e.event) for e in got] == await watched_log(redis, namespace)
        resp = await a.post("/v1/brokers/b1/wipe-write-perm")
        assert resp.status == 200
        (wiped,) = await next_events(events, 1)
        assert (wiped.event, sorted(wiped.json()["topics"]), wiped.json()["brokers"]) == (
            "wipePerm",
            ["T1", "T2"],
            ["b1"],
        )


async def test_resume_on_another_worker_without_loss_or_duplicates(
    pair: tuple[Client, Client], redis: Redis, namespace: str
) -> None:
    a, b = pair
    async with aiohttp.ClientSession() as session:
        follower = RouteFollower(session, str(b.make_url("")), "T1")
        await put_broker(a, "b1", 1)
        (*_, (start, _)) = await watched_log(redis, namespace)
        # b has applied the first registration: the stream starts after it
        await eventually(
            lambda: entry_key(b.app[FEED].last_id or "0-0") >= entry_key(start), what="b applied it"
        )
        runner = asyncio.create_task(follower.run_once())
        await eventually(lambda: follower.route is not None, what="first route read")
        for n in (2, 3):
            await put_broker(a, "b1", n)
        await eventually(lambda: len(follower.seen) == 4, what="four events")
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        # Changes while disconnected; then resume on the other worker.
        for n in (4, 5):
            await put_broker(a, "b1", n)
        follower.base_url = str(a.make_url("")).rstrip("/")
        runner = asyncio.create_task(follower.run_once())
        await eventually(lambda: len(follower.seen) == 8, what=f"eight events: {follower.seen}")
        log = await watched_log(redis, namespace, after=start)
        assert len(log) == 8
        assert [(e.id, e.event) for e in follower.seen] == log
        assert len({e.id for e in follower.seen}) == 8
        assert follower.route is not None
        assert [q["readQueueNums"] for q in follower.route["queueDatas"]] == [5]
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_too_old_event_id_gets_resync(pair: tuple[Client, Client]) -> None:
    a, b = pair
    await put_broker(a, "b1", 1)
    await eventually(lambda: b.app[WATCH]._complete_after is not None, what="b saw the change log")
    async with b.get("/v1/watch", headers={"Last-Event-ID": "1-0"}) as stream:
        (event,) = await next_events(sse_events(stream), 1)
        assert (event.id, event.event, event.json()["reason"]) == (
            "",
            "resync",
            "event 1-0 is too old to resume from",
        )
    bad = await b.get("/v1/watch", headers={"Last-Event-ID": "nope"})
    assert bad.status == 400


async def test_watcher_limit_and_slow_consumer(settings: Settings) -> None:
    client = await start_client(dataclasses.replace(settings, watchMaxWatchers=1))
    try:
        async with client.get("/v1/watch") as first:
            assert first.status == 200
            await eventually(lambda: client.app[WATCH].watching == 1, what="one watcher")
            second = await client.get("/v1/watch")
            assert second.status == 503
            assert (await second.json())["remark"] == (
                "this worker serves 1 watchers already (watchMaxWatchers)"
            )
        await eventually(lambda: client.app[WATCH].watching == 0, what="the watcher left")
    finally:
        await close_client(client)


async def test_console_page_and_overview(pair: tuple[Client, Client]) -> None:
    a, b = pair
    await put_broker(a, "b1", 2)
    page = await b.get("/ui")
    assert page.status == 200
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "<title>namesrv console</title>" in await page.text()
    script = await b.get("/ui/console.js")
    assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert (await b.get("/ui/secret.txt")).status == 404
    overview = await (await b.get("/v1/console/overview")).json()
    assert overview["redis"] == {"reachable": True, "reason": ""}
    assert overview["cluster"]["clusterAddrTable"] == {"C1": ["b1"]}
    assert overview["cluster"]["brokerAddrTable"]["b1"]["brokerAddrs"] == {"0": "10.0.0.1:10911"}
    assert overview["topics"] == 2
    assert overview["kvNamespaces"] == {}
    assert overview["workersSeen"] == 2
    (live,) = overview["liveness"]
    assert {k: live[k] for k in ("member", "brokerName", "brokerId", "timeoutMillis", "via")} == {
        "member": "C1/10.0.0.1:10911",
        "brokerName": "b1",
        "brokerId": 0,
        "timeoutMillis": 120000,
        "via": a.app[WORKER].worker_id,
    }
    assert 0 <= live["heartbeatAgeMillis"] <= 120000
    assert live["heartbeatAgeMillis"] + live["expiresInMillis"] == 120000
    # registered over HTTP: no version; both its topics writable; b served no route lookup yet
    assert "version" not in live and "versionName" not in live
    assert overview["brokerPerms"] == {"b1": {"perm": "rw", "topics": 2, "checked": 2, "writable": 2}}
    assert overview["routeCache"] == {"enabled": True, "hits": 0, "misses": 0, "hitRatio": None}
    assert overview["reportUrl"] == ""


async def test_console_shows_version_write_perm_queue_counts_and_cache_ratio(settings: Settings) -> None:
    # a long staleness bound: every lookup is answered by memory (a hit or a miss, never a bypass)
    worker = await start_client(
        dataclasses.replace(
            settings,
            routeCacheStalenessMillis=60000,
            consoleReportUrl="https://reports.example/route-history/",
        )
    )
    conn = await RemotingClient.connect(f"127.0.0.1:{worker.app[REMOTING].port}", version=Version.V4_9_8)
    try:
        topics = topic_configs(["OrderEvents", "PaymentEvents"], queues=4)
        topics["AuditLog"] = TopicConfig("AuditLog", 2, 1, 6)
        # (the default broker timeout: with 1 s, a busy machine expired both before the lookups)
        await SimBroker(conn, "C1", "broker-a", "127.0.0.7:10911", topics=topics).register()
        await SimBroker(
            conn,
            "C1",
            "broker-b",
            "127.0.0.8:10911",
            topics=topic_configs(["OrderEvents", "Other"]),
        ).register()
        wiped = await worker.post("/v1/brokers/broker-a/wipe-write-perm")
        assert await wiped.json() == {"code": 0, "wipeTopicCount": 3}
        for _ in range(4):  # one miss, then three hits
            assert (await worker.get("/v1/routes/OrderEvents")).status == 200

        overview = await (await worker.get("/v1/console/overview")).json()
        versions = {row["brokerName"]: (row["version"], row["versionName"]) for row in overview["liveness"]}
        assert versions == {"broker-a": (409, "V4_9_8"), "broker-b": (409, "V4_9_8")}
        assert overview["brokerPerms"] == {
            "broker-a": {"perm": "read-only", "topics": 3, "checked": 3, "writable": 0},
            "broker-b": {"perm": "rw", "topics": 2, "checked": 2, "writable": 2},
        }
        assert overview["routeCache"] == {"enabled": True, "hits": 3, "misses": 1, "hitRatio": 0.75}
        assert overview["reportUrl"] == "https://reports.example/route-history/"

        listed = await (await worker.get("/v1/console/topics")).json()
        assert listed == {
            "total": 4,
            "matched": 4,
            "topics": [
                {"topic": "AuditLog", "readQueueNums": 2, "writeQueueNums": 1, "brokers": 1},
                {"topic": "OrderEvents", "readQueueNums": 12, "writeQueueNums": 12, "brokers": 2},
                {"topic": "Other", "readQueueNums": 8, "writeQueueNums": 8, "brokers": 1},
                {"topic": "PaymentEvents", "readQueueNums": 4, "writeQueueNums": 4, "brokers": 1},
            ],
        }
        filtered = await (
            await worker.get("/v1/console/topics", params={"filter": "EVENTS", "limit": "1"})
        ).json()
        assert filtered == {
            "total": 4,
            "matched": 2,
            "topics": [{"topic": "OrderEvents", "readQueueNums": 12, "writeQueueNums": 12, "brokers": 2}],
        }

        await worker.post("/v1/brokers/broker-a/add-write-perm")
        overview = await (await worker.get("/v1/console/overview")).json()
        assert overview["brokerPerms"]["broker-a"] == {"perm": "rw", "topics": 3, "checked": 3, "writable": 3}
    finally:
        await conn.aclose()
        await close_client(worker)


async def test_console_topics_refuses_bad_bounds(client: Client) -> None:
    for params, remark in [
        ({"limit": "0"}, "limit must be between 1 and 500"),
        ({"limit": "501"}, "limit must be between 1 and 500"),
        ({"limit": "ten"}, "limit must be an integer, got 'ten'"),
        ({"filter": "x" * 256}, "filter must be at most 255 characters"),
    ]:
        resp = await client.get("/v1/console/topics", params=params)
        assert resp.status == 400
        assert (await resp.json())["remark"] == remark


async def test_write_perm_reads_a_bounded_number_of_queues(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console_facts, "MAX_PERM_CHECKS", 3)
    topics = {f"T{i}": (4, 4, 6, 0) for i in range(5)}
    resp = await client.post(
        "/v1/brokers/register", json=register_json("C1", "b1", "10.0.0.1:10911", 0, topics)
    )
    assert resp.status == 200, await resp.text()
    overview = await (await client.get("/v1/console/overview")).json()
    assert overview["brokerPerms"] == {"b1": {"perm": "rw", "topics": 5, "checked": 3, "writable": 3}}


async def test_console_topics_pages_thousands_of_topics(client: Client) -> None:
    topics = {f"Topic{i:04d}": (i % 7 + 1, i % 5 + 1, 6, 0) for i in range(3000)}
    resp = await client.post(
        "/v1/brokers/register", json=register_json("C1", "b1", "10.0.0.1:10911", 0, topics)
    )
    assert resp.status == 200, await resp.text()
    listed = await (await client.get("/v1/console/topics")).json()
    assert (listed["total"], listed["matched"], len(listed["topics"])) == (3000, 3000, 500)
    assert listed["topics"][:2] == [
        {"topic": "Topic0000", "readQueueNums": 1, "writeQueueNums": 1, "brokers": 1},
        {"topic": "Topic0001", "readQueueNums": 2, "writeQueueNums": 2, "brokers": 1},
    ]
    assert listed["topics"][-1] == {
        "topic": "Topic0499",
        "readQueueNums": 3,
        "writeQueueNums": 5,
        "brokers": 1,
    }
    narrowed = await (await client.get("/v1/console/topics", params={"filter": "topic29"})).json()
    assert (narrowed["total"], narrowed["matched"]) == (3000, 100)
    assert [t["topic"] for t in narrowed["topics"]] == [f"Topic{i}" for i in range(2900, 3000)]
