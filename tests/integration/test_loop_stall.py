"""A worker whose own event loop is held up (a long GC pause, a burst of work) is busy, not cut
off: the change feed polls Redis on its own thread, so it neither declares Redis unreachable nor
lets what the worker knows of the change log go stale because the loop was late (#26)."""

from __future__ import annotations

import dataclasses
import time

from namesrv.config import Settings
from namesrv.keys import FEED, HEALTH
from tests.conftest import REDIS_DEADLINE_MS, close_client, start_client
from tests.polling import eventually

STALL_S = 2.5  # well past redisTimeoutMillis (1 s): a poll timed on the loop would have failed


async def test_a_stalled_loop_neither_marks_redis_down_nor_goes_stale(settings: Settings) -> None:
    client = await start_client(dataclasses.replace(settings, redisTimeoutMillis=REDIS_DEADLINE_MS))
    try:
        app = client.app
        health, feed = app[HEALTH], app[FEED]

        async def polled() -> bool:
            return feed.known_at is not None

        await eventually(polled)
        outages, reason = health.outages, health.reason
        blocked_at = time.monotonic()
        time.sleep(STALL_S)  # noqa: ASYNC251 - the point: the worker's loop does nothing meanwhile
        known = feed.known_at
        assert known is not None and known > blocked_at + STALL_S / 2, (known, blocked_at)
        assert health.reachable is True
        assert health.outages == outages and health.reason == reason == ""
    finally:
        await close_client(client)
