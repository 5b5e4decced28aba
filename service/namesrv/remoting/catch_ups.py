"""Route lookups that arrived while the worker's knowledge of Redis was not fresh, answered
together once it has caught up (:class:`CatchUps`)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from namesrv.aio import cancel_and_wait
from namesrv.domain.codes import OVERLOAD_REMARK, RequestCode, ResponseCode
from namesrv.protocol.remoting import FLAG_ONEWAY, RemotingCommand, encode
from namesrv.registry.route_lookups import Stale
from namesrv.remoting.context import reply
from namesrv.remoting.routes import route_from_cache

if TYPE_CHECKING:
    from namesrv.remoting.server import RemotingConnection, RemotingServer

ROUTE_OPERATION = RequestCode.GET_ROUTEINFO_BY_TOPIC.name


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
        self._round: list[tuple[RemotingConnection, RemotingCommand, float]] = []  # waiting on a read
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
                batch = self._round = self.waiting
                self.waiting = []
                # Lookups that came while the last round waited may need no round of their own:
                # an outage may have begun meanwhile (memory then answers). Without this check, a
                # lookup that arrived in the first moments of a Redis stall waited for one round
                # to give up at the deadline and then for a whole second round: 2 s. (One check
                # for the queue: a peek per lookup cost a loaded worker about 5% of its lookups.)
                if self.server.ctx.service.routes_answer_now():
                    batch = self._round = self._answer(batch, caught_up=False, final=False)
                if batch:
                    caught_up = await self.server.ctx.service.catch_up_routes()
                    self._round = []
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
        """Shutting down: the lookups still waiting take the waiting path (a task each, which the
        drain waits for) instead of being dropped with the round."""
        if self._task is not None:
            await cancel_and_wait(self._task)
        pending, self._round, self.waiting = [*self._round, *self.waiting], [], []
        for conn, cmd, _ in pending:
            conn.start(cmd, admitted=True)
