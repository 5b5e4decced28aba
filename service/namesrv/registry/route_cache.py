"""A per-worker cache of assembled routes, kept correct by the registry's change log.

A hit costs no Redis round trip: the worker keeps the assembled :class:`TopicRouteData` and, lazily,
its encoded bytes per JSON dialect and per zone.

**The rule.** A cached answer is served only while the worker knows Redis has not changed it, and
that knowledge is never older than ``routeCacheStalenessMillis`` while Redis is reachable:

* **Knowledge** comes from the change feed (:class:`namesrv.registry.changefeed.Freshness`): ``known_at`` is
  when the last successful poll was issued; every change committed before it has been applied,
  and every change names the routes it touches (:mod:`namesrv.registry.route_impact`), which are
  dropped. Redis losing or replacing its data drops everything (the feed's ``on_reset``).
* **Fresh**: ``known_at`` is at most the bound old, and not older than this worker's own last
  write (a client reads its own writes through the same worker). A lookup that is not fresh
  first waits for the poll already in flight, if any: when that brings knowledge back within the
  bound, memory answers. Otherwise it asks the feed to read now (one read shared by every waiting
  lookup) and is then answered from memory: that read was issued after the lookup arrived, so
  the answer is newer than the question, however long the worker then takes to get to it. Only
  if that read fails does it go to Redis itself, at most ``MAX_BYPASSES_IN_FLIGHT`` at a time;
  the rest are shed with SYSTEM_BUSY.
* **Outage** (static stability): while Redis is unreachable or stalled nothing can change the
  table, so cached routes are served for up to ``routeCacheOutageSeconds`` after ``known_at``
  (counted as ``outage``); a lookup the cache cannot answer fails at once with a clear remark.
  When Redis answers again, routes read from it after ``known_at`` are dropped: they may show
  writes that Redis lost with the outage (AOF's last second, a failover to a lagging replica).
* **Deadlines**: a route read from Redis carries the deadline of every broker address it shows;
  the entry expires at the earliest, so an expired broker is never served, sweep or not. Every
  registration and heartbeat the fleet accepts is in the change log with its new deadline, which
  moves the address's deadline here too: a hot route read once stays in memory as long as its
  brokers stay alive. In an outage no broker can heartbeat, so deadlines are judged at
  ``known_at`` (the last moment the worker knew Redis' state) rather than now: no broker ages out
  of the cache because of the outage.
* **Races**: a fill started before an invalidation never stores its (possibly older) answer.
* **Re-reading**: a route served within ``routeCacheRefreshSeconds`` is read again as soon as a
  change drops it, a few at a time, so hot routes stay in memory: the next lookup is a hit, and a
  Redis outage that starts right after a change still finds them (with the change).

**Heal**: when Redis lost registrations (a new data set), the fleet replays them
(:mod:`namesrv.registry.heal`); for ``heal_s`` (longer while replays go on: :class:`HealWindow`)
the routes cached before the loss are served as they were until a change other than a replay
names them (a broker's own queue writes, a broker leaving, a topic deleted): from then on Redis
answers them again. They are served without waiting for a catch-up when the worker's knowledge
is not fresh: the replays' change-log entries keep a busy worker's feed behind, so such a change
ends a pre-loss route once the feed reads it, which may be seconds rather than the bound. A
lookup Redis answers "no such topic" meanwhile gets "name server not ready" instead (clients
retry): no topic that existed
before the loss is ever answered TOPIC_NOT_EXIST while it heals, and the heal's replays do not
compete with a lookup per request.

Entries also expire after ``MAX_AGE_S`` (jittered), a last bound should an event ever be missed.
Negative answers (unknown topic) are kept for ``routeNegativeCacheMillis`` and dropped as soon as
an event names the topic.
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Literal

from namesrv.aio import cancel_and_wait
from namesrv.domain.codes import OVERLOAD_REMARK
from namesrv.domain.errors import Busy, NotReady, StoreUnavailable
from namesrv.registry.changefeed import LISTENER_ERROR, Freshness
from namesrv.registry.route_impact import BROKER_EVENTS, RouteImpact, route_impact
from namesrv.registry.route_lookups import (
    STALE,
    CachedRoute,
    Fill,
    HealWindow,
    Interner,
    Lookup,
    Peeked,
    is_replay,
    shared_route,
)
from namesrv.registry.topics_by_broker import TopicsByBroker
from namesrv.store.changelog import EventKind, entry_key
from namesrv.store.keyspace import live_member

Clock = Callable[[], float]
MAX_AGE_S = 300.0  # entries live 50-100% of this at most, whatever the change log says
# Lookups that may read Redis at once while the change feed cannot catch up; the others are
# shed with SYSTEM_BUSY. Without a bound, an overloaded worker turns every waiting lookup into
# its own Redis read at the same moment, and the work that made the feed late grows instead.
MAX_BYPASSES_IN_FLIGHT = 64
MAX_WAITS_FOR_REDIS = 20  # failed reads waited through in one lookup (each one poll, 20-100 ms)
RESET_GRACE_S = 0.25  # a lookup not in memory waits this long into an outage for Redis to answer
REFRESH_CONCURRENCY = 4  # re-reads of dropped routes in flight at once per worker
REFRESH_ATTEMPTS = 3  # re-reads of one route that another change overtook before it could be stored
# A route read during a heal and named by a replay since is read again when a lookup asks for it
# this long after its read, not sooner: at the RIP-29 shape replays name every topic twenty times
# a second.
HEAL_REREAD_S = 1.0
shared_members: Interner[tuple[str, ...]] = Interner(4096)
UNAVAILABLE_REMARK = "route unavailable: Redis unreachable and the route is not cached on this worker"


class RouteCache:
    def __init__(
        self,
        fill: Fill,
        freshness: Freshness,
        *,
        staleness_s: float,
        outage_s: float,
        catch_up_s: float,
        negative_s: float,
        max_entries: int,
        refresh_s: float = 0.0,
        heal_s: float = 0.0,
        view: Callable[[], Hashable] = lambda: None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._fill = fill
        self.freshness = freshness
        # The settings a route is built with (orderMessageEnable, supportActingMaster): when they
        # change, by whatever path, every cached route is out of date.
        self._view_of = view
        self._view = view()
        self.staleness_s = staleness_s
        self.outage_s = outage_s
        self.catch_up_s = catch_up_s
        self.negative_s = negative_s
        self.max_entries = max_entries
        self.refresh_s = refresh_s
        self.heal_s = heal_s
        self._heal = HealWindow(heal_s, clock)
        self._before_loss: dict[str, CachedRoute] = {}  # the routes cached when Redis lost its data
        self._heal_began = math.inf  # when the last heal began: routes read since are partial
        self.heal_hits = self.heal_refusals = 0
        self.clock = clock
        self._routes: OrderedDict[str, CachedRoute] = OrderedDict()
        self._missing: dict[str, float] = {}  # topic -> local expiry of the negative answer
        # Topics Redis did not hold during a heal: "not ready" until a change names them, so a
        # lookup per request does not compete with the replays for Redis
        self._unready: set[str] = set()
        self._by_broker = TopicsByBroker()  # broker name -> cached topics showing it
        # member -> its deadline (local monotonic) as last heard, for the addresses cached routes
        # show: moved by every registration and heartbeat in the change log
        self._deadlines: dict[str, float] = {}
        self._clock_offset: float | None = None  # local time at Redis time 0, from the last read
        self._inflight: dict[str, asyncio.Future[CachedRoute | None]] = {}
        self._generation = 0
        # replay entries kept through (_keep_while_healing): they leave _generation alone, but a
        # read in flight meanwhile may predate the replay's writes
        self._replays_kept = 0
        self.local_write_at = -math.inf
        self.hits = self.misses = self.bypasses = self.shed = self.invalidations = 0
        self.outage_hits = self.unavailable = self.resets = 0
        # catch-ups answered by the poll already in flight, by a read of their own, or failed
        self.catch_ups = {"in_flight": 0, "read": 0, "failed": 0}
        self._catch_up_timed_out_at = -math.inf  # when a catch-up last ran out its whole deadline
        self.refreshed = self.refresh_failures = self.refresh_overtaken = 0
        self._bypassing = 0
        # topic -> (reads so far, when a lookup last used it), in the order dropped
        self._to_refresh: dict[str, tuple[int, float]] = {}
        self._refresh_wanted = asyncio.Event()
        self._refresher: asyncio.Task[None] | None = None

    # ---- reads ----
    def fresh(self) -> bool:
        """The feed has applied everything committed up to the bound, and this worker's own writes
        (so a client reads its own writes through the same worker, as with Java)."""
        known = self.freshness.known_at
        return known is not None and known >= self.local_write_at and self.clock() - known <= self.staleness_s

    def _outage_servable(self) -> bool:
        """Redis is out: the table cannot change, so what the worker knew may be served a while."""
        return self.freshness.outage(self.clock()) and self._within_outage_budget()

    def _within_outage_budget(self) -> bool:
        # Not bound to this worker's own last write: a write cut short by the outage may not have
        # happened at all, and failing every lookup for the whole outage would be worse.
        known = self.freshness.known_at
        return known is not None and self.clock() - known <= self.outage_s

    def note_local_write(self) -> None:
        """This worker just committed a change: answer from Redis until the feed has read past it."""
        self.local_write_at = self.clock()

    def peek(self, topic: str, *, caught_up: bool = False) -> Peeked:
        """Without waiting: the cached route, ``False`` for a cached "does not exist", ``STALE``
        when the worker's knowledge is not fresh enough to answer from memory now (call
        :meth:`catch_up`, then peek again with ``caught_up``), or ``None`` when only :meth:`get`
        can answer (not cached).

        ``caught_up``: a catch-up read issued after this lookup arrived has been applied, so
        memory answers it correctly however late the worker gets to it.

        Never raises: a topic memory answers "not ready" (during a heal) is left to :meth:`get`,
        whose callers answer it. The remoting fast path calls this inside the transport's read
        callback, where a NotReady closed the client's connection."""
        if self._view_of() != self._view:
            return None
        try:
            if caught_up or self.fresh():
                return self._remembered(topic)
            if self._outage_servable():
                return self._remembered(topic, outage=True)
            if self._heal.open():
                return self._remembered(topic)  # None: read at once (get), no catch-up
        except NotReady:
            return None
        before = self._before_loss_at_once(topic)
        return STALE if before is None else before

    def answers_now(self) -> bool:
        """Whether :meth:`peek` answers from memory now without a catch-up (knowledge fresh, or
        an outage): one check for a whole queue of lookups instead of a peek each."""
        return self.fresh() or self._outage_servable()

    async def catch_up(self) -> bool:
        """True once memory may answer a lookup that arrived before this call: the poll in flight
        brought knowledge back within the bound, or a read issued after this call was applied."""
        deadline = self.clock() + self.catch_up_s
        if await self.freshness.wait_in_flight(self.catch_up_s, until_outage=True) and self.fresh():
            self.catch_ups["in_flight"] += 1
            return True
        remaining = deadline - self.clock()
        applied = remaining > 0 and await self.freshness.wait_fresh(remaining, until_outage=True)
        self.catch_ups["read" if applied else "failed"] += 1
        if not applied and self.clock() >= deadline:
            self._catch_up_timed_out_at = self.clock()
        return applied

    def _remembered(self, topic: str, *, outage: bool = False) -> CachedRoute | Literal[False] | None:
        """A live entry, ``False`` for a live "does not exist", else None (counted as hits)."""
        now = self.clock()
        entry = self._routes.get(topic)
        if entry is not None and (entry.expires_at > now or self._still_valid(entry, now, outage)):
            self._routes.move_to_end(topic)
            entry.served_at = now
            self._count_hit(outage)
            return entry
        missing_until = self._missing.get(topic)
        if missing_until is not None and missing_until > now:
            self._count_hit(outage)
            return False
        if self._unready and topic in self._unready:
            if self._heal.open(now):
                self.heal_refusals += 1
                raise NotReady()
            self._unready.clear()
        return self._before_the_loss(topic, now)

    def _before_the_loss(self, topic: str, now: float) -> CachedRoute | None:
        """The route cached before the loss, while the heal runs; then, for as long again, while
        it is read once more in the background (:meth:`_retiring`)."""
        if not self._before_loss:
            return None
        retiring = self._retiring(now)
        if not retiring and not self._heal.open(now):
            self._before_loss = {}
            return None
        before = self._before_loss.get(topic)
        if before is None:
            return None
        self.heal_hits += 1
        # read since the loss (a partial route that replays named since): read again, now and
        # then; a route cached before the loss is whole, and is read only once the heal is over
        regrown = before.filled_at > self._heal_began and now - before.filled_at >= HEAL_REREAD_S
        if (retiring or regrown) and self._refresher is not None:
            self._to_refresh.setdefault(topic, (0, now))
            self._wake_refresher()
        return before

    def _retiring(self, now: float) -> bool:
        """The heal is over and the routes cached before the loss are being read again, each
        one once a lookup asks for it, a few at a time (the re-reader), and served meanwhile:
        dropped all at once, at the RIP-29 shape every lookup read its 100-group route from
        Redis at the same moment, behind the replays' change-log entries (SYSTEM_ERROR for
        3,533 of 38,000 lookups, p99 1.6 s). A route read from Redis after the heal replaces
        its pre-loss one for good (:meth:`_store`)."""
        return self._refresher is not None and self._heal.until <= now < self._heal.until + self.heal_s

    def _before_loss_at_once(self, topic: str) -> CachedRoute | None:
        """During a heal, the route cached before the loss when this worker's knowledge is not
        fresh: the answer a catch-up would end with, without waiting for it. A heal's replays
        fill the change log faster than a busy worker reads it, and a catch-up then runs out its
        deadline before the pre-loss route is served all the same: at the full RIP-29 shape,
        lookups p50 1.6 s. What it costs: a change other than a replay that names the topic ends
        its pre-loss route once the feed has read it, seconds later, not within the bound."""
        return self._before_the_loss(topic, self.clock())

    def _absent(self, topic: str, now: float, generation: int, lost: bool = False) -> CachedRoute | None:
        """Redis says ``topic`` has no route. During a heal that may only mean its broker is not
        replayed yet, and ``lost`` (the answer came from a data set the change feed has not seen
        yet) that Redis lost its data a moment ago and no heal has begun: "not ready" (clients
        retry), never TOPIC_NOT_EXIST."""
        if self._heal.open(now) or lost:
            self.heal_refusals += 1  # not yet replayed, maybe: not an answer to keep or give
            if generation == self._generation and not lost:  # (no change came while it was read)
                self._unready.add(topic)
            raise NotReady()
        return None

    def _lost_since(self, lookup: Lookup, applied: str) -> bool:
        """Redis lost data since the change feed's last poll, by what its "no such topic" read
        says: another data set than the feed learned from (restarted empty, flushed), or a change
        log that ends before ``applied``, the entry the feed had applied when the read was sent
        (a replica that missed writes was promoted); either way the topic may be a route a heal
        will bring back. Within the staleness bound a worker's knowledge is fresh, yet a cache
        miss reads the new data set: the one way a cached worker could still answer
        TOPIC_NOT_EXIST for a topic that existed (207 times in one RIP-29 heal with cold
        caches). ``applied`` is taken before the read: the feed may apply entries newer than the
        read saw while it is in flight."""
        known = self.freshness.instance
        if lookup.instance is None or not known:
            return False
        if lookup.instance != known:
            return True
        newest = lookup.newest_id
        if not applied or not newest:
            return False
        try:
            return entry_key(newest) < entry_key(applied)
        except ValueError:
            return False

    def _forget_before_loss(self, kind: str, impact: RouteImpact) -> None:
        """A pre-loss route is served until a change other than a replay names it: then it
        changed for good (a broker registered on its own with other queues, a broker left, a
        topic was deleted). A replay only writes back what the route already shows, so its
        queue writes leave it (on_event): at the RIP-29 shape every replay names every topic,
        and dropping the routes at the first one sent every lookup to Redis for a partial
        route while the heal ran (workers overloaded, lookups p99 3.2 s). A replay's
        registration itself brings a broker's BrokerData back as it was and leaves them too."""
        if impact.everything:
            self._before_loss = {}
            return
        for topic in impact.topics:
            self._before_loss.pop(topic, None)
        gone = impact.broker
        if gone is not None and (kind in BROKER_EVENTS or kind == EventKind.CLEAN_QUEUES):
            for topic in [t for t, e in self._before_loss.items() if gone in e.broker_names()]:
                del self._before_loss[topic]

    def healing(self) -> bool:
        return self._heal.open()

    def _still_valid(self, entry: CachedRoute, now: float, outage: bool) -> bool:
        """An entry past the deadline it was read with: its brokers may have heartbeated since."""
        if entry.max_age_at <= now or not entry.members:
            return False  # (a route read with no deadline per address has nothing to move)
        deadlines = self._deadlines
        soonest = min((deadlines.get(m, -math.inf) for m in entry.members), default=math.inf)
        entry.expires_at = min(soonest, entry.max_age_at)
        if entry.expires_at > now:
            return True
        # Redis is out: no broker could heartbeat since known_at, so none ages out of memory now.
        known = self.freshness.known_at
        return outage and known is not None and soonest > known

    def _count_hit(self, outage: bool) -> None:
        if outage:
            self.outage_hits += 1
        else:
            self.hits += 1

    async def get(self, topic: str) -> CachedRoute | None:
        """The route of ``topic`` (None: TOPIC_NOT_EXIST), from memory when it is safe."""
        view = self._view_of()
        if view != self._view:
            self.clear()
            self._view = view
        if not self.fresh():
            if (before := self._before_loss_at_once(topic)) is not None:
                return before
            if self.freshness.outage(self.clock()):
                return await self._during_outage_or_read(topic)
            if self._heal.open():
                # The replays keep the feed behind, and a catch-up would only end with what
                # memory holds or a read of Redis: either now. At the RIP-29 shape with cold
                # caches, lookups that waited for catch-ups and then read 100-group routes from
                # Redis made the cached workers' heal 23-25 s instead of 6 s (lookups p50 2 s).
                return await self._from_memory_or_redis(topic)
            if self.clock() - self._catch_up_timed_out_at < self.catch_up_s:
                # A catch-up ran out its deadline a moment ago, and this lookup most likely waited
                # in it (the remoting fast path's shared round): a second wait would make it wait
                # twice the deadline for the same answer (during a full-size heal, two waits of 1 s
                # were most of the lookups' 2.7 s).
                return self._during_outage(topic)
            # Either knowledge is back within the bound, or the read catch_up triggered was issued
            # after this lookup arrived: memory answers it correctly however late we get to it.
            waiting_since = self.clock()
            if not await self.catch_up():
                if self.freshness.outage(self.clock()) or self.clock() - waiting_since >= self.catch_up_s:
                    # No answer within the deadline is a stall, whatever else Redis answered
                    # meanwhile; a second wait (a read of its own) would make the lookup wait
                    # twice the deadline.
                    return self._during_outage(topic)
                try:
                    return await self._bypass(topic)
                except StoreUnavailable:
                    # Redis failed this read too (a reset, a stall starting): what the worker
                    # knows is all there is, within the outage budget, as in an outage.
                    return self._during_outage(topic)
        return await self._from_memory_or_redis(topic)

    async def _from_memory_or_redis(self, topic: str) -> CachedRoute | None:
        remembered = self._remembered(topic)
        if remembered is not None:
            return remembered or None
        self.misses += 1
        return await self._read_once(topic)

    async def _read_once(self, topic: str, served_at: float | None = None) -> CachedRoute | None:
        """Read and cache ``topic``: one Redis read per topic, however many ask at once.
        ``served_at``: when a lookup last used it (None: a lookup asks now)."""
        pending = self._inflight.get(topic)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[CachedRoute | None] = asyncio.get_running_loop().create_future()
        self._inflight[topic] = future
        try:
            result = await self._load(topic, served_at)
            future.set_result(result)
            return result
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it; nobody else must log it
            raise
        finally:
            del self._inflight[topic]

    async def _during_outage_or_read(self, topic: str) -> CachedRoute | None:
        """Redis is down or stalled: memory answers what it can. When Redis is only stalled (or
        merely slow: no poll has failed yet), a route memory cannot answer is read within the
        deadline rather than refused at once."""
        remembered = self._remembered(topic, outage=True) if self._within_outage_budget() else None
        if remembered is not None:
            return remembered or None
        if not self.freshness.reachable:
            # A poll failed a moment ago (a connection reset): give Redis a short grace to answer
            # again, then answer as usual. Once an outage lasts, lookups fail at once.
            grace = RESET_GRACE_S - self.freshness.down_for()
            if grace <= 0 or not await self._redis_back(grace):
                self.unavailable += 1
                raise StoreUnavailable(UNAVAILABLE_REMARK)
            return await self.get(topic)
        try:
            return await self._bypass(topic)
        except StoreUnavailable:
            self.unavailable += 1
            raise StoreUnavailable(UNAVAILABLE_REMARK) from None

    async def _redis_back(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for a successful read of the change log."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(timeout, self.catch_up_s)
        for _ in range(MAX_WAITS_FOR_REDIS):
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            if await self.freshness.wait_fresh(remaining) and self.freshness.reachable:
                return True
        return False

    def _during_outage(self, topic: str) -> CachedRoute | None:
        """Redis does not answer: from memory within the outage budget, else fail at once."""
        remembered = self._remembered(topic, outage=True) if self._within_outage_budget() else None
        if remembered is None:
            self.unavailable += 1
            raise StoreUnavailable(UNAVAILABLE_REMARK)
        return remembered or None

    async def _bypass(self, topic: str) -> CachedRoute | None:
        """Answer from Redis without the cache, or shed the lookup when enough already do."""
        if self._bypassing >= MAX_BYPASSES_IN_FLIGHT:
            self.shed += 1
            raise Busy(OVERLOAD_REMARK)
        self.bypasses += 1
        self._bypassing += 1
        generation, applied = self._generation, self.freshness.last_id
        try:
            lookup = await self._fill(topic)
        finally:
            self._bypassing -= 1
        if lookup.route is None:
            return self._absent(topic, self.clock(), generation, self._lost_since(lookup, applied))
        return CachedRoute(lookup.route, lookup.valid_until, shared=False)

    async def _load(self, topic: str, served_at: float | None = None) -> CachedRoute | None:
        generation, replays, applied = self._generation, self._replays_kept, self.freshness.last_id
        lookup = await self._fill(topic)
        now = self.clock()
        if lookup.route is None:
            lost = self._lost_since(lookup, applied)
            if lost or self._heal.open(now):
                return self._absent(topic, now, generation, lost)
            if generation == self._generation:
                self._missing[topic] = now + self.negative_s
                self._before_loss.pop(topic, None)  # (the heal is over: Redis answers for it)
            return None
        max_age_at = now + MAX_AGE_S * random.uniform(0.5, 1.0)
        expires_at = min(lookup.valid_until, max_age_at)
        # A re-read keeps the time of the last lookup: a route nobody asks for again leaves the
        # re-reading window instead of being read at every change for good.
        entry = CachedRoute(
            shared_route(lookup.route),
            expires_at,
            lookup.hidden,
            # one copy of each '<cluster>/<addr>', and of each list of them, for every route
            # that shows it (300 per route at the RIP-29 shape: 20 KB of copies per route)
            members=shared_members(tuple(sorted(map(sys.intern, lookup.deadlines)))),
            max_age_at=max_age_at,
            filled_at=now,
            served_at=now if served_at is None else served_at,
        )
        if generation == self._generation and expires_at > now:
            if lookup.clock_offset is not None:
                self._clock_offset = lookup.clock_offset
            for member, deadline in lookup.deadlines.items():
                self._deadlines[member] = max(deadline, self._deadlines.get(member, deadline))
            if replays != self._replays_kept and self._heal.open(now):
                # A replay was applied while this was read: the read may predate its writes
                # (one broker of the route replayed, not yet the other), and no later entry may
                # name the topic. Kept as a replay keeps a route read since the loss: served,
                # and read again when a lookup asks for it a second or more from now.
                self._forget(topic)
                self._before_loss[topic] = entry
            else:
                self._store(topic, entry)
        return entry

    def _store(self, topic: str, entry: CachedRoute) -> None:
        self._forget(topic)
        if self._before_loss and not self._heal.open():
            self._before_loss.pop(topic, None)  # read since the heal: Redis is whole again
        self._routes[topic] = entry
        self._missing.pop(topic, None)
        self._by_broker.add(topic, entry.broker_names())
        while len(self._routes) > self.max_entries:
            oldest = next(iter(self._routes))
            self._forget(oldest)

    def _forget(self, topic: str) -> CachedRoute | None:
        entry = self._routes.pop(topic, None)
        if entry is None:
            return None
        self._by_broker.discard(topic, entry.broker_names())
        return entry

    # ---- invalidation ----
    def invalidate_topics(self, topics: Sequence[str]) -> None:
        self._generation += 1
        self.invalidations += len(topics)
        served_since = self._refresh_window_start()
        # Each table looked up only when it holds something: a heal's entries name 10,000 topics
        # each, a million per worker at the RIP-29 shape, while the tables are empty (the reset).
        if self._routes:
            for topic in topics:
                if topic in self._routes:
                    self._dropped(topic, self._forget(topic), served_since)
        self._forget_negatives(topics)
        self._wake_refresher()

    def invalidate_broker(self, broker_name: str) -> None:
        self._generation += 1
        served_since = self._refresh_window_start()
        for topic in self._by_broker.topics_of(broker_name):
            self.invalidations += 1
            self._dropped(topic, self._forget(topic), served_since)
        self._forget_negatives(None)  # a broker that appears can make unknown topics routable
        self._wake_refresher()

    def _forget_negatives(self, topics: Sequence[str] | None) -> None:
        """Answers of "no such topic" and "not ready" for ``topics`` (None: for every topic)."""
        if topics is None:
            self._missing.clear()
            self._unready.clear()
            return
        if self._missing:  # (walked only when it holds something, as in invalidate_topics)
            for topic in topics:
                self._missing.pop(topic, None)
        if self._unready:
            self._unready.difference_update(topics)

    def clear(self) -> None:
        self._generation += 1
        self.invalidations += len(self._routes)
        self._routes.clear()
        self._missing.clear()
        self._unready.clear()
        self._by_broker.clear()
        self._deadlines.clear()

    def apply(self, impact: RouteImpact) -> None:
        if impact.everything:
            self.clear()
            return
        if impact.topics:
            self.invalidate_topics(impact.topics)
        if impact.broker is not None:
            self.invalidate_broker(impact.broker)

    # ---- what the change feed tells (namesrv.registry.changefeed.FeedListener) ----
    async def on_event(self, kind: str, fields: Mapping[str, str]) -> None:
        """Apply one change-log entry (see lua/README.md, "Change log")."""
        self._note_deadline(kind, fields)
        impact = route_impact(kind, fields)
        if not is_replay(kind, fields):
            self.apply(impact)
            if self._before_loss:
                self._forget_before_loss(kind, impact)
            return
        self._heal.replay_seen()
        if self._heal.open() and not impact.everything:
            self._keep_while_healing(impact)
        else:
            self.apply(impact)

    def _keep_while_healing(self, impact: RouteImpact) -> None:
        """A replay names routes read since the loss: it only brings back what Redis held
        before, so such a route is kept and served like a route cached before the loss, and read
        again in the background when a lookup asks for it HEAL_REREAD_S or more after its read
        (:meth:`_before_the_loss`). Dropped, every lookup read the route again from Redis (twenty
        times a second per topic at the RIP-29 shape), competing with the replays; and a read
        was never kept, every replay meanwhile counting as a change it might have missed. A
        change other than a replay still ends it (on_event)."""
        # Each table looked up only when it holds something: every replay names up to a chunk of
        # topics, while with a warm cache the tables are empty (the pre-loss routes are kept apart).
        self._replays_kept += 1
        if self._routes:
            named = list(impact.topics)
            if impact.broker is not None:
                named.extend(self._by_broker.topics_of(impact.broker))
            for topic in named:
                entry = self._forget(topic)
                if entry is not None:
                    self.invalidations += 1
                    self._before_loss[topic] = entry
        self._forget_negatives(None if impact.broker is not None else impact.topics)

    def _note_deadline(self, kind: str, fields: Mapping[str, str]) -> None:
        """A registration or heartbeat moves its address's deadline (a removal forgets it)."""
        member = live_member(fields.get("cluster", ""), fields.get("brokerAddr", ""))
        if member not in self._deadlines:
            return  # no cached route shows it
        if kind in BROKER_EVENTS:
            del self._deadlines[member]
            return
        ok = kind == EventKind.HEARTBEAT or (kind == EventKind.REGISTER and fields.get("result") == "ok")
        deadline = fields.get("deadline", "")
        if not ok or self._clock_offset is None or not deadline.isdigit():
            return
        heard = self._clock_offset + int(deadline) / 1000
        if kind == EventKind.REGISTER and fields.get("routeChanged") == "1":
            self._deadlines[member] = heard  # a new session, or a shorter timeout: as it says
        else:
            self._deadlines[member] = max(heard, self._deadlines[member])

    async def on_reset(self, reason: str) -> None:
        self.resets += 1
        # a loss during a heal keeps what was cached before the first
        if reason != LISTENER_ERROR and self.heal_s > 0 and self._heal.start():
            self._before_loss = dict(self._routes)
            self._heal_began = self.clock()
        self.clear()

    def on_recovered(self, since: float) -> None:
        """Redis answers again: drop what was read from it after ``since``, which may show writes
        Redis lost with the outage; what was read before is confirmed by the feed's position."""
        self._generation += 1
        for topic in [t for t, e in self._routes.items() if e.filled_at > since]:
            self.invalidations += 1
            self._forget(topic)
        self._missing.clear()

    # ---- re-reading dropped routes ----
    def start(self) -> None:
        """Re-read dropped routes in the background (``refresh_s`` > 0); :meth:`close` stops it."""
        if self.refresh_s > 0 and self._refresher is None:
            self._refresher = asyncio.create_task(self._refresh_loop(), name="route-refresh")

    async def close(self) -> None:
        if self._refresher is not None:
            await cancel_and_wait(self._refresher)
            self._refresher = None
        self._to_refresh.clear()

    def _refresh_window_start(self) -> float:
        """Routes a lookup used since then are read again when dropped (never, when not re-reading)."""
        return self.clock() - self.refresh_s if self._refresher is not None else math.inf

    def _dropped(self, topic: str, entry: CachedRoute | None, served_since: float) -> None:
        if entry is not None and entry.served_at >= served_since:
            self._to_refresh.setdefault(topic, (0, entry.served_at))

    def _wake_refresher(self) -> None:
        if self._to_refresh:
            self._refresh_wanted.set()

    async def _refresh_loop(self) -> None:
        while True:
            await self._refresh_wanted.wait()
            self._refresh_wanted.clear()
            while self._to_refresh:
                if not self.freshness.reachable or self.freshness.outage(self.clock()):
                    # Nothing to read from; lookups answer as the outage rules say, and read
                    # on demand once Redis is back.
                    self._to_refresh.clear()
                    break
                batch: list[tuple[str, int, float]] = []
                while self._to_refresh and len(batch) < REFRESH_CONCURRENCY:
                    topic = next(iter(self._to_refresh))
                    attempts, served_at = self._to_refresh.pop(topic)
                    if topic not in self._routes:  # a lookup may have read it already
                        batch.append((topic, attempts, served_at))
                await asyncio.gather(*(self._refresh(*item) for item in batch))

    async def _refresh(self, topic: str, attempts: int, served_at: float) -> None:
        try:
            await self._read_once(topic, served_at)
        except asyncio.CancelledError:
            raise
        except Exception:  # Redis trouble: counted; lookups will read it on demand
            self.refresh_failures += 1
            return
        if topic in self._routes or topic in self._missing:
            self.refreshed += 1
            return
        # Another change came while it was read, so the answer was not kept: read it again.
        self.refresh_overtaken += 1
        if attempts + 1 < REFRESH_ATTEMPTS:
            self._to_refresh.setdefault(topic, (attempts + 1, served_at))

    def stats(self) -> dict[str, int]:
        return {
            "entries": len(self._routes),
            "negative": len(self._missing),
            "hits": self.hits,
            "misses": self.misses,
            "bypasses": self.bypasses,
            "shed": self.shed,
            "outage": self.outage_hits,
            "unavailable": self.unavailable,
            "invalidations": self.invalidations,
            "resets": self.resets,
            "refreshed": self.refreshed,
            "refresh_failures": self.refresh_failures,
            "refresh_overtaken": self.refresh_overtaken,
            "heal_hits": self.heal_hits,
            "heal_refusals": self.heal_refusals,
            **{f"catch_ups_{how}": count for how, count in self.catch_ups.items()},
        }
