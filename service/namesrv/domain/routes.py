"""Pure route assembly: RouteInfoManager's presentation rules, no I/O.

``assemble`` turns a store snapshot into :class:`TopicRouteData` and applies acting-master
presentation (rule P7); ``filter_by_zone`` is ``ZoneRouteRPCHook``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import orjson

from namesrv.domain.codes import PERM_WRITE, SYNC_BROKER_MEMBER_GROUP_PREFIX
from namesrv.domain.model import BrokerData, QueueData, TopicRouteData


# Stored QueueData and BrokerData texts repeat across topics (a broker's queues usually look
# alike, and its BrokerData is the same in every topic), and the parsed objects are immutable:
# sharing them keeps a cache of many routes to a few objects per route, which is what Python's
# cyclic GC walks on every full collection (a pause of the whole event loop).
@lru_cache(maxsize=16384)
def parse_queue_data(text: str) -> QueueData:
    obj = orjson.loads(text)
    return QueueData(
        obj["brokerName"], obj["perm"], obj["readQueueNums"], obj["topicSysFlag"], obj["writeQueueNums"]
    )


@lru_cache(maxsize=4096)
def parse_broker_data(text: str) -> BrokerData:
    return BrokerData.from_store(orjson.loads(text))


def mapping_info(text: str) -> dict[str, Any]:
    """A stored TopicQueueMappingInfo, with ``currIdMap`` back to a Java Integer-keyed map (JSON
    made its keys strings; :func:`namesrv.protocol.render.mapping_info_obj` writes them bare)."""
    obj: dict[str, Any] = orjson.loads(text)
    ids = obj.get("currIdMap")
    if isinstance(ids, dict):
        obj["currIdMap"] = {int(k): v for k, v in ids.items()}
    return obj


def acting_master_view(
    topic: str, queue_datas: Sequence[QueueData], broker_datas: Sequence[BrokerData]
) -> tuple[BrokerData, ...]:
    """P7: when a master is gone, present the lowest slave as id 0 for brokers with
    enableActingMaster whose (first) queue lost its write bit."""
    if topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX) or not queue_datas or not broker_datas:
        return tuple(broker_datas)
    if not any(b.brokerAddrs and 0 not in b.brokerAddrs for b in broker_datas):
        return tuple(broker_datas)
    out: list[BrokerData] = []
    for bd in broker_datas:
        if bd.brokerAddrs and 0 not in bd.brokerAddrs and bd.enableActingMaster:
            first = next((q for q in queue_datas if q.brokerName == bd.brokerName), None)
            if first is not None and not first.perm & PERM_WRITE:
                addrs = dict(bd.brokerAddrs)
                lowest = min(addrs)
                addrs[0] = addrs.pop(lowest)
                bd = BrokerData(bd.cluster, bd.brokerName, addrs, bd.zoneName, bd.enableActingMaster)
        out.append(bd)
    return tuple(out)


def assemble(
    topic: str,
    queue_datas: Sequence[str],
    broker_datas: Sequence[str],
    filters: Mapping[str, str],
    mappings: Mapping[str, str],
    order_topic_conf: str | None,
    *,
    support_acting_master: bool,
) -> TopicRouteData:
    qds = sorted((parse_queue_data(q) for q in queue_datas), key=lambda q: q.brokerName)
    bds = sorted((parse_broker_data(b) for b in broker_datas), key=lambda b: b.brokerName)
    view = acting_master_view(topic, qds, bds) if support_acting_master else tuple(bds)
    filter_table = {addr: tuple(orjson.loads(servers)) for addr, servers in filters.items()}
    mapping = {name: mapping_info(text) for name, text in mappings.items()} or None
    return TopicRouteData(tuple(qds), view, filter_table, order_topic_conf, mapping)


def filter_by_zone(route: TopicRouteData, zone: str) -> TopicRouteData:
    """``ZoneRouteRPCHook``: keep brokers of the zone, and brokers without a master (so clients
    can still consume from a slave); drop the others' queues and filter servers."""
    kept: list[BrokerData] = []
    removed_addrs: set[str] = set()
    removed_names: set[str] = set()
    wanted = zone.lower()
    for bd in route.brokerDatas:
        if 0 not in bd.brokerAddrs or (bd.zoneName or "").lower() == wanted:
            kept.append(bd)
        else:
            removed_names.add(bd.brokerName)
            removed_addrs.update(bd.brokerAddrs.values())
    return TopicRouteData(
        queueDatas=tuple(q for q in route.queueDatas if q.brokerName not in removed_names),
        brokerDatas=tuple(kept),
        filterServerTable={a: s for a, s in route.filterServerTable.items() if a not in removed_addrs},
        orderTopicConf=route.orderTopicConf,
        topicQueueMappingByBroker=route.topicQueueMappingByBroker,
    )
