"""The change feed on a real Redis stream: catching up on demand, and resynchronising only when
entries may have been lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping

import pytest
from redis.asyncio import Redis

from namesrv.changefeed import ChangeFeed


class Recorder:
    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.resyncs = 0

    async def on_change(self, kind: str, fields: Mapping[str, str]) -> None:
        self.kinds.append(kind)

    async def resync(self) -> None:
        self.resyncs += 1


@pytest.fixture
def stream(namespace: str) -> str:
    return "{" + namespace + "}:events"


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


async def start_feed(
    redis: Redis, stream: str, recorder: Recorder, *, poll_interval: float, verify_seconds: float = 30.0
) -> ChangeFeed:
    feed = ChangeFeed(redis, stream, poll_interval=poll_interval, verify_seconds=verify_seconds)
    feed.subscribe(recorder.on_change, recorder.resync)
    await feed.start()
    return feed


@pytest.fixture
async def slow_poll_feed(redis: Redis, stream: str, recorder: Recorder) -> AsyncIterator[ChangeFeed]:
    """Polls once a minute: anything read sooner was read because someone asked."""
    await redis.xadd(stream, {"kind": "before"})
    feed = await start_feed(redis, stream, recorder, poll_interval=60.0)
    await asyncio.sleep(0.05)  # the first poll
    yield feed
    await feed.stop()


async def test_wait_fresh_reads_at_once_what_was_committed_before_it(
    redis: Redis, stream: str, recorder: Recorder, slow_poll_feed: ChangeFeed
) -> None:
    await redis.xadd(stream, {"kind": "register"})
    await redis.xadd(stream, {"kind": "expire"})
    results = await asyncio.gather(*(slow_poll_feed.wait_fresh(5.0) for _ in range(10)))
    assert results == [True] * 10
    assert recorder.kinds == ["register", "expire"]


async def test_wait_fresh_is_false_when_the_feed_is_stopped(
    redis: Redis, stream: str, recorder: Recorder
) -> None:
    feed = await start_feed(redis, stream, recorder, poll_interval=60.0)
    await feed.stop()
    assert await feed.wait_fresh(1.0) is False


async def test_a_feed_that_kept_up_never_resynchronises(
    redis: Redis, stream: str, recorder: Recorder
) -> None:
    await redis.xadd(stream, {"kind": "register"})
    feed = await start_feed(redis, stream, recorder, poll_interval=0.01, verify_seconds=0.05)
    try:
        for _ in range(5):
            await redis.xadd(stream, {"kind": "heartbeat"})
            await asyncio.sleep(0.06)
        assert recorder.resyncs == 0
        assert recorder.kinds == ["heartbeat"] * 5
    finally:
        await feed.stop()


async def test_a_lost_stream_is_noticed_and_resynchronised_once(
    redis: Redis, stream: str, recorder: Recorder
) -> None:
    await redis.xadd(stream, {"kind": "register"})
    feed = await start_feed(redis, stream, recorder, poll_interval=0.01, verify_seconds=0.05)
    try:
        await redis.xadd(stream, {"kind": "heartbeat"})
        assert await feed.wait_fresh(5.0)
        # As after FLUSHALL, or a failover to a replica that never got the entries read here.
        await redis.delete(stream)
        await asyncio.sleep(0.2)
        assert recorder.resyncs == 1
        await redis.xadd(stream, {"kind": "unregister"})
        assert await feed.wait_fresh(5.0)
        await asyncio.sleep(0.2)
        assert recorder.resyncs == 1
        assert recorder.kinds == ["heartbeat", "unregister"]
    finally:
        await feed.stop()
