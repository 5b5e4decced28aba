"""The call objects of every script but the registration pair (:mod:`.registration_args`), and
the statuses and records their replies decode to (the convention: :mod:`.script_call`).

Each script in ``lua/`` documents its KEYS, ARGV and reply in its header; its call object here is
the only place that packs the arguments and reads the reply, so a change to a script's contract
is one edit in the script and one here. ``tests/unit/test_script_contract.py`` holds them together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any, ClassVar, NamedTuple

from namesrv.domain.codes import ORDER_TOPIC_CONFIG
from namesrv.store.keyspace import Keyspace, live_member
from namesrv.store.script_call import CallContext, flag, pairs, reply_of


class KeysStatus(IntEnum):
    """First element of deleteTopic's and getTopicsByCluster's reply: both take one key per broker
    name the worker read beforehand, and Redis may hold other names by the time they run."""

    DONE = 1
    RETRY_KEYS = -3  # other broker names than those passed: call again with the names that follow


class UnregisterStatus(IntEnum):
    """First element of unregisterBroker's reply."""

    DONE = 1
    FENCED = -2  # the live registration has another epoch (registered again): nothing changed
    GONE = -6  # an epoch was given and nothing is live (expired or removed already)
    HELD = -7  # a close, and another open connection to the fleet holds the broker


class SetPermStatus(IntEnum):
    """setWritePerm answers a count of topics, or this (never a valid count)."""

    BAD_MODE = -5  # ARGV[3] was neither of PermMode: nothing changed


class PermMode(StrEnum):
    """setWritePerm's ARGV[3]."""

    WIPE = "wipe"  # WIPE_WRITE_PERM_OF_BROKER (205)
    ADD = "add"  # ADD_WRITE_PERM_OF_BROKER (327)


class KeysOutcome(NamedTuple):
    """deleteTopic's and getTopicsByCluster's reply: DONE and the result, or RETRY_KEYS and the
    broker names to call again with."""

    status: KeysStatus
    values: list[str]


class UnregisterOutcome(NamedTuple):
    status: UnregisterStatus
    removed: bool  # the broker name lost its last address
    cleanup_pending: bool  # the caller must run cleanBrokerTopics for the name


class ExpireOutcome(NamedTuple):
    expired: int
    more_due: bool
    cleanup_names: list[str]  # broker names whose topic cleanup the caller must run


@dataclass(frozen=True)
class RouteSnapshot:
    queue_datas: list[str]
    broker_datas: list[str]
    filters: dict[str, str]
    mappings: dict[str, str]
    order_topic_conf: str | None
    now_ms: int  # the Redis clock when the snapshot was read
    valid_until_ms: int | None  # earliest deadline of the brokers shown (None: none has one)
    hidden_brokers: tuple[str, ...] = ()  # broker names with queues of the topic left out (expired)
    deadlines: Mapping[str, int] = field(default_factory=dict)  # member -> deadline ms of those shown
    # with no route: the identity of the data set Redis answered from ('' when none is named yet),
    # and its change log's newest entry id
    instance: str | None = None
    newest_id: str | None = None


class FeedReply(NamedTuple):
    instance: str
    status: FeedStatus
    last_id: str
    entries: list[Any]
    more: bool = False  # the byte bound cut this read short: more entries may follow
    now_ms: int = 0  # the Redis clock when the read ran (0: unknown)


class FeedStatus(IntEnum):
    """Second element of readChanges' reply."""

    ENTRIES = 0  # the entries after the last one read follow
    RESET = 1  # the registry holds another data set: everything learned before is void
    GAP = 2  # the last entry read is gone: what was learned since may have been lost


def _removal_keys(k: Keyspace) -> list[str]:
    """The fixed keys unregisterBroker and expireBrokers share, in their headers' order."""
    return [
        k.clusters,
        k.brokers,
        k.live,
        k.deadlines,
        k.dataversions,
        k.filters,
        k.pending,
        k.pendingclean,
        k.routever,
        k.events,
    ]


