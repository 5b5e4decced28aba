"""The Java namesrv test suite (spec §5) as behaviour vectors, through RegistryService.

Each test names the Java class and method it reproduces. Channel-based removals (onChannelDestroy)
are a close fenced by the registration's epoch; removal by BrokerAddrInfo (what the scan calls) is
an expiry, simulated by moving the broker's deadline into the past and sweeping. Java's
assertions on "non-null" encodings become assertions on the actual values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from redis.asyncio import Redis

from namesrv.domain.errors import Disabled
from namesrv.domain.model import DataVersion, QueueData, RegisterBrokerRequest, RegisterBrokerResult
from namesrv.registry.registration import Registration
from namesrv.registry.service import RegistryService
from namesrv.store.keyspace import Keyspace
from tests.builders import register
from tests.registry.conftest import MakeService
from tests.registry.helpers import addrs_of, bd, cluster, perms_of, qd, route, route_obj

# ---------------------------------------------------------------------------------------------
# RouteInfoManagerNewTest: supportActingMaster=true; every registration also carries baseTopic
# (TopicConfig defaults 16/16/6); other topics 8/8/6.
DEFAULT_CLUSTER = "Default_Cluster"
DEFAULT_BROKER = "Default_Broker"
PREFIX = "127.0.0.1:"
DEFAULT_ADDR = PREFIX + "10911"
SLAVE_ADDR = PREFIX + "30911"


@dataclass
class Info:
    """BrokerBasicInfo."""

    cluster: str = DEFAULT_CLUSTER
    name: str = DEFAULT_BROKER
    addr: str = DEFAULT_ADDR
    ha: str = PREFIX + "20911"
    broker_id: int = 0
    acting: bool = True
    counter: int = 1
    timestamp: int = 1700000000000
    registrations: list[Registration] = field(default_factory=list)

    @staticmethod
    def slave() -> Info:
        return Info(addr=SLAVE_ADDR, ha=PREFIX + "40911", broker_id=1)

    def next_version(self) -> Info:
        self.counter += 1
        return self


def normal(
    info: Info, *topics: str, read: int = 8, base: tuple[int, int] = (16, 16)
) -> RegisterBrokerRequest:
    table = {"baseTopic": (base[0], base[1], 6, 0), **{t: (read, read, 6, 0) for t in topics}}
    return register(
        info.cluster,
        info.name,
        info.addr,
        info.broker_id,
        table,
        counter=info.counter,
        timestamp=info.timestamp,
        ha=info.ha,
        acting=info.acting,
        filters=(),
    )


async def reg(
    service: RegistryService, info: Info, *topics: str, read: int = 8
) -> RegisterBrokerResult | None:
    """registerBrokerWithNormalTopic (read=8) or registerBrokerWithGlobalOrderTopic (read=1)."""
    base = (1, 1) if read == 1 else (16, 16)
    result, registration = await service.register_broker(normal(info, *topics, read=read, base=base))
    if registration is not None:
        info.registrations.append(registration)
    return result


async def unreg(service: RegistryService, info: Info) -> None:
    await service.unregister_broker(info.cluster, info.addr, info.name, info.broker_id)


async def channel_destroy(service: RegistryService, info: Info) -> None:
    """onChannelDestroy(channel): the close of the broker's latest connection."""
    latest = info.registrations[-1]
    assert await service.unregister_broker(
        info.cluster, info.addr, info.name, info.broker_id, fence_epoch=latest.epoch, reason="close"
    )


@pytest.fixture
def am(make_service: MakeService) -> RegistryService:
    return make_service(supportActingMaster=True)


async def test_new_get_all_cluster_info(am: RegistryService) -> None:
    await reg(am, Info(), "TestTopic")
    await reg(am, Info(cluster="AnotherCluster", name="AnotherBroker", addr=PREFIX + "30911"), "TestTopic1")
    assert await cluster(am) == {
        "brokerAddrTable": {
            "AnotherBroker": bd("AnotherBroker", {0: PREFIX + "30911"}, "AnotherCluster", acting=True),
            DEFAULT_BROKER: bd(DEFAULT_BROKER, {0: DEFAULT_ADDR}, DEFAULT_CLUSTER, acting=True),
        },
        "clusterAddrTable": {"AnotherCluster": ["AnotherBroker"], DEFAULT_CLUSTER: [DEFAULT_BROKER]},
    }


