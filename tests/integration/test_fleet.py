"""Several workers on one Redis behave as one NameServer."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any

from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.registry.service import RegistryService
from namesrv.store.changelog import upserts
from namesrv.store.keyspace import Keyspace
from tests.builders import register, register_json
from tests.conftest import close_client, start_client
from tests.polling import eventually

Client = TestClient[Any, Any]


async def server_ms(redis: Redis) -> int:
    seconds, micros = await redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


@dataclasses.dataclass
class BrokerModel:
    name: str
    addr: str
    cluster: str
    registered: bool = False
    queues: dict[str, int] = dataclasses.field(default_factory=dict)  # topic -> readQueueNums


async def test_two_workers_fifty_brokers_match_a_sequential_model(pair: tuple[Client, Client]) -> None:
    rng = random.Random(20261122)
    topics = [f"T{i:02d}" for i in range(30)]
    models = [BrokerModel(f"b{i:02d}", f"10.0.0.{i}:10911", f"C{i % 3}") for i in range(50)]
    plans: list[list[tuple[str, Any]]] = []
    for _ in models:
        ops: list[tuple[str, Any]] = [("register", rng.sample(topics, rng.randint(2, 6)))]
        for _ in range(7):
            kind = rng.choice(["register", "register", "heartbeat", "unregister"])
            ops.append((kind, rng.sample(topics, rng.randint(2, 6)) if kind == "register" else None))
        plans.append(ops)

    async def drive(model: BrokerModel, ops: list[tuple[str, Any]]) -> None:
        for counter, (kind, chosen) in enumerate(ops, start=1):
            client = rng.choice(pair)
            if kind == "register":
                body = register_json(
                    model.cluster,
                    model.name,
                    model.addr,
                    0,
                    {t: (counter, counter, 6, 0) for t in chosen},
                    counter=counter,
                )
                resp = await client.post("/v1/brokers/register", json=body)
                assert resp.status == 200, await resp.text()
                model.registered = True
                model.queues.update({t: counter for t in chosen})
            elif kind == "heartbeat":
                resp = await client.post(
                    "/v1/brokers/heartbeat", json={"clusterName": model.cluster, "brokerAddr": model.addr}
                )
                assert (await resp.json())["live"] is model.registered
            else:
                resp = await client.post(
                    "/v1/brokers/unregister",
                    json={
                        "clusterName": model.cluster,
                        "brokerAddr": model.addr,
                        "brokerName": model.name,
                        "brokerId": 0,
                    },
                )
                assert resp.status == 200
                model.registered, model.queues = False, {}

    await asyncio.gather(*(drive(m, ops) for m, ops in zip(models, plans, strict=True)))

    live = [m for m in models if m.registered]
    expected_clusters: dict[str, list[str]] = {}
    for m in live:
        expected_clusters.setdefault(m.cluster, []).append(m.name)
    for client in pair:
        info = await (await client.get("/v1/cluster")).json()
        assert {c: sorted(n) for c, n in info["clusterAddrTable"].items()} == {
            c: sorted(n) for c, n in expected_clusters.items()
        }
        assert {n: b["brokerAddrs"] for n, b in info["brokerAddrTable"].items()} == {
            m.name: {"0": m.addr} for m in live
        }
        for topic in topics:
            holders = {m.name: m for m in live if topic in m.queues}
            resp = await client.get(f"/v1/routes/{topic}")
            if not holders:
                assert resp.status == 404
                continue
            route = await resp.json()
            assert {b["brokerName"]: b["brokerAddrs"] for b in route["brokerDatas"]} == {
                n: {"0": m.addr} for n, m in holders.items()
            }
            assert {q["brokerName"]: q["readQueueNums"] for q in route["queueDatas"]} == {
                n: m.queues[topic] for n, m in holders.items()
            }
        topic_list = await (await client.get("/v1/topics")).json()
        assert topic_list == {"topicList": sorted({t for m in live for t in m.queues})}


async def test_expired_broker_is_never_served_after_its_deadline(
    settings: Settings, redis: Redis, namespace: str
) -> None:
    # a first sweep lands at a random moment within one interval: a day keeps it out of the test
    # (at 60 s, one run in about twenty swept the broker before the last assertion)
    lazy = await start_client(dataclasses.replace(settings, scanNotActiveBrokerInterval=86_400_000))
    try:
        resp = await lazy.post("/v1/brokers/register", json=register_json(heartbeatTimeoutMillis=2000))
        assert resp.status == 200
        k = Keyspace(namespace)
        member = "DefaultCluster/127.0.0.1:10911"
        deadline = int(float(await redis.zscore(k.deadlines, member) or 0))
        assert 0 < await redis.pttl(k.alive("DefaultCluster", "127.0.0.1:10911")) <= 2000
        served_after_deadline = []
        while (now := await server_ms(redis)) < deadline + 300:
            status = (await lazy.get("/v1/routes/TopicTest")).status
            after = await server_ms(redis)
            if now > deadline:
                if status != 404:
                    served_after_deadline.append(now - deadline)
            elif after <= deadline:
                assert status == 200, "hidden before its deadline"
            await asyncio.sleep(0.05)
        assert served_after_deadline == []
        assert (await (await lazy.get("/v1/cluster")).json()) == {
            "brokerAddrTable": {},
            "clusterAddrTable": {},
        }
        # No sweep has run on this worker: the entry is still in Redis, only hidden.
        assert await redis.hexists(k.live, member)

        sweeping = await start_client(dataclasses.replace(settings, scanNotActiveBrokerInterval=100))
        try:
            # how soon the sweep removes it is the bench's business; that it does is this test's
            await eventually(lambda: _gone(redis, k.live, member), what="the sweep removed the broker")
            # The broker's topics are cleaned by a call of their own after the expiry
            # (cleanBrokerTopics): on a loaded machine that one may still be on its way.
            await eventually(
                lambda: _no_keys(redis, k.brokers, k.topic("TopicTest"), k.btopics("broker-a")),
                what="the sweep cleaned the broker's topics",
            )
            assert await redis.smembers(k.topics) == set()
            events = await redis.xrange(k.events)
            expire = [f for _, f in events if f["kind"] == "expire"]
            assert len(expire) == 1
            assert expire[0]["brokerAddr"] == "127.0.0.1:10911" and expire[0]["removed"] == "1"
            assert int(expire[0]["ts"]) >= deadline
        finally:
            await close_client(sweeping)
    finally:
        await close_client(lazy)


async def test_heartbeats_keep_a_short_timeout_broker_alive(client: Client, redis: Redis) -> None:
    assert (
        await client.post("/v1/brokers/register", json=register_json(heartbeatTimeoutMillis=1000))
    ).status == 200
    for _ in range(8):
        await asyncio.sleep(0.3)
        resp = await client.post(
            "/v1/brokers/heartbeat", json={"clusterName": "DefaultCluster", "brokerAddr": "127.0.0.1:10911"}
        )
        assert (await resp.json())["live"] is True
        assert (await client.get("/v1/routes/TopicTest")).status == 200
    await asyncio.sleep(1.5)
    assert (await client.get("/v1/routes/TopicTest")).status == 404


async def test_stale_unregister_is_fenced_by_the_epoch(
    pair: tuple[Client, Client], redis: Redis, namespace: str
) -> None:
    a, b = pair
    first = await (await a.post("/v1/brokers/register", json=register_json())).json()
    second = await (await b.post("/v1/brokers/register", json=register_json())).json()
    assert second["epoch"] > first["epoch"]
    ref = {
        "clusterName": "DefaultCluster",
        "brokerAddr": "127.0.0.1:10911",
        "brokerName": "broker-a",
        "brokerId": 0,
    }
    stale = await a.post("/v1/brokers/unregister", json={**ref, "epoch": first["epoch"]})
    assert stale.status == 409
    assert (await stale.json())["remark"] == f"fenced: epoch {first['epoch']} is not the live registration"
    assert (await a.get("/v1/routes/TopicTest")).status == 200
    fenced = [f for _, f in await redis.xrange(Keyspace(namespace).events) if f["kind"] == "fenced"]
    assert [(f["epoch"], f["currentEpoch"]) for f in fenced] == [(str(first["epoch"]), str(second["epoch"]))]
    assert (await a.post("/v1/brokers/unregister", json={**ref, "epoch": second["epoch"]})).status == 200
    assert (await b.get("/v1/routes/TopicTest")).status == 404


async def test_scripts_reload_after_script_flush(client: Client, redis: Redis) -> None:
    assert (await client.post("/v1/brokers/register", json=register_json())).status == 200
    await redis.script_flush()
    assert (await client.get("/v1/routes/TopicTest")).status == 200
    await redis.script_flush()
    resp = await client.post("/v1/brokers/register", json=register_json(topics=["A", "B", "C"], counter=2))
    assert resp.status == 200
    assert (await client.get("/v1/routes/C")).status == 200
    await redis.script_flush()
    assert (await client.post("/v1/brokers/broker-a/wipe-write-perm")).status == 200
    route = await (await client.get("/v1/routes/A")).json()
    assert route["queueDatas"][0]["perm"] == 4


async def test_chunked_reregistration_never_loses_a_route(
    service: RegistryService, settings: Settings, store: Any
) -> None:
    small_chunks = RegistryService(store, lambda: dataclasses.replace(settings, registerChunkTopics=50))
    topics = [f"Topic{i:04d}" for i in range(1200)]
    await small_chunks.register_broker(register(topics=topics, counter=1))
    missing: list[str] = []
    stop = asyncio.Event()

    async def reader() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            topic = rng.choice(topics)
            if await service.route(topic) is None:
                missing.append(topic)

    readers = [asyncio.create_task(reader()) for _ in range(4)]
    for counter in range(2, 6):
        await small_chunks.register_broker(
            register(topics={t: (counter, counter, 6, 0) for t in topics}, counter=counter)
        )
    stop.set()
    await asyncio.gather(*readers)
    assert missing == []
    route = await service.route("Topic0999")
    assert route is not None and route.queueDatas[0].readQueueNums == 5


async def test_new_registration_is_written_in_bounded_chunks(
    store: Any, settings: Settings, redis: Redis, namespace: str
) -> None:
    svc = RegistryService(store, lambda: dataclasses.replace(settings, registerChunkTopics=100))
    topics = [f"T{i:04d}" for i in range(450)]
    await svc.register_broker(register(topics=topics))
    k = Keyspace(namespace)
    parts = [f for _, f in await redis.xrange(k.events) if f["kind"] == "registerQueues"]
    # five chunks of topics, then the commit with no topic once they are all applied; the chunks
    # go out together over pooled connections, so Redis may apply them in any order
    assert sorted(len(upserts(p)) for p in parts[:-1]) == [50, 100, 100, 100, 100]
    assert (len(upserts(parts[-1])), parts[-1]["final"]) == (0, "1")
    assert [p["final"] for p in parts[:-1]] == ["0"] * 5
    assert await redis.scard(k.topics) == 450 and await redis.scard(k.btopics("broker-a")) == 450
    assert await redis.hget(k.dataversions, "DefaultCluster/127.0.0.1:10911") == (
        '{"counter":1,"stateVersion":0,"timestamp":1700000000000}'
    )
    # An unchanged re-registration is one call that writes no topic.
    await svc.register_broker(register(topics=topics))
    parts_after = [f for _, f in await redis.xrange(k.events) if f["kind"] == "registerQueues"]
    assert len(parts_after) == 6
    last = [f for _, f in await redis.xrange(k.events) if f["kind"] == "register"][-1]
    assert (last["mode"], last["newSession"]) == ("0", "0")


async def _gone(redis: Redis, key: str, member: str) -> bool:
    return not await redis.hexists(key, member)


async def _no_keys(redis: Redis, *keys: str) -> bool:
    return not await redis.exists(*keys)
