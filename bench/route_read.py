"""What one route read costs Redis and the worker, by the width of the route.

A worker with a route cache reads a route with every address's deadline (its cached copy expires
with the earliest one and follows heartbeats); a worker without one needs the route for a single
answer, and while no broker is past its deadline ``getRouteInfo`` then returns the BrokerData as
stored. This registers 100 broker groups (a master and two slaves each) on a private Redis, with
topic ``G<n>`` on the first n groups, and measures both reads in Redis' own time
(``INFO commandstats``), then the worker's assembly and rendering of the reply, kept in the pieces
a cache shares or whole; last the worker's CPU per read of the widest route for one answer,
one read at a time and 16 at once, through the store's shared connections
(``store/script_pipe.py``) and through redis-py's pooled client as before:

    python -m bench.route_read            # routes of 1, 4, 32 and 100 groups

Not part of ``make bench``; a few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence

from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.domain import routes
from namesrv.domain.model import DataVersion, RegisterBrokerRequest, TopicConfig, TopicConfigWrapper
from namesrv.protocol.fastjson import Dialect
from namesrv.registry.route_lookups import encoding
from namesrv.registry.service import RegistryService
from namesrv.store.keyspace import Keyspace
from namesrv.store.registry_store import RegistryStore
from namesrv.store.scripts import ScriptRegistry
from support.redis_launcher import local_redis

GROUPS = 100
NAMESPACE = "route-read"


def _registration(group: int, broker_id: int, topics: Sequence[str]) -> RegisterBrokerRequest:
    table = {t: TopicConfig(t, 8, 8, 6) for t in topics}
    return RegisterBrokerRequest(
        clusterName="C",
        brokerAddr=f"10.0.{group}.{broker_id + 1}:10911",
        brokerName=f"broker-{group:03d}",
        brokerId=broker_id,
        haServerAddr=f"10.0.{group}.{broker_id + 1}:10912",
        wrapper=TopicConfigWrapper(table, DataVersion(1, 0, 1700000000000), {}),
        heartbeatTimeoutMillis=600_000,
    )


async def _redis_us(redis: Redis, store: RegistryStore, topic: str, for_cache: bool, reads: int) -> float:
    await redis.config_resetstat()
    for _ in range(reads):
        await store.route(topic, with_order=False, for_cache=for_cache)
    stats = await redis.info("commandstats")
    return float(stats["cmdstat_evalsha"]["usec"]) / reads


async def _worker_us(store: RegistryStore, topic: str, at_once: int, reads: int) -> float:
    """CPU seconds of this process per read (the Redis round trip's system calls included)."""

    async def reader(n: int) -> None:
        for _ in range(n):
            await store.route(topic, with_order=False, for_cache=False)

    each = max(1, reads // at_once)
    started = time.process_time()
    await asyncio.gather(*(reader(each) for _ in range(at_once)))
    return (time.process_time() - started) / (each * at_once) * 1e6


async def _worker_row(store: RegistryStore, topic: str, reads: int, rounds: int) -> str:
    pipe = store.pipe
    figures: dict[tuple[bool, int], list[float]] = {}
    for _ in range(rounds):  # alternated, as above
        for piped in (True, False):
            store.pipe = pipe if piped else None
            for at_once in (1, 16):
                took = await _worker_us(store, topic, at_once, reads)
                figures.setdefault((piped, at_once), []).append(took)
    store.pipe = pipe

    def median(piped: bool, at_once: int) -> float:
        return sorted(figures[piped, at_once])[rounds // 2]

    return (
        f"worker CPU per read of {topic} for one answer, 1 / 16 at once: shared connections "
        f"{median(True, 1):.0f} / {median(True, 16):.0f} µs, pooled client "
        f"{median(False, 1):.0f} / {median(False, 16):.0f} µs"
    )


def _render_us(snap_queues: list[str], snap_brokers: list[str], shared: bool, renders: int) -> float:
    started = time.perf_counter()
    for _ in range(renders):
        route = routes.assemble("T", snap_queues, snap_brokers, {}, {}, None, support_acting_master=False)
        encoding(route, Dialect.STANDARD, shared=shared)
    return (time.perf_counter() - started) / renders * 1e6


async def registry(url: str, widths: Sequence[int]) -> tuple[Redis, RegistryStore]:
    """The 100 groups registered, topic ``G<n>`` on the first n of them for each n in ``widths``."""
    redis = Redis.from_url(url, decode_responses=True)
    scripts = ScriptRegistry(redis)
    await scripts.preload()
    # a worker's deadline (redisTimeoutMillis' default): each call is bounded as a worker's is
    store = RegistryStore(
        redis, Keyspace(NAMESPACE), scripts, events_max_len=10_000, worker_id="bench", timeout_s=1.0
    )
    settings = Settings(redisUrl=url, namespace=NAMESPACE, httpPort=0, remotingPort=0)
    service = RegistryService(store, lambda: settings)
    try:
        for group in range(GROUPS):
            # two more topics: R7 refuses a new broker's registration of exactly one
            topics = [f"G{n}" for n in widths if group < n] + ["Z1", "Z2"]
            for broker_id in range(3):
                result, _ = await service.register_broker(_registration(group, broker_id, topics))
                if result is None:
                    raise RuntimeError(f"registering broker-{group:03d} id {broker_id} was refused")
    except BaseException:
        await redis.aclose()
        raise
    return redis, store


async def measure(url: str, widths: Sequence[int], reads: int, rounds: int) -> None:
    redis, store = await registry(url, widths)
    print(f"route read, Redis time per read (median of {rounds} rounds of {reads}) | worker's reply:")
    for n in widths:
        cached, once = [], []
        for _ in range(rounds):  # alternated: a machine's noise falls on both alike
            cached.append(await _redis_us(redis, store, f"G{n}", True, reads))
            once.append(await _redis_us(redis, store, f"G{n}", False, reads))
        snap = await store.route(f"G{n}", with_order=False, for_cache=False)
        pieces = _render_us(snap.queue_datas, snap.broker_datas, True, reads)
        whole = _render_us(snap.queue_datas, snap.broker_datas, False, reads)
        print(
            f"  {n:3d} groups: for a cache {sorted(cached)[rounds // 2]:7.1f} µs, "
            f"for one answer {sorted(once)[rounds // 2]:6.1f} µs | "
            f"assembled and rendered in pieces {pieces:6.1f} µs, whole {whole:6.1f} µs"
        )
    if store.pipe is not None:
        print("  " + await _worker_row(store, f"G{max(widths)}", reads, rounds))
    await store.close()
    await redis.aclose()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.route_read", description=__doc__.split("\n")[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[1, 4, 32, 100], help="groups per route")
    parser.add_argument("--reads", type=int, default=400, help="reads per round")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args(argv)
    if any(not 1 <= n <= GROUPS for n in opts.widths):
        parser.error(f"--widths must be between 1 and {GROUPS}")
    with local_redis() as url:
        asyncio.run(measure(url, opts.widths, opts.reads, opts.rounds))


if __name__ == "__main__":
    main()
