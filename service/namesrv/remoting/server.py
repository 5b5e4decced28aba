"""The RocketMQ remoting listener: an asyncio server in the same process as the HTTP app.

Each connection decodes frames with the sans-I/O codec and runs every request as its own task,
so many requests are in flight per connection and replies go out as they finish (clients match
them by ``opaque``); oneway requests get no reply. A frame the codec cannot read closes the
connection, as in Java. When a connection closes (peer close, reset, bad frame, no whole frame
within ``firstFrameDeadlineSeconds`` of being accepted, or idle for
``serverChannelMaxIdleTimeSeconds``) the brokers registered over it are removed, fenced by the
registration epoch. A connection holds one of the worker's slots (:mod:`namesrv.remoting.slots`)
from accept until it is gone; one that does not take the replies still queued for it within
``CLOSE_FLUSH_S`` of being closed is aborted, so a peer that stops reading cannot keep its slot.
A worker's own shutdown never removes brokers: it stops accepting, answers what is in flight,
and only then closes connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, cast

from namesrv.aio import cancel_and_wait
from namesrv.domain.codes import OVERLOAD_REMARK, RequestCode, ResponseCode, Version
from namesrv.domain.errors import StoreUnavailable
from namesrv.limits import RateLimitedLog
from namesrv.metrics import Metrics
from namesrv.protocol.remoting import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    encode,
)
from namesrv.registry.registration import Registration
from namesrv.registry.route_lookups import STALE, Stale
from namesrv.registry.service import CloseOutcome
from namesrv.remoting.catch_ups import CatchUps
from namesrv.remoting.context import ConnectionState, HandlerContext, reply
from namesrv.remoting.guard import FrameGuard, PartialFrame, effective_max_connections
from namesrv.remoting.handlers import dispatch, operation_name
from namesrv.remoting.route_reads import REASON as ROUTE_READS
from namesrv.remoting.route_reads import RouteReads
from namesrv.remoting.routes import route_from_cache
from namesrv.remoting.slots import ConnectionSlots, Slot, peer_host
from namesrv.tls import ServerTls, create_server

log = logging.getLogger(__name__)
# A close that removed nothing, in namesrv_fenced_removals_total{reason}.
KEPT_REASON = {CloseOutcome.FENCED: "close", CloseOutcome.GONE: "close_gone", CloseOutcome.HELD: "close_held"}
ROUTE_CODE = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)
ROUTE_OPERATION = RequestCode.GET_ROUTEINFO_BY_TOPIC.name
WRITE_HIGH_WATER = 4 * 1024 * 1024
TURN_FRAMES = 64  # frames of one connection answered per turn of the event loop
# Holds that also stop answering frames already read (a backlog): a client not reading its
# replies, and enough route lookups reading Redis already (route_reads).
TURN_HOLDS = frozenset({"writes", ROUTE_READS})
# A closed connection flushes the replies already queued; a peer that does not read them within
# this time is cut off (closing waits for the flush, so it would otherwise keep its slot forever).
CLOSE_FLUSH_S = 5.0


@dataclass
class Admission:
    """In-flight caps per worker, like Java's two executor queues: route lookups and the rest."""

    route_capacity: int
    default_capacity: int
    route_in_flight: int = 0
    default_in_flight: int = 0

    def try_enter(self, code: int) -> bool:
        if code == ROUTE_CODE:
            if self.route_in_flight >= self.route_capacity:
                return False
            self.route_in_flight += 1
        else:
            if self.default_in_flight >= self.default_capacity:
                return False
            self.default_in_flight += 1
        return True

    def leave(self, code: int) -> None:
        if code == ROUTE_CODE:
            self.route_in_flight -= 1
        else:
            self.default_in_flight -= 1


