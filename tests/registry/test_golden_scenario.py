"""Appendix A, the golden scenario: a Java NameServer's real replies, replayed through the service
(and the route part through HTTP). Bodies are compared as parsed JSON with the lists whose order
Java leaves undefined sorted (``canon``); fastjson default-mode bodies (unquoted Long keys) are
compared with our DEFAULT dialect rendering.

Transport-only steps (CRC check, header encodings, oneway, codes 318/319/99999) are not registry
rules and are left to the protocol suites. broker-b registered compressed as a 4.9.8 broker: here
it is an old-version registration (no enableActingMaster) whose topics carry sysFlag 0, as the
compressed format loses it.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from namesrv.domain.errors import Disabled
from namesrv.domain.model import DataVersion, QueueData, RegisterBrokerResult
from namesrv.domain.routes import filter_by_zone
from namesrv.protocol.fastjson import Dialect, dumps
from namesrv.protocol.render import cluster_info_obj, route_json
from namesrv.registry.service import RegistryService
from namesrv.store.changelog import upserts
from namesrv.store.keyspace import Keyspace
from namesrv.store.registry_store import RegistryStore
from namesrv.store.scripts import ScriptRegistry
from tests.builders import register, register_json
from tests.registry.conftest import MakeService
from tests.registry.helpers import canon, java_json

CLUSTER = "DefaultCluster"
A0, A1, B0 = "127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.2:10911"
ORDER = {"TopicTest": "broker-a:8"}
MASTER_TOPICS = {
    "TopicTest": (8, 8, 6, 0),
    "TBW102": (8, 8, 7, 0),
    "UnitTopic": (4, 4, 6, 1),
    "UnitSubTopic": (4, 4, 6, 2),
    "UnitBoth": (4, 4, 6, 3),
}
SLAVE_TS = 1700000000500

ROUTE_479 = (
    '{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.2:10911"},"brokerName":"broker-b","cluster":"DefaultCluster",'
    '"enableActingMaster":false},{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":'
    '"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":'
    '[{"brokerName":"broker-b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4},{"brokerName":'
    '"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
)
ROUTE_399 = (
    '{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.2:10911"},"brokerName":"broker-b","cluster":"DefaultCluster",'
    '"enableActingMaster":false},{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":'
    '"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":'
    '[{"brokerName":"broker-b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4},{"brokerName":'
    '"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
)
ROUTE_ORDER = ROUTE_479.replace(
    '"filterServerTable":{},', '"filterServerTable":{},"orderTopicConf":"broker-a:8",'
)
ROUTE_WIPED = ROUTE_479.replace(
    '{"brokerName":"broker-a","perm":6,"readQueueNums":8',
    '{"brokerName":"broker-a","perm":4,"readQueueNums":8',
)
TBW102_ADDED = (
    '{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"broker-a",'
    '"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":'
    '"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
)
NEW_TOPIC = TBW102_ADDED.replace('"readQueueNums":8', '"readQueueNums":2').replace(
    '"writeQueueNums":8', '"writeQueueNums":2'
)
ROUTE_SLAVE_ONLY = ROUTE_479.replace(
    '{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"}', '{"brokerAddrs":{"1":"127.0.0.1:10921"}'
)
CLUSTER_INFO = (
    '{"brokerAddrTable":{"broker-b":{"brokerAddrs":{0:"127.0.0.2:10911"},"brokerName":"broker-b","cluster":'
    '"DefaultCluster","enableActingMaster":false},"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",'
    '1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},'
    '"clusterAddrTable":{"DefaultCluster":["broker-b","broker-a"]}}'
)
CLUSTER_INFO_SLAVE_ONLY = CLUSTER_INFO.replace(
    '{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}', '{1:"127.0.0.1:10921"}'
)
CLUSTER_INFO_B_ONLY = (
    '{"brokerAddrTable":{"broker-b":{"brokerAddrs":{0:"127.0.0.2:10911"},"brokerName":"broker-b","cluster":'
    '"DefaultCluster","enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-b"]}}'
)
ALL_TOPICS = ["UnitBoth", "UnitTopic", "UnitSubTopic", "TopicTest", "OnlyB", "TBW102"]


async def route_text(service: RegistryService, topic: str, dialect: Dialect = Dialect.STANDARD) -> str | None:
    r = await service.route(topic)
    return None if r is None else route_json(r, dialect)


def same(ours: str | None, java: str) -> bool:
    return ours is not None and canon(java_json(ours)) == canon(java_json(java))


async def cluster_text(service: RegistryService) -> str:
    return dumps(cluster_info_obj(await service.cluster_info()), Dialect.DEFAULT)


async def test_golden_main_scenario(service: RegistryService, make_service: MakeService) -> None:
    s = service
    assert await s.route("TopicTest") is None  # TOPIC_NOT_EXIST before any broker

    # REGISTER_BROKER master broker-a (first registration, no ORDER_TOPIC_CONFIG namespace yet)
    master = register(CLUSTER, "broker-a", A0, 0, MASTER_TOPICS, counter=3, acting=False)
    assert (await s.register_broker(master))[0] == RegisterBrokerResult()

    # KV: put, get found / not found, list found / not found
    await s.kv_put("ORDER_TOPIC_CONFIG", "TopicTest", "broker-a:8")
    assert await s.kv_get("ORDER_TOPIC_CONFIG", "TopicTest") == "broker-a:8"
    assert await s.kv_get("ORDER_TOPIC_CONFIG", "Nope") is None
    assert await s.kv_list("ORDER_TOPIC_CONFIG") == ORDER
    assert await s.kv_list("NoSuchNs") is None

    # master again, same dataVersion: the reply now carries the KVTable
    assert (await s.register_broker(master))[0] == RegisterBrokerResult(order_topic_config=ORDER)

    # slave id 1: one topic refused; two topics accepted; one topic accepted once the id is known
    def slave(topics: dict[str, tuple[int, int, int, int]]) -> Any:
        return register(CLUSTER, "broker-a", A1, 1, topics, counter=3, timestamp=SLAVE_TS, acting=False)

    one = {"TopicTest": (8, 8, 6, 0)}
    assert await s.register_broker(slave(one)) == (None, None)
    expected_slave = RegisterBrokerResult(
        haServerAddr="127.0.0.1:10912", masterAddr=A0, order_topic_config=ORDER
    )
    assert (await s.register_broker(slave({**one, "SlaveOnlyTopic": (1, 1, 6, 0)})))[0] == expected_slave
    result, slave_reg = await s.register_broker(slave(one))
    assert result == expected_slave and slave_reg is not None
    assert await s.route("SlaveOnlyTopic") is None

    # broker-b, old-version broker, flags lost by the compressed body
    b = register(CLUSTER, "broker-b", B0, 0, {"TopicTest": (4, 4, 6, 0), "OnlyB": (8, 8, 6, 0)}, acting=None)
    assert (await s.register_broker(b))[0] == RegisterBrokerResult(order_topic_config=ORDER)

    # routes: standard JSON (479 and acceptStandardJsonOnly), default JSON (399), orderTopicConf
    assert same(await route_text(s, "TopicTest"), ROUTE_479)
    assert same(await route_text(s, "TopicTest", Dialect.DEFAULT), ROUTE_399)
    assert same(await route_text(make_service(orderMessageEnable=True), "TopicTest"), ROUTE_ORDER)
    zoned = filter_by_zone(await s.route("TopicTest"), "zoneX")  # type: ignore[arg-type]
    assert route_json(zoned, Dialect.DEFAULT) == '{"brokerDatas":[],"filterServerTable":{},"queueDatas":[]}'

    assert same(await cluster_text(s), CLUSTER_INFO)

    # QUERY_DATA_VERSION: same, different, unknown broker; BROKER_HEARTBEAT
    stored = DataVersion(3, 0, 1700000000000)
    assert await s.query_data_version(CLUSTER, A0, stored) == (False, stored)
    assert await s.query_data_version(CLUSTER, A0, DataVersion(4, 0, 1700000009999)) == (True, stored)
    assert await s.query_data_version("C", "9.9.9.9:1", stored) == (True, None)
    assert await s.heartbeat(CLUSTER, A0) is True

    # GET_BROKER_MEMBER_GROUP
    assert await s.broker_member_group(CLUSTER, "broker-a") == {0: A0, 1: A1}
    assert await s.broker_member_group(CLUSTER, "nope") == {}

    # topic lists (sets: Java's order is HashMap order)
    assert set(await s.all_topics()) == set(ALL_TOPICS)
    assert set(await s.topics_by_cluster(CLUSTER)) == set(ALL_TOPICS)
    assert await s.topics_by_cluster("NoCluster") == []
    names, addr = await s.system_topics()
    assert set(names) == {"broker-b", "broker-a", "DefaultCluster"}
    assert addr in {B0, A0}  # Java: 127.0.0.2:10911, the first BrokerData of its HashMap
    assert set(await s.unit_topics("unit")) == {"UnitBoth", "UnitTopic"}
    assert set(await s.unit_topics("unitSub")) == {"UnitBoth", "UnitSubTopic"}
    assert await s.unit_topics("unitSubUnUnit") == ["UnitSubTopic"]

    # WIPE / ADD write perm
    assert await s.change_write_perm("broker-a", wipe=True) == 5
    assert same(await route_text(s, "TopicTest"), ROUTE_WIPED)
    assert await s.change_write_perm("broker-a", wipe=False) == 5
    assert same(await route_text(s, "TBW102"), TBW102_ADDED)

    # REGISTER_TOPIC_IN_NAMESRV, then DELETE_TOPIC_IN_NAMESRV with clusterName
    assert await s.register_topic("NewTopic", [QueueData("broker-a", 6, 2, 0, 2)]) == 1
    assert same(await route_text(s, "NewTopic"), NEW_TOPIC)
    await s.delete_topic("NewTopic", CLUSTER)
    assert await s.route("NewTopic") is None

    # DELETE_KV_CONFIG: the namespace stays
    await s.kv_delete("ORDER_TOPIC_CONFIG", "TopicTest")
    assert await s.kv_list("ORDER_TOPIC_CONFIG") == {}

    # UPDATE_NAMESRV_CONFIG enableTopicList=false: 311 answers "disable"
    with pytest.raises(Disabled):
        await make_service(enableTopicList=False).unit_topics("unit")

    # UNREGISTER_BROKER master broker-a: the slave alone (supportActingMaster=false)
    assert await s.unregister_broker(CLUSTER, A0, "broker-a", 0)
    assert same(await route_text(s, "TopicTest"), ROUTE_SLAVE_ONLY)
    assert same(await cluster_text(s), CLUSTER_INFO_SLAVE_ONLY)

    # the slave's connection closes
    assert await s.unregister_broker(CLUSTER, A1, "broker-a", 1, fence_epoch=slave_reg.epoch, reason="close")
    assert same(await cluster_text(s), CLUSTER_INFO_B_ONLY)


AM_BOTH = (
    '{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"broker-a",'
    '"cluster":"DefaultCluster","enableActingMaster":true}],"filterServerTable":{},"queueDatas":[{"brokerName":'
    '"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
)
AM_DOWN = (
    '{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster",'
    '"enableActingMaster":true}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":4,'
    '"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
)
AM_CLUSTER = (
    '{"brokerAddrTable":{"broker-a":{"brokerAddrs":{1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":'
    '"DefaultCluster","enableActingMaster":true}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
)
AM_NEW_ON_SLAVE = AM_DOWN.replace('"readQueueNums":8', '"readQueueNums":2').replace(
    '"writeQueueNums":8', '"writeQueueNums":2'
)
AM_TOPICS = {"TopicTest": (8, 8, 6, 0), "TBW102": (8, 8, 7, 0)}


async def test_golden_acting_master_scenario(make_service: MakeService) -> None:
    s = make_service(supportActingMaster=True)
    master = register(CLUSTER, "broker-a", A0, 0, AM_TOPICS, counter=1, acting=True)
    slave = register(CLUSTER, "broker-a", A1, 1, AM_TOPICS, counter=1, acting=True)
    assert (await s.register_broker(master))[0] == RegisterBrokerResult()
    assert (await s.register_broker(slave))[0] == RegisterBrokerResult(
        haServerAddr="127.0.0.1:10912", masterAddr=A0
    )
    assert same(await route_text(s, "TopicTest"), AM_BOTH)

    await s.unregister_broker(CLUSTER, A0, "broker-a", 0)
    assert same(await route_text(s, "TopicTest"), AM_DOWN)
    assert same(await cluster_text(s), AM_CLUSTER)

    # the prime slave re-registers with a new version and a new topic: write bit wiped
    newer = register(
        CLUSTER, "broker-a", A1, 1, {**AM_TOPICS, "NewOnSlave": (2, 2, 6, 0)}, counter=2, acting=True
    )
    assert (await s.register_broker(newer))[0] == RegisterBrokerResult()
    assert same(await route_text(s, "NewOnSlave"), AM_NEW_ON_SLAVE)

    assert (await s.register_broker(master))[0] == RegisterBrokerResult()  # the master comes back
    assert same(await route_text(s, "TopicTest"), AM_BOTH)


async def test_golden_routes_over_http(client: TestClient[Any, Any]) -> None:
    """The route, cluster and topic-list replies of the main scenario through the HTTP API (which
    always answers in standard JSON, sorted by name)."""
    resp = await client.post(
        "/v1/brokers/register", json=register_json(CLUSTER, "broker-a", A0, 0, MASTER_TOPICS)
    )
    assert resp.status == 200
    slave_topics = {"TopicTest": (8, 8, 6, 0), "X": (1, 1, 6, 0)}
    resp = await client.post(
        "/v1/brokers/register", json=register_json(CLUSTER, "broker-a", A1, 1, slave_topics)
    )
    body = await resp.json()
    assert isinstance(body.pop("epoch"), int)
    assert body == {"code": 0, "accepted": True, "haServerAddr": "127.0.0.1:10912", "masterAddr": A0}
    body_b = register_json(CLUSTER, "broker-b", B0, 0, {"TopicTest": (4, 4, 6, 0), "OnlyB": (8, 8, 6, 0)})
    del body_b["enableActingMaster"]
    assert (await client.post("/v1/brokers/register", json=body_b)).status == 200
    assert same(await (await client.get("/v1/routes/TopicTest")).text(), ROUTE_479)
    assert canon(await (await client.get("/v1/cluster")).json()) == canon(java_json(CLUSTER_INFO))
    assert set((await (await client.get("/v1/topics")).json())["topicList"]) == set(ALL_TOPICS)
    assert await (await client.get("/v1/topics/unit")).json() == {"topicList": ["UnitBoth", "UnitTopic"]}
    resp = await client.post("/v1/brokers/broker-a/wipe-write-perm")
    assert await resp.json() == {"code": 0, "wipeTopicCount": 5}
    assert same(await (await client.get("/v1/routes/TopicTest")).text(), ROUTE_WIPED)
    resp = await client.post(
        "/v1/brokers/unregister",
        json={"clusterName": CLUSTER, "brokerAddr": A0, "brokerName": "broker-a", "brokerId": 0},
    )
    assert await resp.json() == {"code": 0}
    assert canon(await (await client.get("/v1/cluster")).json()) == canon(java_json(CLUSTER_INFO_SLAVE_ONLY))


async def test_golden_change_log_replays_the_route(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    """lua/README.md: the route of a topic can be rebuilt from the change log. Rebuild broker-a's
    queue of TopicTest from registerQueues/wipePerm/addPerm/cleanQueues entries."""
    await service.register_broker(register(CLUSTER, "broker-a", A0, 0, MASTER_TOPICS, counter=3))
    await service.register_broker(register(CLUSTER, "broker-a", A1, 1, MASTER_TOPICS, counter=3, acting=True))
    await service.change_write_perm("broker-a", wipe=True)
    await service.change_write_perm("broker-a", wipe=False)
    queue: dict[str, Any] | None = None
    for _, e in await redis.xrange(Keyspace(namespace).events):
        if e["kind"] in ("registerQueues", "cleanQueues", "wipePerm", "addPerm", "topicRegister"):
            for topic, qd in upserts(e):
                if topic == "TopicTest":
                    queue = qd
        if e["kind"] in ("registerQueues", "cleanQueues") and "TopicTest" in orjson.loads(e["removed"]):
            queue = None
    r = await service.route("TopicTest")
    assert r is not None
    assert queue == orjson.loads(route_json(r, Dialect.STANDARD))["queueDatas"][0]


async def test_golden_store_is_isolated_per_namespace(redis: Redis, settings: Any) -> None:
    """Sanity for the scenario harness: two namespaces are two independent registries."""
    scripts = ScriptRegistry(redis)
    await scripts.preload()
    one = RegistryService(
        RegistryStore(redis, Keyspace(settings.namespace + "-1"), scripts, 10000, "t"), lambda: settings
    )
    two = RegistryService(
        RegistryStore(redis, Keyspace(settings.namespace + "-2"), scripts, 10000, "t"), lambda: settings
    )
    await one.register_broker(register())
    assert await two.route("TopicTest") is None
    assert await one.route("TopicTest") is not None
