"""How the use cases look routes up (:class:`Routes`), and what a lookup gets: a
:class:`CachedRoute`, ``False`` for a known "does not exist", :data:`STALE` when the worker must catch
up with Redis first, or ``None`` when only a read can answer. :class:`UncachedRoutes` reads every
lookup from Redis (``routeCacheEnabled = false``); :class:`~namesrv.registry.route_cache.RouteCache`
is the cache and its rule.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

import msgspec

from namesrv.domain.errors import NotReady
from namesrv.domain.model import BrokerData, QueueData, TopicRouteData
from namesrv.domain.routes import filter_by_zone
from namesrv.protocol.fastjson import Dialect
from namesrv.protocol.render import route_json, route_json_pieces
from namesrv.registry.changefeed import LISTENER_ERROR
from namesrv.store.changelog import EventKind

NO_NAMES: frozenset[str] = frozenset()  # shared: an empty frozenset is a new GC-tracked object each time

H = TypeVar("H", bound=Hashable)
T = TypeVar("T")
V = TypeVar("V")


class _Sharing(Generic[V]):
    """One shared copy of each value that many cached routes hold alike, found by ``_key``;
    bounded: past ``limit`` values it starts over (what routes hold stays theirs, only sharing
    restarts)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept: dict[Hashable, V] = {}

    def _key(self, value: V) -> Hashable:
        raise NotImplementedError

    def __call__(self, value: V) -> V:
        key = self._key(value)
        kept = self._kept.get(key)
        if kept is None:
            if len(self._kept) >= self.limit:
                self._kept.clear()
            kept = self._kept[key] = value
        return kept


class Interner(_Sharing[H]):
    """Shares equal values."""

    def _key(self, value: H) -> Hashable:
        return value


class SameObjects(_Sharing[tuple[T, ...]]):
    """Shares tuples of the very same objects, for values that are not hashable (a BrokerData
    holds a dict). The key is the objects' ids: a kept tuple holds its objects alive, so an id in
    a kept key cannot belong to another object meanwhile."""

    def _key(self, value: tuple[T, ...]) -> Hashable:
        return tuple(map(id, value))


shared_queue_datas: Interner[tuple[QueueData, ...]] = Interner(4096)
shared_broker_datas: SameObjects[BrokerData] = SameObjects(4096)


def shared_route(route: TopicRouteData) -> TopicRouteData:
    """``route`` holding the same tuples of queues and brokers as every cached route that shows
    the same ones. The parsed QueueData and BrokerData are shared already
    (:func:`namesrv.domain.routes.parse_queue_data`), but at the RIP-29 shape each of 10,000
    routes still held its own two tuples of 100 of them: 17 MB of copies."""
    queues, brokers = shared_queue_datas(route.queueDatas), shared_broker_datas(route.brokerDatas)
    if queues is route.queueDatas and brokers is route.brokerDatas:
        return route
    return msgspec.structs.replace(route, queueDatas=queues, brokerDatas=brokers)


# A route's body, whole, or as pieces that other cached routes share (see ``encoding``)
Encoding = bytes | tuple[bytes, ...]
SPLIT_FROM_BYTES = 4096  # a body at least this long is kept in shared pieces
shared_piece: Interner[bytes] = Interner(65536)
shared_pieces: Interner[tuple[bytes, ...]] = Interner(4096)


def encoding(route: TopicRouteData, dialect: Dialect, *, shared: bool = True) -> Encoding:
    """What a cached route keeps of its body in ``dialect``: the bytes, or for a long body the
    pieces (one text per broker and per queue, and the parts between), each kept once for every
    route that shows it, as is the tuple of them when routes are alike.

    At the RIP-29 shape (10,000 topics on the same 100 broker groups) every route body is 25 KB
    and a worker caching all of them held 250 MB of copies of the same 200 texts per dialect; in
    pieces the routes share them, and a hit joins them (about 10 microseconds for 25 KB)."""
    head, brokers, middle, queues, tail = route_json_pieces(route, dialect)
    whole = (head + ",".join(brokers) + middle + ",".join(queues) + tail).encode()
    # The usual route is one body, as before pieces existed; so is one that answers a single lookup
    # (no cache keeps it): splitting it was a fifth of an uncached worker's CPU per 100-group route.
    if len(whole) < SPLIT_FROM_BYTES or not shared:
        return whole
    pieces = [shared_piece(head.encode())]
    for texts, after in ((brokers, middle), (queues, tail)):
        last = len(texts) - 1
        for i, text in enumerate(texts):
            pieces.append(shared_piece((text if i == last else text + ",").encode()))
        pieces.append(shared_piece(after.encode()))
    return shared_pieces(tuple(pieces))


