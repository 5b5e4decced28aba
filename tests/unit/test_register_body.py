"""REGISTER_BROKER bodies (§1.10): the three formats, Java's defaults, and what fails."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import orjson
import pytest

from namesrv.domain.model import DataVersion, TopicConfig, TopicConfigWrapper
from namesrv.protocol.register_body import (
    DEFAULT_MAX_INFLATED,
    BodyDecodeError,
    BodyTooLarge,
    crc32_masked,
    crc32_matches,
    decode_register_body,
)
from namesrv.protocol.remoting import decode_frame
from tests.unit import golden

NOW = 1_800_000_000_000
TOPIC_TEST = TopicConfig("TopicTest", readQueueNums=8, writeQueueNums=8, perm=6, topicFilterType="SINGLE_TAG")
APPENDIX_BODY = golden.REGISTER_BODY_TEMPLATE.replace("<now>", "1795316422299").encode()


def decode(
    body: bytes | None, version: int = 479, compressed: bool = False
) -> tuple[TopicConfigWrapper, Any]:
    return decode_register_body(body, version=version, compressed=compressed, now_ms=NOW)


def json_body(**wrapper: Any) -> bytes:
    return orjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": wrapper})


# ---- CRC ---------------------------------------------------------------------------------------


def test_crc32_masked() -> None:
    assert crc32_masked(b"123456789") == 0xCBF43926 & 0x7FFFFFFF == 1274296614
    assert crc32_masked(None) == 0
    assert crc32_masked(b"") == 0
    assert crc32_masked(APPENDIX_BODY) == zlib.crc32(APPENDIX_BODY) & 0x7FFFFFFF


def test_crc32_is_only_checked_when_the_header_has_one() -> None:
    assert crc32_matches(None, b"anything")
    assert crc32_matches(0, b"anything")
    assert crc32_matches(1274296614, b"123456789")
    assert not crc32_matches(12345, b"123456789")
    # The raw CRC 0xCBF43926 as a signed int32 (what ali-ons sends) never equals a masked CRC.
    assert not crc32_matches(struct.unpack(">i", struct.pack(">I", 0xCBF43926))[0], b"123456789")


# ---- JSON RegisterBrokerBody (version >= 37) ---------------------------------------------------


def test_appendix_a_register_broker_body() -> None:
    wrapper, filters = decode(APPENDIX_BODY)
    assert wrapper == TopicConfigWrapper({"TopicTest": TOPIC_TEST}, DataVersion(5, 0, 1700000000000))
    assert filters == ()


def topic_json(
    name: str, read: int, write: int, perm: int, sys_flag: int = 0, **extra: Any
) -> dict[str, Any]:
    """A TopicConfig as a 5.x broker writes it."""
    return {
        "attributes": {},
        "order": False,
        "perm": perm,
        "readQueueNums": read,
        "topicFilterType": "SINGLE_TAG",
        "topicName": name,
        "topicSysFlag": sys_flag,
        "writeQueueNums": write,
        **extra,
    }


def test_appendix_a_main_scenario_body_with_unit_flags() -> None:
    body = json_body(
        dataVersion={"counter": 3, "stateVersion": 0, "timestamp": 1700000000000},
        mappingDataVersion={"counter": 0, "stateVersion": 0, "timestamp": 1795316422299},
        topicConfigTable={
            "UnitBoth": topic_json("UnitBoth", 4, 4, 6, sys_flag=3),
            "TBW102": topic_json("TBW102", 8, 8, 7, order=True, topicFilterType="MULTI_TAG"),
        },
        topicQueueMappingDetailMap={},
        topicQueueMappingInfoMap={},
    )
    wrapper, _ = decode(body)
    assert wrapper.topicConfigTable == {
        "UnitBoth": TopicConfig("UnitBoth", 4, 4, 6, "SINGLE_TAG", topicSysFlag=3),
        "TBW102": TopicConfig("TBW102", 8, 8, 7, "MULTI_TAG", order=True),
    }
    assert wrapper.dataVersion == DataVersion(3, 0, 1700000000000)


def test_ali_ons_body_without_state_version() -> None:
    body = decode_frame(golden.ALI_ONS_REGISTER_BROKER_FRAME).body
    wrapper, filters = decode(body, version=121)
    assert wrapper == TopicConfigWrapper(
        {"TopicTest": TopicConfig("TopicTest", 4, 4, 6, "SINGLE_TAG")}, DataVersion(1, 0, 1795316215518)
    )
    assert filters == ()


def test_static_topic_mapping_with_bare_integer_keys() -> None:
    body = (
        b'{"filterServerList":["10.0.0.1:1"],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,'
        b'"stateVersion":2,"timestamp":3},"topicConfigTable":{},"topicQueueMappingDetailMap":{"T":'
        b'{"hostedQueues":{0:[{"bname":"b"}]}}},"topicQueueMappingInfoMap":{"T":{"bname":"broker-a",'
        b'"currIdMap":{0:0,1:1},"dirty":false,"epoch":1700000000000,"scope":"__global__","topic":"T",'
        b'"totalQueues":8}}}}'
    )
    wrapper, filters = decode(body)
    assert wrapper.topicQueueMappingInfoMap == {
        "T": {
            "bname": "broker-a",
            "currIdMap": {"0": 0, "1": 1},
            "dirty": False,
            "epoch": 1700000000000,
            "scope": "__global__",
            "topic": "T",
            "totalQueues": 8,
        }
    }
    assert wrapper.dataVersion == DataVersion(1, 2, 3)
    assert filters == ("10.0.0.1:1",)


def test_map_key_is_kept_and_topic_name_falls_back_to_it() -> None:
    wrapper, _ = decode(
        json_body(topicConfigTable={"Key": {"topicName": "Named", "perm": 6}, "NoName": {"readQueueNums": 2}})
    )
    assert wrapper.topicConfigTable["Key"].topicName == "Named"
    assert wrapper.topicConfigTable["NoName"] == TopicConfig("NoName", readQueueNums=2)


def test_unknown_fields_are_ignored_and_java_defaults_apply() -> None:
    body = orjson.dumps(
        {
            "brandNew": {"x": [1, 2]},
            "topicConfigSerializeWrapper": {
                "dataVersion": {"counter": 9, "extra": True},  # no timestamp: Java's is "now"
                "topicConfigTable": {
                    "T": {"topicName": "T", "future": 1, "attributes": {"+a": 5, "b": True}}
                },
            },
        }
    )
    wrapper, filters = decode(body)
    assert wrapper.dataVersion == DataVersion(9, 0, NOW)
    assert wrapper.topicConfigTable["T"] == TopicConfig("T", attributes={"+a": "5", "b": "true"})
    assert filters == ()  # absent: the field's initial empty list


def test_fastjson_reads_enums_from_ordinals_and_numbers_from_strings() -> None:
    table = {"T": {"topicFilterType": 1, "readQueueNums": "4", "order": "true"}}
    wrapper, _ = decode(json_body(topicConfigTable=table))
    assert wrapper.topicConfigTable["T"] == TopicConfig(
        "T", readQueueNums=4, topicFilterType="MULTI_TAG", order=True
    )


def test_nulls() -> None:
    wrapper, filters = decode(b'{"filterServerList":null,"topicConfigSerializeWrapper":null}')
    assert wrapper == TopicConfigWrapper({}, DataVersion(0, 0, NOW))
    assert filters is None
    wrapper, _ = decode(
        json_body(dataVersion=None, topicConfigTable={"gone": None}, topicQueueMappingInfoMap=None)
    )
    assert wrapper == TopicConfigWrapper({}, DataVersion(0, 0, NOW))


def test_filter_server_values_are_java_strings() -> None:
    _, filters = decode(b'{"filterServerList":["a:1",2,null,true]}')
    assert filters == ("a:1", "2", "true")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[]", "must be a JSON object"),
        (b"null", "must be a JSON object"),
        (b"{", "invalid JSON"),
        (b'{"topicConfigSerializeWrapper":[]}', "topicConfigSerializeWrapper must be a JSON object"),
        (json_body(topicConfigTable=[]), "topicConfigTable must be a JSON object"),
        (json_body(topicConfigTable={"T": "x"}), "must be a JSON object, got a string"),
        (json_body(topicConfigTable={"T": {"perm": "rw"}}), "perm must be an integer"),
        (json_body(topicConfigTable={"T": {"perm": "²"}}), r"topicConfigTable\['T'\]: invalid literal"),
        (json_body(topicConfigTable={"T": {"readQueueNums": -1}}), "out of range"),
        (json_body(topicConfigTable={"T": {"topicName": 5}}), "topicName must be a string"),
        (json_body(topicConfigTable={"T": {"attributes": [1]}}), "attributes must be a JSON object"),
        (json_body(dataVersion="v1"), "dataVersion must be a JSON object"),
        (json_body(dataVersion={"counter": "many"}), "counter must be an integer"),
        (json_body(topicQueueMappingInfoMap={"T": 1}), "must be a JSON object"),
        (json_body(topicQueueMappingInfoMap=[]), "must be a JSON object"),
        (b'{"filterServerList":"a:1"}', "filterServerList must be a JSON array"),
        (b'{"filterServerList":{"a":1}}', "filterServerList must be a JSON array"),
        (b'{"filterServerList":["\xff"]}', "UTF-8"),
    ],
    ids=lambda v: v[:50] if isinstance(v, str) else None,
)
def test_wrong_types_are_body_decode_errors(body: bytes, message: str) -> None:
    with pytest.raises(BodyDecodeError, match=message):
        decode(body)


def test_deep_nesting_is_refused_not_recursed() -> None:
    deep = b'{"x":' * 40 + b"1" + b"}" * 40
    with pytest.raises(BodyDecodeError, match="nested deeper"):
        decode(b'{"topicConfigSerializeWrapper":{"topicQueueMappingInfoMap":{"T":' + deep + b"}}}")
    with pytest.raises(BodyDecodeError):
        decode(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(BodyDecodeError):
        decode(b'{"filterServerList":[' + b"[" * 1000 + b"]" * 1000 + b"]}")


# ---- Old format (version < 37) -----------------------------------------------------------------


def test_old_version_reads_a_topic_config_serialize_wrapper() -> None:
    body = orjson.dumps(
        {
            "dataVersion": {"counter": 2, "stateVersion": 0, "timestamp": 5},
            "topicConfigTable": {
                "TopicTest": {"topicName": "TopicTest", "readQueueNums": 8, "writeQueueNums": 8}
            },
            "topicQueueMappingInfoMap": {"T": {"bname": "b"}},  # not a field of that class
        }
    )
    wrapper, filters = decode(body, version=36)
    assert wrapper == TopicConfigWrapper({"TopicTest": TOPIC_TEST}, DataVersion(2, 0, 5))
    assert filters is None


def test_old_version_reading_a_register_broker_body_gets_nothing_and_now() -> None:
    # RequestProcessorTest.testProcessRequest_RegisterBroker relies on exactly this.
    wrapper, filters = decode(APPENDIX_BODY, version=0)
    assert wrapper == TopicConfigWrapper({}, DataVersion(counter=0, stateVersion=0, timestamp=NOW))
    assert filters is None


def test_old_version_ignores_the_compressed_flag() -> None:
    wrapper, _ = decode(orjson.dumps({"topicConfigTable": {}}), version=0, compressed=True)
    assert wrapper == TopicConfigWrapper({}, DataVersion(0, 0, NOW))


@pytest.mark.parametrize(("version", "filters"), [(0, None), (36, None), (37, ()), (479, ())])
@pytest.mark.parametrize("body", [None, b""])
def test_no_body(version: int, filters: Any, body: bytes | None) -> None:
    for compressed in (False, True):
        assert decode(body, version=version, compressed=compressed) == (
            TopicConfigWrapper({}, DataVersion(0, 0, 0)),
            filters,
        )


# ---- Compressed format --------------------------------------------------------------------------


def test_appendix_a_compressed_body_inflates_to_the_documented_bytes() -> None:
    inflated = zlib.decompress(golden.COMPRESSED_REGISTER_BODY)
    assert inflated == golden.COMPRESSED_REGISTER_BODY_INFLATED
    assert inflated[4:60] == b'{"counter":5,"stateVersion":0,"timestamp":1700000000000}'
    assert b"TopicTest 8 8 6 SINGLE_TAG {}" in inflated


@pytest.mark.parametrize("version", [409, 413, 479, 612, 1000])
def test_appendix_a_compressed_body_decodes(version: int) -> None:
    wrapper, filters = decode(golden.COMPRESSED_REGISTER_BODY, version=version, compressed=True)
    assert wrapper == TopicConfigWrapper({"TopicTest": TOPIC_TEST}, DataVersion(5, 0, 1700000000000))
    assert filters == ()


def block(data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return struct.pack(">i", len(raw)) + raw


def compressed(
    topics: list[str],
    *,
    data_version: str = '{"counter":7,"stateVersion":1,"timestamp":2}',
    filters: str = "[]",
    mappings: list[str] | None = None,
    tail: bytes = b"",
) -> bytes:
    inflated = block(data_version) + struct.pack(">i", len(topics)) + b"".join(block(t) for t in topics)
    inflated += block(filters)
    if mappings is not None:
        inflated += struct.pack(">i", len(mappings)) + b"".join(block(m) for m in mappings)
    return zlib.compress(inflated + tail, 9)


def test_compressed_topics_lose_sys_flag_and_order() -> None:
    body = compressed(
        ["UnitTopic 4 4 6 SINGLE_TAG {}", 'Ordered 2 3 7 MULTI_TAG {"k":"v"}', "Bare 1 1 6 SINGLE_TAG"]
    )
    wrapper, _ = decode(body, version=409, compressed=True)
    assert wrapper.topicConfigTable == {
        "UnitTopic": TopicConfig("UnitTopic", 4, 4, 6, "SINGLE_TAG", topicSysFlag=0, order=False),
        "Ordered": TopicConfig("Ordered", 2, 3, 7, "MULTI_TAG", attributes={"k": "v"}),
        "Bare": TopicConfig("Bare", 1, 1, 6, "SINGLE_TAG"),
    }
    assert wrapper.dataVersion == DataVersion(7, 1, 2)


def test_compressed_mapping_section_only_from_5_0_0() -> None:
    info = '{"bname":"broker-a","currIdMap":{0:0},"dirty":false,"epoch":1,"topic":"S","totalQueues":1}'
    body = compressed(["S 1 1 6 SINGLE_TAG {}"], mappings=[info])
    wrapper, _ = decode(body, version=413, compressed=True)
    assert wrapper.topicQueueMappingInfoMap == {
        "S": {
            "bname": "broker-a",
            "currIdMap": {"0": 0},
            "dirty": False,
            "epoch": 1,
            "topic": "S",
            "totalQueues": 1,
        }
    }
    wrapper, _ = decode(body, version=409, compressed=True)
    assert wrapper.topicQueueMappingInfoMap == {}
    # A 5.x body must carry the section: without it the read runs off the end.
    with pytest.raises(BodyDecodeError, match="mapping count"):
        decode(compressed(["S 1 1 6 SINGLE_TAG {}"]), version=413, compressed=True)


def test_compressed_quirks_java_tolerates() -> None:
    body = compressed(
        [
            'Spaced 1 1 6 SINGLE_TAG {"k": "v"}',  # attributes split by the space: ignored
            "Trailing 1 1 6 SINGLE_TAG   ",  # String.split drops trailing empty strings
            "Garbled 1 1 6 SINGLE_TAG {oops",  # unparsable attributes: ignored
        ],
        filters="not json",  # Java logs it and keeps an empty list
        tail=b"trailing bytes nobody reads",
    )
    wrapper, filters = decode(body, version=409, compressed=True)
    assert [(t.topicName, dict(t.attributes)) for t in wrapper.topicConfigTable.values()] == [
        ("Spaced", {}),
        ("Trailing", {}),
        ("Garbled", {}),
    ]
    assert filters == ()
    _, filters = decode(compressed([], filters="null"), version=409, compressed=True)
    assert filters is None
    _, filters = decode(compressed([], filters='["x:1"]'), version=409, compressed=True)
    assert filters == ("x:1",)


def test_negative_topic_count_reads_no_topics_like_javas_loop() -> None:
    inflated = block('{"counter":1}') + struct.pack(">i", -5) + block("[]")
    wrapper, _ = decode(zlib.compress(inflated), version=409, compressed=True)
    assert wrapper == TopicConfigWrapper({}, DataVersion(1, 0, NOW))


def test_truncated_zlib_stream_is_fine_while_the_data_is_complete() -> None:
    body = compressed(["T 1 1 6 SINGLE_TAG {}"])
    wrapper, _ = decode(body[:-4], version=409, compressed=True)  # adler32 cut off
    assert list(wrapper.topicConfigTable) == ["T"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not zlib at all", "not a valid zlib stream"),
        (zlib.compress(b""), "ends before the length of dataVersion"),
        (zlib.compress(struct.pack(">i", -1)), "negative length"),
        (zlib.compress(struct.pack(">i", 1000) + b"{}"), "ends inside dataVersion"),
        (zlib.compress(block("[1]")), "dataVersion must be a JSON object"),
        (zlib.compress(block("null")), "dataVersion must be a JSON object"),
        (zlib.compress(block("{}") + struct.pack(">i", 3) + block("T 1 1 6 SINGLE_TAG")), "topic config #1"),
        (compressed(["T 1 1 6"]), "fewer than 5"),
        (compressed(["T 1 1 6 "]), "fewer than 5"),  # the trailing empty field does not count
        (compressed(["T x 1 6 SINGLE_TAG"]), "must be integers"),
        (compressed(["T 1 1 6 NO_TAG"]), "unknown topicFilterType"),
        (compressed([" 1 1 6 SINGLE_TAG"]), "must not be empty"),
        (compressed(["T 1 1 6 SINGLE_TAG"])[:12], "ends"),
        (compressed([], mappings=['{"bname":"b"}']), "has no topic"),
        (compressed([], mappings=["[]"]), "must be a JSON object"),
        (zlib.compress(block("{}") + struct.pack(">i", 1) + block(b"\xff 1 1 6 SINGLE_TAG")), "UTF-8"),
        (zlib.compress(block(b'{"counter":"\xff"}')), "UTF-8"),
    ],
    ids=lambda v: v[:40] if isinstance(v, str) else None,
)
def test_broken_compressed_bodies(body: bytes, message: str) -> None:
    with pytest.raises(BodyDecodeError, match=message):
        decode(body, version=479, compressed=True)


def test_zip_bomb_is_refused_quickly_without_inflating_it_all() -> None:
    packer, megabyte = zlib.compressobj(9), b"0" * (1 << 20)
    bomb = packer.compress(struct.pack(">i", DEFAULT_MAX_INFLATED + 1))
    bomb += b"".join(packer.compress(megabyte) for _ in range(DEFAULT_MAX_INFLATED // len(megabyte) + 1))
    bomb += packer.flush()
    assert len(bomb) < 100_000
    with pytest.raises(BodyTooLarge, match="would inflate to more than"):
        decode(bomb, version=479, compressed=True)


def test_a_large_body_within_the_cap_decodes() -> None:
    topics = [f"Topic{i:05d} 8 8 6 SINGLE_TAG {{}}" for i in range(5000)]
    wrapper, _ = decode(compressed(topics), version=409, compressed=True)
    assert len(wrapper.topicConfigTable) == 5000
