"""The body of REGISTER_BROKER (code 103), decoded as the Java NameServer does (§1.10), no I/O.

Three shapes, chosen by the request's ``version`` and header ``compressed`` flag:

* ``version < 37`` (V3_0_11): ``TopicConfigSerializeWrapper`` JSON. A client that leaves
  ``version`` at 0 lands here, and a ``RegisterBrokerBody`` read this way yields no topics and a
  fresh ``DataVersion`` (timestamp = now), because fastjson ignores the unknown keys.
* ``version >= 37``: ``RegisterBrokerBody`` JSON ``{"filterServerList":[...],
  "topicConfigSerializeWrapper":{...}}``;
* or, with ``compressed=true``, a zlib stream of length-prefixed parts in which each topic is
  ``TopicConfig.encode()`` text, so ``topicSysFlag`` and ``order`` are lost. A 5.3.3 broker with
  ``compressedRegister=true`` sends that stream with ``compressed=false`` (its BrokerOuterAPI
  always sets the flag false): Java cannot decode it, we do, since no JSON body starts with a
  zlib header (see :func:`inflates`).

Java brokers write fastjson's DEFAULT dialect (bare integer keys in static-topic maps), hence
:mod:`namesrv.protocol.lenient_json`. Like fastjson, unknown fields are ignored and a missing
``timestamp`` of a DataVersion is "now"; a value of the wrong type, which makes Java answer
"Failed to decode RegisterBrokerBody", raises :class:`BodyDecodeError`.
"""

from __future__ import annotations

import re
import zlib

from namesrv.domain.codes import Version
from namesrv.domain.model import TopicConfig, TopicConfigWrapper
from namesrv.protocol.register_body_compressed import (
    COST_PER_COMPRESSED_BYTE,
    DEFAULT_MAX_INFLATED,
    BodyLimits,
    BodyTooLarge,
    decode_compressed,
)
from namesrv.protocol.register_body_json import (
    BodyDecodeError,
    FilterServers,
    decode_json,
    empty_wrapper,
    parse_object,
    read_topic_config_table,
    read_wrapper,
)

# The JSON layout and its field decoders are in register_body_json, the compressed one in
# register_body_compressed; this module picks the layout and is what callers import.
__all__ = [
    "DEFAULT_MAX_INFLATED",
    "BodyDecodeError",
    "BodyLimits",
    "BodyTooLarge",
    "FilterServers",
    "crc32_masked",
    "compressed_decode_estimate",
    "crc32_matches",
    "data_version_text",
    "decode_register_body",
    "decode_topic_config_table",
    "inflates",
    "json_decode_cost",
]

# The memory decoding a JSON body holds at its peak, at most, per JSON object ('{') it holds,
# besides the body itself (measured with tracemalloc: 180 bytes per object for a real broker's
# body, 340 for '"t1":{}' entries, 530 for topics each with an attributes map).
JSON_OBJECT_BYTES = 512
# zlib's first two bytes (RFC 1950): deflate (CM 8), a window of at most 32 KiB (CINFO <= 7),
# no preset dictionary (Java's Deflater uses none), and a check value that makes the pair a
# multiple of 31. A JSON body starts with '{' or whitespace, none of which can be CMF.
_DEFLATE, _MAX_CINFO, _FDICT = 8, 7, 0x20


def inflates(body: bytes | None, *, version: int, compressed: bool) -> bool:
    """Is the body read as the compressed layout? When the header says so, and (5.3.3's
    mistake, see the module) when it says not but the body is a zlib stream; never for
    ``version < 37``, which has no compressed layout."""
    if version < Version.V3_0_11 or not body:
        return False
    return compressed or _zlib_header(body)


def _zlib_header(body: bytes) -> bool:
    if len(body) < 2:
        return False
    cmf, flg = body[0], body[1]
    return (
        cmf & 0x0F == _DEFLATE and cmf >> 4 <= _MAX_CINFO and not flg & _FDICT and (cmf << 8 | flg) % 31 == 0
    )


def compressed_decode_estimate(body: bytes) -> int:
    """What decoding this compressed body holds in memory at its peak if it is like a real
    broker's; its decode charges what it really builds (:class:`BodyLimits`)."""
    return len(body) * COST_PER_COMPRESSED_BYTE


