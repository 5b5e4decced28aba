"""Watch API across two workers on one Redis: route long-poll, SSE, resume, bounds."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from namesrv.client.watch import RouteFollower, SseEvent, sse_events
from namesrv.config import Settings
from namesrv.keys import FEED, WATCH, WORKER
from namesrv.registry.watch import entry_key, to_event
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
