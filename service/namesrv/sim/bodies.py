"""REGISTER_BROKER bodies as brokers write them (the inverse of protocol.register_body)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from namesrv.domain.model import DataVersion, TopicConfig
from namesrv.protocol.fastjson import dumps
from namesrv.protocol.render import data_version_json, data_version_obj


def topic_config_obj(tc: TopicConfig) -> dict[str, Any]:
    return {
        "attributes": dict(tc.attributes),
        "order": tc.order,
        "perm": tc.perm,
        "readQueueNums": tc.readQueueNums,
        "topicFilterType": tc.topicFilterType,
        "topicName": tc.topicName,
        "topicSysFlag": tc.topicSysFlag,
        "writeQueueNums": tc.writeQueueNums,
    }


def wrapper_obj(topics: Mapping[str, TopicConfig], version: DataVersion) -> dict[str, Any]:
    return {
        "dataVersion": data_version_obj(version),
        "topicConfigTable": {n: topic_config_obj(t) for n, t in topics.items()},
    }


def register_body_json(
    topics: Mapping[str, TopicConfig],
    version: DataVersion,
    filters: Sequence[str] = (),
    mappings: Mapping[str, Any] | None = None,
) -> bytes:
    """``RegisterBrokerBody.encode(false)``: fastjson default JSON, as 5.x brokers send it."""
    wrapper = wrapper_obj(topics, version)
    wrapper["mappingDataVersion"] = data_version_obj(DataVersion())
    wrapper["topicQueueMappingDetailMap"] = {}
    wrapper["topicQueueMappingInfoMap"] = dict(mappings or {})
    return dumps({"filterServerList": list(filters), "topicConfigSerializeWrapper": wrapper}).encode()


def legacy_body_json(topics: Mapping[str, TopicConfig], version: DataVersion) -> bytes:
    """A TopicConfigSerializeWrapper body, as brokers before 3.0.11 (request version < 37) send it."""
    return dumps(wrapper_obj(topics, version)).encode()


def _text(out: bytearray, text: str) -> None:
    data = text.encode()
    out += struct.pack(">i", len(data)) + data


def register_body_compressed(
    topics: Mapping[str, TopicConfig],
    version: DataVersion,
    filters: Sequence[str] = (),
    mappings: Mapping[str, Any] | None = None,
    *,
    with_mappings: bool = True,
) -> bytes:
    """``RegisterBrokerBody.encode(true)``: zlib over length-prefixed parts; topicSysFlag and
    order are not carried. ``with_mappings`` is False for brokers older than 5.0.0."""
    out = bytearray()
    _text(out, data_version_json(version))
    out += struct.pack(">i", len(topics))
    for tc in topics.values():
        _text(
            out,
            f"{tc.topicName} {tc.readQueueNums} {tc.writeQueueNums} {tc.perm} {tc.topicFilterType} "
            f"{dumps(dict(tc.attributes))}",
        )
    _text(out, dumps(list(filters)))
    if with_mappings:
        infos = list((mappings or {}).values())
        out += struct.pack(">i", len(infos))
        for info in infos:
            _text(out, dumps(info))
    return zlib.compress(bytes(out), 9)
