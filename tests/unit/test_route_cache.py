"""The route cache's rules (staleness gate, deadlines, invalidation, races), on its own."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from types import MappingProxyType
from typing import Any

import orjson
import pytest

from namesrv.domain.errors import Busy, NotReady, StoreUnavailable
from namesrv.domain.model import BrokerData, QueueData, TopicRouteData
from namesrv.protocol.fastjson import Dialect
from namesrv.registry.route_cache import (
    HEAL_REREAD_S,
    MAX_AGE_S,
    MAX_BYPASSES_IN_FLIGHT,
    UNAVAILABLE_REMARK,
    RouteCache,
)
from namesrv.registry.route_impact import route_impact
from namesrv.registry.route_lookups import REPLAY_QUIET_S, STALE, Lookup, UncachedRoutes
from namesrv.store.changelog import EventKind
from tests.builders import ManualFreshness

TIMINGS = {"staleness_s": 0.1, "outage_s": 30.0, "catch_up_s": 1.0, "negative_s": 1.0}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def route(*brokers: str) -> TopicRouteData:
    return TopicRouteData(
        queueDatas=tuple(QueueData(b, 6, 8, 0, 8) for b in brokers),
        brokerDatas=tuple(BrokerData("C", b, {0: f"10.0.0.{i}:10911"}) for i, b in enumerate(brokers)),
    )


class Registry:
    """What the fill reads: a dict of routes, with a count of reads and an optional pause."""

    def __init__(self, clock: Clock) -> None:
        self.routes: dict[str, TopicRouteData] = {}
        self.hidden: dict[str, frozenset[str]] = {}  # topic -> broker names Redis left out
        self.valid_for = math.inf
        self.reads = 0
        self.clock = clock
        self.gate: asyncio.Event | None = None

    async def fill(self, topic: str) -> Lookup:
        self.reads += 1
        answer = self.routes.get(topic)
        if self.gate is not None:
            await self.gate.wait()
        valid_until = self.clock() + self.valid_for
        # one address per broker name, member 'c/<name>'; Redis time is local time here (offset 0)
        deadlines = {f"c/{b.brokerName}": valid_until for b in answer.brokerDatas} if answer else {}
        if math.isinf(valid_until):
            deadlines = {}
        return Lookup(answer, valid_until, self.hidden.get(topic, frozenset()), deadlines, 0.0)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def registry(clock: Clock) -> Registry:
    return Registry(clock)


@pytest.fixture
def cache(registry: Registry, clock: Clock) -> RouteCache:
    return new_cache(registry, clock, max_entries=3)


def new_cache(registry: Registry, clock: Clock, **options: Any) -> RouteCache:
    """A cache over ``registry`` whose feed has just read everything."""
    c = RouteCache(registry.fill, ManualFreshness(), clock=clock, **(TIMINGS | options))
    c.freshness.known_at = clock.now
    return c


async def test_a_hit_reads_nothing(cache: RouteCache, registry: Registry) -> None:
    registry.routes["T"] = route("a")
    first = await cache.get("T")
    second = await cache.get("T")
    assert registry.reads == 1 and first is second
    assert first is not None and first.encoded(Dialect.STANDARD) is first.encoded(Dialect.STANDARD)
    assert orjson.loads(first.encoded(Dialect.STANDARD))["brokerDatas"][0]["brokerAddrs"] == {
        "0": "10.0.0.0:10911"
    }
    assert first.encoded(Dialect.DEFAULT).startswith(b'{"brokerDatas":[{"brokerAddrs":{0:')


async def test_a_lagging_feed_sends_every_lookup_to_redis(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes["T"] = route("a")
    await cache.get("T")
    clock.now += 0.101  # the last completed feed read was issued more than 100 ms ago
    await cache.get("T")
    await cache.get("T")
    assert registry.reads == 3 and cache.stats()["bypasses"] == 2
    cache.freshness.known_at = clock.now
    await cache.get("T")
    assert registry.reads == 3  # fresh again: the entry (never invalidated) is served


async def test_an_entry_dies_at_the_earliest_broker_deadline(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes["T"] = route("a")
    registry.valid_for = 2.0
    await cache.get("T")
    clock.now += 1.99
    cache.freshness.known_at = clock.now
    await cache.get("T")
    assert registry.reads == 1
    clock.now += 0.02
    cache.freshness.known_at = clock.now
    await cache.get("T")
    assert registry.reads == 2


async def test_unknown_topics_are_remembered_briefly_and_forgotten_when_they_appear(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    assert await cache.get("New") is None
    assert await cache.get("New") is None
    assert registry.reads == 1
    registry.routes["New"] = route("a")
    await cache.on_event(
        "registerQueues", {"brokerName": "a", "upserted": '[["New",{"brokerName":"a"}]]', "removed": "[]"}
    )
    assert await cache.get("New") is not None and registry.reads == 2
    assert await cache.get("Gone") is None
    clock.now += 1.01
    cache.freshness.known_at = clock.now
    assert await cache.get("Gone") is None and registry.reads == 4


@pytest.mark.parametrize(
    ("kind", "fields", "dropped"),
    [
        ("registerQueues", {"upserted": '[["T1",{}]]', "removed": '["T2"]'}, {"T1", "T2"}),
        ("wipePerm", {"brokerName": "a", "upserted": '[["T1",{}]]'}, {"T1"}),
        ("addPerm", {"brokerName": "a", "upserted": "[]"}, set()),
        ("topicRegister", {"topic": "T3", "upserted": '[["T3",{}]]'}, {"T3"}),
        ("topicDelete", {"topic": "T2", "cluster": "", "brokerNames": '["b"]'}, {"T2"}),
        ("unregister", {"brokerName": "b", "removed": "0"}, {"T2", "T3"}),
        ("expire", {"brokerName": "a", "removed": "1"}, {"T1", "T3"}),
        ("close", {"brokerName": "c"}, set()),
        ("cleanQueues", {"brokerName": "b", "removed": '["T2"]', "upserted": "[]"}, {"T2", "T3"}),
        ("register", {"brokerName": "a", "routeChanged": "1"}, {"T1", "T3"}),
        ("register", {"brokerName": "new", "routeChanged": "1"}, set()),
        ("register", {"brokerName": "a", "routeChanged": "0"}, set()),
        ("heartbeat", {"brokerName": "b", "revived": "1"}, {"T2", "T3"}),
        ("heartbeat", {"brokerName": "b", "revived": "0"}, set()),
        ("kvPut", {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1", "value": "a:4"}, {"T1"}),
        ("kvDelete", {"namespace": "OTHER", "key": "T1"}, set()),
        ("config", {"changes": "{}"}, {"T1", "T2", "T3"}),
    ],
)
async def test_events_drop_exactly_the_routes_they_change(
    cache: RouteCache, registry: Registry, kind: str, fields: dict[str, str], dropped: set[str]
) -> None:
    registry.routes.update({"T1": route("a"), "T2": route("b"), "T3": route("a", "b")})
    for topic in ("T1", "T2", "T3"):
        await cache.get(topic)
    await cache.on_event(kind, fields)
    reads = registry.reads
    for topic in ("T1", "T2", "T3"):
        await cache.get(topic)
    assert registry.reads - reads == len(dropped)


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        ("register", {"brokerName": "gone", "routeChanged": "1"}),
        ("heartbeat", {"brokerName": "gone", "revived": "1"}),
    ],
)
async def test_a_broker_left_out_as_expired_drops_the_route_when_it_comes_back(
    cache: RouteCache, registry: Registry, kind: str, fields: dict[str, str]
) -> None:
    # Redis hid broker "gone" (past its deadline, not yet swept): the route does not mention it.
    registry.routes.update({"T1": route("a"), "T2": route("a")})
    registry.hidden["T1"] = frozenset({"gone"})
    for topic in ("T1", "T2"):
        await cache.get(topic)
    await cache.on_event(kind, fields)
    reads = registry.reads
    for topic in ("T1", "T2"):
        await cache.get(topic)
    assert registry.reads - reads == 1  # T1 only


async def test_a_lagging_feed_is_caught_up_once_for_every_waiting_lookup(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes["T"] = route("a")
    await cache.get("T")
    clock.now += 0.5
    calls = 0

    async def catch_up() -> bool:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        cache.freshness.known_at = clock.now
        return True

    cache.freshness.catch_up = catch_up  # type: ignore[attr-defined]
    results = await asyncio.gather(*(cache.get("T") for _ in range(3)))
    assert all(r is not None for r in results)
    assert registry.reads == 1 and cache.stats()["bypasses"] == 0 and calls == 3


async def stale_with_a_poll_in_flight(
    cache: RouteCache, registry: Registry, clock: Clock, *, issued_ago: float
) -> ManualFreshness:
    """T is cached, the knowledge is past the bound, and the poll in flight, once applied, was
    issued ``issued_ago`` s before now."""
    registry.routes["T"] = route("a")
    await cache.get("T")
    clock.now += 0.5
    freshness = cache.freshness
    assert isinstance(freshness, ManualFreshness)

    async def poll_lands() -> bool:
        freshness.known_at = clock.now - issued_ago
        return True

    freshness.in_flight = poll_lands
    return freshness


async def test_the_poll_in_flight_answers_a_catch_up_when_it_brings_knowledge_within_the_bound(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    freshness = await stale_with_a_poll_in_flight(cache, registry, clock, issued_ago=0.09)  # bound: 0.1
    hit = await cache.get("T")
    assert hit is not None and hit.data.brokerDatas[0].brokerName == "a"
    assert freshness.waits == 0 and registry.reads == 1
    assert cache.stats()["catch_ups_in_flight"] == 1 and cache.stats()["catch_ups_read"] == 0


async def test_a_poll_in_flight_too_old_to_help_is_followed_by_a_read_of_its_own(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    freshness = await stale_with_a_poll_in_flight(cache, registry, clock, issued_ago=0.2)

    async def read() -> bool:
        freshness.known_at = clock.now
        return True

    freshness.catch_up = read
    assert await cache.get("T") is not None
    assert freshness.waits == 1 and registry.reads == 1
    stats = cache.stats()
    assert (stats["catch_ups_in_flight"], stats["catch_ups_read"], stats["catch_ups_failed"]) == (0, 1, 0)


async def cached_then_catch_up_fails(
    cache: RouteCache, registry: Registry, clock: Clock, *, taking: float
) -> None:
    """T is cached, the knowledge is past the bound, and a catch-up read fails after ``taking`` s."""
    registry.routes["T"] = route("a")
    await cache.get("T")
    clock.now += 0.5

    async def catch_up() -> bool:
        clock.now += taking
        return False

    cache.freshness.catch_up = catch_up  # type: ignore[attr-defined]


async def test_a_failed_catch_up_falls_back_to_redis(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    await cached_then_catch_up_fails(cache, registry, clock, taking=0.0)
    assert await cache.get("T") is not None
    assert registry.reads == 2 and cache.stats()["bypasses"] == 1


async def test_a_catch_up_that_takes_the_whole_deadline_is_a_stall_not_a_reason_to_wait_again(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    await cached_then_catch_up_fails(cache, registry, clock, taking=1.0)  # the whole deadline
    hit = await cache.get("T")
    assert hit is not None and hit.data.brokerDatas[0].brokerName == "a"
    assert registry.reads == 1 and cache.stats()["bypasses"] == 0 and cache.stats()["outage"] == 1
    del registry.routes["T"]
    with pytest.raises(StoreUnavailable):
        await cache.get("U")  # not in memory: fails after the one deadline, no read of its own
    assert registry.reads == 1


async def test_lookups_beyond_the_bypass_bound_are_shed_not_sent_to_redis(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes["T"] = route("a")
    clock.now += 0.5  # the feed is late and cannot catch up
    registry.gate = asyncio.Event()  # Redis answers only when told
    readers = [asyncio.create_task(cache.get("T")) for _ in range(MAX_BYPASSES_IN_FLIGHT)]
    await asyncio.sleep(0)
    with pytest.raises(Busy) as shed:
        await cache.get("T")
    assert shed.value.code == 2 and shed.value.remark.startswith("[OVERLOAD]")
    assert registry.reads == MAX_BYPASSES_IN_FLIGHT
    registry.gate.set()
    assert all(r is not None for r in await asyncio.gather(*readers))
    assert await cache.get("T") is not None  # room again once the reads are done
    stats = cache.stats()
    assert stats["bypasses"] == registry.reads == MAX_BYPASSES_IN_FLIGHT + 1 and stats["shed"] == 1


async def test_own_writes_wait_for_the_feed_to_read_past_them(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes["T"] = route("a")
    await cache.get("T")
    clock.now += 0.001
    cache.note_local_write()

    async def catch_up() -> bool:
        cache.freshness.known_at = clock.now  # a read issued after the write
        return True

    cache.freshness.catch_up = catch_up  # type: ignore[attr-defined]
    assert cache.peek("T") is STALE  # the inline path never answers across an own write
    assert await cache.get("T") is not None
    assert registry.reads == 1 and cache.stats()["bypasses"] == 0


async def test_no_entry_outlives_the_maximum_age(cache: RouteCache, registry: Registry, clock: Clock) -> None:
    registry.routes["T"] = route("a")
    await cache.get("T")
    clock.now += MAX_AGE_S / 2 - 0.01
    cache.freshness.known_at = clock.now
    await cache.get("T")
    assert registry.reads == 1
    clock.now += MAX_AGE_S / 2 + 0.02
    cache.freshness.known_at = clock.now
    await cache.get("T")
    assert registry.reads == 2


async def test_a_fill_overtaken_by_an_invalidation_is_not_kept(cache: RouteCache, registry: Registry) -> None:
    registry.routes["T"] = route("a")
    registry.gate = asyncio.Event()
    pending = asyncio.create_task(cache.get("T"))
    await asyncio.sleep(0)
    await cache.on_event("unregister", {"brokerName": "a"})  # lands while the read is in flight
    registry.gate.set()
    assert await pending is not None  # the caller gets what it read ...
    await cache.get("T")
    assert registry.reads == 2  # ... but it was not kept


async def test_concurrent_misses_share_one_read(cache: RouteCache, registry: Registry) -> None:
    registry.routes["T"] = route("a")
    registry.gate = asyncio.Event()
    waiters = [asyncio.create_task(cache.get("T")) for _ in range(50)]
    await asyncio.sleep(0)
    registry.gate.set()
    results = await asyncio.gather(*waiters)
    assert registry.reads == 1 and len({id(r) for r in results}) == 1


async def test_least_recently_used_routes_go_first(cache: RouteCache, registry: Registry) -> None:
    for t in ("A", "B", "C", "D"):
        registry.routes[t] = route("a")
    for t in ("A", "B", "C"):
        await cache.get(t)
    await cache.get("A")  # A is now the most recent
    await cache.get("D")  # evicts B
    reads = registry.reads
    await cache.get("A")
    await cache.get("C")
    assert registry.reads == reads
    await cache.get("B")
    assert registry.reads == reads + 1


async def test_a_settings_change_starts_over(registry: Registry, clock: Clock) -> None:
    view = [False]
    cache = new_cache(registry, clock, max_entries=10, view=lambda: view[0])
    registry.routes["T"] = route("a")
    await cache.get("T")
    view[0] = True  # e.g. orderMessageEnable turned on fleet-wide
    await cache.get("T")
    assert registry.reads == 2


async def test_zone_views_are_encoded_once_per_zone(cache: RouteCache, registry: Registry) -> None:
    registry.routes["T"] = TopicRouteData(
        queueDatas=(QueueData("a", 6, 8, 0, 8), QueueData("b", 6, 8, 0, 8)),
        brokerDatas=(
            BrokerData("C", "a", {0: "1.1.1.1:1"}, zoneName="z1"),
            BrokerData("C", "b", {0: "2.2.2.2:1"}, zoneName="z2"),
        ),
    )
    entry = await cache.get("T")
    assert entry is not None
    body = entry.zone_encoded("Z1")
    assert body is entry.zone_encoded("z1")
    assert body == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"1.1.1.1:1"},"brokerName":"a","cluster":"C",'
        b'"enableActingMaster":false,"zoneName":"z1"}],"filterServerTable":{},"queueDatas":'
        b'[{"brokerName":"a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
    )


async def test_own_writes_are_read_back_before_the_feed_catches_up(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes["T"] = route("a")
    await cache.get("T")
    clock.now += 0.01
    cache.note_local_write()  # this worker just changed the registry
    registry.routes["T"] = route("a", "b")
    entry = await cache.get("T")
    assert entry is not None and [b.brokerName for b in entry.data.brokerDatas] == ["a", "b"]
    assert cache.stats()["bypasses"] == 1
    cache.freshness.known_at = clock.now  # the feed has read past the write
    await cache.on_event("registerQueues", {"upserted": '[["T",{}]]', "removed": "[]"})
    await cache.get("T")
    assert cache.stats()["bypasses"] == 1 and registry.reads == 3


async def test_peek_answers_only_what_is_safe_without_waiting(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes["T"] = route("a")
    assert cache.peek("T") is None  # not cached yet: only get() can answer
    await cache.get("T")
    assert await cache.get("Gone") is None
    hit = cache.peek("T")
    assert hit is not None and hit is not False and hit.data.brokerDatas[0].brokerName == "a"
    assert cache.peek("Gone") is False  # a cached "does not exist"
    clock.now += 0.2  # the feed lags: nothing is safe from memory
    assert cache.peek("T") is STALE
    assert registry.reads == 2


async def test_a_caught_up_lookup_is_answered_from_memory_however_late_it_resumes(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    """The shed storm of issue 10: after a catch-up read succeeded, a busy worker resumed its
    waiting lookups more than the bound later and, seeing the clock, sent them all to Redis. The
    read was issued after each lookup arrived, so memory answers them correctly."""
    registry.routes["T"] = route("a")
    await cache.get("T")
    clock.now += 0.5

    async def catch_up() -> bool:
        cache.freshness.known_at = clock.now  # the read was issued now ...
        clock.now += 0.3  # ... and the worker gets back to this lookup much later
        return True

    cache.freshness.catch_up = catch_up  # type: ignore[attr-defined]
    assert await cache.get("T") is not None
    assert registry.reads == 1 and cache.stats()["bypasses"] == 0


async def test_during_an_outage_cached_routes_are_served_and_others_fail_fast(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes.update({"T": route("a"), "U": route("b")})
    await cache.get("T")
    assert await cache.get("Gone") is None
    freshness: ManualFreshness = cache.freshness  # type: ignore[assignment]
    freshness.down = True
    clock.now += 5.0  # far past the staleness bound: only the outage rule allows an answer
    hit = cache.peek("T")
    assert hit is not None and hit is not False and hit.data.brokerDatas[0].brokerName == "a"
    assert await cache.get("T") is hit
    assert cache.peek("U") is None
    with pytest.raises(StoreUnavailable) as failed:
        await cache.get("U")
    assert failed.value.remark == UNAVAILABLE_REMARK
    assert registry.reads == 2  # no Redis read: Redis did not come back within the deadline
    assert cache.stats()["outage"] == 2 and cache.stats()["unavailable"] == 1
    clock.now += 25.1  # past routeCacheOutageSeconds (30 s) since the feed last read
    assert cache.peek("T") is STALE
    with pytest.raises(StoreUnavailable):
        await cache.get("T")  # the catch-up fails, Redis is still out


async def test_an_entry_past_its_broker_deadline_before_the_outage_is_not_served_during_it(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes["T"] = route("a")
    registry.valid_for = 2.0
    await cache.get("T")
    clock.now += 2.01
    cache.freshness.known_at = clock.now  # the broker's deadline passed while Redis answered
    cache.freshness.down = True  # type: ignore[attr-defined]
    clock.now += 0.5
    assert cache.peek("T") is None
    with pytest.raises(StoreUnavailable):
        await cache.get("T")


async def test_no_broker_ages_out_of_memory_during_an_outage(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    """#25 row 2: no broker can heartbeat while Redis is out, so a deadline that passes during the
    outage does not end a cached route (within routeCacheOutageSeconds)."""
    registry.routes["T"] = route("a")
    registry.valid_for = 2.0
    await cache.get("T")
    clock.now += 1.0
    cache.freshness.known_at = clock.now  # the broker was alive when the feed last read Redis
    cache.freshness.down = True  # type: ignore[attr-defined]
    clock.now += 30.0
    assert cache.peek("T") is not None
    assert (await cache.get("T")) is not None and registry.reads == 1


async def test_heartbeats_in_the_change_log_keep_a_cached_route_alive(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    """#25 row 2: a route read once keeps the deadline the fleet last accepted, not its first."""
    registry.routes["T"] = route("a")
    registry.valid_for = 2.0
    await cache.get("T")
    for _ in range(5):
        clock.now += 1.5
        cache.freshness.known_at = clock.now
        deadline_ms = int((clock.now + 2.0) * 1000)
        await cache.on_event(
            "heartbeat",
            {
                "cluster": "c",
                "brokerName": "a",
                "brokerAddr": "a",
                "deadline": str(deadline_ms),
                "revived": "0",
            },
        )
        assert await cache.get("T") is not None
    assert registry.reads == 1  # 7.5 s on one read, its broker heartbeating every 1.5 s
    clock.now += 2.01  # no heartbeat for longer than the timeout: read again
    cache.freshness.known_at = clock.now
    await cache.get("T")
    assert registry.reads == 2


