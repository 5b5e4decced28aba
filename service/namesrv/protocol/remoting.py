"""The RocketMQ remoting protocol as a sans-I/O codec: bytes in, commands out, and back.

A frame is ``[int32 total][int32 (serializeType << 24) | headerLength][header][body]``, all
big-endian, where ``total`` counts everything after itself. The header is either fastjson JSON
(type 0, what every client we know sends) or RocketMQ's compact binary layout (type 1). See
``rocketmq-namesrv.md`` §1.2-§1.7 for the layout and the Java behaviour mirrored here.

Decoding is as lenient as Java's (unknown JSON keys ignored, missing numbers 0, non-string
``extFields`` values turned into Java's text for them, unknown languages ``None``) and as strict
where Java closes the connection: every such case raises :class:`FrameError`. Nothing here
does I/O; :class:`FrameDecoder` is fed whatever the socket delivered.

This module is the frame: length prefix, serialize type, header length, body. The command and
what the layers share are in :mod:`.command`, the headers in :mod:`.json_header` and
:mod:`.binary_header`; every public name of the codec is importable from here.
"""

from __future__ import annotations

import struct

from namesrv.protocol.binary_header import decode_binary_header, encode_binary_header
from namesrv.protocol.command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    INT32,
    INT32_MAX,
    INT32_MIN,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    FrameError,
    RemotingCommand,
    response_to,
)
from namesrv.protocol.json_header import HEADERS, MEMO_MAX_HEADER, JsonHeaderMemo, encode_json_header

__all__ = [
    "DEFAULT_MAX_FRAME",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "MEMO_MAX_HEADER",
    "SERIALIZE_JSON",
    "SERIALIZE_ROCKETMQ",
    "FrameDecoder",
    "FrameError",
    "JsonHeaderMemo",
    "RemotingCommand",
    "SuccessFrame",
    "decode_frame",
    "encode",
    "response_to",
]

# Netty's maxFrameLength (system property com.rocketmq.remoting.frameMaxLength): the largest
# whole frame, the 4-byte length prefix included.
DEFAULT_MAX_FRAME = 16 * 1024 * 1024

_SERIALIZE_TYPES = frozenset({SERIALIZE_JSON, SERIALIZE_ROCKETMQ})
_MAX_HEADER = 0xFFFFFF  # the header length has 24 bits next to the serialize type
_UINT32 = struct.Struct(">I")
_FRAME_PREFIX = struct.Struct(">iI")


# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------


def encode(cmd: RemotingCommand, *, serialize_type: int = SERIALIZE_JSON) -> bytes:
    """The whole frame for ``cmd``, header in ``serialize_type`` (``cmd.serialize_type`` only
    records what a decoded command arrived as and is not used here).

    The JSON header is byte for byte what fastjson writes for Java's RemotingCommand: keys
    ``code, extFields, flag, language, opaque, remark, serializeTypeCurrentRPC, version`` in
    that order, compact, nulls omitted, ``extFields`` entries in the dict's order (Java's is
    its HashMap's) with ``None`` values left out. ``serializeTypeCurrentRPC`` is always
    ``"JSON"`` there: a ROCKETMQ-type frame carries the binary header instead.

    Raises ``ValueError`` for what Java could not put on the wire either: a number beyond
    int32 (int16 for code and version in the binary header), a language that is not a
    LanguageCode, a header over 16 MiB."""
    if not (
        INT32_MIN <= cmd.code <= INT32_MAX
        and INT32_MIN <= cmd.opaque <= INT32_MAX
        and INT32_MIN <= cmd.flag <= INT32_MAX
        and INT32_MIN <= cmd.version <= INT32_MAX
    ):
        raise ValueError(f"code, opaque, flag and version must fit in a Java int: {cmd!r}"[:300])
    if serialize_type == SERIALIZE_JSON:
        header = encode_json_header(cmd)
    elif serialize_type == SERIALIZE_ROCKETMQ:
        header = encode_binary_header(cmd)
    else:
        raise ValueError(f"serialize type {serialize_type} is neither JSON (0) nor ROCKETMQ (1)")
    if len(header) > _MAX_HEADER:
        raise ValueError(f"header of {len(header)} bytes exceeds the 24-bit header length field")
    body = cmd.body or b""
    prefix = _FRAME_PREFIX.pack(4 + len(header) + len(body), (serialize_type << 24) | len(header))
    return b"".join((prefix, header, body))


class SuccessFrame:
    """Frames of SUCCESS replies with a body and no remark or extFields, for one reply version:
    byte for byte what :func:`encode` writes for :func:`response_to` of such a reply, with only
    the opaque and the body filled in per request. Route lookups answered from memory are most
    of a worker's traffic, and this skips building and checking a command for each."""

    __slots__ = ("version", "_head", "_tail", "_fixed")

    def __init__(self, version: int) -> None:
        if not INT32_MIN <= version <= INT32_MAX:
            raise ValueError(f"version {version} does not fit in a Java int")
        self.version = version
        self._head = b'{"code":0,"flag":1,"language":"JAVA","opaque":'
        self._tail = b',"serializeTypeCurrentRPC":"JSON","version":%d}' % version
        self._fixed = len(self._head) + len(self._tail)

    def frame(self, opaque: int, body: bytes) -> bytes:
        """``opaque`` is a decoded request's, so it fits in a Java int."""
        digits = b"%d" % opaque
        header_length = self._fixed + len(digits)
        prefix = _FRAME_PREFIX.pack(4 + header_length + len(body), header_length)
        return b"".join((prefix, self._head, digits, self._tail, body))


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------


