"""The topic writes a registration sends: built once per topic, the change log's texts joined in
one piece when a chunk's topics share a QueueData, and the plain-name test that lets the script
skip escaping, against the character classes JSON escapes."""

from __future__ import annotations

import re

import orjson

from namesrv.domain.model import TopicConfig
from namesrv.registry.registration import QueueWrites
from namesrv.store.keyspace import Keyspace
from namesrv.store.registration_args import RegisterTopicsArgs, TopicWrite, TopicWrites, json_plain
from namesrv.store.script_call import CallContext

# what needs escaping in a JSON string (and '/', which the Java side escapes too)
ESCAPED = re.compile(r'[\x00-\x1f"\\/\x7f-\U0010ffff]')


def test_plain_is_exactly_no_character_that_json_escapes() -> None:
    for code in [*range(0x3000), 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF]:
        char = chr(code)
        for text in (char, f"topic{char}", f"{char}-a"):
            assert json_plain(text) is (ESCAPED.search(text) is None), (hex(code), text)
    assert json_plain("")
    assert json_plain("TopicA_%|-9 x")


def _chunk(writes: list[TopicWrite] | TopicWrites) -> RegisterTopicsArgs:
    return RegisterTopicsArgs("c", "a:1", "b", "tok", False, 0, writes)


def test_one_shape_joins_every_name_against_queue_zero() -> None:
    writes = QueueWrites("broker-a").writes([TopicConfig(f"t{i}", 8, 8, 6) for i in range(3)])
    upserted, queues = _chunk(writes)._upserted_json()
    assert upserted == '[["t0",0],["t1",0],["t2",0]]'
    assert orjson.loads(queues) == [
        {"brokerName": "broker-a", "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8}
    ]


def test_several_shapes_are_numbered_in_order_of_first_use() -> None:
    configs = [
        TopicConfig("a", 8, 8, 6),
        TopicConfig("b", 1, 1, 6),
        TopicConfig("c", 8, 8, 6),
        TopicConfig("d", 4, 4, 2, topicSysFlag=1),
    ]
    writes = QueueWrites("broker-a").writes(configs)
    assert [w.sys_flag for w in writes] == [0, 0, 0, 1]
    assert writes[0].queue_data_json is writes[2].queue_data_json  # rendered once per shape
    upserted, queues = _chunk(writes)._upserted_json()
    assert upserted == '[["a",0],["b",1],["c",0],["d",2]]'
    assert [(q["readQueueNums"], q["perm"], q["topicSysFlag"]) for q in orjson.loads(queues)] == [
        (8, 6, 0),
        (1, 6, 0),
        (4, 2, 1),
    ]


def test_writes_are_topic_writes() -> None:
    (write,) = QueueWrites("b").writes([TopicConfig("t", 2, 3, 4, topicSysFlag=5)])
    assert isinstance(write, TopicWrite)
    assert write == TopicWrite(
        "t", '{"brokerName":"b","perm":4,"readQueueNums":2,"topicSysFlag":5,"writeQueueNums":3}', 5
    )
    assert (write.topic, write.sys_flag) == ("t", 5)


def test_writes_are_columns_that_slice_extend_and_read_as_rows() -> None:
    rows = [TopicWrite("a", "{1}", 0), TopicWrite("b", "{2}", 1), TopicWrite("c", "{1}", 0)]
    columns = TopicWrites.of(rows)
    assert (columns.topics, columns.queues, columns.flags) == (
        ["a", "b", "c"],
        ["{1}", "{2}", "{1}"],
        [0, 1, 0],
    )
    assert list(columns) == rows and len(columns) == 3 and columns[-1] == rows[2]
    head, tail = columns.slice(0, 2), columns.slice(2, 3)
    assert list(head) == rows[:2] and list(columns.slice(3, 3)) == []
    head.extend(tail)
    assert head == columns
    # a call built from rows holds columns: the same keys and arguments as one built from columns
    ctx = CallContext(Keyspace("ns"), "100", "w1")
    by_rows, by_columns = _chunk(rows), RegisterTopicsArgs("c", "a:1", "b", "tok", False, 0, columns)
    assert by_rows.columns == columns
    assert (by_rows.keys(ctx.keyspace), by_rows.argv(ctx)) == (
        by_columns.keys(ctx.keyspace),
        by_columns.argv(ctx),
    )
    assert by_rows.argv(ctx)[11] == '{"b":1}'  # the non-zero topicSysFlags
