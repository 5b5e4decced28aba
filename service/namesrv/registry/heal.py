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
* The newest registration wins: each replay names the Redis time of the registration it copies,
  and ``registerBroker`` skips it (status 4) when Redis holds one as new or newer: the broker's
  own since the loss, or another worker's newer copy (a broker whose registration to one worker
  failed left that worker an older copy). A skipped copy is dropped.
* A replay is a registration like the broker's own (same rules, fencing, chunks); its new epoch
  replaces the connection's, so the connection's close still removes the broker.
* A broker that splits its registration (5.x ``enableSplitRegistration``: 800 topics a request,
  every request with the same DataVersion) is kept as all the bodies of its current DataVersion
  and replayed batch by batch; each later batch lands only if the broker is still at the epoch
  the batch before got, so a broker that registers or leaves meanwhile still wins.

A replay does not decode the body when the worker's registration of it wrote every topic: that
registration's topic writes are kept beside the body, packed (:mod:`namesrv.registry.kept_topics`,
25 KB for 10,000 topics), and sent again as they are: half of a replay's CPU in the worker
(``python -m bench.replay_cost``). A body this worker never wrote in full (the broker's unchanged
body re-sent after it moved here from another worker, or a body written as a delta) is decoded.
Nor is a kept body inflated unless it is decoded (:class:`KeptBody`): a replay needs its hash.

Memory: bodies are kept zlib-compressed (a 10,000-topic JSON body of 1.7 MB keeps in about a
tenth of that), at most ``max_bytes`` in all, the kept writes included; past it the oldest copies
are dropped (and counted), those brokers then wait for their own next registration, as without
this.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace

from namesrv.domain.model import RawBody, RegisterBrokerRequest, RegisterBrokerResult
from namesrv.protocol.register_body import data_version_text
from namesrv.registry.changefeed import LISTENER_ERROR
from namesrv.registry.kept_topics import WrittenTopics, pack_written
from namesrv.registry.registration import Registration
from namesrv.store.changelog import EventKind
from namesrv.store.keyspace import live_member
from namesrv.store.registration_args import BodyFacts
from namesrv.store.registry_store import redis_patience

log = logging.getLogger(__name__)
# Bodies at least this big are compressed in a thread (about 10 ms for 1.7 MB at level 1).
COMPRESS_IN_THREAD_BYTES = 256 * 1024
REPLAYS_IN_FLIGHT = 4  # replays a worker runs at once (each is a registration's Redis work)
# Batches kept per broker: 1,250 split requests of 800 topics is a million topics on one broker.
MAX_BATCHES = 2048
# A replay that fails (Redis answering again but not yet steadily: stale pooled connections, a
# second restart, a failover still settling) is tried again until this long after the heal began
# or its last batch landed; a copy given up waits for the broker's own next registration, as
# without a heal.
RETRY_FOR_SECONDS = 20.0
# How much longer than a client's request each Redis call of a replay may take (redisTimeoutMillis
# + this): on a busy machine a replay that gives up at a client's deadline starts over each time.
REPLAY_PATIENCE_S = 4.0
RETRY_FIRST_WAIT = 0.1
RETRY_MAX_WAIT = 2.0
FORGETTING = frozenset({EventKind.UNREGISTER, EventKind.CLOSE, EventKind.EXPIRE})

Alive = Callable[[], bool]
Register = Callable[
    [RegisterBrokerRequest, BodyFacts | None, bytes | None],
    Awaitable[tuple[RegisterBrokerResult | None, Registration | None]],
]
Replayed = Callable[[Registration], None]


@dataclass
class _Batch:
    """One registration's body, zlib-compressed."""

    packed: bytes
    version: int  # the request's version and header flag: how the body is read
    compressed: bool
    # what the body amounted to when it was registered (None: it was not decoded then): a
    # replay that writes no topic (a slave's) then decodes nothing
    facts: BodyFacts | None = None
    # the topic writes that registration sent, packed (None: it wrote no topic, or a delta): a
    # replay sends them again instead of decoding the body
    writes: bytes | None = None

    @property
    def size(self) -> int:
        return len(self.packed) + len(self.writes or b"") + 64


