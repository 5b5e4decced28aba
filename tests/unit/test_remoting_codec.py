"""The remoting codec against Java's exact bytes: §1.7 examples, Appendix A headers, real clients."""

from __future__ import annotations

import dataclasses
import struct
import zlib
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from namesrv.domain.codes import LANGUAGES, ResponseCode, topic_not_exist_remark
from namesrv.protocol.headers import get_bool, get_int, get_long, get_str
from namesrv.protocol.json_header import decode_json_header as full_json_decode
from namesrv.protocol.register_body import crc32_masked, crc32_matches
from namesrv.protocol.remoting import (
    DEFAULT_MAX_FRAME,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    FrameDecoder,
    FrameError,
    JsonHeaderMemo,
    RemotingCommand,
    SuccessFrame,
    decode_frame,
    encode,
    response_to,
)
from tests.unit import golden


def json_frame(header: str | bytes, body: bytes = b"", serialize_type: int = SERIALIZE_JSON) -> bytes:
    raw = header.encode() if isinstance(header, str) else header
    return struct.pack(">iI", 4 + len(raw) + len(body), (serialize_type << 24) | len(raw)) + raw + body


def header_text(frame: bytes) -> str:
    (header_length,) = struct.unpack_from(">I", frame, 4)
    return frame[8 : 8 + (header_length & 0xFFFFFF)].decode()


def decode_header(header: str | bytes) -> RemotingCommand:
    return decode_frame(json_frame(header))


GET_ROUTE = RemotingCommand(code=105, opaque=1, version=479, ext_fields={"topic": "TopicTest"})


# ---- §1.7 worked examples, byte for byte -----------------------------------------------------

EXAMPLE_A = bytes.fromhex(
    "00000087"
    "00000083"
    "7b22636f6465223a3130352c226578744669656c6473223a7b22746f706963223a22546f70696354657374227d2c22666c6167223a302c"
    "226c616e6775616765223a224a415641222c226f7061717565223a312c2273657269616c697a655479706543757272656e74525043223a"
    "224a534f4e222c2276657273696f6e223a3437397d"
)
EXAMPLE_B = bytes.fromhex(
    "0000002d0100002900690001df000000010000000000000000000000140005746f70696300000009546f70696354657374"
)


def test_example_a_json_request_encodes_byte_for_byte() -> None:
    assert encode(GET_ROUTE) == EXAMPLE_A
    assert len(EXAMPLE_A) == 139
    assert header_text(EXAMPLE_A) == (
        '{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":1,'
        '"serializeTypeCurrentRPC":"JSON","version":479}'
    )


def test_example_a_decodes() -> None:
    assert decode_frame(EXAMPLE_A) == GET_ROUTE


def test_example_b_rocketmq_header_encodes_byte_for_byte() -> None:
    assert encode(GET_ROUTE, serialize_type=SERIALIZE_ROCKETMQ) == EXAMPLE_B


def test_example_b_decodes() -> None:
    cmd = decode_frame(EXAMPLE_B)
    assert cmd == RemotingCommand(
        code=105,
        opaque=1,
        version=479,
        language="JAVA",
        ext_fields={"topic": "TopicTest"},
        serialize_type=SERIALIZE_ROCKETMQ,
    )
    assert cmd.remark is None and cmd.body is None


def test_example_c_topic_not_exist_reply() -> None:
    request = RemotingCommand(code=105, opaque=100, version=479, ext_fields={"topic": "TopicTest"})
    reply = response_to(request, ResponseCode.TOPIC_NOT_EXIST, remark=topic_not_exist_remark("TopicTest"))
    frame = encode(reply)
    assert frame[:8] == bytes.fromhex("000000fb000000f7")
    assert header_text(frame) == (
        '{"code":17,"flag":1,"language":"JAVA","opaque":100,"remark":"No topic route info in name server '
        "for the topic: TopicTest\\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further "
        'details.","serializeTypeCurrentRPC":"JSON","version":479}'
    )
    assert b"\x5c\x6e" in frame and b"\n" not in frame  # the newline travels as the escape \n