async def test_new_delete_topic(am: RegistryService) -> None:
    await reg(am, Info(), "TestTopic")
    await am.delete_topic("TestTopic")
    assert await route(am, "TestTopic") is None
    await reg(am, Info(), "TestTopic")
    await reg(am, Info(cluster="AnotherCluster", name="AnotherBroker"), "TestTopic")
    assert len((await route(am, "TestTopic") or {})["brokerDatas"]) == 2
    await am.delete_topic("TestTopic", DEFAULT_CLUSTER)
    assert [b["brokerName"] for b in (await route(am, "TestTopic") or {})["brokerDatas"]] == ["AnotherBroker"]


async def test_new_get_all_topic_list(am: RegistryService) -> None:
    assert await am.all_topics() == []
    await reg(am, Info(), "TestTopic", "TestTopic1", "TestTopic2")
    assert await am.all_topics() == ["TestTopic", "TestTopic1", "TestTopic2", "baseTopic"]


async def test_new_register_broker(am: RegistryService) -> None:
    assert await reg(am, Info(), "TestTopic") == RegisterBrokerResult()
    slave = Info(broker_id=1, addr=PREFIX + "30911", ha=PREFIX + "40911")
    assert await reg(am, slave, "TestTopic") == RegisterBrokerResult(
        haServerAddr=PREFIX + "20911", masterAddr=DEFAULT_ADDR
    )


async def test_new_unregister_broker(am: RegistryService) -> None:
    for _ in range(2):  # sync, then the (here also synchronous) submitted request
        await reg(am, Info(), "TestTopic", "TestTopic1", "TestTopic2")
        await unreg(am, Info())
        assert [await route(am, t) for t in ("TestTopic", "TestTopic1", "TestTopic2")] == [None, None, None]


async def test_new_register_slave_broker(am: RegistryService) -> None:
    await reg(am, Info(), "TestTopic")
    assert await addrs_of(am, "TestTopic", DEFAULT_BROKER) == {"0": DEFAULT_ADDR}
    await reg(am, Info.slave(), "TestTopic")
    assert await addrs_of(am, "TestTopic", DEFAULT_BROKER) == {"0": DEFAULT_ADDR, "1": SLAVE_ADDR}


async def test_new_create_new_topic(am: RegistryService) -> None:
    await reg(am, Info(), "TestTopic")
    await reg(am, Info.slave(), "TestTopic")
    await reg(am, Info(), "TestTopic", "TestTopic1")  # same DataVersion: the new topic is still added
    assert await addrs_of(am, "TestTopic1", DEFAULT_BROKER) == {"0": DEFAULT_ADDR, "1": SLAVE_ADDR}


@pytest.mark.parametrize(
    "by_channel", [False, True], ids=["switchBrokerRole", "switchBrokerRole_ChannelDestroy"]
)
async def test_new_switch_broker_role(am: RegistryService, by_channel: bool) -> None:
    master, slave = Info(acting=False), dataclasses.replace(Info.slave(), acting=False)
    await reg(am, master, "TestTopic")
    await reg(am, slave, "TestTopic")
    if by_channel:
        await channel_destroy(am, master)
    else:
        await unreg(am, master)
    assert await addrs_of(am, "TestTopic", DEFAULT_BROKER) == {"1": SLAVE_ADDR}
    slave.broker_id = 0
    await reg(am, slave.next_version(), "TestTopic")
    assert await addrs_of(am, "TestTopic", DEFAULT_BROKER) == {"0": SLAVE_ADDR}
    master.broker_id = 1
    await reg(am, master.next_version(), "TestTopic")
    assert await addrs_of(am, "TestTopic", DEFAULT_BROKER) == {"0": SLAVE_ADDR, "1": DEFAULT_ADDR}


