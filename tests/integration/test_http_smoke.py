from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from tests.builders import register_json


async def test_register_then_route_over_http(client: TestClient[Any, Any]) -> None:
    resp = await client.post(
        "/v1/brokers/register", json=register_json(topics={"TopicTest": (8, 8, 6, 0)}, broker_id=0)
    )
    assert resp.status == 409  # first registration carrying exactly one topic is refused (R7)
    assert await resp.json() == {"code": 1, "remark": "register broker failed"}

    resp = await client.post("/v1/brokers/register", json=register_json())
    assert resp.status == 200
    body = await resp.json()
    assert body["code"] == 0 and body["accepted"] is True and body["epoch"] >= 1

    resp = await client.get("/v1/routes/TopicTest")
    assert resp.status == 200
    assert await resp.text() == (
        '{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a",'
        '"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},'
        '"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,'
        '"writeQueueNums":8}]}'
    )

    resp = await client.get("/v1/routes/Nope")
    assert resp.status == 404
    assert await resp.json() == {
        "code": 17,
        "remark": "No topic route info in name server for the topic: Nope\n"
        "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.",
    }
