"""Stored route parts are parsed once and shared between routes (they are immutable)."""

from __future__ import annotations

import gc

import orjson

from namesrv.domain import routes
from namesrv.domain.model import BrokerData, QueueData


def test_equal_texts_give_the_same_immutable_objects() -> None:
    queue = orjson.dumps(
        {"brokerName": "b", "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8}
    ).decode()
    addrs = {"0": "10.0.0.1:10911"}
    broker = orjson.dumps({"cluster": "C", "brokerName": "b", "brokerAddrs": addrs}).decode()
    q1, q2 = routes.parse_queue_data(queue), routes.parse_queue_data("".join(queue))
    assert q1 == QueueData("b", 6, 8, 0, 8) and q1 is q2
    b1, b2 = routes.parse_broker_data(broker), routes.parse_broker_data(broker[:-1] + "}")
    assert b1 == BrokerData("C", "b", {0: "10.0.0.1:10911"}) and b1 is b2


def test_many_routes_over_the_same_brokers_add_few_objects_for_the_gc() -> None:
    queue = '{"brokerName":"b","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}'
    broker = '{"cluster":"C","brokerName":"b","brokerAddrs":{"0":"10.0.0.1:10911"}}'
    gc.collect()
    before = len(gc.get_objects())
    kept = [
        routes.assemble(f"T{i}", [queue], [broker], {}, {}, None, support_acting_master=False)
        for i in range(1000)
    ]
    gc.collect()
    # per route: the TopicRouteData and its two tuples; never a QueueData or BrokerData of its own
    assert len(gc.get_objects()) - before <= 3 * len(kept) + 50
