"""The registration scripts and their Python arguments objects agree: KEYS and ARGV counts, in the
order the headers document, and every status the scripts return has an enum member."""

from __future__ import annotations

import re
from pathlib import Path

from namesrv.store.keyspace import Keyspace
from namesrv.store.registration_args import (
    BodyFacts,
    RegisterBrokerArgs,
    RegisterStatus,
    RegisterTopicsArgs,
    TopicsStatus,
    TopicWrite,
    WriteMode,
)
from namesrv.store.script_call import CallContext

LUA = Path(__file__).resolve().parents[2] / "lua"
CTX = CallContext(Keyspace("ns"), "100", "w")


def header(name: str) -> str:
    (path,) = LUA.glob(f"{name}-*.lua")
    found = re.match(r"--\[\[(.*?)\]\]", path.read_text(), re.S)
    assert found
    return found.group(1)


def fixed_argv(text: str) -> list[int]:
    return [int(i) for i in re.findall(r"^  ARGV\[(\d+)\] ", text, re.M)]


def key_names(text: str) -> list[str]:
    return re.findall(r"^\s*KEYS\[\d+\]\s+(\S+)", text, re.M)


def test_register_broker_args_match_the_header() -> None:
    text = header("registerBroker")
    args = RegisterBrokerArgs(
        "c",
        "a:1",
        "b",
        0,
        "a:2",
        None,
        30000,
        None,
        "tok",
        False,
        "h",
        BodyFacts("{}", 0, None, 2, "d", False),
    )
    keys = args.keys(Keyspace("ns"))
    assert len(keys) == len(key_names(text)) == 17
    assert fixed_argv(text) == list(range(1, len(args.argv(CTX)) + 1))
    # the header names each key's pattern; the object fills the same ones, in that order
    for pattern, key in zip(key_names(text), keys, strict=True):
        assert key.startswith(pattern.split("<", 1)[0])
    for status in RegisterStatus:
        assert re.search(rf"status {status.value}\b|{status.value} [a-z]", text), status
    for mode in WriteMode:
        assert f"{mode.value} " in text.split("mode", 1)[1]


def test_register_topics_args_match_the_header() -> None:
    text = header("registerBrokerTopics")
    chunk = RegisterTopicsArgs(
        "c", "a:1", "b", "tok", True, 0, [TopicWrite("T", "{}")], ["R"], {"M": "{}"}, "base"
    )
    keys = chunk.keys(Keyspace("ns"))
    fixed = key_names(text)
    assert len(fixed) == 10
    assert keys[len(fixed) :] == ["{ns}:topic:T", "{ns}:topic:R", "{ns}:mapping:M"]
    for pattern, key in zip(fixed, keys, strict=False):
        assert key.startswith(pattern.split("<", 1)[0])
    argv = chunk.argv(CTX)
    documented = fixed_argv(text)
    assert documented == list(range(1, len(documented) + 1))
    assert argv[len(documented) :] == ["{}", "R", "M", "{}"]
    assert argv[11:13] == ["{}", "1"]  # no topic flags, plain names
    # the change log's upserted and queueDatas texts, for when all are written
    assert argv[13:15] == ['[["T",0]]', "[{}]"]
    assert keys[len(fixed)][argv[10] :] == "T"  # the topic is its key after the prefix
    assert argv[4:7] == [1, 1, 1]  # U, R, M
    for status in TopicsStatus:
        assert re.search(rf"(status |; ){status.value} ", text) or f"\n    {status.value} " in text, status


def test_register_topics_sends_no_upserted_text_for_names_that_need_escaping() -> None:
    # the script builds that text itself then, with cjson's escaping
    writes = [TopicWrite("a/b", "{}"), TopicWrite("T", "{}")]
    argv = RegisterTopicsArgs("c", "a:1", "b", "tok", True, 0, writes).argv(CTX)
    assert argv[12:15] == ["0", "", ""]
    empty = RegisterTopicsArgs("c", "a:1", "b", "tok", True, 0, [])
    assert empty.argv(CTX)[12:15] == ["1", "", ""]


def test_register_topics_lists_each_distinct_queue_data_once() -> None:
    qd8 = '{"brokerName":"b","perm":6,"readQueueNums":8}'
    qd16 = '{"brokerName":"b","perm":6,"readQueueNums":16}'
    writes = [TopicWrite("T1", qd8), TopicWrite("T2", qd16), TopicWrite("T3", qd8)]
    argv = RegisterTopicsArgs("c", "a:1", "b", "tok", True, 0, writes).argv(CTX)
    assert argv[13] == '[["T1",0],["T2",1],["T3",0]]'
    assert argv[14] == f"[{qd8},{qd16}]"
