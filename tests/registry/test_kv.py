"""KV config (spec §3.15; §2.3 codes 100-102, 219) and the ORDER_TOPIC_CONFIG table that
REGISTER_BROKER returns (§2.2 code 103)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from namesrv.domain.errors import BadRequest, TooLarge
from namesrv.keys import SERVICE
from namesrv.registry.service import RegistryService
from tests.builders import register, register_json
from tests.polling import scaled
from tests.registry.conftest import MakeService
from tests.registry.helpers import events

NS = "ORDER_TOPIC_CONFIG"


async def test_put_get_list(service: RegistryService) -> None:
    """KVConfigManagerTest.testPutKVConfig."""
    await service.kv_put(NS, "UnitTest", "test")
    assert await service.kv_get(NS, "UnitTest") == "test"
    assert await service.kv_list(NS) == {"UnitTest": "test"}


async def test_put_overwrites(service: RegistryService) -> None:
    await service.kv_put(NS, "TopicTest", "broker-a:4")
    await service.kv_put(NS, "TopicTest", "broker-a:4;broker-b:4")
    assert await service.kv_list(NS) == {"TopicTest": "broker-a:4;broker-b:4"}


async def test_namespaces_are_separate(service: RegistryService) -> None:
    await service.kv_put("ns1", "k", "v1")
    await service.kv_put("ns2", "k", "v2")
    assert (await service.kv_get("ns1", "k"), await service.kv_get("ns2", "k")) == ("v1", "v2")
    assert await service.kv_get("ns3", "k") is None


async def test_delete_missing_key_on_a_fresh_store_creates_nothing(service: RegistryService) -> None:
    """KVConfigManagerTest.testDeleteKVConfig: the namespace never comes into existence."""
    assert await service.kv_delete(NS, "UnitTest") is False
    assert await service.kv_list(NS) is None
    assert await service.kv_get(NS, "UnitTest") is None


async def test_emptied_namespace_still_exists(service: RegistryService) -> None:
    """§2.3 102: deleting the last key keeps the namespace; 219 then answers an empty table."""
    await service.kv_put(NS, "TopicTest", "broker-a:8")
    assert await service.kv_delete(NS, "TopicTest") is True
    assert await service.kv_list(NS) == {}
    assert await service.kv_get(NS, "TopicTest") is None


async def test_null_value_is_invisible_but_creates_the_namespace(service: RegistryService) -> None:
    """§2.3 100: a null value is stored; GET then finds nothing and the list omits it."""
    await service.kv_put("fresh", "k", None)
    assert await service.kv_get("fresh", "k") is None
    assert await service.kv_list("fresh") == {}
    await service.kv_put("fresh", "j", "v")
    await service.kv_put("fresh", "j", None)  # overwriting with null hides the old value
    assert await service.kv_list("fresh") == {}


async def test_empty_string_value_is_a_value(service: RegistryService) -> None:
    await service.kv_put(NS, "k", "")
    assert await service.kv_get(NS, "k") == ""
    assert await service.kv_list(NS) == {"k": ""}


@pytest.mark.parametrize(("namespace", "key"), [("", "k"), ("ns", "")])
async def test_put_needs_namespace_and_key(service: RegistryService, namespace: str, key: str) -> None:
    with pytest.raises(BadRequest):
        await service.kv_put(namespace, key, "v")


async def test_kv_change_log(service: RegistryService, redis: Redis, namespace: str) -> None:
    await service.kv_put(NS, "T", "broker-a:8")
    await service.kv_delete(NS, "T")
    await service.kv_delete(NS, "T")  # nothing to delete: no entry
    log = [
        (e["kind"], e["namespace"], e["key"], e.get("value"), e.get("valueBytes"), e.get("valueSha1"))
        for e in await events(redis, namespace)
    ]
    # The log carries the value's length and SHA-1, never the value itself.
    assert log == [
        ("kvPut", NS, "T", None, "10", hashlib.sha1(b"broker-a:8").hexdigest()),
        ("kvDelete", NS, "T", None, None, None),
    ]


async def test_null_value_logs_no_length(service: RegistryService, redis: Redis, namespace: str) -> None:
    await service.kv_put("fresh", "j", None)
    (entry,) = await events(redis, namespace)
    assert (entry["kind"], entry["valueBytes"], entry["valueSha1"]) == ("kvPut", "", "")


async def test_value_over_the_limit_is_refused_before_redis(
    make_service: MakeService, redis: Redis, namespace: str
) -> None:
    service = make_service(kvValueMaxBytes=8)
    refused: list[str] = []
    service.count_limit = refused.append
    await service.kv_put(NS, "k", "12345678")  # exactly the limit: accepted
    with pytest.raises(TooLarge) as info:
        await service.kv_put(NS, "k", "é" * 5)  # 5 characters, 10 UTF-8 bytes
    assert info.value.remark == "KV value is 10 bytes; the maximum is 8 (kvValueMaxBytes)"
    assert info.value.limit == "kvValueMaxBytes"
    assert refused == ["kvValueMaxBytes"]
    assert await service.kv_get(NS, "k") == "12345678"  # the refusal changed nothing
    assert [e["kind"] for e in await events(redis, namespace)] == ["kvPut"]


async def test_lookups_of_unstorable_names_do_not_reach_redis(service: RegistryService) -> None:
    long = "k" * 10_000_000
    assert await service.kv_get(NS, long) is None
    assert await service.kv_delete(NS, long) is False
    assert await service.kv_list(long) is None


# ---- REGISTER_BROKER returns the ORDER_TOPIC_CONFIG table ----
@pytest.mark.parametrize(
    ("flag", "table", "expected"),
    [
        (True, None, None),  # namespace absent: no body
        (True, {"TopicTest": "broker-a:8"}, {"TopicTest": "broker-a:8"}),
        (True, {}, {}),  # namespace emptied: {"table":{}}
        (False, {"TopicTest": "broker-a:8"}, None),  # returnOrderTopicConfigToBroker=false
    ],
    ids=["absent", "present", "emptied", "disabled"],
)
async def test_register_returns_the_order_topic_config(
    make_service: MakeService, flag: bool, table: dict[str, str] | None, expected: dict[str, str] | None
) -> None:
    service = make_service(returnOrderTopicConfigToBroker=flag)
    if table is not None:
        await service.kv_put(NS, "gone", "x")
        await service.kv_delete(NS, "gone")
        for k, v in table.items():
            await service.kv_put(NS, k, v)
    result, _ = await service.register_broker(register())
    assert result is not None
    assert result.order_topic_config == expected


async def test_refused_registration_returns_no_table(service: RegistryService) -> None:
    await service.kv_put(NS, "TopicTest", "broker-a:8")
    assert await service.register_broker(register(topics=["TopicTest"])) == (None, None)


# ---- HTTP: codes and remarks of 100, 101, 102, 219 ----
async def test_http_kv(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/v1/kv/NoSuchNs")
    assert (resp.status, await resp.json()) == (
        404,
        {"code": 22, "remark": "No config item, Namespace: NoSuchNs"},
    )
    assert await (await client.put(f"/v1/kv/{NS}/TopicTest", json={"value": "broker-a:8"})).json() == {
        "code": 0
    }
    resp = await client.get(f"/v1/kv/{NS}/TopicTest")
    assert (resp.status, await resp.json()) == (200, {"value": "broker-a:8"})
    resp = await client.get(f"/v1/kv/{NS}/Nope")
    assert (resp.status, await resp.json()) == (
        404,
        {"code": 22, "remark": "No config item, Namespace: ORDER_TOPIC_CONFIG Key: Nope"},
    )
    assert await (await client.get(f"/v1/kv/{NS}")).json() == {"table": {"TopicTest": "broker-a:8"}}
    resp = await client.post("/v1/brokers/register", json=register_json())
    assert (await resp.json())["kvTable"] == {"table": {"TopicTest": "broker-a:8"}}
    assert await (await client.delete(f"/v1/kv/{NS}/TopicTest")).json() == {"code": 0, "deleted": True}
    assert await (await client.delete(f"/v1/kv/{NS}/TopicTest")).json() == {"code": 0, "deleted": False}
    assert await (await client.get(f"/v1/kv/{NS}")).json() == {"table": {}}


# ---- KV bounds (#25 row 3) ----
async def test_a_namespace_is_refused_past_kv_namespace_max_bytes_and_nothing_changes(
    make_service: MakeService, redis: Redis, namespace: str
) -> None:
    service = make_service(kvNamespaceMaxBytes=1024, kvMaxBytes=4096)
    refused: list[str] = []
    service.count_limit = refused.append
    for i in range(10):  # 10 x (2 + 100) = 1,020 bytes
        await service.kv_put("FLOOD", f"k{i}", "v" * 100)
    before = await events(redis, namespace)
    with pytest.raises(TooLarge) as info:
        await service.kv_put("FLOOD", "kA", "v" * 100)
    assert info.value.remark == (
        "KV namespace 'FLOOD' holds 1020 bytes; this put would pass its maximum of 1024 "
        "(kvNamespaceMaxBytes): nothing stored"
    )
    assert (info.value.limit, refused) == ("kvNamespaceMaxBytes", ["kvNamespaceMaxBytes"])
    assert await service.kv_get("FLOOD", "kA") is None
    assert await events(redis, namespace) == before
    # a put that does not grow the namespace is still accepted; a delete frees room
    await service.kv_put("FLOOD", "k0", "w" * 100)
    await service.kv_delete("FLOOD", "k1")
    await service.kv_put("FLOOD", "kA", "v" * 100)
    assert await redis.hgetall(service.store.k.kvbytes) == {"FLOOD": "1020", "": "1020"}


async def test_the_whole_kv_is_refused_past_kv_max_bytes(make_service: MakeService) -> None:
    service = make_service(kvNamespaceMaxBytes=1024, kvMaxBytes=2048)
    for ns in ("A", "B"):
        for i in range(10):
            await service.kv_put(ns, f"k{i}", "v" * 100)
    with pytest.raises(TooLarge) as info:
        await service.kv_put("C", "k", "v" * 100)
    assert info.value.remark == (
        "the KV config holds 2040 bytes; this put would pass its maximum of 2048 (kvMaxBytes): nothing stored"
    )
    assert await service.kv_list("C") is None  # not even the namespace came into existence


async def test_a_namespace_written_before_the_accounting_is_counted_on_first_use(
    make_service: MakeService, redis: Redis
) -> None:
    service = make_service(kvNamespaceMaxBytes=1024)
    k = service.store.k
    await redis.sadd(k.kvns, "OLD")
    await redis.hset(k.kv("OLD"), mapping={f"k{i}": "v" * 100 for i in range(10)})  # 1,020 bytes
    with pytest.raises(TooLarge):
        await service.kv_put("OLD", "more", "v" * 10)
    assert await redis.hgetall(k.kvbytes) == {"OLD": "1020", "": "1020"}


async def test_namespace_reads_come_from_memory_until_the_namespace_changes(
    client: TestClient[Any, Any],
) -> None:
    service = client.app[SERVICE]  # type: ignore[index]
    tables = service.kv_tables
    await service.kv_put(NS, "T1", "broker-a:8")
    # The put's own change-log entry invalidates the namespace again when this worker's feed
    # reads it: on a loaded machine that can come after the first read below, which then counts
    # twice. Wait until the feed has applied it, then count.
    assert await tables.freshness.wait_fresh(scaled(10.0))
    for _ in range(50):
        assert await service.kv_list(NS) == {"T1": "broker-a:8"}
    assert tables.reads == 1
    await service.kv_put(NS, "T2", "broker-a:4")  # this worker's own write: seen at once
    assert await service.kv_list(NS) == {"T1": "broker-a:8", "T2": "broker-a:4"}
    assert tables.reads == 2
