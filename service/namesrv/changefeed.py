"""Tail the registry's change log (``{ns}:events``) and tell this worker's listeners.

Redis Streams are resumable, unlike pub/sub: a worker that loses its connection picks up after
the last entry it saw. Listeners are told to resynchronise only when entries may have been lost:
trimmed before they were read, or gone with the stream (deleted, or a failover to a replica that
never received them), which a periodic check of the last entry read detects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from namesrv.aio import cancel_and_wait, raise_if_cancelling

log = logging.getLogger(__name__)
BATCH = 500  # entries per read; a full batch means more may be waiting
Listener = Callable[[str, Mapping[str, str]], Awaitable[None]]
Resync = Callable[[], Awaitable[None]]


class ChangeFeed:
    """Reads with ``XREAD BLOCK block_ms``; or, with ``poll_interval``, with non-blocking reads that
    often. Polling is for bounded staleness: Redis only notices a BLOCK timeout when its event
    loop wakes (every 1/hz s, 100 ms by default), so an idle blocking read can take far longer
    than asked, while a poll completes at once."""

    def __init__(
        self,
        redis: Redis,
        stream: str,
        *,
        block_ms: int = 1000,
        poll_interval: float | None = None,
        verify_seconds: float = 30.0,
    ) -> None:
        self.redis = redis
        self.stream = stream
        self.block_ms = block_ms
        self.poll_interval = poll_interval
        self.verify_seconds = verify_seconds
        self.listeners: list[Listener] = []
        self.resyncs: list[Resync] = []
        # Called with the (monotonic) time a read was issued, once its entries are all applied:
        # every change committed before that time has then been seen.
        self.progress: list[Callable[[float], None]] = []
        self.last_id = "$"
        self._task: asyncio.Task[None] | None = None
        # Resolved (True: applied, False: the read failed) by the first read issued after it was
        # created: see wait_fresh.
        self._wanted: asyncio.Future[bool] | None = None
        self._kick = asyncio.Event()

    def subscribe(self, listener: Listener, resync: Resync) -> None:
        self.listeners.append(listener)
        self.resyncs.append(resync)

    async def resync(self) -> None:
        for fn in self.resyncs:
            try:
                await fn()
            except Exception:  # a listener's failure must not stop the feed
                log.exception("change feed resync failed")

    async def start(self) -> None:
        info = await self.redis.xinfo_stream(self.stream) if await self.redis.exists(self.stream) else None
        self.last_id = str(info["last-generated-id"]) if info else "0-0"
        self._task = asyncio.create_task(self._run(), name="changefeed")

    async def stop(self) -> None:
        if self._task:
            await cancel_and_wait(self._task)

    async def wait_fresh(self, timeout: float) -> bool:
        """Read the stream now (not at the next poll) and wait until everything committed before
        this call has been applied. False when that read failed or took longer than ``timeout``.

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

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_verify = loop.time() + self.verify_seconds
        owed: list[asyncio.Future[bool]] = []  # wait_fresh callers this read (or the next) answers
        while True:
            raise_if_cancelling()
            try:
                if loop.time() >= next_verify:
                    await self._verify()
                    next_verify = loop.time() + self.verify_seconds
                issued = loop.time()
                if self._wanted is not None:
                    owed.append(self._wanted)
                    self._wanted = None
                block = None if self.poll_interval is not None else self.block_ms
                reply: Any = await self.redis.xread({self.stream: self.last_id}, count=BATCH, block=block)
                received = 0
                for _stream, entries in reply or []:
                    received += len(entries)
                    await self._dispatch(entries)
                if received < BATCH:  # caught up: everything committed before `issued` is applied
                    for report in self.progress:
                        report(issued)
                    _settle(owed, True)
                    if self.poll_interval is not None:
                        await self._pause(self.poll_interval)
            except asyncio.CancelledError:
                _settle(owed, False)
                raise
            except RedisError as exc:
                _settle(owed, False)
                log.warning("change feed: %s; retrying", exc)
                await asyncio.sleep(1.0)
            except Exception:
                _settle(owed, False)
                log.exception("change feed listener failed")
                await asyncio.sleep(1.0)

    async def _pause(self, seconds: float) -> None:
        """Sleep between polls, cut short by wait_fresh."""
        if self._wanted is not None:
            return
        self._kick.clear()
        handle = asyncio.get_running_loop().call_later(seconds, self._kick.set)
        try:
            await self._kick.wait()
        finally:
            handle.cancel()

    async def _verify(self) -> None:
        """Resynchronise if the last entry read is gone: entries after it may never be read (the
        stream was deleted or trimmed past it, or Redis failed over to a replica without it)."""
        if self.last_id == "0-0":  # nothing read yet: the next read starts at the beginning
            return
        if await self.redis.xrange(self.stream, min=self.last_id, max=self.last_id, count=1):
            return
        info = await self.redis.xinfo_stream(self.stream) if await self.redis.exists(self.stream) else None
        log.warning("change feed: entry %s is gone from %s; resynchronising", self.last_id, self.stream)
        self.last_id = str(info["last-generated-id"]) if info else "0-0"
        await self.resync()

    async def _dispatch(self, entries: list[tuple[str, dict[str, str]]]) -> None:
        if entries and self.last_id != "0-0" and await self._trimmed_past_us():
            await self.resync()
        for entry_id, fields in entries:
            self.last_id = entry_id
            kind = fields.get("kind", "")
            for listener in self.listeners:
                await listener(kind, fields)

    async def _trimmed_past_us(self) -> bool:
        """True when trimming removed the last entry we saw: entries after it may be lost too."""
        head: Any = await self.redis.xrange(self.stream, min="-", max="+", count=1)
        return bool(head) and stream_id(str(head[0][0])) > stream_id(self.last_id)


def _settle(waiters: list[asyncio.Future[bool]], applied: bool) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(applied)
    waiters.clear()


def stream_id(text: str) -> tuple[int, int]:
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)
