"""GET_ROUTEINFO_BY_TOPIC: pickupTopicRouteData rules P1-P8 (spec §3.10), including acting-master
presentation (P7) and orderTopicConf (P8), at the service and through HTTP."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.registry.service import RegistryService
from namesrv.store.keyspace import Keyspace
from tests.builders import register, register_json
from tests.conftest import start_client
from tests.registry.conftest import MakeService
from tests.registry.helpers import (
    CLUSTER,
    MAPPING,
    MASTER,
    SLAVE,
    SLAVE2,
    B,
    bd,
    cluster,
    qd,
    route,
    route_obj,
)


# ---- P1, P2, P3, P5 ----
async def test_p1_unknown_topic_has_no_route(service: RegistryService) -> None:
    await service.register_broker(register())
    assert await service.route("Nope") is None


async def test_p2_p3_route_of_two_broker_names(service: RegistryService) -> None:
    await service.register_broker(register(addr=MASTER, topics={"T": (8, 8, 6, 0), "X": (1, 1, 6, 0)}))
    await service.register_broker(register(addr=SLAVE, broker_id=1))
    await service.register_broker(
        register(CLUSTER, "broker-b", B, topics={"T": (4, 2, 7, 3), "Y": (1, 1, 6, 0)})
    )
    assert await route(service, "T") == route_obj(
        [bd("broker-a", {0: MASTER, 1: SLAVE}), bd("broker-b", {0: B})],
        [qd("broker-a", 6, 8, 8), qd("broker-b", 7, 4, 2, 3)],
    )


async def test_p3_queues_of_names_without_broker_data_are_not_returned(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    """Deliberate difference: Java returns such queues; they only exist here while a removal is
    being cleaned up. Simulated by writing a queue of an unknown broker name directly."""
    await service.register_broker(register())
    k = Keyspace(namespace)
    await redis.hset(
        k.topic("TopicTest"),
        "ghost",
        '{"brokerName":"ghost","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}',
    )
    await redis.hset(
        k.topic("GhostOnly"),
        "ghost",
        '{"brokerName":"ghost","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}',
    )
    assert await route(service, "TopicTest") == route_obj([bd("broker-a", {0: MASTER})], [qd("broker-a")])
    assert await route(service, "GhostOnly") is None  # P5: no BrokerData at all


async def test_p5_route_disappears_with_the_last_broker(service: RegistryService) -> None:
    await service.register_broker(register(addr=MASTER))
    await service.register_broker(register(addr=SLAVE, broker_id=1))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await route(service, "TopicTest") is not None
    await service.unregister_broker(CLUSTER, SLAVE, "broker-a", 1)
    assert await route(service, "TopicTest") is None


# ---- P4 ----
async def test_p4_filter_servers_of_every_returned_address(service: RegistryService) -> None:
    await service.register_broker(register(addr=MASTER, filters=("10.0.0.1:1", "10.0.0.1:2")))
    await service.register_broker(register(addr=SLAVE, broker_id=1, filters=("10.0.0.2:1",)))
    await service.register_broker(register(CLUSTER, "broker-b", B))  # no filter servers
    await service.register_broker(
        register(CLUSTER, "broker-c", "127.0.0.3:1", topics=["Z", "Other"], filters=("x:1",))
    )
    assert (await route(service, "TopicTest") or {})["filterServerTable"] == {
        MASTER: ["10.0.0.1:1", "10.0.0.1:2"],
        SLAVE: ["10.0.0.2:1"],
    }


# ---- P6 ----
async def test_p6_static_topic_mapping(service: RegistryService) -> None:
    await service.register_broker(register(mappings={"TopicTest": MAPPING}))
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: MASTER})], [qd("broker-a")], mapping={"broker-a": MAPPING}
    )
    assert "topicQueueMappingByBroker" not in (await route(service, "TBW102") or {})


# ---- P7: acting master ----
@pytest.mark.parametrize(
    ("support", "acting", "addrs", "perm"),
    [
        (True, True, {0: SLAVE}, 4),
        (False, True, {1: SLAVE}, 4),
        (True, False, {1: SLAVE}, 6),
        (False, False, {1: SLAVE}, 6),
    ],
    ids=["support+acting", "acting-only", "support-only", "neither"],
)
async def test_p7_master_down_presentation(
    make_service: MakeService, support: bool, acting: bool, addrs: dict[int, str], perm: int
) -> None:
    service = make_service(supportActingMaster=support)
    await service.register_broker(register(addr=MASTER, acting=acting))
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=acting))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", addrs, acting=acting)], [qd("broker-a", perm)]
    )
    # ClusterInfo shows the real ids (presentation only).
    assert (await cluster(service))["brokerAddrTable"] == {
        "broker-a": bd("broker-a", {1: SLAVE}, acting=acting)
    }


async def test_p7_master_present_is_not_rewritten(make_service: MakeService) -> None:
    service = make_service(supportActingMaster=True)
    await service.register_broker(register(addr=MASTER, acting=True))
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True))
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: MASTER, 1: SLAVE}, acting=True)], [qd("broker-a", 6)]
    )


async def test_p7_lowest_id_moves_to_0_others_stay(make_service: MakeService) -> None:
    service = make_service(supportActingMaster=True)
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True))
    await service.register_broker(register(addr=SLAVE2, broker_id=2, acting=True))
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: SLAVE, 2: SLAVE2}, acting=True)], [qd("broker-a", 4)]
    )


async def test_p7_needs_a_non_writable_queue(make_service: MakeService) -> None:
    service = make_service(supportActingMaster=True)
    await service.register_broker(register(addr=MASTER, acting=True))
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    await service.change_write_perm("broker-a", wipe=False)  # admin makes the queues writable again
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {1: SLAVE}, acting=True)], [qd("broker-a", 6)]
    )


async def test_p7_not_applied_to_sync_broker_member_topics(make_service: MakeService) -> None:
    service = make_service(supportActingMaster=True)
    topic = "rmq_sys_SYNC_BROKER_MEMBER_broker-a"
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True, topics=[topic, "TopicTest"]))
    assert await route(service, topic) == route_obj(
        [bd("broker-a", {1: SLAVE}, acting=True)], [qd("broker-a", 4)]
    )
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: SLAVE}, acting=True)], [qd("broker-a", 4)]
    )


async def test_p7_two_groups_only_the_masterless_one_is_presented(make_service: MakeService) -> None:
    """RouteInfoManagerNewTest.pickupPartitionOrderTopicRouteData, case 3."""
    service = make_service(supportActingMaster=True)
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True))
    await service.register_broker(register(addr=MASTER, acting=True))
    await service.register_broker(register(CLUSTER, "broker-x", B, acting=True))
    await service.register_broker(register(CLUSTER, "broker-x", "127.0.0.2:10921", 1, acting=True))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: SLAVE}, acting=True), bd("broker-x", {0: B, 1: "127.0.0.2:10921"}, acting=True)],
        [qd("broker-a", 4), qd("broker-x", 6)],
    )


# ---- P8: orderTopicConf ----
@pytest.mark.parametrize(
    ("enabled", "stored", "expected"),
    [(True, "broker-a:8", "broker-a:8"), (False, "broker-a:8", None), (True, None, None)],
    ids=["enabled", "disabled", "no-config"],
)
async def test_p8_order_topic_conf(
    make_service: MakeService, enabled: bool, stored: str | None, expected: str | None
) -> None:
    service = make_service(orderMessageEnable=enabled)
    await service.register_broker(register())
    await service.kv_put("ORDER_TOPIC_CONFIG", "Other", "broker-a:1")
    if stored is not None:
        await service.kv_put("ORDER_TOPIC_CONFIG", "TopicTest", stored)
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: MASTER})], [qd("broker-a")], order=expected
    )


# ---- the same rules end to end ----
async def test_http_route_of_master_and_slave(client: TestClient[Any, Any]) -> None:
    assert (await client.post("/v1/brokers/register", json=register_json(addr=MASTER))).status == 200
    assert (
        await client.post("/v1/brokers/register", json=register_json(addr=SLAVE, broker_id=1))
    ).status == 200
    resp = await client.get("/v1/routes/TopicTest")
    assert resp.status == 200
    assert await resp.text() == (
        '{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"broker-a",'
        '"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":'
        '[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
    )


async def test_http_acting_master_and_order_conf(settings: Settings) -> None:
    custom = dataclasses.replace(settings, supportActingMaster=True, orderMessageEnable=True)
    client = await start_client(custom)
    try:
        for body in (
            register_json(addr=MASTER, enableActingMaster=True),
            register_json(addr=SLAVE, broker_id=1, enableActingMaster=True),
        ):
            assert (await client.post("/v1/brokers/register", json=body)).status == 200
        assert (
            await client.put("/v1/kv/ORDER_TOPIC_CONFIG/TopicTest", json={"value": "broker-a:8"})
        ).status == 200
        resp = await client.post(
            "/v1/brokers/unregister",
            json={"clusterName": CLUSTER, "brokerAddr": MASTER, "brokerName": "broker-a", "brokerId": 0},
        )
        assert await resp.json() == {"code": 0}
        resp = await client.get("/v1/routes/TopicTest")
        assert await resp.text() == (
            '{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10921"},"brokerName":"broker-a",'
            '"cluster":"DefaultCluster","enableActingMaster":true}],"filterServerTable":{},'
            '"orderTopicConf":"broker-a:8","queueDatas":[{"brokerName":"broker-a","perm":4,'
            '"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
        )
        resp = await client.get("/v1/cluster")
        assert await resp.json() == {
            "brokerAddrTable": {"broker-a": bd("broker-a", {1: SLAVE}, acting=True)},
            "clusterAddrTable": {CLUSTER: ["broker-a"]},
        }
    finally:
        await client.close()


async def route_status_while_waiting(settings: Settings, wait: int) -> tuple[int, Any]:
    custom = dataclasses.replace(settings, needWaitForService=True, waitSecondsForService=wait)
    client = await start_client(custom)
    try:
        await client.post("/v1/brokers/register", json=register_json())
        resp = await client.get("/v1/routes/TopicTest")
        return resp.status, await resp.json()
    finally:
        await client.close()


async def test_route_served_once_the_wait_is_over(settings: Settings) -> None:
    """ClusterTestRequestProcessorTest.testNamesrvReady: needWaitForService with a 0 s wait."""
    status, body = await route_status_while_waiting(settings, 0)
    assert status == 200 and body["queueDatas"] == [qd("broker-a")]


async def test_route_refused_while_waiting_for_service(settings: Settings) -> None:
    """§2.3 105 step 1 and ClusterTestRequestProcessorTest.testNamesrvNotReady: with
    needWaitForService, route lookups answer 1 "name server not ready" for waitSecondsForService
    after start."""
    assert await route_status_while_waiting(settings, 45) == (
        503,
        {"code": 1, "remark": "name server not ready"},
    )