class CachedRoute(msgspec.Struct, gc=False):
    """A route and its encodings, rendered once and reused by every request that hits it.

    Not tracked by the cyclic GC (nor is anything it holds, see :mod:`namesrv.domain.model`): a
    cache of 10,000 routes would otherwise add tens of thousands of objects to every full
    collection, a pause of every lookup. So the encodings are two fields rather than a dict keyed by
    :class:`Dialect` (enum members are tracked objects, and so would such a dict be)."""

    data: TopicRouteData
    expires_at: float  # local monotonic time: the earliest deadline of its brokers, as last known
    hidden: frozenset[str] = NO_NAMES  # broker names with queues of the topic left out (expired)
    members: tuple[str, ...] = ()  # '<cluster>/<addr>' of every address it shows (their deadlines)
    max_age_at: float = math.inf  # local monotonic time it expires whatever its brokers do
    filled_at: float = 0.0  # local monotonic time its read from Redis completed
    served_at: float = 0.0  # local monotonic time it last answered a lookup
    standard: Encoding | None = None  # the route in Dialect.STANDARD, once asked for
    default: Encoding | None = None  # ... in Dialect.DEFAULT
    zones: dict[str, bytes] = msgspec.field(default_factory=dict)
    shared: bool = True  # kept for many lookups: a long body is kept in pieces shared by routes

    def encoded(self, dialect: Dialect) -> bytes:
        if dialect is Dialect.STANDARD:
            body = self.standard
            if body is None:
                body = self.standard = encoding(self.data, dialect, shared=self.shared)
        else:
            body = self.default
            if body is None:
                body = self.default = encoding(self.data, dialect, shared=self.shared)
        return body if isinstance(body, bytes) else b"".join(body)

    def broker_names(self) -> set[str]:
        """Every broker whose change can change this route."""
        names = {b.brokerName for b in self.data.brokerDatas}
        names.update(q.brokerName for q in self.data.queueDatas)
        return names | self.hidden

    def zone_encoded(self, zone: str) -> bytes:
        """ZoneRouteRPCHook's answer: the zone's brokers, always in fastjson's default dialect."""
        key = zone.lower()
        body = self.zones.get(key)
        if body is None:
            body = self.zones[key] = route_json(filter_by_zone(self.data, zone), Dialect.DEFAULT).encode()
        return body


@dataclass(frozen=True)
class Lookup:
    """What a fill returns: the route (None when the topic does not exist), and until when
    (local monotonic time) it may be served."""

    route: TopicRouteData | None
    valid_until: float
    hidden: frozenset[str] = NO_NAMES  # broker names left out of the route as expired
    deadlines: Mapping[str, float] = field(
        default_factory=dict
    )  # member -> local monotonic deadline, of those shown
    clock_offset: float | None = None  # local monotonic time at Redis time 0, as the read measured it
    # with no route: the identity of the data set Redis answered from, and its change log's
    # newest entry id (None: not read)
    instance: str | None = None
    newest_id: str | None = None


Fill = Callable[[str], Awaitable[Lookup]]


# The heal window stays open while the fleet still replays: until this long after the last replay
# the change log showed, and at most this many windows in all (brokers register on their own
# within 30 s anyway).
REPLAY_QUIET_S = 5.0
MAX_HEAL_WINDOWS = 4