def test_example_d_get_kv_config_found_reply() -> None:
    request = decode_header(golden.REQUEST_HEADERS[4])
    reply = response_to(request, ResponseCode.SUCCESS, ext_fields={"value": "broker-a:8"})
    assert header_text(encode(reply)) == (
        '{"code":0,"extFields":{"value":"broker-a:8"},"flag":1,"language":"JAVA","opaque":104,'
        '"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    assert decode_frame(encode(reply)).body is None


def test_example_e_oneway_request() -> None:
    text = '{"code":904,"flag":2,"language":"JAVA","opaque":11,"serializeTypeCurrentRPC":"JSON","version":0}'
    cmd = decode_header(text)
    assert cmd.is_oneway and not cmd.is_response
    assert cmd.flag == FLAG_ONEWAY and cmd.ext_fields is None
    assert header_text(encode(RemotingCommand(code=904, opaque=11, flag=FLAG_ONEWAY))) == text


# ---- Appendix A: every request header decodes and re-encodes to the same bytes ------------------


@pytest.mark.parametrize("header", golden.REQUEST_HEADERS, ids=lambda h: h[:40])
def test_java_request_headers_decode_exactly(header: str) -> None:
    expected = orjson.loads(header)
    cmd = decode_header(header)
    assert cmd.code == expected["code"]
    assert cmd.opaque == expected["opaque"]
    assert cmd.flag == expected["flag"]
    assert cmd.version == expected["version"]
    assert cmd.language == "JAVA"
    assert cmd.remark is None
    assert cmd.ext_fields == expected.get("extFields")
    assert cmd.body is None and cmd.serialize_type == SERIALIZE_JSON


@pytest.mark.parametrize("header", golden.REQUEST_HEADERS + golden.RESPONSE_HEADERS, ids=lambda h: h[:40])
def test_java_headers_reencode_to_the_same_bytes(header: str) -> None:
    # extFields keep their order (Java's is its HashMap's), so Java's own text comes back.
    frame = json_frame(header)
    assert encode(decode_frame(frame)) == frame


def reply(opaque: int, code: int, **kwargs: Any) -> str:
    request = RemotingCommand(code=0, opaque=opaque)
    return header_text(encode(response_to(request, code, **kwargs)))


JAVA_REPLIES = [
    (reply(100, 17, remark=topic_not_exist_remark("TopicTest")), 0),
    (reply(141, 17, remark=topic_not_exist_remark("NewTopic")), 0),
    (reply(101, 0, ext_fields={}), 0),
    (reply(102, 0), 0),
    (reply(103, 1, remark="namespace or key is null"), 0),
    (reply(104, 0, ext_fields={"value": "broker-a:8"}), 0),
    (reply(105, 22, ext_fields={}, remark="No config item, Namespace: ORDER_TOPIC_CONFIG Key: Nope"), 0),
    (reply(107, 22, remark="No config item, Namespace: NoSuchNs"), 0),
    (reply(109, 1, ext_fields={}, remark="register broker failed"), 0),
    (reply(110, 0, ext_fields={"haServerAddr": "127.0.0.1:10912", "masterAddr": "127.0.0.1:10911"}), 0),
    (reply(112, 1, ext_fields={}, remark="crc32 not match"), 0),
    (reply(120, 0, ext_fields={"changed": "false"}), 0),
    (reply(121, 0, ext_fields={"changed": "true"}), 0),
    (reply(125, 0, remark="not set any response code"), 0),
    (reply(134, 0, ext_fields={"wipeTopicCount": "5"}), 0),
    (reply(136, 0, ext_fields={"addTopicCount": "5"}), 0),
    (reply(145, 1, remark="disable"), 0),
    (reply(146, 16, remark="Can not update config in black list."), 0),
    (reply(149, 3, remark=" request type 99999 not supported"), 0),
]


@pytest.mark.parametrize("text", [text for text, _ in JAVA_REPLIES], ids=lambda t: t[:48])
def test_replies_we_build_are_javas_text(text: str) -> None:
    assert text in golden.RESPONSE_HEADERS


def test_reply_defaults() -> None:
    request = RemotingCommand(code=105, opaque=77, flag=0, language="CPP", version=63)
    reply = response_to(request, 0, body=b"{}")
    assert (reply.opaque, reply.flag, reply.language, reply.version) == (77, FLAG_RESPONSE, "JAVA", 479)
    assert reply.is_response and not reply.is_oneway
    assert reply.ext_fields is None and reply.remark is None and reply.body == b"{}"
    assert response_to(request, 0, version=401).version == 401


def test_reply_body_follows_the_header() -> None:
    frame = encode(response_to(RemotingCommand(code=206, opaque=127), 0, body=b'{"topicList":[]}'))
    (total, type_and_length) = struct.unpack_from(">iI", frame)
    assert total == len(frame) - 4
    assert frame[8 + type_and_length :] == b'{"topicList":[]}'
    assert decode_frame(frame).body == b'{"topicList":[]}'


# ---- Lenient JSON header decoding (Appendix A "JSON header decode", feasibility §1.4) -----------


def test_numbers_and_booleans_in_ext_fields_become_java_text() -> None:
    cmd = decode_header(
        '{"code":105,"extFields":{"topic":"T","n":5,"b":true},"flag":0,"language":"PYTHON",'
        '"opaque":42,"serializeTypeCurrentRPC":"JSON","version":401}'
    )
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque) == (105, "PYTHON", 401, 42)
    assert cmd.ext_fields == {"topic": "T", "n": "5", "b": "true"}


