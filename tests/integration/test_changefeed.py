"""The change feed on a real Redis: catching up on demand, starting over when Redis lost or
replaced its data, and telling up from down."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping

import pytest
from redis.asyncio import Redis

from namesrv.registry.changefeed import BATCH, BATCH_BYTES, ChangeFeed
from namesrv.store.health import RedisHealth
from namesrv.store.keyspace import Keyspace
from namesrv.store.registry_store import RegistryStore
from namesrv.store.script_args import FeedReply, ReadChangesArgs
from namesrv.store.script_call import CallContext
from namesrv.store.scripts import ScriptRegistry
from tests.faults.harness import redis_host_port
from tests.faults.proxy import ProxyThread
from tests.polling import eventually


class Recorder:
    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.resets: list[str] = []
        self.recovered: list[float] = []

    async def on_event(self, kind: str, fields: Mapping[str, str]) -> None:
        self.kinds.append(kind)

    async def on_reset(self, reason: str) -> None:
        self.resets.append(reason)

    def on_recovered(self, since: float) -> None:
        self.recovered.append(since)


@pytest.fixture
def keys(namespace: str) -> Keyspace:
    return Keyspace(namespace)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


async def start_feed(redis: Redis, keys: Keyspace, recorder: Recorder, *, poll_interval: float) -> ChangeFeed:
    feed = ChangeFeed(
        ScriptRegistry(redis),
        keys,
        health=RedisHealth(),
        poll_interval=poll_interval,
        timeout_s=1.0,
        stall_s=0.05,
    )
    feed.subscribe(recorder)
    await feed.start()
    for _ in range(100):  # the first poll
        if feed.known_at is not None:
            break
        await asyncio.sleep(0.01)
    assert feed.known_at is not None and feed.health.reachable
    return feed


@contextlib.asynccontextmanager
async def proxied_feed(
    redis_url: str, keys: Keyspace, recorder: Recorder, *, poll_interval: float
) -> AsyncIterator[tuple[ProxyThread, ChangeFeed]]:
    """A feed whose Redis connection goes through a proxy the test can slow, pause or heal; the
    proxy is healed before the feed stops, so a paused link never holds up the teardown."""
    host, port = redis_host_port(redis_url)
    proxy = ProxyThread(host, port)
    client = Redis.from_url(f"redis://127.0.0.1:{proxy.port}/{redis_url.rsplit('/', 1)[1]}")
    try:
        feed = await start_feed(client, keys, recorder, poll_interval=poll_interval)
        try:
            yield proxy, feed
        finally:
            proxy.heal()
            await feed.stop()
    finally:
        await client.aclose()
        proxy.close()


@pytest.fixture
async def slow_poll_feed(redis: Redis, keys: Keyspace, recorder: Recorder) -> AsyncIterator[ChangeFeed]:
    """Polls once a minute: anything read sooner was read because someone asked."""
    await redis.xadd(keys.events, {"kind": "before"})
    feed = await start_feed(redis, keys, recorder, poll_interval=60.0)
    yield feed
    await feed.stop()


async def test_wait_fresh_reads_at_once_what_was_committed_before_it(
    redis: Redis, keys: Keyspace, recorder: Recorder, slow_poll_feed: ChangeFeed
) -> None:
    await redis.xadd(keys.events, {"kind": "register"})
    await redis.xadd(keys.events, {"kind": "expire"})
    results = await asyncio.gather(*(slow_poll_feed.wait_fresh(5.0) for _ in range(10)))
    assert results == [True] * 10
    assert recorder.kinds == ["register", "expire"]  # "before" was there when the feed started


async def test_wait_fresh_is_false_when_the_feed_is_stopped(
    redis: Redis, keys: Keyspace, recorder: Recorder
) -> None:
    feed = await start_feed(redis, keys, recorder, poll_interval=60.0)
    await feed.stop()
    assert await feed.wait_fresh(1.0) is False


async def test_wait_in_flight_waits_only_for_a_poll_already_on_its_way(
    redis_url: str, keys: Keyspace, recorder: Recorder
) -> None:
    async with proxied_feed(redis_url, keys, recorder, poll_interval=60.0) as (proxy, feed):
        started = time.monotonic()
        assert await feed.wait_in_flight(5.0) is False  # resting between polls: nothing to wait for
        assert time.monotonic() - started < 2.5  # at once, not after the 5 s it was allowed
        proxy.latency(0.2)
        reading = asyncio.create_task(feed.wait_fresh(5.0))  # starts a poll, slowed by the link
        await asyncio.sleep(0.05)
        before = feed.known_at
        assert before is not None
        assert await feed.wait_in_flight(5.0) is True
        assert feed.known_at is not None and feed.known_at > before  # that poll was applied
        assert await reading is True


async def test_a_feed_that_kept_up_never_starts_over(
    redis: Redis, keys: Keyspace, recorder: Recorder
) -> None:
    await redis.xadd(keys.events, {"kind": "register"})
    feed = await start_feed(redis, keys, recorder, poll_interval=0.01)
    try:
        for _ in range(5):
            await redis.xadd(keys.events, {"kind": "heartbeat"})
            await asyncio.sleep(0.03)
        assert await feed.wait_fresh(5.0)
        assert recorder.resets == []
        assert recorder.kinds == ["heartbeat"] * 5
    finally:
        await feed.stop()


@pytest.mark.parametrize("how", ["flushed", "stream lost", "meta lost"])
async def test_lost_data_is_noticed_at_the_next_poll_and_starts_over_once(
    redis: Redis, keys: Keyspace, recorder: Recorder, how: str
) -> None:
    await redis.xadd(keys.events, {"kind": "register"})
    feed = await start_feed(redis, keys, recorder, poll_interval=0.01)
    try:
        await redis.xadd(keys.events, {"kind": "heartbeat"})
        assert await feed.wait_fresh(5.0)
        instance = feed.instance
        if how == "flushed":  # as after a restart without persistence, or FLUSHALL
            await redis.delete(keys.events, keys.meta)
        elif how == "stream lost":  # as after a failover to a replica that never got these entries
            await redis.delete(keys.events)
        else:
            await redis.delete(keys.meta)
        assert await feed.wait_fresh(5.0)
        assert len(recorder.resets) == 1
        await redis.xadd(keys.events, {"kind": "unregister"})
        assert await feed.wait_fresh(5.0)
        await asyncio.sleep(0.05)
        assert len(recorder.resets) == 1
        assert recorder.kinds == ["heartbeat", "unregister"]
        assert (feed.instance != instance) == (how != "stream lost")
    finally:
        await feed.stop()


async def test_two_feeds_on_a_new_data_set_agree_on_its_identity(redis: Redis, keys: Keyspace) -> None:
    one, two = Recorder(), Recorder()
    a = await start_feed(redis, keys, one, poll_interval=0.01)
    b = await start_feed(redis, keys, two, poll_interval=0.01)
    try:
        assert a.instance == b.instance != ""
        await redis.delete(keys.meta, keys.events)
        assert await a.wait_fresh(5.0) and await b.wait_fresh(5.0)
        assert a.instance == b.instance
        assert len(one.resets) == 1 and len(two.resets) == 1
    finally:
        await a.stop()
        await b.stop()


async def test_a_poll_stuck_while_redis_answers_other_calls_is_no_outage(
    redis: Redis, redis_url: str, keys: Keyspace, recorder: Recorder
) -> None:
    """Only the feed's connection is held up (a proxy pauses it): with nothing else answered
    since, that is a stall, and cached routes may be served; once any other call sent after it
    gets a reply from Redis, Redis is only slow (and may be committing writes memory does not show yet), so
    it is not an outage and lookups must wait for the poll."""
    async with proxied_feed(redis_url, keys, recorder, poll_interval=0.02) as (proxy, feed):
        store = RegistryStore(
            redis, keys, ScriptRegistry(redis), 1000, "w", health=feed.health, timeout_s=1.0
        )
        proxy.pause()
        await asyncio.sleep(0.3)  # the poll after the pause is outstanding well past stall_s
        assert feed.outage(time.monotonic()) is True
        assert await store.server_time_ms() > 0  # Redis answers this worker's other calls
        assert feed.outage(time.monotonic()) is False
        # ... but only until the poll's deadline: unanswered that long, it is a stall whatever
        # else was answered, so no lookup waits on it for a second deadline
        assert feed.outage(time.monotonic() + 1.0) is True
        proxy.resume()
        assert await feed.wait_fresh(2.0) is True


async def test_the_poll_thread_sleeps_between_polls(redis: Redis, keys: Keyspace, recorder: Recorder) -> None:
    """Its ticks (which tell a held-up thread from a stalled Redis) run only while a poll is out:
    every wake-up of this thread takes the GIL from the worker's loop. The kernel counts the
    thread's timeslices: five polls a second take a few each; a 10 ms tick between them would
    add about a hundred."""
    feed = await start_feed(redis, keys, recorder, poll_interval=0.2)
    try:
        thread = feed._thread
        assert thread is not None and thread.native_id is not None

        def timeslices() -> int:
            with open(f"/proc/self/task/{thread.native_id}/schedstat", encoding="ascii") as f:
                return int(f.read().split()[2])

        before = timeslices()
        await asyncio.sleep(1.0)
        ran = timeslices() - before
        assert 0 < ran < 50, ran
        assert feed._poll_ticker is None or feed._poll_issued is not None
    finally:
        await feed.stop()


async def test_a_poll_outstanding_while_the_poll_thread_was_held_up_is_no_outage_yet(
    redis_url: str, keys: Keyspace, recorder: Recorder
) -> None:
    """The poll thread kept from running (as when the machine, or Redis with it, waited for a
    CPU) while a poll was outstanding: once the thread runs again, Redis gets stall_s afresh
    before it counts as stalled, then it does (here it really is paused)."""
    async with proxied_feed(redis_url, keys, recorder, poll_interval=0.02) as (proxy, feed):
        proxy.pause()
        await eventually(lambda: feed.outage(time.monotonic()), timeout=5.0)  # a poll is stuck
        loop = feed._poll_loop
        assert loop is not None
        held_from = time.monotonic()
        loop.call_soon_threadsafe(time.sleep, 0.3)  # the thread's loop is held up 0.3 s
        # its first beat after the hold (a beat late for other reasons before it may set it too)
        await eventually(lambda: feed.poll_on_time_since >= held_from + 0.3, timeout=5.0)
        resumed = feed.poll_on_time_since
        issued = feed._poll_issued
        assert issued is not None and issued < held_from  # outstanding all along
        # just after it ran again: Redis has not had stall_s (50 ms) of the thread's time yet
        assert feed.outage(resumed + 0.01) is False
        # with the thread on time for stall_s since, the paused Redis is a stall
        await eventually(lambda: feed.outage(time.monotonic()), timeout=5.0)
        proxy.resume()
        assert await feed.wait_fresh(5.0) is True


async def test_polls_start_an_interval_apart_even_when_each_reply_comes_late(
    redis_url: str, keys: Keyspace, recorder: Recorder
) -> None:
    """A worker's knowledge is as old as the time from one poll's issue to the next one's reply.
    With replies taking longer than the poll interval (here a link adding 100 ms each way, as a
    busy event loop delays them too), the next poll goes out at once instead of after a further
    full interval: polls then start about one round trip apart (~200 ms), never round trip plus
    interval (>= 400 ms)."""
    async with proxied_feed(redis_url, keys, recorder, poll_interval=0.2) as (proxy, feed):
        proxy.latency(0.1)
        await asyncio.sleep(0.5)  # the polls under way when the latency began have ended
        issued: list[float] = []
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            known = feed.known_at
            if known is not None and (not issued or known != issued[-1]):
                issued.append(known)
            await asyncio.sleep(0.005)
        gaps = sorted(b - a for a, b in zip(issued, issued[1:], strict=False))
        assert len(gaps) >= 4, issued
        assert gaps[len(gaps) // 2] < 0.3, gaps


async def test_a_read_stops_at_its_byte_bound_and_the_feed_reads_on(
    redis: Redis, keys: Keyspace, recorder: Recorder, slow_poll_feed: ChangeFeed
) -> None:
    big = "x" * (BATCH_BYTES // 4)  # four entries reach one read's bound
    for i in range(10):
        await redis.xadd(keys.events, {"kind": f"big{i}", "upserted": big})
    scripts = ScriptRegistry(redis)
    reply = await scripts.run(
        ReadChangesArgs(slow_poll_feed.instance, "x", slow_poll_feed.last_id, BATCH, BATCH_BYTES),
        CallContext(keys, "", ""),
    )
    assert ([fields[1] for _, fields in reply.entries], reply.more) == (
        ["big0", "big1", "big2", "big3"],
        True,
    )
    assert await slow_poll_feed.wait_fresh(5.0) is True
    assert recorder.kinds == [f"big{i}" for i in range(10)]  # three reads, in order, nothing lost
    unbounded = await scripts.run(
        ReadChangesArgs(slow_poll_feed.instance, "x", reply.last_id, BATCH), CallContext(keys, "", "")
    )
    assert (len(unbounded.entries), unbounded.more) == (10, False)


async def test_a_read_sizes_its_pages_by_the_entries_it_meets(
    redis: Redis, keys: Keyspace, slow_poll_feed: ChangeFeed
) -> None:
    """Small entries fill a read up to its count, then big ones stop it at its byte bound: pages
    follow the entries' sizes, and nothing is skipped or read twice across reads."""
    small = [f"s{i}" for i in range(BATCH + 100)]
    big = [f"b{i}" for i in range(6)]
    for kind in small:
        await redis.xadd(keys.events, {"kind": kind})
    for kind in big:
        await redis.xadd(keys.events, {"kind": kind, "upserted": "x" * (BATCH_BYTES // 3)})
    scripts, ctx = ScriptRegistry(redis), CallContext(keys, "", "")
    read: list[list[str]] = []
    last = slow_poll_feed.last_id
    while True:
        reply = await scripts.run(
            ReadChangesArgs(slow_poll_feed.instance, "x", last, BATCH, BATCH_BYTES), ctx
        )
        if not reply.entries:
            break
        read.append([fields[1] for _, fields in reply.entries])
        last = str(reply.entries[-1][0])
    assert [len(kinds) for kinds in read] == [BATCH, 100 + 3, 3]  # the third big entry crosses
    assert [kind for kinds in read for kind in kinds] == small + big


def fail_once(fault: BaseException) -> Callable[[ReadChangesArgs, object], FeedReply]:
    """ReadChangesArgs.decode raising ``fault`` for the first reply and decoding the rest: the
    worker's own handling failing once while Redis answers all along."""
    decode, raised = ReadChangesArgs.decode, []

    def failing(args: ReadChangesArgs, reply: object) -> FeedReply:
        if not raised:
            raised.append(fault)
            raise fault
        return decode(args, reply)

    return failing


@pytest.mark.parametrize(
    ("fault", "faults", "restarts"),
    [
        (ValueError("a reply this worker could not decode"), 1, 0),  # the poll fails, the thread lives
        (asyncio.CancelledError(), 0, 1),  # the thread ends: the next tick starts another
    ],
)
async def test_a_poll_that_fails_in_the_worker_does_not_end_the_feed(
    redis: Redis,
    keys: Keyspace,
    recorder: Recorder,
    slow_poll_feed: ChangeFeed,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fault: BaseException,
    faults: int,
    restarts: int,
) -> None:
    """CI: a worker's poll thread died after a Redis restart; the worker never saw the new data
    set, never healed it, and a broker's one-topic registration stayed refused (R7) for good."""
    monkeypatch.setattr(ReadChangesArgs, "decode", fail_once(fault))
    await redis.xadd(keys.events, {"kind": "after"})
    assert await slow_poll_feed.wait_fresh(10.0) is False  # the read that failed
    # a read after it, by the same feed (a new thread within a tick)
    await eventually(lambda: slow_poll_feed.wait_fresh(5.0), timeout=10, what="a read after the failed one")
    assert recorder.kinds == ["after"]
    assert (slow_poll_feed.poll_faults, slow_poll_feed.thread_restarts) == (faults, restarts)
    assert any(r.exc_info is not None for r in caplog.records if r.name == "namesrv.registry.changefeed")


async def test_a_read_that_stops_short_still_tells_how_far_the_feed_has_read(
    redis: Redis, keys: Keyspace, slow_poll_feed: ChangeFeed
) -> None:
    """A flood of entries (a heal's replays) is read in many reads, and the worker's knowledge
    moves with each one rather than only once the flood ends: by the Redis time of the last
    entry applied, never past a change it has not applied."""
    seen: dict[str, float | None] = {}

    class Watcher(Recorder):
        async def on_event(self, kind: str, fields: Mapping[str, str]) -> None:
            seen[kind] = slow_poll_feed.known_at  # what the feed claimed when this one came

    slow_poll_feed.subscribe(Watcher())
    big = "x" * (BATCH_BYTES // 4)  # four entries reach one read's bound
    await asyncio.sleep(1.0)
    first_added = time.monotonic()
    for i in range(4):
        await redis.xadd(keys.events, {"kind": f"early{i}", "upserted": big})
    await asyncio.sleep(1.0)
    late_added = time.monotonic()
    for i in range(4):
        await redis.xadd(keys.events, {"kind": f"late{i}", "upserted": big})
    assert await slow_poll_feed.wait_fresh(5.0) is True
    before, after_early = seen["early0"], seen["late0"]
    assert before is not None and after_early is not None
    assert before < first_added - 0.9  # the feed's knowledge when the flood began
    # after the first read (the early entries): up to the time the last one was added, less how
    # long the read took to run, and never as far as the first entry it had not read
    assert first_added - 0.5 < after_early < late_added


async def test_waits_until_an_outage_end_when_the_outage_begins(
    redis_url: str, keys: Keyspace, recorder: Recorder
) -> None:
    """A caller that serves from memory in an outage waits for a poll only until Redis stalls:
    the loop's tick tells every such caller at once, not after the 5 s each was allowed."""
    async with proxied_feed(redis_url, keys, recorder, poll_interval=0.02) as (proxy, feed):
        proxy.pause()
        # a poll whose reply was relayed before the pause may still end well (its thread late on
        # a busy machine): let it end, so every poll in flight below went out after the pause
        await feed.wait_in_flight(5.0, until_outage=True)
        started = time.monotonic()
        waits = await asyncio.gather(
            *(feed.wait_fresh(5.0, until_outage=True) for _ in range(50)),
            *(feed.wait_in_flight(5.0, until_outage=True) for _ in range(50)),
        )
        assert waits == [False] * 100
        assert time.monotonic() - started < 2.5  # the stall (stall_s 50 ms) ended them
        assert feed.outage(time.monotonic()) is True
        proxy.resume()
        assert await feed.wait_fresh(5.0) is True  # and a read after it is applied
