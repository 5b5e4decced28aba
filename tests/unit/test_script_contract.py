"""Every script and its Python call object agree, read from the scripts themselves: the KEYS and
ARGV the object packs are those the header documents, in that order; the reply it decodes is the
table the header's ``Returns:`` names, and every table the script returns has that shape; the
statuses the Python enums name are exactly those the script returns.

The registration pair's ARGV layout is checked in test_registration_contract.py; its reply and
statuses are checked here too, so every call object is held against its script in one place."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest

from namesrv.store.keyspace import Keyspace
from namesrv.store.registration_args import (
    BodyFacts,
    RegisterBrokerArgs,
    RegisterStatus,
    RegisterTopicsArgs,
    TopicsStatus,
    TopicWrite,
)
from namesrv.store.script_args import (
    WORKER_FORGET_MS,
    WORKER_WINDOW_MS,
    CleanTopicsArgs,
    DeleteTopicArgs,
    ExpireArgs,
    FeedStatus,
    GetBrokersArgs,
    HeartbeatArgs,
    KeysStatus,
    KvDeleteArgs,
    KvPutArgs,
    KvPutStatus,
    NoteWorkerArgs,
    PermMode,
    ReadChangesArgs,
    RegisterTopicArgs,
    RouteInfoArgs,
    SetPermArgs,
    SetPermStatus,
    TopicsByClusterArgs,
    UnregisterArgs,
    UnregisterStatus,
    UpdateConfigArgs,
)
from namesrv.store.script_call import CallContext, ReplyShapeError

LUA = Path(__file__).resolve().parents[2] / "lua"
K = Keyspace("ns")
MAX_LEN, WORKER = "<maxLen>", "<worker>"
CTX = CallContext(K, MAX_LEN, WORKER)


def script(name: str) -> tuple[Path, str, str]:
    """(path, header, body) of lua/<name>-<keys>.lua."""
    (path,) = LUA.glob(f"{name}-*.lua")
    text = path.read_text()
    found = re.match(r"--\[\[(.*?)\]\]", text, re.S)
    assert found, path.name
    return path, found.group(1), text[found.end() :]


def argv_lines(header: str) -> dict[int, str]:
    """ARGV[n] -> the header's description of it (its first line)."""
    return {int(n): line for n, line in re.findall(r"^  ARGV\[(\d+)\]\s+(.*)$", header, re.M)}


def key_patterns(header: str) -> list[str]:
    return re.findall(r"^\s*KEYS\[\d+\]\s+(\S+)", header, re.M)


@dataclass(frozen=True)
class Case:
    """One script call: the object, how its argv is packed, and what the header says of each
    documented ARGV (a word its line holds, the value the object puts there)."""

    args: Any
    documented: list[tuple[str, Any]]
    variadic_keys: list[str]  # the keys after the fixed ones, in order
    variadic_argv: list[Any]  # the ARGV after the documented ones, in order