class FrameDecoder:
    """Incremental: feed() any chunking of the byte stream; returns every complete command.

    A frame's length is judged from its first 4 bytes and its header length from the next 4,
    before the rest arrives, so a bogus length (an HTTP/2 preface reads as 1.35 GB) fails at
    once without anything being buffered for it. ``max_frame`` is Netty's ``maxFrameLength``:
    the whole frame, its 4-byte length prefix included. After a :class:`FrameError` the decoder
    stays failed: the connection is to be closed, and further feeds raise again."""

    __slots__ = ("_buffer", "_failure", "_max_frame")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if max_frame < 8:
            raise ValueError(f"max_frame={max_frame} cannot hold even the 8-byte frame prefix")
        self._max_frame = max_frame
        self._buffer = bytearray()
        self._failure: str | None = None

    @property
    def buffered(self) -> int:
        """Bytes held waiting for the rest of a frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        if self._failure is not None:
            raise FrameError(f"decoder already failed: {self._failure}")
        commands: list[RemotingCommand] = []
        try:
            if self._buffer:
                self._buffer += data
                with memoryview(self._buffer) as view:
                    consumed = self._split(view, commands)
                del self._buffer[:consumed]
            else:
                # Common case: nothing pending, so decode straight from the caller's bytes and
                # keep only an incomplete tail.
                with memoryview(data) as view:
                    consumed = self._split(view, commands)
                    if consumed < len(view):
                        self._buffer = bytearray(view[consumed:])
        except FrameError as exc:
            self._failure = str(exc)
            self._buffer = bytearray()
            exc.commands = commands
            raise
        return commands

    def _split(self, view: memoryview, out: list[RemotingCommand]) -> int:
        """Decode every complete frame in ``view`` into ``out``; return the bytes consumed."""
        pos, end, max_frame = 0, len(view), self._max_frame
        decode_json = HEADERS.decode
        while end - pos >= 8:
            total, type_and_length = _FRAME_PREFIX.unpack_from(view, pos)
            # The two checks below, inlined: they only run to raise with the precise reason.
            if not (4 <= total <= max_frame - 4 and type_and_length >> 24 <= SERIALIZE_ROCKETMQ) or (
                type_and_length & _MAX_HEADER > total - 4
            ):
                _check_total(total, max_frame)
                _check_type_and_header_length(type_and_length, total)
            if end - pos - 4 < total:
                return pos
            # _decode_checked_payload, inlined: this loop runs once per request.
            header_end = pos + 8 + (type_and_length & _MAX_HEADER)
            if type_and_length >> 24 == SERIALIZE_JSON:
                cmd = decode_json(view[pos + 8 : header_end])
            else:
                cmd = decode_binary_header(view[pos + 8 : header_end])
            pos += 4 + total
            if pos > header_end:
                cmd.body = bytes(view[header_end:pos])
            out.append(cmd)
        if end - pos >= 4:  # judge the length before the header length arrives
            _check_total(INT32.unpack_from(view, pos)[0], max_frame)
        return pos


def decode_frame(frame: bytes) -> RemotingCommand:
    """Decode exactly one whole frame (length prefix included)."""
    if len(frame) < 8:
        raise FrameError(f"{len(frame)} bytes cannot hold a frame's two length fields")
    (total,) = INT32.unpack_from(frame, 0)
    if total != len(frame) - 4:
        raise FrameError(f"frame length {total} does not match the {len(frame) - 4} bytes after it")
    with memoryview(frame) as view:
        return _decode_payload(view[4:])


def _check_total(total: int, max_frame: int) -> None:
    if total < 4:
        raise FrameError(f"frame length {total} cannot hold the 4-byte header length")
    if total + 4 > max_frame:
        raise FrameError(f"frame of {total + 4} bytes exceeds the maximum of {max_frame}")


def _check_type_and_header_length(type_and_length: int, total: int) -> None:
    serialize_type, header_length = type_and_length >> 24, type_and_length & _MAX_HEADER
    if serialize_type not in _SERIALIZE_TYPES:
        raise FrameError(f"serialize type {serialize_type} is neither JSON (0) nor ROCKETMQ (1)")
    if header_length > total - 4:
        raise FrameError(f"decode error, bad header length: {header_length} (frame length {total})")


def _decode_payload(payload: memoryview) -> RemotingCommand:
    """A frame without its length prefix: ``RemotingCommand.decode(ByteBuf)``."""
    (type_and_length,) = _UINT32.unpack_from(payload, 0)
    _check_type_and_header_length(type_and_length, len(payload))
    return _decode_checked_payload(payload, type_and_length)


def _decode_checked_payload(payload: memoryview, type_and_length: int) -> RemotingCommand:
    """The same, once ``type_and_length`` has passed ``_check_type_and_header_length``."""
    serialize_type, header_length = type_and_length >> 24, type_and_length & _MAX_HEADER
    header = payload[4 : 4 + header_length]
    is_json = serialize_type == SERIALIZE_JSON
    cmd = HEADERS.decode(header) if is_json else decode_binary_header(header)
    if len(payload) > 4 + header_length:
        cmd.body = bytes(payload[4 + header_length :])
    return cmd
