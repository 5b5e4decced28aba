"""redisWriteReplicas: a write is answered only once a replica holds it, so a Sentinel failover
loses no write a client was told succeeded (docs/operations.md, "When Redis is in trouble")."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from namesrv.domain.errors import WriteNotReplicated
from namesrv.keys import METRICS, REMOTING, STORE
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from namesrv.store.redis_client import close_client as close_redis
from namesrv.store.redis_client import make_client
from tests.conftest import close_client, start_client
from tests.failover_writes import master_port, replicated_settings, signal_server, write_through_failover
from tests.polling import scaled
from tests.redis_topologies import sentinel_setup


@pytest.fixture(scope="module")
def sentinel() -> Iterator[tuple[str, int, int, int]]:
    with sentinel_setup() as setup:
        yield setup


async def test_a_write_waits_for_the_replica_and_fails_clearly_without_it(
    sentinel: tuple[str, int, int, int],
) -> None:
    url, _, _, sentinel_port = sentinel
    master = master_port(sentinel_port)
    replica_port = next(p for p in sentinel[1:3] if p != master)
    replica = redis.Redis(port=replica_port, decode_responses=True)
    # WAIT gets 1 s (a replica on a loaded machine may take a few hundred ms to confirm); calls
    # to Redis get 60 s, so a refusal that came after WAIT's timeout plus Redis' would show.
    settings = dataclasses.replace(replicated_settings(url, timeout_ms=1000), redisTimeoutMillis=60_000)
    app = await start_client(settings)
    store, metrics = app.app[STORE], app.app[METRICS]
    try:
        for i in range(20):  # answered only once the replica holds it: readable there at once
            await store.kv_put("NS", f"k{i}", f"v{i}", 1 << 20, 1 << 30)
            assert replica.hget(store.k.kv("NS"), f"k{i}") == f"v{i}"

        pid = signal_server(replica_port, signal.SIGSTOP)
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(WriteNotReplicated) as refused:
                await store.kv_put("NS", "stalled", "x", 1 << 20, 1 << 30)
            waited = loop.time() - started
        finally:
            os.kill(pid, signal.SIGCONT)
        assert refused.value.remark == (
            "write not confirmed by 1 Redis replica(s) within 1000 ms (redisWriteReplicas; 0 did): "
            "the master has it, a failover may lose it; retry"
        )
        assert refused.value.code == 1
        assert 1.0 <= waited < 60.0  # WAIT's own timeout, not redisTimeoutMillis on top
        assert metrics.unreplicated_writes._value.get() == 1
        # the master applied it; the request only could not promise it would survive a failover
        master_client = redis.Redis(port=master, decode_responses=True)
        assert master_client.hget(store.k.kv("NS"), "stalled") == "x"
        master_client.close()

        await store.kv_put("NS", "after", "y", 1 << 20, 1 << 30)  # the replica caught up: writes pass again
        assert replica.hget(store.k.kv("NS"), "after") == "y"
        assert replica.hget(store.k.kv("NS"), "stalled") == "x"
    finally:
        replica.close()
        await close_client(app)


async def test_a_registration_waits_once_after_its_last_chunk(sentinel: tuple[str, int, int, int]) -> None:
    """A registration in chunks waits after its last chunk only (and after its header calls, which
    may be all there is): the earlier chunks precede that one in the replication stream."""
    url, _, _, sentinel_port = sentinel
    settings = dataclasses.replace(replicated_settings(url), registerChunkTopics=40)
    app = await start_client(settings)
    store = app.app[STORE]
    waits: list[str] = []
    original = store.scripts.call_replicated

    async def counting(name: str, *args: Any) -> Any:
        waits.append(name)
        return await original(name, *args)

    store.scripts.call_replicated = counting
    replica_port = next(p for p in sentinel[1:3] if p != master_port(sentinel_port))
    replica = redis.Redis(port=replica_port, decode_responses=True)
    try:
        async with await RemotingClient.connect(f"127.0.0.1:{app.app[REMOTING].port}") as conn:
            topics = [f"R{i:03d}" for i in range(150)]
            broker = SimBroker(conn, "C", "broker-r", "127.0.0.1:30911", topics=topic_configs(topics))
            await broker.register()
        # the header twice: first asking Redis to reuse the body (it may be all a registration is)
        assert waits == ["registerBroker", "registerBroker", "registerBrokerTopics"]
        assert replica.scard(store.k.btopics("broker-r")) == 150
    finally:
        replica.close()
        await close_client(app)


async def test_no_acknowledged_write_is_lost_in_a_sentinel_failover(
    sentinel: tuple[str, int, int, int],
) -> None:
    """Writers keep writing through a failover; every write answered with success must be on the
    new master once the old one follows it. Without redisWriteReplicas about a second of writes
    was lost in every failover (docs/operations.md, "When Redis is in trouble")."""
    url, _, _, sentinel_port = sentinel
    result = await write_through_failover(
        replicated_settings(url, timeout_ms=500), sentinel_port, acked_after=50
    )
    assert result.lost == [], result
    assert result.acked_after_switch >= 50, result  # writing went on on the new master


async def test_the_worker_follows_a_promotion_before_sentinel_masters_reports_it() -> None:
    """With two replicas, SENTINEL MASTERS (what redis-py asks) names the old master until the
    other replica follows the new one; GET-MASTER-ADDR-BY-NAME names the promoted one at once."""
    with sentinel_setup(replicas=2) as (url, _, _, sentinel_port):
        client = make_client(url)
        pool: Any = client.connection_pool
        s = redis.Redis(port=sentinel_port, decode_responses=True)
        try:
            old = await pool.get_master_address()
            s.execute_command("SENTINEL", "FAILOVER", "mymaster")
            for _ in range(400):
                ours = await pool.get_master_address()
                if ours != old:
                    break
                await asyncio.sleep(0.05)
            state = s.sentinel_master("mymaster")  # SENTINEL MASTER: the record SENTINEL MASTERS lists
            assert ours != old
            assert (state["ip"], int(state["port"])) == old  # redis-py alone would still write to it
        finally:
            s.close()
            await close_redis(client)


async def test_every_replica_sentinel_reports_up_loses_nothing() -> None:
    """-1 with two replicas: a fixed count below the number of replicas is not enough, since the
    replica that is not promoted confirms writes the promoted one never gets (docs/operations.md)."""
    with sentinel_setup(replicas=2) as (url, _, _, sentinel_port):
        settings = replicated_settings(url, replicas=-1, timeout_ms=500)
        result = await write_through_failover(settings, sentinel_port, replicas=2, acked_after=50)
    assert result.lost == [], result
    assert result.acked_after_switch >= 50, result  # writing went on on the new master


async def test_writes_resume_once_sentinel_marks_a_lost_replica_down() -> None:
    """-1 waits for the replicas Sentinel considers up: a killed replica fails writes only until
    Sentinel's down-after time (2 s here), where a fixed count would fail them until it is back."""
    with sentinel_setup(replicas=2) as (url, master, replica, sentinel_port):
        # 2 s for WAIT: the replica left must confirm within it on a loaded machine too, or the
        # refusals would say "0 did" (the test is about which replicas count, not their speed).
        app = await start_client(replicated_settings(url, replicas=-1, timeout_ms=2000))
        store = app.app[STORE]
        try:
            await store.kv_put("NS", "before", "1", 1 << 20, 1 << 30)
            assert store.replicas_up == 2
            signal_server(replica, signal.SIGKILL)
            loop = asyncio.get_running_loop()
            killed = loop.time()
            remarks = set()
            while True:
                try:
                    await store.kv_put("NS", "after", "2", 1 << 20, 1 << 30)
                    break
                except WriteNotReplicated as exc:
                    remarks.add(exc.remark)
                assert loop.time() - killed < scaled(30), remarks
            assert store.replicas_up == 1
            assert remarks == {
                "write not confirmed by 2 Redis replica(s) within 2000 ms (redisWriteReplicas; 1 did): "
                "the master has it, a failover may lose it; retry"
            }
            m = redis.Redis(port=master, decode_responses=True)
            assert m.hget(store.k.kv("NS"), "after") == "2"
            m.close()
        finally:
            await close_client(app)
