"""Hostile input: whatever arrives, the codec answers with a result or its own error, in bounded
time and memory. FrameError is the only exception a frame may cause, BodyDecodeError the only one
a REGISTER_BROKER body may cause, JSONParseError the only one of the lenient parser."""

from __future__ import annotations

import contextlib
import struct
import time
import tracemalloc
import zlib
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from namesrv.protocol.lenient_json import JSONParseError, loads
from namesrv.protocol.register_body import BodyDecodeError, decode_register_body
from namesrv.protocol.remoting import (
    SERIALIZE_ROCKETMQ,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    decode_frame,
    encode,
)
from tests.unit import golden

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALID_FRAMES = [
    encode(RemotingCommand(code=105, opaque=1, version=479, ext_fields={"topic": "TopicTest"})),
    encode(
        RemotingCommand(code=103, opaque=2, remark="r", ext_fields={"a": "1", "b": "2"}, body=b"{}"),
        serialize_type=SERIALIZE_ROCKETMQ,
    ),
    golden.CPP_GET_ROUTE_FRAME,
    golden.ALI_ONS_REGISTER_BROKER_FRAME,
]


def feed_all(data: bytes, chunk: int | None = None) -> list[RemotingCommand]:
    """Feed ``data`` and return the commands, or [] after a FrameError (the only error allowed)."""
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    step = chunk or len(data) or 1
    try:
        for i in range(0, len(data), step):
            out += decoder.feed(data[i : i + step])
    except FrameError as failure:
        assert decoder.buffered == 0
        return out + failure.commands
    assert decoder.buffered < len(data) + 1
    return out


def body_outcome(body: bytes, version: int, compressed: bool) -> None:
    with contextlib.suppress(BodyDecodeError):
        decode_register_body(body, version=version, compressed=compressed, now_ms=1)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what orjson can write
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=25,
)
header_keys = st.sampled_from(
    ["code", "opaque", "flag", "version", "language", "remark", "extFields", "serializeTypeCurrentRPC", "x"]
)


def json_frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return (
        struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body
    )


# ---- frames ------------------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=600), st.integers(min_value=1, max_value=64))
def test_random_bytes(data: bytes, chunk: int) -> None:
    feed_all(data, chunk)


@FUZZ
@given(st.sampled_from(VALID_FRAMES), st.data())
def test_truncated_frames_wait_for_more(frame: bytes, data: st.DataObject) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(frame) - 1))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:cut]) == []
    assert decoder.buffered == cut
    assert decoder.feed(frame[cut:]) == [decode_frame(frame)]


@FUZZ
@given(
    st.lists(st.sampled_from(VALID_FRAMES), min_size=1, max_size=3),
    st.lists(
        st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), min_size=1, max_size=6
    ),
    st.integers(min_value=1, max_value=200),
)
def test_mutated_frames(frames: list[bytes], flips: list[tuple[int, int]], chunk: int) -> None:
    stream = bytearray(b"".join(frames))
    for position, value in flips:
        stream[position % len(stream)] = value
    feed_all(bytes(stream), chunk)


@FUZZ
@given(st.dictionaries(header_keys, json_values, max_size=8), st.binary(max_size=20))
def test_json_headers_of_any_shape(header: dict[str, Any], body: bytes) -> None:
    for cmd in feed_all(json_frame(orjson.dumps(header), body)):
        assert cmd.ext_fields is None or all(isinstance(v, str) for v in cmd.ext_fields.values())
        assert cmd.remark is None or isinstance(cmd.remark, str)
        assert cmd.language is None or isinstance(cmd.language, str)
        encode(cmd)  # what we decoded, we can write back


@FUZZ
@given(st.binary(max_size=200), st.binary(max_size=20))
def test_binary_headers_of_random_bytes(header: bytes, body: bytes) -> None:
    feed_all(json_frame(header, body, SERIALIZE_ROCKETMQ))


@FUZZ
@given(st.binary(min_size=1, max_size=100))
def test_invalid_utf8_in_headers(junk: bytes) -> None:
    header = b'{"code":105,"remark":"' + junk + b'"}'
    feed_all(json_frame(header))
    ext = struct.pack(">h", len(junk)) + junk + struct.pack(">i", 1) + b"v"
    binary = struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", len(ext)) + ext
    feed_all(json_frame(binary, serialize_type=SERIALIZE_ROCKETMQ))


@pytest.mark.parametrize(
    "header",
    [
        b"[" * 1_000_000,
        b'{"a":' * 200_000 + b"1" + b"}" * 200_000,
        b'{"extFields":{"k":' + b"[" * 1000 + b"]" * 1000 + b"}}",
        b'{"extFields":{"k":1.5},"deep":' + b"[" * 1000 + b"]" * 1000 + b"}",
        b'{"extFields":{"k":{"a":' * 500 + b"1" + b"}" * 501 + b"}",
    ],
    ids=["array-bomb", "object-bomb", "deep-ext-value", "deep-with-decimal", "nested-ext-objects"],
)
@pytest.mark.timeout(60)  # a hang guard (a bomb that goes quadratic never ends), not a speed check
def test_json_bombs_in_the_header(header: bytes) -> None:
    feed_all(json_frame(header))


