"""The remoting listener: concurrency, oneway, header types, bad frames, connection-close removal
(fenced across workers), idle close, drain, GO_AWAY, overload and fleet-wide config."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import struct
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from namesrv.app import begin_drain
from namesrv.config import Settings
from namesrv.keys import REMOTING, SERVICE
from namesrv.protocol.remoting import SERIALIZE_ROCKETMQ, FrameDecoder, RemotingCommand, encode
from namesrv.registry.route_cache import RouteCache
from namesrv.registry.route_lookups import STALE
from namesrv.remoting.server import TURN_FRAMES
from namesrv.sim.broker import RegistrationFailed, SimBroker, topic_configs
from namesrv.sim.cli import main as sim_main
from namesrv.sim.client import RemotingClient, RemotingClientError
from namesrv.store.keyspace import Keyspace
from tests.conftest import close_client, start_client
from tests.polling import eventually, scaled


async def worker(settings: Settings) -> tuple[Any, str]:
    app = await start_client(settings)
    return app, f"127.0.0.1:{app.app[REMOTING].port}"


@pytest.fixture
async def node(settings: Settings) -> AsyncIterator[tuple[Any, str]]:
    # A lookup the change log has not caught up with waits for one shared read of it; only when
    # that read fails does it read Redis itself (64 at a time, the rest answered SYSTEM_BUSY). On
    # a loaded machine the shared read of a 2,000-frame burst can outlast the default 1 s Redis
    # timeout: these tests check the answers, so Redis may be slow here, not overloaded.
    patient = dataclasses.replace(settings, redisTimeoutMillis=int(scaled(10_000)))
    app, addr = await worker(patient)
    yield app, addr
    await close_client(app)


def broker(client: RemotingClient, name: str = "broker-a", addr: str = "127.0.0.1:10911") -> SimBroker:
    return SimBroker(client, "DefaultCluster", name, addr, topics=topic_configs(["TopicTest", "TBW102"]))


async def route_code(addr: str, topic: str = "TopicTest") -> int:
    async with await RemotingClient.connect(addr) as c:
        return (await c.invoke(105, {"topic": topic})).code


async def send_burst(
    addr: str, burst: list[RemotingCommand]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Every frame of ``burst`` in one write, on a connection of its own (a client far ahead of
    the worker)."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"".join(encode(cmd) for cmd in burst))
    return reader, writer


async def test_many_requests_in_flight_on_one_connection(node: tuple[Any, str]) -> None:
    _, addr = node
    async with await RemotingClient.connect(addr) as c:
        await broker(c).register()
        commands = [c.request(105, {"topic": "TopicTest" if i % 2 else "Missing"}) for i in range(200)]
        replies = await asyncio.gather(*(c.send(cmd) for cmd in commands))
    assert [r.opaque for r in replies] == [cmd.opaque for cmd in commands]
    assert [r.code for r in replies] == [0 if i % 2 else 17 for i in range(200)]


async def test_a_burst_of_frames_in_one_write_is_answered_whole(node: tuple[Any, str]) -> None:
    """2,000 frames in one write (a client far ahead of the worker): every one is answered once,
    with its own answer, and the connection goes on serving after it."""
    _, addr = node
    async with await RemotingClient.connect(addr) as c:
        await broker(c).register()
        burst = [c.request(105, {"topic": "TopicTest" if i % 3 else "Missing"}) for i in range(2000)]
        reader, writer = await send_burst(addr, burst)
        decoder = FrameDecoder(1 << 26)
        replies: list[RemotingCommand] = []
        while len(replies) < 2000:
            replies += decoder.feed(await asyncio.wait_for(reader.read(65536), 10))
        last = c.request(106)
        writer.write(encode(last))
        while len(replies) < 2001:
            replies += decoder.feed(await asyncio.wait_for(reader.read(65536), 10))
        writer.close()
    codes = {r.opaque: r.code for r in replies[:2000]}
    assert [codes.get(cmd.opaque) for cmd in burst] == [0 if i % 3 else 17 for i in range(2000)]
    assert (replies[-1].opaque, replies[-1].code) == (last.opaque, 0)


async def read_replies(reader: asyncio.StreamReader, count: int) -> list[RemotingCommand]:
    decoder = FrameDecoder(1 << 26)
    replies: list[RemotingCommand] = []
    while len(replies) < count:
        try:
            data = await asyncio.wait_for(reader.read(65536), 10)
        except ConnectionResetError:  # closed by the worker with some of our frames unread
            break
        if not data:
            break
        replies += decoder.feed(data)
    return replies


async def test_a_backlog_is_answered_a_turn_at_a_time(node: tuple[Any, str]) -> None:
    """A burst is answered TURN_FRAMES frames per turn of the event loop, reading paused until it
    is done: everything else the worker runs (here this test; in production the change log's
    poll) gets the loop between turns instead of waiting for the whole burst."""
    app, addr = node
    async with await RemotingClient.connect(addr) as c:  # open throughout: it holds the broker
        await broker(c).register()
        burst = [c.request(105, {"topic": "TopicTest"}) for _ in range(2000)]
        reader, writer = await send_burst(addr, burst)
        replies = asyncio.ensure_future(read_replies(reader, 2000))
        conns = app.app[REMOTING].connections
        seen_waiting = 0
        while not replies.done():
            waiting = sum(len(cmds) for conn in conns for cmds, _ in conn.backlog)
            seen_waiting = max(seen_waiting, waiting)
            await asyncio.sleep(0)
        assert seen_waiting > 0  # this test ran while frames of the burst still waited for their turn
        assert sorted(r.opaque for r in replies.result()) == sorted(cmd.opaque for cmd in burst)
        assert {r.code for r in replies.result()} == {0}
        assert [(len(conn.backlog), conn.read_holds) for conn in conns] == [(0, set())] * 2  # reading again
        writer.close()


async def test_lookups_reading_redis_past_the_pool_leave_the_socket_unread(settings: Settings) -> None:
    """A worker without the route cache, a burst of 2,000 lookups: once redisMaxConnections of them
    read Redis, the connection is not read and its backlog takes no turn until half are done, so
    the worker never holds more than one turn of frames beyond the pool as tasks; every lookup is
    answered, and reading goes on after."""
    patient = dataclasses.replace(
        settings, routeCacheEnabled=False, redisMaxConnections=8, redisTimeoutMillis=int(scaled(10_000))
    )
    app, addr = await worker(patient)
    try:
        async with await RemotingClient.connect(addr) as c:
            await broker(c).register()
            burst = [c.request(105, {"topic": "TopicTest" if i % 3 else "Missing"}) for i in range(2000)]
            reader, writer = await send_burst(addr, burst)
            replies = asyncio.ensure_future(read_replies(reader, 2000))
            server = app.app[REMOTING]
            most, held = 0, False
            while not replies.done():
                most = max(most, server.route_reads.running)
                held = held or any("route-reads" in conn.read_holds for conn in server.connections)
                await asyncio.sleep(0)
            assert held
            assert 8 <= most <= 8 + TURN_FRAMES
            codes = {r.opaque: r.code for r in replies.result()}
            assert [codes.get(cmd.opaque) for cmd in burst] == [0 if i % 3 else 17 for i in range(2000)]
            assert server.route_reads.running == 0
            assert [(len(conn.backlog), conn.read_holds) for conn in server.connections] == [(0, set())] * 2
            assert server.route_reads.pauses > 0
            text = await (await app.get("/metrics")).text()
            assert f"namesrv_remoting_route_read_pauses_total {float(server.route_reads.pauses)}" in text
            writer.close()
    finally:
        await close_client(app)


async def test_a_client_that_does_not_read_its_replies_stops_its_backlog(node: tuple[Any, str]) -> None:
    """A burst from a client that reads none of its replies: once they fill the buffers, the
    worker stops taking turns on that backlog (its memory for the replies stays bounded) and
    goes on when the client reads again."""
    app, addr = node
    async with await RemotingClient.connect(addr) as c:
        await broker(c).register()
        burst = [c.request(105, {"topic": "TopicTest"}) for _ in range(4000)]
        host, port = addr.rsplit(":", 1)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # full soon: a small test
        sock.connect((host, int(port)))
        sock.setblocking(False)
        known = set(app.app[REMOTING].connections)
        reader, writer = await asyncio.open_connection(sock=sock)
        try:
            conns = app.app[REMOTING].connections
            for _ in range(100):
                if conns - known:
                    break
                await asyncio.sleep(0.01)
            (slow,) = conns - known
            assert slow.transport is not None  # and its kernel buffer small as well, as on a slow link
            slow.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            writer.write(b"".join(encode(cmd) for cmd in burst))
            for _ in range(200):  # up to 10 s for the buffers to fill
                if "writes" in slow.read_holds:
                    break
                await asyncio.sleep(0.05)
            assert "writes" in slow.read_holds
            assert sum(len(cmds) for cmds, _ in slow.backlog) > 0  # stopped with frames waiting
            # No turn answers a frame while the replies are held. (The kernel may still take some
            # bytes later, e.g. when it compacts the client's receive queue under load: the writes
            # resume, and a turn then may answer frames; that is the flow control working.)
            turns: list[tuple[bool, int, int]] = []
            take_turn = slow._next_turn

            def watched_turn() -> None:
                before = sum(len(cmds) for cmds, _ in slow.backlog)
                held = "writes" in slow.read_holds
                take_turn()
                turns.append((held, before, sum(len(cmds) for cmds, _ in slow.backlog)))

            slow._next_turn = watched_turn
            await asyncio.sleep(0.2)
            assert [t for t in turns if t[0] and t[1] != t[2]] == []
            replies = await read_replies(reader, len(burst))
            assert sorted(r.opaque for r in replies) == sorted(cmd.opaque for cmd in burst)
            assert [(len(conn.backlog), conn.read_holds) for conn in conns] == [(0, set())] * 2
        finally:
            writer.close()


async def test_drain_answers_every_lookup_it_read(settings: Settings) -> None:
    """Shutting down while a burst waits for its turns (and, right after the registration, for a
    catch-up read): every frame the worker had read when the drain began is answered. (Frames it
    reads later are answered if they finish before the connection closes, like any connection's.
    The burst is small enough for its replies to fit in the sockets' buffers: a connection
    closed with input unread is reset, and replies not yet sent are lost with it.)"""
    app, addr = await worker(settings)
    async with await RemotingClient.connect(addr) as c:
        await broker(c).register()
        burst = [c.request(105, {"topic": "TopicTest"}, version=400) for _ in range(600)]
        reader, writer = await send_burst(addr, burst)
        replies = asyncio.ensure_future(read_replies(reader, len(burst)))
        conns = app.app[REMOTING].connections
        for _ in range(100_000):  # until the worker has read the burst: a turn of the loop each
            if any(conn.backlog for conn in conns):
                break
            await asyncio.sleep(0)
        waiting = sum(len(cmds) for conn in conns for cmds, _ in conn.backlog)
        begin_drain(app.app)
        await close_client(app)
        answered = await replies
        writer.close()
    read_before = {cmd.opaque for cmd in burst[: TURN_FRAMES + waiting]}
    assert read_before <= {r.opaque for r in answered}
    # answered, or refused as too many at once (the drain turns them into tasks, which count
    # against clientRequestThreadPoolQueueCapacity)
    assert {r.code for r in answered} <= {0, 2}


async def test_oneway_requests_get_no_reply(node: tuple[Any, str], redis: Redis, namespace: str) -> None:
    _, addr = node
    async with await RemotingClient.connect(addr) as c:
        b = broker(c)
        b.timeout_ms = 1000
        await b.register()
        before = await redis.zscore(Keyspace(namespace).deadlines, "DefaultCluster/127.0.0.1:10911")
        await asyncio.sleep(0.05)
        b.heartbeat()  # oneway 904
        follow = c.request(106)
        assert (await c.send(follow)).opaque == follow.opaque
        await asyncio.sleep(0.1)
        assert c.unmatched == []
        after = await redis.zscore(Keyspace(namespace).deadlines, "DefaultCluster/127.0.0.1:10911")
        assert after is not None and before is not None and after > before


async def test_rocketmq_binary_header_is_understood(node: tuple[Any, str]) -> None:
    _, addr = node
    async with await RemotingClient.connect(addr, serialize_type=SERIALIZE_ROCKETMQ) as c:
        await broker(c).register()
        reply = await c.invoke(105, {"topic": "TopicTest"})
    assert reply.code == 0 and reply.serialize_type == 0  # we always answer in JSON
    assert b'"brokerName":"broker-a"' in (reply.body or b"")


async def test_cpp_client_header_with_numbers_and_newline(node: tuple[Any, str]) -> None:
    """The C++ client's frame (feasibility §1.5): numeric/unknown extFields, a trailing newline."""
    _, addr = node
    header = (
        b'{"code":105,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"x","topic":"TopicTest",'
        b'"n":5,"b":true},"flag":0,"language":"CPP","opaque":0,"remark":"","version":63}\n'
    )
    frame = struct.pack(">ii", 4 + len(header), len(header)) + header
    async with await RemotingClient.connect(addr) as c:
        await broker(c).register()
        future = asyncio.get_running_loop().create_future()
        c._pending[0] = future
        c.write_raw(frame)
        reply = await asyncio.wait_for(future, 5)
    assert reply.code == 0 and reply.opaque == 0
    assert reply.body is not None and reply.body.startswith(
        b'{"brokerDatas":[{"brokerAddrs":{0:'
    )  # version 63: fastjson


