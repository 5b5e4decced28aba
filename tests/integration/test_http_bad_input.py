"""Bad HTTP input gets a 4xx that says what is wrong, leaves Redis untouched, and the worker serves on."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient

from tests.builders import register_json
from tests.registry_state import snapshot

Client = TestClient[Any, Any]


def with_topic(**topic_fields: Any) -> dict[str, Any]:
    body = register_json()
    table = body["topicConfigSerializeWrapper"]["topicConfigTable"]
    table["TopicTest"].update(topic_fields)
    return body


def replace(**fields: Any) -> dict[str, Any]:
    body = register_json()
    body.update(fields)
    return body


def without(name: str) -> dict[str, Any]:
    body = register_json()
    del body[name]
    return body


LONG = "T" * 10_000
KV_BODY = b'{"value": "v"}'
REGISTER = "/v1/brokers/register"
CASES: list[tuple[str, str, str, bytes | None, int, str]] = [
    ("garbage", "POST", REGISTER, b"{not json", 400, "request body is not valid JSON"),
    ("truncated", "POST", REGISTER, b'{"clusterName": "c", "broker', 400, "request body is not valid JSON"),
    ("array", "POST", REGISTER, b"[]", 400, "request body must be a JSON object, got list"),
    ("empty", "POST", REGISTER, b"", 400, "request body is empty"),
    (
        "wrong type",
        "POST",
        REGISTER,
        orjson.dumps(replace(brokerId="zero")),
        400,
        "body.brokerId must be an integer, got str",
    ),
    (
        "missing field",
        "POST",
        REGISTER,
        orjson.dumps(without("clusterName")),
        400,
        "body.clusterName is required",
    ),
    ("unknown field", "POST", REGISTER, orjson.dumps(replace(color="blue")), 400, "unknown field(s) color"),
    (
        "unknown nested field",
        "POST",
        REGISTER,
        orjson.dumps(with_topic(queueColor=1)),
        400,
        "topicConfigTable['TopicTest']: unknown field(s) queueColor",
    ),
    (
        "negative id",
        "POST",
        REGISTER,
        orjson.dumps(replace(brokerId=-1)),
        400,
        "body.brokerId = -1 is out of range",
    ),
    ("huge id", "POST", REGISTER, orjson.dumps(replace(brokerId=2**64 - 1)), 400, "is out of range"),
    (
        "negative queues",
        "POST",
        REGISTER,
        orjson.dumps(with_topic(readQueueNums=-8)),
        400,
        "readQueueNums = -8 is out of range",
    ),
    (
        "huge perm",
        "POST",
        REGISTER,
        orjson.dumps(with_topic(perm=2**40)),
        400,
        "perm = 1099511627776 is out of range",
    ),
    (
        "tiny timeout",
        "POST",
        REGISTER,
        orjson.dumps(replace(heartbeatTimeoutMillis=10)),
        400,
        "body.heartbeatTimeoutMillis = 10 is out of range",
    ),
    (
        "long topic",
        "POST",
        REGISTER,
        orjson.dumps(with_topic(topicName=LONG)),
        400,
        "topicName is 10000 characters long; the maximum is 255",
    ),
    (
        "address with slash",
        "POST",
        REGISTER,
        orjson.dumps(replace(brokerAddr="1.2.3.4/5:10911")),
        400,
        "is not an ip:port address",
    ),
    (
        "control chars",
        "POST",
        REGISTER,
        orjson.dumps(replace(brokerName="a\nb")),
        400,
        "contains control characters",
    ),
    (
        "bad filter list",
        "POST",
        REGISTER,
        orjson.dumps(replace(filterServerList=[1, 2])),
        400,
        "filterServerList must be a list of strings",
    ),
    (
        "bad data version",
        "POST",
        REGISTER,
        orjson.dumps(
            replace(topicConfigSerializeWrapper={"dataVersion": {"counter": "x"}, "topicConfigTable": {}})
        ),
        400,
        "dataVersion.counter must be an integer",
    ),
    ("long route topic", "GET", f"/v1/routes/{LONG}", None, 400, "topic is 10000 characters long"),
    (
        "unregister epoch type",
        "POST",
        "/v1/brokers/unregister",
        orjson.dumps(
            {
                "clusterName": "DefaultCluster",
                "brokerAddr": "127.0.0.1:10911",
                "brokerName": "broker-a",
                "brokerId": 0,
                "epoch": "abc",
            }
        ),
        400,
        "body.epoch must be an integer, got str",
    ),
    ("kv value type", "PUT", "/v1/kv/NS/key", b'{"value": 5}', 400, "body.value must be a string, got int"),
    ("kv missing value", "PUT", "/v1/kv/NS/key", b"{}", 400, "body.value is required"),
    ("topic queues type", "PUT", "/v1/topics/T1", b'{"queueDatas": "x"}', 400, "must be a non-empty list"),
    (
        "topic queue fields",
        "PUT",
        "/v1/topics/T1",
        b'{"queueDatas": [{"brokerName": "broker-a", "perm": "rw"}]}',
        400,
        "body.queueDatas[0].perm must be an integer",
    ),
    (
        "config disabled",
        "PUT",
        "/v1/config",
        b'{"enableTopicList": false}',
        403,
        "remote config update is disabled",
    ),
    # ---- resource limits: the same ranges as remoting ----
    (
        "perm 999",
        "POST",
        REGISTER,
        orjson.dumps(with_topic(perm=999)),
        400,
        "perm = 999 is out of range [0, 15]",
    ),
    (
        "a million queues",
        "POST",
        REGISTER,
        orjson.dumps(with_topic(readQueueNums=1_000_000)),
        400,
        "readQueueNums = 1000000 is out of range [0, 65535]",
    ),
    (
        "topic perm 999",
        "PUT",
        "/v1/topics/T1",
        b'{"queueDatas": [{"brokerName": "broker-a", "perm": 999, "readQueueNums": 8, "writeQueueNums": 8}]}',
        400,
        "body.queueDatas[0].perm = 999 is out of range [0, 15]",
    ),
    (
        "topic write queues",
        "PUT",
        "/v1/topics/T1",
        b'{"queueDatas": [{"brokerName": "broker-a", "perm": 6, "writeQueueNums": 65536}]}',
        400,
        "writeQueueNums = 65536 is out of range [0, 65535]",
    ),
    (
        "new topic too long",
        "PUT",
        "/v1/topics/" + "T" * 128,
        b'{"queueDatas": [{"brokerName": "broker-a"}]}',
        400,
        "The specified topic is longer than topic max length (128 > 127).",
    ),
    (
        "new topic characters",
        "PUT",
        "/v1/topics/a.b",
        b'{"queueDatas": [{"brokerName": "broker-a"}]}',
        400,
        "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
    ),
    (
        "kv value too large",
        "PUT",
        "/v1/kv/NS/key",
        orjson.dumps({"value": "v" * 65537}),
        413,
        "KV value is 65537 bytes; the maximum is 65536 (kvValueMaxBytes)",
    ),
    # ---- strict JSON types and names (issue 25 row 6; remoting takes these as Java does) ----
    (
        "queue count as a string",
        "POST",
        REGISTER,
        orjson.dumps(with_topic(readQueueNums="8")),
        400,
        "topicConfigSerializeWrapper.topicConfigTable.TopicTest.readQueueNums must be an integer, got str",
    ),
    (
        "perm as a boolean",
        "POST",
        REGISTER,
        orjson.dumps(with_topic(perm=True)),
        400,
        "topicConfigSerializeWrapper.topicConfigTable.TopicTest.perm must be an integer, got bool",
    ),
    (
        "order as a string",
        "POST",
        REGISTER,
        orjson.dumps(with_topic(order="true")),
        400,
        "topicConfigSerializeWrapper.topicConfigTable.TopicTest.order must be true or false, got str",
    ),
    (
        "attribute as a number",
        "POST",
        REGISTER,
        orjson.dumps(with_topic(attributes={"+message.type": 1})),
        400,
        "topicConfigSerializeWrapper.topicConfigTable.TopicTest.attributes.+message.type must be a string",
    ),
    (
        "topic listed under another name",
        "POST",
        REGISTER,
        orjson.dumps(
            replace(
                topicConfigSerializeWrapper={
                    "topicConfigTable": {"A1": {"topicName": "B1", "readQueueNums": 8, "writeQueueNums": 8}}
                }
            )
        ),
        400,
        "topicConfigSerializeWrapper.topicConfigTable.A1.topicName is 'B1': a topic config must be "
        "listed under its own topicName",
    ),
    (
        "data version counter as a string",
        "POST",
        REGISTER,
        orjson.dumps(
            replace(topicConfigSerializeWrapper={"dataVersion": {"counter": "5"}, "topicConfigTable": {}})
        ),
        400,
        "topicConfigSerializeWrapper.dataVersion.counter must be an integer, got str",
    ),
    (
        "topic queue count as a string",
        "PUT",
        "/v1/topics/T1",
        b'{"queueDatas": [{"brokerName": "broker-a", "perm": "6"}]}',
        400,
        "body.queueDatas[0].perm must be an integer, got str",
    ),
    (
        "kv namespace climbing up",
        "PUT",
        "/v1/kv/..%2F../key",
        KV_BODY,
        400,
        "namespace '../..' is not a valid name: 1 to 255 of the characters A-Z a-z 0-9 _ - . : % | @, "
        "and not only dots",
    ),
    ("kv namespace of dots", "PUT", "/v1/kv/.../key", KV_BODY, 400, "namespace '...' is not a valid"),
    ("kv key with a slash", "PUT", "/v1/kv/NS/a%2Fb", KV_BODY, 400, "key 'a/b' is not a valid name"),
    ("kv key with a space", "PUT", "/v1/kv/NS/a%20b", KV_BODY, 400, "key 'a b' is not a valid name"),
    ("unknown path", "GET", "/v1/nope", None, 404, "GET /v1/nope: not found"),
    ("wrong method", "DELETE", "/v1/cluster", None, 405, "DELETE /v1/cluster: method not allowed"),
    ("100 KB URL", "GET", "/v1/routes/" + "t" * 100_000, None, 414, "request URL is 100011 bytes long"),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "remark"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
async def test_bad_input_is_rejected_without_touching_redis(
    client: Client,
    redis_url: str,
    namespace: str,
    method: str,
    path: str,
    body: bytes | None,
    status: int,
    remark: str,
) -> None:
    assert (await client.post(REGISTER, json=register_json())).status == 200
    before = await snapshot(redis_url, namespace)
    resp = await client.request(method, path, data=body, headers={"content-type": "application/json"})
    assert resp.status == status
    payload = await resp.json()
    assert remark in payload["remark"]
    assert payload["code"] != 0
    assert await snapshot(redis_url, namespace) == before
    assert (await client.get("/readyz")).status == 200
    assert (await client.get("/v1/routes/TopicTest")).status == 200


@pytest.mark.parametrize(
    ("method", "path", "status", "answer"),
    [
        ("GET", "/v1/nope", 404, {"code": 3, "remark": "GET /v1/nope: not found"}),
        ("POST", "/v1/cluster", 405, {"code": 3, "remark": "POST /v1/cluster: method not allowed"}),
        (
            "GET",
            "/v1/routes/" + "t" * 100_000 + "?zone=z",
            414,
            {"code": 29, "remark": "request URL is 100018 bytes long; the maximum is 65536"},
        ),
    ],
)
async def test_unknown_paths_and_long_urls_get_json_errors(
    client: Client, method: str, path: str, status: int, answer: dict[str, object]
) -> None:
    """REQUEST_CODE_NOT_SUPPORTED (3) is what Java answers a code it does not serve."""
    resp = await client.request(method, path)
    assert (resp.status, resp.content_type, await resp.json()) == (status, "application/json", answer)


async def test_twenty_megabyte_body_is_refused(client: Client, redis_url: str, namespace: str) -> None:
    before = await snapshot(redis_url, namespace)
    resp = await client.post(
        REGISTER,
        data=io.BytesIO(b"{" + b" " * (20 * 1024 * 1024) + b"}"),
        headers={"content-type": "application/json"},
    )
    assert resp.status == 413
    assert (await resp.json()) == {"code": 29, "remark": "request body is larger than 16777216 bytes"}
    assert await snapshot(redis_url, namespace) == before
    assert (await client.get("/readyz")).status == 200


async def test_long_names_are_not_echoed_whole(client: Client) -> None:
    resp = await client.get(f"/v1/routes/{LONG}")
    payload = await resp.json()
    assert resp.status == 400
    assert payload["remark"] == "topic is 10000 characters long; the maximum is 255"
    resp = await client.put(f"/v1/kv/NS/{'k' * 300}", json={"value": "v"})
    assert resp.status == 400
    assert (await resp.json())["remark"] == "key is 300 characters long; the maximum is 255"


async def test_kv_names_of_the_http_rule_are_stored(client: Client) -> None:
    """What the rule lets through: ORDER_TOPIC_CONFIG and topic names (%RETRY%...), addresses."""
    names = [("ORDER_TOPIC_CONFIG", "%RETRY%group-1"), ("ns.v2", "10.0.0.1:10911"), ("a|b", "x@y")]
    for namespace, key in names:
        path = f"/v1/kv/{namespace}/{key}".replace("%", "%25")
        resp = await client.put(path, json={"value": "v"})
        assert (resp.status, await resp.json()) == (200, {"code": 0})
        assert (await (await client.get(path)).json()) == {"value": "v"}
