"""Liveness (spec §3.8 L1-L5 as they apply to a Redis sweep): expiry by deadline, refresh by 904 and
322, reads hiding expired brokers before the sweep (deliberate difference), fenced closes.

Only the tests marked ``sleeps`` wait (about 1.3 s each, timeout 1000 ms, the minimum)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from namesrv.domain.model import DataVersion, RegisterBrokerResult
from namesrv.registry.route_cache import RouteCache
from namesrv.registry.route_reader import RouteReader
from namesrv.registry.service import RegistryService
from namesrv.store.keyspace import Keyspace
from tests.builders import ManualFreshness, register, register_json
from tests.registry.conftest import MakeService
from tests.registry.helpers import (
    CLUSTER,
    MASTER,
    SLAVE,
    B,
    C,
    bd,
    cluster,
    events,
    perms_of,
    qd,
    route,
    route_obj,
)

PAST_TIMEOUT = 1.3  # seconds: past a 1000 ms deadline with margin


async def test_l2_expiry_hides_then_sweeps_and_refreshes_keep_alive(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    """sleeps. A: no heartbeat (expires); B: BROKER_HEARTBEAT (904); C: QUERY_DATA_VERSION (322)."""
    _, reg_a = await service.register_broker(
        register(CLUSTER, "broker-a", MASTER, timeout=1000, topics=["T", "OnlyA"])
    )
    await service.register_broker(register(CLUSTER, "broker-b", B, timeout=1000, topics=["T", "X"]))
    await service.register_broker(register(CLUSTER, "broker-c", C, timeout=1000, topics=["T", "Y"]))
    assert reg_a is not None
    await asyncio.sleep(0.65)
    assert await service.heartbeat(CLUSTER, B) is True
    assert await service.query_data_version(CLUSTER, C, DataVersion(1, 0, 1700000000000)) == (
        False,
        DataVersion(1, 0, 1700000000000),
    )
    await asyncio.sleep(PAST_TIMEOUT - 0.65)
    # Before any sweep, reads already hide broker-a (deliberate difference).
    expected_t = route_obj([bd("broker-b", {0: B}), bd("broker-c", {0: C})], [qd("broker-b"), qd("broker-c")])
    assert await route(service, "T") == expected_t
    assert await route(service, "OnlyA") is None
    assert sorted((await cluster(service))["brokerAddrTable"]) == ["broker-b", "broker-c"]
    assert await service.broker_member_group(CLUSTER, "broker-a") == {}

    assert await service.sweep() == 1
    assert await service.sweep() == 0  # idempotent
    assert await route(service, "T") == expected_t
    assert await service.all_topics() == ["T", "X", "Y"]
    assert await service.query_data_version(CLUSTER, MASTER, None) == (True, None)
    k = Keyspace(namespace)
    assert await redis.zrange(k.deadlines, 0, -1) == [f"{CLUSTER}/{B}", f"{CLUSTER}/{C}"]

    (e,) = await events(redis, namespace, "expire")
    assert int(e["deadline"]) < int(e["ts"])
    assert {k: v for k, v in e.items() if k not in ("ts", "deadline")} == {
        "kind": "expire",
        "cluster": CLUSTER,
        "brokerName": "broker-a",
        "brokerAddr": MASTER,
        "brokerId": "0",
        "epoch": str(reg_a.epoch),
        "timeoutMillis": "1000",
        "brokerData": "",
        "removed": "1",
        "via": "test",
    }
    beats = await events(redis, namespace, "heartbeat")
    assert [(h["brokerName"], h["source"], h["timeoutMillis"]) for h in beats] == [
        ("broker-b", "904", "1000"),
        ("broker-c", "322", "1000"),
    ]


async def test_l2_expired_master_with_acting_master(make_service: MakeService) -> None:
    """sleeps. The master expires while its slave lives: reads present what the sweep will do
    (U5 clears the write bit; P7 presents the slave as id 0), and a registering slave is told of
    no master (R13)."""
    service = make_service(supportActingMaster=True)
    plain = make_service(supportActingMaster=False)
    await service.register_broker(register(addr=MASTER, acting=True, timeout=1000))
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True))
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: MASTER, 1: SLAVE}, acting=True)], [qd("broker-a", 6)]
    )
    await asyncio.sleep(PAST_TIMEOUT)
    before_sweep = (await route(service, "TopicTest"), await route(plain, "TopicTest"))
    assert before_sweep == (
        route_obj([bd("broker-a", {0: SLAVE}, acting=True)], [qd("broker-a", 4)]),
        route_obj([bd("broker-a", {1: SLAVE}, acting=True)], [qd("broker-a", 4)]),
    )
    assert (await cluster(service))["brokerAddrTable"] == {
        "broker-a": bd("broker-a", {1: SLAVE}, acting=True)
    }
    slave, _ = await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True))
    assert slave == RegisterBrokerResult()  # the expired master is not live for R13
    assert await service.sweep() == 1
    assert (await route(service, "TopicTest"), await route(plain, "TopicTest")) == before_sweep
    assert await perms_of(plain, "TBW102") == {"broker-a": 4}


async def test_l2_expired_slave_only_hides_its_address(service: RegistryService) -> None:
    """sleeps. Without acting master, an expired slave just disappears from brokerAddrs."""
    await service.register_broker(register(addr=MASTER))
    await service.register_broker(register(addr=SLAVE, broker_id=1, timeout=1000))
    await asyncio.sleep(PAST_TIMEOUT)
    expected = route_obj([bd("broker-a", {0: MASTER})], [qd("broker-a")])
    assert await route(service, "TopicTest") == expected
    assert await service.broker_member_group(CLUSTER, "broker-a") == {0: MASTER}
    assert await service.sweep() == 1
    assert await route(service, "TopicTest") == expected


async def test_l2_heartbeat_keeps_the_brokers_own_timeout(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(register(timeout=10000))
    k, member = Keyspace(namespace), f"{CLUSTER}/{MASTER}"
    first = await redis.zscore(k.deadlines, member)
    assert await service.heartbeat(CLUSTER, MASTER) is True
    second = await redis.zscore(k.deadlines, member)
    assert first is not None and second is not None and second >= first
    (beat,) = await events(redis, namespace, "heartbeat")
    assert int(beat["deadline"]) - int(beat["ts"]) == 10000
    live = orjson.loads(await redis.hget(k.live, member) or "{}")
    assert live["heartbeatTimeoutMillis"] == 10000


async def test_l2_unknown_broker_heartbeat_is_a_no_op(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    assert await service.heartbeat(CLUSTER, MASTER) is False
    assert await service.query_data_version(CLUSTER, MASTER, DataVersion()) == (True, None)
    k = Keyspace(namespace)
    assert await redis.exists(k.live, k.deadlines) == 0
    assert await events(redis, namespace, "heartbeat") == []


async def test_l2_heartbeat_is_keyed_by_cluster_and_address(service: RegistryService) -> None:
    await service.register_broker(register("C1", "broker-a", MASTER))
    assert await service.heartbeat("C2", MASTER) is False
    assert await service.heartbeat("C1", MASTER) is True


async def test_l2_sweep_with_nothing_due(service: RegistryService) -> None:
    await service.register_broker(register())
    assert await service.sweep() == 0
    assert await route(service, "TopicTest") == route_obj([bd("broker-a", {0: MASTER})], [qd("broker-a")])


async def test_l4_close_of_an_old_connection_after_re_registration(service: RegistryService) -> None:
    """L4: the live entry belongs to the newest registration; a close of the previous one (fenced
    by its epoch) is a no-op, while a close of the current one removes the broker."""
    _, first = await service.register_broker(register())
    _, second = await service.register_broker(register())
    assert first is not None and second is not None
    assert not await service.unregister_broker(
        CLUSTER, MASTER, "broker-a", 0, fence_epoch=first.epoch, reason="close"
    )
    assert await route(service, "TopicTest") is not None
    assert await service.unregister_broker(
        CLUSTER, MASTER, "broker-a", 0, fence_epoch=second.epoch, reason="close"
    )
    assert await route(service, "TopicTest") is None


async def test_l2_expired_address_of_another_cluster_is_hidden(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    """Deliberate difference "reads never return a broker past its deadline", for a broker name
    shared by two clusters (apache/rocketmq#3991). The deadline is moved into the past directly
    instead of sleeping (the deadline ZSET is authoritative for expiry)."""
    await service.register_broker(register("C1", "broker-a", MASTER))
    await service.register_broker(register("C2", "broker-a", SLAVE, 1))
    await redis.zadd(Keyspace(namespace).deadlines, {f"C2/{SLAVE}": 1})
    assert await service.broker_member_group("C1", "broker-a") == {0: MASTER}
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: MASTER}, "C1")], [qd("broker-a")]
    )


async def test_http_heartbeat_and_data_version(client: TestClient[Any, Any]) -> None:
    await client.post("/v1/brokers/register", json=register_json(addr=MASTER, counter=3))
    who = {"clusterName": CLUSTER, "brokerAddr": MASTER, "brokerName": "broker-a", "brokerId": 0}
    assert await (await client.post("/v1/brokers/heartbeat", json=who)).json() == {"code": 0, "live": True}
    unknown = {**who, "brokerAddr": "9.9.9.9:1"}
    assert await (await client.post("/v1/brokers/heartbeat", json=unknown)).json() == {
        "code": 0,
        "live": False,
    }
    dv = {"counter": 3, "stateVersion": 0, "timestamp": 1700000000000}
    resp = await client.post("/v1/brokers/data-version", json={**who, "dataVersion": dv})
    assert await resp.json() == {"code": 0, "changed": False, "dataVersion": dv}
    resp = await client.post("/v1/brokers/data-version", json={**who, "dataVersion": {**dv, "counter": 4}})
    assert await resp.json() == {"code": 0, "changed": True, "dataVersion": dv}
    resp = await client.post("/v1/brokers/data-version", json={**unknown, "dataVersion": dv})
    assert await resp.json() == {"code": 0, "changed": True, "dataVersion": None}


async def test_a_route_read_names_the_brokers_it_left_out_as_expired(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    """A cached route must be dropped when a broker it left out comes back, although it does not
    mention it: the read says which broker names holding the topic's queues it hid."""
    await service.register_broker(register(CLUSTER, "broker-a", MASTER))
    await service.register_broker(register(CLUSTER, "broker-b", B))
    snap = await service.store.route("TopicTest", with_order=False)
    assert snap.hidden_brokers == ()
    await redis.zadd(Keyspace(namespace).deadlines, {f"{CLUSTER}/{B}": 1})
    snap = await service.store.route("TopicTest", with_order=False)
    assert snap.hidden_brokers == ("broker-b",)
    assert [orjson.loads(b)["brokerName"] for b in snap.broker_datas] == ["broker-a"]
    await redis.zadd(Keyspace(namespace).deadlines, {f"{CLUSTER}/{MASTER}": 1})
    snap = await service.store.route("TopicTest", with_order=False)
    assert (snap.broker_datas, sorted(snap.hidden_brokers)) == ([], ["broker-a", "broker-b"])
    lookup = await RouteReader(service.store, service.settings).read("TopicTest")
    assert lookup.route is None and lookup.hidden == {"broker-a", "broker-b"}


async def test_a_read_for_one_answer_skips_deadlines_while_no_broker_is_past_one(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    """A worker without a route cache needs no address's deadline: while no broker is past its
    deadline, the script returns the BrokerData as stored, no deadlines, and valid until the
    earliest deadline of every broker. One past it anywhere (even outside the route) takes the
    full read, which hides it as a cache's read does."""
    await service.register_broker(register(CLUSTER, "broker-a", MASTER, topics=["T", "OnlyA"]))
    await service.register_broker(register(CLUSTER, "broker-b", B, topics=["T", "OnlyB"]))
    await service.register_broker(register(CLUSTER, "broker-c", C, topics=["X", "Y"]))
    k = Keyspace(namespace)
    cached = await service.store.route("T", with_order=False)
    once = await service.store.route("T", with_order=False, for_cache=False)
    assert sorted(once.broker_datas) == sorted(await redis.hmget(k.brokers, ["broker-a", "broker-b"]))
    assert (once.queue_datas, once.broker_datas, once.hidden_brokers) == (
        cached.queue_datas,
        cached.broker_datas,
        (),
    )
    assert once.deadlines == {}
    assert set(cached.deadlines) == {f"{CLUSTER}/{MASTER}", f"{CLUSTER}/{B}"}
    assert cached.valid_until_ms == min(cached.deadlines.values())
    ((_, earliest),) = await redis.zrange(k.deadlines, 0, 0, withscores=True)
    assert once.valid_until_ms == int(earliest)

    await redis.zadd(k.deadlines, {f"{CLUSTER}/{C}": 1})  # outside T's route
    once = await service.store.route("T", with_order=False, for_cache=False)
    assert (once.broker_datas, once.valid_until_ms) == (cached.broker_datas, cached.valid_until_ms)

    await redis.zadd(k.deadlines, {f"{CLUSTER}/{B}": 1})
    once = await service.store.route("T", with_order=False, for_cache=False)
    assert once.hidden_brokers == ("broker-b",)
    assert [orjson.loads(b)["brokerName"] for b in once.broker_datas] == ["broker-a"]
    assert await route(service, "T") == route_obj([bd("broker-a", {0: MASTER})], [qd("broker-a")])


async def test_only_registrations_that_change_routes_count_as_own_writes(service: RegistryService) -> None:
    """After an own write the worker's lookups wait for the change feed; an unchanged periodic
    re-registration changes no route, so it must not make them wait."""
    cache = RouteCache(
        RouteReader(service.store, service.settings).read,
        ManualFreshness(),
        staleness_s=0.1,
        outage_s=30.0,
        catch_up_s=1.0,
        negative_s=1.0,
        max_entries=100,
    )
    service = RegistryService(service.store, service.settings, cache)
    await service.register_broker(register(CLUSTER, "broker-a", MASTER))
    first = cache.local_write_at
    assert first > float("-inf")
    await service.register_broker(register(CLUSTER, "broker-a", MASTER))
    assert cache.local_write_at == first
    await service.register_broker(register(CLUSTER, "broker-a", SLAVE, 1))  # the BrokerData changes
    assert cache.local_write_at > first
