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
  before it has been applied. A poll that did not reach the end of the log (a flood of entries:
  a heal's replays) moves it too, to the Redis time of the last entry applied, in the worker's
  clock: a worker that keeps up with a flood stays fresh, one that falls behind knows by how much.
  With a :class:`FreshnessProbe`, also the time of the probe's last
  poll when the newest entry it saw is the one this worker applied last: a worker too busy to
  run its own poll thread still knows that nothing changed.
* ``outage(now)``: Redis is unreachable, or stalled: a poll has been outstanding for longer than
  ``stall_s`` while this worker's event loop kept running on time (so the reply is not merely
  waiting in our own queue). No change can commit while Redis does not answer.
* ``wait_in_flight(timeout)``: wait for the poll already on its way, which may be enough.
* ``wait_fresh(timeout)``: read now, for callers whose knowledge is not fresh enough.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import NamedTuple, Protocol

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from namesrv.aio import within
from namesrv.registry.freshness_probe import FreshnessProbe
from namesrv.store.health import RedisHealth
from namesrv.store.keyspace import Keyspace
from namesrv.store.redis_client import close_client
from namesrv.store.script_args import FeedReply, FeedStatus, ReadChangesArgs
from namesrv.store.script_call import CallContext
from namesrv.store.scripts import ScriptRegistry

log = logging.getLogger(__name__)
BATCH = 500  # entries per read; a full batch means more may be waiting
BATCH_BYTES = 256 << 10  # and bytes per read (entry fields): a read stays a short Redis command
TICK_S = 0.01  # the event loop's own heartbeat, to tell a stalled Redis from a busy worker
TICK_SLACK_S = 0.025
PROBE_CHECK_TICKS = 100  # the worker's loop checks every ~1 s that its freshness probe runs
STALL_RTTS = 4  # a poll outstanding for this many usual round trips is a stall
RTT_WEIGHT = 0.2
# Between failed polls. Short, because while Redis is out the worker serves what it cached, and
# writes that reached Redis just before it stopped commit the moment it resumes: the next poll
# must notice within about the staleness bound. A refused connection costs next to nothing.
RETRY_MIN_S, RETRY_MAX_S = 0.02, 0.1
# The reason of a start-over that is this worker's own doing (a listener failed), not Redis': every
# other reason means Redis may have lost what the worker knew (listeners may heal it).
LISTENER_ERROR = "listener error"


class Waiter(NamedTuple):
    """A caller of :meth:`ChangeFeed.wait_fresh`: satisfied once everything committed before
    ``asked_at`` (monotonic) has been applied."""

    asked_at: float
    done: asyncio.Future[bool]


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

    @property
    def instance(self) -> str: ...  # the data set the feed learned from ('' before its first poll)

    @property
    def last_id(self) -> str: ...  # the change-log entry it applied last ('' before its first poll)

    def down_for(self) -> float: ...

    def outage(self, now: float) -> bool: ...

    async def wait_in_flight(self, timeout: float, *, until_outage: bool = False) -> bool: ...

    async def wait_fresh(self, timeout: float, *, until_outage: bool = False) -> bool: ...


