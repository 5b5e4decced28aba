"""The typed one-pass decoder of JSON REGISTER_BROKER bodies must accept exactly what the careful
decoder accepts, and build the same values; whatever it is unsure of goes to the careful one."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from namesrv.protocol.register_body import BodyDecodeError
from namesrv.protocol.register_body_json import decode_json, decode_json_carefully
from namesrv.protocol.register_body_typed import decode_well_formed

NOW = 1_700_000_000_000
BIG = "__BIG__"  # written as an integer beyond 64 bits, which orjson cannot produce
INT_EDGES = [0, 1, 8, 16, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63, 1.0, 8.5, "8", True, None]
NAMES = [
    "T",
    "TopicTest",
    "",
    "a" * 127,
    "a" * 128,
    "a" * 300,
    "tab\there",
    "nul\x00",
    "日本",
    "%RETRY%g",
    7,
    None,
]

values = st.sampled_from(INT_EDGES)
topic_config = st.fixed_dictionaries(
    {},
    optional={
        "topicName": st.sampled_from(NAMES),
        "readQueueNums": values,
        "writeQueueNums": values,
        "perm": values,
        "topicSysFlag": values,
        "topicFilterType": st.sampled_from(["SINGLE_TAG", "MULTI_TAG", 0, 1, 5, None, ""]),
        "order": st.sampled_from([False, True, 0, "true", None]),
        "attributes": st.sampled_from([{}, {"+a": "1"}, {"a": 1}, {"a": None}, None, [], "x"]),
        "unknownField": st.sampled_from([1, "x", [1, {"a": [BIG]}], None]),
    },
)
table = st.dictionaries(
    st.sampled_from(["T", "TopicTest", "X", "%DLQ%g"]), st.one_of(st.none(), topic_config)
)
data_version = st.sampled_from(
    [None, {"counter": 3, "stateVersion": 1, "timestamp": 5}, {"counter": "x"}, {"counter": 1}, [], 7]
)
wrapper = st.fixed_dictionaries(
    {},
    optional={
        "topicConfigTable": st.one_of(table, st.sampled_from([None, [], "x"])),
        "dataVersion": data_version,
        "topicQueueMappingInfoMap": st.sampled_from(
            [None, {}, {"T": {"bname": "b", "epoch": 1}}, {"T": 3}, []]
        ),
    },
)
body = st.fixed_dictionaries(
    {},
    optional={
        "topicConfigSerializeWrapper": st.one_of(wrapper, st.sampled_from([None, [], 3])),
        "filterServerList": st.sampled_from([[], ["127.0.0.1:40002"], [None, "a"], [3], None, {}, "x"]),
    },
)


def outcome(decode: Any, data: bytes) -> Any:
    try:
        return decode(data, now_ms=NOW)
    except BodyDecodeError as exc:
        return ("refused", str(exc))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body)
def test_typed_and_careful_decoders_agree(obj: dict[str, Any]) -> None:
    data = orjson.dumps(obj).replace(f'"{BIG}"'.encode(), str(2**70).encode())
    assert outcome(decode_json, data) == outcome(decode_json_carefully, data)


def test_a_broker_body_takes_the_typed_pass() -> None:
    data = orjson.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": {
                    "T": {
                        "topicName": "T",
                        "readQueueNums": 8,
                        "writeQueueNums": 8,
                        "perm": 6,
                        "order": False,
                    }
                },
                "dataVersion": {"counter": 2, "stateVersion": 0, "timestamp": 9},
            },
            "filterServerList": [],
        }
    )
    typed = decode_well_formed(data)
    assert typed is not None
    assert list(typed.topic_config_table) == ["T"]
    assert typed.data_version == {"counter": 2, "stateVersion": 0, "timestamp": 9}
    assert (typed.filter_servers, typed.has_filter_servers) == ([], True)


@pytest.mark.parametrize(
    "data",
    [
        b'{topicConfigSerializeWrapper:{"topicConfigTable":{}}}',  # fastjson's bare keys
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"readQueueNums":8}}}}',  # no name
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","perm":2147483648}}}}',
        b'{"topicConfigSerializeWrapper":' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
)
def test_anything_unusual_goes_to_the_careful_decoder(data: bytes) -> None:
    assert decode_well_formed(data) is None
