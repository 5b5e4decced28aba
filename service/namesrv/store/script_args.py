"""The Lua contract of every script but the registration pair: one arguments object per script,
statuses as enums.

Each script in ``lua/`` documents its KEYS and ARGV in its header; these objects are the only
place that packs them, in that order, so a change to a script's arguments is one edit here.
``tests/unit/test_script_contract.py`` reads the headers and the scripts' replies back and checks
that they agree. The registration scripts have theirs in :mod:`namesrv.store.registration_args`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any, ClassVar

from namesrv.domain.codes import ORDER_TOPIC_CONFIG
from namesrv.store.keyspace import Keyspace, live_member


class KeysStatus(IntEnum):
    """First element of deleteTopic's and getTopicsByCluster's reply: both take one key per broker
    name the worker read beforehand, and Redis may hold other names by the time they run."""

    DONE = 1
    RETRY_KEYS = -3  # other broker names than those passed: call again with the names that follow


class UnregisterStatus(IntEnum):
    """First element of unregisterBroker's reply."""

    DONE = 1
    FENCED = -2  # the live registration has another epoch, or none: nothing changed


class SetPermStatus(IntEnum):
    """setWritePerm answers a count of topics, or this (never a valid count)."""

    BAD_MODE = -5  # ARGV[3] was neither of PermMode: nothing changed


class PermMode(StrEnum):
    """setWritePerm's ARGV[3]."""

    WIPE = "wipe"  # WIPE_WRITE_PERM_OF_BROKER (205)
    ADD = "add"  # ADD_WRITE_PERM_OF_BROKER (327)


class FeedStatus(IntEnum):
    """Second element of readChanges' reply."""

    ENTRIES = 0  # the entries after the last one read follow
    RESET = 1  # the registry holds another data set: everything learned before is void
    GAP = 2  # the last entry read is gone: what was learned since may have been lost


def _flag(on: bool) -> str:
    return "1" if on else "0"


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


# ---- removal ----
@dataclass(frozen=True)
class UnregisterArgs:
    """KEYS and ARGV of ``unregisterBroker-11``."""

    SCRIPT: ClassVar[str] = "unregisterBroker"
    cluster: str
    addr: str
    broker_name: str
    broker_id: int | str
    fence_epoch: int | None  # None: an unconditional unregister
    reason: str  # one of changelog.REMOVAL_REASONS: the script appends it as the event kind

    def keys(self, k: Keyspace) -> list[str]:
        return [*_removal_keys(k), k.alive(self.cluster, self.addr)]

    def argv(self, max_len: str, worker_id: str) -> list[Any]:
        return [
            self.cluster,
            self.addr,
            self.broker_name,
            self.broker_id,
            "" if self.fence_epoch is None else self.fence_epoch,
            self.reason,
            max_len,
            worker_id,
        ]


@dataclass(frozen=True)
class ExpireArgs:
    """KEYS and ARGV of ``expireBrokers-10``."""

    SCRIPT: ClassVar[str] = "expireBrokers"
    limit: int  # most brokers to expire in one call

    def keys(self, k: Keyspace) -> list[str]:
        return _removal_keys(k)

    def argv(self, max_len: str, worker_id: str) -> list[Any]:
        return [self.limit, max_len, worker_id]


@dataclass(frozen=True)
class CleanTopicsArgs:
    """KEYS and ARGV of one ``cleanBrokerTopics-8`` chunk."""

    SCRIPT: ClassVar[str] = "cleanBrokerTopics"
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

    def argv(self, max_len: str) -> list[Any]:
        return [self.broker_name, _flag(self.final), max_len, len(self.topics), *self.topics]


# ---- liveness ----
@dataclass(frozen=True)
class HeartbeatArgs:
    """KEYS and ARGV of ``brokerHeartbeat-5``."""

    SCRIPT: ClassVar[str] = "brokerHeartbeat"
    cluster: str
    addr: str
    source: str  # the request code that carried the heartbeat: '904' or '322'

    def keys(self, k: Keyspace) -> list[str]:
        return [k.live, k.deadlines, k.dataversions, k.events, k.alive(self.cluster, self.addr)]

    def argv(self, max_len: str, worker_id: str) -> list[Any]:
        return [live_member(self.cluster, self.addr), max_len, self.source, worker_id]


# ---- admin writes ----
@dataclass(frozen=True)
class SetPermArgs:
    """KEYS and ARGV of one ``setWritePerm-3`` chunk."""

    SCRIPT: ClassVar[str] = "setWritePerm"
    broker_name: str
    topics: Sequence[str]
    mode: PermMode

    def keys(self, k: Keyspace) -> list[str]:
        return [k.routever, k.events, k.bdigest, *(k.topic(t) for t in self.topics)]

    def argv(self, max_len: str) -> list[Any]:
        return [self.broker_name, max_len, str(self.mode), len(self.topics), *self.topics]