class ChangeFeed:
    """Polls ``readChanges`` on a thread of its own (its own event loop, its own Redis connection)
    and applies what it reads on the worker's event loop.

    Why a thread: a poll's reply used to wait for the worker's loop to get round to it, several
    loop iterations through redis-py's futures, each as long as the client work in it. Under load
    the worker's knowledge then aged past the staleness bound by itself, lookups waited for
    catch-up reads, and the waiting added load: a busy worker made itself wait. On its own thread
    a poll is answered as fast as Redis answers (the thread needs the GIL only briefly, and gets it
    at least every switch interval, 5 ms). A poll that found nothing new moves ``known_at`` at once
    from the thread, whatever the worker's loop is doing; one that found entries hands them to the
    loop and the thread waits until the listeners have applied them, so ``known_at`` never claims
    more than the caches hold.

    ``poll_client`` makes the thread's Redis client (called on the thread); by default it is a
    copy of the scripts' client's connection settings."""

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
        poll_client: Callable[[], Redis] | None = None,
        probe: FreshnessProbe | None = None,
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
        self._poll_client = poll_client or _copy_of(scripts.redis)
        self.instance = ""  # the registry data set this worker learned from
        self.last_id = ""  # last entry applied; '' until the first poll
        # Written by the poll thread, read by the loop: single attribute writes are atomic.
        self._known_at: float | None = None
        # (instance, entry id) this worker had applied when it last set _known_at: a probe reading
        # that saw the same is as good as a poll of our own (see known_at)
        self._applied: tuple[str, str] | None = None
        self.probe = probe
        self.probe_vouched = 0  # probe readings that moved known_at past our own polls
        self._probe_issued = 0.0
        self._ticks = 0
        self._poll_issued: float | None = None
        self._tick = 0.0  # the worker's loop's last tick (its lag metric)
        self._poll_tick = 0.0  # the poll thread's loop's last tick (is the thread itself late?)
        self._poll_ticker: asyncio.TimerHandle | None = None
        # since when the poll thread has ticked on time: only that long counts against Redis
        self.poll_on_time_since = 0.0
        self._rtt = 0.0  # moving average of successful polls' round trips
        self._last_rtt = 0.0
        self._ticker: asyncio.TimerHandle | None = None
        self.poll_faults = 0  # polls that failed in our own code rather than in Redis
        self._last_fault = ""
        self.thread_restarts = 0  # poll threads started again after one ended on its own
        self._loop: asyncio.AbstractEventLoop | None = None  # the worker's loop
        self._thread: threading.Thread | None = None
        self._poll_loop: asyncio.AbstractEventLoop | None = None
        self._kick: asyncio.Event | None = None  # on the poll thread's loop: poll now
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # guards the waiter lists shared with the thread
        # Resolved (True: applied, False: the read failed) by the first poll issued after they
        # were added: see wait_fresh.
        self._wanted: list[Waiter] = []
        self._polling: list[Waiter] = []  # the waiters the poll thread's read owes
        # Callers waiting until an outage begins, told False by the loop's tick when it does
        self._until_outage: set[asyncio.Future[bool]] = set()
        # Resolved when the poll in flight ends (True: it was applied): see wait_in_flight.
        self._in_flight: asyncio.Future[bool] | None = None

    # ---- what caches trust ----
    @property
    def known_at(self) -> float | None:
        known = self._known_at
        probe = self.probe
        if probe is None or known is None or time.monotonic() - known < 2 * probe.interval:
            return known  # our own polls keep up: no need to look at the probe's record
        reading = probe.reading()
        if (
            reading is None
            or reading.issued <= known
            or (reading.instance, reading.newest) != self._applied
            or not self.health.reachable
        ):
            return known
        if reading.issued != self._probe_issued:
            self._probe_issued = reading.issued
            self.probe_vouched += 1
        return reading.issued

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
            # No answer within the deadline: a stall, whatever else was answered (the poll is
            # about to be given up). Without this, a lookup whose catch-up read timed out could go
            # on to wait a second deadline for its own.
            return True
        # A poll is "stalled" past stall_s, or past a few of the recent round trips when Redis is
        # far away (a slow link is not an outage: lookups then wait for a read instead), counted
        # only while the poll thread's own loop ran on time: a process or a machine held off the
        # CPU is not a Redis stall, and once it runs again Redis, which may have waited for a CPU
        # too, or whose reply sat unread, gets that long afresh. The worker's loop being late
        # says nothing about Redis any more.
        limit = max(self.stall_s, STALL_RTTS * max(self._rtt, self._last_rtt))
        if now - max(issued, self.poll_on_time_since) <= limit or now - self._poll_tick > TICK_SLACK_S:
            return False
        # Another call sent after this poll got its reply: Redis answers, only slowly (a busy
        # machine), and may be committing writes (this worker's own, say) that memory does not
        # show yet. Not an outage: lookups wait for the poll, as the staleness bound wants.
        return self.health.answered_sent_at <= issued

    async def wait_in_flight(self, timeout: float, *, until_outage: bool = False) -> bool:
        """Wait for the poll now in flight to end: True once it has been applied (``known_at`` is
        then its issue time), False at once when no poll is in flight, or when it failed or took
        longer than ``timeout``.

        A worker whose knowledge just crossed the bound usually has a poll on its way: that poll
        may bring its knowledge back within the bound, where a read of its own
        (:meth:`wait_fresh`) is issued only after it. ``until_outage``: give up (False) as soon as
        the poll looks stalled, for a caller that then serves from memory."""
        if self._poll_issued is None:
            return False
        with self._lock:
            if self._in_flight is None:
                self._in_flight = asyncio.get_running_loop().create_future()
            ending = self._in_flight
        return await self._wait(ending, timeout, until_outage)

    async def wait_fresh(self, timeout: float, *, until_outage: bool = False) -> bool:
        """Read the stream now (not at the next poll) and wait until everything committed before
        this call has been applied. False when that read failed, Redis is out, or it took longer
        than ``timeout``.

        Many callers share one read: this is how a worker whose feed fell behind the staleness
        bound catches up, instead of sending every waiting lookup to Redis on its own."""
        if self._thread is None or not self._thread.is_alive():
            return False
        wanted = Waiter(time.monotonic(), asyncio.get_running_loop().create_future())
        with self._lock:
            self._wanted.append(wanted)
        self._wake_poller()
        return await self._wait(wanted.done, timeout, until_outage)

    async def _wait(self, waiter: asyncio.Future[bool], timeout: float, until_outage: bool) -> bool:
        """``waiter``'s result, or False once ``timeout`` passed or (``until_outage``) an outage
        began meanwhile: a caller that serves from memory in an outage must not wait out a stalled
        poll's deadline first.

        The outage is checked by the loop's tick for every such caller at once: each caller
        checking for itself every 10 ms cost a worker a fifth of its loop during a full-size heal,
        thousands of lookups waiting at once, and the feed fell further behind."""
        if not until_outage:
            done, _ = await asyncio.wait({waiter}, timeout=timeout)
            return bool(done) and waiter.result()
        if self.outage(time.monotonic()):
            return False
        loop = asyncio.get_running_loop()
        mine: asyncio.Future[bool] = loop.create_future()

        def relay(ended: asyncio.Future[bool]) -> None:
            if not mine.done():
                mine.set_result(not ended.cancelled() and ended.result())

        waiter.add_done_callback(relay)
        timer = loop.call_later(timeout, _settle_one, mine, False)
        self._until_outage.add(mine)
        try:
            return await mine
        finally:
            timer.cancel()
            self._until_outage.discard(mine)

    # ---- life cycle ----
    def subscribe(self, listener: FeedListener) -> None:
        self.listeners.append(listener)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._tick = self._poll_tick = time.monotonic()
        self._ticker = self._loop.call_later(TICK_S, self._beat)
        self._stopping.clear()
        self._start_thread()
        if self.probe is not None:
            self.probe.start()

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        thread = self._thread
        if thread is not None:
            self._stopping.set()
            self._wake_poller()
            # Joined from another thread: the poll thread may be handing entries to this loop,
            # which must keep turning while it ends.
            await asyncio.to_thread(thread.join)
            self._thread = None
            with self._lock:
                owed, self._wanted = self._wanted, []
            _settle(owed, False)
            self._settle_in_flight(False)
        if self.probe is not None:  # after the thread: it writes to the memory shared with the probe
            self.probe.stop()

    def _beat(self) -> None:
        now = time.monotonic()
        self._observe_lag(max(0.0, now - self._tick - TICK_S))
        self._tick = now
        self._ticks += 1
        self._keep_polling()
        if self._until_outage and self.outage(now):
            waiting, self._until_outage = self._until_outage, set()
            for waiter in waiting:
                _settle_one(waiter, False)
        if self.probe is not None and self._ticks % PROBE_CHECK_TICKS == 0:
            self.probe.keep_running()
        if self._loop is not None:
            self._ticker = self._loop.call_later(TICK_S, self._beat)

    # ---- the poll thread ----
    def _thread_main(self) -> None:
        loop = _new_loop()
        asyncio.set_event_loop(loop)
        self._poll_loop = loop
        try:
            loop.run_until_complete(self._poll_forever())
        except BaseException:
            # Whatever ended it, the worker must not go on without its feed: a worker whose poll
            # thread died kept serving, never saw Redis lose its data and never healed it. The
            # loop's next tick starts a new thread (_keep_polling).
            if not self._stopping.is_set():
                log.critical("change feed poll thread failed; starting a new one", exc_info=True)
            # its waiters hear now that the read they waited for failed, not at their deadline
            with self._lock:
                owed, self._wanted = [*self._polling, *self._wanted], []
            self._to_loop(_settle_all, owed, self._end_in_flight(), False)
        finally:
            self._poll_loop = None
            loop.close()

    def _keep_polling(self) -> None:
        thread = self._thread
        if thread is not None and not thread.is_alive() and not self._stopping.is_set():
            self.thread_restarts += 1
            self._start_thread()

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._thread_main, name="namesrv-changefeed", daemon=True)
        self._thread.start()

    def _wake_poller(self) -> None:
        loop, kick = self._poll_loop, self._kick
        if loop is not None and kick is not None:
            with contextlib.suppress(RuntimeError):  # the thread's loop closed meanwhile
                loop.call_soon_threadsafe(kick.set)

    def _to_loop(self, callback: Callable[..., object], *args: object) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the worker's loop is closing: nobody waits
            self._loop.call_soon_threadsafe(callback, *args)

    def _poll_beat(self) -> None:
        now = time.monotonic()
        if now - self._poll_tick > TICK_S + TICK_SLACK_S:
            self.poll_on_time_since = now
        self._poll_tick = now
        self._poll_ticker = None
        # Only a poll in flight is judged by these ticks (outage): between polls the thread
        # sleeps. Each wake-up of this thread takes the GIL from the worker's loop, and a loop
        # thread that lets go of it may find its core taken when it wants it back.
        if self._poll_issued is not None and not self._stopping.is_set() and self._poll_loop is not None:
            self._poll_ticker = self._poll_loop.call_later(TICK_S, self._poll_beat)

    def _poll_ended(self) -> None:
        self._poll_issued = None
        if self._poll_ticker is not None:
            self._poll_ticker.cancel()
            self._poll_ticker = None

    def _beat_while_polling(self, issued: float) -> None:
        """A poll leaves now, on a thread that is plainly running: its ticks start afresh."""
        self._poll_tick = issued
        if self._poll_ticker is None and self._poll_loop is not None:
            self._poll_ticker = self._poll_loop.call_later(TICK_S, self._poll_beat)

    async def _poll_forever(self) -> None:
        self._kick = asyncio.Event()
        self._poll_ticker = None  # a thread that died left its ticker on a loop that is gone
        self._poll_beat()
        client = self._poll_client()
        scripts = ScriptRegistry(
            client, {n: s for n, s in self.scripts.scripts.items() if n == "readChanges"}
        )
        retry = RETRY_MIN_S
        try:
            while not self._stopping.is_set():
                issued = time.monotonic()
                with self._lock:
                    owed, self._wanted = self._wanted, []
                self._polling = owed
                self._poll_issued = issued
                self._beat_while_polling(issued)
                poll = ReadChangesArgs(self.instance, uuid.uuid4().hex, self.last_id, BATCH, BATCH_BYTES)
                try:
                    reply = await within(self.timeout_s, self._read(scripts, poll))
                except Exception as exc:
                    self._poll_ended()
                    if not isinstance(exc, (RedisError, OSError, TimeoutError)):
                        # Not Redis' answer but our handling of it (a reply we could not decode,
                        # a client library fault after a restart): the poll failed all the same,
                        # and the thread must live on, or the worker never follows the log again.
                        self._note_poll_fault(exc)
                    self._to_loop(self._poll_failed, exc, owed)
                    await self._pause(retry)
                    retry = min(retry * 2, RETRY_MAX_S)
                    continue
                self._poll_ended()
                # The last round trip counts at once, so a link that just got slower stops looking
                # like a stall after one poll; the average keeps one fast poll from undoing that.
                self._last_rtt = time.monotonic() - issued
                self._rtt += (self._last_rtt - self._rtt) * RTT_WEIGHT
                self.health.note_answer(issued)
                retry = RETRY_MIN_S
                if self._nothing_new(reply):
                    # Nothing to apply: knowledge moves on here, whatever the worker's loop is doing.
                    self._know(issued)
                    ending = self._end_in_flight()
                    if owed or ending is not None:  # else waking the worker's loop does nothing
                        self._to_loop(_settle_all, owed, ending, True)
                    full = False
                else:
                    assert self._loop is not None
                    handed = asyncio.run_coroutine_threadsafe(
                        self._apply_on_loop(reply, issued, owed), self._loop
                    )
                    try:
                        full = await asyncio.wrap_future(handed)
                    except RuntimeError:  # the worker's loop is closing
                        return
                if not full:
                    # Polls start poll_interval apart, not poll_interval after the last one ended:
                    # what a worker knows is as old as the time from one poll's issue to the next
                    # one's reply.
                    await self._pause(self.poll_interval - (time.monotonic() - issued))
        finally:
            await close_client(client)

    def _note_poll_fault(self, exc: Exception) -> None:
        self.poll_faults += 1
        kind = f"{type(exc).__name__}: {exc}"
        if kind != self._last_fault:  # once per distinct fault, not once per poll
            self._last_fault = kind
            log.error("change feed poll failed (%s); polling again", kind, exc_info=exc)

    def _know(self, issued: float) -> None:
        self._known_at = issued
        if self.probe is not None:
            self.probe.note_known(issued)

    def _nothing_new(self, reply: FeedReply) -> bool:
        return (
            reply.status is FeedStatus.ENTRIES
            and not reply.entries
            and reply.instance == self.instance
            and bool(self.last_id)
            and self.health.reachable
        )

    def _end_in_flight(self) -> asyncio.Future[bool] | None:
        with self._lock:
            ending, self._in_flight = self._in_flight, None
        return ending

    async def _read(self, scripts: ScriptRegistry, poll: ReadChangesArgs) -> FeedReply:
        """One poll. A connection Redis closed while it was idle (a Redis restart or failover a
        moment ago, a server-side timeout) fails on first use: that says nothing about Redis now,
        so the poll is sent once more, on a fresh connection, before Redis counts as down."""
        try:
            return await scripts.run(poll, self.ctx)
        except RedisConnectionError:
            return await scripts.run(poll, self.ctx)

    async def _pause(self, seconds: float) -> None:
        """Sleep between polls (on the poll thread), cut short by wait_fresh and stop."""
        kick = self._kick
        assert kick is not None
        with self._lock:
            wanted = bool(self._wanted)
        if wanted or seconds <= 0 or self._stopping.is_set():
            return
        kick.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(kick.wait(), seconds)

    # ---- on the worker's loop ----
    def _poll_failed(self, exc: BaseException, owed: list[Waiter]) -> None:
        self._settle_in_flight(False)
        _settle(owed, False)
        self._went_down(exc)

    async def _apply_on_loop(self, reply: FeedReply, issued: float, owed: list[Waiter]) -> bool:
        """Apply a poll's reply for the listeners; True when it was full (more may be waiting)."""
        try:
            full = await self._apply(reply)
        except Exception:
            # A listener failed: what it holds may be wrong, so it starts over.
            log.exception("change feed listener failed; starting over")
            self._settle_in_flight(False)
            _settle(owed, False)
            await self._reset(LISTENER_ERROR)
            return False
        if not full:  # caught up: everything committed before `issued` is applied
            self._applied = (self.instance, self.last_id)
            self._know(issued)
            self._settle_in_flight(True)
            _settle(owed, True)
        else:
            known = self._known_through(reply, issued)
            if known is not None and known > (self._known_at or -math.inf):
                self._know(known)
            # Waiters on the poll in flight look at known_at themselves.
            self._settle_in_flight(True)
            reached = -math.inf if known is None else known
            _settle([w for w in owed if w.asked_at <= reached], True)
            with self._lock:  # the others wait for the poll that reads past their time
                self._wanted[:0] = [w for w in owed if w.asked_at > reached]
        return full

    @staticmethod
    def _known_through(reply: FeedReply, issued: float) -> float | None:
        """After a read that did not reach the end of the log: the (monotonic) time before which
        every change has been applied, or None when it cannot be told.

        Entry ids start with the Redis time (ms) they were added at, never later than it, and
        entries are added in time order: every change committed before the last applied entry's
        time has been applied. That time is ``now_ms - id_ms`` before the read ran, and the read
        ran after ``issued``; 1 ms more covers the clock's truncation to whole ms. A Redis clock
        that went back (the entry looks newer than the read) says nothing."""
        if not reply.entries or reply.now_ms <= 0:
            return None
        entry_ms = str(reply.entries[-1][0]).partition("-")[0]
        if not entry_ms.isdigit():
            return None
        behind_ms = reply.now_ms + 1 - int(entry_ms)
        if behind_ms < 1:
            return None
        return issued - behind_ms / 1000

    def _settle_in_flight(self, applied: bool) -> None:
        ending = self._end_in_flight()
        if ending is not None and not ending.done():
            ending.set_result(applied)

    async def _apply(self, reply: FeedReply) -> bool:
        """Apply ``reply``; True when it was full (a whole batch, or cut short by its byte bound)."""
        instance, status, last_id, entries, more, _ = reply
        self.instance = instance
        lasted = self.health.mark_up()
        if lasted is not None:
            log.warning("Redis answers again after %.1f s", lasted)
        if status is FeedStatus.RESET:
            self.last_id = last_id
            await self._reset("Redis holds a new data set (restarted empty, flushed or replaced)")
            return False
        if status is FeedStatus.GAP:
            gone, self.last_id = self.last_id, last_id
            await self._reset(f"change-log entry {gone} is gone (trimmed, or lost with Redis data)")
            return False
        if not self.last_id:  # the first poll starts after the newest entry
            self.last_id = last_id
        if lasted is not None and self._known_at is not None:
            for listener in self.listeners:
                listener.on_recovered(self._known_at)
        for entry_id, flat in entries:
            # Marked applied before the listeners run: if one fails, everything starts over and the
            # feed goes on after this entry instead of failing on it forever.
            self.last_id = str(entry_id)
            # read-only: every listener gets the same mapping (route_impact decodes it once)
            fields = MappingProxyType({str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)})
            kind = fields.get("kind", "")
            for listener in self.listeners:
                await listener.on_event(kind, fields)
        return more or len(entries) >= BATCH

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


def _describe(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, TimeoutError) and not str(exc):
        return f"no answer within {timeout_s * 1000:.0f} ms"
    return f"{type(exc).__name__}: {exc}"


def _settle(waiters: list[Waiter], applied: bool) -> None:
    for waiter in waiters:
        if not waiter.done.done():
            waiter.done.set_result(applied)
    waiters.clear()


def _settle_one(waiter: asyncio.Future[bool], applied: bool) -> None:
    if not waiter.done():
        waiter.set_result(applied)


def _settle_all(waiters: list[Waiter], ending: asyncio.Future[bool] | None, applied: bool) -> None:
    _settle(waiters, applied)
    if ending is not None and not ending.done():
        ending.set_result(applied)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _copy_of(redis: Redis) -> Callable[[], Redis]:
    """A factory of a client with ``redis``'s connection settings, for another thread's loop."""

    def make() -> Redis:
        pool = redis.connection_pool
        kwargs = dict(pool.connection_kwargs)
        copy = type(pool)(connection_class=pool.connection_class, max_connections=2, **kwargs)
        return Redis.from_pool(copy)  # closes its pool with it

    return make