class RemotingConnection(asyncio.Protocol):
    def __init__(self, server: RemotingServer) -> None:
        self.slot: Slot | None = None  # taken at accept by the TLS listener, else in connection_made
        self.framed = False  # a whole frame arrived: firstFrameDeadlineSeconds is met
        self.closing_since = 0.0  # when the transport was first seen closing (0: it is not)
        self.server = server
        self.decoder = FrameDecoder(server.ctx.settings.frameMaxLength)
        self.transport: asyncio.Transport | None = None
        self.state = ConnectionState(peer="?", holder=server.next_holder())
        self.tasks: set[asyncio.Task[None]] = set()
        self.last_active = time.monotonic()
        self.closing = False
        self.partial = PartialFrame()
        self.admitted = False
        # Frames read but not answered yet, with when they were read: see data_received.
        self.backlog: deque[tuple[list[RemotingCommand], float]] = deque()
        self.read_holds: set[str] = set()  # why reading is paused: "writes", "backlog", "route-reads"

    # ---- asyncio.Protocol ----
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.state.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if self.slot is None:
            self.slot = self.server.slots.take(peer_host(peer))
            if self.slot is None:
                self.transport.abort()
                return
        self.admitted = True
        self.server.connections.add(self)

    def adopt_slot(self, slot: Slot) -> None:
        """The TLS listener took this connection's slot at accept, before the handshake."""
        self.slot = slot

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        try:
            commands = self.decoder.feed(data)
        except FrameError as exc:
            # a flood of garbage connections must not become a flood of log lines
            self.server.bad_frame_log.warning("closing remoting connection %s: %s", self.state.peer, exc)
            for cmd in exc.commands:
                self.start(cmd)
            self.close()
            return
        if commands:
            self.framed = True
        if (self.decoder.buffered or self.partial.held) and not self.server.guard.hold(
            self.partial, self.decoder.buffered, bool(commands)
        ):
            self.close()
            return
        received = time.perf_counter()
        if self.backlog:  # reading is paused while one waits: only frames already in flight
            self.backlog.append((commands, received))
            return
        if len(commands) > TURN_FRAMES:
            # A backlog (the worker or the peer was held up, or a burst): answered a turn at a
            # time, so the event loop runs everything else in between. Answered in one go, a
            # backlog on every connection made one turn of the loop last up to 100 ms; the change
            # log's poll reply waited behind it past the staleness bound, and every lookup read
            # meanwhile waited for a catch-up too.
            self.backlog.append((commands[TURN_FRAMES:], received))
            commands = commands[:TURN_FRAMES]
            self.hold_reading("backlog")
            asyncio.get_running_loop().call_soon(self._next_turn)
        self._answer(commands, received)

    def _next_turn(self) -> None:
        if self.transport is None or self.transport.is_closing():
            self.backlog.clear()
            return
        if self.read_holds & TURN_HOLDS:
            # the client does not read its replies, or enough lookups read Redis already:
            # release_reading takes the turns up again
            return
        budget = TURN_FRAMES
        while budget and self.backlog:
            commands, received = self.backlog[0]
            if len(commands) > budget:
                self.backlog[0] = (commands[budget:], received)
                commands = commands[:budget]
            else:
                self.backlog.popleft()
            budget -= len(commands)
            self._answer(commands, received)
        if self.backlog:
            asyncio.get_running_loop().call_soon(self._next_turn)
        else:
            self.release_reading("backlog")

    def answer_backlog(self) -> None:
        """Shutting down: all of it now, as tasks the drain waits for; then the connection reads
        on like any other until it is closed (closed with unread input, it would be reset, and
        replies already written but not yet sent would be lost)."""
        while self.backlog:
            self._answer(*self.backlog.popleft())
        self.release_reading("backlog")

    def _answer(self, commands: list[RemotingCommand], started: float) -> None:
        """Answer route lookups from the cache at once, in one write; start a task for the rest.
        ``started``: when their bytes were read (their latency counts from there)."""
        answered: list[bytes] = []
        answered_codes: list[int] = []
        server = self.server
        access, peer = server.ctx.access, self.state.peer
        for cmd in commands:
            # flag bits tested inline: the properties cost a call each on the hottest loop
            if cmd.code == ROUTE_CODE and not cmd.flag & FLAG_RESPONSE and not server.draining:
                # With ACL on, a lookup answered here (or queued for a catch-up) is checked here,
                # once; a refusal goes to dispatch, which answers it.
                if access.acl_enabled and not access.admits_route_fast(cmd.ext_fields, cmd.body, peer):
                    self.start(cmd)
                    continue
                hit = route_from_cache(server.ctx, cmd)
                if hit is STALE:  # answered after the next catch-up read, with the others waiting
                    server.catch_ups.defer(self, cmd, started)
                    continue
                if hit is not None:  # answered now, in this batch's one write
                    assert not isinstance(hit, Stale)
                    answered_codes.append(hit[0])
                    if not cmd.flag & FLAG_ONEWAY:
                        answered.append(hit[1])
                    continue
                self.start(cmd, admitted=True)
                continue
            self.start(cmd)
        if answered and self.transport and not self.transport.is_closing():
            # one vectored write, no joined copy, on uvloop (the worker's loop; asyncio's own
            # selector loop joins them in 3.11): a backlog answers 64 at a time, and 64 wide
            # routes joined (1.3 MB of 21 KB replies) were a fresh mapping from malloc each turn,
            # 9 page faults per lookup that doubled what a lookup cost a worker once behind
            self.transport.writelines(answered)
        if answered_codes:
            # Each of them waited for the whole batch: that is its latency.
            server.count_batch(ROUTE_OPERATION, answered_codes, time.perf_counter() - started)

    def answer_batch(self, frames: list[bytes]) -> None:
        if frames and self.transport and not self.transport.is_closing():
            self.transport.writelines(frames)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.slot is not None:
            self.slot.release()
        if not self.admitted:
            return
        self.server.guard.release(self.partial)
        self.server.route_reads.forget(self)
        self.server.forget(self)
        self.state.open = False
        self.server.ctx.service.keeper.forget_holder(self.state.holder)
        if self.state.registrations and not self.server.draining:
            self.server.spawn(self._remove_brokers(list(self.state.registrations.values())))
        self.state.registrations.clear()

    def pause_writing(self) -> None:
        self.hold_reading("writes")  # a client that does not read its replies gets no more work done

    def resume_writing(self) -> None:
        self.release_reading("writes")

    def hold_reading(self, reason: str) -> None:
        if not self.read_holds and self.transport and not self.transport.is_closing():
            self.transport.pause_reading()
        self.read_holds.add(reason)

    def release_reading(self, reason: str) -> None:
        self.read_holds.discard(reason)
        if not self.read_holds and self.transport and not self.transport.is_closing():
            self.transport.resume_reading()
        if reason in TURN_HOLDS and self.backlog and not self.read_holds & TURN_HOLDS:
            asyncio.get_running_loop().call_soon(self._next_turn)

    # ---- requests ----
    def start(self, cmd: RemotingCommand, *, admitted: bool = False) -> None:
        """Run ``cmd`` as its own task; ``admitted``: access control already let it through."""
        if cmd.is_response:
            return  # we send no requests, so a reply is a peer's mistake: ignore it, as Java logs it
        task = asyncio.get_running_loop().create_task(self._handle(cmd, admitted))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        if cmd.code == ROUTE_CODE:
            reads = self.server.route_reads
            reads.started(self)
            task.add_done_callback(lambda _: reads.finished())

    async def _handle(self, cmd: RemotingCommand, admitted: bool = False) -> None:
        server = self.server
        started = time.perf_counter()
        operation = operation_name(cmd.code)
        if server.draining and cmd.version > Version.V5_3_1:
            response = reply(server.ctx, cmd, ResponseCode.GO_AWAY, remark="please go away")
        elif not server.admission.try_enter(cmd.code):
            response = reply(server.ctx, cmd, ResponseCode.SYSTEM_BUSY, remark=OVERLOAD_REMARK)
        else:
            try:
                response = await dispatch(server.ctx, self.state, cmd, admitted=admitted)
            finally:
                server.admission.leave(cmd.code)
        server.count(operation, response.code, time.perf_counter() - started)
        if not cmd.is_oneway and self.transport and not self.transport.is_closing():
            self.transport.write(encode(response))
            self.last_active = time.monotonic()

    async def _remove_brokers(self, registrations: list[Registration]) -> None:
        metrics = self.server.metrics
        for reg in registrations:
            try:
                status = await self.server.ctx.service.release_broker(reg, self.state.holder)
            except StoreUnavailable as exc:
                log.warning(
                    "removing %s/%s after its connection closed failed (%s); the sweep will expire it",
                    reg.cluster,
                    reg.addr,
                    exc.remark,
                )
                continue
            except Exception:
                log.exception(
                    "removing %s/%s after its connection closed failed; the sweep will expire it",
                    reg.cluster,
                    reg.addr,
                )
                continue
            if status is CloseOutcome.DONE:
                metrics.removals.labels("close").inc()
            else:
                metrics.fenced.labels(KEPT_REASON[status]).inc()
            log.info(
                "connection %s closed: broker %s/%s %s", self.state.peer, reg.cluster, reg.addr, status.value
            )

    def close(self) -> None:
        if self.transport and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        if self.transport:
            self.transport.abort()

    def past_deadlines(self, now: float) -> str | None:
        """Why the idle loop must close this connection now, or None (see ``_close_idle``)."""
        server = self.server
        transport = self.transport
        if transport is None:
            return None
        if transport.is_closing():
            # Closed by us or by the peer's EOF: the transport waits for its replies to be read.
            self.closing_since = self.closing_since or now
            return "abort" if now - self.closing_since > CLOSE_FLUSH_S else None
        if server.guard.overdue(self.partial, now):
            return "frame"
        if not self.framed and self.slot is not None:
            if now - self.slot.since > server.ctx.settings.firstFrameDeadlineSeconds:
                server.metrics.limit_refusals.labels("firstFrameDeadlineSeconds").inc()
                return "first"
            return None
        if self.last_active < now - server.ctx.settings.serverChannelMaxIdleTimeSeconds and not self.tasks:
            return "idle"
        return None


