"""Tail the registry's change log (``{ns}:events``), tell this worker's listeners, and say how
current this worker's knowledge of Redis is.

Each poll is one ``readChanges`` script call: it reads the next entries and, atomically with that,
checks that Redis still holds the data set the worker learned from (the registry's instance id,
and the last entry applied). When Redis lost or replaced its data (restart without persistence,
FLUSHALL, a failover to a replica that was behind), listeners are told to start over at once,
whatever the worker was doing, so every worker agrees with Redis again within one poll.

The feed is also this worker's Redis heartbeat (:class:`RedisHealth`): a poll that fails or takes
longer than the deadline marks Redis down; the next one that succeeds marks it up, and tells the
listeners what they learned while the link was in doubt (``on_recovered``).

What the route cache trusts (:class:`Freshness`):

* ``known_at``: the (monotonic) time the last successful poll was issued; every change committed
  before it has been applied.
* ``outage(now)``: Redis is unreachable, or stalled: a poll has been outstanding for longer than
  ``stall_s`` while this worker's event loop kept running on time (so the reply is not merely
  waiting in our own queue). No change can commit while Redis does not answer.
* ``wait_in_flight(timeout)``: wait for the poll already on its way, which may be enough.
* ``wait_fresh(timeout)``: read now, for callers whose knowledge is not fresh enough.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from namesrv.aio import cancel_and_wait, raise_if_cancelling, within
from namesrv.store.health import RedisHealth
from namesrv.store.keyspace import Keyspace
from namesrv.store.script_args import FeedReply, FeedStatus, ReadChangesArgs
from namesrv.store.script_call import CallContext
from namesrv.store.scripts import ScriptRegistry

log = logging.getLogger(__name__)
BATCH = 500  # entries per read; a full batch means more may be waiting
TICK_S = 0.01  # the event loop's own heartbeat, to tell a stalled Redis from a busy worker
TICK_SLACK_S = 0.025
STALL_RTTS = 4  # a poll outstanding for this many usual round trips is a stall
RTT_WEIGHT = 0.2
# Between failed polls. Short, because while Redis is out the worker serves what it cached, and
# writes that reached Redis just before it stopped commit the moment it resumes: the next poll
# must notice within about the staleness bound. A refused connection costs next to nothing.
RETRY_MIN_S, RETRY_MAX_S = 0.02, 0.1
# The reason of a start-over that is this worker's own doing (a listener failed), not Redis': every
# other reason means Redis may have lost what the worker knew (listeners may heal it).
LISTENER_ERROR = "listener error"


class FeedListener(Protocol):
    """What the feed tells: entries in order, a start-over, and the end of an outage."""

    async def on_event(self, kind: str, fields: Mapping[str, str]) -> None: ...

    async def on_reset(self, reason: str) -> None: ...

    def on_recovered(self, since: float) -> None:
        """Redis answers again and still holds what was applied up to ``since`` (monotonic);
        anything read from Redis after ``since`` may reflect writes Redis has since lost."""


class Freshness(Protocol):
    """What a cache needs to know about the feed it trusts."""

    @property
    def known_at(self) -> float | None: ...

    @property
    def reachable(self) -> bool: ...

    def down_for(self) -> float: ...

    def outage(self, now: float) -> bool: ...

    async def wait_in_flight(self, timeout: float) -> bool: ...

    async def wait_fresh(self, timeout: float) -> bool: ...


class ChangeFeed:
    def __init__(
        self,
        scripts: ScriptRegistry,
        keyspace: Keyspace,
        *,
        health: RedisHealth,
        poll_interval: float,
        timeout_s: float,
        stall_s: float,
        on_reset_count: Callable[[str], None] = lambda reason: None,
        on_loop_lag: Callable[[float], None] = lambda seconds: None,
    ) -> None:
        self.scripts = scripts
        self.k = keyspace
        # readChanges takes neither the change-log length nor a worker id: it only reads
        self.ctx = CallContext(keyspace, "", "")
        self.health = health
        self.poll_interval = poll_interval
        self.timeout_s = timeout_s
        self.stall_s = stall_s
        self.listeners: list[FeedListener] = []
        self._count_reset = on_reset_count
        self._observe_lag = on_loop_lag  # how late each tick ran (namesrv_event_loop_lag_seconds)
        self.instance = ""  # the registry data set this worker learned from
        self.last_id = ""  # last entry applied; '' until the first poll
        self._known_at: float | None = None
        self._poll_issued: float | None = None
        self._tick = 0.0
        self._rtt = 0.0  # moving average of successful polls' round trips
        self._last_rtt = 0.0
        self._task: asyncio.Task[None] | None = None
        self._ticker: asyncio.TimerHandle | None = None
        # Resolved (True: applied, False: the read failed) by the first read issued after it was
        # created: see wait_fresh.
        self._wanted: asyncio.Future[bool] | None = None
        # Resolved when the poll in flight ends (True: it was applied): see wait_in_flight.
        self._in_flight: asyncio.Future[bool] | None = None
        self._kick = asyncio.Event()

    # ---- what caches trust ----
    @property
    def known_at(self) -> float | None:
        return self._known_at

    @property
    def reachable(self) -> bool:
        """The last poll succeeded (a stall may still be under way)."""
        return self.health.reachable

    def down_for(self) -> float:
        """How long the polls have been failing (0 while they succeed)."""
        return self.health.down_for()

    def outage(self, now: float) -> bool:
        if not self.health.reachable:
            return True
        issued = self._poll_issued
        if issued is None:
            return False
        if now - issued >= self.timeout_s:
            # No answer within the deadline: a stall, whatever else was answered or however late
            # this worker's loop runs (the poll is about to be given up). Without this, a lookup
            # whose catch-up read timed out could go on to wait a second deadline for its own.
            return True
        # A poll is "stalled" past stall_s, or past a few of the recent round trips when Redis is
        # far away (a slow link is not an outage: lookups then wait for a read instead).
        limit = max(self.stall_s, STALL_RTTS * max(self._rtt, self._last_rtt))
        if now - issued <= limit or now - self._tick > TICK_SLACK_S:
            return False
        # Another call sent after this poll got its reply: Redis answers, only slowly (a busy
        # machine), and may be committing writes (this worker's own, say) that memory does not
        # show yet. Not an outage: lookups wait for the poll, as the staleness bound wants.
        return self.health.answered_sent_at <= issued

    async def wait_in_flight(self, timeout: float) -> bool:
        """Wait for the poll now in flight to end: True once it has been applied (``known_at`` is
        then its issue time), False at once when no poll is in flight, or when it failed or took
        longer than ``timeout``.

        A worker whose knowledge just crossed the bound usually has a poll on its way (one that
        its loop, late or busy, has not read the reply of yet): that poll may bring its knowledge
        back within the bound, for the cost of reading a reply that is already there, where a
        read of its own (:meth:`wait_fresh`) is issued only after it."""
        if self._poll_issued is None:
            return False
        if self._in_flight is None:
            self._in_flight = asyncio.get_running_loop().create_future()
        ending = self._in_flight
        done, _ = await asyncio.wait({ending}, timeout=timeout)
        return bool(done) and ending.result()

    async def wait_fresh(self, timeout: float) -> bool:
        """Read the stream now (not at the next poll) and wait until everything committed before
        this call has been applied. False when that read failed, Redis is out, or it took longer
        than ``timeout``.

        Many callers share one read: this is how a worker whose feed fell behind the staleness
        bound catches up, instead of sending every waiting lookup to Redis on its own."""
        if self._task is None or self._task.done():
            return False
        if self._wanted is None:
            self._wanted = asyncio.get_running_loop().create_future()
            self._kick.set()
        wanted = self._wanted
        done, _ = await asyncio.wait({wanted}, timeout=timeout)
        return bool(done) and wanted.result()

    # ---- life cycle ----
    def subscribe(self, listener: FeedListener) -> None:
        self.listeners.append(listener)

    async def start(self) -> None:
        self._tick = time.monotonic()
        self._ticker = asyncio.get_running_loop().call_later(TICK_S, self._beat)
        self._task = asyncio.create_task(self._run(), name="changefeed")

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        if self._task:
            await cancel_and_wait(self._task)

    def _beat(self) -> None:
        now = time.monotonic()
        self._observe_lag(max(0.0, now - self._tick - TICK_S))
        self._tick = now
        self._ticker = asyncio.get_running_loop().call_later(TICK_S, self._beat)

    # ---- the loop ----
    async def _run(self) -> None:
        owed: list[asyncio.Future[bool]] = []  # wait_fresh callers this read (or the next) answers
        retry = RETRY_MIN_S
        while True:
            raise_if_cancelling()
            # time.monotonic, not loop.time(): uvloop's loop time is cached per iteration.
            issued = time.monotonic()
            if self._wanted is not None:
                owed.append(self._wanted)
                self._wanted = None
            self._poll_issued = issued
            try:
                poll = ReadChangesArgs(self.instance, uuid.uuid4().hex, self.last_id, BATCH)
                reply = await within(self.timeout_s, self._read(poll))
            except asyncio.CancelledError:
                self._poll_issued = None
                self._settle_in_flight(False)
                _settle(owed, False)
                raise
            except (RedisError, OSError, TimeoutError) as exc:
                self._poll_issued = None
                self._settle_in_flight(False)
                _settle(owed, False)
                self._went_down(exc)
                await asyncio.sleep(retry)
                retry = min(retry * 2, RETRY_MAX_S)
                continue
            self._poll_issued = None
            # The last round trip counts at once, so a link that just got slower stops looking
            # like a stall after one poll; the average keeps one fast poll from undoing that.
            self._last_rtt = time.monotonic() - issued
            self._rtt += (self._last_rtt - self._rtt) * RTT_WEIGHT
            retry = RETRY_MIN_S
            try:
                received = await self._apply(reply)
            except Exception:
                # A listener failed: what it holds may be wrong, so it starts over.
                log.exception("change feed listener failed; starting over")
                self._settle_in_flight(False)
                _settle(owed, False)
                await self._reset(LISTENER_ERROR)
                continue
            if received < BATCH:  # caught up: everything committed before `issued` is applied
                self._known_at = issued
            # Waiters on this poll look at known_at themselves: a full batch leaves it as it was.
            self._settle_in_flight(True)
            if received < BATCH:
                _settle(owed, True)
                # Polls start poll_interval apart, not poll_interval after the last one ended: what
                # a worker knows is as old as the time from one poll's issue to the next one's
                # reply, and on a busy loop (or a slow link) each reply comes late. Resting a full
                # interval after it made a loaded worker's knowledge cross the staleness bound
                # every few polls, and every lookup then waited for a catch-up read.
                await self._pause(self.poll_interval - (time.monotonic() - issued))

    def _settle_in_flight(self, applied: bool) -> None:
        ending, self._in_flight = self._in_flight, None
        if ending is not None and not ending.done():
            ending.set_result(applied)

    async def _read(self, poll: ReadChangesArgs) -> FeedReply:
        """One poll. A connection Redis closed while it was idle in the pool (a Redis restart or
        failover a moment ago, a server-side timeout) fails on first use: that says nothing about
        Redis now, so the poll is sent once more, on a fresh connection, before Redis counts as
        down (which would fail every lookup that needs Redis until the next poll)."""
        try:
            return await self.scripts.run(poll, self.ctx)
        except RedisConnectionError:
            return await self.scripts.run(poll, self.ctx)

    async def _apply(self, reply: FeedReply) -> int:
        instance, status, last_id, entries = reply
        self.instance = instance
        lasted = self.health.mark_up()
        if lasted is not None:
            log.warning("Redis answers again after %.1f s", lasted)
        if status is FeedStatus.RESET:
            self.last_id = last_id
            await self._reset("Redis holds a new data set (restarted empty, flushed or replaced)")
            return 0
        if status is FeedStatus.GAP:
            gone, self.last_id = self.last_id, last_id
            await self._reset(f"change-log entry {gone} is gone (trimmed, or lost with Redis data)")
            return 0
        if not self.last_id:  # the first poll starts after the newest entry
            self.last_id = last_id
        if lasted is not None and self._known_at is not None:
            for listener in self.listeners:
                listener.on_recovered(self._known_at)
        for entry_id, flat in entries:
            # Marked applied before the listeners run: if one fails, everything starts over and the
            # feed goes on after this entry instead of failing on it forever.
            self.last_id = str(entry_id)
            fields = {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}
            kind = fields.get("kind", "")
            for listener in self.listeners:
                await listener.on_event(kind, fields)
        return len(entries)

    async def _reset(self, reason: str) -> None:
        log.warning("change feed: %s; cached routes dropped", reason)
        self._count_reset("listener" if reason == LISTENER_ERROR else "data")
        for listener in self.listeners:
            try:
                await listener.on_reset(reason)
            except Exception:  # one listener's failure must not stop the others or the feed
                log.exception("change feed reset failed")

    def _went_down(self, exc: BaseException) -> None:
        reason = _describe(exc, self.timeout_s)
        if self.health.mark_down(reason):
            log.warning(
                "Redis unreachable (%s): cached routes are served, other requests fail fast; "
                "retrying every %.1f s at most",
                reason,
                RETRY_MAX_S,
            )

    async def _pause(self, seconds: float) -> None:
        """Sleep between polls, cut short by wait_fresh."""
        if self._wanted is not None or seconds <= 0:
            return
        self._kick.clear()
        handle = asyncio.get_running_loop().call_later(seconds, self._kick.set)
        try:
            await self._kick.wait()
        finally:
            handle.cancel()


def _describe(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, TimeoutError) and not str(exc):
        return f"no answer within {timeout_s * 1000:.0f} ms"
    return f"{type(exc).__name__}: {exc}"


def _settle(waiters: list[asyncio.Future[bool]], applied: bool) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(applied)
    waiters.clear()
