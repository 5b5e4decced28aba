"""REGISTER_BROKER (103): the registration rules in order, the body decoded only as far as Redis
needs it, and the topic writes split into bounded script calls (or one delta call)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from namesrv.config import Settings
from namesrv.decode_budget import IN_THREAD_BYTES, DecodeBudget
from namesrv.domain.codes import Version
from namesrv.domain.errors import BadRequest, TooLarge
from namesrv.domain.model import (
    RawBody,
    RegisterBrokerRequest,
    RegisterBrokerResult,
    TopicConfig,
    TopicConfigWrapper,
    check_addr,
    check_name,
)
from namesrv.protocol.body_delta import BodyDelta, DecodedBody, RegisterBodyDecoder, names_digest
from namesrv.protocol.fastjson import dumps, quote
from namesrv.protocol.register_body import (
    BodyDecodeError,
    BodyLimits,
    BodyTooLarge,
    compressed_decode_estimate,
    inflates,
)
from namesrv.registry.kept_topics import WrittenTopics, unpack_written
from namesrv.registry.route_lookups import Routes
from namesrv.store.keyspace import live_member
from namesrv.store.registration_args import (
    UNDECODED,
    BodyFacts,
    RegisterBrokerArgs,
    RegisterStatus,
    RegisterTopicsArgs,
    TopicsOutcome,
    TopicsStatus,
    TopicWrites,
    WriteMode,
)
from namesrv.store.registry_store import HeaderOutcome, RegistryStore

log = logging.getLogger(__name__)
MIN_TIMEOUT_MS = 1000
MAX_TIMEOUT_MS = 24 * 3600 * 1000
MAX_BROKER_VERSION = 65535
CHUNKS_IN_FLIGHT = 2  # topic chunks of one registration unanswered at once, at least
IN_FLIGHT_TOPICS = 2000  # ... or as many as hold this many topics (see chunks_in_flight)
MAX_CHUNKS_IN_FLIGHT = 8  # ... but never more calls than this queued in Redis per registration
REMOTING_EXCEPTION = "org.apache.rocketmq.remoting.exception.RemotingCommandException"
_T = TypeVar("_T")


def chunks_in_flight(chunk_topics: int) -> int:
    """Chunks of one registration sent before the first is answered. The work a registration
    keeps queued in Redis is counted in topics, not chunks, so a chunk size that bounds each
    Redis command to a few milliseconds does not also shrink what Redis has queued while a busy
    worker builds its next chunk (at the RIP-29 shape, 250-topic chunks two at a time healed in
    14.0-15.3 s, eight at a time in 10.2-17.0 s, 1,000-topic chunks in 10.8-14.0 s)."""
    return max(CHUNKS_IN_FLIGHT, min(MAX_CHUNKS_IN_FLIGHT, IN_FLIGHT_TOPICS // chunk_topics))


@dataclass(frozen=True)
class Registration:
    """What the transport needs to remember about a registration (for fenced close removal)."""

    cluster: str
    addr: str
    broker_name: str
    broker_id: int
    epoch: int
    registered_at: int = 0  # Redis time (ms): orders the copies workers keep (registry/heal.py)
    # what the body amounted to, when this registration decoded it: a heal's replay of a
    # slave then needs no decode at all (registry/heal.py)
    facts: BodyFacts | None = None
    # every topic write it sent, when it wrote them all (a broker's own registration over a
    # connection): the heal keeps them packed and a replay sends them without decoding the body.
    # Not for holding: the caller hands them to the keeper and keeps the registration without.
    written: WrittenTopics | None = field(default=None, repr=False, compare=False)


class BrokerRegistrar:
    """The REGISTER_BROKER use case; :class:`~namesrv.registry.service.RegistryService` hands
    every registration, from either transport, to its one instance."""

    def __init__(
        self,
        store: RegistryStore,
        settings: Callable[[], Settings],
        lookups: Routes,
        count_registration: Callable[[str], None],
        budget: DecodeBudget,
        count_limit: Callable[[str], None] = lambda limit: None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.lookups = lookups  # told of this worker's own writes (read-your-writes)
        # REGISTER_BROKER outcomes (ok, refused, ignored), counted here once for every transport.
        self.count_registration = count_registration
        self.bodies_decoded = 0  # REGISTER_BROKER bodies the registry needed to read
        self.kept_writes_sent = 0  # heal replays that sent the topic writes kept, undecoded
        self.decoder = RegisterBodyDecoder(settings().registerBodyCacheBytes)
        self.budget = budget  # memory of bodies being decoded, shared with the HTTP transport
        self.count_limit = count_limit
        self._background: set[asyncio.Task[bool]] = set()
        # Topic writes wait here, in the worker, rather than in Redis: 32 new 10k-topic brokers
        # at once used to queue 320 chunk calls in Redis, and every other call of every worker
        # (change-log polls included) waited seconds behind them (bench-scale, RIP-29 shape).
        self._writing = asyncio.Semaphore(settings().registerWriteConcurrency)
        self.writes_in_flight = 0  # topic-chunk calls sent and not yet answered
        self.most_writes_in_flight = 0

    async def register(
        self, req: RegisterBrokerRequest, facts: BodyFacts | None = None, kept: bytes | None = None
    ) -> tuple[RegisterBrokerResult | None, Registration | None]:
        """Returns (None, None) when refused (R7: "register broker failed").

        ``facts``: what ``req.body`` amounted to when it was decoded before (a heal's replay of
        a registration this worker accepted): Redis is asked first, and the body is decoded
        only if topics must be written. ``kept`` (with ``facts``): the topic writes that
        registration sent, packed (:mod:`namesrv.registry.kept_topics`): they are sent again
        instead, and the body is not decoded at all.

        A request whose body is still raw (``req.body``) first asks Redis to reuse the last
        complete registration of that same body: the common periodic re-registration then costs
        one short Redis call and no decoding. Only when Redis needs the content is it decoded,
        and then, against this broker's previous body, only as far as it changed; only the
        topics that changed are written (a delta), unless Redis no longer holds what the previous
        body wrote."""
        s = self.settings()
        check_name(req.clusterName, "clusterName")
        check_name(req.brokerName, "brokerName")
        check_addr(req.brokerAddr, "brokerAddr")
        if req.brokerId < 0:
            raise BadRequest(f"brokerId must be >= 0, got {req.brokerId}")
        timeout = req.heartbeatTimeoutMillis or s.defaultBrokerTimeoutMillis
        if not MIN_TIMEOUT_MS <= timeout <= MAX_TIMEOUT_MS:
            raise BadRequest(f"heartbeatTimeoutMillis must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS}")
        args = RegisterBrokerArgs(
            cluster=req.clusterName,
            addr=req.brokerAddr,
            broker_name=req.brokerName,
            broker_id=req.brokerId,
            ha_addr=req.haServerAddr,
            zone=req.zoneName,
            timeout_ms=timeout,
            acting=req.enableActingMaster,
            token=uuid.uuid4().hex,
            return_order=s.returnOrderTopicConfigToBroker,
            body_hash=req.body.hash if req.body is not None else "",
            holder=req.holder,
            replay_of=req.replay_of,
            replay_continues=req.replay_continues,
            version=_broker_version(req.body),
        )
        if req.wrapper is not None:
            configs = req.wrapper.topicConfigTable
            decoded = DecodedBody(req.wrapper, req.filterServerList, names_digest(configs))
            return await self._register_decoded(req, args, decoded)
        assert req.body is not None, "a registration needs a wrapper or a body"
        member = live_member(req.clusterName, req.brokerAddr)
        body = req.body
        if facts is not None:
            return await self._register_known(
                req, args, facts, lambda: self._decoded(body, member), kept=kept
            )
        # A body other than the last one this worker decoded for the broker is almost never
        # the last complete registration Redis could reuse: skip asking (if it was, the full
        # path below gives the same result after a delta decode).
        if not self.decoder.remembers_another(member, req.body.hash):
            header = await self.store.register_header(
                replace(args, body=replace(UNDECODED, prune_leftovers=s.deleteTopicWithBrokerRegistration))
            )
            if header.status is not RegisterStatus.BODY_NEEDED:
                if header.route_changed:
                    self.lookups.note_local_write()
                return self._registered(req, header)
        # the decoded topics live until the registration is answered: so does their reservation
        async with self._decoded(req.body, member) as decoded:
            # A replay's body is the broker's last, re-sent by the heal: the broker's own next one
            # is 30 s away, by when a fleet of RIP-29 size has pushed it out of the decoder's
            # memory; laying each one out was a quarter of a heal's worker CPU.
            replayed = req.replay_of is not None
            laid_out_by = member if _big(req.body) and not _inflates(req.body) and not replayed else ""
            return await self._register_decoded(req, args, decoded, laid_out_by)

    async def _register_decoded(
        self,
        req: RegisterBrokerRequest,
        args: RegisterBrokerArgs,
        decoded: DecodedBody,
        laid_out_by: str = "",
    ) -> tuple[RegisterBrokerResult | None, Registration | None]:
        """The registration once its content is known; ``laid_out_by``: the member whose body to
        lay out once this registration is answered."""
        s = self.settings()
        wrapper, filters = decoded.wrapper, decoded.filters
        for server in filters or ():
            check_addr(server, "filterServerList entry")
        facts = BodyFacts(
            data_version_json=wrapper.dataVersion.to_json(),
            state_version=wrapper.dataVersion.stateVersion,
            filters_json=None if filters is None else dumps(list(filters)),
            topic_count=len(wrapper.topicConfigTable),
            digest=decoded.names_digest,
            prune_leftovers=s.deleteTopicWithBrokerRegistration and not wrapper.topicQueueMappingInfoMap,
        )
        return await self._register_known(
            req, args, facts, lambda: contextlib.nullcontext(decoded), laid_out_by
        )

    async def _register_known(
        self,
        req: RegisterBrokerRequest,
        args: RegisterBrokerArgs,
        facts: BodyFacts,
        content: Callable[[], contextlib.AbstractAsyncContextManager[DecodedBody]],
        laid_out_by: str = "",
        kept: bytes | None = None,
    ) -> tuple[RegisterBrokerResult | None, Registration | None]:
        """The registration once what its body amounts to is known; ``content`` gives the
        decoded body, asked for only when Redis wants topics written and ``kept`` (the topic
        writes an earlier registration of the body sent, packed) is None; ``laid_out_by``: the
        member whose body to lay out once this registration is answered."""
        args = replace(args, body=facts)
        header = await self.store.register_header(args)
        if header.route_changed:
            self.lookups.note_local_write()
        written: WrittenTopics | None = None
        if header.status is RegisterStatus.REGISTERED and header.mode is not WriteMode.NONE:
            before = unpack_written(kept) if kept is not None else None
            if before is not None and before.broker_name == args.broker_name:
                self.kept_writes_sent += 1
                await self._write_kept(req, args, before, facts.prune_leftovers)
            else:  # none kept, or written for a broker name the broker no longer has
                async with content() as decoded:
                    written = await self._write_topics(req, args, header.mode, decoded, facts.prune_leftovers)
        if laid_out_by:
            self._lay_out_after_reply(laid_out_by)
        result, registration = self._registered(req, header, facts)
        if registration is not None and written is not None and req.holder and req.replay_of is None:
            registration = replace(registration, written=written)
        return result, registration

    async def _write_topics(
        self,
        req: RegisterBrokerRequest,
        args: RegisterBrokerArgs,
        mode: WriteMode,
        decoded: DecodedBody,
        prune: bool,
    ) -> WrittenTopics | None:
        """Returns every topic write sent, when all were (not a delta)."""
        wrapper = decoded.wrapper
        status = TopicsStatus.DELTA_REFUSED
        delta = decoded.delta
        written = None
        async with self._writing:
            if mode is WriteMode.ALL and delta is not None and not (prune and delta.base_had_mappings):
                status = await self._write_delta(args, wrapper, delta, prune)
            if status is TopicsStatus.DELTA_REFUSED:
                configs = sorted(wrapper.topicConfigTable.values(), key=_topic_name)
                mappings = {t: dumps(info) for t, info in wrapper.topicQueueMappingInfoMap.items()}
                queue_writes = QueueWrites(args.broker_name)
                status, written = await self._write_all(
                    args,
                    len(configs),
                    lambda start, stop: queue_writes.writes(configs[start:stop]),
                    lambda: [config.topicName for config in configs],
                    mappings,
                    prune,
                )
        self._wrote(req, status)
        return written

    async def _write_kept(
        self, req: RegisterBrokerRequest, args: RegisterBrokerArgs, written: WrittenTopics, prune: bool
    ) -> None:
        """A heal's replay of a registration that kept its topic writes: the same calls again."""
        async with self._writing:
            writes = written.writes
            status, _ = await self._write_all(
                args, len(writes), writes.slice, lambda: writes.topics, written.mappings, prune
            )
        self._wrote(req, status)

    def _wrote(self, req: RegisterBrokerRequest, status: TopicsStatus) -> None:
        self.lookups.note_local_write()
        if status is TopicsStatus.FENCED:
            log.info(
                "topic writes of %s/%s superseded by a newer registration or an unregister",
                req.clusterName,
                req.brokerAddr,
            )

    @contextlib.asynccontextmanager
    async def _decoded(self, body: RawBody, member: str) -> AsyncIterator[DecodedBody]:
        """The body's content, with the memory its decoding holds reserved in the worker's
        budget until the block ends. A compressed or big body is decoded in a thread, so route
        lookups keep being answered meanwhile (a compressed one of any size: 64 KB can hold
        megabytes of topics)."""
        self.bodies_decoded += 1
        now_ms = int(time.time() * 1000)
        if body.version < Version.V3_0_11:
            now_ms = await self.store.server_time_ms()  # the fresh DataVersion of an old body
        data = body.data or b""
        compressed = _inflates(body)
        if _big(body) and not compressed:
            delta = self._decode(self.decoder.decode_delta, body, member, now_ms)  # a few ms: no thread hop
            if delta is not None:
                yield delta  # its topics are the remembered body's, already counted as such
                return
        what = "the REGISTER_BROKER body"
        if compressed:  # what a real body would hold: the decode charges what this one does
            reservation = await self.budget.reserve(
                min(compressed_decode_estimate(data), self.budget.capacity), what
            )
        else:
            reservation = await self.budget.reserve_json(data, what)
        try:
            limits = BodyLimits(self.settings().registerBodyMaxInflatedBytes, reservation.charge)
            if compressed or _big(body):
                decoded = await asyncio.to_thread(
                    self._decode, self.decoder.decode, body, member, now_ms, limits
                )
            else:
                decoded = self._decode(self.decoder.decode, body, member, now_ms, limits)
            yield decoded
        finally:
            reservation.release()

    def _decode(self, decode: Callable[..., _T], *args: object) -> _T:
        """``decode(*args)``, its failures as the transports answer them."""
        try:
            return decode(*args)
        except BodyTooLarge as exc:
            self.count_limit(exc.limit)
            raise TooLarge(
                f"{REMOTING_EXCEPTION}: Failed to decode RegisterBrokerBody: {exc}", exc.limit
            ) from None
        except BodyDecodeError as exc:
            raise BadRequest(f"{REMOTING_EXCEPTION}: Failed to decode RegisterBrokerBody: {exc}") from None

    def _lay_out_after_reply(self, member: str) -> None:
        """Lay out a big body the broker just sent, so its next one decodes as a delta at once;
        in a thread started after this reply is written (the task first runs on the loop's next
        turn), so it competes with neither this registration nor its topic writes."""
        if self.decoder.needs_layout(member):
            task = asyncio.create_task(asyncio.to_thread(self.decoder.prepare, member))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def _topic_chunk(
        self, args: RegisterBrokerArgs, writes: TopicWrites, no: int, final: bool
    ) -> RegisterTopicsArgs:
        return RegisterTopicsArgs(args.cluster, args.addr, args.broker_name, args.token, final, no, writes)

    async def _write_delta(
        self, args: RegisterBrokerArgs, wrapper: TopicConfigWrapper, delta: BodyDelta, prune: bool
    ) -> TopicsStatus:
        """Only the topics that changed since the previous body, in one final call."""
        writes = QueueWrites(args.broker_name).writes(delta.changed)
        chunk = replace(
            self._topic_chunk(args, writes, 0, True),
            removals=list(delta.dropped) if prune else [],
            mappings={t: dumps(info) for t, info in wrapper.topicQueueMappingInfoMap.items()},
            delta_base=delta.base_hash,
        )
        return (await self._send(chunk)).status

    async def _send(self, chunk: RegisterTopicsArgs) -> TopicsOutcome:
        self.writes_in_flight += 1
        self.most_writes_in_flight = max(self.most_writes_in_flight, self.writes_in_flight)
        try:
            return await self.store.register_topics(chunk)
        finally:
            self.writes_in_flight -= 1

    async def _write_all(
        self,
        args: RegisterBrokerArgs,
        count: int,
        render: Callable[[int, int], TopicWrites],
        names: Callable[[], Iterable[str]],
        mappings: Mapping[str, str],
        prune: bool,
    ) -> tuple[TopicsStatus, WrittenTopics]:
        """Every one of ``count`` topics (sorted by name; ``render(start, stop)`` makes the writes
        of those from ``start`` to ``stop``; ``names`` gives all their names), in chunks of
        ``registerChunkTopics``. Each chunk is sent as soon as it is
        built and fewer than :func:`chunks_in_flight` are unanswered, so Redis runs one chunk while
        this worker builds the next, and never queues more of them; the final call
        (removals, mappings, the commit) goes once all the others are applied. With more than
        one chunk the final call carries no topic: the wait at the end is one short call (about
        1 ms for a new 10,000-topic broker, measured) instead of a whole chunk (9-13 ms).
        Returns the status and every write sent."""
        removals: list[str] = []
        if prune:
            present = set(names())
            removals = [t for t in await self.store.broker_topics(args.broker_name) if t not in present]
        size = self.settings().registerChunkTopics
        in_flight = chunks_in_flight(size)
        parts = [(i, min(i + size, count)) for i in range(0, count, size)] or [(0, 0)]
        sent_writes = TopicWrites([], [], [])

        def chunk(no: int) -> RegisterTopicsArgs:
            writes = render(*parts[no])
            sent_writes.extend(writes)
            return self._topic_chunk(args, writes, no, no == len(parts) - 1)

        if len(parts) > 1:
            parts.append((count, count))
        sent: list[asyncio.Task[TopicsOutcome]] = []
        try:
            for no in range(len(parts) - 1):
                pending = [task for task in sent if not task.done()]
                if len(pending) >= in_flight:
                    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if any(task.done() and not task.cancelled() and task.exception() for task in sent):
                    break  # gather raises it; the chunks not sent are not needed any more
                sent.append(asyncio.create_task(self._send(chunk(no))))
                await asyncio.sleep(0)  # the task writes it to Redis before the next is built
            final = replace(chunk(len(parts) - 1), removals=removals, mappings=mappings)
            await asyncio.gather(*sent)  # the first failure (StoreUnavailable...) as it was raised
        finally:
            for task in sent:
                if not task.done():
                    task.cancel()  # after a failure: the chunks not yet applied
                elif not task.cancelled():
                    task.exception()  # seen: gather raised the first failure, these add nothing
        statuses = [task.result().status for task in sent]
        statuses.append((await self._send(final)).status)
        return min(statuses, key=lambda st: st.value), WrittenTopics(args.broker_name, sent_writes, mappings)

    def _registered(
        self, req: RegisterBrokerRequest, header: HeaderOutcome, facts: BodyFacts | None = None
    ) -> tuple[RegisterBrokerResult | None, Registration | None]:
        outcome = {
            RegisterStatus.REFUSED: "refused",
            RegisterStatus.IGNORED: "ignored",
            RegisterStatus.SKIPPED: "replay_skipped",
        }.get(header.status, "ok")
        self.count_registration(outcome)
        if header.status is RegisterStatus.SKIPPED:  # the broker registered on its own: it wins
            return RegisterBrokerResult(accepted=False), None
        if header.status is RegisterStatus.REFUSED:
            log.info(
                "register of %s/%s (%s id %d) refused as Java does (R7): the first registration of an id "
                "must not carry exactly one topic",
                req.clusterName,
                req.brokerAddr,
                req.brokerName,
                req.brokerId,
            )
            return None, None
        if header.status is RegisterStatus.IGNORED:
            log.info(
                "register of %s/%s id %d ignored: a live registration of that id has a newer stateVersion",
                req.clusterName,
                req.brokerAddr,
                req.brokerId,
            )
            return RegisterBrokerResult(order_topic_config=header.order_config, accepted=False), None
        result = RegisterBrokerResult(
            haServerAddr=header.ha_server_addr or None,
            masterAddr=header.master_addr or None,
            order_topic_config=header.order_config,
        )
        return result, Registration(
            req.clusterName,
            req.brokerAddr,
            req.brokerName,
            req.brokerId,
            header.epoch,
            header.registered_at,
            facts,
        )


