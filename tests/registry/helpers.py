"""Expected-value builders and readers for the registry suite.

Routes and cluster info are compared as the plain JSON the service would send in the standard
dialect (quoted broker-id keys), so an assertion shows the whole object. Java's order of
brokerDatas/queueDatas/topic lists is undefined; ``canon`` sorts them for set-like comparison.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from redis.asyncio import Redis

from namesrv.domain.model import TopicRouteData
from namesrv.protocol.fastjson import Dialect, dumps
from namesrv.protocol.render import cluster_info_obj, route_json
from namesrv.registry.service import RegistryService
from namesrv.store.keyspace import Keyspace

CLUSTER = "DefaultCluster"
MASTER = "127.0.0.1:10911"
SLAVE = "127.0.0.1:10921"
SLAVE2 = "127.0.0.1:10931"
B = "127.0.0.2:10911"  # another broker's master
C = "127.0.0.3:10911"  # and a third one's

# A static topic's TopicQueueMappingInfo as broker-a sends it for TopicTest.
MAPPING: dict[str, Any] = {
    "bname": "broker-a",
    "currIdMap": {"0": 0},
    "epoch": 1,
    "scope": "__global__",
    "topic": "TopicTest",
}


def bd(
    name: str,
    addrs: dict[int, str],
    cluster: str = CLUSTER,
    *,
    acting: bool = False,
    zone: str | None = None,
) -> dict[str, Any]:
    """A BrokerData as standard JSON renders it."""
    out: dict[str, Any] = {
        "brokerAddrs": {str(k): v for k, v in sorted(addrs.items())},
        "brokerName": name,
        "cluster": cluster,
        "enableActingMaster": acting,
    }
    if zone is not None:
        out["zoneName"] = zone
    return out


def qd(name: str, perm: int = 6, read: int = 8, write: int = 8, flag: int = 0) -> dict[str, Any]:
    return {
        "brokerName": name,
        "perm": perm,
        "readQueueNums": read,
        "topicSysFlag": flag,
        "writeQueueNums": write,
    }


def route_obj(
    brokers: list[dict[str, Any]],
    queues: list[dict[str, Any]],
    filters: dict[str, list[str]] | None = None,
    *,
    order: str | None = None,
    mapping: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"brokerDatas": brokers, "filterServerTable": filters or {}, "queueDatas": queues}
    if order is not None:
        out["orderTopicConf"] = order
    if mapping is not None:
        out["topicQueueMappingByBroker"] = mapping
    return out


def as_json(route: TopicRouteData | None) -> dict[str, Any] | None:
    if route is None:
        return None
    obj: dict[str, Any] = orjson.loads(route_json(route, Dialect.STANDARD))
    return obj


async def route(service: RegistryService, topic: str) -> dict[str, Any] | None:
    return as_json(await service.route(topic))


async def cluster(service: RegistryService) -> dict[str, Any]:
    info = await service.cluster_info()
    obj: dict[str, Any] = orjson.loads(dumps(cluster_info_obj(info), Dialect.STANDARD))
    return obj


async def addrs_of(service: RegistryService, topic: str, name: str) -> dict[str, str] | None:
    """brokerAddrs of one broker name in a topic's route (None when the route or name is absent)."""
    r = await route(service, topic)
    if r is None:
        return None
    for b in r["brokerDatas"]:
        if b["brokerName"] == name:
            found: dict[str, str] = b["brokerAddrs"]
            return found
    return None


async def perms_of(service: RegistryService, topic: str) -> dict[str, int] | None:
    r = await route(service, topic)
    if r is None:
        return None
    return {q["brokerName"]: q["perm"] for q in r["queueDatas"]}


def canon(obj: Any) -> Any:
    """Sort the lists whose order Java leaves undefined (brokerDatas, queueDatas, topic lists,
    cluster member sets), recursively, so two bodies compare as sets."""
    if isinstance(obj, dict):
        return {k: canon(v) for k, v in obj.items()}
    if isinstance(obj, list):
        items = [canon(v) for v in obj]
        return sorted(items, key=lambda v: orjson.dumps(v, option=orjson.OPT_SORT_KEYS))
    return obj


def java_json(text: str) -> Any:
    """Parse fastjson default-mode output, whose Long map keys are unquoted (``{0:"a"}``)."""
    return orjson.loads(re.sub(r"([{,])(-?\d+):", r'\1"\2":', text))


async def events(redis: Redis, namespace: str, kind: str | None = None) -> list[dict[str, str]]:
    """The change log of the namespace, oldest first, optionally of one kind."""
    entries = await redis.xrange(Keyspace(namespace).events)
    out = [dict(fields) for _, fields in entries]
    return [e for e in out if kind is None or e["kind"] == kind]