@dataclass(frozen=True)
class DeleteTopicArgs:
    """KEYS and ARGV of ``deleteTopic-7``."""

    SCRIPT: ClassVar[str] = "deleteTopic"
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

    def argv(self, max_len: str) -> list[Any]:
        return [self.topic, self.cluster or "", max_len, len(self.broker_names), *self.broker_names]


@dataclass(frozen=True)
class RegisterTopicArgs:
    """KEYS and ARGV of ``registerTopic-7``."""

    SCRIPT: ClassVar[str] = "registerTopic"
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

    def argv(self, max_len: str) -> list[Any]:
        args: list[Any] = [self.topic, max_len, len(self.queues)]
        for b, qd, flag in self.queues:
            args += [b, qd, flag]
        return args


@dataclass(frozen=True)
class KvPutArgs:
    """KEYS and ARGV of ``kvPut-3``."""

    SCRIPT: ClassVar[str] = "kvPut"
    namespace: str
    key: str
    value: str | None  # None: Java's null value

    def keys(self, k: Keyspace) -> list[str]:
        return [k.kvns, k.kv(self.namespace), k.events]

    def argv(self, max_len: str) -> list[Any]:
        return [self.namespace, self.key, self.value or "", _flag(self.value is not None), max_len]


@dataclass(frozen=True)
class KvDeleteArgs:
    """KEYS and ARGV of ``kvDelete-3``."""

    SCRIPT: ClassVar[str] = "kvDelete"
    namespace: str
    key: str

    def keys(self, k: Keyspace) -> list[str]:
        return [k.kvns, k.kv(self.namespace), k.events]

    def argv(self, max_len: str) -> list[Any]:
        return [self.namespace, self.key, max_len]


@dataclass(frozen=True)
class UpdateConfigArgs:
    """KEYS and ARGV of ``updateConfig-2``."""

    SCRIPT: ClassVar[str] = "updateConfig"
    changes: Mapping[str, str]  # option name -> value text
    changes_json: str  # the same changes as one JSON object, for the change log

    def keys(self, k: Keyspace) -> list[str]:
        return [k.config, k.events]

    def argv(self, max_len: str) -> list[Any]:
        args: list[Any] = [max_len, self.changes_json]
        for name, value in self.changes.items():
            args += [name, value]
        return args


# ---- reads ----
@dataclass(frozen=True)
class RouteInfoArgs:
    """KEYS and ARGV of ``getRouteInfo-6``."""

    SCRIPT: ClassVar[str] = "getRouteInfo"
    topic: str
    with_order: bool  # read the topic's orderTopicConf too

    def keys(self, k: Keyspace) -> list[str]:
        return [
            k.topic(self.topic),
            k.brokers,
            k.deadlines,
            k.filters,
            k.mapping(self.topic),
            k.kv(ORDER_TOPIC_CONFIG),
        ]

    def argv(self) -> list[Any]:
        return [self.topic, _flag(self.with_order)]


@dataclass(frozen=True)
class GetBrokersArgs:
    """KEYS and ARGV of ``getBrokers-3``."""

    SCRIPT: ClassVar[str] = "getBrokers"
    names: Sequence[str] | None  # None: every broker, and the cluster table too

    def keys(self, k: Keyspace) -> list[str]:
        return [k.brokers, k.clusters, k.deadlines]

    def argv(self) -> list[Any]:
        return ["1"] if self.names is None else ["0", *self.names]


@dataclass(frozen=True)
class TopicsByClusterArgs:
    """KEYS and ARGV of ``getTopicsByCluster-1``."""

    SCRIPT: ClassVar[str] = "getTopicsByCluster"
    cluster: str
    broker_names: Sequence[str]  # the names the worker believes the cluster has (KeysStatus)

    def keys(self, k: Keyspace) -> list[str]:
        return [k.clusters, *(k.btopics(b) for b in self.broker_names)]

    def argv(self) -> list[Any]:
        return [self.cluster, len(self.broker_names), *self.broker_names]


@dataclass(frozen=True)
class ReadChangesArgs:
    """KEYS and ARGV of ``readChanges-2`` (one poll of the change feed)."""

    SCRIPT: ClassVar[str] = "readChanges"
    known_instance: str  # '' before the first poll
    candidate: str  # a fresh random id: the instance if the registry has none
    last_id: str  # last entry applied; '' = none yet
    count: int  # most entries to return

    def keys(self, k: Keyspace) -> list[str]:
        return [k.events, k.meta]

    def argv(self) -> list[Any]:
        return [self.known_instance, self.candidate, self.last_id, self.count]