async def test_new_unregister_slave_broker(am: RegistryService) -> None:
    for _ in range(2):
        await reg(am, Info(), "TestTopic")
        await reg(am, Info.slave(), "TestTopic")
        await unreg(am, Info.slave())
        assert await route(am, "TestTopic") == route_obj(
            [bd(DEFAULT_BROKER, {0: DEFAULT_ADDR}, DEFAULT_CLUSTER, acting=True)], [qd(DEFAULT_BROKER)]
        )


async def test_new_unregister_master_broker(am: RegistryService) -> None:
    await reg(am, Info(), "TestTopic")
    await reg(am, Info.slave(), "TestTopic")
    await unreg(am, Info())
    assert await route(am, "TestTopic") == route_obj(
        [bd(DEFAULT_BROKER, {0: SLAVE_ADDR}, DEFAULT_CLUSTER, acting=True)], [qd(DEFAULT_BROKER, 4)]
    )


async def test_new_unregister_master_broker_old_version(am: RegistryService) -> None:
    await reg(am, Info(acting=False), "TestTopic")
    await reg(am, dataclasses.replace(Info.slave(), acting=False), "TestTopic")
    await unreg(am, Info())
    assert await route(am, "TestTopic") == route_obj(
        [bd(DEFAULT_BROKER, {1: SLAVE_ADDR}, DEFAULT_CLUSTER)], [qd(DEFAULT_BROKER, 6)]
    )


async def test_new_submit_multi_unregister_requests(am: RegistryService) -> None:
    master2 = Info(name=DEFAULT_BROKER + "1", addr=DEFAULT_ADDR + "9")
    await reg(am, Info(), "TestTopic1")
    await reg(am, master2, "TestTopic2")
    await unreg(am, Info())
    await unreg(am, master2)
    assert [await route(am, t) for t in ("TestTopic1", "TestTopic2")] == [None, None]


async def test_new_is_broker_topic_config_changed(am: RegistryService) -> None:
    """Through QUERY_DATA_VERSION, which answers isBrokerTopicConfigChanged."""
    await reg(am, Info(), "TestTopic")
    stored = DataVersion(1, 0, 1700000000000)
    assert await am.query_data_version(DEFAULT_CLUSTER, DEFAULT_ADDR, stored) == (False, stored)
    later = DataVersion(1, 0, 1700000001000)
    assert (await am.query_data_version(DEFAULT_CLUSTER, DEFAULT_ADDR, later))[0] is True
    bumped = DataVersion(2, 0, 1700000000000)
    assert (await am.query_data_version(DEFAULT_CLUSTER, DEFAULT_ADDR, bumped))[0] is True


async def test_new_is_topic_config_changed(am: RegistryService) -> None:
    """isTopicConfigChanged as behaviour: true before registration (the topic is written), false
    for a registered topic (an unchanged re-registration does not overwrite it), true for a topic
    the broker has no queue in (added even with the same version)."""
    await reg(am, Info(), "TestTopic")
    assert (await route(am, "TestTopic") or {})["queueDatas"] == [qd(DEFAULT_BROKER, 6, 8, 8)]
    await reg(am, Info(), "TestTopic", "TestTopic1", read=4)
    assert (await route(am, "TestTopic") or {})["queueDatas"] == [qd(DEFAULT_BROKER, 6, 8, 8)]
    assert (await route(am, "TestTopic1") or {})["queueDatas"] == [qd(DEFAULT_BROKER, 6, 4, 4)]


async def test_new_query_broker_topic_config(am: RegistryService) -> None:
    await reg(am, Info(), "TestTopic")
    assert (await am.query_data_version(DEFAULT_CLUSTER, DEFAULT_ADDR, None))[1] == DataVersion(
        1, 0, 1700000000000
    )


