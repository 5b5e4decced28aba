"""The worker's budget of memory for request bodies being decoded (``decodeBudgetBytes``):
REGISTER_BROKER's on both transports, and every HTTP JSON body.

A body costs far more decoded than it does on the wire: a JSON body becomes Python objects
several times its size, and 64 KB of zlib can inflate to 64 MB. Twenty such requests at once
took a worker past a gigabyte. So each decode first reserves what it will hold at its peak
(an estimate that errs high; see :func:`namesrv.protocol.register_body.json_decode_cost` and
:data:`~namesrv.protocol.register_body_compressed.TOPIC_BYTES`) and keeps it until the
registration that needed it is answered, since the decoded topics live that long:

- the reservation is taken on the event loop; when the budget has no room for it, it waits for
  at most ``decodeWaitMillis``, then the request is refused with SYSTEM_BUSY (HTTP 503), which a
  broker retries at its next registration. Freed room goes to the waiters in order of arrival,
  each that fits; a request that fits at once does not wait behind one that does not (the many
  small registrations keep going while big bodies, a flood of them included, take turns);
- a compressed body's cost shows only as it inflates: its decode (in a thread) charges what it
  builds as it goes, without waiting; past the free budget it stops with SYSTEM_BUSY;
- a body that alone would need more than the whole budget is refused for good (code 1 / 413).

Every refusal is counted in ``namesrv_limit_refusals_total{limit="decodeBudgetBytes"}``; what is
held, and the most ever held, are gauges, so that a test (or an operator) can check the bound.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from namesrv.domain.codes import OVERLOAD_REMARK
from namesrv.domain.errors import Busy, TooLarge
from namesrv.protocol.register_body import json_decode_cost

LIMIT = "decodeBudgetBytes"
# Once this many bytes were given back and nothing is being decoded, :attr:`on_idle` runs (the
# worker hands freed memory back to the system then: see namesrv.allocator).
IDLE_AFTER_BYTES = 16 * 1024 * 1024
# Bodies longer than this are parsed in a thread (and measured there): on the event loop they
# would hold up every other request for milliseconds (a 16 MiB body: a second and more).
IN_THREAD_BYTES = 256 * 1024


@dataclass(eq=False)
class _Waiter:
    nbytes: int
    granted: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class DecodeBudget:
    """Bytes reserved by decodes in flight, at most ``capacity``. :meth:`reserve` and
    :meth:`Reservation.release` run on the event loop; :meth:`Reservation.charge` from any
    thread (the lock guards what both touch)."""

    def __init__(
        self, capacity: int, wait_s: float, *, count_refusal: Callable[[str], None] = lambda limit: None
    ) -> None:
        self.capacity = capacity
        self.wait_s = wait_s
        self.count_refusal = count_refusal
        self.held = 0
        self.high_water = 0
        self.on_idle: Callable[[], None] = lambda: None
        self._given = 0  # bytes given back since on_idle last ran
        self._lock = threading.Lock()
        self._waiters: deque[_Waiter] = deque()

    async def reserve(self, nbytes: int, what: str) -> Reservation:
        """Reserve ``nbytes`` for decoding ``what`` (named in refusals), waiting up to ``wait_s``
        for them; raises TooLarge (more than the whole budget) or Busy (not free in time)."""
        self._refuse_if_too_large(nbytes, what)
        with self._lock:
            if self._fits(nbytes):
                self._take(nbytes)
                return Reservation(self, nbytes, what)
            waiter = _Waiter(nbytes)
            self._waiters.append(waiter)
        try:
            async with asyncio.timeout(self.wait_s):
                await asyncio.shield(waiter.granted)  # a timeout must not cancel a grant made meanwhile
        except TimeoutError:
            if not waiter.granted.done():
                self._leave(waiter)
                raise self._busy(what) from None
        except BaseException:  # the request was cancelled (its client left, the worker stops)
            if waiter.granted.done():
                self._give(nbytes)
            else:
                self._leave(waiter)
            raise
        return Reservation(self, nbytes, what)

    async def reserve_json(self, body: bytes, what: str) -> Reservation:
        """:meth:`reserve` what parsing the JSON ``body`` costs (measured in a thread if big)."""
        if len(body) > IN_THREAD_BYTES:
            return await self.reserve(await asyncio.to_thread(json_decode_cost, body), what)
        return await self.reserve(json_decode_cost(body), what)

    def _leave(self, waiter: _Waiter) -> None:
        waiter.granted.cancel()
        with self._lock:
            self._waiters.remove(waiter)
        self._grant()  # those behind it may fit

    def _refuse_if_too_large(self, nbytes: int, what: str) -> None:
        if nbytes > self.capacity:
            self.count_refusal(LIMIT)
            raise TooLarge(
                f"{what} needs about {nbytes} bytes of memory to decode, more than the worker's "
                f"whole budget for decoding ({self.capacity} bytes, decodeBudgetBytes)",
                LIMIT,
            )

    def _busy(self, what: str) -> Busy:
        self.count_refusal(LIMIT)
        return Busy(
            f"{OVERLOAD_REMARK}: bodies being decoded hold the worker's decoding budget "
            f"({self.held} of {self.capacity} bytes, decodeBudgetBytes); {what} was not decoded"
        )

    def _fits(self, nbytes: int) -> bool:
        return self.held + nbytes <= self.capacity

    def _take(self, nbytes: int) -> None:
        self.held += nbytes
        self.high_water = max(self.high_water, self.held)

    def _grow(self, nbytes: int, total: int, what: str) -> None:
        """Charge ``nbytes`` more to a reservation that then holds ``total``; never waits."""
        self._refuse_if_too_large(total, what)
        with self._lock:
            if self._fits(nbytes):
                self._take(nbytes)
                return
        raise self._busy(what)

    def _give(self, nbytes: int) -> None:
        with self._lock:
            self.held -= nbytes
            self._given += nbytes
            idle = not self.held and self._given >= IDLE_AFTER_BYTES
            if idle:
                self._given = 0
        self._grant()
        if idle:
            self.on_idle()

    def _grant(self) -> None:
        """Hand freed bytes to the waiters that fit, in order of arrival."""
        with self._lock:
            for waiter in list(self._waiters):
                if self._fits(waiter.nbytes):
                    self._waiters.remove(waiter)
                    self._take(waiter.nbytes)
                    waiter.granted.set_result(None)


class Reservation:
    """Bytes one decode holds. :meth:`charge` (from the decoding thread) counts what it builds
    against them, and takes more from the budget once that passes them; :meth:`release` (on the
    event loop) gives them all back."""

    __slots__ = ("_budget", "held", "used", "what")

    def __init__(self, budget: DecodeBudget, held: int, what: str) -> None:
        self._budget = budget
        self.held = held
        self.used = 0
        self.what = what

    def charge(self, nbytes: int) -> None:
        self.used += nbytes
        if self.used > self.held:
            self._budget._grow(self.used - self.held, self.used, self.what)
            self.held = self.used

    def release(self) -> None:
        held, self.held = self.held, 0
        if held:
            self._budget._give(held)