class HealWindow:
    """How long after Redis lost its data a lookup Redis cannot answer yet is "not ready"
    rather than TOPIC_NOT_EXIST, and routes cached before the loss are served: ``seconds``
    after the loss, longer while replays go on (they are marked in the change log, so every
    worker sees every worker's). At the full RIP-29 shape the replays outlasted the 15 s
    window, and lookups after it read routes Redis did not hold yet."""

    def __init__(self, seconds: float, clock: Callable[[], float]) -> None:
        self.seconds = seconds
        self.clock = clock
        self.until = -math.inf
        self._at_most = -math.inf

    def open(self, now: float | None = None) -> bool:
        return (self.clock() if now is None else now) < self.until

    def start(self) -> bool:
        """Redis lost its data: open the window; True when it was closed (a new heal, not a
        second loss during one)."""
        now = self.clock()
        new = now >= self.until
        self.until = now + self.seconds
        self._at_most = now + MAX_HEAL_WINDOWS * self.seconds
        return new

    def replay_seen(self) -> None:
        now = self.clock()
        if now < self.until:
            self.until = min(max(self.until, now + REPLAY_QUIET_S), self._at_most)


def is_replay(kind: str, fields: Mapping[str, str]) -> bool:
    """A heal's replay of a kept registration: its queue writes and the registration itself
    carry the mark (a slave's replay writes no queue: the window must stay open through the
    slaves too, replayed after the masters)."""
    return kind in (EventKind.REGISTER_QUEUES, EventKind.REGISTER) and fields.get("replay") == "1"


class Stale:
    """What :meth:`RouteCache.peek` answers when memory may not answer yet: catch up first."""

    def __repr__(self) -> str:
        return "STALE"


STALE = Stale()
Peeked = CachedRoute | Literal[False] | Stale | None


class Routes(Protocol):
    """How the use cases look routes up: a :class:`RouteCache`, or :class:`UncachedRoutes`."""

    def peek(self, topic: str, *, caught_up: bool = False) -> Peeked: ...

    def answers_now(self) -> bool: ...

    async def catch_up(self) -> bool: ...

    async def get(self, topic: str) -> CachedRoute | None: ...

    def note_local_write(self) -> None: ...

    def start(self) -> None: ...

    async def close(self) -> None: ...


class UncachedRoutes:
    """Every lookup reads Redis (``routeCacheEnabled = false``). A change-feed listener too: for
    ``heal_s`` after Redis lost its data, a topic Redis does not hold yet is answered "not ready"
    (clients retry), not TOPIC_NOT_EXIST, while the fleet replays what it kept (#27)."""

    def __init__(
        self,
        fill: Fill,
        *,
        heal_s: float = 0.0,
        fresh: Callable[[], Awaitable[bool]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fill = fill
        # Before "no such topic": a change-feed read issued after the lookup, so a Redis that just
        # came back empty is noticed (and answered "not ready") rather than believed.
        self._fresh = fresh
        self.heal_s = heal_s
        self.clock = clock
        self._heal = HealWindow(heal_s, clock)
        self.heal_refusals = 0

    def peek(self, topic: str, *, caught_up: bool = False) -> Peeked:
        return None

    def answers_now(self) -> bool:
        return False

    async def catch_up(self) -> bool:
        return False

    async def get(self, topic: str) -> CachedRoute | None:
        lookup = await self._fill(topic)
        if lookup.route is None:
            if self._fresh is not None and self.heal_s > 0:
                await self._fresh()
            if self._heal.open():
                self.heal_refusals += 1
                raise NotReady()
            return None
        return CachedRoute(lookup.route, lookup.valid_until, shared=False)

    # ---- FeedListener ----
    async def on_event(self, kind: str, fields: Mapping[str, str]) -> None:
        if is_replay(kind, fields):
            self._heal.replay_seen()

    async def on_reset(self, reason: str) -> None:
        if reason != LISTENER_ERROR and self.heal_s > 0:
            self._heal.start()

    def on_recovered(self, since: float) -> None:
        pass

    def note_local_write(self) -> None:
        pass

    def start(self) -> None:
        pass

    async def close(self) -> None:
        pass