@pytest.mark.parametrize(
    "garbage",
    [
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",  # a gRPC client: a 1.35 GB length prefix
        struct.pack(">ii", 8, 0x02000004) + b"abcd",  # serialize type 2
        struct.pack(">ii", 8, 100) + b"abcd",  # header longer than the frame
        struct.pack(">ii", 20, 16) + b'{"code":105,"ext',  # truncated JSON header
        struct.pack(">i", -5),  # negative length
    ],
    ids=["http2-preface", "bad-type", "bad-header-length", "bad-json", "negative-length"],
)
async def test_bad_frames_close_only_that_connection(node: tuple[Any, str], garbage: bytes) -> None:
    _, addr = node
    async with await RemotingClient.connect(addr) as good:
        await broker(good).register()
        bad = await RemotingClient.connect(addr)
        bad.write_raw(garbage)
        await asyncio.wait_for(bad.closed.wait(), 5)
        assert (await good.invoke(105, {"topic": "TopicTest"})).code == 0
        assert await route_code(addr) == 0  # the broker was registered over `good`, not `bad`
    await eventually(lambda: _is(route_code(addr), 17))  # ... and goes when `good` closes


async def test_closed_connection_removes_its_brokers(settings: Settings) -> None:
    (a, addr_a), (b, addr_b) = await worker(settings), await worker(dataclasses.replace(settings))
    try:
        conn = await RemotingClient.connect(addr_a)
        await broker(conn).register()
        assert await route_code(addr_b) == 0
        conn.abort()  # a crashed broker: connection reset
        await eventually(lambda: _is(route_code(addr_b), 17))
    finally:
        await close_client(a)
        await close_client(b)


