"""The fault proxy itself: transparent by default, and each fault does what it says."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.faults.proxy import FaultProxy, ProxyThread
from tests.polling import scaled
from tests.redis_server import local_redis

pytestmark = pytest.mark.faults
TIMER_SLACK_S = 0.002  # how early a uvloop timer may fire, by time.monotonic()


@pytest.fixture
async def proxy() -> AsyncIterator[FaultProxy]:
    open_writers: set[asyncio.StreamWriter] = set()

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        open_writers.add(writer)
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(4096):
                writer.write(data)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    p = FaultProxy("127.0.0.1", server.sockets[0].getsockname()[1])
    await p.start()
    yield p
    await p.stop()
    server.close()
    for w in open_writers:
        w.transport.abort()
    for w in open_writers:  # closed before the loop is: no ResourceWarning of a transport left open
        await _closed(w)
    await server.wait_closed()


async def _closed(w: asyncio.StreamWriter) -> None:
    """Close a stream and wait until its transport is gone (a fixed sleep is too short under load)."""
    w.close()
    with contextlib.suppress(ConnectionError, OSError):
        await w.wait_closed()


async def _connect(p: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", p.port)


async def _roundtrip(r: asyncio.StreamReader, w: asyncio.StreamWriter, data: bytes) -> bytes:
    w.write(data)
    await w.drain()
    return await r.readexactly(len(data))


async def test_forwards_bytes_unchanged(proxy: FaultProxy) -> None:
    r, w = await _connect(proxy)
    payload = bytes(range(256)) * 1000
    assert await _roundtrip(r, w, payload) == payload
    assert proxy.open_connections == 1
    await _closed(w)


async def test_latency_delays_each_direction(proxy: FaultProxy) -> None:
    r, w = await _connect(proxy)
    await _roundtrip(r, w, b"warm")
    try:
        proxy.latency(0.2)
        started = time.monotonic()
        assert await _roundtrip(r, w, b"slow") == b"slow"
        # 0.2 s out + 0.2 s back, a lower bound only. uvloop's timers count whole milliseconds
        # from the loop's cached "now", so each delay may end up to 1 ms early by this clock
        # (seen: 0.3995 s in a fresh clone's run).
        assert time.monotonic() - started >= 0.4 - 2 * TIMER_SLACK_S
        proxy.heal()
        assert proxy.delay == 0.0
    finally:  # a failed check must not leave the stream open for the next test's loop
        await _closed(w)


async def test_pause_holds_bytes_until_resume(proxy: FaultProxy) -> None:
    r, w = await _connect(proxy)
    await _roundtrip(r, w, b"warm")
    proxy.pause()
    w.write(b"held")
    await w.drain()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(r.readexactly(4), 0.3)
    proxy.resume()
    assert await asyncio.wait_for(r.readexactly(4), 5) == b"held"
    await _closed(w)


async def test_blackhole_drops_bytes_and_swallows_new_connections(proxy: FaultProxy) -> None:
    r, w = await _connect(proxy)
    await _roundtrip(r, w, b"warm")
    proxy.blackhole(True)
    w.write(b"lost")
    await w.drain()
    r2, w2 = await _connect(proxy)
    w2.write(b"also lost")
    await w2.drain()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(r.readexactly(1), 0.3)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(r2.readexactly(1), 0.1)
    assert proxy.dropped_bytes == len(b"lost") + len(b"also lost")
    proxy.blackhole(False)
    assert await _roundtrip(r, w, b"back") == b"back"  # dropped bytes stay dropped
    await _closed(w)
    await _closed(w2)


async def test_reset_aborts_every_connection(proxy: FaultProxy) -> None:
    conns = [await _connect(proxy) for _ in range(3)]
    for r, w in conns:
        await _roundtrip(r, w, b"x")
    assert proxy.reset() == 3
    for r, w in conns:
        with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
            await asyncio.wait_for(r.readexactly(1), 5)
        await _closed(w)
    assert proxy.open_connections == 0
    r, w = await _connect(proxy)  # new connections work at once
    assert await _roundtrip(r, w, b"again") == b"again"
    await _closed(w)


async def test_thread_proxy_in_front_of_a_real_redis() -> None:
    with local_redis() as redis_url:
        await _through_proxy(redis_url)


async def _through_proxy(redis_url: str) -> None:
    host_port = redis_url.split("//")[1].split("/")[0]
    host, _, port = host_port.rpartition(":")
    proxy = ProxyThread(host, int(port))
    client = Redis.from_url(proxy.url, socket_timeout=scaled(2.0))
    try:
        assert await client.ping() is True
        proxy.pause()
        with pytest.raises(Exception, match="Timeout"):
            await client.ping()
        proxy.heal()
        await client.aclose()
        client = Redis.from_url(proxy.url, socket_timeout=scaled(2.0))
        assert await client.ping() is True
        assert proxy.reset() == 1
        with pytest.raises(RedisConnectionError):
            await client.ping()  # the RST reaches the client...
        assert await client.ping() is True  # ...which reconnects through the proxy
    finally:
        await client.aclose()
        proxy.close()
