"""The RocketMQ remoting protocol as a sans-I/O codec: bytes in, commands out, and back.

A frame is ``[int32 total][int32 (serializeType << 24) | headerLength][header][body]``, all
big-endian, where ``total`` counts everything after itself. The header is either fastjson JSON
(type 0, what every client we know sends) or RocketMQ's compact binary layout (type 1). See
``rocketmq-namesrv.md`` §1.2-§1.7 for the layout and the Java behaviour mirrored here.

Decoding is as lenient as Java's (unknown JSON keys ignored, missing numbers 0, non-string
``extFields`` values turned into Java's text for them, unknown languages ``None``) and as strict
where Java closes the connection: every such case raises :class:`FrameError`. Nothing here
does I/O; :class:`FrameDecoder` is fed whatever the socket delivered.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from namesrv.domain.codes import LANGUAGES, Version
from namesrv.limits import MAX_REMARK_CHARS, bounded_remark
from namesrv.protocol.fastjson import quote
from namesrv.protocol.headers import parse_java_int
from namesrv.protocol.lenient_json import JSONParseError, java_string

__all__ = [
    "DEFAULT_MAX_FRAME",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "SERIALIZE_JSON",
    "SERIALIZE_ROCKETMQ",
    "FrameDecoder",
    "FrameError",
    "RemotingCommand",
    "decode_frame",
    "encode",
    "response_to",
]

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1
FLAG_RESPONSE = 1  # 1 << RemotingCommand.RPC_TYPE
FLAG_ONEWAY = 2  # 1 << RemotingCommand.RPC_ONEWAY
# Netty's maxFrameLength (system property com.rocketmq.remoting.frameMaxLength): the largest
# whole frame, the 4-byte length prefix included.
DEFAULT_MAX_FRAME = 16 * 1024 * 1024

_SERIALIZE_TYPES = frozenset({SERIALIZE_JSON, SERIALIZE_ROCKETMQ})
_MAX_HEADER = 0xFFFFFF  # the header length has 24 bits next to the serialize type
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1
_LANGUAGE_CODES = {name: code for code, name in enumerate(LANGUAGES)}
_SERVER_VERSION = int(Version.V5_3_3)

_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_FRAME_PREFIX = struct.Struct(">iI")
# code, language, version, opaque, flag, remark length: RocketMQSerializable's fixed part
_BINARY_FIXED = struct.Struct(">hbhiii")


@dataclass(slots=True)
class RemotingCommand:
    """Java's RemotingCommand: a request or a reply, header fields plus the body."""

    code: int
    opaque: int = 0
    flag: int = 0
    language: str | None = "JAVA"  # LanguageCode name; None when unknown on input
    version: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None  # None: "extFields" omitted; {}: "extFields":{}
    body: bytes | None = None  # an empty body on the wire decodes to None, as in Java
    serialize_type: int = SERIALIZE_JSON  # of the frame it was decoded from

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)


class FrameError(Exception):
    """The connection must be closed (bad length, bad serialize type, frame over the max,
    undecodable header). Java logs these and closes the channel without replying.

    ``commands`` holds the complete commands that preceded the bad frame in the same
    :meth:`FrameDecoder.feed` call. Netty still hands those to the processors before the
    channel closes, so a server that wants Java's behaviour dispatches them (replies will
    usually not make it out)."""

    def __init__(self, message: str, commands: list[RemotingCommand] | None = None) -> None:
        super().__init__(message)
        self.commands: list[RemotingCommand] = commands if commands is not None else []


# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------


def response_to(
    request: RemotingCommand,
    code: int,
    *,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
    version: int = _SERVER_VERSION,
) -> RemotingCommand:
    """A reply: same opaque, flag = FLAG_RESPONSE, language "JAVA", the given version.

    A oneway request gets no reply on the wire; the caller decides not to send this. The remark
    is cut to a bounded length: it often echoes what the client sent."""
    if remark is not None and len(remark) > MAX_REMARK_CHARS:
        remark = bounded_remark(remark)
    return RemotingCommand(
        code=code,
        opaque=request.opaque,
        flag=FLAG_RESPONSE,
        language="JAVA",
        version=version,
        remark=remark,
        ext_fields=ext_fields,
        body=body,
    )


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
        _INT32_MIN <= cmd.code <= _INT32_MAX
        and _INT32_MIN <= cmd.opaque <= _INT32_MAX
        and _INT32_MIN <= cmd.flag <= _INT32_MAX
        and _INT32_MIN <= cmd.version <= _INT32_MAX
    ):
        raise ValueError(f"code, opaque, flag and version must fit in a Java int: {cmd!r}"[:300])
    if serialize_type == SERIALIZE_JSON:
        header = _json_header(cmd)
    elif serialize_type == SERIALIZE_ROCKETMQ:
        header = _binary_header(cmd)
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
        if not _INT32_MIN <= version <= _INT32_MAX:
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


