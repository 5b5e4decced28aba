"""Strict parsing of HTTP JSON bodies into domain requests.

Unlike the remoting protocol, where we accept whatever a Java broker sends, the JSON API is
ours: unknown fields, wrong types, missing fields and out-of-range numbers are 400s that say
what is wrong, before anything reaches Redis. Where the remoting path takes what Java's fastjson
takes (``"readQueueNums": "8"``, a topic config stored under its ``topicName`` whatever its key),
HTTP refuses it, naming the field: a client of the JSON API sent something it did not mean.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeVar

import orjson
from aiohttp import web

from namesrv.decode_budget import IN_THREAD_BYTES, DecodeBudget
from namesrv.domain.errors import BadRequest
from namesrv.domain.model import (
    DataVersion,
    QueueData,
    RegisterBrokerRequest,
    TopicConfig,
    TopicConfigWrapper,
    check_name,
)

REGISTER_FIELDS = {
    "clusterName",
    "brokerAddr",
    "brokerName",
    "brokerId",
    "haServerAddr",
    "heartbeatTimeoutMillis",
    "enableActingMaster",
    "zoneName",
    "topicConfigSerializeWrapper",
    "filterServerList",
}
WRAPPER_FIELDS = {
    "dataVersion",
    "topicConfigTable",
    "topicQueueMappingInfoMap",
    "mappingDataVersion",
    "topicQueueMappingDetailMap",
}
TOPIC_CONFIG_FIELDS = {
    "topicName",
    "readQueueNums",
    "writeQueueNums",
    "perm",
    "topicFilterType",
    "topicSysFlag",
    "order",
    "attributes",
}
DATA_VERSION_FIELDS = {"counter", "stateVersion", "timestamp"}
QUEUE_DATA_FIELDS = {"brokerName", "perm", "readQueueNums", "topicSysFlag", "writeQueueNums"}
# The JSON type of each field (null: the default). The domain parsers also take numbers in strings
# and "true"/"false", as fastjson does for brokers; the JSON API does not.
TOPIC_CONFIG_TYPES: dict[str, type] = {
    "topicName": str,
    "readQueueNums": int,
    "writeQueueNums": int,
    "perm": int,
    "topicFilterType": str,
    "topicSysFlag": int,
    "order": bool,
    "attributes": dict,
}
DATA_VERSION_TYPES: dict[str, type] = {"counter": int, "stateVersion": int, "timestamp": int}
QUEUE_DATA_TYPES: dict[str, type] = {
    "brokerName": str,
    "perm": int,
    "readQueueNums": int,
    "topicSysFlag": int,
    "writeQueueNums": int,
}
_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true or false", dict: "an object"}
# KV namespaces and keys written over HTTP (they travel in the URL path): letters, digits and
# _ - . : % | @, at most 255, and not only dots: no '/', no '..', nothing a proxy or a log would
# read as something else. The remoting PUT_KV_CONFIG takes any name, as Java does.
KV_NAME = re.compile(r"[A-Za-z0-9_.:%|@-]{1,255}")
KV_NAME_RULE = "1 to 255 of the characters A-Z a-z 0-9 _ - . : % | @, and not only dots"
UNREGISTER_FIELDS = {"clusterName", "brokerAddr", "brokerName", "brokerId", "epoch"}
HEARTBEAT_FIELDS = {"clusterName", "brokerAddr", "brokerName", "brokerId", "dataVersion"}


_T = TypeVar("_T")


async def json_body(request: web.Request, budget: DecodeBudget) -> dict[str, Any]:
    async with decoded_body(request, budget, _same) as body:
        return body


def _same(body: dict[str, Any]) -> dict[str, Any]:
    return body


@contextlib.asynccontextmanager
async def decoded_body(
    request: web.Request, budget: DecodeBudget, convert: Callable[[dict[str, Any]], _T]
) -> AsyncIterator[_T]:
    """The JSON body, parsed and ``convert``-ed, with the memory that costs reserved in the
    worker's decoding budget until the block ends; a big body is parsed in a thread."""
    raw = await request.read()
    reservation = await budget.reserve_json(raw, "the request body")
    try:
        if len(raw) > IN_THREAD_BYTES:
            value = await asyncio.to_thread(lambda: convert(parse_json(raw)))
        else:
            value = convert(parse_json(raw))
        yield value
    finally:
        reservation.release()


def parse_json(raw: bytes) -> dict[str, Any]:
    if not raw:
        raise BadRequest("request body is empty; a JSON object is expected")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest(f"request body must be a JSON object, got {type(body).__name__}")
    return body


