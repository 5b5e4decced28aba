"""The body of REGISTER_BROKER (code 103), decoded as the Java NameServer does (§1.10), no I/O.

Three shapes, chosen by the request's ``version`` and header ``compressed`` flag:

* ``version < 37`` (V3_0_11): ``TopicConfigSerializeWrapper`` JSON. A client that leaves
  ``version`` at 0 lands here, and a ``RegisterBrokerBody`` read this way yields no topics and a
  fresh ``DataVersion`` (timestamp = now), because fastjson ignores the unknown keys.
* ``version >= 37``: ``RegisterBrokerBody`` JSON ``{"filterServerList":[...],
  "topicConfigSerializeWrapper":{...}}``;
* or, with ``compressed=true``, a zlib stream of length-prefixed parts in which each topic is
  ``TopicConfig.encode()`` text, so ``topicSysFlag`` and ``order`` are lost.

Java brokers write fastjson's DEFAULT dialect (bare integer keys in static-topic maps), hence
:mod:`namesrv.protocol.lenient_json`. Like fastjson, unknown fields are ignored and a missing
``timestamp`` of a DataVersion is "now"; a value of the wrong type, which makes Java answer
"Failed to decode RegisterBrokerBody", raises :class:`BodyDecodeError`.
"""

from __future__ import annotations

import zlib

from namesrv.domain.codes import Version
from namesrv.domain.model import TopicConfig, TopicConfigWrapper
from namesrv.protocol.register_body_compressed import MAX_INFLATED_BODY, decode_compressed
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
    "MAX_INFLATED_BODY",
    "BodyDecodeError",
    "FilterServers",
    "crc32_masked",
    "crc32_matches",
    "decode_register_body",
    "decode_topic_config_table",
]


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
    body: bytes | None, *, version: int, compressed: bool, now_ms: int
) -> tuple[TopicConfigWrapper, FilterServers]:
    """``(wrapper, filterServerList)`` as ``DefaultRequestProcessor.registerBroker`` gets them.

    ``filterServerList`` is ``None`` for ``version < 37`` (that path has none) and when the
    body says ``null``. ``now_ms`` stands in for ``System.currentTimeMillis()`` in the
    DataVersion fastjson creates when the body has none."""
    if version < Version.V3_0_11:
        if not body:
            return empty_wrapper(), None
        return read_wrapper(parse_object(body, "TopicConfigSerializeWrapper"), now_ms), None
    if not body:
        return empty_wrapper(), ()
    if compressed:
        return decode_compressed(body, version=version, now_ms=now_ms)
    return decode_json(body, now_ms=now_ms)


def decode_topic_config_table(data: bytes) -> dict[str, TopicConfig]:
    """A JSON ``topicConfigTable`` object on its own, decoded exactly as inside a body."""
    where = "topicConfigSerializeWrapper.topicConfigTable"
    return read_topic_config_table(parse_object(data, where), where)
