"""The JSON REGISTER_BROKER body every real broker sends, decoded in one typed pass.

A 10,000-topic body is 1.7 MB: parsing it into Python objects and then checking each topic config
field by field costs about 22 ms of a worker, most of a new broker's registration outside Redis.
msgspec parses straight into :class:`~namesrv.domain.model.TopicConfig` objects with the types
checked as it goes (about 4 ms); the bounds the types do not carry are checked after it. Anything
else (a missing field that has no default, a number where a name belongs, fastjson's bare keys,
an integer out of range, an unprintable name) makes :func:`decode_well_formed` answer None, and
the careful decoder (:mod:`namesrv.protocol.register_body_json`) decides, so both accept and
reject exactly the same bodies and build the same values. No I/O.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from namesrv.domain.model import MAX_NAME_LENGTH, TopicConfig

INT_MIN, INT_MAX = -(2**31), 2**31 - 1  # Java's int
_ABSENT = msgspec.Raw()


class _Wrapper(msgspec.Struct):
    topicConfigTable: dict[str, TopicConfig | None] | None = None
    # small: read by the careful decoder's own functions, from the bytes msgspec found for them
    dataVersion: msgspec.Raw = _ABSENT
    topicQueueMappingInfoMap: msgspec.Raw = _ABSENT


class _Body(msgspec.Struct):
    topicConfigSerializeWrapper: _Wrapper | None = None
    filterServerList: msgspec.Raw = _ABSENT


_DECODER = msgspec.json.Decoder(_Body)


class WellFormed(msgspec.Struct, frozen=True):
    """What the typed pass read: the topic table, and the raw JSON (None: absent) of the rest."""

    topic_config_table: dict[str, TopicConfig]
    data_version: Any
    mappings: Any
    filter_servers: Any
    has_filter_servers: bool


def decode_well_formed(body: bytes) -> WellFormed | None:
    """The body's parts, or None when the careful decoder must look at it."""
    try:
        parsed = _DECODER.decode(body)
    except (msgspec.MsgspecError, RecursionError):  # hostile nesting: the careful decoder says why
        return None
    wrapper = parsed.topicConfigSerializeWrapper
    if wrapper is None or wrapper.topicConfigTable is None:
        return None  # rare shapes with rules of their own
    table = wrapper.topicConfigTable
    if None in table.values():
        # as the careful decoder does: a null entry is no topic
        table = {key: config for key, config in table.items() if config is not None}
    # TopicConfig's field types carried the other bounds of in_bounds through the parse; a
    # concatenation is printable exactly when every name is, and one C call checks it.
    if not "".join([config.topicName for config in table.values()]).isprintable():  # type: ignore[union-attr]
        return None
    return WellFormed(
        table,  # type: ignore[arg-type]
        _value(wrapper.dataVersion),
        _value(wrapper.topicQueueMappingInfoMap),
        _value(parsed.filterServerList),
        len(parsed.filterServerList) > 0,
    )


def in_bounds(config: TopicConfig) -> bool:
    """The careful decoder's check of a topic config: TopicConfig's field constraints (which the
    typed pass checks while parsing) and a printable name."""
    name = config.topicName
    return (
        0 < len(name) <= MAX_NAME_LENGTH
        and name.isprintable()
        and 0 <= config.readQueueNums <= INT_MAX
        and 0 <= config.writeQueueNums <= INT_MAX
        and INT_MIN <= config.perm <= INT_MAX
        and INT_MIN <= config.topicSysFlag <= INT_MAX
    )


def _value(raw: msgspec.Raw) -> Any:
    return orjson.loads(bytes(raw)) if len(raw) else None
