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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from namesrv.domain.codes import Version
from namesrv.domain.errors import BadRequest
from namesrv.domain.model import MAX_NAME_LENGTH, DataVersion, TopicConfig, TopicConfigWrapper
from namesrv.protocol import lenient_json
from namesrv.protocol.headers import parse_java_int

__all__ = [
    "MAX_INFLATED_BODY",
    "BodyDecodeError",
    "crc32_masked",
    "crc32_matches",
    "decode_register_body",
    "decode_topic_config_table",
]

# A compressed body larger than this once inflated is refused (a zip bomb, not a broker: ten
# thousand topics inflate to well under a megabyte).
MAX_INFLATED_BODY = 64 * 1024 * 1024
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
# Nesting allowed inside values kept as plain data (TopicQueueMappingInfo has 2 levels). The
# rest of the service renders them recursively, which must stay far from the recursion limit.
MAX_KEPT_DEPTH = 32
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")  # TopicFilterType, in ordinal order

FilterServers = tuple[str, ...] | None


class BodyDecodeError(ValueError):
    """Java would fail the registration: code 1, "Failed to decode RegisterBrokerBody"."""


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
            return _empty_wrapper(), None
        return _wrapper(_parse_object(body, "TopicConfigSerializeWrapper"), now_ms), None
    if not body:
        return _empty_wrapper(), ()
    if compressed:
        return _decode_compressed(body, version=version, now_ms=now_ms)
    return _decode_json(body, now_ms=now_ms)


def decode_topic_config_table(data: bytes) -> dict[str, TopicConfig]:
    """A JSON ``topicConfigTable`` object on its own, decoded exactly as inside a body."""
    where = "topicConfigSerializeWrapper.topicConfigTable"
    return _topic_config_table(_parse_object(data, where), where)


def _empty_wrapper() -> TopicConfigWrapper:
    """Java's stand-in when there is no body: an empty table with DataVersion 0/0/0."""
    return TopicConfigWrapper({}, DataVersion(counter=0, stateVersion=0, timestamp=0))


# ---- JSON bodies ----------------------------------------------------------------------------


def _decode_json(body: bytes, *, now_ms: int) -> tuple[TopicConfigWrapper, FilterServers]:
    obj = _parse_object(body, "RegisterBrokerBody")
    wrapper_obj = obj.get("topicConfigSerializeWrapper")
    if wrapper_obj is None:
        # Absent: the field's initial, empty wrapper. An explicit null reaches Java's
        # RouteInfoManager as null, which registers the broker without touching its topics;
        # our return type cannot say that, so both get the empty wrapper.
        wrapper = TopicConfigWrapper({}, DataVersion(timestamp=now_ms))
    else:
        wrapper = _wrapper(wrapper_obj, now_ms, with_mappings=True, where="topicConfigSerializeWrapper")
    filters: FilterServers = ()  # the field's initial value when the key is absent
    if "filterServerList" in obj:
        filters = _filter_servers(obj["filterServerList"])
    return wrapper, filters


def _parse_object(data: bytes | str, what: str) -> dict[str, Any]:
    try:
        obj = lenient_json.loads(data)
    except lenient_json.JSONParseError as exc:
        raise BodyDecodeError(f"{what}: {exc}") from None
    return _expect_object(obj, what)


def _expect_object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise BodyDecodeError(f"{where} must be a JSON object, got {_json_kind(value)}")
    return value


def _json_kind(value: Any) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return kinds.get(type(value), "a number")


def _wrapper(
    obj: Any, now_ms: int, *, with_mappings: bool = False, where: str = "TopicConfigSerializeWrapper"
) -> TopicConfigWrapper:
    """``TopicConfigSerializeWrapper`` (``with_mappings``: ``TopicConfigAndMappingSerializeWrapper``,
    the class a ``RegisterBrokerBody`` holds)."""
    obj = _expect_object(obj, where)
    return TopicConfigWrapper(
        topicConfigTable=_topic_config_table(obj.get("topicConfigTable"), f"{where}.topicConfigTable"),
        dataVersion=_data_version(obj.get("dataVersion"), now_ms, f"{where}.dataVersion"),
        topicQueueMappingInfoMap=(
            _mapping_infos(obj.get("topicQueueMappingInfoMap"), f"{where}.topicQueueMappingInfoMap")
            if with_mappings
            else {}
        ),
    )


def _data_version(value: Any, now_ms: int, where: str) -> DataVersion:
    """A DataVersion as fastjson fills one: the fields it lacks keep their initial values, and
    Java initialises ``timestamp`` to the current time."""
    if value is None:
        return DataVersion(timestamp=now_ms)
    obj = _expect_object(value, where)
    if obj.get("timestamp") is None:
        obj = {**obj, "timestamp": now_ms}
    with _as_body_error(where):
        return DataVersion.from_obj(obj, where)


def _topic_config_table(value: Any, where: str) -> dict[str, TopicConfig]:
    """Keyed by the map key, as Java's table is; each config keeps its own ``topicName``
    (the key when it has none)."""
    if value is None:
        return {}
    table: dict[str, TopicConfig] = {}
    for key, config in _expect_object(value, where).items():
        if config is not None:
            table[key] = _topic_config(_expect_object(config, f"{where}[{key!r}]"), key, where)
    return table


