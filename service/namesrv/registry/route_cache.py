"""A per-worker cache of assembled routes, kept correct by the registry's change log.

A hit costs no Redis round trip: the worker keeps the assembled :class:`TopicRouteData` and, lazily,
its encoded bytes per JSON dialect and per zone. Three rules bound what a hit can return:

* **Staleness.** The cache answers only while the change feed is fresh: its last completed read of
  ``{ns}:events`` was *issued* at most ``routeCacheStalenessMillis`` ago. Every change committed
  before that read was issued has been seen and has invalidated what it touched, so no hit is
  older than the bound. When the feed lags (Redis slow, connection lost), lookups go to Redis.
* **Deadlines.** A route read from Redis carries the earliest deadline of the brokers it shows; the
  entry expires then, so an expired broker is never served past its deadline, sweep or not.
* **Races.** A fill started before an invalidation never stores its (possibly older) answer.
* **Own writes.** After this worker commits a change, lookups wait for the feed to read past it,
  so a client always reads its own writes through the same worker.

When the feed is not fresh (own write, or a worker too busy to poll on time), a lookup first asks
the feed to catch up, which one XREAD does for every waiting lookup, and goes to Redis itself
only if that fails, and then at most ``MAX_BYPASSES_IN_FLIGHT`` at a time: the rest are shed with
SYSTEM_BUSY, as Java sheds what its thread pools cannot take. Going to Redis per lookup under
load would cost the CPU that made the feed late, and the worker would not recover.

Invalidation is precise: an entry is dropped when an event names its topic, or names a broker the
entry shows or left out as expired (``hidden``), since that broker can come back. Entries also
expire after ``MAX_AGE_S`` (jittered), a last bound on staleness should an event ever be missed.

Negative answers (unknown topic) are kept for ``routeNegativeCacheMillis`` and dropped as soon as
an event names the topic.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import orjson

from namesrv.domain.codes import OVERLOAD_REMARK
from namesrv.domain.errors import Busy
from namesrv.domain.model import TopicRouteData
from namesrv.domain.routes import filter_by_zone
from namesrv.protocol.fastjson import Dialect

Clock = Callable[[], float]
NO_NAMES: frozenset[str] = frozenset()  # shared: an empty frozenset is a new GC-tracked object each time


@dataclass
class CachedRoute:
    """A route and its encodings, rendered once and reused by every request that hits it."""

    data: TopicRouteData
    expires_at: float  # local monotonic time
    hidden: frozenset[str] = NO_NAMES  # broker names with queues of the topic left out (expired)
    _encoded: dict[Dialect, bytes] = field(default_factory=dict)
    _zones: dict[str, bytes] = field(default_factory=dict)

    def encoded(self, dialect: Dialect) -> bytes:
        body = self._encoded.get(dialect)
        if body is None:
            body = self._encoded[dialect] = self.data.to_json(dialect).encode()
        return body

    def broker_names(self) -> set[str]:
        """Every broker whose change can change this route."""
        names = {b.brokerName for b in self.data.brokerDatas}
        names.update(q.brokerName for q in self.data.queueDatas)
        return names | self.hidden

    def zone_encoded(self, zone: str) -> bytes:
        """ZoneRouteRPCHook's answer: the zone's brokers, always in fastjson's default dialect."""
        key = zone.lower()
        body = self._zones.get(key)
        if body is None:
            body = self._zones[key] = filter_by_zone(self.data, zone).to_json(Dialect.DEFAULT).encode()
        return body


@dataclass(frozen=True)
class Lookup:
    """What a fill returns: the route (None when the topic does not exist), and until when
    (local monotonic time) it may be served."""

    route: TopicRouteData | None
    valid_until: float
    hidden: frozenset[str] = NO_NAMES  # broker names left out of the route as expired


Fill = Callable[[str], Awaitable[Lookup]]
CatchUp = Callable[[], Awaitable[bool]]
MAX_AGE_S = 300.0  # entries live 50-100% of this at most, whatever the change log says
# Lookups that may read Redis at once while the change feed cannot catch up; the others are
# shed with SYSTEM_BUSY. Without a bound, an overloaded worker turns every waiting lookup into
# its own Redis read at the same moment, and the work that made the feed late grows instead.
MAX_BYPASSES_IN_FLIGHT = 64


