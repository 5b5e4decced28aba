"""fastjson's two dialects: Appendix A's stand-alone encodings and fastjson 1.2.83's string escaping."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from namesrv.domain.model import BrokerData, QueueData, TopicRouteData
from namesrv.protocol import render
from namesrv.protocol.fastjson import Dialect, IntKeyDict, RawJson, ascii_escape, dumps, quote
from namesrv.protocol.lenient_json import loads
from namesrv.protocol.render import route_json
from tests.unit import golden

MAPPING_INFO = {
    "bname": "broker-a",
    "currIdMap": IntKeyDict({0: 0}),
    "dirty": False,
    "epoch": 1700000000000,
    "scope": "__global__",
    "topic": "TopicTest",
    "totalQueues": 8,
}
ROUTE = TopicRouteData(
    queueDatas=(QueueData("broker-a", perm=6, readQueueNums=8, topicSysFlag=0, writeQueueNums=8),),
    brokerDatas=(
        BrokerData(
            "DefaultCluster",
            "broker-a",
            {1: "127.0.0.1:10921", 0: "127.0.0.1:10911"},
            zoneName="zone-é",
        ),
    ),
    orderTopicConf="broker-a:8",
    topicQueueMappingByBroker={"broker-a": MAPPING_INFO},
)


def test_route_in_the_default_dialect() -> None:
    assert route_json(ROUTE, Dialect.DEFAULT) == golden.ROUTE_DEFAULT_DIALECT
    assert '"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}' in golden.ROUTE_DEFAULT_DIALECT


def test_route_in_the_standard_dialect() -> None:
    assert route_json(ROUTE, Dialect.STANDARD) == golden.ROUTE_STANDARD_DIALECT
    assert '"zoneName":"zone-\\u00E9"' in golden.ROUTE_STANDARD_DIALECT


def test_route_with_the_mapping_the_domain_reads_from_the_store() -> None:
    """domain.routes gives ``currIdMap`` int keys in a plain dict: rendering makes it Java's map."""
    plain = replace(ROUTE, topicQueueMappingByBroker={"broker-a": {**MAPPING_INFO, "currIdMap": {0: 0}}})
    assert route_json(plain, Dialect.DEFAULT) == golden.ROUTE_DEFAULT_DIALECT
    assert route_json(plain, Dialect.STANDARD) == golden.ROUTE_STANDARD_DIALECT


def test_route_from_plain_dicts() -> None:
    route = {
        "brokerDatas": [
            {
                "brokerAddrs": IntKeyDict({0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}),
                "brokerName": "broker-a",
                "cluster": "DefaultCluster",
                "enableActingMaster": False,
                "zoneName": "zone-é",
            }
        ],
        "filterServerTable": {},
        "orderTopicConf": "broker-a:8",
        "queueDatas": [RawJson(render.queue_data_json(QueueData("broker-a", 6, 8, 0, 8)))],
        "topicQueueMappingByBroker": {"broker-a": MAPPING_INFO},
    }
    assert dumps(route) == golden.ROUTE_DEFAULT_DIALECT
    assert dumps(route, Dialect.STANDARD) == golden.ROUTE_STANDARD_DIALECT


def test_default_dialect_parses_back_with_the_lenient_parser() -> None:
    parsed = loads(golden.ROUTE_DEFAULT_DIALECT)
    assert parsed == orjson.loads(golden.ROUTE_STANDARD_DIALECT)
    assert parsed["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}


# fastjson 1.2.83 SerializeWriter.writeStringWithDoubleQuote: DEFAULT escapes the C0 controls,
# '"', '\\', DEL..U+009F and U+2028/U+2029; STANDARD (BrowserCompatible) escapes '/' and
# everything from DEL up, astral characters as surrogate pairs; hex digits are upper case.
@pytest.mark.parametrize(
    ("text", "default", "standard"),
    [
        ("plain", '"plain"', '"plain"'),
        ('a"b\\c', '"a\\"b\\\\c"', '"a\\"b\\\\c"'),
        ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"', '"\\b\\f\\n\\r\\t"'),
        ("\x00\x07\x0b\x1f", '"\\u0000\\u0007\\u000B\\u001F"', '"\\u0000\\u0007\\u000B\\u001F"'),
        ("a/b", '"a/b"', '"a\\/b"'),
        ("\x7f\x80\x9f", '"\\u007F\\u0080\\u009F"', '"\\u007F\\u0080\\u009F"'),
        ("\xa0é", '"\xa0é"', '"\\u00A0\\u00E9"'),
        ("\u2028\u2029", '"\\u2028\\u2029"', '"\\u2028\\u2029"'),
        ("中文", '"中文"', '"\\u4E2D\\u6587"'),
        ("😀", '"😀"', '"\\uD83D\\uDE00"'),
    ],
)
def test_string_escaping(text: str, default: str, standard: str) -> None:
    assert quote(text) == default
    assert quote(text, Dialect.STANDARD) == standard
    assert orjson.loads(default) == orjson.loads(standard) == text


def test_raw_json_in_standard_gets_standard_escapes() -> None:
    raw = RawJson(dumps({"a": "x/é\u2028"}))
    assert dumps([raw]) == '[{"a":"x/é\\u2028"}]'
    assert dumps([raw], Dialect.STANDARD) == '[{"a":"x\\/\\u00E9\\u2028"}]'
    assert ascii_escape('"/"') == '"\\/"'


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_standard_rendering_of_default_text_equals_rendering_in_standard(text: str) -> None:
    # RawJson relies on this: DEFAULT text made ASCII-safe is exactly what STANDARD writes.
    assert ascii_escape(quote(text)) == quote(text, Dialect.STANDARD)
    assert orjson.loads(quote(text)) == orjson.loads(quote(text, Dialect.STANDARD)) == text


def test_long_numbers_in_standard_are_strings() -> None:
    assert dumps({"a": 2**53}, Dialect.STANDARD) == '{"a":"9007199254740992"}'
    assert dumps({"a": 2**53 - 1}, Dialect.STANDARD) == '{"a":9007199254740991}'
    assert dumps({"a": 2**53}) == '{"a":9007199254740992}'