# A worker counts as running (its connections hold brokers) this long after its last beat: ten
# beats (noteWorker every second), so a stalled event loop or a brief Redis outage is no death.
WORKER_WINDOW_MS = 10_000
WORKER_FORGET_MS = 3_600_000


# ---- removal ----
@dataclass(frozen=True)
class UnregisterArgs:
    """``unregisterBroker-13``."""

    SCRIPT: ClassVar[str] = "unregisterBroker"
    REPLY: ClassVar[tuple[str, ...]] = ("status", "removed", "cleanupPending")
    cluster: str
    addr: str
    broker_name: str
    broker_id: int | str
    fence_epoch: int | None  # None: an unconditional unregister
    reason: str  # one of changelog.REMOVAL_REASONS: the script appends it as the event kind
    holder: str = ""  # a close: the connection's holder id (HELD while another holds the broker)

    def keys(self, k: Keyspace) -> list[str]:
        return [
            *_removal_keys(k),
            k.alive(self.cluster, self.addr),
            k.holders(self.cluster, self.addr),
            k.workers,
        ]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [
            self.cluster,
            self.addr,
            self.broker_name,
            self.broker_id,
            "" if self.fence_epoch is None else self.fence_epoch,
            self.reason,
            ctx.max_len,
            ctx.worker_id,
            self.holder,
            WORKER_WINDOW_MS,
        ]

    def decode(self, reply: Any) -> UnregisterOutcome:
        status, removed, pending = reply_of(self, reply)
        return UnregisterOutcome(UnregisterStatus(int(status)), bool(int(removed)), bool(int(pending)))


@dataclass(frozen=True)
class ExpireArgs:
    """``expireBrokers-11``."""

    SCRIPT: ClassVar[str] = "expireBrokers"
    REPLY: ClassVar[tuple[str, ...]] = ("expired", "more", "name...")
    limit: int  # most brokers to expire in one call

    def keys(self, k: Keyspace) -> list[str]:
        return [*_removal_keys(k), k.meta]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [self.limit, ctx.max_len, ctx.worker_id]

    def decode(self, reply: Any) -> ExpireOutcome:
        r = reply_of(self, reply)
        return ExpireOutcome(int(r[0]), bool(int(r[1])), [str(n) for n in r[2:]])


@dataclass(frozen=True)
class CleanTopicsArgs:
    """One ``cleanBrokerTopics-8`` chunk."""

    SCRIPT: ClassVar[str] = "cleanBrokerTopics"
    REPLY: ClassVar[tuple[str, ...]] = ("removed", "permCleared")
    broker_name: str
    topics: Sequence[str]
    final: bool  # the last chunk: the name leaves {ns}:pendingclean

    def keys(self, k: Keyspace) -> list[str]:
        return [
            k.brokers,
            k.topics,
            k.topicflags,
            k.btopics(self.broker_name),
            k.bdigest,
            k.pendingclean,
            k.routever,
            k.events,
            *(k.topic(t) for t in self.topics),
        ]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [self.broker_name, flag(self.final), ctx.max_len, len(self.topics), *self.topics]

    def decode(self, reply: Any) -> tuple[int, int]:
        removed, cleared = reply_of(self, reply)
        return int(removed), int(cleared)


# ---- liveness ----
@dataclass(frozen=True)
class HeartbeatArgs:
    """``brokerHeartbeat-6``."""

    SCRIPT: ClassVar[str] = "brokerHeartbeat"
    REPLY: ClassVar[tuple[str, ...]] = ("live", "dataVersion")
    cluster: str
    addr: str
    source: str  # the request code that carried the heartbeat: '904' or '322'

    def keys(self, k: Keyspace) -> list[str]:
        return [
            k.live,
            k.deadlines,
            k.dataversions,
            k.events,
            k.alive(self.cluster, self.addr),
            k.holders(self.cluster, self.addr),
        ]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [live_member(self.cluster, self.addr), ctx.max_len, self.source, ctx.worker_id]

    def decode(self, reply: Any) -> tuple[bool, str | None]:
        """(the broker was known and refreshed, its stored DataVersion JSON)"""
        live, data_version = reply_of(self, reply)
        return bool(int(live)), (str(data_version) or None)


