"""A KV flood (#25 row 3): a namespace filled to its limit and read in loops by several clients
costs Redis one read per worker per change, not one per request; a change made through one worker
reaches the others' answers."""

from __future__ import annotations

import asyncio
import dataclasses

from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.keys import FEED, REMOTING, SERVICE
from namesrv.sim.client import RemotingClient
from tests.conftest import close_client, start_client
from tests.polling import eventually

LIST = 219


async def multi_calls(redis: Redis) -> int:
    """Namespace reads Redis served: nothing else the workers send is a MULTI."""
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_multi", {}).get("calls", 0))


async def test_namespace_reads_in_loops_cost_redis_one_read_per_change(
    settings: Settings, redis: Redis
) -> None:
    small = dataclasses.replace(settings, kvNamespaceMaxBytes=1 << 20)
    a, b = await start_client(small), await start_client(dataclasses.replace(small))
    try:
        addr_a, addr_b = (f"127.0.0.1:{w.app[REMOTING].port}" for w in (a, b))
        async with await RemotingClient.connect(addr_a) as c:
            value = "v" * 60 * 1024
            codes = [
                (await c.invoke(100, {"namespace": "FLOOD", "key": f"k{i}", "value": value})).code
                for i in range(20)
            ]
        assert codes == [0] * 17 + [1] * 3  # 17 entries of 60 KiB (+ key) fit in 1 MiB; the rest are refused
        for w in (a, b):  # both have applied every put: what follows changes nothing
            assert await w.app[FEED].wait_fresh(10)
        before = await multi_calls(redis)

        async def loop(addr: str) -> list[int]:
            async with await RemotingClient.connect(addr) as c:
                return [(await c.invoke(LIST, {"namespace": "FLOOD"})).code for _ in range(50)]

        answers = await asyncio.gather(*(loop(addr) for addr in (addr_a, addr_b, addr_a, addr_b)))
        assert answers == [[0] * 50] * 4
        # one namespace read per worker (a MULTI of SISMEMBER + HGETALL each), for 200 answers
        assert await multi_calls(redis) - before == 2
        assert [w.app[SERVICE].kv_tables.reads for w in (a, b)] == [1, 1]  # one read per worker, 200 answers

        # a change through B reaches A's answers (within the change feed's staleness bound)
        async with await RemotingClient.connect(addr_b) as c:
            assert (await c.invoke(102, {"namespace": "FLOOD", "key": "k0"})).code == 0

        async def a_sees_the_delete() -> bool:
            async with await RemotingClient.connect(addr_a) as c:
                reply = await c.invoke(LIST, {"namespace": "FLOOD"})
            return b'"k0"' not in (reply.body or b"")

        await eventually(a_sees_the_delete, what="worker A answers without the deleted key")
    finally:
        await close_client(a)
        await close_client(b)
