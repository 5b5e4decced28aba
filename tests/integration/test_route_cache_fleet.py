"""Route caches of two workers under concurrent change: no lookup returns data older than the
staleness bound, and no expired broker is served past its deadline."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.domain.model import TopicRouteData
from namesrv.keys import SERVICE
from namesrv.registry.route_cache import RouteCache
from namesrv.registry.route_reader import RouteReader
from namesrv.registry.service import RegistryService
from namesrv.store.keyspace import Keyspace
from tests.builders import register
from tests.conftest import close_client, start_client

BOUND = 0.100  # routeCacheStalenessMillis
SLACK = 0.005
TOPICS = [f"T{i}" for i in range(8)]
BROKERS = ["a", "b", "c"]
View = tuple[tuple[tuple[str, tuple[tuple[int, str], ...]], ...], tuple[tuple[str, int, int], ...]] | None


def view(route: TopicRouteData | None) -> View:
    if route is None:
        return None
    return (
        tuple(sorted((b.brokerName, tuple(sorted(b.brokerAddrs.items()))) for b in route.brokerDatas)),
        tuple(sorted((q.brokerName, q.perm, q.readQueueNums) for q in route.queueDatas)),
    )


@dataclass
class Truth:
    start: float  # when the write that produced it began (it may have committed from then on)
    state: dict[str, View]


@dataclass
class Seen:
    start: float
    end: float
    topic: str
    result: View


def acceptable(seen: Seen, truths: list[Truth], ends: list[float]) -> bool:
    """Some state the registry was in during [start - BOUND, end] matches what was served."""
    for i, truth in enumerate(truths):
        valid_until = ends[i + 1] if i + 1 < len(ends) else math.inf
        overlaps = truth.start <= seen.end and valid_until >= seen.start - BOUND - SLACK
        if overlaps and truth.state[seen.topic] == seen.result:
            return True
    return False


async def run_scenario(
    seed: int, a: RegistryService, b: RegistryService, redis: Redis, namespace: str
) -> None:
    rng = random.Random(seed)
    counters = dict.fromkeys(BROKERS, 0)
    truths: list[Truth] = []
    ends: list[float] = [-math.inf]  # ends[i]: when the write that produced truths[i] had surely committed
    seen: list[Seen] = []
    stop = asyncio.Event()

    async def snapshot() -> dict[str, View]:
        reader = RouteReader(a.store, a.settings)
        return {t: view((await reader.read(t)).route) for t in TOPICS}

    async def write(op: Callable[[], Awaitable[Any]]) -> None:
        start = time.monotonic()
        await op()
        ends.append(time.monotonic())
        truths.append(Truth(start, await snapshot()))

    async def reader(service: RegistryService) -> None:
        while not stop.is_set():
            topic = rng.choice(TOPICS)
            start = time.monotonic()
            result = view(await service.route(topic))
            seen.append(Seen(start, time.monotonic(), topic, result))
            await asyncio.sleep(rng.random() * 0.003)

    def registrar(name: str, timeout: int | None = None) -> Callable[[], Awaitable[Any]]:
        counters[name] += 1
        topics = {t: (counters[name], counters[name], 6, 0) for t in rng.sample(TOPICS, rng.randint(2, 5))}
        addr = f"10.0.0.{BROKERS.index(name) + 1}:10911"
        return lambda: rng.choice((a, b)).register_broker(
            register(name=name, addr=addr, topics=topics, counter=counters[name], timeout=timeout)
        )

    async def expire(name: str) -> None:
        """Register with a 1 s timeout, then wait past the deadline: the route changes on its own."""
        await write(registrar(name, timeout=1000))
        k = Keyspace(namespace)
        deadline = float(
            await redis.zscore(k.deadlines, f"DefaultCluster/10.0.0.{BROKERS.index(name) + 1}:10911") or 0
        )
        asked = time.monotonic()  # before the reply: the earliest the deadline can come, locally
        seconds, micros = await redis.time()
        wait = (deadline - (int(seconds) * 1000 + int(micros) / 1000)) / 1000
        start = asked + wait - 0.01
        await asyncio.sleep(wait + 0.05)
        # What a worker's sweep does within scanNotActiveBrokerInterval: without it, a broker that
        # re-registers shows its pre-expiry queues between the registration's two commits.
        await a.sweep()
        ends.append(time.monotonic())
        truths.append(Truth(start, await snapshot()))

    truths.append(Truth(-math.inf, await snapshot()))
    readers = [asyncio.create_task(reader(s)) for s in (a, b, a, b)]
    for _ in range(18):
        name = rng.choice(BROKERS)
        choice = rng.random()
        if choice < 0.35:
            await write(registrar(name))
        elif choice < 0.5:
            await write(lambda n=name: rng.choice((a, b)).change_write_perm(n, wipe=True))
        elif choice < 0.6:
            await write(lambda n=name: rng.choice((a, b)).change_write_perm(n, wipe=False))
        elif choice < 0.75:
            topic = rng.choice(TOPICS)
            await write(lambda t=topic: rng.choice((a, b)).delete_topic(t))
        elif choice < 0.9:
            await write(
                lambda n=name: rng.choice((a, b)).unregister_broker(
                    "DefaultCluster", f"10.0.0.{BROKERS.index(n) + 1}:10911", n, 0
                )
            )
        else:
            await expire(name)
        await asyncio.sleep(rng.random() * 0.05)
    await asyncio.sleep(0.15)
    stop.set()
    await asyncio.gather(*readers)

    bad = [s for s in seen if not acceptable(s, truths, ends)]
    if bad:  # print the timeline around the first bad lookup: pytest shows it on failure
        first = bad[0]
        lines = [f"lookup {first.topic} [{first.start:.4f}, {first.end:.4f}] -> {first.result}"]
        for i, t in enumerate(truths):
            until = ends[i + 1] if i + 1 < len(ends) else math.inf
            if until >= first.start - 1 and t.start <= first.end + 1:
                lines.append(f"  truth {i} [{t.start:.4f}, {until:.4f}]: {t.state[first.topic]}")
        print("\n".join(lines))
    assert bad == [], f"{len(bad)} of {len(seen)} lookups returned data older than {BOUND}s: {bad[:3]}"
    assert len(seen) > 200


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_cached_lookups_are_never_older_than_the_bound(
    settings: Settings, redis: Redis, namespace: str, seed: int
) -> None:
    cached = dataclasses.replace(
        settings, routeCacheStalenessMillis=int(BOUND * 1000), scanNotActiveBrokerInterval=60_000
    )
    app_a, app_b = await start_client(cached), await start_client(dataclasses.replace(cached))
    try:
        a, b = app_a.app[SERVICE], app_b.app[SERVICE]
        await run_scenario(seed, a, b, redis, namespace)
        for service in (a, b):
            assert isinstance(service.lookups, RouteCache)
            stats = service.lookups.stats()
            assert stats["hits"] > 0 and stats["invalidations"] > 0
    finally:
        await close_client(app_a)
        await close_client(app_b)


async def test_a_hit_makes_no_redis_call(client: Any) -> None:
    service: RegistryService = client.app[SERVICE]
    cache = service.lookups
    assert isinstance(cache, RouteCache)
    await service.register_broker(register())
    await asyncio.sleep(0.3)  # let the change feed apply the registration's own events
    count = 'namesrv_script_seconds_count{script="getRouteInfo"}'
    stats_before = cache.stats()
    reads_before = _value(await (await client.get("/metrics")).text(), count)
    for _ in range(20):
        assert (await client.get("/v1/routes/TopicTest")).status == 200
    text = await (await client.get("/metrics")).text()
    stats = {k: v - stats_before[k] for k, v in cache.stats().items()}
    # A busy machine can delay the change feed past the bound: those lookups bypass to Redis.
    assert stats["hits"] + stats["misses"] + stats["bypasses"] == 20
    assert _value(text, count) - reads_before == stats["misses"] + stats["bypasses"]
    assert stats["hits"] >= 1
    prefix = "namesrv_route_cache_lookups_total{"
    labels = {line.split('"')[1] for line in text.splitlines() if line.startswith(prefix)}
    assert labels == {"hit", "miss", "bypass", "shed", "outage", "unavailable", "heal", "heal_not_ready"}


def _value(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name):
            return float(line.split()[-1])
    return 0.0  # a labelled series appears at its first observation
