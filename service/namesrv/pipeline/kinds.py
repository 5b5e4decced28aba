"""The change log's event kinds as the pipeline reads them, and the fields each kind must carry
(``lua/README.md``, "Change log"). No Spark here, so the unit tests check this contract against
:class:`~namesrv.store.changelog.EventKind` without a JVM."""

from __future__ import annotations

from collections.abc import Mapping

from namesrv.store.changelog import EventKind as K

MEMBER_KINDS: tuple[str, ...] = (K.REGISTER, K.HEARTBEAT, K.UNREGISTER, K.CLOSE, K.EXPIRE, K.FENCED)
REMOVAL_KINDS: tuple[str, ...] = (K.UNREGISTER, K.CLOSE, K.EXPIRE)
# Kinds that carry queue changes; all but the last (topicDelete) as an ``upserted`` list.
QUEUE_KINDS: tuple[str, ...] = (
    K.REGISTER_QUEUES,
    K.CLEAN_QUEUES,
    K.WIPE_PERM,
    K.ADD_PERM,
    K.TOPIC_REGISTER,
    K.TOPIC_DELETE,
)
OTHER_KINDS: tuple[str, ...] = (K.KV_PUT, K.KV_DELETE, K.CONFIG, K.SILENCE)
KNOWN_KINDS: tuple[str, ...] = MEMBER_KINDS + QUEUE_KINDS + OTHER_KINDS
# A register with result ok: it carries more fields than a refused or ignored one.
REGISTER_OK = "register:ok"
_MEMBER = ("cluster", "brokerName", "brokerAddr")

# Fields each kind must carry; REGISTER_OK adds to K.REGISTER.
REQUIRED: Mapping[str, tuple[str, ...]] = {
    K.REGISTER: ("result", *_MEMBER, "brokerId"),
    REGISTER_OK: ("epoch", "deadline", "timeoutMillis", "newSession", "brokerData"),
    K.REGISTER_QUEUES: (*_MEMBER, "upserted", "removed"),
    K.HEARTBEAT: (*_MEMBER, "deadline", "timeoutMillis"),
    K.UNREGISTER: (*_MEMBER, "brokerData", "removed"),
    K.CLOSE: (*_MEMBER, "brokerData", "removed"),
    K.EXPIRE: (*_MEMBER, "deadline", "brokerData", "removed"),
    K.FENCED: ("reason", *_MEMBER),
    K.CLEAN_QUEUES: ("brokerName", "removed", "upserted"),
    K.WIPE_PERM: ("brokerName", "upserted"),
    K.ADD_PERM: ("brokerName", "upserted"),
    K.TOPIC_REGISTER: ("topic", "upserted"),
    K.TOPIC_DELETE: ("topic", "brokerNames"),
    K.KV_PUT: ("namespace", "key"),
    K.KV_DELETE: ("namespace", "key"),
    K.CONFIG: ("changes",),
    K.SILENCE: (),  # the pipeline reads no field of it (from, to and moved are for operators)
}
# Integer fields: must parse when non-empty ("" is allowed where Lua writes it, e.g. the epoch
# of an unregister of a broker that was not live).
NUMERIC_FIELDS = ("ts", "brokerId", "epoch", "deadline", "timeoutMillis", "currentEpoch", "mode")
# Integer fields that must be non-empty for some kinds.
NUMERIC_REQUIRED: Mapping[str, tuple[str, ...]] = {
    REGISTER_OK: ("deadline", "timeoutMillis", "epoch"),
    K.HEARTBEAT: ("deadline", "timeoutMillis"),
    K.EXPIRE: ("deadline",),
}
