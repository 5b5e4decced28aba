"""Fan the worker's change feed out to watchers (SSE streams and route long-polls).

No watcher costs Redis anything: the worker's one change feed (:mod:`namesrv.registry.changefeed`) already
reads every change-log entry; this listener turns each entry that can change what clients see
(routes, brokers up/down/expired, write permission) into a small event naming its topics, brokers
and clusters, keeps the last ``history`` of them (so a client that reconnects with
``Last-Event-ID`` resumes without missing or repeating one), and hands it to every watcher whose
filter matches. Entry ids are the change log's, the same on every worker, so a client may resume
on another worker. An id older than what the worker holds (or from before a Redis reset) gets a
``resync`` event: the client re-reads what it watches.

Bounds: at most ``max_watchers`` streams per worker (:class:`TooManyWatchers`), and each watcher
holds at most ``queue_max`` undelivered events naming at most ``queue_topics`` (twice
``history_topics``) topics in all; a slower consumer is dropped with the reason. The history
holds at most ``history`` events naming at most ``history_topics`` topics in all: one
registration of a 10,000-topic broker is ten events of 1,000 topics, and at the RIP-29 shape
(100 such masters) an event count alone let the history hold 80 MB of topic names per worker.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from namesrv.registry.route_impact import route_impact
from namesrv.store.changelog import EventKind, entry_key

# Topic names the history holds in all (about 80 bytes each): 100,000 is 8 MB, the last ten
# 10,000-topic registrations, or ten thousand single-topic changes.
HISTORY_TOPICS = 100_000
# Kinds a watcher is told about (a heartbeat only when it revived an expired broker).
WATCHED = frozenset(
    {
        EventKind.REGISTER,
        EventKind.REGISTER_QUEUES,
        EventKind.UNREGISTER,
        EventKind.CLOSE,
        EventKind.EXPIRE,
        EventKind.CLEAN_QUEUES,
        EventKind.WIPE_PERM,
        EventKind.ADD_PERM,
        EventKind.TOPIC_REGISTER,
        EventKind.TOPIC_DELETE,
        EventKind.CONFIG,
    }
)
MAX_FILTER_NAMES = 256  # topics (or clusters) one watcher may name


class TooManyWatchers(Exception):
    """This worker serves its limit of watchers already."""


@dataclass(frozen=True)
class WatchEvent:
    id: str  # the change-log entry id ('' for a resync)
    kind: str  # the change-log kind, or 'resync'
    topics: tuple[str, ...] = ()
    brokers: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    everything: bool = False  # may have changed any route (a config change)
    detail: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "topics": list(self.topics),
            "brokers": list(self.brokers),
            "clusters": list(self.clusters),
        }
        if self.everything:
            body["everything"] = True
        body.update(self.detail)
        return body


class EventQueue(asyncio.Queue[WatchEvent]):
    """A watcher's undelivered events, counting the topic names they hold: a slow consumer is
    bounded by those too, not only by the events (ten events of a 10,000-topic registration are
    700 KB of names)."""

    def __init__(self) -> None:
        super().__init__()
        self.topics = 0

    def _put(self, item: WatchEvent) -> None:
        super()._put(item)
        self.topics += len(item.topics)

    def _get(self) -> WatchEvent:
        item = super()._get()
        self.topics -= len(item.topics)
        return item


@dataclass(eq=False)  # each watcher is itself (held in a set)
class Watcher:
    topics: frozenset[str]  # empty: every topic
    clusters: frozenset[str]  # empty: every cluster
    queue: EventQueue = field(default_factory=EventQueue)
    dropped: str | None = None  # why this watcher was dropped
    closed: asyncio.Event = field(default_factory=asyncio.Event)

    def wants(self, event: WatchEvent) -> bool:
        if event.kind == "resync" or event.everything:
            return True
        if self.clusters and event.clusters and not self.clusters.intersection(event.clusters):
            return False
        if not self.topics:
            return True
        # A broker event may change any route showing the broker: a topic watcher hears it.
        return bool(self.topics.intersection(event.topics)) or (bool(event.brokers) and not event.topics)

    def drop(self, reason: str) -> None:
        self.dropped = reason
        self.closed.set()


class WatchHub:
    """A change-feed listener (see :class:`namesrv.registry.changefeed.FeedListener`)."""

    def __init__(
        self,
        last_id: Callable[[], str],
        *,
        max_watchers: int,
        queue_max: int = 1000,
        history: int = 10000,
        history_topics: int = HISTORY_TOPICS,
        queue_topics: int | None = None,
    ) -> None:
        # ``last_id()``: the id of the entry the feed is applying (it is set before listeners run)
        self._last_id = last_id
        self.max_watchers = max_watchers
        self.queue_max = queue_max
        self.history_max = history
        self.history_topics_max = history_topics
        # room for the whole history, replayed at once to a watcher that resumes, and as much again
        self.queue_topics_max = 2 * history_topics if queue_topics is None else queue_topics
        self._history: deque[WatchEvent] = deque()
        self._history_topics = 0  # topic names the events in _history hold
        self._watchers: set[Watcher] = set()
        self._changed = asyncio.Event()
        self.dropped_slow = 0
        # Every watched event after this change-log position is in _history (None: not known yet).
        self._complete_after: tuple[int, int] | None = None

    @property
    def watching(self) -> int:
        return len(self._watchers)

    # ---- the feed's side ----
    async def on_event(self, kind: str, fields: Mapping[str, str]) -> None:
        entry_id = str(self._last_id())
        if self._complete_after is None:
            ms, seq = entry_key(entry_id)
            self._complete_after = (ms, seq - 1)
        event = to_event(entry_id, kind, fields)
        if event is None:
            return
        self._keep(event)
        self._publish(event)

    def _keep(self, event: WatchEvent) -> None:
        """Into the history; the oldest events out while it holds too many, or too many topics
        (the newest one stays, whatever it names)."""
        self._history.append(event)
        self._history_topics += len(event.topics)
        while len(self._history) > 1 and (
            len(self._history) > self.history_max or self._history_topics > self.history_topics_max
        ):
            forgotten = self._history.popleft()
            self._history_topics -= len(forgotten.topics)
            self._complete_after = entry_key(forgotten.id)

    async def on_reset(self, reason: str) -> None:
        # Ids before the reset may name entries Redis no longer holds: resume from them resyncs.
        self._history.clear()
        self._history_topics = 0
        last = str(self._last_id())
        self._complete_after = entry_key(last) if last else None
        self._publish(WatchEvent("", "resync", detail={"reason": reason}))

    def on_recovered(self, since: float) -> None:
        return None

    def _publish(self, event: WatchEvent) -> None:
        for watcher in list(self._watchers):
            if not watcher.wants(event):
                continue
            queue = watcher.queue
            if queue.qsize() >= self.queue_max:
                self._drop_slow(watcher, f"more than {self.queue_max} events undelivered")
                continue
            if queue.qsize() and queue.topics + len(event.topics) > self.queue_topics_max:
                self._drop_slow(watcher, f"more than {self.queue_topics_max} topic names undelivered")
                continue
            watcher.queue.put_nowait(event)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _drop_slow(self, watcher: Watcher, why: str) -> None:
        self.dropped_slow += 1
        self._watchers.discard(watcher)
        watcher.drop(f"slow consumer: {why}")

    # ---- the watchers' side ----
    async def changed(self, timeout: float) -> None:
        """Wait until the next event (or ``timeout``): long-polls then look again."""
        waiting = self._changed
        try:
            await asyncio.wait_for(waiting.wait(), timeout)
        except TimeoutError:
            return

    def watch(self, topics: Iterable[str], clusters: Iterable[str], last_event_id: str | None) -> Watcher:
        """A new watcher; with ``last_event_id``, first the events after it (or a resync)."""
        if len(self._watchers) >= self.max_watchers:
            raise TooManyWatchers(
                f"this worker serves {self.max_watchers} watchers already (watchMaxWatchers)"
            )
        watcher = Watcher(frozenset(topics), frozenset(clusters))
        self._note_position()
        if last_event_id:
            for event in self._since(last_event_id):
                if watcher.wants(event):
                    watcher.queue.put_nowait(event)
        self._watchers.add(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)
        watcher.closed.set()

    def close(self) -> None:
        for watcher in list(self._watchers):
            self._watchers.discard(watcher)
            watcher.drop("worker shutting down")

    def _since(self, last_event_id: str) -> list[WatchEvent]:
        after = entry_key(last_event_id)
        self._note_position()
        if self._complete_after is None or after < self._complete_after:
            # Events after that id may be missing here: the client re-reads what it watches.
            return [
                WatchEvent(
                    "", "resync", detail={"reason": f"event {last_event_id} is too old to resume from"}
                )
            ]
        return [event for event in self._history if entry_key(event.id) > after]

    def _note_position(self) -> None:
        """Before its first event the hub holds everything after the feed's current position."""
        if self._complete_after is None and self._last_id():
            self._complete_after = entry_key(str(self._last_id()))