def test_unknown_language_is_none() -> None:
    assert decode_header('{"code":105,"language":"NOPE"}').language is None


@pytest.mark.parametrize(
    ("value", "language"),
    [
        ('"JAVA"', "JAVA"),
        ('"NODE_JS"', "NODE_JS"),
        ('"java"', None),
        ("3", "PYTHON"),
        ("14", None),
        ("null", None),
    ],
)
def test_language_by_name_or_ordinal(value: str, language: str | None) -> None:
    assert decode_header(f'{{"code":1,"language":{value}}}').language == language


def test_missing_numbers_are_zero_and_unknown_keys_ignored() -> None:
    cmd = decode_header('{"whatever":[1,{"x":null}],"serializeTypeCurrentRPC":"ROCKETMQ"}')
    assert cmd == RemotingCommand(code=0, opaque=0, flag=0, language=None, version=0)
    assert cmd.serialize_type == SERIALIZE_JSON  # taken from the type byte, not the text


def test_null_ext_values_are_dropped_and_null_ext_fields_is_none() -> None:
    assert decode_header('{"code":1,"extFields":{"a":null,"b":"x"}}').ext_fields == {"b": "x"}
    assert decode_header('{"code":1,"extFields":null}').ext_fields is None
    assert decode_header('{"code":1,"extFields":{}}').ext_fields == {}


@pytest.mark.parametrize(
    ("literal", "text"),
    [
        ("false", "false"),
        ("-254075693", "-254075693"),
        ("123456789012345678901234567890", "123456789012345678901234567890"),  # beyond 64 bits
        ("1.5", "1.5"),
        ("1.50", "1.50"),  # BigDecimal keeps the scale
        ("1e3", "1E+3"),
        ("0.0000001", "1E-7"),
        ("-0.0", "0.0"),
        ('{"x":[1,true]}', '{"x":[1,true]}'),  # objects and arrays as compact JSON text
        ("[]", "[]"),
    ],
)
def test_ext_values_are_rendered_like_fastjson_string_codec(literal: str, text: str) -> None:
    assert decode_header(f'{{"code":1,"extFields":{{"v":{literal},"s":"x"}}}}').ext_fields == {
        "v": text,
        "s": "x",
    }


def test_quoted_numbers_and_odd_remarks() -> None:
    cmd = decode_header('{"code":"105","opaque":"-7","remark":5}')
    assert (cmd.code, cmd.opaque, cmd.remark) == (105, -7, "5")
    assert decode_header('{"code":1,"remark":""}').remark == ""  # JSON keeps the empty string


def test_trailing_whitespace_after_the_header_is_fine() -> None:
    assert decode_header('{"code":105}\n').code == 105
    assert decode_header(' \t{"code":105} \r\n').code == 105


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"[1,2]",
        b'"text"',
        b"null",
        b'{"code":105} trailing',
        b'{"code":105',
        b'{"code":"abc"}',
        b'{"code":2147483648}',
        b'{"code":1.5}',
        b'{"code":true}',
        b'{"opaque":[1]}',
        b'{"extFields":"topic=T"}',
        b'{"extFields":[["topic","T"]]}',
        b'{"remark":"\xff\xfe"}',
        b"\xef\xbb\xbf{}",
        b"[" * 2000 + b"]" * 2000,
        b'{"extFields":{"a":' + b"[" * 300 + b"]" * 300 + b"}}",
    ],
    ids=repr,
)
def test_undecodable_json_headers_are_frame_errors(header: bytes) -> None:
    with pytest.raises(FrameError):
        decode_frame(json_frame(header))


