"""Connection slots against a real worker on real sockets: the per-peer cap keeps one address from
locking others out, a connection that sends no whole frame is closed within
firstFrameDeadlineSeconds, and every way a connection ends gives its slot back exactly once, so
the worker's count and the per-peer counts return to 0."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import ssl
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from namesrv.config import Settings
from namesrv.keys import METRICS, REMOTING
from namesrv.remoting.server import RemotingServer
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from tests.conftest import close_client, start_client
from tests.integration.test_lifecycle import Worker
from tests.integration.test_tls import Pki, pki, tls_settings  # noqa: F401 (pki: a fixture)
from tests.polling import eventually

CLUSTER_INFO, ROUTE = 106, 105
FLOOD_ADDRESS = "127.0.0.2"  # another loopback address: a second peer on the same machine


def refusals(app: Any, limit: str) -> float:
    value: float = app.app[METRICS].limit_refusals.labels(limit)._value.get()
    return value


def server(app: Any) -> RemotingServer:
    remoting: RemotingServer = app.app[REMOTING]
    return remoting


def counts(app: Any) -> tuple[int, dict[str, int], int]:
    """(slots held, slots per peer, admitted connections) of the worker."""
    remoting = server(app)
    return remoting.slots.total, dict(remoting.slots.per_peer), len(remoting.connections)


async def all_released(app: Any) -> None:
    await eventually(lambda: counts(app) == (0, {}, 0), timeout=30)
    metrics = app.app[METRICS]
    assert (metrics.connections._value.get(), metrics.connection_peers._value.get()) == (0, 0)


async def node(settings: Settings, **options: Any) -> tuple[Any, int]:
    app = await start_client(dataclasses.replace(settings, **options))
    return app, server(app).port


class RawPeers:
    """Plain sockets that a test opens and this fixture closes."""

    def __init__(self) -> None:
        self.writers: list[asyncio.StreamWriter] = []

    async def open(
        self, port: int, source: str = "127.0.0.1", **kwargs: Any
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0), **kwargs)
        self.writers.append(writer)
        return reader, writer

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()


@pytest.fixture
async def raw() -> AsyncIterator[RawPeers]:
    peers = RawPeers()
    yield peers
    await peers.close()


async def closed_by_worker(reader: asyncio.StreamReader) -> bool:
    """True once the worker closed or reset the connection (replies before that are skipped)."""
    with contextlib.suppress(ConnectionError):
        await asyncio.wait_for(reader.read(), 30)
    return True


def frame(code: int, ext_fields: dict[str, str] | None = None, opaque: int = 1) -> bytes:
    header = orjson.dumps(
        {"code": code, "flag": 0, "language": "JAVA", "opaque": opaque, "version": 479}
        | ({"extFields": ext_fields} if ext_fields else {})
    )
    return struct.pack(">ii", 4 + len(header), len(header)) + header


async def test_one_address_cannot_lock_out_another(settings: Settings, raw: RawPeers) -> None:
    app, port = await node(settings, maxConnections=50, maxConnectionsPerPeer=10)
    try:
        flood = [await raw.open(port, FLOOD_ADDRESS) for _ in range(100)]
        await eventually(lambda: refusals(app, "maxConnectionsPerPeer") == 90, timeout=30)
        assert counts(app) == (10, {FLOOD_ADDRESS: 10}, 10)
        async with await RemotingClient.connect(f"127.0.0.1:{port}") as broker:
            assert (await broker.invoke(CLUSTER_INFO)).code == 0  # served while the flood holds on
        assert refusals(app, "maxConnections") == 0
        refused = sum([await closed_by_worker(reader) for reader, _ in flood[10:]])
        assert refused == 90
        await raw.close()
        await all_released(app)
    finally:
        await close_client(app)


async def test_a_connection_that_sends_no_frame_is_closed_at_the_first_frame_deadline(
    settings: Settings, raw: RawPeers
) -> None:
    app, port = await node(settings, firstFrameDeadlineSeconds=0.5)
    try:
        silent_reader, _ = await raw.open(port)
        garbage_reader, garbage = await raw.open(port)
        garbage.write(b"\x00\x00")  # two bytes of a length: never a whole frame
        async with await RemotingClient.connect(f"127.0.0.1:{port}") as talking:
            assert (await talking.invoke(CLUSTER_INFO)).code == 0
            assert await closed_by_worker(silent_reader)
            assert await closed_by_worker(garbage_reader)
            await asyncio.sleep(1.0)  # twice the deadline: one whole frame met it for good
            assert (await talking.invoke(CLUSTER_INFO)).code == 0
        assert refusals(app, "firstFrameDeadlineSeconds") == 2
        await raw.close()
        await all_released(app)
    finally:
        await close_client(app)


async def test_each_close_path_gives_the_slot_back(settings: Settings, raw: RawPeers) -> None:
    app, port = await node(
        settings,
        frameMaxLength=65536,
        partialFramesMaxBytes=100_000,
        frameDeadlineSeconds=0.5,
        serverChannelMaxIdleTimeSeconds=1,
    )
    try:
        # a bad frame (negative length)
        reader, writer = await raw.open(port)
        writer.write(struct.pack(">ii", -5, 0))
        assert await closed_by_worker(reader)
        await all_released(app)
        # two connections each holding 59,008 bytes of a frame: the second passes the budget
        held = []
        for _ in range(2):
            reader, writer = await raw.open(port)
            writer.write(frame(CLUSTER_INFO))
            writer.write(struct.pack(">ii", 60_000, 10) + b"x" * 59_000)
            held.append((reader, writer))
        assert any([await closed_by_worker(r) for r, _ in held])  # 118,000 > 100,000
        # the other one: its frame is not finished within frameDeadlineSeconds
        assert all([await closed_by_worker(r) for r, _ in held])
        assert refusals(app, "partialFramesMaxBytes") == 1
        assert refusals(app, "frameDeadlineSeconds") == 1
        await all_released(app)
        # idle for serverChannelMaxIdleTimeSeconds after a request
        client = await RemotingClient.connect(f"127.0.0.1:{port}")
        assert (await client.invoke(CLUSTER_INFO)).code == 0
        await asyncio.wait_for(client.closed.wait(), 30)
        await all_released(app)
        # the peer resets the connection, and the peer closes it
        reset = await RemotingClient.connect(f"127.0.0.1:{port}")
        closed = await RemotingClient.connect(f"127.0.0.1:{port}")
        assert (await reset.invoke(CLUSTER_INFO)).code == 0
        assert (await closed.invoke(CLUSTER_INFO)).code == 0
        reset.abort()
        closed.close()
        await all_released(app)
    finally:
        await close_client(app)


async def flood_without_reading(port: int) -> socket.socket:
    """A peer that sends requests until the worker stops reading them, and never reads a reply."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    batch = frame(ROUTE, {"topic": "NoSuchTopic"}) * 500
    while True:
        try:
            await asyncio.wait_for(loop.sock_sendall(sock, batch), 2)
        except TimeoutError:
            return sock  # the worker's buffers and ours are full: it no longer reads


