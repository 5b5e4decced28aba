"""The JSON (fastjson) header of a remoting frame, serialize type 0: what every client we know
sends. Encoding writes fastjson's exact bytes for Java's RemotingCommand; decoding is as lenient
as fastjson (unknown keys ignored, missing numbers 0, non-string ``extFields`` values turned into
Java's text for them, unknown languages ``None``) and raises :class:`FrameError` where Java
closes the connection. No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import orjson

from namesrv.domain.codes import LANGUAGES
from namesrv.protocol.command import (
    INT32_MAX,
    INT32_MIN,
    LANGUAGE_CODES,
    SERIALIZE_JSON,
    FrameError,
    RemotingCommand,
    language_name,
    present,
)
from namesrv.protocol.fastjson import quote
from namesrv.protocol.headers import parse_java_int
from namesrv.protocol.lenient_json import JSONParseError, java_string

# ---- encoding -------------------------------------------------------------------------------


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """fastjson's bytes for Java's RemotingCommand (see :func:`namesrv.protocol.remoting.encode`)."""
    # Hand-rolled rather than a generic serializer: this runs for every reply, and the key
    # order and escaping are fixed by fastjson's output for this one class. One f-string is
    # measurably faster than assembling a list.
    ext = "" if cmd.ext_fields is None else f',"extFields":{_json_ext_fields(cmd.ext_fields)}'
    language = "" if cmd.language is None else f',"language":"{language_name(cmd.language)}"'
    remark = "" if cmd.remark is None else f',"remark":{quote(cmd.remark)}'
    return (
        f'{{"code":{cmd.code:d}{ext},"flag":{cmd.flag:d}{language},"opaque":{cmd.opaque:d}{remark},'
        f'"serializeTypeCurrentRPC":"JSON","version":{cmd.version:d}}}'
    ).encode()


def _json_ext_fields(ext: Mapping[str, str | None]) -> str:
    return "{" + ",".join(f"{quote(key)}:{quote(value)}" for key, value in present(ext)) + "}"


# ---- decoding -------------------------------------------------------------------------------

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
            return decode_json_header(header)
        raw = header.tobytes()
        at = raw.find(_OPAQUE_KEY)
        if at < 0:
            return decode_json_header(header)
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
            if opaque <= INT32_MAX:
                code, flag, language, version, remark, ext = known
                return RemotingCommand(
                    code, opaque, flag, language, version, remark, None if ext is None else ext.copy()
                )
        cmd = decode_json_header(header)
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


HEADERS = JsonHeaderMemo()  # the one memo of a process: every connection's decoder uses it


def decode_json_header(header: memoryview) -> RemotingCommand:
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
        and INT32_MIN <= code <= INT32_MAX
        and INT32_MIN <= opaque <= INT32_MAX
        and INT32_MIN <= flag <= INT32_MAX
        and INT32_MIN <= version <= INT32_MAX
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
    if type(value) is int and INT32_MIN <= value <= INT32_MAX:
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
        return value if value in LANGUAGE_CODES else None
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