@dataclass
class _Kept:
    """What a replay of one broker over one connection sends: the last registration's header
    with every body of its topic-config version. A broker that splits its registration (5.x
    ``enableSplitRegistration``: 800 topics per request, all with one DataVersion) has several."""

    request: RegisterBrokerRequest  # its body replaced by None: the bodies are `batches`
    registered_at: int  # Redis time (ms) of the last registration: which copy of a broker is newer
    data_version: bytes | None  # the bodies' DataVersion text (None: not found, one body only)
    batches: dict[str, _Batch]  # body hash -> body, in the order the broker sent them
    on_replayed: Replayed  # the connection learns the replay's epoch (for its close)
    alive: Alive  # the connection is still open
    seq: int  # order of the registrations kept (a slow compression must not win over a newer one)

    @property
    def size(self) -> int:
        return 512 + sum(b.size for b in self.batches.values())  # + the header, roughly

    def renew(
        self, header: RegisterBrokerRequest, registered_at: int, on_replayed: Replayed, alive: Alive, seq: int
    ) -> None:
        """The broker sent one of these bodies again (or another batch of their version)."""
        if seq > self.seq:
            self.request, self.on_replayed, self.alive, self.seq = header, on_replayed, alive, seq
        self.registered_at = max(self.registered_at, registered_at)


@dataclass
class _Progress:
    """How far one kept copy's replay got: a retry goes on from the batch that failed."""

    next_batch: int = 0