async def test_a_peer_that_never_reads_its_replies_loses_its_slot(settings: Settings) -> None:
    """Closing waits for the replies to be read; a peer that never reads them is cut off."""
    app, port = await node(settings, serverChannelMaxIdleTimeSeconds=1)
    sock = await flood_without_reading(port)
    try:
        assert counts(app)[0] == 1
        await all_released(app)  # idle close, then aborted: not held for as long as the peer lives
        async with await RemotingClient.connect(f"127.0.0.1:{port}") as other:
            assert (await other.invoke(CLUSTER_INFO)).code == 0
    finally:
        sock.close()
        await close_client(app)


async def test_shutdown_releases_every_slot(settings: Settings) -> None:
    app, port = await node(settings)
    sock = await flood_without_reading(port)  # would hold the shutdown and its slot
    clients = [await RemotingClient.connect(f"127.0.0.1:{port}") for _ in range(3)]
    for client in clients:
        assert (await client.invoke(CLUSTER_INFO)).code == 0
    assert counts(app) == (4, {"127.0.0.1": 4}, 4)
    await close_client(app)
    assert counts(app) == (0, {}, 0)
    for client in clients:
        assert client.closed.is_set()
    sock.close()


async def test_tls_handshakes_hold_slots_and_give_them_back(
    settings: Settings,
    pki: Pki,  # noqa: F811
    raw: RawPeers,
) -> None:
    app, port = await node(
        tls_settings(settings, pki, "enforcing"), firstFrameDeadlineSeconds=1.0, maxConnectionsPerPeer=3
    )
    try:
        # a handshake that never starts holds a slot (the per-peer cap counts it) ...
        silent = [await raw.open(port, FLOOD_ADDRESS) for _ in range(4)]
        assert await closed_by_worker(silent[3][0])  # the fourth is over maxConnectionsPerPeer
        assert counts(app)[:2] == (3, {FLOOD_ADDRESS: 3})
        # ... until the first-frame deadline ends it
        assert all([await closed_by_worker(reader) for reader, _ in silent[:3]])
        await all_released(app)
        # a handshake that fails: a plain client on a TLS-only port
        reader, writer = await raw.open(port)
        writer.write(frame(CLUSTER_INFO))
        assert await closed_by_worker(reader)
        await all_released(app)
        # a TLS client served, then gone
        loop = asyncio.get_running_loop()
        _, client = await loop.create_connection(
            RemotingClient, "127.0.0.1", port, ssl=pki.client_context(), server_hostname="127.0.0.1"
        )
        assert (await client.invoke(CLUSTER_INFO)).code == 0
        assert counts(app) == (1, {"127.0.0.1": 1}, 1)
        await client.aclose()
        await all_released(app)
    finally:
        await close_client(app)


