"""A closed remoting connection removes a broker only when no other open connection to the fleet
holds it (issue #25 row 10), and a close that removes nothing says why (row 8).

Two workers on one Redis, real sockets, the broker simulator as the broker."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.keys import METRICS, REMOTING
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from namesrv.store.keyspace import Keyspace
from tests.builders import register_json
from tests.conftest import close_client, start_client
from tests.polling import eventually

CLUSTER, ADDR = "DefaultCluster", "127.0.0.1:10911"


async def worker(settings: Settings) -> tuple[Any, str]:
    app = await start_client(settings)
    return app, f"127.0.0.1:{app.app[REMOTING].port}"


def broker(client: RemotingClient, timeout_ms: int | None = None) -> SimBroker:
    return SimBroker(
        client,
        CLUSTER,
        "broker-a",
        ADDR,
        topics=topic_configs(["TopicTest", "TBW102"]),
        timeout_ms=timeout_ms,
    )


async def route_code(addr: str) -> int:
    async with await RemotingClient.connect(addr) as c:
        return (await c.invoke(105, {"topic": "TopicTest"})).code


def kept(app: Any, reason: str) -> float:
    return float(app.app[METRICS].fenced.labels(reason)._value.get())


@pytest.fixture
async def two(settings: Settings) -> Any:
    a, b = await worker(settings), await worker(dataclasses.replace(settings))
    yield a, b
    await close_client(a[0])
    await close_client(b[0])


async def test_the_worker_that_took_the_latest_registration_losing_its_connection_keeps_the_broker(
    two: Any, redis: Redis, namespace: str
) -> None:
    """The reported case: the broker registers over both workers; the connection that carried the
    latest registration is reset. Before, that worker removed the broker for the whole fleet."""
    (a, addr_a), (b, addr_b) = two
    first, second = await RemotingClient.connect(addr_a), await RemotingClient.connect(addr_b)
    await broker(first).register()
    await broker(second).register()  # the latest registration: over worker B
    await second.aclose()
    await eventually(
        lambda: _holders(redis, namespace, closed=1, open_=1), what="B's connection marked closed"
    )
    assert await route_code(addr_a) == 0 and await route_code(addr_b) == 0
    assert kept(b, "close_held") == 1
    assert await redis.hexists(Keyspace(namespace).live, f"{CLUSTER}/{ADDR}")
    # The last connection goes: removed, although its own registration was not the latest one.
    await first.aclose()
    await eventually(lambda: _code_is(addr_b, 17), what="broker removed after its last connection closed")
    assert kept(a, "close") == 0 and not await redis.exists(Keyspace(namespace).holders(CLUSTER, ADDR))


async def test_a_registration_over_http_after_the_connection_still_fences_its_close(
    two: Any, client: Any, redis: Redis, namespace: str
) -> None:
    """A registration that came over no connection of the fleet is not the connection's to
    remove: the epoch fence decides, as before."""
    (a, addr_a), _ = two
    conn = await RemotingClient.connect(addr_a)
    await broker(conn).register()
    reply = await client.post("/v1/brokers/register", json=register_json(counter=2))
    assert reply.status == 200, await reply.text()
    await conn.aclose()
    await eventually(lambda: _kept_is(a, "close", 1), what="fenced close counted")
    assert await route_code(addr_a) == 0


async def test_a_close_after_the_broker_expired_says_so(
    settings: Settings, redis: Redis, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Row 8: a broker that stopped heartbeating expires; its idle connection closes later. That
    is neither a fenced removal nor "registered again elsewhere"."""
    app, addr = await worker(settings)
    try:
        conn = await RemotingClient.connect(addr)
        await broker(conn, timeout_ms=1000).register()
        await eventually(lambda: _code_is(addr, 17), what="broker expired")
        await eventually(lambda: _not_live(redis, namespace), what="the sweep removed the expired broker")
        with caplog.at_level(logging.INFO, logger="namesrv.remoting.server"):
            await conn.aclose()
            await eventually(lambda: _kept_is(app, "close_gone", 1), what="gone close counted")
        lines = [r.getMessage() for r in caplog.records if r.name == "namesrv.remoting.server"]
        assert any(
            f"broker {CLUSTER}/{ADDR} not removed: it had expired or was removed already" in m for m in lines
        )
        assert not any("registered again" in m for m in lines)
        assert kept(app, "close") == 0
    finally:
        await close_client(app)


async def _holders(redis: Redis, namespace: str, *, closed: int, open_: int) -> bool:
    marks = await redis.hvals(Keyspace(namespace).holders(CLUSTER, ADDR))
    return (sum(m.startswith("c:") for m in marks), sum(m.startswith("o:") for m in marks)) == (closed, open_)


async def _code_is(addr: str, code: int) -> bool:
    return await route_code(addr) == code


async def _kept_is(app: Any, reason: str, count: float) -> bool:
    return kept(app, reason) == count


async def _not_live(redis: Redis, namespace: str) -> bool:
    return not await redis.hexists(Keyspace(namespace).live, f"{CLUSTER}/{ADDR}")