async def test_new_wipe_write_perm_of_broker_by_lock(am: RegistryService) -> None:
    await reg(am, Info(), "TestTopic")
    assert await perms_of(am, "TestTopic") == {DEFAULT_BROKER: 6}
    await am.change_write_perm(DEFAULT_BROKER, wipe=True)
    assert await perms_of(am, "TestTopic") == {DEFAULT_BROKER: 4}


async def test_new_pickup_topic_route_data(am: RegistryService) -> None:
    await reg(am, Info(), "TestTopic")
    assert await route(am, "TestTopic") == route_obj(
        [bd(DEFAULT_BROKER, {0: DEFAULT_ADDR}, DEFAULT_CLUSTER, acting=True)], [qd(DEFAULT_BROKER, 6, 8, 8)]
    )
    await reg(am, Info(name="AnotherBroker"), "TestTopic")  # same address, another name
    assert await route(am, "TestTopic") == route_obj(
        [
            bd("AnotherBroker", {0: DEFAULT_ADDR}, DEFAULT_CLUSTER, acting=True),
            bd(DEFAULT_BROKER, {0: DEFAULT_ADDR}, DEFAULT_CLUSTER, acting=True),
        ],
        [qd("AnotherBroker"), qd(DEFAULT_BROKER)],
    )


async def test_new_pickup_topic_route_data_with_slave(am: RegistryService) -> None:
    await reg(am, Info(), "TestTopic")
    await reg(am, Info.slave(), "TestTopic")
    assert (len(await addrs_of(am, "TestTopic", DEFAULT_BROKER) or {}), await perms_of(am, "TestTopic")) == (
        2,
        {DEFAULT_BROKER: 6},
    )
    await unreg(am, Info())
    assert (len(await addrs_of(am, "TestTopic", DEFAULT_BROKER) or {}), await perms_of(am, "TestTopic")) == (
        1,
        {DEFAULT_BROKER: 4},
    )
    await reg(am, Info(), "TestTopic")
    assert (len(await addrs_of(am, "TestTopic", DEFAULT_BROKER) or {}), await perms_of(am, "TestTopic")) == (
        2,
        {DEFAULT_BROKER: 6},
    )


async def test_new_scan_not_active_broker(am: RegistryService, redis: Redis, namespace: str) -> None:
    """Smoke test in Java (30 s sleep); here: a live broker survives a sweep, one past its
    deadline does not."""
    await reg(am, Info(), "TestTopic")
    assert await am.sweep() == 0
    assert await route(am, "TestTopic") is not None
    await redis.zadd(Keyspace(namespace).deadlines, {f"{DEFAULT_CLUSTER}/{DEFAULT_ADDR}": 1})
    assert await am.sweep() == 1
    assert await route(am, "TestTopic") is None


@pytest.mark.parametrize(
    "read", [8, 1], ids=["pickupPartitionOrderTopicRouteData", "pickupGlobalOrderTopicRouteData"]
)
async def test_new_pickup_order_topic_route_data(am: RegistryService, read: int) -> None:
    topic = "OrderTopicTest"
    slave_only = route_obj(
        [bd(DEFAULT_BROKER, {0: SLAVE_ADDR}, DEFAULT_CLUSTER, acting=True)],
        [qd(DEFAULT_BROKER, 4, read, read)],
    )
    # Case 1: slave only
    await reg(am, Info.slave(), topic, read=read)
    assert await route(am, topic) == slave_only
    await unreg(am, Info.slave())
    # Case 2: slave and master, then the master goes
    await reg(am, Info.slave(), topic, read=read)
    await reg(am, Info(), topic, read=read)
    await unreg(am, Info())
    assert await route(am, topic) == slave_only
    await unreg(am, Info.slave())
    if read == 1:
        return
    # Case 3: two groups with acting master; one group's master goes
    other = DEFAULT_BROKER + "_ANOTHER"
    await reg(am, Info.slave(), topic)
    await reg(am, Info(), topic)
    await reg(am, Info(name=other), topic)
    await reg(am, dataclasses.replace(Info.slave(), name=other), topic)
    assert len((await route(am, topic) or {})["brokerDatas"]) == 2
    await unreg(am, Info())
    assert await route(am, topic) == route_obj(
        [
            bd(DEFAULT_BROKER, {0: SLAVE_ADDR}, DEFAULT_CLUSTER, acting=True),
            bd(other, {0: DEFAULT_ADDR, 1: SLAVE_ADDR}, DEFAULT_CLUSTER, acting=True),
        ],
        [qd(DEFAULT_BROKER, 4), qd(other, 6)],
    )