def _topic_name(config: TopicConfig) -> str:
    return config.topicName


def _inflates(body: RawBody) -> bool:
    return inflates(body.data, version=body.version, compressed=body.compressed)


def _broker_version(body: RawBody | None) -> int | None:
    """The version a remoting registration carried (its request's), kept for the console; one
    outside what the binary header can hold (an int16) is not kept. HTTP registrations have none."""
    if body is None or not 0 <= body.version <= MAX_BROKER_VERSION:
        return None
    return body.version


def _big(body: RawBody) -> bool:
    """Decoded in a thread, compared with the broker's previous body, laid out for the next."""
    return body.data is not None and len(body.data) > IN_THREAD_BYTES


class QueueWrites:
    """The queue writes of one broker name's topics. A queue's JSON does not name its topic, so
    a broker's 10,000 topics share a handful: each is rendered once."""

    def __init__(self, broker_name: str) -> None:
        self.quoted = quote(broker_name)
        self.rendered: dict[tuple[int, int, int, int], str] = {}

    def writes(self, configs: Sequence[TopicConfig]) -> TopicWrites:
        """One write per topic, as columns, each built by one comprehension: a new 10,000-topic
        broker builds 10,000, and a tuple per topic took twice as long."""
        rendered, quoted = self.rendered, self.quoted
        shapes = [(c.perm, c.readQueueNums, c.topicSysFlag, c.writeQueueNums) for c in configs]
        for shape, config in zip(shapes, configs, strict=True):
            if shape not in rendered:  # a broker's topics have a handful of shapes
                rendered[shape] = config.queue_data_json(quoted)
        return TopicWrites(
            [c.topicName for c in configs],
            [rendered[shape] for shape in shapes],
            [c.topicSysFlag for c in configs],
        )
