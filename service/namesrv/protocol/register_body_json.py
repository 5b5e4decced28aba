"""REGISTER_BROKER bodies in JSON (fastjson DEFAULT dialect, read leniently), and the field
decoders the compressed layout shares with them: DataVersion, topic configs, static-topic
mapping infos, filter servers. See :mod:`namesrv.protocol.register_body` for the shapes. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from namesrv.domain.errors import BadRequest
from namesrv.domain.model import DataVersion, TopicConfig, TopicConfigWrapper
from namesrv.protocol import lenient_json
from namesrv.protocol.register_body_typed import WellFormed, decode_well_formed, in_bounds

# Nesting allowed inside values kept as plain data (TopicQueueMappingInfo has 2 levels). The
# rest of the service renders them recursively, which must stay far from the recursion limit.
MAX_KEPT_DEPTH = 32
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")  # TopicFilterType, in ordinal order

FilterServers = tuple[str, ...] | None


class BodyDecodeError(ValueError):
    """Java would fail the registration: code 1, "Failed to decode RegisterBrokerBody"."""


def empty_wrapper() -> TopicConfigWrapper:
    """Java's stand-in when there is no body: an empty table with DataVersion 0/0/0."""
    return TopicConfigWrapper({}, DataVersion(counter=0, stateVersion=0, timestamp=0))


def decode_json(body: bytes, *, now_ms: int) -> tuple[TopicConfigWrapper, FilterServers]:
    typed = decode_well_formed(body)
    if typed is not None:
        return _from_typed(typed, now_ms)
    return decode_json_carefully(body, now_ms=now_ms)


def decode_json_carefully(body: bytes, *, now_ms: int) -> tuple[TopicConfigWrapper, FilterServers]:
    """Any body fastjson would read (bare keys, numbers as strings...), field by field."""
    obj = parse_object(body, "RegisterBrokerBody")
    wrapper_obj = obj.get("topicConfigSerializeWrapper")
    if wrapper_obj is None:
        # Absent: the field's initial, empty wrapper. An explicit null reaches Java's
        # RouteInfoManager as null, which registers the broker without touching its topics;
        # our return type cannot say that, so both get the empty wrapper.
        wrapper = TopicConfigWrapper({}, DataVersion(timestamp=now_ms))
    else:
        wrapper = read_wrapper(wrapper_obj, now_ms, with_mappings=True, where="topicConfigSerializeWrapper")
    filters: FilterServers = ()  # the field's initial value when the key is absent
    if "filterServerList" in obj:
        filters = read_filter_servers(obj["filterServerList"])
    return wrapper, filters


def _from_typed(typed: WellFormed, now_ms: int) -> tuple[TopicConfigWrapper, FilterServers]:
    """The rest of a well-formed body, read by the same functions as in :func:`decode_json`."""
    where = "topicConfigSerializeWrapper"
    wrapper = TopicConfigWrapper(
        topicConfigTable=typed.topic_config_table,
        dataVersion=read_data_version(typed.data_version, now_ms, f"{where}.dataVersion"),
        topicQueueMappingInfoMap=_mapping_infos(typed.mappings, f"{where}.topicQueueMappingInfoMap"),
    )
    filters = read_filter_servers(typed.filter_servers) if typed.has_filter_servers else ()
    return wrapper, filters


def parse_object(data: bytes | str, what: str) -> dict[str, Any]:
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


def read_wrapper(
    obj: Any, now_ms: int, *, with_mappings: bool = False, where: str = "TopicConfigSerializeWrapper"
) -> TopicConfigWrapper:
    """``TopicConfigSerializeWrapper`` (``with_mappings``: ``TopicConfigAndMappingSerializeWrapper``,
    the class a ``RegisterBrokerBody`` holds)."""
    obj = _expect_object(obj, where)
    return TopicConfigWrapper(
        topicConfigTable=read_topic_config_table(obj.get("topicConfigTable"), f"{where}.topicConfigTable"),
        dataVersion=read_data_version(obj.get("dataVersion"), now_ms, f"{where}.dataVersion"),
        topicQueueMappingInfoMap=(
            _mapping_infos(obj.get("topicQueueMappingInfoMap"), f"{where}.topicQueueMappingInfoMap")
            if with_mappings
            else {}
        ),
    )


def read_data_version(value: Any, now_ms: int, where: str) -> DataVersion:
    """A DataVersion as fastjson fills one: the fields it lacks keep their initial values, and
    Java initialises ``timestamp`` to the current time."""
    if value is None:
        return DataVersion(timestamp=now_ms)
    obj = _expect_object(value, where)
    if obj.get("timestamp") is None:
        obj = {**obj, "timestamp": now_ms}
    with as_body_error(where):
        return DataVersion.from_obj(obj, where)


def read_topic_config_table(value: Any, where: str) -> dict[str, TopicConfig]:
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
        and type(read) is int
        and type(write) is int
        and type(perm) is int
        and type(flag) is int
        and type(filter_type) is str
        and type(order) is bool
        and (
            not attributes or (type(attributes) is dict and all(type(v) is str for v in attributes.values()))
        )
    ):
        config = TopicConfig(
            name, read, write, perm, filter_type, flag, order, dict(attributes) if attributes else {}
        )
        if in_bounds(config):
            return config
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
    attributes = read_string_map(obj.get("attributes"), f"{where}[{key!r}].attributes")
    with as_body_error(f"{where}[{key!r}]"):
        return TopicConfig.from_obj({**obj, "topicFilterType": filter_type, "attributes": attributes}, key)


def read_string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    obj = _expect_object(value, where)
    with as_body_error(where):
        return {key: lenient_json.java_string(item) for key, item in obj.items() if item is not None}


def _mapping_infos(value: Any, where: str) -> dict[str, dict[str, Any]]:
    """``topicQueueMappingInfoMap``: topic -> TopicQueueMappingInfo, kept as plain data."""
    if value is None:
        return {}
    infos: dict[str, dict[str, Any]] = {}
    for topic, info in _expect_object(value, where).items():
        if info is not None:
            infos[topic] = read_kept_object(info, f"{where}[{topic!r}]")
    return infos


def read_kept_object(value: Any, where: str) -> dict[str, Any]:
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


def read_filter_servers(value: Any) -> FilterServers:
    if value is None:
        return None
    if type(value) is not list:
        raise BodyDecodeError(f"filterServerList must be a JSON array, got {_json_kind(value)}")
    with as_body_error("filterServerList"):
        return tuple(lenient_json.java_string(item) for item in value if item is not None)


@contextmanager
def as_body_error(where: str) -> Iterator[None]:
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
