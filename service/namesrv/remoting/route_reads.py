"""Route lookups a worker answers by reading Redis, and client sockets left unread past a bound.

A lookup the route cache cannot answer at once (a worker without the cache, a miss) runs as a task
that reads Redis. Past ``redisMaxConnections`` of them, more tasks only wait for a pooled
connection; under a load the worker cannot keep up with, thousands of them then wait, each held in
memory and walked by every garbage collection, so the worker answers fewer lookups per second the
further behind it falls (at the RIP-29 shape, a worker without the cache offered 80% of its
measured peak answered at twice the CPU per lookup, p50 0.36-0.98 s). Instead, a connection that
starts one past the bound stops being read until half of them are done: the backlog waits in the
sockets, where it costs the worker nothing, not in tasks whose cost grows with it (TCP
backpressure, as issue #26 asks for overload).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

REASON = "route-reads"


class Pausable(Protocol):
    def hold_reading(self, reason: str) -> None: ...

    def release_reading(self, reason: str) -> None: ...


class RouteReads:
    def __init__(self, limit: int, on_pause: Callable[[], None] = lambda: None) -> None:
        self.limit = max(2, limit)
        self.running = 0
        self.pauses = 0  # connections left unread because the bound was reached
        self._on_pause = on_pause
        self._paused: set[Pausable] = set()

    def started(self, conn: Pausable) -> None:
        self.running += 1
        if self.running >= self.limit and conn not in self._paused:
            self._paused.add(conn)
            self.pauses += 1
            self._on_pause()
            conn.hold_reading(REASON)

    def finished(self) -> None:
        self.running -= 1
        if self._paused and self.running <= self.limit // 2:
            paused, self._paused = self._paused, set()
            for conn in paused:
                conn.release_reading(REASON)

    def forget(self, conn: Pausable) -> None:
        """The connection closed."""
        self._paused.discard(conn)