@dataclass(frozen=True)
class NoteWorkerArgs:
    """``noteWorker-4``."""

    SCRIPT: ClassVar[str] = "noteWorker"
    REPLY: ClassVar[tuple[str, ...]] = ("running",)
    running: bool  # False: the worker stops, its entry goes

    def keys(self, k: Keyspace) -> list[str]:
        return [k.workers, k.meta, k.deadlines, k.events]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [ctx.worker_id, flag(self.running), WORKER_FORGET_MS, WORKER_WINDOW_MS, ctx.max_len]

    def decode(self, reply: Any) -> int:
        """How many workers run (seen within WORKER_WINDOW_MS)."""
        (running,) = reply_of(self, reply)
        return int(running)


# ---- admin writes ----
@dataclass(frozen=True)
class SetPermArgs:
    """One ``setWritePerm-3`` chunk."""

    SCRIPT: ClassVar[str] = "setWritePerm"
    REPLY: ClassVar[tuple[str, ...]] = ("count",)
    broker_name: str
    topics: Sequence[str]
    mode: PermMode

    def keys(self, k: Keyspace) -> list[str]:
        return [k.routever, k.events, k.bdigest, *(k.topic(t) for t in self.topics)]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [self.broker_name, ctx.max_len, str(self.mode), len(self.topics), *self.topics]

    def decode(self, reply: Any) -> int:
        """How many of the topics hold a queue of the broker name."""
        (count,) = reply_of(self, reply)
        if int(count) == SetPermStatus.BAD_MODE:
            raise RuntimeError(f"setWritePerm refused mode {str(self.mode)!r} (status {count})")
        return int(count)


def _keys_outcome(reply: Sequence[Any]) -> KeysOutcome:
    return KeysOutcome(KeysStatus(int(reply[0])), [str(v) for v in reply[1:]])


@dataclass(frozen=True)
class DeleteTopicArgs:
    """``deleteTopic-7``."""

    SCRIPT: ClassVar[str] = "deleteTopic"
    REPLY: ClassVar[tuple[str, ...]] = ("status", "value...")
    topic: str
    cluster: str | None  # None: every cluster
    broker_names: Sequence[str]  # the names the worker read from the topic (KeysStatus)

    def keys(self, k: Keyspace) -> list[str]:
        return [
            k.topics,
            k.topicflags,
            k.clusters,
            k.bdigest,
            k.routever,
            k.events,
            k.topic(self.topic),
            *(k.btopics(b) for b in self.broker_names),
        ]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [self.topic, self.cluster or "", ctx.max_len, len(self.broker_names), *self.broker_names]

    def decode(self, reply: Any) -> KeysOutcome:
        """DONE and [queues removed], or RETRY_KEYS and the broker names to pass."""
        return _keys_outcome(reply_of(self, reply))


@dataclass(frozen=True)
class RegisterTopicArgs:
    """``registerTopic-7``."""

    SCRIPT: ClassVar[str] = "registerTopic"
    REPLY: ClassVar[tuple[str, ...]] = ("written",)
    topic: str
    queues: Sequence[tuple[str, str, int]]  # (brokerName, QueueData JSON, topicSysFlag)

    def keys(self, k: Keyspace) -> list[str]:
        return [
            k.brokers,
            k.topics,
            k.topicflags,
            k.bdigest,
            k.routever,
            k.events,
            k.topic(self.topic),
            *(k.btopics(b) for b, _, _ in self.queues),
        ]

    def argv(self, ctx: CallContext) -> list[Any]:
        args: list[Any] = [self.topic, ctx.max_len, len(self.queues)]
        for b, qd, sys_flag in self.queues:
            args += [b, qd, sys_flag]
        return args

    def decode(self, reply: Any) -> int:
        (written,) = reply_of(self, reply)
        return int(written)


