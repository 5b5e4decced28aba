"""The change log's contract (``{ns}:events``): the entry kinds the Lua scripts append.

One source of truth for Python: the route cache's invalidation (:mod:`namesrv.registry.route_impact`)
and the history pipeline name kinds through this enum, and ``tests/unit/test_lua_contract.py``
reads the scripts and checks that they append exactly these kinds. Fields per kind are in
``lua/README.md`` ("Change log").
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import orjson


class EventKind(StrEnum):
    REGISTER = "register"
    REGISTER_QUEUES = "registerQueues"
    HEARTBEAT = "heartbeat"
    UNREGISTER = "unregister"  # unregisterBroker with reason 'unregister'
    CLOSE = "close"  # unregisterBroker with reason 'close' (connection closed or idle)
    EXPIRE = "expire"
    FENCED = "fenced"
    CLEAN_QUEUES = "cleanQueues"
    WIPE_PERM = "wipePerm"
    ADD_PERM = "addPerm"
    TOPIC_REGISTER = "topicRegister"
    TOPIC_DELETE = "topicDelete"
    KV_PUT = "kvPut"
    KV_DELETE = "kvDelete"
    CONFIG = "config"
    SILENCE = "silence"  # no worker reached Redis for a while: live deadlines moved by that long


# unregisterBroker appends its `reason` argument as the kind: these are the reasons it accepts.
REMOVAL_REASONS = (EventKind.UNREGISTER, EventKind.CLOSE)


def entry_key(entry_id: str) -> tuple[int, int]:
    """A change-log id ("ms-seq") as a comparable pair; ValueError when it is not one."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def upserts(fields: Mapping[str, str]) -> list[tuple[str, Any]]:
    """(topic, QueueData) of each queue an entry upserted, the QueueData decoded. A pair in
    ``upserted`` names its QueueData, or (``registerQueues``) the index of it in ``queueDatas``:
    a broker's topics mostly share one, written once per entry."""
    pairs = orjson.loads(fields.get("upserted") or "[]")
    shared = orjson.loads(fields["queueDatas"]) if fields.get("queueDatas") else []
    return [(topic, shared[qd] if type(qd) is int else qd) for topic, qd in pairs]