# ---- Frames captured from real clients (feasibility §1.5) ---------------------------------------


def test_ali_ons_get_route_frame() -> None:
    cmd = decode_frame(golden.ALI_ONS_GET_ROUTE_FRAME)
    assert cmd == RemotingCommand(
        code=105, opaque=1, flag=0, language="JAVA", version=121, ext_fields={"topic": "TopicTest"}
    )


def test_cpp_client_frame_with_trailing_newline_and_empty_remark() -> None:
    frame = golden.CPP_GET_ROUTE_FRAME
    assert frame[-1:] == b"\n" and len(frame) == 4 + 193
    cmd = decode_frame(frame)
    assert cmd == RemotingCommand(
        code=105,
        opaque=0,
        flag=0,
        language="CPP",
        version=63,
        remark="",
        ext_fields={
            "AccessKey": "",
            "OnsChannel": "ALIYUN",
            "Signature": "N/YT7X6tJe5UfutmW+uNwTTJ7Fc=",
            "topic": "TopicTest",
        },
    )
    assert get_str(cmd.ext_fields, "topic") == "TopicTest"


def test_ali_ons_register_broker_frame_numbers_booleans_and_negative_crc() -> None:
    cmd = decode_frame(golden.ALI_ONS_REGISTER_BROKER_FRAME)
    assert (cmd.code, cmd.opaque, cmd.language, cmd.version) == (103, 1, "JAVA", 121)
    assert cmd.ext_fields == {
        "brokerName": "broker-a",
        "brokerAddr": "127.0.0.1:10911",
        "clusterName": "DefaultCluster",
        "haServerAddr": "127.0.0.1:10912",
        "brokerId": "0",
        "compressed": "false",
        "bodyCrc32": "-254075693",
    }
    assert cmd.body is not None and len(cmd.body) == 532 - 4 - 252
    assert cmd.body.startswith(b'{"topicConfigSerializeWrapper":') and cmd.body.endswith(
        b'"filterServerList":[]}'
    )
    ext = cmd.ext_fields
    assert get_long(ext, "brokerId") == 0
    assert get_bool(ext, "compressed") is False
    crc = get_int(ext, "bodyCrc32")
    assert crc == -254075693
    # ali-ons sent zlib.crc32(body) as a signed int32. Java compares the Integer with the CRC
    # masked to 31 bits, which is never negative: a Java NameServer answers "crc32 not match".
    assert struct.unpack(">i", struct.pack(">I", zlib.crc32(cmd.body)))[0] == crc
    assert crc32_masked(cmd.body) == zlib.crc32(cmd.body) & 0x7FFFFFFF == crc & 0x7FFFFFFF
    assert crc32_matches(crc, cmd.body) is False
    assert crc32_matches(crc32_masked(cmd.body), cmd.body) is True


# ---- ROCKETMQ binary header ---------------------------------------------------------------------


def binary_header(
    code: int = 105,
    language: int = 0,
    version: int = 479,
    opaque: int = 1,
    flag: int = 0,
    remark: bytes | None = None,
    ext: bytes | None = None,
    remark_length: int | None = None,
    ext_length: int | None = None,
) -> bytes:
    remark = remark or b""
    ext = ext or b""
    return (
        struct.pack(
            ">hbhiii",
            code,
            language,
            version,
            opaque,
            flag,
            len(remark) if remark_length is None else remark_length,
        )
        + remark
        + struct.pack(">i", len(ext) if ext_length is None else ext_length)
        + ext
    )


def entry(key: bytes, value: bytes, key_length: int | None = None, value_length: int | None = None) -> bytes:
    return (
        struct.pack(">h", len(key) if key_length is None else key_length)
        + key
        + struct.pack(">i", len(value) if value_length is None else value_length)
        + value
    )


