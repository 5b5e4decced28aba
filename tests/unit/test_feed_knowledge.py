"""What a change-feed read that did not reach the end of the log tells about this worker's
knowledge: the entries' ids carry the Redis time they were added at."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from namesrv.registry.changefeed import ChangeFeed, Waiter
from namesrv.store.health import RedisHealth
from namesrv.store.keyspace import Keyspace
from namesrv.store.script_args import FeedReply, FeedStatus
from namesrv.store.scripts import ScriptRegistry

ISSUED = 100.0  # monotonic time the read was issued


def feed() -> ChangeFeed:
    # never started: no thread and no connection, only the bookkeeping of one applied reply
    made = ChangeFeed(
        ScriptRegistry(Redis()),
        Keyspace("k"),
        health=RedisHealth(),
        poll_interval=1.0,
        timeout_s=1.0,
        stall_s=0.05,
    )
    made.instance, made.last_id = "i", "4000-0"
    made._known_at = 90.0
    return made


def full_read(now_ms: int, last_entry: str = "6000-3") -> FeedReply:
    entries = [("5000-0", ["kind", "heartbeat"]), (last_entry, ["kind", "heartbeat"])]
    return FeedReply("i", FeedStatus.ENTRIES, "4000-0", entries, more=True, now_ms=now_ms)


def waiter(asked_at: float) -> Waiter:
    return Waiter(asked_at, asyncio.get_running_loop().create_future())


async def test_a_full_read_moves_knowledge_to_its_last_entry_and_answers_the_waiters_it_covers() -> None:
    changes = feed()
    covered, later = waiter(99.8), waiter(99.95)
    assert await changes._apply_on_loop(full_read(now_ms=6100), ISSUED, [covered, later]) is True
    # 100 ms (and 1 ms for whole ms) behind Redis' clock when the read ran
    assert changes.known_at == pytest.approx(ISSUED - 0.101)
    assert covered.done.result() is True
    assert not later.done.done() and changes._wanted == [later]  # waits for the next read
    assert changes.last_id == "6000-3"


@pytest.mark.parametrize(
    ("now_ms", "last_entry"),
    [
        (5999, "6000-3"),  # Redis' clock went back: the entry looks newer than the read
        (6100, "x-1"),  # not a stream id
        (0, "6000-3"),  # no clock in the reply
    ],
)
async def test_a_full_read_that_cannot_tell_its_time_claims_nothing(now_ms: int, last_entry: str) -> None:
    changes = feed()
    asked = waiter(10.0)
    assert await changes._apply_on_loop(full_read(now_ms, last_entry), ISSUED, [asked]) is True
    assert changes.known_at == 90.0
    assert not asked.done.done() and changes._wanted == [asked]


async def test_knowledge_never_moves_back() -> None:
    changes = feed()
    changes._known_at = 99.99  # a later read already knew more
    await changes._apply_on_loop(full_read(now_ms=6100), ISSUED, [])
    assert changes.known_at == 99.99
