"""The call objects of a registration (the convention: :mod:`.script_call`), with the statuses
and records their replies decode to.

``registerBroker-17`` and ``registerBrokerTopics-10`` document their KEYS, ARGV and reply in
their headers; these objects are the only place that packs and reads them, so a field is named
once and a change to a script's contract is one edit here (and a test reads the headers back).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, NamedTuple

import orjson

from namesrv.domain.codes import ORDER_TOPIC_CONFIG
from namesrv.store.keyspace import Keyspace, live_member
from namesrv.store.script_call import CallContext, flag, pairs, reply_of


class RegisterStatus(IntEnum):
    """First element of registerBroker's reply."""

    REFUSED = 0  # R7: first registration of an id carrying exactly one topic
    REGISTERED = 1
    IGNORED = 2  # R6: an older stateVersion than the live registration of the same id
    BODY_NEEDED = 3  # the raw body is not the last complete one: decode it and call again
    SKIPPED = 4  # a replay of a broker that registered on its own since the heal began


class TopicsStatus(IntEnum):
    """First element of registerBrokerTopics' reply."""

    APPLIED = 1
    FENCED = -1  # a newer registration or an unregister owns the broker now: nothing written
    DELTA_REFUSED = -4  # Redis no longer holds what the delta's earlier body wrote: send all topics


class WriteMode(IntEnum):
    """What registerBroker decided about the topic table (its reply's ``mode``)."""

    NONE = 0  # topics untouched
    ALL = 1  # upsert every topic whose queue differs
    MISSING = 2  # add only the topics missing for the broker


@dataclass(frozen=True)
class HeaderOutcome:
    """registerBroker's reply."""

    status: RegisterStatus
    epoch: int
    mode: WriteMode
    master_addr: str
    ha_server_addr: str
    order_config: dict[str, str] | None
    route_changed: bool = False  # what a route lookup returns changed (BrokerData, session, deadline)
    registered_at: int = 0  # the Redis time (ms) of the registration


class TopicsOutcome(NamedTuple):
    """registerBrokerTopics' reply."""

    status: TopicsStatus
    upserted: int
    removed: int


@dataclass(frozen=True)
class BodyFacts:
    """What registerBroker needs to know of a decoded body (ARGV[9]-[13] and [18])."""

    data_version_json: str
    state_version: int
    filters_json: str | None  # None: the body sent no filterServerList
    topic_count: int
    digest: str  # of the sorted topic names
    prune_leftovers: bool


# the call that asks Redis to reuse the last complete registration of the same raw body
UNDECODED = BodyFacts("", 0, None, 0, "", False)


@dataclass(frozen=True)
class RegisterBrokerArgs:
    """``registerBroker-17``."""

    SCRIPT: ClassVar[str] = "registerBroker"
    REPLY: ClassVar[tuple[str, ...]] = (
        "status",
        "epoch",
        "mode",
        "masterAddr",
        "haServerAddr",
        "hasOrderConfig",
        "orderConfigFlat",
        "routeChanged",
        "registeredAt",
    )

    cluster: str
    addr: str
    broker_name: str
    broker_id: int
    ha_addr: str
    zone: str | None
    timeout_ms: int
    acting: bool | None  # None: a 4.x broker that does not send enableActingMaster
    token: str
    return_order: bool
    body_hash: str  # '' when the request had no raw body (the HTTP API)
    body: BodyFacts = UNDECODED
    holder: str = ""  # the remoting connection it came over ('<workerId>#<n>'); '' for HTTP
    replay_of: int | None = None  # a replay: the Redis time (ms) of the registration it replays
    replay_continues: bool = False  # a replay's later batch (of a split registration)
    version: int | None = None  # the broker's MQVersion ordinal (0-65535); None: unknown (HTTP)

    def keys(self, k: Keyspace) -> list[str]:
        return [
            k.clusters,
            k.brokers,
            k.live,
            k.deadlines,
            k.dataversions,
            k.filters,
            k.pending,
            k.epoch,
            k.routever,
            k.events,
            k.bdigest,
            k.kvns,
            k.kv(ORDER_TOPIC_CONFIG),
            k.alive(self.cluster, self.addr),
            k.btopics(self.broker_name),
            k.holders(self.cluster, self.addr),
            k.workers,
        ]

    def argv(self, ctx: CallContext) -> list[Any]:
        b = self.body
        return [
            self.cluster,
            self.addr,
            self.broker_name,
            self.broker_id,
            self.ha_addr,
            self.zone or "",
            self.timeout_ms,
            "" if self.acting is None else ("true" if self.acting else "false"),
            b.data_version_json,
            b.state_version,
            "" if b.filters_json is None else b.filters_json,
            b.topic_count,
            b.digest,
            self.token,
            ctx.worker_id,
            ctx.max_len,
            flag(self.return_order),
            flag(b.prune_leftovers),
            self.body_hash,
            self.holder,
            "" if self.replay_of is None else self.replay_of,
            flag(self.replay_continues),
            "" if self.version is None else self.version,
        ]

    def decode(self, reply: Any) -> HeaderOutcome:
        status_, epoch, mode, master, ha, has_order, order, changed, at = reply_of(self, reply)
        status = RegisterStatus(int(status_))
        if status in (RegisterStatus.BODY_NEEDED, RegisterStatus.SKIPPED):
            return HeaderOutcome(status, 0, WriteMode.NONE, "", "", None)
        return HeaderOutcome(
            status=status,
            epoch=int(epoch),
            mode=WriteMode(int(mode)),
            master_addr=str(master),
            ha_server_addr=str(ha),
            order_config=pairs(order) if int(has_order) else None,
            route_changed=bool(int(changed)),
            registered_at=int(at),
        )