def binary_frame(header: bytes, body: bytes = b"") -> bytes:
    return json_frame(header, body, SERIALIZE_ROCKETMQ)


def test_binary_header_with_remark_body_and_signed_fields() -> None:
    header = binary_header(
        code=-1, language=3, version=-2, opaque=-3, flag=1, remark="né".encode(), ext=entry(b"k", b"v")
    )
    cmd = decode_frame(binary_frame(header, b"BODY"))
    assert cmd == RemotingCommand(
        code=-1,
        language="PYTHON",
        version=-2,
        opaque=-3,
        flag=1,
        remark="né",
        ext_fields={"k": "v"},
        body=b"BODY",
        serialize_type=SERIALIZE_ROCKETMQ,
    )


def test_binary_zero_lengths_are_null() -> None:
    ext = entry(b"empty", b"") + entry(b"", b"orphan") + entry(b"k", b"v")
    cmd = decode_frame(binary_frame(binary_header(ext=ext)))
    assert cmd.remark is None
    assert cmd.ext_fields == {"k": "v"}
    assert decode_frame(binary_frame(binary_header())).ext_fields is None
    # Java skips the map when the section length is not positive
    assert decode_frame(binary_frame(binary_header(ext_length=-5))).ext_fields is None


def test_binary_unknown_language_byte_is_none() -> None:
    assert decode_frame(binary_frame(binary_header(language=14))).language is None
    assert decode_frame(binary_frame(binary_header(language=-1))).language is None


def test_binary_empty_strings_encode_as_null() -> None:
    cmd = RemotingCommand(code=1, remark="", ext_fields={"a": "", "b": "x"})
    assert decode_frame(encode(cmd, serialize_type=SERIALIZE_ROCKETMQ)).remark is None
    assert decode_frame(encode(cmd, serialize_type=SERIALIZE_ROCKETMQ)).ext_fields == {"b": "x"}
    empty = RemotingCommand(code=1, ext_fields={})
    assert decode_frame(encode(empty, serialize_type=SERIALIZE_ROCKETMQ)).ext_fields is None


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"\x00" * 20,  # one byte short of the fixed part
        binary_header(remark=b"abc", remark_length=4),  # remark overruns the header
        binary_header(remark_length=-1),
        binary_header(ext=entry(b"k", b"v"), ext_length=100),  # section overruns the header
        binary_header(ext=entry(b"key", b"v", key_length=10)),  # key overruns the section
        binary_header(ext=entry(b"k", b"value", value_length=6)),  # value overruns the section
        binary_header(ext=entry(b"k", b"v", key_length=-1)),
        binary_header(ext=entry(b"k", b"v", value_length=-2)),
        binary_header(ext=entry(b"k", b"v") + b"\x00"),  # a stray byte: no room for a key length
        binary_header(ext=entry(b"k", b"v") + b"\x00\x01k"),  # no room for the value length
        binary_header(remark=b"\xff"),
        binary_header(ext=entry(b"\xc3", b"v")),
    ],
    ids=lambda h: h.hex()[:60],
)
def test_malformed_binary_headers_are_frame_errors(header: bytes) -> None:
    with pytest.raises(FrameError):
        decode_frame(binary_frame(header))


def test_binary_trailing_header_bytes_are_ignored_like_java() -> None:
    assert decode_frame(binary_frame(binary_header() + b"junk")).code == 105


# ---- Encoding rules and refusals ----------------------------------------------------------------


def test_json_header_key_order_nulls_and_serialize_type_name() -> None:
    cmd = RemotingCommand(code=0, language=None, remark=None, ext_fields={"b": "1", "a": "2", "n": None})  # type: ignore[dict-item]
    assert header_text(encode(cmd)) == (
        '{"code":0,"extFields":{"b":"1","a":"2"},"flag":0,"opaque":0,"serializeTypeCurrentRPC":"JSON","version":0}'
    )


def test_json_header_escapes_strings_like_fastjson() -> None:
    cmd = RemotingCommand(code=1, remark='q"b\\s/\t\x01\x7f\x85\u2028é😀', ext_fields={"k\n": "v\u2029"})
    text = header_text(encode(cmd))
    assert '"remark":"q\\"b\\\\s/\\t\\u0001\\u007F\\u0085\\u2028é😀"' in text
    assert '"extFields":{"k\\n":"v\\u2029"}' in text
    assert decode_frame(encode(cmd)) == cmd