def test_deep_header_with_a_decimal_ext_value_still_decodes() -> None:
    # The stdlib re-read for exact decimals hits RecursionError at this depth; we keep the float.
    header = b'{"code":1,"extFields":{"k":1.5},"deep":' + b"[" * 1000 + b"]" * 1000 + b"}"
    assert decode_frame(json_frame(header)).ext_fields == {"k": "1.5"}


def measure(action: Callable[[], object]) -> tuple[float, int]:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        action()
    finally:
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return elapsed, peak


def test_huge_json_ext_fields_within_the_max_frame() -> None:
    ext = {f"key{i}": f"value{i}" for i in range(100_000)}
    frame = encode(RemotingCommand(code=105, ext_fields=ext))
    assert len(frame) < 16 * 1024 * 1024
    _, peak = measure(lambda: FrameDecoder().feed(frame))
    assert decode_frame(frame).ext_fields == ext
    assert peak < 20 * len(frame)


@pytest.mark.timeout(60)  # a hang guard, not a speed check (benchmarks time the codec)
def test_huge_binary_ext_fields_within_the_max_frame() -> None:
    entry = struct.pack(">h", 1) + b"k" + struct.pack(">i", 1) + b"v"
    ext = entry * 300_000  # 2.4 MB of one-byte entries
    header = struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", len(ext)) + ext
    frame = json_frame(header, serialize_type=SERIALIZE_ROCKETMQ)
    assert FrameDecoder().feed(frame)[0].ext_fields == {"k": "v"}


def test_bogus_lengths_allocate_nothing() -> None:
    for prefix in (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", struct.pack(">iI", 16 * 1024 * 1024 - 4, 10)):
        decoder = FrameDecoder()

        def feed(decoder: FrameDecoder = decoder, prefix: bytes = prefix) -> None:
            with contextlib.suppress(FrameError):
                decoder.feed(prefix)

        _, peak = measure(feed)
        assert peak < 64 * 1024


def test_slow_feeding_of_a_large_frame_buffers_only_what_arrived() -> None:
    frame = encode(RemotingCommand(code=1, body=b"x" * 2_000_000))
    decoder = FrameDecoder()
    for i in range(0, len(frame) - 65536, 65536):
        assert decoder.feed(frame[i : i + 65536]) == []
        assert decoder.buffered == i + 65536
    assert len(decoder.feed(frame[decoder.buffered :])) == 1


# ---- REGISTER_BROKER bodies and the lenient parser ----------------------------------------------

versions = st.sampled_from([0, 36, 37, 409, 412, 413, 479, 612, 5000, -1])


@FUZZ
@given(st.binary(max_size=300), versions, st.booleans())
def test_register_bodies_of_random_bytes(body: bytes, version: int, compressed: bool) -> None:
    body_outcome(body, version, compressed)
    body_outcome(zlib.compress(body), version, True)


@FUZZ
@given(json_values, versions)
def test_register_bodies_of_random_json(value: Any, version: int) -> None:
    body_outcome(orjson.dumps(value), version, False)
    body_outcome(
        orjson.dumps({"topicConfigSerializeWrapper": value, "filterServerList": value}), version, False
    )
    body_outcome(orjson.dumps({"topicConfigTable": {"T": value}, "dataVersion": value}), version, False)


@st.composite
def compressed_layouts(draw: st.DrawFn) -> bytes:
    """Inflated layouts that are nearly right: random counts, lengths and texts."""
    parts: list[bytes] = []
    for _ in range(draw(st.integers(min_value=0, max_value=8))):
        if draw(st.booleans()):
            parts.append(struct.pack(">i", draw(st.integers(min_value=-(2**31), max_value=2**31 - 1))))
        else:
            text = draw(
                st.sampled_from(["{}", '{"counter":1}', "T 1 1 6 SINGLE_TAG {}", "[]", '{"topic":"T"}'])
                | st.text(max_size=30)
            ).encode()
            parts.append(struct.pack(">i", len(text) + draw(st.integers(min_value=-2, max_value=2))) + text)
    return zlib.compress(b"".join(parts))


@FUZZ
@given(compressed_layouts(), versions)
def test_compressed_bodies_of_random_layout(body: bytes, version: int) -> None:
    body_outcome(body, version, True)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 1_000_000,
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"attributes":{"a":'
        + b"[" * 1000
        + b"]" * 1000
        + b"}}}}}",
        b'{"filterServerList":[' + b"{0:" * 100_000 + b"}",
        b"{0:" * 500_000,
    ],
    ids=["array-bomb", "deep-attribute", "bare-key-bomb", "bare-key-nesting"],
)
@pytest.mark.timeout(60)  # a hang guard, not a speed check
def test_json_bombs_in_register_bodies(body: bytes) -> None:
    with pytest.raises(BodyDecodeError):
        decode_register_body(body, version=479, compressed=False, now_ms=1)


@FUZZ
@given(st.text(alphabet='{}[]:,"\\0123-abc \n', max_size=200))
def test_lenient_parser_on_json_like_noise(text: str) -> None:
    with contextlib.suppress(JSONParseError):
        loads(text)
