"""Watching routes change (#30): one fan-out per worker from the change feed it already runs.

Every change-log entry the feed applies is turned, once, into a :class:`Change` (its stream ID,
kind, the topics and brokers it names) and handed to every watcher whose filter it matches.
No watcher costs Redis anything while it follows the feed: only a resume (``Last-Event-ID``)
reads the log, once, from that ID.

Bounds: at most ``max_watchers`` at once per worker (a new one is refused), and each holds at most
``QUEUE_MAX`` changes its client has not read yet; a client that falls that far behind is
dropped with a reason (it resumes with its last ID and loses nothing the log still holds).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import msgspec

from namesrv.domain.errors import Busy
from namesrv.registry.route_impact import route_impact
from namesrv.store.changelog import EventKind

QUEUE_MAX = 1000  # changes one watcher may hold unread before it is dropped
# Kinds a route watcher hears of: what changes a route, a broker's liveness or its write perm.
# KV writes (except the order config route_impact names), fenced removals and plain heartbeats
# (which move no route) are not news to a route watcher.
QUIET_KINDS = frozenset({EventKind.FENCED, EventKind.KV_DELETE, EventKind.KV_PUT})
RESYNC = "resync"  # the kind of the change that says: re-read everything (data set lost, gap)


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        return -1, -1


def id_after(a: str, b: str) -> bool:
    """Stream ID ``a`` comes after ``b``."""
    return _id_key(a) > _id_key(b)


def valid_id(entry_id: str) -> bool:
    return len(entry_id) <= 41 and _id_key(entry_id) >= (0, 0)


@dataclass(frozen=True)
class Change:
    id: str
    kind: str
    topics: tuple[str, ...] = ()
    brokers: tuple[str, ...] = ()
    cluster: str = ""
    all_routes: bool = False  # a change every route may show (config, a lost data set)
    broker_level: bool = False  # changes every route that shows one of ``brokers``
    detail: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> bytes:
        return msgspec.json.encode(
            {
                "id": self.id,
                "kind": self.kind,
                "topics": list(self.topics),
                "brokers": list(self.brokers),
                "cluster": self.cluster,
                "allRoutes": self.all_routes,
                "brokerLevel": self.broker_level,
                **({"detail": dict(self.detail)} if self.detail else {}),
            }
        )


DETAIL_FIELDS = ("brokerAddr", "brokerId", "result", "reason", "removed", "count", "revived")


def change_of(entry_id: str, kind: str, fields: Mapping[str, str]) -> Change | None:
    """The watcher's view of one change-log entry; None when no route watcher cares."""
    if kind in QUIET_KINDS and not (kind == EventKind.KV_PUT and route_impact(kind, fields).topics):
        return None
    if kind == EventKind.HEARTBEAT and fields.get("revived") != "1":
        return None
    impact = route_impact(kind, fields)
    if kind == EventKind.REGISTER and impact.none and fields.get("newSession") != "1":
        return None  # an unchanged re-registration: nothing a watcher sees changed
    brokers = tuple(b for b in (impact.broker, fields.get("brokerName")) if b)
    topics = tuple(t for t in impact.topics if t)
    if kind == EventKind.TOPIC_DELETE and fields.get("brokerNames"):
        with contextlib.suppress(msgspec.DecodeError):
            brokers += tuple(str(b) for b in msgspec.json.decode(fields["brokerNames"]))
    detail = {k: fields[k] for k in DETAIL_FIELDS if fields.get(k)}
    return Change(
        entry_id,
        kind,
        topics,
        tuple(dict.fromkeys(brokers)),
        fields.get("cluster", ""),
        impact.everything or kind == EventKind.SILENCE,
        bool(impact.broker),
        detail,
    )


@dataclass(frozen=True)
class WatchFilter:
    topics: frozenset[str] = frozenset()
    clusters: frozenset[str] = frozenset()
    brokers: frozenset[str] = frozenset()  # broker names the watched topics' routes show

    def matches(self, change: Change) -> bool:
        if change.all_routes or change.kind == RESYNC:
            return True
        if self.clusters and change.cluster and change.cluster not in self.clusters:
            return False
        if not self.topics:
            return True
        if self.topics.intersection(change.topics):
            return True
        return change.broker_level and bool(self.brokers.intersection(change.brokers))


class Watcher:
    def __init__(self, hub: WatchHub, flt: WatchFilter) -> None:
        self.hub = hub
        self.filter = flt
        self.queue: deque[Change] = deque()
        self.ready = asyncio.Event()
        self.dropped: str | None = None

    def offer(self, change: Change) -> None:
        if self.dropped is not None or not self.filter.matches(change):
            return
        if len(self.queue) >= QUEUE_MAX:
            self.dropped = f"too slow: {QUEUE_MAX} changes unread; resume with the last event ID"
            self.queue.clear()
        else:
            self.queue.append(change)
        self.ready.set()

    async def next(self, timeout: float) -> list[Change]:
        """The changes held (possibly none after ``timeout`` s)."""
        if not self.queue and self.dropped is None:
            self.ready.clear()
            try:
                await asyncio.wait_for(self.ready.wait(), timeout)
            except TimeoutError:
                return []
        out = list(self.queue)
        self.queue.clear()
        return out

    def close(self) -> None:
        self.hub.watchers.discard(self)


class WatchHub:
    """A change-feed listener (``on_event``/``on_reset``/``on_recovered``) fanning changes out."""

    def __init__(self, last_id: Callable[[], str], max_watchers: Callable[[], int]) -> None:
        self._last_id = last_id  # the feed's entry being applied (set before listeners run)
        self._max_watchers = max_watchers
        self.watchers: set[Watcher] = set()
        self.sent = 0  # changes published
        self.dropped = 0  # watchers dropped as too slow

    def watch(self, flt: WatchFilter) -> Watcher:
        if len(self.watchers) >= self._max_watchers():
            raise Busy(f"too many watchers on this worker ({len(self.watchers)}; watchMaxWatchers)")
        watcher = Watcher(self, flt)
        self.watchers.add(watcher)
        return watcher

    def publish(self, change: Change) -> None:
        for watcher in list(self.watchers):
            was = watcher.dropped
            watcher.offer(change)
            if watcher.dropped is not None and was is None:
                self.dropped += 1
        self.sent += 1

    # ---- FeedListener ----
    async def on_event(self, kind: str, fields: Mapping[str, str]) -> None:
        if not self.watchers:
            return
        change = change_of(self._last_id(), kind, fields)
        if change is not None:
            self.publish(change)

    async def on_reset(self, reason: str) -> None:
        self.publish(Change(self._last_id(), RESYNC, all_routes=True, detail={"reason": reason}))

    def on_recovered(self, since: float) -> None:
        pass


def parse_names(value: str | None, limit: int) -> frozenset[str]:
    names = frozenset(n.strip() for n in (value or "").split(",") if n.strip())
    if len(names) > limit:
        raise ValueError(f"at most {limit} names")
    return names


def backlog(entries: Iterable[tuple[str, Mapping[str, str]]]) -> list[Change]:
    out = []
    for entry_id, fields in entries:
        change = change_of(entry_id, fields.get("kind", ""), fields)
        if change is not None:
            out.append(change)
    return out