@pytest.mark.parametrize(
    "cmd",
    [
        RemotingCommand(code=2**31),
        RemotingCommand(code=1, opaque=-(2**31) - 1),
        RemotingCommand(code=1, flag=2**32),
        RemotingCommand(code=1, version=2**31),
        RemotingCommand(code=1, language="KLINGON"),
    ],
    ids=repr,
)
def test_values_java_cannot_read_are_refused(cmd: RemotingCommand) -> None:
    with pytest.raises(ValueError):
        encode(cmd)


@pytest.mark.parametrize(
    "cmd",
    [
        RemotingCommand(code=99999),
        RemotingCommand(code=1, version=-40000),
        RemotingCommand(code=1, language=None),
    ],
    ids=repr,
)
def test_rocketmq_header_refuses_what_it_cannot_represent(cmd: RemotingCommand) -> None:
    encode(cmd)  # fine in JSON
    with pytest.raises(ValueError):
        encode(cmd, serialize_type=SERIALIZE_ROCKETMQ)


def test_unknown_serialize_type_and_oversized_header_are_refused() -> None:
    with pytest.raises(ValueError):
        encode(GET_ROUTE, serialize_type=2)
    with pytest.raises(ValueError, match="24-bit"):
        encode(RemotingCommand(code=1, remark="x" * (1 << 24)))


def test_empty_body_is_none() -> None:
    assert decode_frame(encode(RemotingCommand(code=1, body=b""))).body is None


# ---- FrameDecoder ------------------------------------------------------------------------------

FRAMES = [
    EXAMPLE_A,
    EXAMPLE_B,
    golden.CPP_GET_ROUTE_FRAME,
    golden.ALI_ONS_REGISTER_BROKER_FRAME,
    encode(response_to(GET_ROUTE, 0, body=b"x" * 3000)),
]
STREAM = b"".join(FRAMES)
EXPECTED = [decode_frame(frame) for frame in FRAMES]


def test_decoder_byte_by_byte() -> None:
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for i in range(len(STREAM)):
        out += decoder.feed(STREAM[i : i + 1])
        assert decoder.buffered <= max(len(f) for f in FRAMES)
    assert out == EXPECTED
    assert decoder.buffered == 0


def test_decoder_several_frames_in_one_chunk_and_a_partial_tail() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(STREAM + EXAMPLE_A[:10]) == EXPECTED
    assert decoder.buffered == 10
    assert decoder.feed(EXAMPLE_A[10:]) == [GET_ROUTE]
    assert decoder.buffered == 0
    assert decoder.feed(b"") == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=30))
def test_decoder_any_chunking_yields_the_same_commands(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        out += decoder.feed(STREAM[start:end])
    assert out == EXPECTED
    assert decoder.buffered == 0


def test_http2_preface_is_refused_from_its_first_four_bytes() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError, match="exceeds the maximum"):
        decoder.feed(b"PRI ")  # 0x50524920 = 1.35 GB
    assert decoder.buffered == 0
    with pytest.raises(FrameError):  # the decoder stays failed
        decoder.feed(EXAMPLE_A)


def test_http2_preface_in_one_chunk() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError):
        decoder.feed(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00" * 100)
    assert decoder.buffered == 0


def test_max_frame_counts_the_length_prefix_like_netty() -> None:
    frame = encode(RemotingCommand(code=1, body=b"b" * 1000))
    assert FrameDecoder(max_frame=len(frame)).feed(frame) == [decode_frame(frame)]
    with pytest.raises(FrameError):
        FrameDecoder(max_frame=len(frame) - 1).feed(frame[:4])
    assert DEFAULT_MAX_FRAME == 16 * 1024 * 1024


@pytest.mark.parametrize("total", [-1, 0, 3, -(2**31)])
def test_impossible_lengths_are_refused(total: int) -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(struct.pack(">i", total))


@pytest.mark.parametrize("serialize_type", [2, 0x7F, 0xFF])
def test_unknown_serialize_type_is_refused_before_the_frame_arrives(serialize_type: int) -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError, match="serialize type"):
        decoder.feed(struct.pack(">iI", 1000, (serialize_type << 24) | 10))
    assert decoder.buffered == 0


