"""Work no client waits on (a heal's replay) may take longer than a request's Redis deadline:
``redis_patience`` adds to it for every call of the task that sets it, and only that task."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from namesrv.domain.errors import StoreUnavailable
from namesrv.store.keyspace import Keyspace
from namesrv.store.registry_store import RegistryStore, redis_patience
from namesrv.store.scripts import ScriptRegistry


async def test_patience_lengthens_the_deadline_of_its_own_task_only(redis: Redis, namespace: str) -> None:
    store = RegistryStore(redis, Keyspace(namespace), ScriptRegistry(redis), 1000, "w", timeout_s=0.05)

    async def slow() -> str:
        await asyncio.sleep(0.3)
        return "answered"

    async def patient() -> str:
        redis_patience.set(5.0)
        return await store._bounded(slow)

    with pytest.raises(StoreUnavailable, match="no answer within 50 ms"):
        await store._bounded(slow)
    assert await asyncio.create_task(patient()) == "answered"
    assert redis_patience.get() == 0.0  # the task's setting stayed in its task
    with pytest.raises(StoreUnavailable, match="no answer within 50 ms"):
        await store._bounded(slow)