class RouteCache:
    def __init__(
        self,
        fill: Fill,
        *,
        staleness_s: float,
        negative_s: float,
        max_entries: int,
        view: Callable[[], Hashable] = lambda: None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._fill = fill
        # The settings a route is built with (orderMessageEnable, supportActingMaster): when they
        # change, by whatever path, every cached route is out of date.
        self._view_of = view
        self._view = view()
        self.staleness_s = staleness_s
        self.negative_s = negative_s
        self.max_entries = max_entries
        self.clock = clock
        self._routes: OrderedDict[str, CachedRoute] = OrderedDict()
        self._missing: dict[str, float] = {}  # topic -> local expiry of the negative answer
        self._by_broker: dict[str, set[str]] = {}  # broker name -> cached topics showing it
        self._inflight: dict[str, asyncio.Future[CachedRoute | None]] = {}
        self._generation = 0
        self.feed_read_issued_at: float | None = None  # set by the change feed
        self.catch_up: CatchUp | None = None  # set by the change feed: read it now, True if applied
        self.local_write_at = -math.inf
        self.hits = self.misses = self.bypasses = self.shed = self.invalidations = 0
        self._bypassing = 0

    # ---- reads ----
    def fresh(self) -> bool:
        """The feed has applied everything committed up to the bound, and this worker's own writes
        (so a client reads its own writes through the same worker, as with Java)."""
        issued = self.feed_read_issued_at
        return (
            issued is not None and issued >= self.local_write_at and self.clock() - issued <= self.staleness_s
        )

    def note_local_write(self) -> None:
        """This worker just committed a change: answer from Redis until the feed has read past it."""
        self.local_write_at = self.clock()

    def peek(self, topic: str) -> CachedRoute | Literal[False] | None:
        """Without waiting: the cached route, ``False`` for a cached "does not exist", or
        ``None`` when only :meth:`get` can answer (not cached, or not safe to answer from memory)."""
        if self._view_of() != self._view or not self.fresh():
            return None
        return self._remembered(topic)

    def _remembered(self, topic: str) -> CachedRoute | Literal[False] | None:
        """A live entry, ``False`` for a live "does not exist", else None (counted as hits)."""
        now = self.clock()
        entry = self._routes.get(topic)
        if entry is not None and entry.expires_at > now:
            self._routes.move_to_end(topic)
            self.hits += 1
            return entry
        missing_until = self._missing.get(topic)
        if missing_until is not None and missing_until > now:
            self.hits += 1
            return False
        return None

    async def get(self, topic: str) -> CachedRoute | None:
        """The route of ``topic`` (None: TOPIC_NOT_EXIST), from memory when it is safe."""
        view = self._view_of()
        if view != self._view:
            self.clear()
            self._view = view
        if not self.fresh() and not (self.catch_up is not None and await self.catch_up() and self.fresh()):
            return await self._bypass(topic)
        remembered = self._remembered(topic)
        if remembered is not None:
            return remembered or None
        self.misses += 1
        pending = self._inflight.get(topic)
        if pending is not None:  # one Redis read per topic, however many requests miss together
            return await asyncio.shield(pending)
        future: asyncio.Future[CachedRoute | None] = asyncio.get_running_loop().create_future()
        self._inflight[topic] = future
        try:
            result = await self._load(topic)
            future.set_result(result)
            return result
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it; nobody else must log it
            raise
        finally:
            del self._inflight[topic]

    async def _bypass(self, topic: str) -> CachedRoute | None:
        """Answer from Redis without the cache, or shed the lookup when enough already do."""
        if self._bypassing >= MAX_BYPASSES_IN_FLIGHT:
            self.shed += 1
            raise Busy(OVERLOAD_REMARK)
        self.bypasses += 1
        self._bypassing += 1
        try:
            lookup = await self._fill(topic)
        finally:
            self._bypassing -= 1
        return CachedRoute(lookup.route, lookup.valid_until) if lookup.route is not None else None

    async def _load(self, topic: str) -> CachedRoute | None:
        generation = self._generation
        lookup = await self._fill(topic)
        now = self.clock()
        if lookup.route is None:
            if generation == self._generation:
                self._missing[topic] = now + self.negative_s
            return None
        expires_at = min(lookup.valid_until, now + MAX_AGE_S * random.uniform(0.5, 1.0))
        entry = CachedRoute(lookup.route, expires_at, lookup.hidden)
        if generation == self._generation and expires_at > now:
            self._store(topic, entry)
        return entry

    def _store(self, topic: str, entry: CachedRoute) -> None:
        self._forget(topic)
        self._routes[topic] = entry
        self._missing.pop(topic, None)
        for name in entry.broker_names():
            self._by_broker.setdefault(name, set()).add(topic)
        while len(self._routes) > self.max_entries:
            oldest = next(iter(self._routes))
            self._forget(oldest)

    def _forget(self, topic: str) -> None:
        entry = self._routes.pop(topic, None)
        if entry is None:
            return
        for name in entry.broker_names():
            topics = self._by_broker.get(name)
            if topics is not None:
                topics.discard(topic)
                if not topics:
                    del self._by_broker[name]

    # ---- invalidation ----
    def invalidate_topics(self, topics: Iterable[str]) -> None:
        self._generation += 1
        for topic in topics:
            self.invalidations += 1
            self._forget(topic)
            self._missing.pop(topic, None)

    def invalidate_broker(self, broker_name: str) -> None:
        self._generation += 1
        for topic in list(self._by_broker.get(broker_name, ())):
            self.invalidations += 1
            self._forget(topic)
        self._missing.clear()  # a broker that appears can make unknown topics routable

    def clear(self) -> None:
        self._generation += 1
        self.invalidations += len(self._routes)
        self._routes.clear()
        self._missing.clear()
        self._by_broker.clear()

    def on_event(self, kind: str, fields: Mapping[str, str]) -> None:
        """Apply one change-log entry (see lua/README.md, "Change log")."""
        if kind in ("registerQueues", "cleanQueues", "wipePerm", "addPerm", "topicRegister"):
            self.invalidate_topics(_topics_of(fields))
            if kind == "cleanQueues":
                self.invalidate_broker(fields.get("brokerName", ""))
        elif kind == "topicDelete":
            self.invalidate_topics([fields.get("topic", "")])
        elif kind in ("unregister", "close", "expire") or _broker_appears(kind, fields):
            # Only routes that show the broker, or left it out as expired, can change with it. A
            # broker new to the registry changes no cached route until its queues are written,
            # and those events name their topics.
            self.invalidate_broker(fields.get("brokerName", ""))
        elif kind in ("kvPut", "kvDelete") and fields.get("namespace") == "ORDER_TOPIC_CONFIG":
            self.invalidate_topics([fields.get("key", "")])
        elif kind == "config":
            self.clear()

    def stats(self) -> dict[str, int]:
        return {
            "entries": len(self._routes),
            "negative": len(self._missing),
            "hits": self.hits,
            "misses": self.misses,
            "bypasses": self.bypasses,
            "shed": self.shed,
            "invalidations": self.invalidations,
        }


def _broker_appears(kind: str, fields: Mapping[str, str]) -> bool:
    """A registration that changed the BrokerData or started a session, or a heartbeat that
    revived a broker past its deadline: routes may now show it."""
    if kind == "register":
        return fields.get("routeChanged") == "1"
    return kind == "heartbeat" and fields.get("revived") == "1"


def _topics_of(fields: Mapping[str, str]) -> list[str]:
    topics: list[str] = []
    upserted = fields.get("upserted")
    if upserted:
        topics.extend(str(item[0]) for item in orjson.loads(upserted))
    removed = fields.get("removed")
    if removed and removed.startswith("["):
        topics.extend(str(t) for t in orjson.loads(removed))
    topic = fields.get("topic")
    if topic:
        topics.append(topic)
    return topics