async def test_close_while_another_connection_holds_the_broker_keeps_it(
    settings: Settings, redis: Redis, namespace: str
) -> None:
    (a, addr_a), (b, addr_b) = await worker(settings), await worker(dataclasses.replace(settings))
    try:
        old = await RemotingClient.connect(addr_a)
        await broker(old).register()
        new = await RemotingClient.connect(addr_b)
        await broker(new).register()  # the broker is registered over both workers now
        await old.aclose()  # worker A sees one of its connections close
        await eventually(lambda: _closed_holders(redis, namespace, 1))
        assert await route_code(addr_a) == 0 and await route_code(addr_b) == 0
        await new.aclose()  # the last connection holding it: removed
        await eventually(lambda: _is(route_code(addr_a), 17))
    finally:
        await close_client(a)
        await close_client(b)


async def test_idle_connection_is_closed_and_its_brokers_removed(settings: Settings) -> None:
    app, addr = await worker(dataclasses.replace(settings, serverChannelMaxIdleTimeSeconds=1))
    try:
        conn = await RemotingClient.connect(addr)
        await broker(conn).register()
        await asyncio.wait_for(conn.closed.wait(), 5)
        await eventually(lambda: _is(route_code(addr), 17))
    finally:
        await close_client(app)


async def test_drain_answers_in_flight_and_keeps_brokers(settings: Settings) -> None:
    app, addr = await worker(settings)
    conn = await RemotingClient.connect(addr)
    await broker(conn).register()
    pending = [
        asyncio.ensure_future(conn.invoke(105, {"topic": "TopicTest"}, version=400)) for _ in range(20)
    ]
    begin_drain(app.app)
    with pytest.raises(OSError):
        await RemotingClient.connect(addr)  # no new connections once draining
    go_away = await conn.invoke(105, {"topic": "TopicTest"}, version=479)
    assert (go_away.code, go_away.remark) == (1500, "please go away")
    assert {r.code for r in await asyncio.gather(*pending)} == {0}
    old_client = await conn.invoke(105, {"topic": "TopicTest"}, version=400)
    assert old_client.code == 0  # clients that do not know GO_AWAY are still served
    await close_client(app)
    with pytest.raises(RemotingClientError):
        await conn.invoke(106)
    later, later_addr = await worker(settings)
    try:
        assert await route_code(later_addr) == 0  # our own shutdown removed nothing
    finally:
        await close_client(later)