def _json_header(cmd: RemotingCommand) -> bytes:
    # Hand-rolled rather than a generic serializer: this runs for every reply, and the key
    # order and escaping are fixed by fastjson's output for this one class. One f-string is
    # measurably faster than assembling a list.
    ext = "" if cmd.ext_fields is None else f',"extFields":{_json_ext_fields(cmd.ext_fields)}'
    language = "" if cmd.language is None else f',"language":"{_language_name(cmd.language)}"'
    remark = "" if cmd.remark is None else f',"remark":{quote(cmd.remark)}'
    return (
        f'{{"code":{cmd.code:d}{ext},"flag":{cmd.flag:d}{language},"opaque":{cmd.opaque:d}{remark},'
        f'"serializeTypeCurrentRPC":"JSON","version":{cmd.version:d}}}'
    ).encode()


def _json_ext_fields(ext: Mapping[str, str | None]) -> str:
    return "{" + ",".join(f"{quote(key)}:{quote(value)}" for key, value in _present(ext)) + "}"


def _present(ext: Mapping[str, str | None]) -> Iterator[tuple[str, str]]:
    """The entries fastjson (and the binary encoder) write: a null value is skipped."""
    return ((key, value) for key, value in ext.items() if value is not None)


def _language_name(language: str) -> str:
    if language not in _LANGUAGE_CODES:
        raise ValueError(f"language {language!r} is not a LanguageCode name")
    return language


def _binary_header(cmd: RemotingCommand) -> bytes:
    """``RocketMQSerializable.rocketMQProtocolEncode``: empty strings are written as length 0,
    which the peer reads back as null."""
    for name in ("code", "version"):
        value = getattr(cmd, name)
        if not _INT16_MIN <= value <= _INT16_MAX:
            raise ValueError(f"{name}={value} does not fit the ROCKETMQ header's int16")
    if cmd.language is None:
        raise ValueError("the ROCKETMQ header needs a language (Java would throw a NullPointerException)")
    language = _LANGUAGE_CODES[_language_name(cmd.language)]
    remark = cmd.remark.encode() if cmd.remark else b""
    parts = [
        _BINARY_FIXED.pack(cmd.code, language, cmd.version, cmd.opaque, cmd.flag, len(remark)),
        remark,
    ]
    entries: list[bytes] = []
    for key, value in _present(cmd.ext_fields or {}):
        key_bytes, value_bytes = key.encode(), value.encode()
        if len(key_bytes) > _INT16_MAX:
            raise ValueError(f"extFields key of {len(key_bytes)} bytes does not fit an int16 length")
        entries += (_INT16.pack(len(key_bytes)), key_bytes, _INT32.pack(len(value_bytes)), value_bytes)
    ext = b"".join(entries)
    parts += (_INT32.pack(len(ext)), ext)
    return b"".join(parts)


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
        decode_json = _HEADERS.decode
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
                cmd = _decode_binary_header(view[pos + 8 : header_end])
            pos += 4 + total
            if pos > header_end:
                cmd.body = bytes(view[header_end:pos])
            out.append(cmd)
        if end - pos >= 4:  # judge the length before the header length arrives
            _check_total(_INT32.unpack_from(view, pos)[0], max_frame)
        return pos


def decode_frame(frame: bytes) -> RemotingCommand:
    """Decode exactly one whole frame (length prefix included)."""
    if len(frame) < 8:
        raise FrameError(f"{len(frame)} bytes cannot hold a frame's two length fields")
    (total,) = _INT32.unpack_from(frame, 0)
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
    cmd = _HEADERS.decode(header) if is_json else _decode_binary_header(header)
    if len(payload) > 4 + header_length:
        cmd.body = bytes(payload[4 + header_length :])
    return cmd


# ---- JSON header ----------------------------------------------------------------------------


_OPAQUE_KEY = b'"opaque":'
_OPAQUE_VALUE_AT = len(_OPAQUE_KEY)
MEMO_MAX_HEADER = 512