def test_header_longer_than_the_frame_is_refused_before_the_frame_arrives() -> None:
    with pytest.raises(FrameError, match="bad header length"):
        FrameDecoder().feed(struct.pack(">iI", 100, 97))


def test_header_filling_the_whole_frame_is_fine() -> None:
    header = b'{"code":7}'
    assert decode_frame(struct.pack(">iI", 4 + len(header), len(header)) + header).code == 7


def test_frame_error_carries_the_commands_before_the_bad_frame() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError) as failure:
        decoder.feed(EXAMPLE_A + EXAMPLE_B + json_frame(b"not json"))
    assert failure.value.commands == [decode_frame(EXAMPLE_A), decode_frame(EXAMPLE_B)]
    assert decoder.buffered == 0


def test_decode_frame_wants_exactly_one_frame() -> None:
    for bad in (EXAMPLE_A[:-1], EXAMPLE_A + b"\x00", EXAMPLE_A[:7]):
        with pytest.raises(FrameError):
            decode_frame(bad)


def test_max_frame_below_the_prefix_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame=7)


# ---- Round trips --------------------------------------------------------------------------------

names = st.text(min_size=1, max_size=12)
int32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
int16 = st.integers(min_value=-(2**15), max_value=2**15 - 1)


@st.composite
def commands(draw: st.DrawFn, binary: bool = False) -> RemotingCommand:
    number = int16 if binary else int32
    return RemotingCommand(
        code=draw(number),
        opaque=draw(int32),
        flag=draw(int32),
        language=draw(st.sampled_from(LANGUAGES) if binary else st.none() | st.sampled_from(LANGUAGES)),
        version=draw(number),
        remark=draw(st.none() | st.text(max_size=30)),
        ext_fields=draw(st.none() | st.dictionaries(names, st.text(max_size=20), max_size=5)),
        body=draw(st.none() | st.binary(min_size=1, max_size=50)),
        serialize_type=SERIALIZE_ROCKETMQ if binary else SERIALIZE_JSON,
    )


@settings(max_examples=150, deadline=None)
@given(commands())
def test_json_round_trip(cmd: RemotingCommand) -> None:
    frame = encode(cmd)
    assert decode_frame(frame) == cmd
    assert encode(decode_frame(frame)) == frame


@settings(max_examples=150, deadline=None)
@given(commands(binary=True))
def test_binary_round_trip(cmd: RemotingCommand) -> None:
    frame = encode(cmd, serialize_type=SERIALIZE_ROCKETMQ)
    decoded = decode_frame(frame)
    # Zero-length strings travel as null, and an empty map as no map at all.
    expected_ext = {k: v for k, v in cmd.ext_fields.items() if v} if cmd.ext_fields else None
    assert decoded == RemotingCommand(
        code=cmd.code,
        opaque=cmd.opaque,
        flag=cmd.flag,
        language=cmd.language,
        version=cmd.version,
        remark=cmd.remark or None,
        ext_fields=expected_ext,
        body=cmd.body,
        serialize_type=SERIALIZE_ROCKETMQ,
    )
    again = decode_frame(encode(decoded, serialize_type=SERIALIZE_ROCKETMQ))
    # A map whose entries all had empty values decodes as {}, which re-encodes as no map.
    assert again == dataclasses.replace(decoded, ext_fields=decoded.ext_fields or None)
    if cmd.ext_fields is None or all(cmd.ext_fields.values()):
        assert encode(decoded, serialize_type=SERIALIZE_ROCKETMQ) == frame


@given(
    opaque=st.integers(-(2**31), 2**31 - 1),
    version=st.integers(-(2**31), 2**31 - 1),
    body=st.binary(min_size=1, max_size=300),
)
@settings(max_examples=300)
def test_a_success_frame_is_the_encoded_reply(opaque: int, version: int, body: bytes) -> None:
    request = RemotingCommand(code=105, opaque=opaque, version=399)
    expected = encode(response_to(request, ResponseCode.SUCCESS, body=body, version=version))
    assert SuccessFrame(version).frame(opaque, body) == expected


def test_a_success_frame_refuses_a_version_java_could_not_send() -> None:
    with pytest.raises(ValueError, match="Java int"):
        SuccessFrame(2**31)