async def test_new_register_only_slave_broker(am: RegistryService) -> None:
    await reg(am, Info.slave(), "TestTopic")
    assert await perms_of(am, "TestTopic") == {DEFAULT_BROKER: 4}
    await unreg(am, Info.slave())
    await reg(am, Info(), "TestTopic")
    await reg(am, Info.slave(), "TestTopic")
    assert await perms_of(am, "TestTopic") == {DEFAULT_BROKER: 6}
    await unreg(am, Info())
    assert await perms_of(am, "TestTopic") == {DEFAULT_BROKER: 4}
    await reg(am, Info(), "TestTopic")
    assert await perms_of(am, "TestTopic") == {DEFAULT_BROKER: 6}


async def test_new_on_channel_destroy(am: RegistryService) -> None:
    only = Info()
    await reg(am, only, "TestTopic", "TestTopic1")
    await channel_destroy(am, only)
    assert [await route(am, t) for t in ("TestTopic", "TestTopic1")] == [None, None]
    master, slave = Info(acting=False), dataclasses.replace(Info.slave(), acting=False)
    await reg(am, master, "TestTopic")
    await reg(am, slave, "TestTopic")
    assert await addrs_of(am, "TestTopic", DEFAULT_BROKER) == {"0": DEFAULT_ADDR, "1": SLAVE_ADDR}
    await channel_destroy(am, master)
    assert await addrs_of(am, "TestTopic", DEFAULT_BROKER) == {"1": SLAVE_ADDR}
    await channel_destroy(am, slave)
    assert await route(am, "TestTopic") is None


async def test_new_on_channel_destroy_by_broker_info(
    am: RegistryService, redis: Redis, namespace: str
) -> None:
    """onChannelDestroy(BrokerAddrInfo) is the scan's removal: an expiry of (cluster, addr)."""
    await reg(am, Info(), "TestTopic", "TestTopic1")
    await redis.zadd(Keyspace(namespace).deadlines, {f"{DEFAULT_CLUSTER}/{DEFAULT_ADDR}": 1})
    assert await am.sweep() == 1
    assert [await route(am, t) for t in ("TestTopic", "TestTopic1")] == [None, None]


async def test_new_keep_topic_with_broker_registration(am: RegistryService) -> None:
    await reg(am, Info(), "TestTopic", "TestTopic1")
    await reg(am, Info(), "TestTopic1")
    assert await perms_of(am, "TestTopic") == {DEFAULT_BROKER: 6}
    assert await perms_of(am, "TestTopic1") == {DEFAULT_BROKER: 6}


async def test_new_delete_topic_with_broker_registration(make_service: MakeService) -> None:
    service = make_service(supportActingMaster=True, deleteTopicWithBrokerRegistration=True)
    await reg(service, Info(), "TestTopic", "TestTopic1")
    await reg(service, Info(), "TestTopic1")
    assert await route(service, "TestTopic") is None
    assert await perms_of(service, "TestTopic1") == {DEFAULT_BROKER: 6}


async def test_new_delete_topic_with_broker_registration2(make_service: MakeService) -> None:
    service = make_service(supportActingMaster=True, deleteTopicWithBrokerRegistration=True)
    master1, master2 = Info(), Info(name=DEFAULT_BROKER + "1", addr=DEFAULT_ADDR + "9")
    await reg(service, master1, "TestTopic", "TestTopic1")
    await reg(service, master2, "TestTopic", "TestTopic1")
    assert len((await route(service, "TestTopic") or {})["brokerDatas"]) == 2
    await reg(service, master1, "TestTopic1")
    assert [b["brokerName"] for b in (await route(service, "TestTopic") or {})["brokerDatas"]] == [
        master2.name
    ]
    assert len((await route(service, "TestTopic1") or {})["brokerDatas"]) == 2
    await reg(service, master2, "TestTopic1")
    assert await route(service, "TestTopic") is None
    assert len((await route(service, "TestTopic1") or {})["brokerDatas"]) == 2


