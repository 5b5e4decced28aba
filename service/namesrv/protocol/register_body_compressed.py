"""REGISTER_BROKER bodies sent with ``compressed=true``: a zlib stream of big-endian int32
length-prefixed parts (``RegisterBrokerBody.encode(true)``), each topic as ``TopicConfig.encode()``
text, so ``topicSysFlag`` and ``order`` are lost. No I/O.
"""

from __future__ import annotations

import zlib
from typing import Any

from namesrv.domain.codes import Version
from namesrv.domain.model import TopicConfig, TopicConfigWrapper
from namesrv.protocol import lenient_json
from namesrv.protocol.headers import parse_java_int
from namesrv.protocol.register_body_json import (
    TOPIC_FILTER_TYPES,
    BodyDecodeError,
    FilterServers,
    as_body_error,
    parse_object,
    read_data_version,
    read_filter_servers,
    read_kept_object,
    read_string_map,
)

# A compressed body larger than this once inflated is refused (a zip bomb, not a broker: ten
# thousand topics inflate to well under a megabyte).
MAX_INFLATED_BODY = 64 * 1024 * 1024


def decode_compressed(body: bytes, *, version: int, now_ms: int) -> tuple[TopicConfigWrapper, FilterServers]:
    """``RegisterBrokerBody.decode(data, compressed=true, brokerVersion)``."""
    data = _Reader(_inflate(body))
    data_version = read_data_version(
        parse_object(data.read_text("dataVersion"), "dataVersion"), now_ms, "dataVersion"
    )
    table: dict[str, TopicConfig] = {}
    # Java loops `for (i = 0; i < count; i++)`: a negative count reads no topics. A huge one
    # cannot run long, since every round consumes at least 4 bytes or fails.
    for index in range(data.read_int("topic count")):
        config = _topic_config_from_text(data.read_text(f"topic config #{index}"))
        table[config.topicName] = config
    filters = _filter_servers_from_text(data.read_text("filterServerList"))
    mappings: dict[str, dict[str, Any]] = {}
    if version >= Version.V5_0_0:  # older brokers do not write this section
        for index in range(data.read_int("mapping count")):
            where = f"topicQueueMappingInfo #{index}"
            info = read_kept_object(parse_object(data.read_text(where), where), where)
            topic = info.get("topic")
            if topic is None:
                raise BodyDecodeError(f"{where} has no topic")
            with as_body_error(where):
                mappings[lenient_json.java_string(topic)] = info
    return TopicConfigWrapper(table, data_version, mappings), filters


def _inflate(body: bytes) -> bytes:
    """zlib-inflate at most MAX_INFLATED_BODY bytes. A stream cut short is not an error by
    itself: like Java's InflaterInputStream, we only fail when a read runs out of data."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(body, MAX_INFLATED_BODY)
    except zlib.error as exc:
        raise BodyDecodeError(f"compressed body is not a valid zlib stream: {exc}") from None
    if inflater.unconsumed_tail or (len(data) >= MAX_INFLATED_BODY and not inflater.eof):
        raise BodyDecodeError(f"compressed body inflates to more than {MAX_INFLATED_BODY} bytes")
    return data


class _Reader:
    """Big-endian int32 lengths and the UTF-8 text they prefix, with every length checked."""

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def read_int(self, what: str) -> int:
        if len(self._data) - self._pos < 4:
            raise BodyDecodeError(f"compressed body ends before the length of {what}")
        value = int.from_bytes(self._data[self._pos : self._pos + 4], "big", signed=True)
        self._pos += 4
        return value

    def read_text(self, what: str) -> str:
        length = self.read_int(what)
        if length < 0:
            raise BodyDecodeError(f"compressed body gives {what} a negative length {length}")
        if length > len(self._data) - self._pos:
            raise BodyDecodeError(
                f"compressed body ends inside {what} ({length} bytes announced, "
                f"{len(self._data) - self._pos} left)"
            )
        raw = self._data[self._pos : self._pos + length]
        self._pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BodyDecodeError(f"{what} is not UTF-8: {exc.reason}") from None


def _topic_config_from_text(text: str) -> TopicConfig:
    """``TopicConfig.decode``: ``"name read write perm filterType [attributesJson]"``."""
    parts = text.split(" ")
    while parts and not parts[-1]:  # Java's String.split drops trailing empty strings
        parts.pop()
    if len(parts) < 5:
        raise BodyDecodeError(f"topic config {text[:100]!r} has fewer than 5 space-separated fields")
    name, read, write, perm, filter_type = parts[:5]
    numbers = [parse_java_int(field) for field in (read, write, perm)]
    if None in numbers:
        raise BodyDecodeError(f"topic config {text[:100]!r}: queue numbers and perm must be integers")
    if filter_type not in TOPIC_FILTER_TYPES:
        raise BodyDecodeError(f"topic config {text[:100]!r}: unknown topicFilterType {filter_type[:40]!r}")
    fields = {
        "topicName": name,
        "readQueueNums": numbers[0],
        "writeQueueNums": numbers[1],
        "perm": numbers[2],
        "topicFilterType": filter_type,
        "attributes": _attributes_from_text(parts[5]) if len(parts) > 5 else {},
    }
    with as_body_error(f"topic config {text[:100]!r}"):
        return TopicConfig.from_obj(fields, name)


def _attributes_from_text(text: str) -> dict[str, str]:
    """Java ignores attributes it cannot parse (a value with a space splits the JSON apart)."""
    try:
        return read_string_map(lenient_json.loads(text), "attributes")
    except ValueError:
        return {}


def _filter_servers_from_text(text: str) -> FilterServers:
    """``JSON.parseArray(text, String.class)``; Java logs a parse failure and keeps ``[]``,
    and parseArray gives null for ``null`` or empty text."""
    if not text.strip() or text.strip() == "null":
        return None
    try:
        return read_filter_servers(lenient_json.loads(text))
    except ValueError:
        return ()