async def test_overload_answers_system_busy(settings: Settings) -> None:
    app, addr = await worker(dataclasses.replace(settings, clientRequestThreadPoolQueueCapacity=1))
    try:
        async with await RemotingClient.connect(addr) as c:
            await broker(c).register()
            replies = await asyncio.gather(*(c.invoke(105, {"topic": "TopicTest"}) for _ in range(30)))
        codes = [r.code for r in replies]
        assert 0 in codes and 2 in codes
        busy = next(r for r in replies if r.code == 2)
        assert busy.remark == "[OVERLOAD]system busy, start flow control for a while"
    finally:
        await close_client(app)


async def test_update_config_is_refused_unless_enabled(node: tuple[Any, str]) -> None:
    _, addr = node
    async with await RemotingClient.connect(addr) as c:
        reply = await c.invoke(318, body=b"enableTopicList=false\n")
        assert reply.code == 16
        assert reply.remark == (
            "Can not update config: remote config update is disabled (set allowRemoteConfigUpdate=true)"
        )
        assert (await c.invoke(311)).code == 0


async def test_update_config_applies_fleet_wide(settings: Settings) -> None:
    enabled = dataclasses.replace(settings, allowRemoteConfigUpdate=True)
    (a, addr_a), (b, addr_b) = await worker(enabled), await worker(dataclasses.replace(enabled))
    try:
        async with await RemotingClient.connect(addr_a) as ca, await RemotingClient.connect(addr_b) as cb:
            assert (await cb.invoke(311)).code == 0
            assert (await ca.invoke(318, body=b"enableTopicList=false\nnoSuchKey=1\n")).code == 0

            async def disabled_on_b() -> bool:
                reply = await cb.invoke(311)
                return reply.code == 1 and reply.remark == "disable"

            await eventually(disabled_on_b, timeout=2.0)
            config = (await cb.invoke(319)).body or b""
            assert b"enableTopicList=false\n" in config
            bad = await ca.invoke(318, body=b"kvConfigPath=/x\n")
            assert (bad.code, bad.remark) == (16, "Can not update config in black list.")
    finally:
        await close_client(a)
        await close_client(b)