class JsonHeaderMemo:
    """JSON headers already decoded, keyed by their bytes without the opaque's digits.

    A client sends the same header again and again with only ``opaque`` changed (a producer
    asking for the same topic's route every 30 s, a broker heartbeating), and parsing it costs
    more than all the rest of answering a cached route. A header is remembered only when
    ``"opaque":`` occurs exactly once and is followed by the very integer the full decode found,
    so a key is always a decoded header with one integer left out: a header matching it differs
    from that one in its opaque alone. Entries hold only strings and ints (untracked by the GC);
    the oldest go first beyond ``max_entries``, and headers over ``MEMO_MAX_HEADER`` bytes (never
    a route lookup's or a heartbeat's) are not kept, so the memo stays a few MiB at most."""

    __slots__ = ("_known", "max_entries")

    def __init__(self, max_entries: int = 16384) -> None:
        self._known: dict[bytes, tuple[int, int, str | None, int, str | None, dict[str, str] | None]] = {}
        self.max_entries = max_entries

    def decode(self, header: memoryview) -> RemotingCommand:
        if len(header) > MEMO_MAX_HEADER:
            return _decode_json_header(header)
        raw = header.tobytes()
        at = raw.find(_OPAQUE_KEY)
        if at < 0:
            return _decode_json_header(header)
        start = at + _OPAQUE_VALUE_AT
        end = raw.find(b",", start)
        if end < 0:
            end = raw.find(b"}", start)
        digits = raw[start:end]
        key = raw[:start] + raw[end:]
        known = self._known.get(key)
        # Only what a serializer writes for a non-negative int (a rarer negative opaque, after the
        # client's counter wrapped, takes the full decode).
        plain = digits.isdigit() and len(digits) <= 10
        if known is not None and plain:
            opaque = int(digits)
            if opaque <= _INT32_MAX:
                code, flag, language, version, remark, ext = known
                return RemotingCommand(
                    code, opaque, flag, language, version, remark, None if ext is None else ext.copy()
                )
        cmd = _decode_json_header(header)
        if plain and int(digits) == cmd.opaque and raw.count(_OPAQUE_KEY) == 1:
            if len(self._known) >= self.max_entries:
                del self._known[next(iter(self._known))]
            ext_fields = cmd.ext_fields
            self._known[key] = (
                cmd.code,
                cmd.flag,
                cmd.language,
                cmd.version,
                cmd.remark,
                None if ext_fields is None else ext_fields.copy(),
            )
        return cmd


_HEADERS = JsonHeaderMemo()


def _decode_json_header(header: memoryview) -> RemotingCommand:
    """``JSON.parseObject(bytes, RemotingCommand.class)`` as fastjson does it, leniently."""
    try:
        obj = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        raise FrameError(f"undecodable JSON header: {exc}") from None
    if type(obj) is not dict:
        raise FrameError(f"JSON header is a {type(obj).__name__}, not an object")
    ext = obj.get("extFields")
    get = obj.get
    code, opaque, flag, version = get("code", 0), get("opaque", 0), get("flag", 0), get("version", 0)
    # What every client sends: four plain ints in range. Checked inline (this runs per request);
    # anything else (null, quoted, out of range) takes _header_int's careful path.
    if not (
        type(code) is int
        and type(opaque) is int
        and type(flag) is int
        and type(version) is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
    ):
        code, opaque = _header_int(obj, "code"), _header_int(obj, "opaque")
        flag, version = _header_int(obj, "flag"), _header_int(obj, "version")
    language = get("language")
    remark = get("remark")
    # Positional: measurably cheaper than keywords on this per-request path. The order is
    # code, opaque, flag, language, version, remark, ext_fields, body, serialize_type.
    return RemotingCommand(
        code,
        opaque,
        flag,
        language if language == "JAVA" else _language(language),
        version,
        remark if remark is None else _remark(remark),
        None if ext is None else _ext_fields(ext, header),
        None,
        SERIALIZE_JSON,
    )


def _header_int(obj: dict[str, Any], name: str) -> int:
    """A Java ``int`` field: missing or null is 0; fastjson also takes a quoted number."""
    value = obj.get(name, 0)
    if type(value) is int and _INT32_MIN <= value <= _INT32_MAX:
        return value
    if value is None:
        return 0
    parsed = parse_java_int(value) if type(value) is str else None
    if parsed is None:
        raise FrameError(f"JSON header field {name!r} is not a Java int: {str(value)[:40]!r}")
    return parsed