class KvPutStatus(IntEnum):
    """First element of kvPut's reply."""

    STORED = 1
    NAMESPACE_FULL = -8  # the namespace would pass kvNamespaceMaxBytes: nothing changed
    KV_FULL = -9  # the whole KV would pass kvMaxBytes: nothing changed


class KvPutOutcome(NamedTuple):
    status: KvPutStatus
    namespace_bytes: int  # the namespace's keys and values, after the call
    total_bytes: int  # the whole KV's


@dataclass(frozen=True)
class KvPutArgs:
    """``kvPut-4``."""

    SCRIPT: ClassVar[str] = "kvPut"
    REPLY: ClassVar[tuple[str, ...]] = ("status", "namespaceBytes", "totalBytes")
    namespace: str
    key: str
    value: str | None  # None: Java's null value
    namespace_max: int  # kvNamespaceMaxBytes
    total_max: int  # kvMaxBytes

    def keys(self, k: Keyspace) -> list[str]:
        return [k.kvns, k.kv(self.namespace), k.events, k.kvbytes]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [
            self.namespace,
            self.key,
            self.value or "",
            flag(self.value is not None),
            ctx.max_len,
            self.namespace_max,
            self.total_max,
        ]

    def decode(self, reply: Any) -> KvPutOutcome:
        status, namespace_bytes, total = reply_of(self, reply)
        return KvPutOutcome(KvPutStatus(int(status)), int(namespace_bytes), int(total))


@dataclass(frozen=True)
class KvDeleteArgs:
    """``kvDelete-4``."""

    SCRIPT: ClassVar[str] = "kvDelete"
    REPLY: ClassVar[tuple[str, ...]] = ("deleted",)
    namespace: str
    key: str

    def keys(self, k: Keyspace) -> list[str]:
        return [k.kvns, k.kv(self.namespace), k.events, k.kvbytes]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [self.namespace, self.key, ctx.max_len]

    def decode(self, reply: Any) -> bool:
        (deleted,) = reply_of(self, reply)
        return bool(int(deleted))


@dataclass(frozen=True)
class UpdateConfigArgs:
    """``updateConfig-2``."""

    SCRIPT: ClassVar[str] = "updateConfig"
    REPLY: ClassVar[tuple[str, ...]] = ("changed",)
    changes: Mapping[str, str]  # option name -> value text
    changes_json: str  # the same changes as one JSON object, for the change log

    def keys(self, k: Keyspace) -> list[str]:
        return [k.config, k.events]

    def argv(self, ctx: CallContext) -> list[Any]:
        args: list[Any] = [ctx.max_len, self.changes_json]
        for name, value in self.changes.items():
            args += [name, value]
        return args

    def decode(self, reply: Any) -> int:
        (changed,) = reply_of(self, reply)
        return int(changed)