def to_event(entry_id: str, kind: str, fields: Mapping[str, str]) -> WatchEvent | None:
    if kind not in WATCHED and not (kind == EventKind.HEARTBEAT and fields.get("revived") == "1"):
        return None
    if kind == EventKind.REGISTER and fields.get("result", "ok") != "ok":
        return None
    impact = route_impact(kind, fields)
    brokers: list[str] = []
    name = fields.get("brokerName") or impact.broker
    if name:
        brokers.append(name)
    brokers.extend(_names(fields.get("brokerNames", "")))
    cluster = fields.get("cluster")
    detail = {k: fields[k] for k in ("brokerAddr", "brokerId", "ts", "reason") if fields.get(k)}
    if kind == EventKind.REGISTER:
        detail["state"] = "up"
    elif kind in (EventKind.UNREGISTER, EventKind.CLOSE, EventKind.EXPIRE):
        detail["state"] = "expired" if kind == EventKind.EXPIRE else "down"
    return WatchEvent(
        entry_id,
        str(kind),
        topics=impact.topics,  # each topic once already
        brokers=tuple(brokers),
        clusters=(cluster,) if cluster else (),
        everything=impact.everything,
        detail=detail,
    )


def _names(listed: str) -> list[str]:
    if not listed.startswith("["):
        return []
    value = orjson.loads(listed)
    return [str(v) for v in value] if isinstance(value, list) else []
