"""The fleet on Redis Sentinel (including a failover) and on Redis Cluster."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from namesrv.aio import cancel_and_wait
from namesrv.config import Settings
from namesrv.keys import REMOTING
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from namesrv.store.redis_client import close_client as close_redis
from namesrv.store.redis_client import follow_sentinel_master, is_cluster, make_client
from tests.conftest import close_client, start_client
from tests.failover_writes import fail_over
from tests.polling import eventually
from tests.redis_topologies import cluster_setup, sentinel_setup, topology_settings


@pytest.fixture(scope="module")
def sentinel() -> Iterator[tuple[str, int, int, int]]:
    with sentinel_setup() as setup:
        yield setup


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    with cluster_setup() as url:
        yield url


async def exercise(settings: Settings) -> None:
    """Registration in chunks, cached route lookups, KV, fleet-wide config, expiry and unregister,
    over remoting, with two workers on the same Redis."""
    a, b = await start_client(settings), await start_client(dataclasses.replace(settings))
    try:
        addr_a, addr_b = (f"127.0.0.1:{app.app[REMOTING].port}" for app in (a, b))
        conn = await RemotingClient.connect(addr_a)
        broker = SimBroker(
            conn,
            "DefaultCluster",
            "broker-a",
            "127.0.0.1:10911",
            topics=topic_configs([f"T{i:03d}" for i in range(150)]),
        )
        await broker.register()
        short = SimBroker(
            conn,
            "DefaultCluster",
            "broker-s",
            "127.0.0.1:20911",
            timeout_ms=3000,  # long enough for the reads below on a busy machine
            topics=topic_configs(["Short1", "Short2"]),
        )
        await short.register()
        async with await RemotingClient.connect(addr_b) as reader:
            for topic in ("T000", "T149", "Short1"):
                assert (await reader.invoke(105, {"topic": topic})).code == 0
            assert (await reader.invoke(100, {"namespace": "NS", "key": "k", "value": "v"})).code == 0
            assert (await reader.invoke(219, {"namespace": "NS"})).body == b'{"table":{"k":"v"}}'
            assert (await reader.invoke(318, body=b"enableTopicList=false\n")).code == 0
            for _ in range(40):  # worker A learns of it from the change log
                if (await conn.invoke(311)).remark == "disable":
                    break
                await asyncio.sleep(0.05)
            assert (await conn.invoke(311)).remark == "disable"
            # broker-s misses its 3 s deadline: no read serves it after that
            await eventually(lambda: _code_of(reader, "Short1", 17), timeout=10, what="broker-s expired")
            await broker.unregister()
            for _ in range(40):  # worker B serves its cached route until its feed reads the change
                if (await reader.invoke(105, {"topic": "T000"})).code == 17:
                    break
                await asyncio.sleep(0.025)
            assert (await reader.invoke(105, {"topic": "T000"})).code == 17
        await conn.aclose()
    finally:
        await close_client(a)
        await close_client(b)


async def test_fleet_on_sentinel(sentinel: tuple[str, int, int, int]) -> None:
    url = sentinel[0]
    client = make_client(url)
    assert not is_cluster(client)
    await close_redis(client)
    await exercise(topology_settings(url))


async def test_fleet_on_cluster(cluster: str) -> None:
    client = make_client(cluster)
    assert is_cluster(client)
    await client.aclose()
    await exercise(topology_settings(cluster))


async def test_sentinel_failover_keeps_the_registry_writable(sentinel: tuple[str, int, int, int]) -> None:
    url, master, replica, sentinel_port = sentinel
    settings = topology_settings(url)
    app = await start_client(settings)
    try:
        addr = f"127.0.0.1:{app.app[REMOTING].port}"
        async with await RemotingClient.connect(addr) as conn:
            first = SimBroker(
                conn,
                "DefaultCluster",
                "broker-a",
                "127.0.0.1:10911",
                topics=topic_configs(["Before1", "Before2"]),
            )
            await first.register()
            # Replication is asynchronous and SENTINEL FAILOVER does not wait for the replica: a
            # write it has not received yet is lost with the old master (a fixed 0.3 s was not
            # always enough on a loaded machine). WAIT returns once the replica has it all.
            old_master = redis.Redis(port=master)
            assert old_master.execute_command("WAIT", 1, 10_000) == 1
            old_master.close()
            s = redis.Redis(port=sentinel_port)
            s.execute_command("SENTINEL", "FAILOVER", "mymaster")
            for _ in range(100):
                if int(s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")[1]) == replica:
                    break
                await asyncio.sleep(0.1)
            s.close()
            second = SimBroker(
                conn,
                "DefaultCluster",
                "broker-b",
                "127.0.0.2:10911",
                topics=topic_configs(["After1", "After2"]),
            )
            # The broker registers again until its route shows, as it does every 30 s: the new
            # master may need a moment to accept writes, and until Sentinel demotes the old
            # master (late on a loaded machine) a registration it acknowledged is lost with it
            # (docs/operations.md, "When Redis is in trouble"). Measured loaded: 3 of 8 runs needed a second.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while True:
                reply: Any = await second.register(check=False)
                if reply.code == 0 and (await conn.invoke(105, {"topic": "After1"})).code == 0:
                    break
                assert loop.time() < deadline, reply
                await asyncio.sleep(0.2)
            assert (await conn.invoke(105, {"topic": "Before1"})).code == 0
    finally:
        await close_client(app)


async def test_a_connection_busy_when_the_master_moves_does_not_stay_on_the_old_master(
    sentinel: tuple[str, int, int, int],
) -> None:
    """A connection in use while Sentinel promotes a replica goes back to the pool still open to the
    old master, which accepts reads and writes until Sentinel demotes it (seconds later): the
    worker would split from the fleet that long. redis-py moves its own idea of the master as soon
    as any new connection asks the Sentinels, so the follower must not rely on it to see the move."""
    url, _, _, sentinel_port = sentinel
    client = make_client(url)
    pool: Any = client.connection_pool
    follower = asyncio.create_task(follow_sentinel_master(client, 0.05))
    s = redis.Redis(port=sentinel_port)
    try:
        await client.ping()
        await asyncio.sleep(0.1)  # the follower has seen the master once
        busy = await pool.get_connection()
        old = busy.port
        await fail_over(s)  # after the other failover test the old master takes a while to follow
        for _ in range(100):
            if int(s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")[1]) != old:
                break
            await asyncio.sleep(0.1)
        for _ in range(200):  # redis-py follows the Sentinels' SENTINEL MASTERS: at the switch
            new = await pool.get_master_address()  # what a new connection does first
            if new[1] != old:
                break
            await asyncio.sleep(0.05)
        assert new[1] != old
        await asyncio.sleep(0.3)  # a few of the follower's rounds
        await pool.release(busy)
        assert not busy.is_connected
        for _ in range(3):  # every pooled connection now talks to the new master
            assert (await client.config_get("port"))["port"] == str(new[1])
    finally:
        s.close()
        await cancel_and_wait(follower)
        await close_redis(client)


def test_bad_topology_urls_are_clear() -> None:
    with pytest.raises(ValueError, match="needs the master name"):
        make_client("redis+sentinel://127.0.0.1:26379")
    with pytest.raises(ValueError, match="is not host:port"):
        make_client("redis+cluster://127.0.0.1")


async def _code_of(client: RemotingClient, topic: str, code: int) -> bool:
    return (await client.invoke(105, {"topic": topic})).code == code