# ---- reads ----
@dataclass(frozen=True)
class RouteInfoArgs:
    """``getRouteInfo-8``."""

    SCRIPT: ClassVar[str] = "getRouteInfo"
    REPLY: ClassVar[tuple[str, ...]] = (
        "found",
        "queueDatas",
        "brokerDatas",
        "filterFlat",
        "mappingFlat",
        "orderTopicConf",
        "now",
        "validUntil",
        "hiddenNames",
        "deadlinesFlat",
        "instance",
        "newestId",
    )
    topic: str
    with_order: bool  # read the topic's orderTopicConf too
    # the reader caches the route: it needs every address's deadline (else, while no broker is
    # past its deadline, the script returns the BrokerData as stored, without scoring addresses)
    for_cache: bool = True

    def keys(self, k: Keyspace) -> list[str]:
        return [
            k.topic(self.topic),
            k.brokers,
            k.deadlines,
            k.filters,
            k.mapping(self.topic),
            k.kv(ORDER_TOPIC_CONFIG),
            k.meta,
            k.events,
        ]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [self.topic, flag(self.with_order), flag(self.for_cache)]

    def decode(self, reply: Any) -> RouteSnapshot:
        """One snapshot; empty lists (found=0) mean TOPIC_NOT_EXIST."""
        checked = reply_of(self, reply)
        found, queues, brokers, filters, mappings, order, now, valid_until = checked[:8]
        hidden, deadlines, instance, newest = checked[8:]
        return RouteSnapshot(
            queue_datas=list(queues) if int(found) else [],
            broker_datas=list(brokers) if int(found) else [],
            filters=pairs(filters),
            mappings=pairs(mappings),
            order_topic_conf=order or None,
            now_ms=int(now),
            valid_until_ms=int(valid_until) if valid_until else None,
            hidden_brokers=tuple(hidden),
            deadlines={member: int(ms) for member, ms in pairs(deadlines).items()},
            instance=None if int(found) else str(instance),
            newest_id=None if int(found) else str(newest),
        )


@dataclass(frozen=True)
class GetBrokersArgs:
    """``getBrokers-4``."""

    SCRIPT: ClassVar[str] = "getBrokers"
    REPLY: ClassVar[tuple[str, ...]] = ("brokersFlat", "clustersFlat")
    names: Sequence[str] | None  # None: every broker, and the cluster table too

    def keys(self, k: Keyspace) -> list[str]:
        return [k.brokers, k.clusters, k.deadlines, k.meta]

    def argv(self, ctx: CallContext) -> list[Any]:
        return ["1"] if self.names is None else ["0", *self.names]

    def decode(self, reply: Any) -> tuple[dict[str, str], dict[str, str]]:
        """(brokerName -> BrokerData JSON, cluster -> JSON array of names)"""
        brokers, clusters = reply_of(self, reply)
        return pairs(brokers), pairs(clusters)


@dataclass(frozen=True)
class TopicsByClusterArgs:
    """``getTopicsByCluster-1``."""

    SCRIPT: ClassVar[str] = "getTopicsByCluster"
    REPLY: ClassVar[tuple[str, ...]] = ("status", "value...")
    cluster: str
    broker_names: Sequence[str]  # the names the worker believes the cluster has (KeysStatus)

    def keys(self, k: Keyspace) -> list[str]:
        return [k.clusters, *(k.btopics(b) for b in self.broker_names)]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [self.cluster, len(self.broker_names), *self.broker_names]

    def decode(self, reply: Any) -> KeysOutcome:
        """DONE and the topics, or RETRY_KEYS and the cluster's broker names."""
        return _keys_outcome(reply_of(self, reply))


@dataclass(frozen=True)
class ReadChangesArgs:
    """``readChanges-2``: one poll of the change feed."""

    SCRIPT: ClassVar[str] = "readChanges"
    REPLY: ClassVar[tuple[str, ...]] = ("instance", "status", "lastId", "entries", "more", "nowMs")
    known_instance: str  # '' before the first poll
    candidate: str  # a fresh random id: the instance if the registry has none
    last_id: str  # last entry applied; '' = none yet
    count: int  # most entries to return
    max_bytes: int = 0  # most bytes of entry fields to return (0: no bound)

    def keys(self, k: Keyspace) -> list[str]:
        return [k.events, k.meta]

    def argv(self, ctx: CallContext) -> list[Any]:
        return [self.known_instance, self.candidate, self.last_id, self.count, self.max_bytes]

    def decode(self, reply: Any) -> FeedReply:
        instance, status, last_id, entries, more, now_ms = reply_of(self, reply)
        return FeedReply(
            str(instance), FeedStatus(int(status)), str(last_id), list(entries), bool(int(more)), int(now_ms)
        )