async def test_broker_simulator_cli_runs_against_a_worker(
    node: tuple[Any, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, addr = node
    args = [
        "--namesrv",
        addr,
        "--brokers",
        "3",
        "--slaves",
        "1",
        "--topics",
        "50",
        "--period",
        "0.2",
        "--duration",
        "0.7",
    ]
    code = await asyncio.get_running_loop().run_in_executor(None, sim_main, args)
    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith("register: ")
    assert await route_code(addr, "SimTopic-00049") == 17  # the simulated brokers unregistered at the end


async def _is(awaitable: Any, value: Any) -> bool:
    return bool(await awaitable == value)


async def _closed_holders(redis: Redis, namespace: str, count: int) -> bool:
    marks = await redis.hvals(Keyspace(namespace).holders("DefaultCluster", "127.0.0.1:10911"))
    return sum(m.startswith("c:") for m in marks) == count


async def _has_kind(redis: Redis, namespace: str, kind: str) -> bool:
    return any(f["kind"] == kind for _, f in await redis.xrange(Keyspace(namespace).events))


def test_reply_frames_encode_as_java_does() -> None:
    cmd = RemotingCommand(code=0, opaque=7, flag=1, version=479, ext_fields={})
    assert encode(cmd)[8:].decode() == (
        '{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON",'
        '"version":479}'
    )


async def test_more_requests_than_redis_connections_wait_instead_of_failing(settings: Settings) -> None:
    small = dataclasses.replace(settings, redisMaxConnections=10, routeCacheEnabled=False)
    app, addr = await worker(small)
    try:
        async with await RemotingClient.connect(addr) as c:
            await broker(c).register()
            replies = await asyncio.gather(*(c.invoke(105, {"topic": "TopicTest"}) for _ in range(400)))
        assert {r.code for r in replies} == {0}
    finally:
        await close_client(app)


async def test_an_unchanged_body_is_not_decoded_again(
    settings: Settings, redis: Redis, namespace: str
) -> None:
    app, addr = await worker(dataclasses.replace(settings, registerChunkTopics=50))
    service = app.app[SERVICE]
    try:
        async with await RemotingClient.connect(addr) as c:
            b = SimBroker(
                c,
                "DefaultCluster",
                "broker-a",
                "127.0.0.1:10911",
                topics=topic_configs([f"T{i:03d}" for i in range(120)]),
            )
            await b.register()
            assert service.bodies_decoded == 1
            for _ in range(3):
                await b.register()  # the periodic re-registration: same body
            assert service.bodies_decoded == 1
            b.zone = "zone-a"  # header-only change: still no decoding, but the BrokerData changes
            await b.register()
            assert service.bodies_decoded == 1
            route = orjson.loads((await c.invoke(105, {"topic": "T000"})).body or b"")
            assert route["brokerDatas"][0]["zoneName"] == "zone-a"
            b.bump()
            await b.register()  # new DataVersion: a new body, decoded once ...
            await b.register()
            assert service.bodies_decoded == 2  # ... and then reused
            await redis.hdel(Keyspace(namespace).topic("T007"), "broker-a")  # e.g. an admin deleted it
            await redis.hdel(Keyspace(namespace).bdigest, "broker-a")
            await b.register()  # the digest no longer vouches for the topics: decode, re-add
            assert service.bodies_decoded == 3
            assert (await c.invoke(105, {"topic": "T007"})).code == 0
            await b.unregister()
            await b.register()  # a new session needs the body again
            assert service.bodies_decoded == 4
            assert (await c.invoke(105, {"topic": "T119"})).code == 0
    finally:
        await close_client(app)


async def _raw_reply(addr: str, request: RemotingCommand) -> bytes:
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(encode(request))
        (total,) = struct.unpack(">i", await reader.readexactly(4))
        return await reader.readexactly(total)
    finally:
        writer.close()


@pytest.mark.parametrize(
    ("version", "ext"),
    [
        (479, {}),
        (399, {}),
        (399, {"acceptStandardJsonOnly": "true"}),
        (479, {"__ZONE_MODE": "true", "__ZONE_NAME": "zone-a"}),
        (479, {"__ZONE_MODE": "false"}),
    ],
)
async def test_a_cache_hit_is_byte_for_byte_a_redis_answer(
    settings: Settings, version: int, ext: dict[str, str]
) -> None:
    cached, cached_addr = await worker(settings)
    direct, direct_addr = await worker(dataclasses.replace(settings, routeCacheEnabled=False))
    brokers = await RemotingClient.connect(cached_addr)  # open: closing it would remove the broker
    try:
        await broker(brokers).register()
        request = RemotingCommand(105, opaque=-7, version=version, ext_fields={"topic": "TopicTest", **ext})
        expected = await _raw_reply(direct_addr, request)
        cache = cached.app[SERVICE].lookups
        assert isinstance(cache, RouteCache) and b'"code":0' in expected
        hits = cache.hits
        for _ in range(40):
            assert await _raw_reply(cached_addr, request) == expected
            if cache.hits > hits:
                break
            await asyncio.sleep(0.05)
        assert cache.hits > hits
    finally:
        await brokers.aclose()
        await close_client(cached)
        await close_client(direct)


async def test_registrations_over_remoting_are_counted(node: tuple[Any, str]) -> None:
    """Outcomes are counted in the use-case layer, once for both transports (not only for HTTP)."""
    app, addr = node
    async with await RemotingClient.connect(addr) as c:
        await broker(c).register()
        await broker(c).register()
        one_topic = SimBroker(
            c, "DefaultCluster", "broker-z", "127.0.0.1:20911", topics=topic_configs(["Only"])
        )
        with pytest.raises(RegistrationFailed):  # R7: a first registration with exactly one topic
            await one_topic.register()
        text = await (await app.get("/metrics")).text()
    assert 'namesrv_registrations_total{result="ok"} 2.0' in text
    assert 'namesrv_registrations_total{result="refused"} 1.0' in text


async def test_lookups_that_arrive_stale_wait_for_one_catch_up_and_read_nothing_else(
    node: tuple[Any, str],
) -> None:
    """After this worker's own write its knowledge is stale until the feed reads past it: lookups
    then queue (no task each) for one shared catch-up read, and are answered from memory."""
    app, addr = node
    cache = app.app[SERVICE].lookups
    assert isinstance(cache, RouteCache)
    async with await RemotingClient.connect(addr) as c:
        await broker(c).register()
        for _ in range(40):  # cached and fresh
            if cache.peek("TopicTest") not in (None, STALE):
                break
            await c.invoke(105, {"topic": "TopicTest"})
            await asyncio.sleep(0.05)
        before = cache.stats()
        cache.note_local_write()  # as right after a registration through this worker
        commands = [c.request(105, {"topic": "TopicTest"}) for _ in range(300)]
        replies = await asyncio.gather(*(c.send(cmd) for cmd in commands))
    assert [r.code for r in replies] == [0] * 300
    after = cache.stats()
    assert after["bypasses"] == before["bypasses"] and after["misses"] == before["misses"]
    assert after["hits"] - before["hits"] == 300


async def test_remoting_takes_what_java_takes_where_http_refuses(node: tuple[Any, str]) -> None:
    """Issue 25 row 6: HTTP refuses these with a 400; over remoting a broker's body is read as
    Java's fastjson reads it (a number in a string; a topic config stored under its topicName) and
    a KV name is any string, as Java's KVConfigManager takes it."""
    _, addr = node
    sim = broker(await RemotingClient.connect(addr))
    table = {
        "A1": {"topicName": "B1", "readQueueNums": "8", "writeQueueNums": 4, "perm": 6},
        "TBW102": {"topicName": "TBW102", "readQueueNums": 8, "writeQueueNums": 8, "perm": 7},
    }
    body = orjson.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": table,
                "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1},
            },
            "filterServerList": [],
        }
    )
    async with sim.client as c:
        assert (await c.invoke(103, sim.header(body), body)).code == 0
        b1, a1 = await c.invoke(105, {"topic": "B1"}), await c.invoke(105, {"topic": "A1"})
        kv = await c.invoke(100, {"namespace": "../..", "key": "a/b", "value": "v"})
        stored = await c.invoke(101, {"namespace": "../..", "key": "a/b"})
    assert (a1.code, b1.code) == (17, 0)
    assert b1.body is not None
    assert orjson.loads(b1.body)["queueDatas"] == [
        {"brokerName": "broker-a", "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 4}
    ]
    assert (kv.code, stored.code, stored.ext_fields) == (0, 0, {"value": "v"})