class TopicWrite(NamedTuple):
    topic: str
    queue_data_json: str  # render.queue_data_json's layout
    sys_flag: int = 0  # its topicSysFlag, told apart so the script need not search the JSON


@dataclass(frozen=True)
class TopicWrites:
    """Topic writes as three columns: the topics, each one's QueueData JSON, its topicSysFlag. A
    registration or a heal's replay handles 10,000 at a time, and columns are built by list
    comprehensions, sliced into chunks and handed to redis-py whole, where a tuple per topic cost
    a third of a replay's work in the worker. Iterating gives :class:`TopicWrite` rows."""

    topics: list[str]
    queues: list[str]
    flags: list[int]

    @classmethod
    def of(cls, writes: Iterable[TopicWrite]) -> TopicWrites:
        rows = list(writes)
        return cls([w.topic for w in rows], [w.queue_data_json for w in rows], [w.sys_flag for w in rows])

    def slice(self, start: int, stop: int) -> TopicWrites:
        return TopicWrites(self.topics[start:stop], self.queues[start:stop], self.flags[start:stop])

    def extend(self, more: TopicWrites) -> None:
        self.topics.extend(more.topics)
        self.queues.extend(more.queues)
        self.flags.extend(more.flags)

    def __len__(self) -> int:
        return len(self.topics)

    def __iter__(self) -> Iterator[TopicWrite]:
        return map(TopicWrite, self.topics, self.queues, self.flags)

    def __getitem__(self, index: int) -> TopicWrite:
        return TopicWrite(self.topics[index], self.queues[index], self.flags[index])


def json_plain(text: str) -> bool:
    """``text`` is a JSON string as it is (the script then skips escaping each topic name): only
    printable ASCII, and none of ``"``, ``\\``, ``/``. Equivalent to a regular expression over those
    characters, in a third of its time on 500 joined names (``isascii`` reads a flag)."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text and "/" not in text


@dataclass(frozen=True)
class RegisterTopicsArgs:
    """One ``registerBrokerTopics-10`` chunk."""

    SCRIPT: ClassVar[str] = "registerBrokerTopics"
    REPLY: ClassVar[tuple[str, ...]] = ("status", "upserted", "removed")

    cluster: str
    addr: str
    broker_name: str
    token: str
    final: bool
    chunk_no: int
    writes: TopicWrites | Sequence[TopicWrite]  # rows are turned into columns
    removals: Sequence[str] = ()
    mappings: Mapping[str, str] | None = None
    delta_base: str = ""  # a delta chunk: the hash of the earlier body it is against

    def __post_init__(self) -> None:
        if not isinstance(self.writes, TopicWrites):
            object.__setattr__(self, "writes", TopicWrites.of(self.writes))

    @property
    def columns(self) -> TopicWrites:
        writes = self.writes
        assert isinstance(writes, TopicWrites)  # __post_init__
        return writes

    def keys(self, k: Keyspace) -> list[str]:
        mappings = self.mappings or {}
        topic_key = k.topic("")  # 10,000 keys per registration: one concatenation each
        return (
            [
                k.pending,
                k.topics,
                k.topicflags,
                k.btopics(self.broker_name),
                k.dataversions,
                k.bdigest,
                k.routever,
                k.events,
                k.live,
                k.bsync,
            ]
            + [topic_key + topic for topic in self.columns.topics]
            + [k.topic(t) for t in self.removals]
            + [k.mapping(t) for t in mappings]
        )

    def argv(self, ctx: CallContext) -> list[Any]:
        mappings = self.mappings or {}
        w = self.columns
        plain = json_plain("".join(w.topics))
        flags = {t: f for t, f in zip(w.topics, w.flags, strict=True) if f} if any(w.flags) else {}
        args: list[Any] = [
            live_member(self.cluster, self.addr),
            self.broker_name,
            self.token,
            flag(self.final),
            len(w),
            len(self.removals),
            len(mappings),
            ctx.max_len,
            self.chunk_no,
            self.delta_base,
            len(ctx.keyspace.topic("")),  # an upsert's topic is its key after this prefix
            orjson.dumps(flags).decode(),
            flag(plain),
            *(self._upserted_json() if plain and w.topics else ("", "")),
        ]
        args += w.queues
        args += self.removals
        for t, info in mappings.items():
            args += [t, info]
        return args

    def decode(self, reply: Any) -> TopicsOutcome:
        status, upserted, removed = reply_of(self, reply)
        return TopicsOutcome(TopicsStatus(int(status)), int(upserted), int(removed))

    def _upserted_json(self) -> tuple[str, str]:
        """The change log's ``upserted`` and ``queueDatas`` texts for when the script writes every
        upsert as sent (its names need no escaping): built here instead of in Lua pieces, and each
        distinct QueueData once. A chunk whose topics share one QueueData (the usual case: a
        broker's topics have a handful of shapes, sorted by name they come in long runs) is one
        join, a third of the time of one f-string per topic."""
        w = self.columns
        queues = dict.fromkeys(w.queues)
        if len(queues) == 1:
            (queue,) = queues
            return '[["' + '",0],["'.join(w.topics) + '",0]]', "[" + queue + "]"
        index = {queue: i for i, queue in enumerate(queues)}
        pairs = [f'["{topic}",{index[queue]}]' for topic, queue in zip(w.topics, w.queues, strict=True)]
        return "[" + ",".join(pairs) + "]", "[" + ",".join(queues) + "]"
