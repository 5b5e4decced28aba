"""REGISTER_BROKER bodies sent with ``compressed=true``: a zlib stream of big-endian int32
length-prefixed parts (``RegisterBrokerBody.encode(true)``), each topic as ``TopicConfig.encode()``
text, so ``topicSysFlag`` and ``order`` are lost. No I/O.

The stream is inflated a chunk at a time and read part by part, never inflated whole: a body
of 64 KB can inflate to 64 MB (a zip bomb), and such a bomb announces a part far longer than
any real one, so it is refused after its first few inflated bytes. Two bounds hold whatever
the stream says: every part is at most :data:`MAX_PART_BYTES`, and the parts together at most
``max_inflated`` bytes (``registerBodyMaxInflatedBytes``). What the decode builds is reported
as it goes through ``charge`` (see :class:`BodyLimits`), which may stop it.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from namesrv.domain.codes import Version
from namesrv.domain.model import MAX_NAME_LENGTH, PERM_MAX, QUEUE_NUMS_MAX, TopicConfig, TopicConfigWrapper
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

# The longest part read. Real parts are far shorter: a DataVersion is about 60 bytes, a topic's
# text at most a 255-character name, three numbers, its filter type and a few attributes; the
# longest is a static topic's TopicQueueMappingInfo, whose queue map takes about 10 bytes per
# queue (a million bytes is 100,000 queues on one broker).
MAX_PART_BYTES = 1 << 20
# Inflated per step: small, so that a bomb is refused having inflated this much, not megabytes.
INFLATE_CHUNK = 64 * 1024
# Compressed input handed to zlib per step: what zlib cannot use yet comes back as a copy
# (``unconsumed_tail``), so the body is fed in slices rather than whole.
INPUT_CHUNK = 16 * 1024
# The memory one topic of this layout holds once decoded, at most: its TopicConfig, name and
# attributes map (measured with tracemalloc: 300 bytes for a short name and no attribute, 840
# for a 127-character name and two attributes, text included).
TOPIC_BYTES = 768
# What a real body's decode holds per byte on the wire, about: 100,000 topics compress to 276 KB
# and hold 85 MB (inflated text plus TOPIC_BYTES each). A decode reserves this much up front
# and charges beyond it as it goes, so only bodies unlike a broker's have to ask for more.
COST_PER_COMPRESSED_BYTE = 320
# Charged ahead in steps of this many bytes, so that a 100,000-topic body asks the budget a
# few hundred times, not once per topic.
CHARGE_STEP = 256 * 1024
# A 100,000-topic body of 64-character names with one attribute inflates to 11.4 MB (the
# largest real one measured; 127-character names and two attributes, Java's longest names,
# 19.7 MB): 32 MiB leaves room for more topics or longer ones than that.
DEFAULT_MAX_INFLATED = 32 * 1024 * 1024


class BodyTooLarge(BodyDecodeError):
    """The body would inflate past ``registerBodyMaxInflatedBytes`` (``limit`` names it)."""

    limit = "registerBodyMaxInflatedBytes"


def _no_charge(nbytes: int) -> None:
    return None


@dataclass(frozen=True)
class BodyLimits:
    """What one decode may use. ``charge(n)`` is called ahead of building ``n`` more bytes of
    decoded data (in steps of :data:`CHARGE_STEP`) and may raise to stop the decode; the
    exception goes through unchanged (it must not be a ValueError)."""

    max_inflated: int = DEFAULT_MAX_INFLATED
    charge: Callable[[int], None] = _no_charge


def decode_compressed(
    body: bytes, *, version: int, now_ms: int, limits: BodyLimits | None = None
) -> tuple[TopicConfigWrapper, FilterServers]:
    """``RegisterBrokerBody.decode(data, compressed=true, brokerVersion)``."""
    data = _InflatingReader(body, limits or BodyLimits())
    data_version = read_data_version(
        parse_object(data.read_text("dataVersion"), "dataVersion"), now_ms, "dataVersion"
    )
    table: dict[str, TopicConfig] = {}
    # Java loops `for (i = 0; i < count; i++)`: a negative count reads no topics. A huge one
    # cannot run long, since every round consumes at least 4 bytes or fails.
    for index in range(data.read_int("topic count")):
        text = data.read_text(f"topic config #{index}")
        data.owe(TOPIC_BYTES)
        config = _plain_topic_config(text) or _topic_config_from_text(text)
        table[config.topicName] = config
    filters = _filter_servers_from_text(data.read_text("filterServerList"))
    mappings: dict[str, dict[str, Any]] = {}
    if version >= Version.V5_0_0:  # older brokers do not write this section
        for index in range(data.read_int("mapping count")):
            where = f"topicQueueMappingInfo #{index}"
            text = data.read_text(where)
            data.owe(8 * len(text))  # a JSON map of small numbers: objects of ~8x its text
            info = read_kept_object(parse_object(text, where), where)
            topic = info.get("topic")
            if topic is None:
                raise BodyDecodeError(f"{where} has no topic")
            with as_body_error(where):
                mappings[lenient_json.java_string(topic)] = info
    return TopicConfigWrapper(table, data_version, mappings), filters


class _InflatingReader:
    """Big-endian int32 lengths and the UTF-8 text they prefix, inflated as they are read, with
    every length checked before its bytes are."""

    __slots__ = (
        "_body",
        "_buf",
        "_charged",
        "_fed",
        "_inflater",
        "_limits",
        "_owed",
        "_pending",
        "_pos",
        "_read",
    )

    def __init__(self, body: bytes, limits: BodyLimits) -> None:
        self._inflater = zlib.decompressobj()
        self._body = body
        self._fed = 0  # bytes of the body handed to the inflater
        self._pending = b""  # of those, what it has not used yet
        self._buf = bytearray()
        self._pos = 0  # next unread byte of _buf
        self._read = 0  # inflated bytes consumed by parts
        self._limits = limits
        self._owed = 0  # decoded bytes built (or about to be)
        self._charged = 0  # of which the budget was charged ahead

    def owe(self, nbytes: int) -> None:
        """``nbytes`` more of decoded data are about to be built: charge the budget ahead."""
        self._owed += nbytes
        if self._owed > self._charged:
            step = max(CHARGE_STEP, self._owed - self._charged)
            self._limits.charge(step)
            self._charged += step

    def read_int(self, what: str) -> int:
        raw = self._take(4, what)
        if raw is None:
            raise BodyDecodeError(f"compressed body ends before the length of {what}")
        return int.from_bytes(raw, "big", signed=True)

    def read_text(self, what: str) -> str:
        length = self.read_int(what)
        if length < 0:
            raise BodyDecodeError(f"compressed body gives {what} a negative length {length}")
        limit = self._limits.max_inflated
        if self._read + length > limit:
            raise BodyTooLarge(
                f"compressed body gives {what} a length of {length} bytes: it would inflate to more "
                f"than {limit} bytes (registerBodyMaxInflatedBytes)"
            )
        if length > MAX_PART_BYTES:
            raise BodyDecodeError(
                f"compressed body gives {what} a length of {length} bytes; no real part is longer "
                f"than {MAX_PART_BYTES}"
            )
        raw = self._take(length, what)
        if raw is None:
            raise BodyDecodeError(
                f"compressed body ends inside {what} ({length} bytes announced, "
                f"{len(self._buf) - self._pos} left)"
            )
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BodyDecodeError(f"{what} is not UTF-8: {exc.reason}") from None

    def _take(self, n: int, what: str) -> bytearray | None:
        """The next ``n`` inflated bytes; None when the stream ends first (which is not an error
        by itself: like Java's InflaterInputStream, only a read that runs out of data fails)."""
        if self._read + n > self._limits.max_inflated:
            raise BodyTooLarge(
                f"compressed body inflates to more than {self._limits.max_inflated} bytes at {what} "
                "(registerBodyMaxInflatedBytes)"
            )
        while len(self._buf) - self._pos < n:
            if not self._inflate_more():
                return None
        self.owe(n)
        raw = self._buf[self._pos : self._pos + n]
        self._pos += n
        self._read += n
        if self._pos >= INFLATE_CHUNK:  # drop what was read, so the buffer stays small
            del self._buf[: self._pos]
            self._pos = 0
        return raw

    def _inflate_more(self) -> bool:
        """Inflate up to one more chunk; False when the stream has nothing more to give."""
        while not self._inflater.eof:
            data = self._pending
            if not data and self._fed < len(self._body):
                data = self._body[self._fed : self._fed + INPUT_CHUNK]
                self._fed += len(data)
            try:
                # With no input left, the call still drains what zlib holds back.
                out = self._inflater.decompress(data, INFLATE_CHUNK)
            except zlib.error as exc:
                raise BodyDecodeError(f"compressed body is not a valid zlib stream: {exc}") from None
            self._pending = self._inflater.unconsumed_tail
            if out:
                self._buf += out
                return True
            if len(self._pending) == len(data) or (not self._pending and self._fed >= len(self._body)):
                return False  # no input left, or zlib used none of it
        return False


def _plain_topic_config(text: str) -> TopicConfig | None:
    """The text every real broker writes (``name 16 16 6 SINGLE_TAG {}``, maybe with string
    attributes), read without the general path's per-field helpers (with them a 100,000-topic
    body took 3.3 s to decode, 0.8 s without); None sends anything else to
    :func:`_topic_config_from_text`, which accepts exactly what this does and builds the same
    value."""
    parts = text.split(" ")
    if not 5 <= len(parts) <= 6 or not text.isascii():
        return None
    name, read, write, perm, filter_type = parts[:5]
    attributes_text = parts[5] if len(parts) == 6 else "{}"  # brokers before 5.0 write none
    if not (
        read.isdigit() and write.isdigit() and perm.isdigit() and len(read) + len(write) + len(perm) < 16
    ):
        return None
    r, w, p = int(read), int(write), int(perm)
    if (
        r > QUEUE_NUMS_MAX
        or w > QUEUE_NUMS_MAX
        or p > PERM_MAX
        or filter_type not in TOPIC_FILTER_TYPES
        or not 0 < len(name) <= MAX_NAME_LENGTH
        or not name.isprintable()
    ):
        return None
    if attributes_text == "{}":
        return TopicConfig(name, r, w, p, filter_type)
    try:
        attributes = orjson.loads(attributes_text)
    except orjson.JSONDecodeError:
        return None
    if type(attributes) is not dict or not all(type(v) is str for v in attributes.values()):
        return None
    return TopicConfig(name, r, w, p, filter_type, attributes=attributes)


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