async def test_new_register_single_topic_with_broker_registration(make_service: MakeService) -> None:
    service = make_service(supportActingMaster=True, deleteTopicWithBrokerRegistration=True)
    single = [QueueData(DEFAULT_BROKER, 6, 8, 0, 8)]
    await service.register_topic("TestTopic", single)
    assert await route(service, "TestTopic") is None  # no broker yet
    await reg(service, Info(), "TestTopic")
    assert await route(service, "TestTopic") is not None
    await service.register_topic("TestTopic1", single)
    assert await route(service, "TestTopic1") is not None
    await reg(service, Info(), "TestTopic", "TestTopic1")
    assert [await perms_of(service, t) for t in ("TestTopic", "TestTopic1")] == [{DEFAULT_BROKER: 6}] * 2
    await reg(service, Info(), "TestTopic")
    assert await route(service, "TestTopic") is not None
    assert await route(service, "TestTopic1") is None
    await service.register_topic("TestTopic1", single)
    assert await route(service, "TestTopic1") is not None
    await unreg(service, Info())
    assert [await route(service, t) for t in ("TestTopic", "TestTopic1")] == [None, None]


# ---------------------------------------------------------------------------------------------
# RouteInfoManagerTestBase layout: cluster "cluster", broker-0..2 with ids 0..2 at
# "cluster-broker-i:j" (ha = addr), topics topic-0..9 at 8/8/6, default DataVersion.
def base_request(name: str, broker_id: int, topics: list[str]) -> RegisterBrokerRequest:
    addr = f"cluster-{name}:{broker_id}"
    req = register(
        "cluster", name, "h:1", broker_id, {t: (8, 8, 6, 0) for t in topics}, counter=0, timestamp=0
    )
    return dataclasses.replace(req, brokerAddr=addr, haServerAddr=addr, enableActingMaster=False)


TOPICS = [f"topic-{i}" for i in range(10)]
NAMES = [f"broker-{i}" for i in range(3)]


@pytest.fixture
async def base_cluster(service: RegistryService) -> RegistryService:
    for name in NAMES:
        for broker_id in range(3):
            result, _ = await service.register_broker(base_request(name, broker_id, TOPICS))
            assert result is not None and result.accepted
    return service


def base_bd(name: str, ids: tuple[int, ...] = (0, 1, 2)) -> dict[str, object]:
    return bd(name, {i: f"cluster-{name}:{i}" for i in ids}, "cluster")


async def test_static_get_all_cluster_info(base_cluster: RegistryService) -> None:
    """RouteInfoManagerStaticRegisterTest.testGetAllClusterInfo."""
    assert await cluster(base_cluster) == {
        "brokerAddrTable": {name: base_bd(name) for name in NAMES},
        "clusterAddrTable": {"cluster": NAMES},
    }


async def test_static_topic_lists(base_cluster: RegistryService) -> None:
    """testGetAllTopicList, testGetTopicsByCluster and the (non-null) system and unit lists."""
    assert await base_cluster.all_topics() == sorted(TOPICS)
    assert await base_cluster.topics_by_cluster("cluster") == sorted(TOPICS)
    assert await base_cluster.system_topics() == (
        ["broker-0", "broker-1", "broker-2", "cluster"],
        "cluster-broker-0:0",
    )
    assert [await base_cluster.unit_topics(k) for k in ("unit", "unitSub", "unitSubUnUnit")] == [[], [], []]


