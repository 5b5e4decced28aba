"""Topic operations and lists: registerTopic (§3.6), deleteTopic and the queries of §3.12
(206 all topics, 224 by cluster, 304 system list, 311-313 unit lists) and their enable flags."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.domain.errors import Disabled
from namesrv.domain.model import QueueData
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
    B,
    C,
    bd,
    events,
    perms_of,
    qd,
    route,
    route_obj,
)


def q(name: str, perm: int = 6, read: int = 2, write: int = 2, flag: int = 0) -> QueueData:
    return QueueData(name, perm, read, flag, write)


# ---- §3.6 registerTopic ----
async def test_register_topic_empty_list_is_a_no_op(service: RegistryService) -> None:
    await service.register_broker(register())
    assert await service.register_topic("NewTopic", []) == 0
    assert await route(service, "NewTopic") is None


async def test_register_topic_new_topic_with_an_unknown_broker_is_ignored(service: RegistryService) -> None:
    await service.register_broker(register())
    assert await service.register_topic("NewTopic", [q("broker-a"), q("nope")]) == 0
    assert await route(service, "NewTopic") is None
    assert "NewTopic" not in await service.all_topics()


async def test_register_topic_before_any_broker_is_ignored(service: RegistryService) -> None:
    """RouteInfoManagerNewTest.registerSingleTopicWithBrokerRegistration, first step."""
    assert await service.register_topic("TestTopic", [q("broker-a", 6, 8, 8)]) == 0
    assert await route(service, "TestTopic") is None


async def test_register_topic_stores_queue_data_verbatim(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(register(addr=MASTER))
    await service.register_broker(register(CLUSTER, "broker-b", B))
    assert (
        await service.register_topic("NewTopic", [q("broker-a", 7, 2, 3, 1), q("broker-b", 0, 5, 5, 2)]) == 2
    )
    assert await route(service, "NewTopic") == route_obj(
        [bd("broker-a", {0: MASTER}), bd("broker-b", {0: B})],
        [qd("broker-a", 7, 2, 3, 1), qd("broker-b", 0, 5, 5, 2)],
    )
    (e,) = await events(redis, namespace, "topicRegister")
    assert e["topic"] == "NewTopic"


async def test_register_topic_existing_topic_stops_at_the_first_unknown_broker(
    service: RegistryService,
) -> None:
    await service.register_broker(register(addr=MASTER, topics=["T", "X"]))
    await service.register_broker(register(CLUSTER, "broker-b", B, topics=["Y", "Z"]))
    written = await service.register_topic("T", [q("broker-b", 6, 1, 1), q("nope"), q("broker-a", 4, 9, 9)])
    assert written == 1
    assert await perms_of(service, "T") == {"broker-a": 6, "broker-b": 6}
    assert (await route(service, "T") or {})["queueDatas"] == [
        qd("broker-a", 6, 8, 8),
        qd("broker-b", 6, 1, 1),
    ]


async def test_register_topic_overwrites_an_existing_queue(service: RegistryService) -> None:
    await service.register_broker(register(topics=["T", "X"]))
    assert await service.register_topic("T", [q("broker-a", 2, 1, 1)]) == 1
    assert (await route(service, "T") or {})["queueDatas"] == [qd("broker-a", 2, 1, 1)]


async def test_register_topic_then_broker_unregisters(make_service: MakeService) -> None:
    """registerSingleTopicWithBrokerRegistration: the topic of a single-topic registration goes with
    a full registration not listing it (flag on), comes back with registerTopic, and goes with the
    broker."""
    service = make_service(deleteTopicWithBrokerRegistration=True)
    await service.register_broker(register(topics=["baseTopic", "TestTopic"]))
    assert await service.register_topic("TestTopic1", [q("broker-a", 6, 8, 8)]) == 1
    await service.register_broker(register(topics=["baseTopic", "TestTopic", "TestTopic1"]))
    assert await perms_of(service, "TestTopic1") == {"broker-a": 6}
    await service.register_broker(register(topics=["baseTopic", "TestTopic"]))
    assert await route(service, "TestTopic1") is None
    assert await service.register_topic("TestTopic1", [q("broker-a", 6, 8, 8)]) == 1
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert [await route(service, t) for t in ("baseTopic", "TestTopic", "TestTopic1")] == [None, None, None]


# ---- §3.12 deleteTopic ----
async def test_delete_topic_everywhere(service: RegistryService, redis: Redis, namespace: str) -> None:
    await service.register_broker(register(CLUSTER, "broker-a", MASTER))
    await service.register_broker(register("C2", "broker-b", B))
    assert await service.delete_topic("TopicTest") == 2
    assert await route(service, "TopicTest") is None
    assert await service.all_topics() == ["TBW102"]
    (e,) = await events(redis, namespace, "topicDelete")
    assert (e["topic"], e["cluster"], sorted(orjson.loads(e["brokerNames"]))) == (
        "TopicTest",
        "",
        ["broker-a", "broker-b"],
    )


async def test_delete_topic_of_one_cluster(service: RegistryService) -> None:
    """RouteInfoManagerNewTest.deleteTopic: only AnotherBroker remains."""
    await service.register_broker(register(CLUSTER, "broker-a", MASTER))
    await service.register_broker(register(CLUSTER, "broker-a", SLAVE, 1))
    await service.register_broker(register("AnotherCluster", "AnotherBroker", B))
    assert await service.delete_topic("TopicTest", CLUSTER) == 1
    assert await route(service, "TopicTest") == route_obj(
        [bd("AnotherBroker", {0: B}, "AnotherCluster")], [qd("AnotherBroker")]
    )
    assert await service.delete_topic("TopicTest", "AnotherCluster") == 1
    assert await route(service, "TopicTest") is None
    assert await service.all_topics() == ["TBW102"]


@pytest.mark.parametrize("cluster_name", ["NoSuchCluster", None, ""])
async def test_delete_topic_unknown_or_no_cluster(service: RegistryService, cluster_name: str | None) -> None:
    await service.register_broker(register())
    removed = await service.delete_topic("TopicTest", cluster_name)
    if cluster_name == "NoSuchCluster":  # missing cluster: no-op
        assert removed == 0
        assert await perms_of(service, "TopicTest") == {"broker-a": 6}
    else:  # null or empty clusterName: deleteTopic(topic)
        assert removed == 1
        assert await route(service, "TopicTest") is None


async def test_delete_topic_keeps_the_static_mapping(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(register(mappings={"TopicTest": MAPPING}))
    await service.delete_topic("TopicTest")
    assert await redis.hkeys(Keyspace(namespace).mapping("TopicTest")) == ["broker-a"]
    await service.register_topic("TopicTest", [q("broker-a")])
    assert (await route(service, "TopicTest") or {})["topicQueueMappingByBroker"] == {"broker-a": MAPPING}


async def test_deleted_topic_returns_with_the_next_registration(service: RegistryService) -> None:
    """isTopicConfigChanged: after deleteTopic, T1[topic] is missing, so even an unchanged
    re-registration writes the topic back (apache/rocketmq#7066)."""
    await service.register_broker(register())
    await service.delete_topic("TopicTest")
    await service.register_broker(register())  # same DataVersion
    assert await route(service, "TopicTest") == route_obj([bd("broker-a", {0: MASTER})], [qd("broker-a")])


# ---- 206, 224 ----
async def test_all_topics_and_topics_by_cluster(service: RegistryService) -> None:
    assert await service.all_topics() == []
    await service.register_broker(register("C1", "broker-a", MASTER, topics=["A", "Shared"]))
    await service.register_broker(register("C1", "broker-b", B, topics=["B", "Shared"]))
    await service.register_broker(register("C2", "broker-c", C, topics=["C", "Shared"]))
    assert await service.all_topics() == ["A", "B", "C", "Shared"]
    assert await service.topics_by_cluster("C1") == ["A", "B", "Shared"]
    assert await service.topics_by_cluster("C2") == ["C", "Shared"]
    assert await service.topics_by_cluster("NoCluster") == []  # Java: caught NPE, empty list


async def test_topics_by_cluster_follows_cluster_membership(service: RegistryService) -> None:
    """A name registered under two clusters counts for both (T3 holds it in both sets)."""
    await service.register_broker(register("C1", "broker-a", MASTER, topics=["A", "B"]))
    await service.register_broker(register("C2", "broker-a", SLAVE, 1, topics=["X", "Y"]))
    assert await service.topics_by_cluster("C2") == ["A", "B"]


@pytest.mark.parametrize(
    ("flags", "disabled"),
    [
        ({"enableAllTopicList": False}, {"all"}),
        ({"enableTopicList": False}, {"cluster", "unit", "unitSub", "unitSubUnUnit"}),
        ({}, set()),
    ],
    ids=["no-all-topic-list", "no-topic-list", "defaults"],
)
async def test_topic_list_gates(
    make_service: MakeService, flags: dict[str, bool], disabled: set[str]
) -> None:
    service = make_service(**flags)
    await service.register_broker(register(topics={"U": (8, 8, 6, 1), "T": (8, 8, 6, 0)}))
    calls = {
        "all": service.all_topics,
        "cluster": lambda: service.topics_by_cluster(CLUSTER),
        "unit": lambda: service.unit_topics("unit"),
        "unitSub": lambda: service.unit_topics("unitSub"),
        "unitSubUnUnit": lambda: service.unit_topics("unitSubUnUnit"),
    }
    for name, call in calls.items():
        if name in disabled:
            with pytest.raises(Disabled) as err:
                await call()
            assert (err.value.code, err.value.remark) == (1, "disable")
        else:
            await call()
    assert (await service.system_topics())[0] == ["DefaultCluster", "broker-a"]  # 304 is never gated


async def test_http_disabled_topic_list(settings: Settings) -> None:
    client: TestClient[Any, Any] = await start_client(dataclasses.replace(settings, enableAllTopicList=False))
    try:
        resp = await client.get("/v1/topics")
        assert (resp.status, await resp.json()) == (403, {"code": 1, "remark": "disable"})
    finally:
        await client.close()


# ---- 304 ----
async def test_system_topic_list(service: RegistryService) -> None:
    assert await service.system_topics() == ([], None)
    await service.register_broker(register("C1", "broker-b", B))
    await service.register_broker(register("C1", "broker-a", SLAVE, 1))
    await service.register_broker(register("C2", "broker-c", C))
    names, addr = await service.system_topics()
    assert names == ["C1", "C2", "broker-a", "broker-b", "broker-c"]
    # Java: the first address of the first non-empty BrokerData in HashMap order.
    assert addr in {B, SLAVE, C}
    assert addr == SLAVE  # ours: broker names sorted, lowest id


async def test_system_topic_list_skips_a_broker_data_without_addresses(service: RegistryService) -> None:
    await service.register_broker(register(CLUSTER, "broker-a", SLAVE, 1))
    await service.register_broker(register(CLUSTER, "broker-a", SLAVE, 0, topics=["TopicTest"]))  # R5 then R7
    await service.register_broker(register(CLUSTER, "broker-b", B))
    assert await service.system_topics() == (["DefaultCluster", "broker-a", "broker-b"], B)


async def test_member_group_does_not_check_the_cluster(service: RegistryService) -> None:
    """§2.3 901: BrokerMemberGroup(cluster from the request, brokerName); the cluster is not checked."""
    await service.register_broker(register(CLUSTER, "broker-a", MASTER))
    await service.register_broker(register(CLUSTER, "broker-a", SLAVE, 1))
    assert await service.broker_member_group("AnyCluster", "broker-a") == {0: MASTER, 1: SLAVE}
    assert await service.broker_member_group(CLUSTER, "nope") == {}


# ---- 311-313 ----
async def test_unit_topic_lists_by_sys_flag(service: RegistryService) -> None:
    """Verified vector: flags 1, 2 and 3 give unit {1,3}, hasUnitSub {2,3}, subUnUnit {2}."""
    await service.register_broker(
        register(
            topics={
                "Plain": (8, 8, 6, 0),
                "Unit": (8, 8, 6, 1),
                "UnitSub": (8, 8, 6, 2),
                "Both": (8, 8, 6, 3),
            }
        )
    )
    assert await service.unit_topics("unit") == ["Both", "Unit"]
    assert await service.unit_topics("unitSub") == ["Both", "UnitSub"]
    assert await service.unit_topics("unitSubUnUnit") == ["UnitSub"]


async def test_unit_flag_follows_a_changed_registration(service: RegistryService) -> None:
    await service.register_broker(register(topics={"U": (8, 8, 6, 1), "T": (8, 8, 6, 0)}))
    await service.register_broker(register(topics={"U": (8, 8, 6, 0), "T": (8, 8, 6, 2)}, counter=2))
    assert await service.unit_topics("unit") == []
    assert await service.unit_topics("unitSub") == ["T"]


async def test_unit_flag_of_a_topic_gone_with_its_broker(service: RegistryService) -> None:
    await service.register_broker(register(topics={"U": (8, 8, 6, 1), "T": (8, 8, 6, 0)}))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await service.unit_topics("unit") == []


# The topic flag must stay the topicSysFlag of a queue the topic still has ("first QueueData").
async def test_unit_flag_after_the_unit_broker_leaves(service: RegistryService) -> None:
    await service.register_broker(
        register(CLUSTER, "broker-a", MASTER, topics={"U": (8, 8, 6, 1), "T": (8, 8, 6, 0)})
    )
    await service.register_broker(
        register(CLUSTER, "broker-b", B, topics={"U": (8, 8, 6, 0), "T": (8, 8, 6, 0)})
    )
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert (await route(service, "U") or {})["queueDatas"] == [qd("broker-b", flag=0)]
    assert await service.unit_topics("unit") == []


async def test_unit_flag_after_delete_topic_of_a_cluster(service: RegistryService) -> None:
    await service.register_broker(
        register("C1", "broker-a", MASTER, topics={"U": (8, 8, 6, 1), "T": (8, 8, 6, 0)})
    )
    await service.register_broker(
        register("C2", "broker-b", B, topics={"U": (8, 8, 6, 0), "T": (8, 8, 6, 0)})
    )
    await service.delete_topic("U", "C1")
    assert await service.unit_topics("unit") == []


async def test_unit_flag_after_the_broker_re_registers_without_it(service: RegistryService) -> None:
    await service.register_broker(
        register(CLUSTER, "broker-a", MASTER, topics={"U": (8, 8, 6, 1), "T": (8, 8, 6, 0)})
    )
    await service.register_broker(
        register(CLUSTER, "broker-b", B, topics={"U": (8, 8, 6, 0), "T": (8, 8, 6, 0)})
    )
    await service.register_broker(
        register(CLUSTER, "broker-a", MASTER, topics={"U": (8, 8, 6, 0), "T": (8, 8, 6, 0)}, counter=2)
    )
    assert await service.unit_topics("unit") == []


async def test_unit_flag_after_register_topic_rewrites_it(service: RegistryService) -> None:
    await service.register_broker(register(topics={"U": (8, 8, 6, 1), "T": (8, 8, 6, 0)}))
    await service.register_topic("U", [q("broker-a", flag=0)])
    assert await service.unit_topics("unit") == []


async def test_unit_flag_after_delete_with_broker_registration(make_service: MakeService) -> None:
    service = make_service(deleteTopicWithBrokerRegistration=True)
    await service.register_broker(
        register(CLUSTER, "broker-a", MASTER, topics={"U": (8, 8, 6, 1), "T": (8, 8, 6, 0)})
    )
    await service.register_broker(
        register(CLUSTER, "broker-b", B, topics={"U": (8, 8, 6, 0), "T": (8, 8, 6, 0)})
    )
    await service.register_broker(
        register(CLUSTER, "broker-a", MASTER, topics={"T": (8, 8, 6, 0), "X": (8, 8, 6, 0)})
    )
    assert await perms_of(service, "U") == {"broker-b": 6}
    assert await service.unit_topics("unit") == []


@pytest.mark.parametrize(("flag_a", "flag_b", "unit"), [(1, 0, ["U"]), (0, 1, []), (1, 1, ["U"])])
async def test_unit_flag_of_mixed_queues_is_the_first_queues(
    service: RegistryService, flag_a: int, flag_b: int, unit: list[str]
) -> None:
    """Java reads the first QueueData (HashMap order, undefined); ours is the first of the route,
    i.e. the lowest broker name, whatever order the brokers registered in."""
    await service.register_broker(
        register(CLUSTER, "broker-b", B, topics={"U": (8, 8, 6, flag_b), "T": (8, 8, 6, 0)})
    )
    await service.register_broker(
        register(CLUSTER, "broker-a", MASTER, topics={"U": (8, 8, 6, flag_a), "T": (8, 8, 6, 0)})
    )
    assert await service.unit_topics("unit") == unit


async def test_http_topic_lists(client: TestClient[Any, Any]) -> None:
    await client.post(
        "/v1/brokers/register", json=register_json(topics={"A": (8, 8, 6, 1), "B": (8, 8, 6, 2)})
    )
    assert await (await client.get("/v1/topics")).json() == {"topicList": ["A", "B"]}
    assert await (await client.get("/v1/topics", params={"cluster": "NoCluster"})).json() == {"topicList": []}
    assert await (await client.get("/v1/topics/unit")).json() == {"topicList": ["A"]}
    assert await (await client.get("/v1/topics/unit-sub")).json() == {"topicList": ["B"]}
    assert await (await client.get("/v1/topics/unit-sub-ununit")).json() == {"topicList": ["B"]}
    assert await (await client.get("/v1/topics/system")).json() == {
        "brokerAddr": MASTER,
        "topicList": ["DefaultCluster", "broker-a"],
    }
