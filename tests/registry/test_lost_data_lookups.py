"""A cache miss right after Redis lost its data (issue #27): before the change feed's next poll
notices the new data set, a worker's knowledge is still within the staleness bound, yet a miss
reads the new, empty data set. Its "no such topic" is not an answer: the topic may be one the
heal is about to bring back. The read says which data set it came from; the worker compares."""

from __future__ import annotations

import time

import pytest
from redis.asyncio import Redis

from namesrv.domain.errors import NotReady
from namesrv.registry.route_cache import RouteCache
from namesrv.registry.route_reader import RouteReader
from namesrv.registry.service import RegistryService
from namesrv.store.keyspace import Keyspace
from tests.builders import ManualFreshness, register
from tests.registry.helpers import CLUSTER, MASTER
from tests.registry_state import SCAN_COUNT

KNOWN = "data-set-1"


def fresh_cache(service: RegistryService) -> tuple[RouteCache, ManualFreshness]:
    """A cache whose feed learned from ``KNOWN`` and read everything a moment ago (the bound is
    a minute: a busy machine must not make the knowledge stale)."""
    feed = ManualFreshness()
    feed.instance = KNOWN
    cache = RouteCache(
        RouteReader(service.store, service.settings).read,
        feed,
        staleness_s=60.0,
        outage_s=30.0,
        catch_up_s=1.0,
        negative_s=60.0,
        max_entries=100,
        heal_s=15.0,
    )
    feed.known_at = time.monotonic()
    return cache, feed


async def lose_everything(redis: Redis, namespace: str) -> None:
    """What a restart without persistence, a FLUSHALL or a failover to an empty replica leaves of
    this registry (other tests' namespaces share the server)."""
    keys = [key async for key in redis.scan_iter(match=Keyspace(namespace).prefix + "*", count=SCAN_COUNT)]
    assert keys
    await redis.delete(*keys)


async def test_no_such_topic_from_a_data_set_the_feed_has_not_seen_is_not_ready(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    k = Keyspace(namespace)
    await redis.hset(k.meta, "instance", KNOWN)  # what the feed's first poll names
    await service.register_broker(register(CLUSTER, "broker-a", MASTER, topics=["T", "U"]))
    cache, feed = fresh_cache(service)
    assert (await cache.get("T")) is not None
    assert await cache.get("Nope") is None  # the data set the feed knows: a true "no such topic"

    await lose_everything(redis, namespace)
    with pytest.raises(NotReady):
        await cache.get("U")  # not cached: read from the empty data set
    await redis.hset(k.meta, "instance", "data-set-2")  # another worker's feed named the new one
    with pytest.raises(NotReady):
        await cache.get("U")
    assert cache.heal_refusals == 2
    assert "U" not in cache._missing  # refused, not remembered as missing

    feed.instance = "data-set-2"  # this feed polled too (and its reset opens the heal window)
    await cache.on_reset("Redis holds a new data set")
    with pytest.raises(NotReady):
        await cache.get("U")
    assert cache.heal_refusals == 3


async def test_a_data_set_with_no_name_yet_is_not_the_one_the_feed_knows(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    """Right after a restart no worker has polled: Redis holds no instance at all."""
    await redis.hset(Keyspace(namespace).meta, "instance", KNOWN)
    cache, _ = fresh_cache(service)
    assert await cache.get("Nope") is None
    await lose_everything(redis, namespace)
    with pytest.raises(NotReady):
        await cache.get("Other")


async def test_a_promoted_replica_that_missed_writes_is_not_believed(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    """A replica promoted while it was behind keeps the data set's identity, but its change log
    ends before the entry the worker's feed applied last: its "no such topic" is not an answer
    either. A change log that goes on past it is (the feed may apply newer entries while a
    read is in flight: the entry applied is taken before the read)."""
    k = Keyspace(namespace)
    await redis.hset(k.meta, "instance", KNOWN)
    await service.register_broker(register(CLUSTER, "broker-a", MASTER, topics=["T", "T2"]))
    ((replicated, _),) = await redis.xrevrange(k.events, count=1)  # what the replica holds
    await service.register_broker(register(CLUSTER, "broker-b", "127.0.0.1:10921", topics=["U", "U2"]))
    ((applied, _),) = await redis.xrevrange(k.events, count=1)
    cache, feed = fresh_cache(service)
    feed.last_id = applied  # the feed applied the registration the replica missed
    assert await cache.get("Nope") is None  # nothing lost: a true "no such topic"

    missed = [i for i, _ in await redis.xrange(k.events, min=f"({replicated}", max="+")]
    await redis.xdel(k.events, *missed)
    await redis.delete(k.topic("U"))  # what the replica never got
    with pytest.raises(NotReady):
        await cache.get("U")
    with pytest.raises(NotReady):
        await cache.get("Never")  # nor for a topic that never existed, until the feed sees the gap
    assert "Never" not in cache._missing
    assert await cache.get("Nope") is None  # remembered as missing before the loss

    feed.last_id = replicated  # a feed that had applied no more than the replica holds
    assert await cache.get("Nope2") is None
    await service.register_broker(register(CLUSTER, "broker-c", "127.0.0.1:10931", topics=["V", "V2"]))
    assert await cache.get("Nope3") is None  # Redis went on past it: nothing lost


async def test_before_its_first_poll_a_feed_judges_no_data_set(service: RegistryService) -> None:
    """A worker that has not polled yet knows no instance: nothing to compare with."""
    cache, feed = fresh_cache(service)
    feed.instance = ""
    assert await cache.get("Nope") is None