async def test_static_pickup_topic_route_data(base_cluster: RegistryService) -> None:
    assert await route(base_cluster, "topic-0") == route_obj(
        [base_bd(name) for name in NAMES], [qd(name, 6, 8, 8) for name in NAMES]
    )


async def test_static_delete_topic(base_cluster: RegistryService) -> None:
    await base_cluster.delete_topic("topic-0")
    assert await route(base_cluster, "topic-0") is None


async def test_register_master_change_from_slave(base_cluster: RegistryService) -> None:
    """RouteInfoManagerBrokerRegisterTest.testMasterChangeFromSlave."""
    assert (await addrs_of(base_cluster, "topic-0", "broker-0") or {})["0"] == "cluster-broker-0:0"
    req = dataclasses.replace(base_request("broker-0", 0, TOPICS), brokerAddr="cluster-broker-0:1")
    await base_cluster.register_broker(req)
    assert await addrs_of(base_cluster, "topic-0", "broker-0") == {
        "0": "cluster-broker-0:1",
        "2": "cluster-broker-0:2",
    }


async def test_register_unregister_broker(base_cluster: RegistryService) -> None:
    """RouteInfoManagerBrokerRegisterTest.testUnregisterBroker."""
    await base_cluster.unregister_broker("cluster", "cluster-broker-0:2", "broker-0", 2)
    assert await addrs_of(base_cluster, "topic-0", "broker-0") == {
        "0": "cluster-broker-0:0",
        "1": "cluster-broker-0:1",
    }


@pytest.mark.parametrize(("perm", "wipe", "after"), [(4, False, 6), (4, True, 4), (6, True, 4)])
async def test_perm_tests_on_one_queue(service: RegistryService, perm: int, wipe: bool, after: int) -> None:
    """RouteInfoManagerBrokerPermTest and RouteInfoManagerTest.test{Add,Wipe}WritePermOfBrokerByLock:
    one queue of the broker (Java injects it) -> count 1 and the new perm."""
    await service.register_broker(
        register("cluster", "broker-a", "127.0.0.1:1", 0, {"topic-a": (8, 8, perm, 0), "x": (1, 1, 6, 0)})
    )
    await service.delete_topic("x")
    assert await service.change_write_perm("broker-a", wipe=wipe) == 1
    assert await perms_of(service, "topic-a") == {"broker-a": after}


# ---------------------------------------------------------------------------------------------
# RouteInfoManagerTest: default-cluster / default-broker id 1234 at 127.0.0.1:10911, DataVersion
# counter 10 timestamp 100.
ADDR = "127.0.0.1:10911"


def default_request(
    cluster_name: str = "default-cluster", name: str = "default-broker", counter: int = 10
) -> RegisterBrokerRequest:
    return register(
        cluster_name,
        name,
        ADDR,
        1234,
        ["unit-test0", "unit-test1"],
        counter=counter,
        timestamp=counter * 10,
        ha="127.0.0.1:1001",
        acting=None,
    )


async def test_rim_query_broker_topic_config(service: RegistryService) -> None:
    assert (await service.register_broker(default_request()))[0] is not None
    v10, v20 = DataVersion(10, 0, 100), DataVersion(20, 0, 200)
    assert (await service.query_data_version("default-cluster", ADDR, v10)) == (False, v10)
    result, _ = await service.register_broker(default_request("default-cluster-1", "default-broker-1", 20))
    assert result is not None
    assert (await service.query_data_version("default-cluster", ADDR, v20)) == (True, v10)
    assert (await service.query_data_version("default-cluster-1", ADDR, v20)) == (False, v20)
    await service.unregister_broker("default-cluster-1", ADDR, "default-broker-1", 1234)
    assert (await service.query_data_version("default-cluster", ADDR, None))[1] == v10
    assert (await service.query_data_version("default-cluster-1", ADDR, None))[1] is None


