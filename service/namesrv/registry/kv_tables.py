"""GET_KVLIST_BY_NAMESPACE (219) from memory: a namespace's table is read from Redis once per
change, however often clients ask for it.

A namespace read is one HGETALL of up to ``kvNamespaceMaxBytes``: a client (or four) asking for it
in a loop made Redis spend its time copying that table, and every worker's other requests waited
behind it. Here each worker keeps the tables it was asked for and drops one when the change log
says the namespace changed (``kvPut``/``kvDelete``), or when this worker wrote it itself. Reads of
one namespace share one Redis call (single flight), and at most ``READS_IN_FLIGHT`` namespaces are
read at once, so a flood of distinct namespaces queues here instead of taking the Redis pool.

Freshness is the route cache's: a table is served from memory only while the change feed's
knowledge is at most ``staleness_s`` old (or, while Redis is out, for as long as it is: nothing can
change meanwhile). When the feed fell behind, the table waits for one catch-up read of the change
log (shared by every waiting request, and far cheaper than the table) before it is served.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from namesrv.registry.changefeed import Freshness
from namesrv.store.changelog import EventKind

Table = dict[str, str] | None  # None: the namespace does not exist
READS_IN_FLIGHT = 2
MAX_NAMESPACES = 1024


@dataclass(frozen=True)
class _Entry:
    table: Table
    version: int


class KvTables:
    def __init__(
        self,
        read: Callable[[str], Awaitable[Table]],
        freshness: Freshness,
        *,
        staleness_s: float,
        catch_up_s: float = 1.0,
        max_namespaces: int = MAX_NAMESPACES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self.freshness = freshness
        self.staleness_s = staleness_s
        self.catch_up_s = catch_up_s  # longest wait for a catch-up read before reading the table
        self.max_namespaces = max_namespaces
        self.clock = clock
        self._tables: OrderedDict[str, _Entry] = OrderedDict()
        # Bumped whenever a namespace may have changed: a read that started before a bump must
        # not store what it read (it may be older than the change the bump stands for).
        self._versions: dict[str, int] = {}
        self._generation = 0  # bumped by a reset: every version is void
        self._reads: dict[str, asyncio.Future[Table]] = {}
        self._gate = asyncio.Semaphore(READS_IN_FLIGHT)
        self.hits = 0
        self.reads = 0

    async def get(self, namespace: str) -> Table:
        entry = self._tables.get(namespace)
        if entry is not None and not self._servable():
            caught_up = await self.freshness.wait_fresh(self.catch_up_s)
            entry = self._tables.get(namespace) if caught_up else None  # it may have dropped it
        if entry is not None:
            self._tables.move_to_end(namespace)
            self.hits += 1
            return _copy(entry.table)
        pending = self._reads.get(namespace)
        if pending is None:
            pending = asyncio.ensure_future(self._load(namespace))
            self._reads[namespace] = pending
            pending.add_done_callback(lambda _: self._reads.pop(namespace, None))
        return _copy(await asyncio.shield(pending))

    def note_local_write(self, namespace: str) -> None:
        """This worker wrote the namespace: its next read must see the write."""
        self._invalidate(namespace)

    # ---- FeedListener ----
    async def on_event(self, kind: str, fields: Mapping[str, str]) -> None:
        if kind in (EventKind.KV_PUT, EventKind.KV_DELETE):
            self._invalidate(fields.get("namespace", ""))

    async def on_reset(self, reason: str) -> None:
        self._clear()

    def on_recovered(self, since: float) -> None:
        # Tables read while the link was in doubt may hold writes Redis has since lost.
        self._clear()

    # ---- inside ----
    def _servable(self) -> bool:
        now = self.clock()
        known = self.freshness.known_at
        if known is not None and now - known <= self.staleness_s:
            return True
        return self.freshness.outage(now)

    async def _load(self, namespace: str) -> Table:
        version = (self._generation, self._versions.get(namespace, 0))
        async with self._gate:
            self.reads += 1
            table = await self._read(namespace)
        if version == (self._generation, self._versions.get(namespace, 0)):
            self._tables[namespace] = _Entry(table, version[1])
            self._tables.move_to_end(namespace)
            while len(self._tables) > self.max_namespaces:
                self._tables.popitem(last=False)
        return table

    def _invalidate(self, namespace: str) -> None:
        self._tables.pop(namespace, None)
        self._versions[namespace] = self._versions.get(namespace, 0) + 1
        if len(self._versions) > 4 * self.max_namespaces:
            self._clear()

    def _clear(self) -> None:
        self._tables.clear()
        self._versions.clear()
        self._generation += 1


def _copy(table: Table) -> Table:
    """Callers get their own dict: one answer must not change another's."""
    return None if table is None else dict(table)