def only(obj: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise BadRequest(f"{where}: unknown field(s) {', '.join(unknown)}")


def required_str(obj: Mapping[str, Any], name: str, where: str = "body") -> str:
    value = obj.get(name)
    if value is None:
        raise BadRequest(f"{where}.{name} is required")
    if not isinstance(value, str):
        raise BadRequest(f"{where}.{name} must be a string, got {type(value).__name__}")
    return check_name(value, f"{where}.{name}")


def optional_str(obj: Mapping[str, Any], name: str, where: str = "body") -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{where}.{name} must be a string, got {type(value).__name__}")
    return value


def integer(
    obj: Mapping[str, Any], name: str, *, lo: int, hi: int, required: bool = True, where: str = "body"
) -> int | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise BadRequest(f"{where}.{name} is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{where}.{name} must be an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise BadRequest(f"{where}.{name} = {value} is out of range [{lo}, {hi}]")
    return value


def optional_bool(obj: Mapping[str, Any], name: str, where: str = "body") -> bool | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise BadRequest(f"{where}.{name} must be true or false, got {type(value).__name__}")
    return value


def typed(obj: Mapping[str, Any], types: Mapping[str, type], where: str) -> None:
    """Each field of ``types`` present in ``obj`` has that JSON type (an integer is not a bool)."""
    for name, kind in types.items():
        value = obj.get(name)
        if value is None:
            continue
        if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
            raise BadRequest(f"{where}.{name} must be {_TYPE_NAMES[kind]}, got {type(value).__name__}")


def data_version(obj: Any, where: str) -> DataVersion:
    if not isinstance(obj, Mapping):
        raise BadRequest(f"{where} must be an object")
    only(obj, DATA_VERSION_FIELDS, where)
    typed(obj, DATA_VERSION_TYPES, where)
    return DataVersion.from_obj(obj, where)


def topic_config(key: str, tc: Any, where: str) -> TopicConfig:
    """One entry of topicConfigTable: strictly typed, and stored under its key (Java stores it
    under its topicName, so a mismatch would register a topic the client did not name)."""
    if isinstance(tc, Mapping):
        only(tc, TOPIC_CONFIG_FIELDS, f"{where}[{key!r}]")
        path = f"{where}.{key}"
        typed(tc, TOPIC_CONFIG_TYPES, path)
        attrs = tc.get("attributes") or {}
        bad = next((k for k, v in attrs.items() if not isinstance(v, str)), None)
        if bad is not None:
            raise BadRequest(f"{path}.attributes.{bad} must be a string, got {type(attrs[bad]).__name__}")
    config = TopicConfig.from_obj(tc, key)
    if config.topicName != key:
        raise BadRequest(
            f"{where}.{key}.topicName is {config.topicName!r}: a topic config must be listed under "
            f"its own topicName"
        )
    return config


def wrapper(obj: Any) -> TopicConfigWrapper:
    where = "topicConfigSerializeWrapper"
    if obj is None:
        return TopicConfigWrapper({}, DataVersion())
    if not isinstance(obj, Mapping):
        raise BadRequest(f"{where} must be an object")
    only(obj, WRAPPER_FIELDS, where)
    table = obj.get("topicConfigTable") or {}
    if not isinstance(table, Mapping):
        raise BadRequest(f"{where}.topicConfigTable must be an object")
    configs = {key: topic_config(key, tc, f"{where}.topicConfigTable") for key, tc in table.items()}
    mappings = obj.get("topicQueueMappingInfoMap") or {}
    if not isinstance(mappings, Mapping) or not all(isinstance(v, Mapping) for v in mappings.values()):
        raise BadRequest(f"{where}.topicQueueMappingInfoMap must map topics to objects")
    version = (
        data_version(obj["dataVersion"], f"{where}.dataVersion") if obj.get("dataVersion") else DataVersion()
    )
    return TopicConfigWrapper(configs, version, {str(k): dict(v) for k, v in mappings.items()})


def register_request(body: Mapping[str, Any]) -> RegisterBrokerRequest:
    only(body, REGISTER_FIELDS, "body")
    filters = body.get("filterServerList")
    if filters is not None and (
        not isinstance(filters, list) or not all(isinstance(f, str) for f in filters)
    ):
        raise BadRequest("body.filterServerList must be a list of strings")
    return RegisterBrokerRequest(
        clusterName=required_str(body, "clusterName"),
        brokerAddr=required_str(body, "brokerAddr"),
        brokerName=required_str(body, "brokerName"),
        brokerId=integer(body, "brokerId", lo=0, hi=2**63 - 1) or 0,
        haServerAddr=optional_str(body, "haServerAddr") or "",
        wrapper=wrapper(body.get("topicConfigSerializeWrapper")),
        filterServerList=None if filters is None else tuple(filters),
        zoneName=optional_str(body, "zoneName"),
        heartbeatTimeoutMillis=integer(
            body, "heartbeatTimeoutMillis", lo=1000, hi=86_400_000, required=False
        ),
        enableActingMaster=optional_bool(body, "enableActingMaster"),
    )


def queue_datas(body: Mapping[str, Any]) -> list[QueueData]:
    only(body, {"queueDatas"}, "body")
    items = body.get("queueDatas")
    if not isinstance(items, list) or not items:
        raise BadRequest("body.queueDatas must be a non-empty list")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, Mapping):
            only(item, QUEUE_DATA_FIELDS, f"body.queueDatas[{i}]")
            typed(item, QUEUE_DATA_TYPES, f"body.queueDatas[{i}]")
        out.append(QueueData.from_obj(item, f"body.queueDatas[{i}]"))
    return out


def kv_name(value: str, what: str) -> str:
    """A KV namespace or key to write over HTTP: :data:`KV_NAME`, not ``.`` or ``..``."""
    if not KV_NAME.fullmatch(value) or not value.strip("."):
        shown = value if len(value) <= 64 else f"{value[:64]}..."
        raise BadRequest(f"{what} {shown!r} is not a valid name: {KV_NAME_RULE}")
    return value
