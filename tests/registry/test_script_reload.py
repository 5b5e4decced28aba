"""Redis forgets its scripts (SCRIPT FLUSH, a restart, a failover): a call loads them again and
goes on. A second flush between that load and the call's retry (seen beside a CPU hog in
test_fleet's double SCRIPT FLUSH) must not reach the caller as NOSCRIPT: the change feed took that
for an unreachable Redis and failed the next registration."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from namesrv.registry.service import RegistryService
from namesrv.store.keyspace import Keyspace
from namesrv.store.registry_store import RegistryStore
from namesrv.store.script_args import FeedStatus, ReadChangesArgs
from namesrv.store.script_call import CallContext
from namesrv.store.scripts import ScriptRegistry
from tests.builders import register


class FlushesAfterLoading(Redis):
    """A client of the real Redis that flushes the script cache right after each of its next
    ``flushes`` SCRIPT LOADs: the load's retry then finds its script gone again."""

    flushes = 0

    async def script_load(self, script: Any) -> str:
        sha: str = await super().script_load(script)
        if self.flushes > 0:
            self.flushes -= 1
            await self.script_flush()
        return sha


async def test_a_flush_between_reload_and_retry_is_loaded_again(
    redis_url: str, namespace: str, settings: Any
) -> None:
    redis = FlushesAfterLoading.from_url(redis_url, decode_responses=True)
    try:
        scripts = ScriptRegistry(redis)
        store = RegistryStore(redis, Keyspace(namespace), scripts, 1000, "w")
        service = RegistryService(store, lambda: settings)
        await redis.script_flush()
        redis.flushes = 1
        _, reg = await service.register_broker(register(topics=["T1", "T2"]))
        assert reg is not None
        assert redis.flushes == 0  # the flush happened, between a load and its call
        redis.flushes = 1
        route = await service.route("T2")
        assert route is not None and [q.brokerName for q in route.queueDatas] == ["broker-a"]
        assert redis.flushes == 0
    finally:
        await redis.aclose()


async def test_a_replicated_call_loads_its_script_again_after_a_second_flush(
    redis_url: str, namespace: str
) -> None:
    """The same for writes sent with WAIT (redisWriteReplicas), which do not use the bound script."""
    redis = FlushesAfterLoading.from_url(redis_url, decode_responses=True)
    try:
        scripts = ScriptRegistry(redis)
        await redis.script_flush()
        redis.flushes = 1  # the first reload is flushed again before its retry
        poll = ReadChangesArgs("", "w", "", 10)
        reply, held = await scripts.run_replicated(poll, CallContext(Keyspace(namespace), "", ""), 0, 100)
        assert redis.flushes == 0
        assert (reply.status, reply.entries, held) == (FeedStatus.ENTRIES, [], 0)
    finally:
        await redis.aclose()