class RemotingServer:
    def __init__(self, ctx: HandlerContext, metrics: Metrics) -> None:
        self.ctx = ctx
        self.metrics = metrics
        settings = ctx.settings
        self.admission = Admission(
            settings.clientRequestThreadPoolQueueCapacity, settings.defaultThreadPoolQueueCapacity
        )
        self.catch_ups = CatchUps(self, settings.clientRequestThreadPoolQueueCapacity)
        self.route_reads = RouteReads(settings.redisMaxConnections, metrics.route_read_pauses.inc)
        self.connections: set[RemotingConnection] = set()
        self.background: set[asyncio.Task[None]] = set()
        self.draining = False
        self.guard = FrameGuard(settings, metrics)
        self.slots = ConnectionSlots(
            effective_max_connections(settings), settings.maxConnectionsPerPeer, metrics
        )
        self._server: asyncio.AbstractServer | None = None
        self._idle_task: asyncio.Task[None] | None = None
        self.first_frame_log = RateLimitedLog(log)
        self.bad_frame_log = RateLimitedLog(log)
        self._emptied = asyncio.Event()
        self._connections_made = itertools.count(1)

    def next_holder(self) -> str:
        """A connection's holder id: which worker, which of its connections (unregisterBroker)."""
        return f"{self.ctx.worker.worker_id}#{next(self._connections_made)}"

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return port

    def count(self, operation: str, code: int, seconds: float) -> None:
        counter, latency = self.metrics.request_series("remoting", operation, _outcome(code))
        counter.inc()
        latency.observe(seconds)

    def count_batch(self, operation: str, codes: list[int], seconds: float) -> None:
        """:meth:`count` for requests answered together, one counter update per outcome."""
        first = codes[0]
        if codes.count(first) == len(codes):
            counter, latency = self.metrics.request_series("remoting", operation, _outcome(first))
            counter.inc(len(codes))
            latency.observe(seconds, len(codes))
            return
        for code in codes:
            self.count(operation, code, seconds)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def start(self, host: str, port: int, tls: ServerTls | None = None) -> None:
        loop = asyncio.get_running_loop()
        self._server = await create_server(
            lambda: RemotingConnection(self),
            host,
            port,
            tls=tls,
            backlog=1024,
            max_pending=self.ctx.settings.maxConnections,
            slots=self.slots,
            setup_timeout=self.ctx.settings.firstFrameDeadlineSeconds,
        )
        self._idle_task = loop.create_task(self._close_idle(), name="remoting-idle")
        log.info("remoting listener on %s:%d", host, self.port)

    async def _close_idle(self) -> None:
        while True:
            settings = self.ctx.settings
            await asyncio.sleep(
                min(
                    1.0,
                    settings.serverChannelMaxIdleTimeSeconds / 4,
                    self.guard.deadline / 4,
                    settings.firstFrameDeadlineSeconds / 4,
                )
            )
            now = time.monotonic()
            for conn in list(self.connections):
                why = conn.past_deadlines(now)
                if why is None:
                    continue
                peer = conn.state.peer
                if why == "abort":
                    log.info("aborting remoting connection %s: it does not read its replies", peer)
                    conn.abort()
                    continue
                if why == "frame":
                    log.warning(
                        "closing remoting connection %s: a frame unfinished for %gs (frameDeadlineSeconds)",
                        peer,
                        self.guard.deadline,
                    )
                elif why == "first":
                    self.first_frame_log.warning(
                        "closing remoting connection %s: no whole frame within %gs of connecting "
                        "(firstFrameDeadlineSeconds)",
                        peer,
                        settings.firstFrameDeadlineSeconds,
                    )
                else:
                    log.info(
                        "closing remoting connection %s: idle for %ds",
                        peer,
                        settings.serverChannelMaxIdleTimeSeconds,
                    )
                conn.close()

    def stop_accepting(self) -> None:
        """From SIGTERM on: no new connections, GO_AWAY to clients that understand it."""
        self.draining = True
        if self._server:
            self._server.close()

    async def drain(self, grace: float) -> None:
        """Stop accepting, let in-flight requests finish (up to ``grace`` s), close connections.

        Brokers registered over these connections stay registered: they reconnect elsewhere."""
        self.stop_accepting()
        if self._idle_task:
            await cancel_and_wait(self._idle_task)
        await self.catch_ups.stop()
        for conn in self.connections:
            conn.answer_backlog()  # as tasks, now that the server drains: waited for below
        in_flight = {t for c in self.connections for t in c.tasks}
        if in_flight:
            await asyncio.wait(in_flight, timeout=grace)
        for conn in list(self.connections):
            conn.close()
        for task in [*(t for c in self.connections for t in c.tasks), *self.background]:
            await cancel_and_wait(task)
        await self._let_close(CLOSE_FLUSH_S)
        if self._server:
            await self._server.wait_closed()

    async def _let_close(self, grace: float) -> None:
        """Give closed connections ``grace`` s to flush their replies, then abort the rest: a peer
        that does not read would hold the worker's shutdown (and its slot) forever."""
        if not await self._all_gone(grace):
            for conn in list(self.connections):
                conn.abort()
            await self._all_gone(1.0)  # abort calls connection_lost on a later turn of the loop

    async def _all_gone(self, timeout: float) -> bool:
        if self.connections:
            self._emptied.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._emptied.wait(), timeout)
        return not self.connections

    def forget(self, conn: RemotingConnection) -> None:
        self.connections.discard(conn)
        if not self.connections:
            self._emptied.set()


def _outcome(code: int) -> str:
    return "ok" if code == ResponseCode.SUCCESS else f"code{code}"
