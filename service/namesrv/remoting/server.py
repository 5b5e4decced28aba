"""The RocketMQ remoting listener: an asyncio server in the same process as the HTTP app.

Each connection decodes frames with the sans-I/O codec and runs every request as its own task,
so many requests are in flight per connection and replies go out as they finish (clients match
them by ``opaque``); oneway requests get no reply. A frame the codec cannot read closes the
connection, as in Java. When a connection closes (peer close, reset, bad frame, or idle for
``serverChannelMaxIdleTimeSeconds``) the brokers registered over it are removed, fenced by the
registration epoch. A worker's own shutdown never removes brokers: it stops accepting, answers
what is in flight, and only then closes connections.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, cast

from namesrv.aio import cancel_and_wait
from namesrv.domain.codes import OVERLOAD_REMARK, RequestCode, ResponseCode, Version
from namesrv.domain.errors import StoreUnavailable
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
from namesrv.registry.route_cache import STALE, Stale
from namesrv.remoting.context import ConnectionState, HandlerContext, reply
from namesrv.remoting.guard import FrameGuard, PartialFrame
from namesrv.remoting.handlers import dispatch, operation_name
from namesrv.remoting.routes import route_from_cache
from namesrv.tls import ServerTls, create_server

log = logging.getLogger(__name__)
ROUTE_CODE = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)
ROUTE_OPERATION = RequestCode.GET_ROUTEINFO_BY_TOPIC.name
WRITE_HIGH_WATER = 4 * 1024 * 1024


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
        self.server = server
        self.decoder = FrameDecoder(server.ctx.settings.frameMaxLength)
        self.transport: asyncio.Transport | None = None
        self.state = ConnectionState(peer="?")
        self.tasks: set[asyncio.Task[None]] = set()
        self.last_active = time.monotonic()
        self.closing = False
        self.partial = PartialFrame()
        self.admitted = False

    # ---- asyncio.Protocol ----
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.state.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if not self.server.guard.admit(len(self.server.connections), self.state.peer):
            self.transport.abort()
            return
        self.admitted = True
        self.server.connections.add(self)
        self.server.metrics.connections.set(len(self.server.connections))

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        try:
            commands = self.decoder.feed(data)
        except FrameError as exc:
            log.warning("closing remoting connection %s: %s", self.state.peer, exc)
            for cmd in exc.commands:
                self.start(cmd)
            self.close()
            return
        if (self.decoder.buffered or self.partial.held) and not self.server.guard.hold(
            self.partial, self.decoder.buffered, bool(commands)
        ):
            self.close()
            return
        answered: list[bytes] = []
        answered_codes: list[int] = []
        server = self.server
        access, peer = server.ctx.access, self.state.peer
        started = time.perf_counter()
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
            self.transport.write(b"".join(answered))
        if answered_codes:
            # Each of them waited for the whole batch: that is its latency.
            server.count_batch(ROUTE_OPERATION, answered_codes, time.perf_counter() - started)

    def answer_batch(self, frames: list[bytes]) -> None:
        if frames and self.transport and not self.transport.is_closing():
            self.transport.write(b"".join(frames))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.admitted:
            return
        self.server.guard.release(self.partial)
        self.server.connections.discard(self)
        self.server.metrics.connections.set(len(self.server.connections))
        if self.state.registrations and not self.server.draining:
            self.server.spawn(self._remove_brokers(list(self.state.registrations.values())))
        self.state.registrations.clear()

    def pause_writing(self) -> None:
        if self.transport:
            self.transport.pause_reading()  # a client that does not read its replies gets no more work done

    def resume_writing(self) -> None:
        if self.transport and not self.transport.is_closing():
            self.transport.resume_reading()

    # ---- requests ----
    def start(self, cmd: RemotingCommand, *, admitted: bool = False) -> None:
        """Run ``cmd`` as its own task; ``admitted``: access control already let it through."""
        if cmd.is_response:
            return  # we send no requests, so a reply is a peer's mistake: ignore it, as Java logs it
        task = asyncio.get_running_loop().create_task(self._handle(cmd, admitted))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

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
        for reg in registrations:
            try:
                removed = await self.server.ctx.service.unregister_broker(
                    reg.cluster,
                    reg.addr,
                    reg.broker_name,
                    reg.broker_id,
                    fence_epoch=reg.epoch,
                    reason="close",
                )
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
            metric = self.server.metrics.removals if removed else self.server.metrics.fenced
            metric.labels("close").inc()
            log.info(
                "connection %s closed: broker %s/%s %s",
                self.state.peer,
                reg.cluster,
                reg.addr,
                "removed" if removed else "kept (registered again elsewhere)",
            )

    def close(self) -> None:
        if self.transport and not self.transport.is_closing():
            self.transport.close()


class CatchUps:
    """Route lookups that arrived while the cache's knowledge was not fresh: they wait here, with
    no task each, for one catch-up read, and are then answered from memory in one write per
    connection. Going through a task, a future and a reply command each, the waiting path cost a
    lookup several times the fast path: under load the worker fell behind, its knowledge stayed
    stale, every lookup took the slow path, and it never recovered (issue 10's shed storm). Here
    a late worker does the same work per lookup as a fresh one, one read per round.

    The queue is swapped out before the read is requested, so every lookup in a round arrived
    before its read was issued: answering it from memory is as fresh as asking Redis."""

    def __init__(self, server: RemotingServer, capacity: int) -> None:
        self.server = server
        self.capacity = capacity
        self.waiting: list[tuple[RemotingConnection, RemotingCommand, float]] = []
        self._task: asyncio.Task[None] | None = None

    def defer(self, conn: RemotingConnection, cmd: RemotingCommand, received: float) -> None:
        if len(self.waiting) >= self.capacity:
            conn.answer_batch(
                [encode(reply(self.server.ctx, cmd, ResponseCode.SYSTEM_BUSY, remark=OVERLOAD_REMARK))]
            )
            self.server.count(ROUTE_OPERATION, ResponseCode.SYSTEM_BUSY, 0.0)
            return
        self.waiting.append((conn, cmd, received))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._rounds(), name="route-catch-up")

    async def _rounds(self) -> None:
        try:
            while self.waiting:
                batch, self.waiting = self.waiting, []
                # Lookups that came while the last round waited may need no round of their own:
                # an outage may have begun meanwhile (memory then answers). Without this check, a
                # lookup that arrived in the first moments of a Redis stall waited for one round
                # to give up at the deadline and then for a whole second round: 2 s. (One check
                # for the queue: a peek per lookup cost a loaded worker about 5% of its lookups.)
                if self.server.ctx.service.routes_answer_now():
                    batch = self._answer(batch, caught_up=False, final=False)
                if batch:
                    caught_up = await self.server.ctx.service.catch_up_routes()
                    self._answer(batch, caught_up=caught_up, final=True)
        finally:
            self._task = None

    def _answer(
        self, batch: list[tuple[RemotingConnection, RemotingCommand, float]], *, caught_up: bool, final: bool
    ) -> list[tuple[RemotingConnection, RemotingCommand, float]]:
        """Answer from memory what it can answer; the rest go to the waiting path (not cached, or
        the read failed) or, when not ``final``, are returned to wait for a catch-up read."""
        ctx, server = self.server.ctx, self.server
        frames: dict[RemotingConnection, list[bytes]] = {}
        waiting: list[tuple[RemotingConnection, RemotingCommand, float]] = []
        now = time.perf_counter()
        for item in batch:
            conn, cmd, received = item
            hit = route_from_cache(ctx, cmd, caught_up=caught_up)
            if isinstance(hit, Stale) and not final:
                waiting.append(item)
                continue
            if hit is None or isinstance(hit, Stale):
                conn.start(cmd, admitted=True)  # the waiting path decides
                continue
            server.count(ROUTE_OPERATION, hit[0], now - received)
            if not cmd.flag & FLAG_ONEWAY:
                frames.setdefault(conn, []).append(hit[1])
        for conn, pending in frames.items():
            conn.answer_batch(pending)
        return waiting

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)


class RemotingServer:
    def __init__(self, ctx: HandlerContext, metrics: Metrics) -> None:
        self.ctx = ctx
        self.metrics = metrics
        settings = ctx.settings
        self.admission = Admission(
            settings.clientRequestThreadPoolQueueCapacity, settings.defaultThreadPoolQueueCapacity
        )
        self.catch_ups = CatchUps(self, settings.clientRequestThreadPoolQueueCapacity)
        self.connections: set[RemotingConnection] = set()
        self.background: set[asyncio.Task[None]] = set()
        self.draining = False
        self.guard = FrameGuard(settings, metrics)
        self._server: asyncio.AbstractServer | None = None
        self._idle_task: asyncio.Task[None] | None = None

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
        )
        self._idle_task = loop.create_task(self._close_idle(), name="remoting-idle")
        log.info("remoting listener on %s:%d", host, self.port)

    async def _close_idle(self) -> None:
        while True:
            limit = self.ctx.settings.serverChannelMaxIdleTimeSeconds
            await asyncio.sleep(min(1.0, limit / 4, self.guard.deadline / 4))
            now = time.monotonic()
            deadline = now - limit
            for conn in list(self.connections):
                if self.guard.overdue(conn.partial, now):
                    log.warning(
                        "closing remoting connection %s: a frame unfinished for %.0fs (frameDeadlineSeconds)",
                        conn.state.peer,
                        self.guard.deadline,
                    )
                    conn.close()
                elif conn.last_active < deadline and not conn.tasks:
                    log.info("closing remoting connection %s: idle for %ds", conn.state.peer, limit)
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
        in_flight = {t for c in self.connections for t in c.tasks}
        if in_flight:
            await asyncio.wait(in_flight, timeout=grace)
        for conn in list(self.connections):
            conn.close()
        for task in [*(t for c in self.connections for t in c.tasks), *self.background]:
            await cancel_and_wait(task)
        if self._server:
            await self._server.wait_closed()


def _outcome(code: int) -> str:
    return "ok" if code == ResponseCode.SUCCESS else f"code{code}"