def _well_formed_topic_config(obj: dict[str, Any], key: str) -> TopicConfig | None:
    """The case every real broker sends, checked inline (10k topics per body make the general
    path's per-field helpers the main cost); None sends anything else to the careful path, which
    accepts and rejects exactly the same inputs."""
    name = obj.get("topicName", key)
    read, write = obj.get("readQueueNums", 16), obj.get("writeQueueNums", 16)
    perm, flag = obj.get("perm", 6), obj.get("topicSysFlag", 0)
    filter_type, order, attributes = (
        obj.get("topicFilterType", "SINGLE_TAG"),
        obj.get("order", False),
        obj.get("attributes"),
    )
    if (
        type(name) is str
        and 0 < len(name) <= MAX_NAME_LENGTH
        and name.isprintable()
        and type(read) is int
        and 0 <= read <= _INT_MAX
        and type(write) is int
        and 0 <= write <= _INT_MAX
        and type(perm) is int
        and _INT_MIN <= perm <= _INT_MAX
        and type(flag) is int
        and _INT_MIN <= flag <= _INT_MAX
        and type(filter_type) is str
        and type(order) is bool
        and (
            not attributes or (type(attributes) is dict and all(type(v) is str for v in attributes.values()))
        )
    ):
        return TopicConfig(
            name, read, write, perm, filter_type, flag, order, dict(attributes) if attributes else {}
        )
    return None


def _topic_config(obj: dict[str, Any], key: str, where: str) -> TopicConfig:
    fast = _well_formed_topic_config(obj, key)
    if fast is not None:
        return fast
    # fastjson reads an enum from its ordinal too, and Map<String, String> values from any
    # scalar; TopicConfig.from_obj does the rest (and ignores fields it does not know).
    filter_type = obj.get("topicFilterType")
    if type(filter_type) is int and 0 <= filter_type < len(TOPIC_FILTER_TYPES):
        filter_type = TOPIC_FILTER_TYPES[filter_type]
    attributes = _string_map(obj.get("attributes"), f"{where}[{key!r}].attributes")
    with _as_body_error(f"{where}[{key!r}]"):
        return TopicConfig.from_obj({**obj, "topicFilterType": filter_type, "attributes": attributes}, key)


def _string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    obj = _expect_object(value, where)
    with _as_body_error(where):
        return {key: lenient_json.java_string(item) for key, item in obj.items() if item is not None}


def _mapping_infos(value: Any, where: str) -> dict[str, dict[str, Any]]:
    """``topicQueueMappingInfoMap``: topic -> TopicQueueMappingInfo, kept as plain data."""
    if value is None:
        return {}
    infos: dict[str, dict[str, Any]] = {}
    for topic, info in _expect_object(value, where).items():
        if info is not None:
            infos[topic] = _kept_object(info, f"{where}[{topic!r}]")
    return infos


def _kept_object(value: Any, where: str) -> dict[str, Any]:
    obj = _expect_object(value, where)
    _check_depth(obj, where)
    return obj


def _check_depth(value: Any, where: str) -> None:
    """Iteratively, so that hostile nesting cannot raise RecursionError here either."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > MAX_KEPT_DEPTH:
            raise BodyDecodeError(f"{where} is nested deeper than {MAX_KEPT_DEPTH} levels")
        if type(item) is dict:
            pending.extend((child, depth + 1) for child in item.values())
        elif type(item) is list:
            pending.extend((child, depth + 1) for child in item)


def _filter_servers(value: Any) -> FilterServers:
    if value is None:
        return None
    if type(value) is not list:
        raise BodyDecodeError(f"filterServerList must be a JSON array, got {_json_kind(value)}")
    with _as_body_error("filterServerList"):
        return tuple(lenient_json.java_string(item) for item in value if item is not None)


@contextmanager
def _as_body_error(where: str) -> Iterator[None]:
    """The domain model's validation errors (and any stray ValueError), as what they mean
    here. BadRequest messages already say where; others get ``where`` in front."""
    try:
        yield
    except BodyDecodeError:
        raise
    except BadRequest as exc:
        raise BodyDecodeError(str(exc)) from exc
    except ValueError as exc:
        raise BodyDecodeError(f"{where}: {exc}") from exc


# ---- compressed bodies ----------------------------------------------------------------------


def _decode_compressed(body: bytes, *, version: int, now_ms: int) -> tuple[TopicConfigWrapper, FilterServers]:
    """``RegisterBrokerBody.decode(data, compressed=true, brokerVersion)``."""
    data = _Reader(_inflate(body))
    data_version = _data_version(
        _parse_object(data.read_text("dataVersion"), "dataVersion"), now_ms, "dataVersion"
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
            info = _kept_object(_parse_object(data.read_text(where), where), where)
            topic = info.get("topic")
            if topic is None:
                raise BodyDecodeError(f"{where} has no topic")
            with _as_body_error(where):
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
    with _as_body_error(f"topic config {text[:100]!r}"):
        return TopicConfig.from_obj(fields, name)


def _attributes_from_text(text: str) -> dict[str, str]:
    """Java ignores attributes it cannot parse (a value with a space splits the JSON apart)."""
    try:
        return _string_map(lenient_json.loads(text), "attributes")
    except ValueError:
        return {}


def _filter_servers_from_text(text: str) -> FilterServers:
    """``JSON.parseArray(text, String.class)``; Java logs a parse failure and keeps ``[]``,
    and parseArray gives null for ``null`` or empty text."""
    if not text.strip() or text.strip() == "null":
        return None
    try:
        return _filter_servers(lenient_json.loads(text))
    except ValueError:
        return ()
