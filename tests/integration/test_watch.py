"""Watching routes across two workers on one Redis (#30): a write through one worker reaches a
long-poll and an SSE stream on the other; a stream resumed with Last-Event-ID gets exactly what
it missed; the bounds answer clearly."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from namesrv.client.watch import RouteFollower, changes
from namesrv.config import Settings
from tests.builders import register_json
from tests.conftest import close_client, start_client
from tests.polling import eventually


@pytest.fixture
async def pair(settings: Settings) -> AsyncIterator[list[Any]]:
    a = await start_client(settings)
    b = await start_client(dataclasses.replace(settings, watchMaxWatchers=3))
    yield [a, b]
    await close_client(a)
    await close_client(b)


def base(client: Any) -> str:
    return str(client.make_url("/")).rstrip("/")


async def register(client: Any, counter: int, topics: dict[str, Any], name: str = "broker-a") -> None:
    topics = {"TBW102": (8, 8, 7, 0), **topics}  # a first registration of exactly one topic is refused (R7)
    resp = await client.post(
        "/v1/brokers/register", json=register_json(name=name, topics=topics, counter=counter)
    )
    assert resp.status == 200, await resp.text()


async def test_a_route_has_an_etag_that_changes_with_it(pair: list[Any]) -> None:
    a, b = pair
    missing = await b.get("/v1/routes/W1")
    assert missing.status == 404 and "ETag" not in missing.headers  # its version: '"absent"'
    await register(a, 1, {"W1": (8, 8, 6, 0)})

    async def present() -> bool:  # B's "no such topic" is dropped once its feed sees the change
        return (await b.get("/v1/routes/W1")).status == 200

    await eventually(present)
    first = await b.get("/v1/routes/W1")
    etag = first.headers["ETag"]
    assert first.status == 200 and etag.startswith('"') and etag != '"absent"'
    assert (await b.get("/v1/routes/W1", headers={"If-None-Match": etag})).status == 304
    await register(a, 2, {"W1": (4, 4, 6, 0)})

    async def changed() -> bool:
        return (await b.get("/v1/routes/W1")).headers["ETag"] != etag

    await eventually(changed)


async def test_a_long_poll_returns_when_another_worker_changes_the_route(pair: list[Any]) -> None:
    a, b = pair
    await register(a, 1, {"W2": (8, 8, 6, 0)})
    async with aiohttp.ClientSession() as http:
        follower = RouteFollower(http, base(b), "W2")
        route = await follower.refresh()
        assert route is not None and route["queueDatas"][0]["readQueueNums"] == 8
        assert await follower.next(wait=0.2) is False  # nothing changed: 304 after the wait
        polling = asyncio.create_task(follower.next(wait=30))
        await asyncio.sleep(0.2)
        assert not polling.done()
        await register(a, 2, {"W2": (2, 2, 6, 0)})
        assert await asyncio.wait_for(polling, 30) is True
        assert follower.route is not None and follower.route["queueDatas"][0]["readQueueNums"] == 2


async def test_a_long_poll_on_a_missing_topic_returns_when_it_appears(pair: list[Any]) -> None:
    a, b = pair
    async with aiohttp.ClientSession() as http:
        follower = RouteFollower(http, base(b), "W3")
        assert await follower.refresh() is None and follower.etag == '"absent"'
        polling = asyncio.create_task(follower.next(wait=30))
        await asyncio.sleep(0.2)
        await register(a, 1, {"W3": (8, 8, 6, 0)})
        assert await asyncio.wait_for(polling, 30) is True
        assert follower.route is not None and follower.route["brokerDatas"][0]["brokerName"] == "broker-a"


async def _take(stream: AsyncIterator[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    return [await asyncio.wait_for(anext(stream), 30) for _ in range(n)]


async def test_sse_streams_changes_and_resumes_without_loss_or_repeats(pair: list[Any]) -> None:
    a, b = pair
    async with aiohttp.ClientSession() as http:
        stream = changes(http, base(b), topics=["S1"])
        first = asyncio.create_task(_take(stream, 1))
        await asyncio.sleep(0.3)  # the stream is open before the write
        await register(a, 1, {"S1": (8, 8, 6, 0)})
        [seen] = await first
        assert seen["kind"] == "registerQueues" and sorted(seen["topics"]) == ["S1", "TBW102"]
        assert seen["brokers"] == ["broker-a"]
        await stream.aclose()  # the client goes away ...
        await register(a, 2, {"S1": (4, 4, 6, 0)})  # ... misses two changes of S1 ...
        await register(a, 3, {"S1": (4, 4, 6, 0), "S2": (8, 8, 6, 0)})  # changes S2 only: not for us
        await register(a, 4, {"S1": (2, 2, 6, 0)})
        resumed = changes(http, base(b), topics=["S1"], last_event_id=seen["id"])
        missed = await _take(resumed, 2)
        await resumed.aclose()
    assert [(c["kind"], c["topics"]) for c in missed] == [("registerQueues", ["S1"])] * 2
    ids = [c["id"] for c in missed]
    assert len(set(ids)) == 2 and seen["id"] not in ids  # nothing repeated
    assert ids == sorted(ids, key=lambda i: tuple(int(x) for x in i.split("-")))


async def test_a_resume_from_an_id_the_log_no_longer_holds_says_resync(pair: list[Any]) -> None:
    a, b = pair
    await register(a, 1, {"R1": (8, 8, 6, 0)})
    async with aiohttp.ClientSession() as http:
        stream = changes(http, base(b), topics=["R1"], last_event_id="1-0")
        [first] = await _take(stream, 1)
        await stream.aclose()
    assert first["kind"] == "resync" and first["detail"]["reason"] == "the log no longer holds that ID"


async def test_watch_bounds_answer_clearly(pair: list[Any]) -> None:
    _, b = pair
    bad = await b.get("/v1/watch", params={"topics": ",".join(f"t{i}" for i in range(101))})
    assert bad.status == 400 and "at most 100" in (await bad.json())["remark"]
    bad_id = await b.get("/v1/watch", headers={"Last-Event-ID": "not-an-id"})
    assert bad_id.status == 400
    bad_wait = await b.get("/v1/routes/X", params={"watch": '"absent"', "wait": "soon"})
    assert bad_wait.status == 400 and "wait must be" in (await bad_wait.json())["remark"]
    opened = [await b.get("/v1/watch") for _ in range(3)]  # watchMaxWatchers = 3 on this worker
    try:
        for resp in opened:
            assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
        refused = await b.get("/v1/watch")
        assert refused.status == 503 and "too many watchers" in (await refused.json())["remark"]
    finally:
        for resp in opened:
            resp.close()
