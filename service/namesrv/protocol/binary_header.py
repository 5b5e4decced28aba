"""The ROCKETMQ binary header of a remoting frame, serialize type 1 (``RocketMQSerializable``):
fixed fields, then length-prefixed remark and ``extFields``. No I/O.
"""

from __future__ import annotations

import struct

from namesrv.domain.codes import LANGUAGES
from namesrv.protocol.command import (
    INT16_MAX,
    INT16_MIN,
    INT32,
    LANGUAGE_CODES,
    SERIALIZE_ROCKETMQ,
    FrameError,
    RemotingCommand,
    language_name,
    present,
)

_INT16 = struct.Struct(">h")
# code, language, version, opaque, flag, remark length: RocketMQSerializable's fixed part
_BINARY_FIXED = struct.Struct(">hbhiii")


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """``RocketMQSerializable.rocketMQProtocolEncode``: empty strings are written as length 0,
    which the peer reads back as null."""
    for name in ("code", "version"):
        value = getattr(cmd, name)
        if not INT16_MIN <= value <= INT16_MAX:
            raise ValueError(f"{name}={value} does not fit the ROCKETMQ header's int16")
    if cmd.language is None:
        raise ValueError("the ROCKETMQ header needs a language (Java would throw a NullPointerException)")
    language = LANGUAGE_CODES[language_name(cmd.language)]
    remark = cmd.remark.encode() if cmd.remark else b""
    parts = [
        _BINARY_FIXED.pack(cmd.code, language, cmd.version, cmd.opaque, cmd.flag, len(remark)),
        remark,
    ]
    entries: list[bytes] = []
    for key, value in present(cmd.ext_fields or {}):
        key_bytes, value_bytes = key.encode(), value.encode()
        if len(key_bytes) > INT16_MAX:
            raise ValueError(f"extFields key of {len(key_bytes)} bytes does not fit an int16 length")
        entries += (_INT16.pack(len(key_bytes)), key_bytes, INT32.pack(len(value_bytes)), value_bytes)
    ext = b"".join(entries)
    parts += (INT32.pack(len(ext)), ext)
    return b"".join(parts)


def decode_binary_header(header: memoryview) -> RemotingCommand:
    """``RocketMQSerializable.rocketMQProtocolDecode``, with every length checked against the
    bytes actually left (Java's checks are looser, but it fails on an overrun all the same)."""
    if len(header) < _BINARY_FIXED.size + 4:
        raise FrameError(f"ROCKETMQ header of {len(header)} bytes is shorter than its fixed 21")
    code, language, version, opaque, flag, remark_length = _BINARY_FIXED.unpack_from(header, 0)
    pos = _BINARY_FIXED.size
    remark, pos = _read_string(header, pos, remark_length, len(header), "remark")
    if len(header) - pos < 4:
        raise FrameError("ROCKETMQ header ends before its extFields length")
    (ext_length,) = INT32.unpack_from(header, pos)
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
        (value_length,) = INT32.unpack_from(header, pos)
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