def _language(value: Any) -> str | None:
    """The LanguageCode by name (fastjson also takes the ordinal); unknown is None, as in Java."""
    if type(value) is str:
        return value if value in _LANGUAGE_CODES else None
    if type(value) is int and 0 <= value < len(LANGUAGES):
        return LANGUAGES[value]
    return None


def _remark(value: Any) -> str | None:
    if value is None or type(value) is str:
        return value
    return _java_text(value)


def _ext_fields(ext: Any, header: memoryview) -> dict[str, str]:
    if type(ext) is not dict:
        raise FrameError(f"JSON header field 'extFields' is a {type(ext).__name__}, not an object")
    for value in ext.values():
        if type(value) is not str:
            break
    else:
        return ext  # what Java clients send: a fresh dict we can hand over as it is
    if any(type(value) is float for value in ext.values()):
        ext = _with_exact_decimals(ext, header)
    return {key: _java_text(value) for key, value in ext.items() if value is not None}


def _java_text(value: Any) -> str:
    try:
        return java_string(value)
    except JSONParseError as exc:
        raise FrameError(f"JSON header value: {exc}") from None


def _with_exact_decimals(ext: dict[str, Any], header: memoryview) -> dict[str, Any]:
    """fastjson keeps a decimal's literal (as a BigDecimal); orjson gave us a float. Re-read
    the header with the stdlib parser, which can hand back the literal, to render it as Java.
    Only reached when a client puts non-integer numbers in extFields, which none we know does."""
    try:
        exact = json.loads(bytes(header), parse_float=Decimal)["extFields"]
    except RecursionError:  # orjson accepts deeper nesting than the stdlib parser
        return ext  # keep the floats: close enough for a value no handler reads
    return {key: exact[key] if type(value) is float else value for key, value in ext.items()}


# ---- ROCKETMQ binary header -----------------------------------------------------------------


def _decode_binary_header(header: memoryview) -> RemotingCommand:
    """``RocketMQSerializable.rocketMQProtocolDecode``, with every length checked against the
    bytes actually left (Java's checks are looser, but it fails on an overrun all the same)."""
    if len(header) < _BINARY_FIXED.size + 4:
        raise FrameError(f"ROCKETMQ header of {len(header)} bytes is shorter than its fixed 21")
    code, language, version, opaque, flag, remark_length = _BINARY_FIXED.unpack_from(header, 0)
    pos = _BINARY_FIXED.size
    remark, pos = _read_string(header, pos, remark_length, len(header), "remark")
    if len(header) - pos < 4:
        raise FrameError("ROCKETMQ header ends before its extFields length")
    (ext_length,) = _INT32.unpack_from(header, pos)
    pos += 4
    ext_fields = None
    if ext_length > 0:  # Java ignores a negative length as it does 0
        if ext_length > len(header) - pos:
            raise FrameError(f"extFields length {ext_length} exceeds the {len(header) - pos} bytes left")
        ext_fields = _read_ext_map(header, pos, pos + ext_length)
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=LANGUAGES[language] if 0 <= language < len(LANGUAGES) else None,
        version=version,
        remark=remark,
        ext_fields=ext_fields,
        serialize_type=SERIALIZE_ROCKETMQ,
    )


def _read_ext_map(header: memoryview, pos: int, end: int) -> dict[str, str]:
    """``mapDeserialize``: int16 key length, key, int32 value length, value, until ``end``.
    A zero length means null, and Java's map lookups cannot tell a null key or value from a
    missing one, so such entries are dropped."""
    fields: dict[str, str] = {}
    while pos < end:
        if end - pos < 2:
            raise FrameError("extFields entry is cut off before its key length")
        (key_length,) = _INT16.unpack_from(header, pos)
        key, pos = _read_string(header, pos + 2, key_length, end, "extFields key")
        if end - pos < 4:
            raise FrameError("extFields entry is cut off before its value length")
        (value_length,) = _INT32.unpack_from(header, pos)
        value, pos = _read_string(header, pos + 4, value_length, end, "extFields value")
        if key is not None and value is not None:
            fields[key] = value
    return fields


def _read_string(header: memoryview, pos: int, length: int, end: int, what: str) -> tuple[str | None, int]:
    if length == 0:
        return None, pos
    if length < 0:
        raise FrameError(f"{what} length {length} is negative")
    if length > end - pos:
        raise FrameError(f"{what} length {length} exceeds the {end - pos} bytes left")
    try:
        text = str(header[pos : pos + length], "utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError(f"{what} is not UTF-8: {exc.reason}") from None
    return text, pos + length