# ---- the JSON header memo ---------------------------------------------------------------------

_INT32 = st.integers(-(2**31), 2**31 - 1)
_EXT_VALUE = st.one_of(st.text(max_size=8), st.integers(-(2**40), 2**40), st.booleans(), st.none())


@st.composite
def header_objects(draw: st.DrawFn) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "code": draw(st.one_of(_INT32, st.just("105"), st.none())),
        "flag": draw(st.sampled_from([0, 1, 2, 3])),
        "language": draw(st.sampled_from(["JAVA", "CPP", "GO", "NOPE", 0])),
        "version": draw(st.one_of(_INT32, st.just(479))),
    }
    if draw(st.booleans()):
        obj["remark"] = draw(st.one_of(st.text(max_size=8), st.none()))
    if draw(st.booleans()):
        # an extFields key named like the opaque is the case the memo must not confuse
        keys = st.sampled_from(["topic", "opaque", "brokerName", "x"])
        obj["extFields"] = draw(st.dictionaries(keys, _EXT_VALUE, max_size=3))
    return obj


def _render(obj: dict[str, Any], opaque: Any, order: list[int], separators: tuple[str, str]) -> bytes:
    import json

    items = [*obj.items(), ("opaque", opaque)]
    ordered = dict(items[i] for i in order if i < len(items)) | dict(items)
    return json.dumps(ordered, separators=separators).encode()


@given(
    obj=header_objects(),
    opaques=st.lists(st.one_of(_INT32, st.just(2**31), st.just("7"), st.just(-1)), min_size=1, max_size=5),
    order=st.permutations(range(7)),
    separators=st.sampled_from([(",", ":"), (", ", ": "), (",", ": ")]),
)
@settings(max_examples=300)
def test_the_header_memo_decodes_exactly_like_a_full_decode(
    obj: dict[str, Any], opaques: list[Any], order: list[int], separators: tuple[str, str]
) -> None:
    memo = JsonHeaderMemo(max_entries=2)
    for opaque in opaques:
        view = memoryview(_render(obj, opaque, order, separators))
        try:
            expected = full_json_decode(view)
        except FrameError:
            with pytest.raises(FrameError):
                memo.decode(view)
            continue
        assert memo.decode(view) == expected
        assert memo.decode(view) == expected  # the second time from the memo, if it was kept


def test_the_memo_answers_a_repeated_header_with_the_new_opaque_and_a_fresh_ext_dict() -> None:
    memo = JsonHeaderMemo()
    first = memo.decode(memoryview(b'{"code":105,"extFields":{"topic":"T"},"opaque":1,"version":479}'))
    second = memo.decode(memoryview(b'{"code":105,"extFields":{"topic":"T"},"opaque":22,"version":479}'))
    assert (second.code, second.opaque, second.version, second.ext_fields) == (105, 22, 479, {"topic": "T"})
    assert second.ext_fields is not first.ext_fields
    assert len(memo._known) == 1


def test_an_ext_field_named_opaque_keeps_the_header_out_of_the_memo() -> None:
    memo = JsonHeaderMemo()
    a = b'{"code":105,"extFields":{"opaque":5,"topic":"T"},"opaque":5,"version":479}'
    b = b'{"code":105,"extFields":{"opaque":7,"topic":"T"},"opaque":5,"version":479}'
    assert memo.decode(memoryview(a)).ext_fields == {"opaque": "5", "topic": "T"}
    assert memo.decode(memoryview(b)).ext_fields == {"opaque": "7", "topic": "T"}
    assert len(memo._known) == 0


def test_the_memo_keeps_at_most_max_entries() -> None:
    memo = JsonHeaderMemo(max_entries=3)
    for i in range(10):
        memo.decode(memoryview(b'{"code":105,"extFields":{"topic":"T%d"},"opaque":1}' % i))
    assert len(memo._known) == 3


def test_long_headers_are_not_remembered() -> None:
    memo = JsonHeaderMemo()
    long_header = b'{"code":105,"extFields":{"topic":"%s"},"opaque":1}' % (b"T" * 600)
    assert memo.decode(memoryview(long_header)).ext_fields == {"topic": "T" * 600}
    assert len(memo._known) == 0
