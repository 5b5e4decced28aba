"""Read-only script calls that share connections: the calls a worker makes in one turn of its event
loop go to Redis in one write, on a connection the pipe keeps between calls.

A worker without the route cache reads every route from Redis. Through redis-py's client each of
those calls checks a connection out of the pool and back in (a lock, a readiness probe of the
socket, connection events), writes alone and is woken alone: in an open-loop lookup window that
cost as much worker CPU as assembling the route, and a worker that fell behind for a moment paid
it again for each call of the backlog, so a backlog hardly drained. Here a backlog is one write
and one read per connection, and an idle worker's single call skips the pool.

Scripts stay atomic (each EVALSHA runs alone inside Redis); only the round trips are shared.
Only scripts that write nothing go through it: a call on a kept connection that Redis had
closed meanwhile is sent again on a fresh one, whether or not it reached Redis.
A call's deadline is a timer on its own future, so a caller is never held past it and no task is
created per call. A connection whose batch failed midway (a reset, a stall past every caller's
deadline, a failover's READONLY) is closed and handed back to the pool, and every call still
waiting on it gets the error, which the store's retry treats like any other connection error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.exceptions import ConnectionError, NoScriptError, ResponseError

from namesrv.store.scripts import NOSCRIPT_ATTEMPTS, ScriptRegistry

LANES = 8  # batches in flight at once; calls arriving meanwhile wait for the next free one
# Calls per batch, at most. Redis runs what one connection sent before it turns to the next, and
# writes one connection's replies at most 64 KB per turn of its event loop: a batch of 16 reads of
# a 100-group route (400 KB of replies) held the change log's poll and made a worker near its
# capacity drain a backlog more slowly than one read per connection did. With 8 lanes of 4 the
# p99 around stalls was under that of one read per connection in 7 rounds of 9 (docs/design.md).
BATCH_CALLS = 4


@dataclass(eq=False)
class _Call:
    sha: str
    keys: Sequence[str]
    args: Sequence[Any]
    answer: asyncio.Future[Any]
    batch: _Batch | None = None  # once it has left


@dataclass(eq=False)
class _Batch:
    calls: list[_Call]
    task: asyncio.Task[None] | None = None
    reading: bool = True

    def part(self) -> None:
        """Drop the references between the batch, its calls and its task: left to the garbage
        collector, these cycles made a worker reading routes from Redis run a collection about
        every 50 reads, and slow ones of its older generations (bench-scale's uncached window:
        9-10 pauses where the pooled client had none)."""
        for c in self.calls:
            c.batch = None
        self.calls = []
        self.task = None

    def gone(self) -> None:
        """A caller stopped waiting (its deadline passed, or it was cancelled). Once none waits,
        a batch still reading from a stalled Redis has nobody to read for: stop it, and its
        connection closes."""
        task = self.task
        if self.reading and task is not None and not task.done() and all(c.answer.done() for c in self.calls):
            task.cancel()


class ScriptPipe:
    def __init__(self, redis: Redis, scripts: ScriptRegistry, lanes: int = LANES) -> None:
        self.redis = redis
        self.scripts = scripts
        self.lanes = lanes
        self._pool: ConnectionPool = redis.connection_pool
        self._idle: list[AbstractConnection] = []
        self._queued: list[_Call] = []
        self._busy = 0
        self._flush_due = False
        self._batches: set[asyncio.Task[None]] = set()

    @property
    def batches_in_flight(self) -> int:
        return self._busy

    @staticmethod
    def supports(redis: object) -> bool:
        """A client with one connection pool (a Redis server, or a Sentinel's master): not a
        Cluster client, whose connections belong to its nodes."""
        return isinstance(redis, Redis) and isinstance(
            getattr(redis, "connection_pool", None), ConnectionPool
        )

    async def call(self, name: str, keys: Sequence[str], args: Sequence[Any], timeout_s: float) -> Any:
        """``name``'s reply, or TimeoutError after ``timeout_s``. After NOSCRIPT (a Redis restart,
        failover or SCRIPT FLUSH) the script is loaded and sent again, a bounded number of times."""
        self.scripts.check(name, keys)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        with self.scripts.observed(name):
            for attempt in range(NOSCRIPT_ATTEMPTS):
                script = self.scripts.scripts[name]  # read each time: declare_master_only replaces it
                try:
                    return await self._send(
                        loop, _Call(script.sha, keys, args, loop.create_future()), deadline
                    )
                except NoScriptError:
                    if attempt == NOSCRIPT_ATTEMPTS - 1:
                        raise
                    await asyncio.wait_for(
                        self.redis.script_load(script.source), max(0.0, deadline - loop.time())
                    )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send(self, loop: asyncio.AbstractEventLoop, call: _Call, deadline: float) -> Any:
        timer = loop.call_at(deadline, _expire, call)
        self._queued.append(call)
        self._flush_soon(loop)
        try:
            return await call.answer
        finally:
            timer.cancel()
            if call.answer.cancelled() and call.batch is not None:
                call.batch.gone()

    def _flush_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        # after the calls this turn of the loop makes, so they leave together
        if self._queued and self._busy < self.lanes and not self._flush_due:
            self._flush_due = True
            loop.call_soon(self._flush, loop)

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        self._flush_due = False
        waiting = [c for c in self._queued if not c.answer.done()]
        if not waiting or self._busy >= self.lanes:
            self._queued = waiting
            return
        calls, self._queued = waiting[:BATCH_CALLS], waiting[BATCH_CALLS:]
        batch = _Batch(calls)
        for c in calls:
            c.batch = batch
        self._busy += 1
        batch.task = loop.create_task(self._exchange(batch))
        self._batches.add(batch.task)
        batch.task.add_done_callback(lambda task: self._lane_free(loop, task))
        self._flush_soon(loop)  # the calls beyond this batch, on another lane if one is free

    def _lane_free(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[None]) -> None:
        self._batches.discard(task)
        self._busy -= 1
        self._flush_soon(loop)

    async def _exchange(self, batch: _Batch) -> None:
        try:
            await self._exchange_calls(batch)
        finally:
            batch.part()

    async def _exchange_calls(self, batch: _Batch) -> None:
        conn = self._idle.pop() if self._idle else None
        try:
            if conn is not None and not await self._on_kept(conn, batch.calls):
                conn = None
            if conn is None:
                conn = await self._pool.get_connection()  # type: ignore[no-untyped-call]
                await _round_trip(conn, [c for c in batch.calls if not c.answer.done()])
            batch.reading = False
        except BaseException as exc:
            failure = exc if isinstance(exc, Exception) else ConnectionError("the call was stopped")
            for c in batch.calls:
                _answer(c.answer, failure)
            if conn is not None:
                await self._discard(conn)
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise
            return
        if len(self._idle) < self.lanes:
            self._idle.append(conn)
        else:
            await self._pool.release(conn)

    async def _on_kept(self, conn: AbstractConnection, calls: list[_Call]) -> bool:
        """The calls' round trip on a connection kept idle; False if Redis had closed it (a
        restart, a failover, its client timeout). Then the other kept ones are likely closed
        too: all are dropped, and the unanswered calls go once more, on a connection the pool
        checks before lending it (the reads write nothing, so sending one twice is harmless)."""
        try:
            await _round_trip(conn, calls)
        except (ConnectionError, OSError):
            kept, self._idle = [conn, *self._idle], []
            for each in kept:
                await self._discard(each)
            return False
        return True

    async def _discard(self, conn: AbstractConnection) -> None:
        # a reply half read leaves the connection unusable: close it before the pool reuses it
        with contextlib.suppress(Exception):
            await conn.disconnect(nowait=True)
        with contextlib.suppress(Exception):
            await self._pool.release(conn)

    async def close(self) -> None:
        for task in list(self._batches):
            task.cancel()
        if self._batches:
            await asyncio.wait(self._batches, timeout=1.0)
        idle, self._idle = self._idle, []
        for conn in idle:
            await self._discard(conn)


async def _round_trip(conn: AbstractConnection, calls: list[_Call]) -> None:
    """One write of every call, then their replies in order."""
    await conn.send_packed_command(
        conn.pack_commands([("EVALSHA", c.sha, len(c.keys), *c.keys, *c.args) for c in calls])
    )
    for c in calls:
        try:
            reply = await conn.read_response()
        except ResponseError as exc:  # one script's error reply: the connection reads on
            _answer(c.answer, exc)
        else:
            _answer(c.answer, reply)


def _expire(call: _Call) -> None:
    # the built-in TimeoutError, not redis-py's: a deadline passed is not a reason to retry
    if not call.answer.done():
        call.answer.set_exception(TimeoutError("Redis did not answer in time"))
        if call.batch is not None:
            call.batch.gone()


def _answer(answer: asyncio.Future[Any], outcome: Any) -> None:
    if answer.done():
        return
    if isinstance(outcome, BaseException):
        answer.set_exception(outcome)
    else:
        answer.set_result(outcome)