async def test_tls_connection_that_handshakes_but_sends_no_frame_is_closed(
    settings: Settings,
    pki: Pki,  # noqa: F811
    raw: RawPeers,
) -> None:
    app, port = await node(tls_settings(settings, pki, "permissive"), firstFrameDeadlineSeconds=1.0)
    try:
        reader, _ = await raw.open(port, ssl=pki.client_context(), server_hostname="127.0.0.1")
        await eventually(
            lambda: counts(app) == (1, {"127.0.0.1": 1}, 1), timeout=30
        )  # the server's side is done
        with contextlib.suppress(ssl.SSLError):
            assert await closed_by_worker(reader)
        assert refusals(app, "firstFrameDeadlineSeconds") == 1
        await all_released(app)
    finally:
        await close_client(app)


@pytest.fixture(autouse=True)
def _loopback_alias() -> None:
    """127.0.0.2 must be reachable (Linux routes all of 127/8 to lo)."""
    probe = socket.socket()
    try:
        probe.bind((FLOOD_ADDRESS, 0))
    except OSError:
        pytest.skip(f"{FLOOD_ADDRESS} is not a local address here")
    finally:
        probe.close()


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


async def test_a_flood_of_idle_connections_against_a_worker_process(
    redis_url: str, namespace: str, tmp_path: Path, raw: RawPeers
) -> None:
    """Issue 25 row 4 as reported, scaled down: idle connections from one address; brokers from
    another still get in, the idle ones are gone within seconds, the counts are back to 0."""
    env = {
        "NAMESRV_REDIS_URL": redis_url,
        "NAMESRV_NAMESPACE": namespace,
        "NAMESRV_MAX_CONNECTIONS": "200",
        "NAMESRV_MAX_CONNECTIONS_PER_PEER": "50",
        "NAMESRV_FIRST_FRAME_DEADLINE_SECONDS": "2",
    }
    worker = Worker(env, tmp_path)
    await worker.start()
    try:
        flood = [await raw.open(worker.remoting, FLOOD_ADDRESS) for _ in range(500)]
        async with await RemotingClient.connect(f"127.0.0.1:{worker.remoting}") as broker:
            reply = await SimBroker(
                broker, "DefaultCluster", "broker-a", "127.0.0.1:10911", topics=topic_configs(["T1", "T2"])
            ).register()
            assert reply.code == 0
        assert all([await closed_by_worker(reader) for reader, _ in flood])  # none sent a frame
        async with aiohttp.ClientSession() as session:

            async def released() -> bool:
                async with session.get(f"{worker.url}/metrics") as resp:
                    text = await resp.text()
                return (
                    metric(text, "namesrv_remoting_connections"),
                    metric(text, "namesrv_remoting_connection_peers"),
                ) == (0.0, 0.0)

            await eventually(released, timeout=30)
            async with session.get(f"{worker.url}/metrics") as resp:
                text = await resp.text()
        assert metric(text, 'namesrv_limit_refusals_total{limit="maxConnectionsPerPeer"}') == 450
        assert metric(text, 'namesrv_limit_refusals_total{limit="firstFrameDeadlineSeconds"}') == 50
    finally:
        code, output = await worker.stop()
    assert code == 0, output
    assert "(maxConnectionsPerPeer)" in output and "(firstFrameDeadlineSeconds)" in output