CASES = [
    Case(
        UnregisterArgs("C", "A:1", "B", 3, 42, "close"),
        [
            ("clusterName", "C"),
            ("brokerAddr", "A:1"),
            ("brokerName", "B"),
            ("brokerId", 3),
            ("epoch", 42),
            ("reason", "close"),
            ("change-log length", MAX_LEN),
            ("worker", WORKER),
            ("holder", ""),
            ("worker counts as running", WORKER_WINDOW_MS),
        ],
        [],
        [],
    ),
    Case(
        UnregisterArgs("C", "A:1", "B", 3, 42, "close", "w1#7"),
        [
            ("clusterName", "C"),
            ("brokerAddr", "A:1"),
            ("brokerName", "B"),
            ("brokerId", 3),
            ("epoch", 42),
            ("reason", "close"),
            ("change-log length", MAX_LEN),
            ("worker", WORKER),
            ("holder", "w1#7"),
            ("worker counts as running", WORKER_WINDOW_MS),
        ],
        [],
        [],
    ),
    Case(
        NoteWorkerArgs(True),
        [
            ("id of the worker", WORKER),
            ("'1' while it runs", "1"),
            ("forgotten", WORKER_FORGET_MS),
            ("counts as running", WORKER_WINDOW_MS),
            ("change-log length", MAX_LEN),
        ],
        [],
        [],
    ),
    Case(
        ExpireArgs(7),
        [("most brokers", 7), ("change-log", MAX_LEN), ("worker", WORKER)],
        [],
        [],
    ),
    Case(
        CleanTopicsArgs("B", ["T1", "T2"], True),
        [("brokerName", "B"), ("last chunk", "1"), ("change-log", MAX_LEN), ("number of topics", 2)],
        ["{ns}:topic:T1", "{ns}:topic:T2"],
        ["T1", "T2"],
    ),
    Case(
        HeartbeatArgs("C", "A:1", "322"),
        [("member", "C/A:1"), ("change-log", MAX_LEN), ("request code", "322"), ("worker", WORKER)],
        [],
        [],
    ),
    Case(
        SetPermArgs("B", ["T1"], PermMode.WIPE),
        [("brokerName", "B"), ("change-log", MAX_LEN), ('"wipe" or "add"', "wipe"), ("number of topics", 1)],
        ["{ns}:topic:T1"],
        ["T1"],
    ),
    Case(
        DeleteTopicArgs("T", "C", ["B1", "B2"]),
        [("topic", "T"), ("clusterName", "C"), ("change-log", MAX_LEN), ("number of broker names", 2)],
        ["{ns}:btopics:B1", "{ns}:btopics:B2"],
        ["B1", "B2"],
    ),
    Case(
        RegisterTopicArgs("T", [("B1", "{q1}", 0), ("B2", "{q2}", 1)]),
        [("topic", "T"), ("change-log", MAX_LEN), ("number of queues", 2)],
        ["{ns}:btopics:B1", "{ns}:btopics:B2"],
        ["B1", "{q1}", 0, "B2", "{q2}", 1],
    ),
    Case(
        KvPutArgs("NS", "key", "value", 1000, 2000),
        [
            ("namespace", "NS"),
            ("key", "key"),
            ("value", "value"),
            ("'1' when a value", "1"),
            ("change-log", MAX_LEN),
            ("kvNamespaceMaxBytes", 1000),
            ("kvMaxBytes", 2000),
        ],
        [],
        [],
    ),
    Case(
        KvDeleteArgs("NS", "key"),
        [("namespace", "NS"), ("key", "key"), ("change-log", MAX_LEN)],
        [],
        [],
    ),
    Case(
        UpdateConfigArgs({"a": "1", "b": "2"}, '{"a":"1","b":"2"}'),
        [("change-log", MAX_LEN), ("JSON object", '{"a":"1","b":"2"}')],
        [],
        ["a", "1", "b", "2"],
    ),
    Case(
        RouteInfoArgs("T", True),
        [("topic", "T"), ("orderTopicConf", "1"), ("caches the route", "1")],
        [],
        [],
    ),
    Case(
        RouteInfoArgs("T", False, for_cache=False),
        [("topic", "T"), ("orderTopicConf", "0"), ("caches the route", "0")],
        [],
        [],
    ),
    Case(GetBrokersArgs(["B1", "B2"]), [("'0' for only the broker names", "0")], [], ["B1", "B2"]),
    Case(
        TopicsByClusterArgs("C", ["B1"]),
        [("clusterName", "C"), ("number of broker names", 1)],
        ["{ns}:btopics:B1"],
        ["B1"],
    ),
    Case(
        ReadChangesArgs("inst", "fresh", "1-0", 500, 4096),
        [
            ("instance id the worker knows", "inst"),
            ("fresh random id", "fresh"),
            ("last entry", "1-0"),
            ("most entries", 500),
            ("most bytes", 4096),
        ],
        [],
        [],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.args.SCRIPT)
def test_arguments_object_packs_what_the_header_documents(case: Case) -> None:
    path, header, _ = script(case.args.SCRIPT)
    # KEYS: the fixed ones in the header's order (their patterns), then the variadic ones
    keys = case.args.keys(K)
    patterns = key_patterns(header)
    assert len(patterns) == int(path.stem.rsplit("-", 1)[1])
    assert len(keys) == len(patterns) + len(case.variadic_keys)
    for pattern, key in zip(patterns, keys, strict=False):
        assert key.startswith(pattern.split("<", 1)[0]), (pattern, key)
    assert keys[len(patterns) :] == case.variadic_keys
    if case.variadic_keys:
        assert "@keys-variadic" in header
    # ARGV: every documented one, in order, holds what the header says; then the variadic tail
    lines = argv_lines(header)
    assert sorted(lines) == list(range(1, len(case.documented) + 1))
    argv = case.args.argv(CTX)
    for i, (word, value) in enumerate(case.documented, start=1):
        assert word in lines[i], f"ARGV[{i}] is documented as {lines[i]!r}, expected {word!r}"
        assert argv[i - 1] == value, f"ARGV[{i}] ({lines[i]!r})"
    assert argv[len(case.documented) :] == case.variadic_argv


def test_every_script_but_the_registration_pair_has_an_arguments_object() -> None:
    covered = {case.args.SCRIPT for case in CASES} | {"registerBroker", "registerBrokerTopics"}
    assert covered == {p.name.rsplit("-", 1)[0] for p in LUA.glob("*.lua")}


CALLS = [case.args for case in CASES] + [
    RegisterBrokerArgs(
        "c", "a:1", "b", 0, "", None, 30000, None, "t", False, "h", BodyFacts("{}", 0, None, 2, "d", False)
    ),
    RegisterTopicsArgs("c", "a:1", "b", "t", True, 0, [TopicWrite("T", "{}")]),
]


def returns_names(header: str) -> list[str]:
    """The names of the table the header's ``Returns:`` line shows: ``{a, b, name...}``."""
    found = re.search(r"Returns:\s*\{([^}]*)\}", header)
    assert found, "no Returns: {...} table in the header"
    return [name.strip() for name in found.group(1).split(",")]


def returned_tables(body: str) -> list[list[str]]:
    """Every literal table after a ``return`` in the script, split at its top-level commas."""
    tables = []
    for match in re.finditer(r"\breturn\s*\{", body):
        depth, start, parts = 1, match.end(), []
        i = start
        while depth:
            ch = body[i]
            if ch in "'\"":  # a string literal: its brackets and commas are text
                i = body.index(ch, i + 1)
            elif ch in "{(":
                depth += 1
            elif ch in "})":
                depth -= 1
            elif ch == "," and depth == 1:
                parts.append(body[start:i].strip())
                start = i + 1
            i += 1
        parts.append(body[start : i - 1].strip())
        tables.append([p for p in parts if p])
    return tables


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.SCRIPT)
def test_the_reply_decoded_is_the_table_the_header_documents(call: Any) -> None:
    _, header, body = script(call.SCRIPT)
    assert list(call.REPLY) == returns_names(header)
    variadic = call.REPLY[-1].endswith("...")
    fixed = len(call.REPLY) - variadic
    for table in returned_tables(body):
        if variadic:
            assert len(table) >= 1, (call.SCRIPT, table)
        else:
            assert len(table) == fixed, (call.SCRIPT, table)
    # a table of another length is refused, never read past
    with pytest.raises(ReplyShapeError):
        call.decode(["1"] * (fixed - 1) if fixed > 1 else "1")
    if not variadic:
        with pytest.raises(ReplyShapeError):
            call.decode(["1"] * (fixed + 1))


