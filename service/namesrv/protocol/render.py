"""The domain model as RocketMQ writes it: plain structures for :mod:`namesrv.protocol.fastjson`.

The model (:mod:`namesrv.domain.model`) knows no wire format; this is where its values become
the objects fastjson would serialize: bean properties by name (the renderer sorts them, which is
fastjson's alphabetical bean order), Java ``Map<Integer|Long, …>`` as :class:`IntKeyDict` so the
DEFAULT dialect writes their keys bare, and ``None`` for the nulls fastjson leaves out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec.structs import replace

from namesrv.domain.model import BrokerData, ClusterInfo, DataVersion, QueueData, TopicRouteData
from namesrv.protocol.fastjson import Dialect, IntKeyDict, dumps, quote


def data_version_obj(version: DataVersion) -> dict[str, Any]:
    return {"counter": version.counter, "stateVersion": version.stateVersion, "timestamp": version.timestamp}


def data_version_json(version: DataVersion) -> str:
    """A QUERY_DATA_VERSION body (DEFAULT dialect)."""
    return dumps(data_version_obj(version))


def queue_data_json(queue: QueueData) -> str:
    """The canonical (fastjson DEFAULT dialect) text stored in Redis, whose layout the Lua
    scripts read; written directly because registrations render thousands of these."""
    return (
        f'{{"brokerName":{quote(queue.brokerName)},"perm":{queue.perm},"readQueueNums":'
        f'{queue.readQueueNums},"topicSysFlag":{queue.topicSysFlag},"writeQueueNums":'
        f"{queue.writeQueueNums}}}"
    )


def queue_data_obj(queue: QueueData) -> dict[str, Any]:
    return {
        "brokerName": queue.brokerName,
        "perm": queue.perm,
        "readQueueNums": queue.readQueueNums,
        "topicSysFlag": queue.topicSysFlag,
        "writeQueueNums": queue.writeQueueNums,
    }


def broker_data_obj(broker: BrokerData) -> dict[str, Any]:
    return {
        "brokerAddrs": IntKeyDict(broker.brokerAddrs),
        "brokerName": broker.brokerName,
        "cluster": broker.cluster,
        "enableActingMaster": broker.enableActingMaster,
        "zoneName": broker.zoneName,
    }


def mapping_info_obj(info: Mapping[str, Any]) -> Mapping[str, Any]:
    """A TopicQueueMappingInfo: its ``currIdMap`` is a Java ``Map<Integer, Integer>``."""
    ids = info.get("currIdMap")
    if isinstance(ids, dict) and not isinstance(ids, IntKeyDict):
        return {**info, "currIdMap": IntKeyDict(ids)}
    return info


def route_obj(route: TopicRouteData) -> dict[str, Any]:
    mappings = route.topicQueueMappingByBroker
    return {
        "brokerDatas": [broker_data_obj(b) for b in route.brokerDatas],
        "filterServerTable": {k: list(v) for k, v in route.filterServerTable.items()},
        "orderTopicConf": route.orderTopicConf,
        "queueDatas": [queue_data_obj(q) for q in route.queueDatas],
        "topicQueueMappingByBroker": (
            None if mappings is None else {k: mapping_info_obj(v) for k, v in mappings.items()}
        ),
    }


def route_json(route: TopicRouteData, dialect: Dialect) -> str:
    """A GET_ROUTEINFO_BY_TOPIC body in ``dialect``."""
    return dumps(route_obj(route), dialect)


BROKERS_AT = '"brokerDatas":['
QUEUES_AT = '"queueDatas":['


def route_json_pieces(route: TopicRouteData, dialect: Dialect) -> tuple[str, list[str], str, list[str], str]:
    """:func:`route_json` in pieces: ``head``, one text per BrokerData, ``middle``, one per QueueData,
    ``tail``; ``head + ",".join(brokers) + middle + ",".join(queues) + tail`` is the body. A
    broker's or a queue's text is the same in every route that shows it, so a cache of many routes
    can keep each text once (the RIP-29 shape: 10,000 routes of the same 100 groups)."""
    bare = dumps(route_obj(replace(route, brokerDatas=(), queueDatas=())), dialect)
    # The first key of the object, and the first after two that hold no quoted '"' unescaped
    # (filter server addresses, orderTopicConf): neither text can occur earlier.
    b = bare.index(BROKERS_AT) + len(BROKERS_AT)
    q = bare.index(QUEUES_AT, b) + len(QUEUES_AT)
    return (
        bare[:b],
        [broker_data_text(x, dialect) for x in route.brokerDatas],
        bare[b:q],
        [queue_data_text(x, dialect) for x in route.queueDatas],
        bare[q:],
    )


# Routes read from Redis share their parsed QueueData and BrokerData objects
# (namesrv.domain.routes.parse_queue_data), and a worker without the route cache renders the same
# 100 of them for every lookup at the RIP-29 shape: rendering them was most of its CPU per lookup.
# Keys hold no object the cyclic GC tracks (the dialect as a bool), so the kept texts add nothing
# to a full collection.
_TEXTS_MAX = 8192
_queue_texts: dict[tuple[QueueData, bool], str] = {}
# (id, dialect) -> (the BrokerData, its text): a BrokerData holds a dict, so it is not hashable;
# keeping the object keeps its id from naming another meanwhile.
_broker_texts: dict[tuple[int, bool], tuple[BrokerData, str]] = {}


def queue_data_text(queue: QueueData, dialect: Dialect) -> str:
    key = (queue, dialect is Dialect.STANDARD)
    text = _queue_texts.get(key)
    if text is None:
        text = dumps(queue_data_obj(queue), dialect)
        if len(_queue_texts) >= _TEXTS_MAX:
            _queue_texts.clear()
        _queue_texts[key] = text
    return text


def broker_data_text(broker: BrokerData, dialect: Dialect) -> str:
    key = (id(broker), dialect is Dialect.STANDARD)
    kept = _broker_texts.get(key)
    if kept is not None and kept[0] is broker:
        return kept[1]
    text = dumps(broker_data_obj(broker), dialect)
    if len(_broker_texts) >= _TEXTS_MAX:
        _broker_texts.clear()
    _broker_texts[key] = (broker, text)
    return text


def cluster_info_obj(info: ClusterInfo) -> dict[str, Any]:
    return {
        "brokerAddrTable": {k: broker_data_obj(v) for k, v in info.brokerAddrTable.items()},
        "clusterAddrTable": {k: list(v) for k, v in info.clusterAddrTable.items()},
    }