async def test_recovery_drops_routes_read_after_the_feed_last_confirmed_redis(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    """Writes Redis lost with an outage (AOF's last second, a lagging replica) may show in routes
    read after the feed's last good position; routes read before it are confirmed."""
    registry.routes.update({"Old": route("a"), "New": route("a")})
    await cache.get("Old")
    confirmed = clock.now
    clock.now += 0.05
    cache.freshness.known_at = confirmed + 0.01  # type: ignore[misc]
    await cache.get("New")  # read after `confirmed`
    cache.on_recovered(confirmed)
    reads = registry.reads
    await cache.get("Old")
    await cache.get("New")
    assert registry.reads == reads + 1


async def test_a_reset_drops_everything(cache: RouteCache, registry: Registry) -> None:
    registry.routes.update({"T1": route("a"), "T2": route("b")})
    await cache.get("T1")
    await cache.get("T2")
    await cache.on_reset("Redis holds a new data set")
    reads = registry.reads
    await cache.get("T1")
    await cache.get("T2")
    assert registry.reads == reads + 2 and cache.stats()["resets"] == 1


async def test_a_mapping_change_drops_its_topic(cache: RouteCache, registry: Registry) -> None:
    registry.routes.update({"T1": route("a"), "T2": route("a")})
    await cache.get("T1")
    await cache.get("T2")
    await cache.on_event("registerQueues", {"upserted": "[]", "removed": "[]", "mapped": '["T2"]'})
    reads = registry.reads
    await cache.get("T1")
    await cache.get("T2")
    assert registry.reads == reads + 1


async def test_when_the_catch_up_and_the_redis_read_both_fail_memory_answers(
    cache: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes["T"] = route("a")
    first = await cache.get("T")
    clock.now += 0.5  # not fresh; the catch-up fails (no catch_up set) and so does Redis:

    async def failing(topic: str) -> Lookup:
        raise StoreUnavailable("Redis unavailable: connection reset")

    cache._fill = failing  # type: ignore[method-assign]
    assert await cache.get("T") is first
    with pytest.raises(StoreUnavailable):
        await cache.get("Unknown")


# ---- re-reading dropped routes ----
@pytest.fixture
async def refreshing(registry: Registry, clock: Clock) -> AsyncIterator[RouteCache]:
    c = new_cache(registry, clock, max_entries=100, refresh_s=60.0)
    c.start()
    yield c
    await c.close()


async def settle() -> None:
    for _ in range(20):  # the refresher's task and its reads run
        await asyncio.sleep(0)


async def test_a_route_served_lately_is_read_again_as_soon_as_a_change_drops_it(
    refreshing: RouteCache, registry: Registry
) -> None:
    registry.routes.update({"T": route("a"), "U": route("b")})
    await refreshing.get("T")
    await refreshing.get("U")
    registry.routes["T"] = route("a", "c")
    await refreshing.on_event("unregister", {"brokerName": "a"})
    await settle()
    assert registry.reads == 3  # T read again, U untouched
    hit = refreshing.peek("T")
    assert hit is not None and hit is not False and [b.brokerName for b in hit.data.brokerDatas] == ["a", "c"]
    assert refreshing.stats()["refreshed"] == 1 and refreshing.stats()["hits"] == 1


async def test_a_route_not_served_within_the_window_is_only_dropped(
    refreshing: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes["T"] = route("a")
    await refreshing.get("T")
    clock.now += 60.5
    refreshing.freshness.known_at = clock.now
    await refreshing.on_event("unregister", {"brokerName": "a"})
    await settle()
    assert registry.reads == 1 and refreshing.peek("T") is None
    assert refreshing.stats()["refreshed"] == 0


async def test_a_re_read_route_nobody_asks_for_again_leaves_the_window(
    refreshing: RouteCache, registry: Registry, clock: Clock
) -> None:
    registry.routes["T"] = route("a")
    await refreshing.get("T")  # the last lookup
    for _ in range(3):  # a change every 25 s: read again while within 60 s of that lookup
        clock.now += 25.0
        refreshing.freshness.known_at = clock.now
        await refreshing.on_event("unregister", {"brokerName": "a"})
        await settle()
    assert registry.reads == 3  # the lookup, then the changes at 25 s and 50 s; not the one at 75 s
    assert refreshing.stats()["refreshed"] == 2 and refreshing.peek("T") is None


async def test_a_re_read_overtaken_by_another_change_is_read_again_a_bounded_number_of_times(
    refreshing: RouteCache, registry: Registry
) -> None:
    registry.routes["T"] = route("a")
    await refreshing.get("T")
    for _ in range(5):  # every re-read is overtaken by the next change
        registry.gate = asyncio.Event()
        await refreshing.on_event("unregister", {"brokerName": "a"})
        await settle()
        refreshing.invalidate_broker("zzz")  # another change lands while the read is in flight
        registry.gate.set()
        await settle()
    assert refreshing.stats()["refresh_overtaken"] >= 3
    assert registry.reads <= 1 + 5 * 3


async def test_no_re_reads_while_redis_is_out(refreshing: RouteCache, registry: Registry) -> None:
    registry.routes["T"] = route("a")
    await refreshing.get("T")
    freshness: ManualFreshness = refreshing.freshness  # type: ignore[assignment]
    freshness.down = True
    refreshing.invalidate_broker("a")
    await settle()
    assert registry.reads == 1 and refreshing.stats()["refreshed"] == 0


async def test_re_reading_is_off_with_a_zero_window(registry: Registry, clock: Clock) -> None:
    c = new_cache(registry, clock, max_entries=10, refresh_s=0.0)
    c.start()
    registry.routes["T"] = route("a")
    await c.get("T")
    c.invalidate_broker("a")
    await settle()
    assert registry.reads == 1
    await c.close()


def queues_written(topic: str, broker: str, *, replay: bool) -> dict[str, str]:
    """A registerQueues change-log entry that wrote ``broker``'s queue of ``topic``."""
    queue = {"brokerName": broker, "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8}
    return {
        "cluster": "C",
        "brokerName": broker,
        "brokerAddr": "10.0.0.0:10911",
        "epoch": "1",
        "upserted": orjson.dumps([[topic, queue]]).decode(),
        "removed": "[]",
        "mapped": "[]",
        "final": "1",
        "chunk": "0",
        "dataVersion": "{}",
        "replay": "1" if replay else "0",
    }


async def test_a_heal_serves_the_route_cached_before_the_loss_through_replays(
    registry: Registry, clock: Clock
) -> None:
    """#27: at the RIP-29 shape every replay names every topic; the pre-loss routes must outlive
    the replays, or every lookup reads a partial route from Redis while the heal runs. A broker's
    own queue write still ends them: Redis then holds an answer of its own."""
    c = new_cache(registry, clock, max_entries=10, heal_s=15.0)
    registry.routes["T"] = route("a", "b")
    before = await c.get("T")
    registry.routes["T"] = route("a")  # after the loss: only broker a replayed so far
    await c.on_reset("Redis holds a new data set")
    await c.on_event("registerQueues", queues_written("T", "a", replay=True))
    assert (await c.get("T"), registry.reads) == (before, 1)
    await c.on_event("registerQueues", queues_written("T", "a", replay=False))
    after = await c.get("T")
    assert after is not None and (after.data, registry.reads) == (route("a"), 2)


async def test_a_route_read_while_a_replay_lands_is_read_again_not_kept_partial(
    registry: Registry, clock: Clock
) -> None:
    """A worker with a cold cache reads a route during the heal while one broker of it is
    replayed and the other's replay writes it: the replay's entry may be applied while the read
    is in flight, and no later entry names the topic. Stored as an ordinary route it stayed
    partial until its brokers' deadline (the cold-cache heal test, about one run in fifteen once
    replays sent their kept writes); kept as a route read since the loss, it is read again when
    a lookup asks for it a second later."""
    c = new_cache(registry, clock, max_entries=10, heal_s=15.0, refresh_s=60.0)
    c.start()
    try:
        await c.on_reset("Redis holds a new data set")
        clock.now += 0.01
        c.freshness.known_at = clock.now
        registry.routes["T"] = route("b")  # broker b replayed, broker a's writes not yet read
        registry.gate = asyncio.Event()
        pending = asyncio.create_task(c.get("T"))
        await asyncio.sleep(0)
        registry.routes["T"] = route("a", "b")
        await c.on_event("registerQueues", queues_written("T", "a", replay=True))  # while in flight
        registry.gate.set()
        partial = await pending
        assert partial is not None and partial.data == route("b")
        registry.gate = None
        clock.now += 1.1
        c.freshness.known_at = clock.now
        await c.get("T")  # served as read, and read again in the background
        await settle()
        whole = await c.get("T")
        assert whole is not None and whole.data == route("a", "b") and registry.reads == 2
    finally:
        await c.close()


async def test_routes_of_the_same_brokers_share_one_list_of_members(registry: Registry, clock: Clock) -> None:
    """#27 memory: 10,000 routes of the same 300 addresses keep one list of them, not 10,000."""
    c = new_cache(registry, clock, max_entries=10)
    registry.valid_for = 60.0
    registry.routes["T1"], registry.routes["T2"] = route("a", "b"), route("b", "a")
    one, two = await c.get("T1"), await c.get("T2")
    assert one is not None and two is not None
    assert one.members == ("c/a", "c/b") and one.members is two.members


async def test_the_heal_window_stays_open_while_replays_go_on(registry: Registry, clock: Clock) -> None:
    """#27: at the full RIP-29 shape the replays outlasted the 15 s window; after it, lookups
    read routes Redis did not hold yet. Replays the change log shows keep the window open until
    REPLAY_QUIET_S after the last, at most MAX_HEAL_WINDOWS windows in all."""
    c = new_cache(registry, clock, max_entries=10, heal_s=15.0)
    registry.routes["T"] = route("a", "b")
    before = await c.get("T")
    registry.routes.pop("T")  # after the loss: nothing replayed yet
    await c.on_reset("Redis holds a new data set")
    for _ in range(14):  # a replay every 4 s, up to 56 s after the loss
        clock.now += 4.0
        c.freshness.known_at = clock.now
        await c.on_event("registerQueues", queues_written("U", "a", replay=True))
        assert c.healing() and await c.get("T") is before
    assert REPLAY_QUIET_S > 4.0
    clock.now += 3.99  # 59.99 s after the loss
    c.freshness.known_at = clock.now
    assert c.healing() and await c.get("T") is before
    clock.now += 0.02  # MAX_HEAL_WINDOWS (4) x 15 s: closed, whatever the replays
    c.freshness.known_at = clock.now
    assert not c.healing() and await c.get("T") is None


async def test_a_replay_after_the_heal_window_does_not_open_it_again(
    registry: Registry, clock: Clock
) -> None:
    c = new_cache(registry, clock, max_entries=10, heal_s=15.0)
    await c.on_reset("Redis holds a new data set")
    clock.now += 15.0
    c.freshness.known_at = clock.now
    await c.on_event("registerQueues", queues_written("T", "a", replay=True))
    assert not c.healing() and await c.get("T") is None  # TOPIC_NOT_EXIST, as Redis says


async def test_a_lookup_does_not_wait_twice_for_catch_ups_that_run_out_their_deadline(
    registry: Registry, clock: Clock
) -> None:
    """The remoting fast path's shared round ran out its deadline, then each of its lookups took
    the waiting path and waited out a deadline of its own (2 s per lookup during a full-size
    heal). A catch-up that ran out the deadline a moment ago answers as the one it ended with."""
    c = new_cache(registry, clock, max_entries=10)
    registry.routes["T"] = route("a")
    served = await c.get("T")
    freshness = c.freshness
    assert isinstance(freshness, ManualFreshness)

    async def times_out() -> bool:
        clock.now += TIMINGS["catch_up_s"]
        return False

    freshness.catch_up = times_out
    clock.now += 0.2  # knowledge older than the bound
    assert await c.catch_up() is False  # the shared round: its whole deadline
    assert (freshness.waits, c.stats()["catch_ups_failed"]) == (1, 1)
    assert await c.get("T") is served  # from memory at once, as after a wait of its own
    assert (freshness.waits, c.stats()["outage"]) == (1, 1)
    clock.now += TIMINGS["catch_up_s"]  # a deadline later it tries again
    assert await c.get("T") is served
    assert freshness.waits == 2


async def test_without_the_cache_the_heal_window_follows_the_replays_too(
    registry: Registry, clock: Clock
) -> None:
    uncached = UncachedRoutes(registry.fill, heal_s=15.0, clock=clock)
    await uncached.on_reset("Redis holds a new data set")
    clock.now += 14.0
    await uncached.on_event("registerQueues", queues_written("U", "a", replay=True))
    clock.now += REPLAY_QUIET_S - 0.01
    with pytest.raises(NotReady):  # not replayed yet: "not ready", not TOPIC_NOT_EXIST
        await uncached.get("T")
    clock.now += 0.02
    assert await uncached.get("T") is None


async def test_during_a_heal_a_pre_loss_route_answers_without_a_catch_up(
    registry: Registry, clock: Clock
) -> None:
    """The replays keep a busy worker's feed behind; a catch-up would run out its deadline and
    end with the pre-loss route anyway (lookups p50 1.6 s at the full RIP-29 shape)."""
    c = new_cache(registry, clock, max_entries=10, heal_s=15.0)
    registry.routes["T"] = route("a", "b")
    before = await c.get("T")
    await c.on_reset("Redis holds a new data set")
    clock.now += 1.0  # the feed is a second behind
    assert c.peek("T") is before and await c.get("T") is before
    assert c.peek("U") is None  # no pre-loss route: read at once, no catch-up either
    registry.routes["U"] = route("a")  # replayed so far
    read = await c.get("U")
    assert read is not None and read.data == route("a")
    freshness = c.freshness
    assert isinstance(freshness, ManualFreshness) and freshness.waits == 0
    assert (c.stats()["heal_hits"], registry.reads) == (2, 2)
    clock.now += 15.0  # the heal is over: catch-ups again, as the rule says
    assert c.peek("U") is STALE


async def test_after_the_heal_each_pre_loss_route_is_served_until_it_is_read_again(
    registry: Registry, clock: Clock
) -> None:
    """#27: dropping every pre-loss route when the heal ended sent every lookup to Redis at the
    same moment (at the RIP-29 shape, SYSTEM_ERROR for 3,533 of 38,000 lookups). For as long
    again as the heal window, a pre-loss route a lookup asks for is served once more and read
    again in the background; the route read replaces it for good. Then the rest are dropped."""
    c = new_cache(registry, clock, max_entries=100, refresh_s=60.0, heal_s=15.0)
    c.start()
    try:
        registry.routes.update({"T": route("a", "b"), "U": route("a", "b")})
        before_t, before_u = await c.get("T"), await c.get("U")
        await c.on_reset("Redis holds a new data set")
        registry.routes.update({"T": route("a", "b", "c"), "U": route("a", "b", "c")})
        clock.now += 15.0  # the heal window is over
        c.freshness.known_at = clock.now
        assert not c.healing()
        assert (await c.get("T"), registry.reads) == (before_t, 2)  # served, no read waited for
        await settle()
        assert registry.reads == 3  # read again in the background
        after = await c.get("T")
        assert after is not None and after.data == route("a", "b", "c") and registry.reads == 3
        await c.on_event("registerQueues", queues_written("T", "c", replay=False))
        await settle()  # dropped and read again: the pre-loss route never comes back
        assert c.stats()["heal_hits"] == 1 and registry.reads == 4
        clock.now += 15.0  # as long again: the pre-loss routes nobody asked for are dropped
        c.freshness.known_at = clock.now
        again = await c.get("U")
        assert again is not before_u and again is not None and again.data == route("a", "b", "c")
        assert c.stats()["heal_hits"] == 1 and registry.reads == 5
    finally:
        await c.close()


async def test_during_a_heal_a_route_read_since_the_loss_outlives_the_replays(
    registry: Registry, clock: Clock
) -> None:
    """#27 with cold caches: every replay names every topic (twenty a second per topic at the
    RIP-29 shape), and every one used to drop the routes read since the loss, or keep a read in
    flight from being stored: every lookup read its route from Redis, competing with the replays
    (the cached workers' heal 23-25 s instead of 6). A route read since the loss is kept through
    replays and read again in the background when a lookup asks for it HEAL_REREAD_S or more
    after its read; a broker's own change ends it."""
    c = new_cache(registry, clock, max_entries=10, refresh_s=60.0, heal_s=15.0)
    c.start()
    try:
        await c.on_reset("Redis holds a new data set")
        clock.now += 0.01
        registry.routes["T"] = route("a")  # only broker a replayed so far
        registry.gate = asyncio.Event()
        reading = asyncio.create_task(c.get("T"))
        await settle()
        await c.on_event("registerQueues", queues_written("T", "a", replay=True))  # meanwhile
        registry.gate.set()
        partial = await reading
        registry.gate = None
        assert partial is not None and await c.get("T") is partial and registry.reads == 1  # kept
        registry.routes["T"] = route("a", "b")
        for _ in range(5):  # replays, lookups within HEAL_REREAD_S of the read: not read again
            clock.now += HEAL_REREAD_S / 10
            c.freshness.known_at = clock.now
            await c.on_event("registerQueues", queues_written("T", "b", replay=True))
            await settle()
            assert await c.get("T") is partial and c.peek("T") is partial
        assert registry.reads == 1
        clock.now += HEAL_REREAD_S  # the next lookup is served and has it read again
        c.freshness.known_at = clock.now
        assert await c.get("T") is partial
        await settle()
        grown = await c.get("T")
        assert grown is not None and grown.data == route("a", "b") and registry.reads == 2
        await c.on_event("registerQueues", queues_written("T", "b", replay=True))
        assert await c.get("T") is grown and registry.reads == 2
        registry.routes["T"] = route("b")
        await c.on_event("registerQueues", queues_written("T", "a", replay=False))
        after = await c.get("T")  # a broker's own write: Redis answers for it again
        assert after is not None and after.data == route("b") and registry.reads == 3
        assert c.healing()
    finally:
        await c.close()


async def test_peek_leaves_a_topic_not_ready_to_get(registry: Registry, clock: Clock) -> None:
    """During a heal a topic Redis did not hold is "not ready" until a change names it. The
    remoting fast path peeks inside the transport's read callback: a NotReady raised there
    closed the client's connection (seen beside CPU hogs in test_heal.py)."""
    c = new_cache(registry, clock, max_entries=10, heal_s=15.0)
    await c.on_reset("Redis holds a new data set")
    with pytest.raises(NotReady):
        await c.get("T")  # Redis does not hold it yet
    assert c.peek("T") is None  # fresh knowledge
    assert c.peek("T", caught_up=True) is None
    clock.now += 1.0  # the feed behind
    assert c.peek("T") is None
    with pytest.raises(NotReady):
        await c.get("T")


async def test_a_route_cached_before_the_loss_is_not_read_while_healing(
    registry: Registry, clock: Clock
) -> None:
    """Pre-loss routes are whole; a read during the heal is partial: replays never have them read."""
    c = new_cache(registry, clock, max_entries=10, refresh_s=60.0, heal_s=15.0)
    c.start()
    try:
        registry.routes["T"] = route("a", "b")
        before = await c.get("T")
        await c.on_reset("Redis holds a new data set")
        registry.routes["T"] = route("a")
        for _ in range(3):
            clock.now += HEAL_REREAD_S * 2
            c.freshness.known_at = clock.now
            await c.on_event("registerQueues", queues_written("T", "a", replay=True))
            await settle()
            assert await c.get("T") is before
        assert registry.reads == 1
    finally:
        await c.close()


def test_the_feeds_read_only_entry_is_decoded_once_for_every_listener() -> None:
    """#27: a heal's entries name 10,000 topics each; the route cache and the watch hub both ask
    what one entry changed. The feed's read-only mapping is decoded once; a dict, which could
    change between two calls, every time."""
    fields = queues_written("T", "a", replay=True)
    proxy = MappingProxyType(fields)
    first = route_impact(EventKind.REGISTER_QUEUES, proxy)
    assert first.topics == ("T",) and route_impact(EventKind.REGISTER_QUEUES, proxy) is first
    assert route_impact(EventKind.REGISTER_QUEUES, fields) is not first
    fields["upserted"] = "[]"
    assert route_impact(EventKind.REGISTER_QUEUES, fields).topics == ()


def test_an_entry_names_each_topic_it_changed_once() -> None:
    """registerQueues pairs topics with QueueData indexes, the other scripts (and an older
    release) with QueueData objects; a topic in two lists is named once, in first-seen order."""
    indexed = {"upserted": '[["A",0],["B",1]]', "removed": "[]", "mapped": "[]"}
    assert route_impact(EventKind.REGISTER_QUEUES, indexed).topics == ("A", "B")
    objects = {"upserted": '[["A",{"brokerName":"b","perm":6}],["C",{"perm":4}]]', "removed": '["D"]'}
    assert route_impact(EventKind.REGISTER_QUEUES, objects).topics == ("A", "C", "D")
    overlapping = {"upserted": '[["A",0],["B",0]]', "removed": '["C"]', "mapped": '["B","A"]'}
    assert route_impact(EventKind.REGISTER_QUEUES, overlapping).topics == ("A", "B", "C")
    wiped = {"upserted": '[["A",{"perm":4}]]', "topic": "A"}
    assert route_impact(EventKind.WIPE_PERM, wiped).topics == ("A",)


async def test_replayed_registrations_keep_the_heal_window_open(registry: Registry, clock: Clock) -> None:
    """Slaves are replayed after the masters and write no queue: their registrations carry the
    replay mark, so the window stays open while they land (closed under them, routes re-read
    then were dropped by each slave's registration)."""
    c = new_cache(registry, clock, max_entries=10, heal_s=15.0)
    registry.routes["T"] = route("a")
    before = await c.get("T")
    await c.on_reset("Redis holds a new data set")
    replayed = {"result": "ok", "cluster": "C", "brokerName": "a", "brokerAddr": "10.0.0.9:10911"}
    for _ in range(5):  # a slave's replayed registration every 4 s, up to 20 s after the loss
        clock.now += 4.0
        c.freshness.known_at = clock.now
        await c.on_event("register", {**replayed, "routeChanged": "1", "replay": "1"})
        assert c.healing() and await c.get("T") is before
    clock.now += REPLAY_QUIET_S + 0.01
    c.freshness.known_at = clock.now
    assert not c.healing()
    await c.on_event("register", {**replayed, "routeChanged": "1", "replay": "0"})
    assert not c.healing()
