"""Resource limits on the remoting port: KV value size, remark length, new-topic names, frame
deadline, the worker's budget of partial-frame bytes, maxConnections (with /livez still up), and
the change log's byte budget."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import struct
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.domain.codes import topic_not_exist_remark
from namesrv.events.budget import trim_to_budget
from namesrv.keys import METRICS, REMOTING
from namesrv.limits import MAX_REMARK_CHARS
from namesrv.sim.client import RemotingClient
from namesrv.store.keyspace import Keyspace
from tests.conftest import close_client, start_client
from tests.polling import eventually

PUT_KV, GET_KV, ROUTE, REGISTER_TOPIC = 100, 101, 105, 217


@pytest.fixture
async def node(settings: Settings) -> AsyncIterator[tuple[Any, str]]:
    app = await start_client(settings)
    yield app, f"127.0.0.1:{app.app[REMOTING].port}"
    await close_client(app)


async def limited_node(settings: Settings, **limits: Any) -> tuple[Any, str]:
    app = await start_client(dataclasses.replace(settings, **limits))
    return app, f"127.0.0.1:{app.app[REMOTING].port}"


def refusals(app: Any, limit: str) -> float:
    value: float = app.app[METRICS].limit_refusals.labels(limit)._value.get()
    return value


def partial_frame(declared: int, sent: int) -> bytes:
    """The first ``sent`` bytes of a frame that declares ``declared`` bytes after its length."""
    header = orjson.dumps({"code": 105, "flag": 0, "language": "JAVA", "opaque": 1, "version": 479})
    head = struct.pack(">ii", declared, len(header)) + header
    return (head + b"x" * sent)[:sent]


async def test_kv_value_over_the_limit_is_code_1_and_changes_nothing(
    node: tuple[Any, str], redis: Redis, namespace: str
) -> None:
    app, addr = node
    async with await RemotingClient.connect(addr) as c:
        ok = await c.invoke(PUT_KV, {"namespace": "NS", "key": "k", "value": "v" * 65536})
        before = await redis.xlen(Keyspace(namespace).events)
        refused = await c.invoke(PUT_KV, {"namespace": "NS", "key": "k", "value": "w" * (15 * 1024 * 1024)})
        stored = await c.invoke(GET_KV, {"namespace": "NS", "key": "k"})
    assert ok.code == 0
    assert (refused.code, refused.remark) == (
        1,
        "KV value is 15728640 bytes; the maximum is 65536 (kvValueMaxBytes)",
    )
    assert stored.ext_fields == {"value": "v" * 65536}
    assert await redis.xlen(Keyspace(namespace).events) == before
    assert refusals(app, "kvValueMaxBytes") == 1


async def test_a_ten_megabyte_topic_is_not_echoed_whole(node: tuple[Any, str]) -> None:
    _, addr = node
    topic = "T" * (10 * 1024 * 1024)
    async with await RemotingClient.connect(addr) as c:
        reply = await c.invoke(ROUTE, {"topic": topic})
        kv = await c.invoke(GET_KV, {"namespace": "NS", "key": topic})
    assert reply.code == 17
    prefix = "No topic route info in name server for the topic: "
    full = len(topic_not_exist_remark(topic))
    assert reply.remark == (
        prefix
        + "T" * (MAX_REMARK_CHARS - len(prefix))
        + f"... ({full - MAX_REMARK_CHARS} more characters cut)"
    )
    assert kv.code == 22 and kv.remark is not None and len(kv.remark) < MAX_REMARK_CHARS + 64


async def test_register_topic_follows_topic_validator(
    node: tuple[Any, str], redis: Redis, namespace: str
) -> None:
    _, addr = node
    body = orjson.dumps(
        {"queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 8, "writeQueueNums": 8}]}
    )
    async with await RemotingClient.connect(addr) as c:
        too_long = await c.invoke(REGISTER_TOPIC, {"topic": "T" * 128}, body)
        illegal = await c.invoke(REGISTER_TOPIC, {"topic": "a b"}, body)
        perm = await c.invoke(
            REGISTER_TOPIC,
            {"topic": "T1"},
            orjson.dumps({"queueDatas": [{"brokerName": "broker-a", "perm": 999}]}),
        )
    assert (too_long.code, too_long.remark) == (
        1,
        "The specified topic is longer than topic max length (128 > 127).",
    )
    assert (illegal.code, illegal.remark) == (
        1,
        "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
    )
    assert perm.code == 1 and perm.remark is not None and "perm = 999 is out of range [0, 15]" in perm.remark
    assert await redis.xlen(Keyspace(namespace).events) == 0


async def test_a_frame_not_finished_in_time_closes_its_connection(settings: Settings) -> None:
    app, addr = await limited_node(settings, frameDeadlineSeconds=0.3)
    try:
        slow = await RemotingClient.connect(addr)
        slow.write_raw(partial_frame(1000, 100))
        async with await RemotingClient.connect(addr) as healthy:
            await asyncio.wait_for(slow.closed.wait(), 5)
            assert (await healthy.invoke(106)).code == 0  # the other connection is untouched
        assert refusals(app, "frameDeadlineSeconds") == 1
        assert app.app[REMOTING].guard.partial_bytes == 0
    finally:
        await close_client(app)


async def test_a_frame_trickling_in_is_judged_per_frame(settings: Settings) -> None:
    """Back-to-back frames that each end mid-chunk are not one slow frame."""
    app, addr = await limited_node(settings, frameDeadlineSeconds=0.3)
    try:
        async with await RemotingClient.connect(addr) as c:
            for _ in range(8):
                await asyncio.sleep(0.1)
                assert (await c.invoke(106)).code == 0
            assert not c.closed.is_set()
    finally:
        await close_client(app)


async def test_partial_frames_share_one_budget(settings: Settings) -> None:
    app, addr = await limited_node(settings, frameMaxLength=65536, partialFramesMaxBytes=100_000)
    guard = app.app[REMOTING].guard
    try:
        clients = [await RemotingClient.connect(addr) for _ in range(3)]
        for i, client in enumerate(clients[:2]):
            client.write_raw(partial_frame(60_000, 40_000))

            async def held(n: int = i + 1) -> bool:
                return bool(guard.partial_bytes == 40_000 * n)

            await eventually(held)
        clients[2].write_raw(partial_frame(60_000, 40_000))  # 120,000 > 100,000: this one goes
        await asyncio.wait_for(clients[2].closed.wait(), 5)
        assert [c.closed.is_set() for c in clients] == [False, False, True]
        assert guard.partial_bytes == 80_000
        assert refusals(app, "partialFramesMaxBytes") == 1
        for c in clients:
            await c.aclose()

        async def released() -> bool:
            return bool(guard.partial_bytes == 0)

        await eventually(released)
    finally:
        await close_client(app)


async def test_max_connections_refuses_the_rest_and_livez_stays_up(settings: Settings) -> None:
    app, addr = await limited_node(settings, maxConnections=20)
    host, port = addr.rsplit(":", 1)
    flood: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        for _ in range(300):
            flood.append(await asyncio.open_connection(host, int(port)))

        async def settled() -> bool:
            return bool(refusals(app, "maxConnections") == 280)

        await eventually(settled)
        assert len(app.app[REMOTING].connections) == 20
        resp = await app.get("/livez")
        assert resp.status == 200
        # the refused ones were closed by the worker: their reads end at once
        closed = 0
        for reader, _ in flood:
            with contextlib.suppress(TimeoutError, ConnectionError):
                closed += await asyncio.wait_for(reader.read(1), 0.2) == b""
        assert closed == 280
    finally:
        for _, writer in flood:
            writer.close()
        await close_client(app)


async def test_change_log_is_trimmed_to_its_byte_budget(redis: Redis, namespace: str) -> None:
    stream = Keyspace(namespace).events
    pipe = redis.pipeline(transaction=False)
    for i in range(20_000):
        pipe.xadd(
            stream, {"kind": "kvPut", "ts": str(i), "namespace": "NS", "key": f"k{i}", "pad": "p" * 200}
        )
    await pipe.execute()
    before = await redis.memory_usage(stream, samples=0)
    assert before is not None
    budget = before // 4
    check = await trim_to_budget(redis, stream, budget)
    assert check.entries == 20_000 and check.trimmed > 0
    after = await redis.memory_usage(stream, samples=0)
    assert after is not None and after <= budget
    assert (await trim_to_budget(redis, stream, budget)).trimmed == 0  # under budget: left alone
    await redis.delete(stream)


async def test_workers_keep_the_change_log_within_its_byte_budget(
    settings: Settings, redis: Redis, namespace: str
) -> None:
    stream = Keyspace(namespace).events
    pipe = redis.pipeline(transaction=False)
    for i in range(20_000):
        pipe.xadd(
            stream, {"kind": "kvPut", "ts": str(i), "namespace": "NS", "key": f"k{i}", "pad": "p" * 200}
        )
    await pipe.execute()
    app, _ = await limited_node(settings, eventsMaxBytes=1 << 20)
    try:
        metrics = app.app[METRICS]

        async def trimmed() -> bool:
            return bool(metrics.events_trimmed._value.get() > 0)

        await eventually(trimmed, timeout=10)
        used = await redis.memory_usage(stream, samples=0)
        assert used is not None and used <= 1 << 20
        assert b"namesrv_events_stream_bytes" in (await (await app.get("/metrics")).read())
    finally:
        await close_client(app)
