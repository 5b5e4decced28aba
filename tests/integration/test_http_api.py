"""Every JSON endpoint answers with RocketMQ's field names; the OpenAPI document matches the router."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from aiohttp.test_utils import TestClient

from namesrv.config import Settings
from namesrv.http.openapi import OPENAPI
from tests.builders import register_json
from tests.conftest import close_client, start_client

Client = TestClient[Any, Any]
REF = {
    "clusterName": "DefaultCluster",
    "brokerAddr": "127.0.0.1:10911",
    "brokerName": "broker-a",
    "brokerId": 0,
}


async def json(client: Client, method: str, path: str, status: int = 200, **kwargs: Any) -> Any:
    resp = await client.request(method, path, **kwargs)
    assert resp.status == status, await resp.text()
    return await resp.json()


async def test_broker_lifecycle_endpoints(client: Client) -> None:
    topics = {"TopicTest": (8, 8, 6, 0), "TBW102": (8, 8, 7, 0), "UnitTopic": (4, 4, 6, 1)}
    reg = await json(client, "POST", "/v1/brokers/register", json=register_json(topics=topics))
    assert reg == {"code": 0, "accepted": True, "epoch": reg["epoch"]}
    slave = register_json(addr="127.0.0.1:10921", broker_id=1, topics=topics)
    assert await json(client, "POST", "/v1/brokers/register", json=slave) == {
        "code": 0,
        "accepted": True,
        "epoch": reg["epoch"] + 1,
        "haServerAddr": "127.0.0.1:10912",
        "masterAddr": "127.0.0.1:10911",
    }
    assert await json(
        client,
        "POST",
        "/v1/brokers/heartbeat",
        json={"clusterName": "DefaultCluster", "brokerAddr": "127.0.0.1:10911"},
    ) == {"code": 0, "live": True}
    dv = {"counter": 1, "stateVersion": 0, "timestamp": 1700000000000}
    assert await json(client, "POST", "/v1/brokers/data-version", json={**REF, "dataVersion": dv}) == {
        "code": 0,
        "changed": False,
        "dataVersion": dv,
    }
    assert (
        await json(
            client, "POST", "/v1/brokers/data-version", json={**REF, "dataVersion": {**dv, "counter": 2}}
        )
    )["changed"] is True
    assert await json(client, "GET", "/v1/brokers/broker-a?cluster=DefaultCluster") == {
        "brokerMemberGroup": {
            "brokerAddrs": {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"},
            "brokerName": "broker-a",
            "cluster": "DefaultCluster",
        }
    }
    assert await json(client, "POST", "/v1/brokers/broker-a/wipe-write-perm") == {
        "code": 0,
        "wipeTopicCount": 3,
    }
    route = await json(client, "GET", "/v1/routes/TBW102")
    assert route["queueDatas"][0]["perm"] == 5
    assert await json(client, "POST", "/v1/brokers/broker-a/add-write-perm") == {
        "code": 0,
        "addTopicCount": 3,
    }
    assert (await json(client, "GET", "/v1/routes/TBW102"))["queueDatas"][0]["perm"] == 6
    assert await json(client, "GET", "/v1/cluster") == {
        "brokerAddrTable": {
            "broker-a": {
                "brokerAddrs": {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"},
                "brokerName": "broker-a",
                "cluster": "DefaultCluster",
                "enableActingMaster": False,
            }
        },
        "clusterAddrTable": {"DefaultCluster": ["broker-a"]},
    }
    assert await json(client, "POST", "/v1/brokers/unregister", json=REF) == {"code": 0}
    assert (await json(client, "GET", "/v1/routes/TopicTest"))["brokerDatas"][0]["brokerAddrs"] == {
        "1": "127.0.0.1:10921"
    }


async def test_topic_endpoints(client: Client) -> None:
    topics = {
        "TopicTest": (8, 8, 6, 0),
        "UnitTopic": (4, 4, 6, 1),
        "UnitSub": (4, 4, 6, 2),
        "UnitBoth": (4, 4, 6, 3),
    }
    await json(client, "POST", "/v1/brokers/register", json=register_json(topics=topics))
    assert await json(client, "GET", "/v1/topics") == {
        "topicList": ["TopicTest", "UnitBoth", "UnitSub", "UnitTopic"]
    }
    assert await json(client, "GET", "/v1/topics?cluster=DefaultCluster") == {
        "topicList": ["TopicTest", "UnitBoth", "UnitSub", "UnitTopic"]
    }
    assert await json(client, "GET", "/v1/topics?cluster=Nope") == {"topicList": []}
    assert await json(client, "GET", "/v1/topics/unit") == {"topicList": ["UnitBoth", "UnitTopic"]}
    assert await json(client, "GET", "/v1/topics/unit-sub") == {"topicList": ["UnitBoth", "UnitSub"]}
    assert await json(client, "GET", "/v1/topics/unit-sub-ununit") == {"topicList": ["UnitSub"]}
    assert await json(client, "GET", "/v1/topics/system") == {
        "topicList": ["DefaultCluster", "broker-a"],
        "brokerAddr": "127.0.0.1:10911",
    }
    queue = {"brokerName": "broker-a", "perm": 6, "readQueueNums": 2, "topicSysFlag": 0, "writeQueueNums": 2}
    assert await json(client, "PUT", "/v1/topics/NewTopic", json={"queueDatas": [queue]}) == {
        "code": 0,
        "written": 1,
    }
    assert (await json(client, "GET", "/v1/routes/NewTopic"))["queueDatas"] == [queue]
    assert await json(client, "DELETE", "/v1/topics/NewTopic?cluster=Other") == {
        "code": 0,
        "removedQueues": 0,
    }
    assert await json(client, "DELETE", "/v1/topics/NewTopic?cluster=DefaultCluster") == {
        "code": 0,
        "removedQueues": 1,
    }
    assert (await json(client, "GET", "/v1/routes/NewTopic", 404))["code"] == 17


async def test_kv_endpoints(client: Client) -> None:
    assert await json(client, "GET", "/v1/kv/ORDER_TOPIC_CONFIG", 404) == {
        "code": 22,
        "remark": "No config item, Namespace: ORDER_TOPIC_CONFIG",
    }
    assert await json(client, "PUT", "/v1/kv/ORDER_TOPIC_CONFIG/TopicTest", json={"value": "broker-a:8"}) == {
        "code": 0
    }
    assert await json(client, "GET", "/v1/kv/ORDER_TOPIC_CONFIG/TopicTest") == {"value": "broker-a:8"}
    assert await json(client, "GET", "/v1/kv/ORDER_TOPIC_CONFIG") == {"table": {"TopicTest": "broker-a:8"}}
    assert await json(client, "GET", "/v1/kv/ORDER_TOPIC_CONFIG/Nope", 404) == {
        "code": 22,
        "remark": "No config item, Namespace: ORDER_TOPIC_CONFIG Key: Nope",
    }
    assert await json(client, "DELETE", "/v1/kv/ORDER_TOPIC_CONFIG/TopicTest") == {"code": 0, "deleted": True}
    assert await json(client, "GET", "/v1/kv/ORDER_TOPIC_CONFIG") == {"table": {}}  # the namespace stays


async def test_order_topic_conf_and_kv_body_for_brokers(settings: Settings) -> None:
    client = await start_client(dataclasses.replace(settings, orderMessageEnable=True))
    try:
        await json(client, "PUT", "/v1/kv/ORDER_TOPIC_CONFIG/TopicTest", json={"value": "broker-a:8"})
        reg = await json(client, "POST", "/v1/brokers/register", json=register_json())
        assert reg["kvTable"] == {"table": {"TopicTest": "broker-a:8"}}
        assert (await json(client, "GET", "/v1/routes/TopicTest"))["orderTopicConf"] == "broker-a:8"
        assert "orderTopicConf" not in await json(client, "GET", "/v1/routes/TBW102")
    finally:
        await close_client(client)


async def test_zone_filter_on_routes(client: Client) -> None:
    await json(client, "POST", "/v1/brokers/register", json=register_json(zoneName="zone-a"))
    await json(
        client,
        "POST",
        "/v1/brokers/register",
        json=register_json(name="broker-b", addr="127.0.0.2:10911", zoneName="zone-b"),
    )
    names = [
        b["brokerName"]
        for b in (await json(client, "GET", "/v1/routes/TopicTest?zone=ZONE-A"))["brokerDatas"]
    ]
    assert names == ["broker-a"]


async def test_config_endpoints(settings: Settings) -> None:
    enabled = dataclasses.replace(settings, allowRemoteConfigUpdate=True)
    a, b = await start_client(enabled), await start_client(dataclasses.replace(enabled))
    try:
        config = await json(a, "GET", "/v1/config")
        assert config["enableTopicList"] == "true" and config["httpPort"] == "0"
        assert await json(
            a, "PUT", "/v1/config", json={"enableTopicList": False, "httpPort": 9, "foo": "x"}
        ) == {"code": 0, "applied": ["enableTopicList"], "needsRestart": ["httpPort"], "ignored": ["foo"]}
        assert (await json(a, "GET", "/v1/config"))["enableTopicList"] == "false"
        for _ in range(40):  # the other worker learns of it through the change log
            if (await json(b, "GET", "/v1/config"))["enableTopicList"] == "false":
                break
            await __import__("asyncio").sleep(0.05)
        assert await json(b, "GET", "/v1/topics/unit", 403) == {"code": 1, "remark": "disable"}
        assert await json(a, "PUT", "/v1/config", 403, json={"configStorePath": "/x"}) == {
            "code": 16,
            "remark": "Can not update config in black list.",
        }
        bad = await json(a, "PUT", "/v1/config", 400, json={"waitSecondsForService": "soon"})
        assert "waitSecondsForService: invalid value 'soon'" in bad["remark"]
    finally:
        await close_client(a)
        await close_client(b)


async def test_nsaddr_serves_the_advertised_addresses(settings: Settings) -> None:
    client = await start_client(dataclasses.replace(settings, advertisedAddresses="namesrv.mq.svc:9876"))
    try:
        resp = await client.get("/rocketmq/nsaddr")
        assert resp.status == 200 and resp.content_type == "text/plain"
        assert await resp.text() == "namesrv.mq.svc:9876"
    finally:
        await close_client(client)


async def test_metrics_count_requests_registrations_and_script_latency(client: Client) -> None:
    await client.post("/v1/brokers/register", json=register_json())
    await client.get("/v1/routes/TopicTest")
    await client.get("/v1/routes/Missing")
    text = await (await client.get("/metrics")).text()
    assert 'namesrv_requests_total{operation="route",outcome="ok",transport="http"} 1.0' in text
    assert 'namesrv_requests_total{operation="route",outcome="rejected",transport="http"} 1.0' in text
    assert 'namesrv_registrations_total{result="ok"} 1.0' in text
    assert 'namesrv_script_seconds_count{script="registerBroker"} 1.0' in text
    assert 'namesrv_script_seconds_count{script="getRouteInfo"} 2.0' in text
    for name in (
        "namesrv_expired_brokers_total",
        "namesrv_redis_errors_total",
        "namesrv_remoting_connections",
    ):
        assert f"# TYPE {name.removesuffix('_total')}" in text


def _lag_over(text: str, le: str) -> tuple[float, float]:
    """(ticks counted, ticks later than ``le`` seconds) from a /metrics page."""
    values = dict(
        line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("namesrv_event_loop_lag")
    )
    total = float(values["namesrv_event_loop_lag_seconds_count"])
    return total, total - float(values[f'namesrv_event_loop_lag_seconds_bucket{{le="{le}"}}'])


async def test_a_blocked_event_loop_shows_as_loop_lag(client: Client) -> None:
    """The test shares the worker's event loop: blocking it here is the worker being busy."""
    await asyncio.sleep(0.1)
    ticks, late = _lag_over(await (await client.get("/metrics")).text(), "0.025")
    time.sleep(0.06)  # noqa: ASYNC251 - the point: nothing else runs meanwhile
    await asyncio.sleep(0.05)
    ticks_after, late_after = _lag_over(await (await client.get("/metrics")).text(), "0.025")
    assert ticks_after > ticks
    # the tick due during the block ran 50-60 ms late (a busy CI machine may add more)
    assert late_after - late >= 1


async def test_openapi_describes_exactly_the_routes(client: Client) -> None:
    served = await json(client, "GET", "/openapi.json")
    assert served == OPENAPI
    documented = {(m.upper(), p) for p, ops in OPENAPI["paths"].items() for m in ops}
    routed = {
        (r.method, r.resource.canonical)
        for r in client.app.router.routes()  # type: ignore[union-attr]
        if r.method != "HEAD" and r.resource is not None
    }
    assert documented == routed
    ids = [op["operationId"] for ops in OPENAPI["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
