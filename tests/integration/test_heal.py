"""Redis loses its data and the fleet heals it from what its workers saw (issue #27).

A real redis-server restarted empty under two workers; simulated brokers registered over one
worker each, which do not register again during the test: every route is whole again from the
workers' kept registrations alone, and no lookup of a topic that existed says TOPIC_NOT_EXIST."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.domain.codes import Version
from namesrv.domain.model import DataVersion, RawBody, RegisterBrokerRequest, TopicConfig
from namesrv.keys import REMOTING, SERVICE
from namesrv.registry.kept_topics import pack_written
from namesrv.sim.bodies import register_body_json
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from namesrv.store.keyspace import Keyspace
from tests.builders import register_json
from tests.conftest import REDIS_DEADLINE_MS, close_client, start_client
from tests.polling import eventually, scaled
from tests.redis_process import RedisProcess

TOPICS = {f"broker-{n}": [f"T{n}-{i}" for i in range(200)] for n in "ab"}
ROUTE_VERSION = Version.V5_3_3  # a 5.x client: the route body is standard JSON


@pytest.fixture
async def fleet(settings: Settings, redis_process: RedisProcess) -> AsyncIterator[list[tuple[Any, str]]]:
    """Two workers with the shipped Redis deadline: the tests restart Redis under them."""
    async for workers in _fleet(settings, redis_process, REDIS_DEADLINE_MS):
        yield workers


@pytest.fixture
async def patient_fleet(
    settings: Settings, redis_process: RedisProcess
) -> AsyncIterator[list[tuple[Any, str]]]:
    """Two workers whose Redis deadline grows with the machine's load, for tests that keep Redis
    up: a registration's chunk calls, queued behind each other on a starved machine, are not
    what they check."""
    async for workers in _fleet(settings, redis_process, int(scaled(REDIS_DEADLINE_MS))):
        yield workers


async def _fleet(
    settings: Settings, redis_process: RedisProcess, deadline_ms: int
) -> AsyncIterator[list[tuple[Any, str]]]:
    shaped = dataclasses.replace(settings, redisTimeoutMillis=deadline_ms, redisUrl=redis_process.url)
    apps = [await start_client(shaped), await start_client(dataclasses.replace(shaped))]
    yield [(app, f"127.0.0.1:{app.app[REMOTING].port}") for app in apps]
    for app in apps:
        await close_client(app)


def broker(client: RemotingClient, name: str, port: int) -> SimBroker:
    return SimBroker(client, "C", name, f"127.0.0.1:{port}", topics=topic_configs(TOPICS[name]))


async def codes(client: RemotingClient, topics: list[str]) -> list[int]:
    return [(await client.invoke(105, {"topic": t})).code for t in topics]


async def test_a_redis_that_restarts_empty_is_healed_by_the_workers(
    fleet: list[tuple[Any, str]], redis_process: RedisProcess, namespace: str
) -> None:
    (a, addr_a), (b, addr_b) = fleet
    conn_a, conn_b = await RemotingClient.connect(addr_a), await RemotingClient.connect(addr_b)
    gone = await RemotingClient.connect(addr_a)
    lookups = await RemotingClient.connect(addr_b)
    try:
        await broker(conn_a, "broker-a", 10911).register()
        await broker(conn_b, "broker-b", 10921).register()
        # a broker that unregistered, and one whose connection closed, before the loss
        quitter = SimBroker(gone, "C", "broker-q", "127.0.0.1:10931", topics=topic_configs(["Q1", "Q2"]))
        await quitter.register()
        assert (
            await gone.invoke(
                104,
                {
                    "clusterName": "C",
                    "brokerAddr": "127.0.0.1:10931",
                    "brokerName": "broker-q",
                    "brokerId": "0",
                },
            )
        ).code == 0
        hot = [TOPICS["broker-a"][0], TOPICS["broker-b"][0]]
        assert await codes(lookups, hot) == [0, 0]  # cached on worker B
        every = TOPICS["broker-a"] + TOPICS["broker-b"]

        await redis_process.stop()  # SIGKILL, no persistence: every registration is gone
        await redis_process.start()
        lost_at = time.monotonic()
        seen: list[int] = []

        async def whole() -> bool:
            answers = await codes(lookups, every)
            seen.extend(answers)
            return answers == [0] * len(every)

        await eventually(whole, timeout=20, what="every route whole again")
        healed_in = time.monotonic() - lost_at
        assert 17 not in seen  # never "no such topic" for a topic that existed
        assert set(seen) <= {0, 1}  # 1: "name server not ready" (not replayed yet), clients retry
        assert (await lookups.invoke(105, {"topic": "Q1"})).code in (1, 17)  # not brought back
        for app in (a, b):
            assert app.app[SERVICE].keeper.last_heal["replayed"] == 1.0
        raw = Redis.from_url(redis_process.url, decode_responses=True)
        try:
            live = await raw.hkeys(Keyspace(namespace).live)
            log = [fields for _, fields in await raw.xrange(Keyspace(namespace).events)]
        finally:
            await raw.aclose()
        assert sorted(live) == ["C/127.0.0.1:10911", "C/127.0.0.1:10921"]
        # the replays' queue writes say so: caches keep serving the pre-loss routes through them
        written = [(f["brokerName"], f["replay"]) for f in log if f.get("kind") == "registerQueues"]
        assert sorted(set(written)) == [("broker-a", "1"), ("broker-b", "1")]
        print(f"healed in {healed_in:.2f} s")
    finally:
        for c in (conn_a, conn_b, gone, lookups):
            await c.aclose()


async def test_a_worker_with_a_cold_cache_serves_whole_routes_after_the_heal(
    patient_fleet: list[tuple[Any, str]], redis_process: RedisProcess
) -> None:
    """Topics on two brokers, each registered through its own worker, and a worker that cached
    none of them before the loss: during the heal it reads routes with one broker replayed and
    keeps them through the replays (they name every topic), so it must read them again: every
    route whole again, never TOPIC_NOT_EXIST. (Patient workers: the 30,100-topic registration
    before the loss is about 60 chunk calls, and on a starved machine one took longer than the shipped
    1 s deadline; the heal is started by the new data set, not by a deadline.)"""
    (_, addr_a), (_, addr_b) = patient_fleet
    conn_a, conn_b = await RemotingClient.connect(addr_a), await RemotingClient.connect(addr_b)
    lookups = await RemotingClient.connect(addr_b)
    shared = [f"S-{i}" for i in range(100)]
    try:
        # broker-a's replay is slow (many more topics): the cold worker reads routes with only
        # broker-b in them while it runs
        many = shared + [f"A-{i}" for i in range(30000)]
        await SimBroker(conn_a, "C", "broker-a", "127.0.0.1:10911", topics=topic_configs(many)).register()
        await SimBroker(conn_b, "C", "broker-b", "127.0.0.1:10921", topics=topic_configs(shared)).register()
        await redis_process.stop()
        await redis_process.start()
        seen: list[int] = []

        async def widths() -> list[int]:
            out = []
            for topic in shared:
                reply = await lookups.invoke(105, {"topic": topic}, version=ROUTE_VERSION)
                seen.append(reply.code)
                out.append(
                    len(orjson.loads(reply.body)["queueDatas"]) if reply.code == 0 and reply.body else 0
                )
            return out

        async def whole() -> bool:
            return await widths() == [2] * len(shared)

        await eventually(whole, timeout=30, what="every shared route shows both brokers again")
        assert await widths() == [2] * len(shared)  # and stays so
        assert 17 not in seen and set(seen) <= {0, 1}
    finally:
        for c in (conn_a, conn_b, lookups):
            await c.aclose()


async def test_a_split_registration_is_healed_whole(
    fleet: list[tuple[Any, str]], redis_process: RedisProcess, namespace: str
) -> None:
    """A 5.x broker with ``enableSplitRegistration`` sends its topics in several requests with one
    DataVersion: the worker keeps every batch, and the heal brings back every topic (it kept only
    the last batch before: 800 of 100,000 topics in ``make bench-scale``'s wide shape)."""
    (a, addr_a), _ = fleet
    conn = await RemotingClient.connect(addr_a)
    lookups = await RemotingClient.connect(addr_a)
    names = [f"S-{i}" for i in range(900)]
    batches = [names[i : i + 300] for i in range(0, len(names), 300)]
    try:
        for compressed in (False, True):  # JSON bodies, then a new DataVersion sent compressed
            for part in batches:
                split = SimBroker(conn, "C", "broker-s", "127.0.0.1:10951", topics=topic_configs(part))
                split.counter, split.timestamp, split.compressed = (
                    7 + compressed,
                    1_700_000_000_000,
                    compressed,
                )
                await split.register()
        keeper = a.app[SERVICE].keeper
        assert len(keeper) == 1

        await redis_process.stop()
        await redis_process.start()
        await eventually(lambda: _done(keeper), timeout=20, what="the heal finished")
        assert keeper.last_heal["replayed"] == 1.0
        raw = Redis.from_url(redis_process.url, decode_responses=True)
        try:
            topics = await raw.smembers(Keyspace(namespace).btopics("broker-s"))
        finally:
            await raw.aclose()
        assert sorted(topics) == sorted(names)
        assert await codes(lookups, [names[0], names[450], names[-1]]) == [0, 0, 0]
    finally:
        for c in (conn, lookups):
            await c.aclose()


async def test_the_newest_copy_wins_when_a_broker_registered_through_both_workers(
    fleet: list[tuple[Any, str]], redis_process: RedisProcess, namespace: str
) -> None:
    """A broker registered through worker A, then (its next registration to A failed, say)
    through worker B with a new topic table; both connections stay open, so both workers keep a
    copy. After the loss both replay: Redis must end with B's newer table, whatever the order."""
    (a, addr_a), (b, addr_b) = fleet
    via_a, via_b = await RemotingClient.connect(addr_a), await RemotingClient.connect(addr_b)
    try:
        addr = "127.0.0.1:10961"
        old = SimBroker(via_a, "C", "broker-n", addr, topics=topic_configs(["N1", "N2"], queues=4))
        await old.register()
        new = SimBroker(via_b, "C", "broker-n", addr, topics=topic_configs(["N1", "N2"], queues=8))
        new.counter = 2
        await new.register()
        keepers = [app.app[SERVICE].keeper for app in (a, b)]
        assert [len(k) for k in keepers] == [1, 1]

        await redis_process.stop()
        await redis_process.start()
        for keeper in keepers:
            await eventually(lambda k=keeper: _done(k), timeout=20, what="the heal finished")
        outcomes = sorted((k.last_heal["replayed"], k.last_heal["skipped"]) for k in keepers)
        assert outcomes in ([(0.0, 1.0), (1.0, 0.0)], [(1.0, 0.0), (1.0, 0.0)])  # A's after B's: skipped
        raw = Redis.from_url(redis_process.url, decode_responses=True)
        try:
            queue_data = await raw.hget(Keyspace(namespace).topic("N1"), "broker-n")
        finally:
            await raw.aclose()
        assert queue_data is not None and '"readQueueNums":8' in queue_data
        assert len(keepers[0]) + len(keepers[1]) == 2 - sum(k.last_heal["skipped"] for k in keepers)
    finally:
        for c in (via_a, via_b):
            await c.aclose()


async def test_a_broker_that_registers_during_the_heal_wins(
    fleet: list[tuple[Any, str]], redis_process: RedisProcess, namespace: str
) -> None:
    """A replay is skipped for a broker that registered on its own since the heal began: the
    worker's copy is older than what the broker just sent."""
    (a, addr_a), _ = fleet
    conn = await RemotingClient.connect(addr_a)
    try:
        old = broker(conn, "broker-a", 10911)
        await old.register()
        keeper = a.app[SERVICE].keeper
        await redis_process.stop()
        await redis_process.start()
        newer = SimBroker(conn, "C", "broker-a", "127.0.0.1:10911", topics=topic_configs(["Fresh"]))
        # the broker's own registration may come before or after the replay: the result is the same
        await eventually(lambda: _registers(newer), timeout=20, what="the broker registers again")
        await eventually(lambda: _done(keeper), timeout=20, what="the heal finished")
        raw = Redis.from_url(redis_process.url, decode_responses=True)
        try:
            topics = await raw.smembers(Keyspace(namespace).btopics("broker-a"))
        finally:
            await raw.aclose()
        if keeper.last_heal["skipped"] == 1.0:
            assert topics == {"Fresh"}  # the replay came after the broker's own registration
        else:  # the replay came first; the broker's own registration then replaced it
            assert "Fresh" in topics
    finally:
        await conn.aclose()


async def _registers(broker: SimBroker) -> bool:
    return (await broker.register(check=False)).code == 0


async def _done(keeper: Any) -> bool:
    await asyncio.sleep(0)
    return not keeper.healing and bool(keeper.last_heal)


async def test_a_failover_to_a_replica_that_missed_writes_is_healed(settings: Settings) -> None:
    """#27: Sentinel promotes a replica that never received the last registration (its link to
    the master was cut just before it); the fleet replays it, without the broker registering."""
    import os
    import signal

    import redis as sync_redis

    from tests.redis_topologies import sentinel_setup

    with sentinel_setup() as (url, master, replica, _sentinel_port):
        app = await start_client(
            dataclasses.replace(settings, redisTimeoutMillis=REDIS_DEADLINE_MS, redisUrl=url)
        )
        try:
            addr = f"127.0.0.1:{app.app[REMOTING].port}"
            conn = await RemotingClient.connect(addr)
            lookups = await RemotingClient.connect(addr)
            await broker(conn, "broker-a", 10911).register()
            old = sync_redis.Redis(port=master)
            assert old.execute_command("WAIT", 1, 10_000) == 1  # the replica has broker-a
            behind = sync_redis.Redis(port=replica)
            replica_pid = int(behind.info("server")["process_id"])
            behind.close()
            # The replica stops, the master drops its link (whatever it had not sent is gone), and
            # only then broker-b registers: the replica can never get it.
            os.kill(replica_pid, signal.SIGSTOP)
            try:
                old.execute_command("CLIENT", "KILL", "TYPE", "replica")
                await broker(conn, "broker-b", 10921).register()
                assert await codes(lookups, ["Tb-0"]) == [0]  # cached, from the master that has it
                with contextlib.suppress(sync_redis.ConnectionError):  # it closes the connection
                    old.execute_command("SHUTDOWN", "NOSAVE")  # the master dies with broker-b
            finally:
                os.kill(replica_pid, signal.SIGCONT)
            seen: list[int] = []

            async def healed() -> bool:
                answers = await codes(lookups, ["Ta-0", "Tb-0", "Tb-199"])
                seen.extend(answers)
                return answers == [0, 0, 0]

            await eventually(healed, timeout=60, what="the promoted replica healed")
            assert 17 not in seen
            promoted = sync_redis.Redis(port=replica, decode_responses=True)
            try:
                assert promoted.sismember(Keyspace(settings.namespace).topics, "Tb-199")
            finally:
                promoted.close()
            keeper = app.app[SERVICE].keeper
            await eventually(lambda: _done(keeper), timeout=30, what="the heal finished")
            assert keeper.last_heal["replayed"] >= 1, keeper.last_heal
            await conn.aclose()
            await lookups.aclose()
        finally:
            await close_client(app)


async def _registers(broker: SimBroker) -> bool:
    return (await broker.register(check=False)).code == 0


async def _done(keeper: Any) -> bool:
    await asyncio.sleep(0)
    return not keeper.healing and bool(keeper.last_heal)


async def test_without_the_route_cache_no_lookup_says_no_such_topic_during_the_heal(
    settings: Settings, redis_process: RedisProcess
) -> None:
    """A worker with routeCacheEnabled = false has nothing from before the loss to serve, but it
    must not tell clients a topic is gone while the fleet replays it: "not ready" (code 1) until
    the replay lands."""
    uncached = dataclasses.replace(
        settings, redisTimeoutMillis=REDIS_DEADLINE_MS, redisUrl=redis_process.url, routeCacheEnabled=False
    )
    app = await start_client(uncached)
    addr = f"127.0.0.1:{app.app[REMOTING].port}"
    conn, lookups = await RemotingClient.connect(addr), await RemotingClient.connect(addr)
    try:
        await broker(conn, "broker-a", 10911).register()
        by_http = register_json(name="broker-h", addr="127.0.0.1:10951", topics=["ByHttp", "TBW102"])
        assert (await app.post("/v1/brokers/register", json=by_http)).status == 200
        topics = TOPICS["broker-a"]
        assert await codes(lookups, [*topics[:3], "ByHttp"]) == [0, 0, 0, 0]
        await redis_process.stop()
        await redis_process.start()
        seen: list[int] = []

        async def whole() -> bool:
            answers = await codes(lookups, topics)
            seen.extend(answers)
            return answers == [0] * len(topics)

        await eventually(whole, timeout=20, what="every route whole again")
        assert 17 not in seen and set(seen) <= {0, 1}
        assert app.app[SERVICE].keeper.last_heal["replayed"] == 1.0
        # Registered over HTTP, so no worker kept it: within the heal window it is "not ready",
        # never "no such topic" (it may still come back with its broker's next registration).
        reply = await lookups.invoke(105, {"topic": "ByHttp"})
        assert (reply.code, reply.remark) == (1, "name server not ready")
    finally:
        for c in (conn, lookups):
            await c.aclose()
        await close_client(app)


async def test_a_slave_is_replayed_after_its_master_and_writes_and_decodes_nothing(
    fleet: list[tuple[Any, str]], redis_process: RedisProcess, namespace: str
) -> None:
    """The slave registered first, so it is kept first; replayed first it would be the lowest
    id of its broker name and write every topic (R9). Replayed after its master it writes no
    topic, and with what its body amounted to kept, its body is not decoded again; nor is the
    master's: the writes its registration sent are sent again."""
    (a, addr_a), _ = fleet
    conn = await RemotingClient.connect(addr_a)
    service = a.app[SERVICE]
    try:
        names = TOPICS["broker-a"]
        slave = SimBroker(conn, "C", "broker-a", "127.0.0.1:10912", 1, topics=topic_configs(names))
        await slave.register()
        await broker(conn, "broker-a", 10911).register()
        decoded_before = service.bodies_decoded

        await redis_process.stop()
        await redis_process.start()
        raw = Redis.from_url(redis_process.url, decode_responses=True)
        keys = Keyspace(namespace)
        try:

            async def both_back() -> bool:
                return sorted(await raw.hkeys(keys.live)) == ["C/127.0.0.1:10911", "C/127.0.0.1:10912"]

            await eventually(both_back, timeout=20, what="master and slave replayed")
            await eventually(lambda: not service.keeper.healing, timeout=20, what="the heal done")
            log = [fields for _, fields in await raw.xrange(keys.events)]
            assert await raw.hlen(keys.topic(names[0])) == 1
        finally:
            await raw.aclose()
        assert service.keeper.last_heal["replayed"] == 2.0
        writers = {f["brokerAddr"] for f in log if f.get("kind") == "registerQueues"}
        assert writers == {"127.0.0.1:10911"}  # only the master wrote queues
        # both registrations carry the replay mark (it keeps the heal window open)
        marks = [(f["brokerAddr"], f["replay"]) for f in log if f.get("kind") == "register"]
        assert marks == [("127.0.0.1:10911", "1"), ("127.0.0.1:10912", "1")]
        assert service.bodies_decoded - decoded_before == 0
        assert service.keeper.bodies_inflated == 0  # neither kept body was even inflated
        assert service.registrar.kept_writes_sent == 1  # the master's
    finally:
        await conn.aclose()


class MappedBroker(SimBroker):
    """A 5.x broker with a static topic: its body carries a TopicQueueMappingInfo."""

    def body(self) -> bytes:
        info = {"topic": "Mixed-0", "bname": self.name, "totalQueues": 8, "epoch": 3, "dirty": False}
        return register_body_json(self.topics, self.data_version, self.filters, mappings={"Mixed-0": info})


async def _route_state(raw: Redis, keys: Keyspace, broker_name: str) -> dict[str, Any]:
    """What a broker's registration wrote that routes are built from, read from the keys."""
    topics = sorted(await raw.smembers(keys.topics))
    return {
        "topics": topics,
        "queues": {t: await raw.hgetall(keys.topic(t)) for t in topics},
        "flags": await raw.hgetall(keys.topicflags),
        "broker_topics": sorted(await raw.smembers(keys.btopics(broker_name))),
        "digest": await raw.hgetall(keys.bdigest),
        "versions": await raw.hgetall(keys.dataversions),
        "synced": await raw.hgetall(keys.bsync),
        "mapping": await raw.hgetall(keys.mapping("Mixed-0")),
    }


async def test_a_replay_from_the_kept_writes_leaves_redis_as_the_registration_did(
    patient_fleet: list[tuple[Any, str]], redis_process: RedisProcess, namespace: str
) -> None:
    """Queues of several shapes, order and read-only topics, names the script must escape, a
    static-topic mapping, more topics than one chunk: the replay sends the writes its worker kept
    (no decode), and every key a route is built from holds what the broker's own registration
    wrote."""
    (a, addr_a), _ = patient_fleet
    service = a.app[SERVICE]
    shipped = service.registrar.settings
    service.registrar.settings = lambda: dataclasses.replace(shipped(), registerChunkTopics=100)
    table = {
        **topic_configs([f"Mixed-{i}" for i in range(150)]),
        **{f"Order-{i}": TopicConfig(f"Order-{i}", 2, 2, 6, topicSysFlag=1) for i in range(60)},
        **topic_configs([f"ReadOnly-{i}" for i in range(40)], queues=4, perm=4),
        'Tópico "quoted"': TopicConfig('Tópico "quoted"', 8, 8, 6),
    }
    conn = await RemotingClient.connect(addr_a)
    raw = Redis.from_url(redis_process.url, decode_responses=True)
    keys = Keyspace(namespace)
    try:
        await MappedBroker(conn, "C", "broker-m", "127.0.0.1:10961", topics=table).register()
        before = await _route_state(raw, keys, "broker-m")
        assert len(before["topics"]) == 251 and before["mapping"] != {}
        assert before["flags"] == {f"Order-{i}": "1" for i in range(60)}
        decoded_before = service.bodies_decoded
        await raw.aclose()

        await redis_process.stop()
        await redis_process.start()
        raw = Redis.from_url(redis_process.url, decode_responses=True)

        async def replayed() -> bool:
            return await raw.hkeys(keys.live) == ["C/127.0.0.1:10961"]

        await eventually(replayed, timeout=20, what="the broker replayed")
        await eventually(lambda: not service.keeper.healing, timeout=20, what="the heal done")
        assert await _route_state(raw, keys, "broker-m") == before
        assert service.bodies_decoded == decoded_before and service.keeper.bodies_inflated == 0
        assert service.registrar.kept_writes_sent == 1
    finally:
        await raw.aclose()
        await conn.aclose()


async def test_a_replayed_big_body_is_not_laid_out_for_a_delta(patient_fleet: list[tuple[Any, str]]) -> None:
    """A broker's own big body is laid out after its reply, so that its next body decodes as a
    delta at once; a replay's is not (the broker's next body is 30 s off, and at the RIP-29
    shape the decoder has forgotten it by then): laying each out was a quarter of a heal's CPU."""
    (a, _), _ = patient_fleet
    service = a.app[SERVICE]
    table = topic_configs([f"BIG-{i}" for i in range(2500)])  # a body decoded in a thread
    body = RawBody(register_body_json(table, DataVersion(1, 0, 1_700_000_000_000)), 479, False)
    own = RegisterBrokerRequest("C", "127.0.0.1:10941", "big-own", 0, "", None, body=body)
    replayed = dataclasses.replace(own, brokerAddr="127.0.0.1:10951", brokerName="big-replayed", replay_of=1)
    for request in (replayed, own):  # a layout of the replay would start first
        result, registration = await service.register_broker(request)
        assert result is not None and registration is not None
    await eventually(lambda: not service.decoder.needs_layout("C/127.0.0.1:10941"), what="laid out")
    assert service.decoder.needs_layout("C/127.0.0.1:10951")


async def test_writes_kept_for_another_broker_name_are_not_sent(
    patient_fleet: list[tuple[Any, str]], redis_process: RedisProcess, namespace: str
) -> None:
    """A queue write names its broker: a replay whose header names another broker name than the
    kept writes were made for (the broker renamed, the same body re-sent) decodes the body."""
    (a, _), _ = patient_fleet
    service = a.app[SERVICE]
    table = topic_configs([f"Renamed-{i}" for i in range(30)])
    body = RawBody(register_body_json(table, DataVersion(1, 0, 1_700_000_000_000)), 479, False)
    own = RegisterBrokerRequest("C", "127.0.0.1:10971", "name-1", 0, "", None, body=body, holder="h#1")
    result, registration = await service.register_broker(own)
    assert result is not None and registration is not None and registration.written is not None
    assert registration.facts is not None
    kept = pack_written(registration.written)
    assert kept is not None
    renamed = dataclasses.replace(own, brokerAddr="127.0.0.1:10972", brokerName="name-2", replay_of=1)
    decoded_before = service.bodies_decoded
    result, registration = await service.register_broker(renamed, registration.facts, kept)
    assert result is not None and registration is not None
    assert service.bodies_decoded == decoded_before + 1 and service.registrar.kept_writes_sent == 0
    raw = Redis.from_url(redis_process.url, decode_responses=True)
    try:
        queues = await raw.hgetall(Keyspace(namespace).topic("Renamed-0"))
    finally:
        await raw.aclose()
    assert sorted(queues) == ["name-1", "name-2"]
    assert orjson.loads(queues["name-2"])["brokerName"] == "name-2"
