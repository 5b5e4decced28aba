"""Unregistration: rules U1-U7 (spec §3.7) and the registration-epoch fence (deliberate difference:
stale removals change nothing; removal and topic cleanup are done before the call returns)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from namesrv.domain.model import DataVersion
from namesrv.registry.service import RegistryService
from namesrv.store.keyspace import Keyspace
from tests.builders import register, register_json
from tests.registry.conftest import MakeService
from tests.registry.helpers import (
    CLUSTER,
    MAPPING,
    MASTER,
    SLAVE,
    SLAVE2,
    B,
    addrs_of,
    bd,
    cluster,
    events,
    perms_of,
    qd,
    route,
    route_obj,
)


async def master_and_slave(
    service: RegistryService, *, acting: bool = False, topics: list[str] | None = None
) -> None:
    await service.register_broker(register(addr=MASTER, acting=acting, topics=topics))
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=acting, topics=topics))


# ---- U1 ----
async def test_u1_removes_liveness_and_filter_servers(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(register(addr=MASTER, filters=("127.0.0.1:30000",)))
    await service.register_broker(register(addr=SLAVE, broker_id=1, filters=("127.0.0.1:30001",)))
    assert await service.unregister_broker(CLUSTER, SLAVE, "broker-a", 1) is True
    assert await service.query_data_version(CLUSTER, SLAVE, DataVersion(1, 0, 1700000000000)) == (True, None)
    assert await redis.hgetall(Keyspace(namespace).filters) == {f"{CLUSTER}/{MASTER}": '["127.0.0.1:30000"]'}
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: MASTER})], [qd("broker-a")], {MASTER: ["127.0.0.1:30000"]}
    )


async def test_u1_only_the_named_cluster_entry_goes(service: RegistryService) -> None:
    """RouteInfoManagerTest.testQueryBrokerTopicConfig: liveness is keyed by (cluster, address)."""
    await service.register_broker(
        register("default-cluster", "default-broker", MASTER, 1234, counter=10, timestamp=100)
    )
    await service.register_broker(
        register("default-cluster-1", "default-broker-1", MASTER, 1234, counter=20, timestamp=200)
    )
    assert await service.query_data_version("default-cluster", MASTER, None) == (
        True,
        DataVersion(10, 0, 100),
    )
    assert await service.query_data_version("default-cluster-1", MASTER, None) == (
        True,
        DataVersion(20, 0, 200),
    )
    await service.unregister_broker("default-cluster-1", MASTER, "default-broker-1", 1234)
    assert await service.query_data_version("default-cluster", MASTER, DataVersion(10, 0, 100)) == (
        False,
        DataVersion(10, 0, 100),
    )
    assert await service.query_data_version("default-cluster-1", MASTER, DataVersion(20, 0, 200)) == (
        True,
        None,
    )


# ---- U2 ----
@pytest.mark.parametrize("request_id", [0, 1, 7])
async def test_u2_removes_every_id_of_the_address_whatever_the_request_id(
    service: RegistryService, request_id: int
) -> None:
    await master_and_slave(service)
    await service.unregister_broker(CLUSTER, SLAVE, "broker-a", request_id)
    assert await addrs_of(service, "TopicTest", "broker-a") == {"0": MASTER}


async def test_u2_unknown_broker_name_changes_nothing(service: RegistryService) -> None:
    await master_and_slave(service)
    before = await cluster(service)
    assert await service.unregister_broker(CLUSTER, "127.0.0.9:1", "nope", 0) is True
    assert await cluster(service) == before


async def test_u2_name_not_matching_the_address_keeps_the_broker_data(service: RegistryService) -> None:
    await master_and_slave(service)
    await service.register_broker(register(CLUSTER, "broker-b", B))
    await service.unregister_broker(CLUSTER, B, "broker-a", 0)  # wrong name: U2 looks in broker-a only
    info = await cluster(service)
    assert info["brokerAddrTable"]["broker-b"] == bd("broker-b", {0: B})
    assert info["brokerAddrTable"]["broker-a"] == bd("broker-a", {0: MASTER, 1: SLAVE})


# ---- U3 ----
async def test_u3_last_address_removes_the_name_and_the_empty_cluster(service: RegistryService) -> None:
    await service.register_broker(register("C1", "broker-a", MASTER))
    await service.register_broker(register("C1", "broker-b", B))
    await service.register_broker(register("C2", "broker-c", "127.0.0.3:10911"))
    await service.unregister_broker("C1", MASTER, "broker-a", 0)
    await service.unregister_broker("C2", "127.0.0.3:10911", "broker-c", 0)
    assert await cluster(service) == {
        "brokerAddrTable": {"broker-b": bd("broker-b", {0: B}, "C1")},
        "clusterAddrTable": {"C1": ["broker-b"]},
    }


async def test_u3_name_leaves_only_the_cluster_named_in_the_request(service: RegistryService) -> None:
    await service.register_broker(register("C1", "broker-a", MASTER))
    await service.register_broker(register("C2", "broker-a", SLAVE, 1))
    await service.unregister_broker("C2", SLAVE, "broker-a", 1)  # broker-a keeps its master
    assert (await cluster(service))["clusterAddrTable"] == {"C1": ["broker-a"], "C2": ["broker-a"]}
    await service.unregister_broker("C2", MASTER, "broker-a", 0)  # last address, request says C2
    assert await cluster(service) == {"brokerAddrTable": {}, "clusterAddrTable": {"C1": ["broker-a"]}}


# ---- U4 ----
async def test_u4_removed_broker_loses_its_queues_and_empty_topics_go(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(register(addr=MASTER, topics=["Shared", "OnlyA"]))
    await service.register_broker(register(CLUSTER, "broker-b", B, topics=["Shared", "OnlyB"]))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await route(service, "OnlyA") is None
    assert await route(service, "Shared") == route_obj([bd("broker-b", {0: B})], [qd("broker-b")])
    assert await service.all_topics() == ["OnlyB", "Shared"]
    # Cleanup is finished when the call returns (deliberate difference: no queue).
    k = Keyspace(namespace)
    assert await redis.smembers(k.pendingclean) == set()
    assert await redis.exists(k.topic("OnlyA"), k.btopics("broker-a")) == 0
    assert await redis.hkeys(k.topic("Shared")) == ["broker-b"]


async def test_u4_slave_left_alone_keeps_the_queues(service: RegistryService) -> None:
    """RouteInfoManagerNewTest.unRegisterMasterBrokerOldVersion: without acting master the queue
    stays writable and the route shows only id 1."""
    await master_and_slave(service, acting=False)
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await route(service, "TopicTest") == route_obj([bd("broker-a", {1: SLAVE})], [qd("broker-a", 6)])


# ---- U5 ----
@pytest.mark.parametrize(
    ("acting", "perms"),
    [(True, {"A": 4, "B": 5, "C": 4}), (False, {"A": 6, "B": 7, "C": 4})],
    ids=["acting-master", "no-acting-master"],
)
async def test_u5_master_leaving_clears_the_write_bit_with_acting_master(
    service: RegistryService, acting: bool, perms: dict[str, int]
) -> None:
    topics = {"A": (8, 8, 6, 0), "B": (8, 8, 7, 0), "C": (8, 8, 4, 0)}
    await service.register_broker(register(addr=MASTER, acting=acting, topics=topics))
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=acting, topics=topics))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert {t: (await perms_of(service, t) or {})["broker-a"] for t in topics} == perms


async def test_u5_slave_leaving_keeps_the_write_bit(service: RegistryService) -> None:
    await master_and_slave(service, acting=True)
    await service.unregister_broker(CLUSTER, SLAVE, "broker-a", 1)
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: MASTER}, acting=True)], [qd("broker-a")]
    )


async def test_u5_other_broker_names_are_untouched(service: RegistryService) -> None:
    await master_and_slave(service, acting=True)
    await service.register_broker(register(CLUSTER, "broker-b", B, acting=True))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await perms_of(service, "TopicTest") == {"broker-a": 4, "broker-b": 6}


async def test_u5_master_returning_restores_the_write_bit(make_service: MakeService) -> None:
    """RouteInfoManagerNewTest.pickupTopicRouteDataWithSlave and the Appendix A AM section."""
    service = make_service(supportActingMaster=True)
    await master_and_slave(service, acting=True)
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: SLAVE}, acting=True)], [qd("broker-a", 4)]
    )
    await service.register_broker(register(addr=MASTER, acting=True))  # same DataVersion; id 0 slot empty
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: MASTER, 1: SLAVE}, acting=True)], [qd("broker-a", 6)]
    )


async def test_u5_applies_to_a_reduced_broker_even_if_the_address_was_gone(service: RegistryService) -> None:
    """U3/U5: the name is a reducedBroker whether or not the address was found, so with acting
    master and no master its queues lose the write bit again (e.g. the master's UNREGISTER_BROKER
    reaching a second NameServer pod after an admin re-added the write perm)."""
    await master_and_slave(service, acting=True)
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await service.change_write_perm("broker-a", wipe=False) == 2
    assert await perms_of(service, "TopicTest") == {"broker-a": 6}
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await perms_of(service, "TopicTest") == {"broker-a": 4}


# ---- U7 ----
async def test_u7_unregistration_keeps_static_topic_mappings(service: RegistryService) -> None:
    await service.register_broker(register(addr=MASTER, mappings={"TopicTest": MAPPING}))
    await service.register_broker(register(addr=SLAVE, broker_id=1))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {1: SLAVE})], [qd("broker-a")], mapping={"broker-a": MAPPING}
    )
    await service.unregister_broker(CLUSTER, SLAVE, "broker-a", 1)
    await service.register_broker(register(addr=MASTER))  # no mapping in this body
    assert (await route(service, "TopicTest") or {}).get("topicQueueMappingByBroker") == {"broker-a": MAPPING}


# ---- batch (B2 / submitMultiUnRegisterRequests) ----
async def test_two_masters_unregistered_remove_both_topics(service: RegistryService) -> None:
    await service.register_broker(register(CLUSTER, "broker-a", MASTER, topics=["base", "TestTopic1"]))
    await service.register_broker(register(CLUSTER, "broker-a1", MASTER + "9", topics=["base", "TestTopic2"]))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    await service.unregister_broker(CLUSTER, MASTER + "9", "broker-a1", 0)
    assert [await route(service, t) for t in ("TestTopic1", "TestTopic2", "base")] == [None, None, None]
    assert await service.all_topics() == []


# ---- fencing by registration epoch ----
async def test_fence_current_epoch_removes(service: RegistryService, redis: Redis, namespace: str) -> None:
    _, reg = await service.register_broker(register())
    assert reg is not None
    assert await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0, fence_epoch=reg.epoch) is True
    assert await route(service, "TopicTest") is None
    (e,) = await events(redis, namespace, "unregister")
    assert {k: v for k, v in e.items() if k != "ts"} == {
        "kind": "unregister",
        "cluster": CLUSTER,
        "brokerName": "broker-a",
        "brokerAddr": MASTER,
        "brokerId": "0",
        "epoch": str(reg.epoch),
        "brokerData": "",
        "removed": "1",
        "via": "test",
    }


@pytest.mark.parametrize("reason", ["unregister", "close"])
async def test_fence_stale_epoch_changes_nothing(
    service: RegistryService, redis: Redis, namespace: str, reason: str
) -> None:
    """apache/rocketmq#11043: a close seen after the broker re-registered (through any worker)
    must not remove the fresh registration."""
    _, old = await service.register_broker(register(addr=MASTER, filters=("127.0.0.1:30000",)))
    await service.register_broker(register(addr=SLAVE, broker_id=1))
    _, new = await service.register_broker(register(addr=MASTER))
    assert old is not None and new is not None
    before = (await route(service, "TopicTest"), await cluster(service))
    done = await service.unregister_broker(
        CLUSTER, MASTER, "broker-a", 0, fence_epoch=old.epoch, reason=reason
    )
    assert done is False
    assert (await route(service, "TopicTest"), await cluster(service)) == before
    assert await service.query_data_version(CLUSTER, MASTER, None) == (True, DataVersion(1, 0, 1700000000000))
    (e,) = await events(redis, namespace, "fenced")
    assert {k: v for k, v in e.items() if k != "ts"} == {
        "kind": "fenced",
        "reason": reason,
        "cluster": CLUSTER,
        "brokerName": "broker-a",
        "brokerAddr": MASTER,
        "brokerId": "0",
        "epoch": str(old.epoch),
        "currentEpoch": str(new.epoch),
        "via": "test",
    }
    assert await events(redis, namespace, reason) == []


async def test_fence_without_a_live_registration_changes_nothing(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    _, reg = await service.register_broker(register())
    assert reg is not None
    assert await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0) is True
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=False))
    # A late close of the first registration finds no live entry for (cluster, MASTER): fenced.
    assert (
        await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0, fence_epoch=reg.epoch, reason="close")
        is False
    )
    assert (await events(redis, namespace, "fenced"))[0]["currentEpoch"] == ""
    assert await addrs_of(service, "TopicTest", "broker-a") == {"1": SLAVE}


async def test_close_with_the_live_epoch_is_logged_as_close(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(register(addr=MASTER))
    _, reg = await service.register_broker(register(addr=SLAVE, broker_id=1))
    assert reg is not None
    assert await service.unregister_broker(
        CLUSTER, SLAVE, "broker-a", 1, fence_epoch=reg.epoch, reason="close"
    )
    (e,) = await events(redis, namespace, "close")
    assert (e["brokerAddr"], e["removed"], e["epoch"]) == (SLAVE, "0", str(reg.epoch))
    assert orjson.loads(e["brokerData"]) == bd("broker-a", {0: MASTER})


async def test_unfenced_unregister_of_a_slave_id_2(service: RegistryService) -> None:
    """RouteInfoManagerBrokerRegisterTest.testUnregisterBroker: the route lacks id 2 afterwards."""
    await master_and_slave(service)
    await service.register_broker(register(addr=SLAVE2, broker_id=2))
    await service.unregister_broker(CLUSTER, SLAVE2, "broker-a", 2)
    assert await addrs_of(service, "TopicTest", "broker-a") == {"0": MASTER, "1": SLAVE}


async def test_http_unregister_fenced_and_not(client: TestClient[Any, Any]) -> None:
    first = await (await client.post("/v1/brokers/register", json=register_json(addr=MASTER))).json()
    second = await (await client.post("/v1/brokers/register", json=register_json(addr=MASTER))).json()
    target = {"clusterName": CLUSTER, "brokerAddr": MASTER, "brokerName": "broker-a", "brokerId": 0}
    resp = await client.post("/v1/brokers/unregister", json={**target, "epoch": first["epoch"]})
    assert (resp.status, await resp.json()) == (
        409,
        {"code": 1, "remark": f"fenced: epoch {first['epoch']} is not the live registration"},
    )
    assert (await client.get("/v1/routes/TopicTest")).status == 200
    resp = await client.post("/v1/brokers/unregister", json={**target, "epoch": second["epoch"]})
    assert (resp.status, await resp.json()) == (200, {"code": 0})
    assert (await client.get("/v1/routes/TopicTest")).status == 404


async def test_clean_queues_change_log(service: RegistryService, redis: Redis, namespace: str) -> None:
    await master_and_slave(service, acting=True, topics=["A", "B"])
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)  # U5: write bits cleared
    await service.unregister_broker(CLUSTER, SLAVE, "broker-a", 1)  # U4: queues removed
    cleaned = await events(redis, namespace, "cleanQueues")
    assert [
        (e["brokerName"], sorted(orjson.loads(e["removed"])), sorted(orjson.loads(e["upserted"])))
        for e in cleaned
    ] == [
        ("broker-a", [], [["A", qd("broker-a", 4)], ["B", qd("broker-a", 4)]]),
        ("broker-a", ["A", "B"], []),
    ]
    removals = [
        (e["kind"], e["brokerAddr"], e["removed"]) for e in await events(redis, namespace, "unregister")
    ]
    assert removals == [("unregister", MASTER, "0"), ("unregister", SLAVE, "1")]


# ---- no-op removals leave no trace ----
async def test_removing_an_unknown_broker_logs_nothing(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(register(addr=MASTER))
    before = await events(redis, namespace)
    for i in range(20):  # made-up removals cannot push real history out of the change log
        assert await service.unregister_broker(CLUSTER, f"10.0.0.{i}:10911", f"ghost-{i}", 0) is True
    assert await service.unregister_broker("C" * 300, MASTER, "broker-a", 0) is True  # unstorable name
    assert await events(redis, namespace) == before


async def test_only_the_first_of_repeated_unregisters_is_logged(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await master_and_slave(service)
    for _ in range(3):
        assert await service.unregister_broker(CLUSTER, SLAVE, "broker-a", 1) is True
    removals = await events(redis, namespace, "unregister")
    assert [(e["brokerAddr"], e["removed"]) for e in removals] == [(SLAVE, "0")]