class RegistrationKeeper:
    def __init__(
        self,
        register: Register,
        *,
        max_bytes: int,
        count: Callable[[str, int], None] = lambda outcome, n: None,
    ) -> None:
        self._register = register
        self.max_bytes = max_bytes
        self._count = count  # heal outcomes: replayed, skipped, failed, dropped (over max_bytes)
        self._kept: OrderedDict[tuple[str, str], _Kept] = OrderedDict()  # (holder, member) -> copy
        self.bytes = 0
        self._heal: asyncio.Task[None] | None = None
        self._compressing: set[asyncio.Task[tuple[bytes, bytes | None]]] = set()
        self._seq = 0
        self.healing = False
        self.bodies_inflated = 0  # kept bodies a replay had to read (decode) again
        self.last_heal: dict[str, float] = {}  # figures of the last heal (for logs, metrics, tests)

    # ---- what the connections tell ----
    def keep(
        self,
        holder: str,
        request: RegisterBrokerRequest,
        registered_at: int,
        on_replayed: Replayed,
        alive: Alive,
        facts: BodyFacts | None = None,
        written: WrittenTopics | None = None,
    ) -> None:
        """A registration over the connection ``holder`` was accepted: keep it for a replay. A big
        body is compressed in a thread, after the caller's reply. ``facts``: what the body
        amounted to, if the registration decoded it; ``written``: every topic write it sent, if
        it wrote them all (packed along with the body).

        A body with the DataVersion of the bodies kept is another batch of the same version (or
        the same batch again); any other replaces them."""
        body = request.body
        if body is None or not holder:
            return
        key = (holder, live_member(request.clusterName, request.brokerAddr))
        self._seq += 1
        seq = self._seq
        header = replace(request, body=None)
        known = self._kept.get(key)
        if known is not None and body.hash in known.batches:
            known.renew(header, registered_at, on_replayed, alive, seq)
            if facts is not None:
                batch = known.batches[body.hash]
                batch.facts = facts
                if written is not None:
                    self._drop(key)  # counted again with the writes, and moved to the end
                    batch.writes = pack_written(written)
                    self._put(key, known)
                    return
            self._kept.move_to_end(key)
            return
        data = body.data or b""
        version = data_version_text(data, version=body.version, compressed=body.compressed)

        def put(packed: tuple[bytes, bytes | None]) -> None:
            if not alive():
                return
            batch = _Batch(packed[0], body.version, body.compressed, facts, packed[1] if facts else None)
            current = self._kept.get(key)
            if current is not None and version is not None and current.data_version == version:
                if len(current.batches) >= MAX_BATCHES and body.hash not in current.batches:
                    self._count("dropped", 1)
                    return
                current.renew(header, registered_at, on_replayed, alive, seq)
                self._drop(key)
                current.batches[body.hash] = batch
                self._put(key, current)
            elif current is None or current.seq < seq:
                kept = _Kept(header, registered_at, version, {body.hash: batch}, on_replayed, alive, seq)
                self._put(key, kept)

        if len(data) < COMPRESS_IN_THREAD_BYTES:
            put(_pack(data, written))
            return
        task = asyncio.create_task(asyncio.to_thread(_pack, data, written))
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
        outcomes = {"replayed": 0, "skipped": 0, "failed": 0, "retried": 0}
        try:
            gate = asyncio.Semaphore(REPLAYS_IN_FLIGHT)

            async def one(key: tuple[str, str], kept: _Kept) -> None:
                # Redis calls made for a replay may take longer than a client's: a slow Redis
                # is no reason to give up (and start the batch over) on a registration that
                # nobody waits for
                redis_patience.set(REPLAY_PATIENCE_S)
                wait = RETRY_FIRST_WAIT
                progress = _Progress()
                seq = kept.seq
                give_up_at = started + RETRY_FOR_SECONDS
                while True:
                    done_before = progress.next_batch
                    async with gate:
                        outcome = await self._replay(kept, progress)
                    if progress.next_batch > done_before:  # a batch landed: the heal moves on
                        give_up_at = time.monotonic() + RETRY_FOR_SECONDS
                        wait = RETRY_FIRST_WAIT
                    current = self._kept.get(key) is kept  # not superseded, closed or forgotten
                    if outcome != "failed" or not current or time.monotonic() + wait > give_up_at:
                        break
                    outcomes["retried"] += 1
                    await asyncio.sleep(wait)
                    wait = min(wait * 2, RETRY_MAX_WAIT)
                outcomes[outcome] += 1
                self._count(outcome, 1)
                if outcome == "skipped" and self._kept.get(key) is kept and kept.seq == seq:
                    # Redis holds something newer (another worker's copy, the broker's own): this
                    # copy must not come back at the next loss either
                    self._drop(key)

            # Masters first: a slave replayed before its master is the lowest id of its broker
            # name, so it writes every topic (R9), and the master then compares every one (at
            # the RIP-29 shape, a million more writes and reads); after its master, a slave's
            # replay writes no topic and, with its body's facts kept, decodes nothing.
            copies = list(self._kept.items())
            for tier in (
                [c for c in copies if c[1].request.brokerId == 0],
                [c for c in copies if c[1].request.brokerId != 0],
            ):
                await asyncio.gather(*(one(key, kept) for key, kept in tier))
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

    async def _replay(self, kept: _Kept, progress: _Progress) -> str:
        """Replay the copy's batches in order, from where an earlier try stopped. Each names the
        time of the registration it copies (Redis skips it if it holds a newer one: the broker's
        own since, another worker's newer copy); each later batch also the epoch its batch before
        got (skipped if anyone registered or removed the broker in between)."""
        batches = list(kept.batches.items())
        while progress.next_batch < len(batches):
            if not kept.alive():
                return "skipped"
            body_hash, batch = batches[progress.next_batch]
            body = KeptBody(batch.packed, batch.version, batch.compressed, body_hash)
            request = replace(
                kept.request,
                body=body,
                replay_of=kept.registered_at,
                replay_continues=progress.next_batch > 0,
            )
            try:
                writes = batch.writes if batch.facts is not None else None
                result, registration = await self._register(request, batch.facts, writes)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "replaying %s/%s (batch %d of %d) failed: %s",
                    request.clusterName,
                    request.brokerAddr,
                    progress.next_batch + 1,
                    len(batches),
                    getattr(exc, "remark", exc),
                )
                return "failed"
            finally:
                self.bodies_inflated += body.inflated
            if registration is None:
                return "skipped" if result is not None else "failed"
            kept.on_replayed(registration)
            progress.next_batch += 1
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


class KeptBody(RawBody):
    """A kept body as a replay sends it: inflated only if the replay reads its content (a
    decode). A replay that sends its kept writes, or a slave's that writes no topic, reads only
    the hash (the key it was kept under), and inflating 1.7 MB for each of them was a tenth of
    the workers' CPU in a heal at the RIP-29 shape."""

    _packed: bytes  # not a field: the dataclass is RawBody, this subclass is not one

    def __init__(self, packed: bytes, version: int, compressed: bool, body_hash: str) -> None:
        # a frozen dataclass: its fields are set as its own __init__ sets them
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "compressed", compressed)
        object.__setattr__(self, "_packed", packed)
        self.__dict__["hash"] = body_hash  # the cached property, known already

    @property
    def inflated(self) -> bool:
        return "data" in self.__dict__

    @functools.cached_property
    def data(self) -> bytes | None:
        return zlib.decompress(self._packed) or None if self._packed else None


def _pack(body: bytes, written: WrittenTopics | None) -> tuple[bytes, bytes | None]:
    """The body compressed, and the writes packed (in a thread for a big body)."""
    return zlib.compress(body, 1), None if written is None else pack_written(written)
