"""Heal a Redis that lost registrations, from what the fleet's workers last saw.

When Redis loses its data (a restart without persistence, FLUSHALL, a failover to a replica
that missed writes), a NameServer knows nothing until every broker registers again, up to 30 s
later (apache/rocketmq#5322). But the worker that holds a broker's connection saw its last
registration: each worker keeps that copy, compressed, for every broker registered over one of
its open connections, and replays them all as soon as its change feed reports a new data set.

Rules a replay keeps:

* Only registrations over a connection that is still open are kept: a close, an unregister
  (over the connection, or of the broker by anyone: the change log says so) or an expiry drops
  the copy, so a replay never brings back a broker that left.
* A broker that registers on its own during the heal wins: each replay names the Redis time the
  heal began, and ``registerBroker`` skips a replay of a broker registered since (status 4).
* A replay is a registration like the broker's own (same rules, fencing, chunks); its new epoch
  replaces the connection's, so the connection's close still removes the broker.

Memory: bodies are kept zlib-compressed (a 10,000-topic JSON body of 1.7 MB keeps in about a
tenth of that), at most ``max_bytes`` in all; past it the oldest copies are dropped (and counted),
those brokers then wait for their own next registration, as without this.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace

from namesrv.domain.model import RawBody, RegisterBrokerRequest, RegisterBrokerResult
from namesrv.registry.changefeed import LISTENER_ERROR
from namesrv.registry.registration import Registration
from namesrv.store.changelog import EventKind
from namesrv.store.keyspace import live_member

log = logging.getLogger(__name__)
# Bodies at least this big are compressed in a thread (about 10 ms for 1.7 MB at level 1).
COMPRESS_IN_THREAD_BYTES = 256 * 1024
REPLAYS_IN_FLIGHT = 4  # replays a worker runs at once (each is a registration's Redis work)
# A replay that fails (Redis answering again but not yet steadily: stale pooled connections, a
# second restart, a failover still settling) is tried again until this long after the heal began;
# a copy given up waits for the broker's own next registration, as without a heal.
RETRY_FOR_SECONDS = 20.0
RETRY_FIRST_WAIT = 0.1
RETRY_MAX_WAIT = 2.0
FORGETTING = frozenset({EventKind.UNREGISTER, EventKind.CLOSE, EventKind.EXPIRE})

Alive = Callable[[], bool]
Register = Callable[
    [RegisterBrokerRequest], Awaitable[tuple[RegisterBrokerResult | None, Registration | None]]
]
Replayed = Callable[[Registration], None]


@dataclass
class _Kept:
    request: RegisterBrokerRequest  # its body replaced by None: the body is `packed`
    packed: bytes  # the raw body, zlib-compressed
    body_hash: str
    body_version: int
    body_compressed: bool
    on_replayed: Replayed  # the connection learns the replay's epoch (for its close)
    alive: Alive  # the connection is still open
    seq: int  # order of the registrations kept (a slow compression must not win over a newer one)

    @property
    def size(self) -> int:
        return len(self.packed) + 512  # the header fields and bookkeeping, roughly


class RegistrationKeeper:
    def __init__(
        self,
        register: Register,
        server_time_ms: Callable[[], Awaitable[int]],
        *,
        max_bytes: int,
        count: Callable[[str, int], None] = lambda outcome, n: None,
    ) -> None:
        self._register = register
        self._server_time_ms = server_time_ms
        self.max_bytes = max_bytes
        self._count = count  # heal outcomes: replayed, skipped, failed, dropped (over max_bytes)
        self._kept: OrderedDict[tuple[str, str], _Kept] = OrderedDict()  # (holder, member) -> copy
        self.bytes = 0
        self._heal: asyncio.Task[None] | None = None
        self._compressing: set[asyncio.Task[bytes]] = set()
        self._seq = 0
        self.healing = False
        self.last_heal: dict[str, float] = {}  # figures of the last heal (for logs, metrics, tests)

    # ---- what the connections tell ----
    def keep(self, holder: str, request: RegisterBrokerRequest, on_replayed: Replayed, alive: Alive) -> None:
        """A registration over the connection ``holder`` was accepted: keep it for a replay. A big
        body is compressed in a thread, after the caller's reply."""
        body = request.body
        if body is None or not holder:
            return
        key = (holder, live_member(request.clusterName, request.brokerAddr))
        self._seq += 1
        seq = self._seq
        known = self._kept.get(key)
        if known is not None and known.body_hash == body.hash:
            known.request, known.on_replayed, known.alive, known.seq = (
                replace(request, body=None),
                on_replayed,
                alive,
                seq,
            )
            self._kept.move_to_end(key)
            return
        data = body.data or b""

        def put(packed: bytes) -> None:
            current = self._kept.get(key)
            if alive() and (current is None or current.seq < seq):
                kept = _Kept(
                    replace(request, body=None),
                    packed,
                    body.hash,
                    body.version,
                    body.compressed,
                    on_replayed,
                    alive,
                    seq,
                )
                self._put(key, kept)

        if len(data) < COMPRESS_IN_THREAD_BYTES:
            put(zlib.compress(data, 1))
            return
        task = asyncio.create_task(asyncio.to_thread(zlib.compress, data, 1))
        self._compressing.add(task)
        task.add_done_callback(self._compressing.discard)
        task.add_done_callback(
            lambda done: None if done.cancelled() or done.exception() else put(done.result())
        )

    def forget(self, holder: str, cluster: str, addr: str) -> None:
        """The connection unregistered the broker."""
        self._drop((holder, live_member(cluster, addr)))

    def forget_holder(self, holder: str) -> None:
        """The connection closed: none of its brokers is replayed any more."""
        for key in [k for k in self._kept if k[0] == holder]:
            self._drop(key)

    # ---- what the change feed tells (a FeedListener) ----
    async def on_event(self, kind: str, fields: Mapping[str, str]) -> None:
        if kind in FORGETTING:
            member = live_member(fields.get("cluster", ""), fields.get("brokerAddr", ""))
            for key in [k for k in self._kept if k[1] == member]:
                self._drop(key)

    async def on_reset(self, reason: str) -> None:
        """Redis holds another data set, or lost change-log entries: replay every kept copy."""
        if not self._kept or reason == LISTENER_ERROR:
            return
        if self._heal is not None and not self._heal.done():
            self._heal.cancel()  # a second loss during a heal: start over on the new data set
        self._heal = asyncio.create_task(self._replay_all(reason), name="heal")

    def on_recovered(self, since: float) -> None:
        pass

    async def close(self) -> None:
        tasks = [*self._compressing, *([self._heal] if self._heal is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ---- inside ----
    async def _replay_all(self, reason: str) -> None:
        self.healing = True
        started = time.monotonic()
        give_up_at = started + RETRY_FOR_SECONDS
        outcomes = {"replayed": 0, "skipped": 0, "failed": 0, "retried": 0}
        try:
            began_ms = await self._until_done(self._server_time_ms, give_up_at)
            gate = asyncio.Semaphore(REPLAYS_IN_FLIGHT)

            async def one(key: tuple[str, str], kept: _Kept) -> None:
                wait = RETRY_FIRST_WAIT
                while True:
                    async with gate:
                        outcome = await self._replay(kept, began_ms)
                    current = self._kept.get(key) is kept  # not superseded, closed or forgotten
                    if outcome != "failed" or not current or time.monotonic() + wait > give_up_at:
                        break
                    outcomes["retried"] += 1
                    await asyncio.sleep(wait)
                    wait = min(wait * 2, RETRY_MAX_WAIT)
                outcomes[outcome] += 1
                self._count(outcome, 1)

            await asyncio.gather(*(one(key, kept) for key, kept in list(self._kept.items())))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # Redis stayed away: the brokers' own registrations follow
            log.warning("heal stopped: %s", exc)
        finally:
            self.healing = False
        seconds = time.monotonic() - started
        self.last_heal = {**{k: float(v) for k, v in outcomes.items()}, "seconds": seconds}
        log.warning(
            "healed Redis (%s): %d registration(s) replayed, %d skipped (the broker registered on its "
            "own or its connection closed), %d failed after %d retries, in %.2f s",
            reason,
            outcomes["replayed"],
            outcomes["skipped"],
            outcomes["failed"],
            outcomes["retried"],
            seconds,
        )

    @staticmethod
    async def _until_done(call: Callable[[], Awaitable[int]], give_up_at: float) -> int:
        wait = RETRY_FIRST_WAIT
        while True:
            try:
                return await call()
            except asyncio.CancelledError:
                raise
            except Exception:
                if time.monotonic() + wait > give_up_at:
                    raise
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_MAX_WAIT)

    async def _replay(self, kept: _Kept, began_ms: int) -> str:
        if not kept.alive():
            return "skipped"
        data = zlib.decompress(kept.packed) if kept.packed else b""
        body = RawBody(data or None, kept.body_version, kept.body_compressed)
        request = replace(kept.request, body=body, replay_before=began_ms)
        try:
            result, registration = await self._register(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning(
                "replaying %s/%s failed: %s",
                request.clusterName,
                request.brokerAddr,
                getattr(exc, "remark", exc),
            )
            return "failed"
        if registration is None:
            return "skipped" if result is not None else "failed"
        kept.on_replayed(registration)
        return "replayed"

    def _put(self, key: tuple[str, str], kept: _Kept) -> None:
        self._drop(key)
        self._kept[key] = kept
        self.bytes += kept.size
        while self.bytes > self.max_bytes and self._kept:
            _, oldest = self._kept.popitem(last=False)
            self.bytes -= oldest.size
            self._count("dropped", 1)

    def _drop(self, key: tuple[str, str]) -> None:
        kept = self._kept.pop(key, None)
        if kept is not None:
            self.bytes -= kept.size

    def __len__(self) -> int:
        return len(self._kept)