def json_decode_cost(body: bytes) -> int:
    """What decoding this JSON body holds in memory at its peak, at most: the body and an
    allowance per object. Counting objects reads the body once (about 1.4 ms per MB)."""
    return len(body) + JSON_OBJECT_BYTES * body.count(b"{")


def crc32_masked(body: bytes | None) -> int:
    """``UtilAll.crc32``: the CRC-32 with the sign bit cleared; 0 for no body."""
    return zlib.crc32(body) & 0x7FFFFFFF if body else 0


def crc32_matches(expected: int | None, body: bytes | None) -> bool:
    """The REGISTER_BROKER check on header ``bodyCrc32``, as Java does it: skipped when the
    header is absent or 0, else an exact match with :func:`crc32_masked`.

    A negative value (a client that sends the raw CRC as a signed int32, like ali-ons'
    ``zlib.crc32() | 0``) can never match a masked CRC, so Java answers "crc32 not match";
    so does this."""
    return not expected or expected == crc32_masked(body)


def decode_register_body(
    body: bytes | None, *, version: int, compressed: bool, now_ms: int, limits: BodyLimits | None = None
) -> tuple[TopicConfigWrapper, FilterServers]:
    """``(wrapper, filterServerList)`` as ``DefaultRequestProcessor.registerBroker`` gets them.

    ``filterServerList`` is ``None`` for ``version < 37`` (that path has none) and when the
    body says ``null``. ``now_ms`` stands in for ``System.currentTimeMillis()`` in the
    DataVersion fastjson creates when the body has none. ``limits`` bound a compressed body
    (a JSON one is as long as its frame allowed; see :func:`json_decode_cost`)."""
    if version < Version.V3_0_11:
        if not body:
            return empty_wrapper(), None
        return read_wrapper(parse_object(body, "TopicConfigSerializeWrapper"), now_ms), None
    if not body:
        return empty_wrapper(), ()
    if compressed:
        return decode_compressed(body, version=version, now_ms=now_ms, limits=limits)
    if _zlib_header(body):
        try:
            return decode_compressed(body, version=version, now_ms=now_ms, limits=limits)
        except BodyDecodeError as exc:
            raise type(exc)(
                f"body sent with compressed=false starts with a zlib header (a 5.3.3 broker's "
                f"compressedRegister), read as compressed: {exc}"
            ) from None
    return decode_json(body, now_ms=now_ms)


def decode_topic_config_table(data: bytes) -> dict[str, TopicConfig]:
    """A JSON ``topicConfigTable`` object on its own, decoded exactly as inside a body."""
    where = "topicConfigSerializeWrapper.topicConfigTable"
    return read_topic_config_table(parse_object(data, where), where)


# A DataVersion is a flat object of three numbers; a real one is under 100 bytes.
_DATA_VERSION = re.compile(rb'"dataVersion"\s*:\s*(\{[^{}]{0,512}\})')
_PROBE_BYTES = 64 * 1024  # where a body's DataVersion is looked for: its head, then its tail
_MAX_DATA_VERSION_TEXT = 4096


def data_version_text(body: bytes | None, *, version: int, compressed: bool) -> bytes | None:
    """The body's DataVersion as sent (its JSON text), read without decoding the topics, or
    None when it cannot be found cheaply. Equal texts from one broker mean one topic-config
    version: the batches of a split registration (5.x ``enableSplitRegistration``) share it.

    A JSON body keeps it before or after the topic table (fastjson orders keys by name, other
    writers may not), so only the first and last 64 KiB are searched; the compressed layout
    starts with it, so only a few KiB are inflated."""
    if not body:
        return None
    if inflates(body, version=version, compressed=compressed):
        try:
            head = zlib.decompressobj().decompress(body[:_PROBE_BYTES], 4 + _MAX_DATA_VERSION_TEXT)
        except zlib.error:
            return None
        length = int.from_bytes(head[:4], "big", signed=True) if len(head) >= 4 else -1
        return head[4 : 4 + length] if 0 < length <= len(head) - 4 else None
    for part in (body[:_PROBE_BYTES], body[-_PROBE_BYTES:]):
        found = _DATA_VERSION.search(part)
        if found:
            return found.group(1)
    return None