def test_optional_arguments_pack_as_the_headers_say() -> None:
    # '' for "none" in unregisterBroker ARGV[5], deleteTopic ARGV[2], kvPut ARGV[3]
    assert UnregisterArgs("C", "A:1", "B", 0, None, "unregister").argv(CTX)[4] == ""
    assert DeleteTopicArgs("T", None, []).argv(CTX)[1] == ""
    assert KvPutArgs("NS", "k", None, 1, 1).argv(CTX)[2:4] == ["", "0"]
    assert GetBrokersArgs(None).argv(CTX) == ["1"]
    assert RouteInfoArgs("T", False).argv(CTX)[1] == "0"
    assert CleanTopicsArgs("B", [], False).argv(CTX)[1] == "0"


# A status is the first element of the table a script returns (readChanges: the second, after the
# instance). These find every literal status in a script's body.
FIRST = re.compile(r"(?:return|=)\s*\{\s*(-?\d+)\s*[,}]")
AFTER_INSTANCE = re.compile(r"return\s*\{\s*instance\s*,\s*(-?\d+)\s*,")


STATUS_CASES = [
    (RegisterStatus, ["registerBroker"], FIRST),
    (TopicsStatus, ["registerBrokerTopics"], FIRST),
    (UnregisterStatus, ["unregisterBroker"], FIRST),
    (KeysStatus, ["deleteTopic", "getTopicsByCluster"], FIRST),
    (SetPermStatus, ["setWritePerm"], FIRST),
    (KvPutStatus, ["kvPut"], FIRST),  # its other answer is {count}, not a literal
    (FeedStatus, ["readChanges"], AFTER_INSTANCE),
]


@pytest.mark.parametrize(
    ("enum", "scripts", "pattern"), [pytest.param(*case, id=case[0].__name__) for case in STATUS_CASES]
)
def test_the_statuses_python_names_are_exactly_those_the_script_returns(
    enum: type[IntEnum], scripts: list[str], pattern: re.Pattern[str]
) -> None:
    for name in scripts:
        _, header, body = script(name)
        returned = {int(v) for v in pattern.findall(body)}
        assert returned == {int(s) for s in enum}, name
        for status in enum:  # and the header says what each means
            assert re.search(rf"(?<![\d-]){status.value}\b", header.split("Returns", 1)[1]), (name, status)


def test_set_write_perm_knows_exactly_the_modes_python_sends() -> None:
    _, header, body = script("setWritePerm")
    assert set(re.findall(r"mode == '(\w+)'", body)) == {str(m) for m in PermMode}
    for mode in PermMode:
        assert f'"{mode}"' in argv_lines(header)[3]