async def test_rim_lists_and_pickup(service: RegistryService) -> None:
    """testGetAllClusterInfo ... testGetHasUnitSubUnUnitTopicList, testPickupTopicRouteData."""
    await service.register_broker(default_request())
    # acting=None (old-version broker) at id 1234: not a master, so no topics are written.
    assert await cluster(service) == {
        "brokerAddrTable": {"default-broker": bd("default-broker", {1234: ADDR}, "default-cluster")},
        "clusterAddrTable": {"default-cluster": ["default-broker"]},
    }
    assert await service.all_topics() == []
    assert await service.topics_by_cluster("default-cluster") == []
    assert await service.system_topics() == (["default-broker", "default-cluster"], ADDR)
    assert await service.route("unit_test") is None


# ---------------------------------------------------------------------------------------------
# RequestProcessorTest: default-cluster / default-broker id 1234 at 127.0.0.1:10911 with
# enableActingMaster=false (a prime slave: it creates routes), topics unit-test0/1 at 8/8/6.
@pytest.fixture
async def rp(service: RegistryService) -> RegistryService:
    await service.register_broker(
        register("default-cluster", "default-broker", ADDR, 1234, ["unit-test0", "unit-test1"], acting=False)
    )
    return service


async def test_rp_register_broker(rp: RegistryService) -> None:
    """testProcessRequest_RegisterBroker (old body path: no topics): brokerId 2333, address
    10.10.1.1 -> BrokerData{"broker", {2333: "10.10.1.1"}}."""
    req = dataclasses.replace(
        register("DefaultCluster", "broker", "h:1", 2333, []), brokerAddr="10.10.1.1", haServerAddr=""
    )
    result, _ = await rp.register_broker(req)
    assert result is not None and result.accepted
    assert (await cluster(rp))["brokerAddrTable"]["broker"]["brokerAddrs"] == {"2333": "10.10.1.1"}
    await rp.unregister_broker(
        "DefaultCluster", "10.10.1.1", "broker", 2333
    )  # testProcessRequest_UnregisterBroker
    assert list((await cluster(rp))["brokerAddrTable"]) == ["default-broker"]


async def test_rp_route_info_by_topic(rp: RegistryService) -> None:
    assert await route(rp, "unit-test0") == route_obj(
        [bd("default-broker", {1234: ADDR}, "default-cluster")], [qd("default-broker", 6, 8, 8)]
    )
    assert await rp.route("test") is None


async def test_rp_every_query_code_succeeds(rp: RegistryService) -> None:
    """testGetBrokerClusterInfo, testQueryDataVersion, testGetBrokerMemberBroker, testBrokerHeartBeat,
    testAdd/WipeWritePermOfBroker, testGetAllTopicListFromNameserver, testDeleteTopicInNamesrv,
    testGetTopicsByCluster, testGetSystemTopicListFromNs and the unit lists."""
    assert list((await cluster(rp))["brokerAddrTable"]) == ["default-broker"]
    assert (await rp.query_data_version("default-cluster", ADDR, None))[0] is True
    assert await rp.broker_member_group("default-cluster", "default-broker") == {1234: ADDR}
    assert await rp.heartbeat("default-cluster", ADDR) is True
    assert await rp.change_write_perm("default-broker", wipe=False) == 2
    assert await rp.change_write_perm("default-broker", wipe=True) == 2
    assert await rp.all_topics() == ["unit-test0", "unit-test1"]
    assert await rp.topics_by_cluster("default-cluster") == ["unit-test0", "unit-test1"]
    assert await rp.system_topics() == (["default-broker", "default-cluster"], ADDR)
    assert [await rp.unit_topics(k) for k in ("unit", "unitSub", "unitSubUnUnit")] == [[], [], []]
    assert await rp.delete_topic("unit-test0") == 1


@pytest.mark.parametrize("enabled", [True, False])
async def test_rp_get_all_topic_list(make_service: MakeService, enabled: bool) -> None:
    service = make_service(enableAllTopicList=enabled)
    await service.register_broker(register(topics=["unit-test0", "unit-test1"]))
    if enabled:
        assert await service.all_topics() == ["unit-test0", "unit-test1"]
    else:
        with pytest.raises(Disabled):
            await service.all_topics()
