"""Use-cases of the NameServer: what each request does, whatever transport carried it.

Each method maps to one RocketMQ request code (noted in its docstring). RocketMQ rules that need
more than one script call live here: splitting a big registration into bounded chunks, cleaning
a removed broker's topics, asking again with the right keys when a script answers -3, and the
flags of the effective configuration. Every write still happens inside a Lua script.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import orjson

from namesrv.config import Settings
from namesrv.domain import routes
from namesrv.domain.codes import FLAG_UNIT, FLAG_UNIT_SUB, Version
from namesrv.domain.errors import BadRequest, Disabled, TooLarge
from namesrv.domain.model import (
    MAX_NAME_LENGTH,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    RawBody,
    RegisterBrokerRequest,
    RegisterBrokerResult,
    TopicConfigWrapper,
    TopicRouteData,
    check_addr,
    check_name,
    check_new_topic,
)
from namesrv.limits import utf8_length
from namesrv.protocol.body_delta import BodyDelta, DecodedBody, RegisterBodyDecoder, names_digest
from namesrv.protocol.fastjson import dumps, quote
from namesrv.protocol.register_body import BodyDecodeError
from namesrv.registry.route_cache import CachedRoute, Peeked, Routes, UncachedRoutes
from namesrv.registry.route_reader import RouteReader
from namesrv.store.keyspace import live_member
from namesrv.store.registration_args import (
    UNDECODED,
    BodyFacts,
    RegisterBrokerArgs,
    RegisterStatus,
    RegisterTopicsArgs,
    TopicsStatus,
    TopicWrite,
    WriteMode,
)
from namesrv.store.registry_store import HeaderOutcome, RegistryStore
from namesrv.store.script_args import KeysStatus, UnregisterStatus

log = logging.getLogger(__name__)
MIN_TIMEOUT_MS = 1000
MAX_TIMEOUT_MS = 24 * 3600 * 1000
SWEEP_BATCH = 100
REMOTING_EXCEPTION = "org.apache.rocketmq.remoting.exception.RemotingCommandException"
DECODE_IN_THREAD_BYTES = 256 * 1024


def chunked(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@dataclass(frozen=True)
class Registration:
    """What the transport needs to remember about a registration (for fenced close removal)."""

    cluster: str
    addr: str
    broker_name: str
    broker_id: int
    epoch: int


class RegistryService:
    def __init__(
        self,
        store: RegistryStore,
        settings: Callable[[], Settings],
        routes: Routes | None = None,
        *,
        count_registration: Callable[[str], None] = lambda result: None,
        count_limit: Callable[[str], None] = lambda limit: None,
    ) -> None:
        self.store = store
        self.settings = settings
        # REGISTER_BROKER outcomes (ok, refused, ignored), counted here once for every transport.
        self.count_registration = count_registration
        # Route lookups: the worker's cache, or (by default) straight from Redis.
        self.lookups = routes or UncachedRoutes(RouteReader(store, settings).read)
        self.bodies_decoded = 0  # REGISTER_BROKER bodies the registry needed to read
        # Requests refused by a size limit, by the option's name.
        self.count_limit = count_limit
        self.decoder = RegisterBodyDecoder()
        self._background: set[asyncio.Task[bool]] = set()

    def _wrote(self) -> None:
        self.lookups.note_local_write()

    # ---- 103 REGISTER_BROKER ----
    async def register_broker(  # noqa: C901 - the registration rules in order, each a branch
        self, req: RegisterBrokerRequest
    ) -> tuple[RegisterBrokerResult | None, Registration | None]:
        """Returns (None, None) when refused (R7: "register broker failed").

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
        )
        if req.wrapper is not None:
            configs = req.wrapper.topicConfigTable
            decoded = DecodedBody(req.wrapper, req.filterServerList, names_digest(configs))
        else:
            assert req.body is not None, "a registration needs a wrapper or a body"
            member = live_member(req.clusterName, req.brokerAddr)
            # A body other than the last one this worker decoded for the broker is almost never
            # the last complete registration Redis could reuse: skip asking (if it was, the full
            # path below gives the same result after a delta decode).
            if not self.decoder.remembers_another(member, req.body.hash):
                header = await self.store.register_header(
                    replace(
                        args, body=replace(UNDECODED, prune_leftovers=s.deleteTopicWithBrokerRegistration)
                    )
                )
                if header.status is not RegisterStatus.BODY_NEEDED:
                    if header.route_changed:
                        self._wrote()
                    return self._registered(req, header)
            self.bodies_decoded += 1
            decoded = await self._decode(req.body, member)
        wrapper, filters = decoded.wrapper, decoded.filters
        for server in filters or ():
            check_addr(server, "filterServerList entry")
        prune = s.deleteTopicWithBrokerRegistration and not wrapper.topicQueueMappingInfoMap
        args = replace(
            args,
            body=BodyFacts(
                data_version_json=wrapper.dataVersion.to_json(),
                state_version=wrapper.dataVersion.stateVersion,
                filters_json=None if filters is None else dumps(list(filters)),
                topic_count=len(wrapper.topicConfigTable),
                digest=decoded.names_digest,
                prune_leftovers=prune,
            ),
        )
        header = await self.store.register_header(args)
        if header.route_changed:
            self._wrote()
        if header.status is RegisterStatus.REGISTERED and header.mode is not WriteMode.NONE:
            status = TopicsStatus.DELTA_REFUSED
            delta = decoded.delta
            if header.mode is WriteMode.ALL and delta is not None and not (prune and delta.base_had_mappings):
                status = await self._write_delta(args, wrapper, delta, prune)
            if status is TopicsStatus.DELTA_REFUSED:
                status = await self._write_all(args, wrapper, prune)
            self._wrote()
            if status is TopicsStatus.FENCED:
                log.info(
                    "topic writes of %s/%s superseded by a newer registration or an unregister",
                    req.clusterName,
                    req.brokerAddr,
                )
        return self._registered(req, header)

    async def _decode(self, body: RawBody, member: str) -> DecodedBody:
        """The body's content; a big one is decoded in a thread, so route lookups keep being
        answered meanwhile."""
        now_ms = int(time.time() * 1000)
        if body.version < Version.V3_0_11:
            now_ms = await self.store.server_time_ms()  # the fresh DataVersion of an old body
        try:
            if body.data is not None and len(body.data) > DECODE_IN_THREAD_BYTES:
                delta = self.decoder.decode_delta(body, member, now_ms)  # a few ms: no thread hop
                if delta is not None:
                    return delta
                decoded = await asyncio.to_thread(self.decoder.decode, body, member, now_ms)
                if self.decoder.needs_layout(member):
                    # off the reply's path: the broker's next body then decodes as a delta at once
                    task = asyncio.create_task(asyncio.to_thread(self.decoder.prepare, member))
                    self._background.add(task)
                    task.add_done_callback(self._background.discard)
                return decoded
            return self.decoder.decode(body, member, now_ms)
        except BodyDecodeError as exc:
            raise BadRequest(f"{REMOTING_EXCEPTION}: Failed to decode RegisterBrokerBody: {exc}") from None

    def _topic_chunk(
        self, args: RegisterBrokerArgs, writes: Sequence[TopicWrite], no: int, final: bool
    ) -> RegisterTopicsArgs:
        return RegisterTopicsArgs(args.cluster, args.addr, args.broker_name, args.token, final, no, writes)

    async def _write_delta(
        self, args: RegisterBrokerArgs, wrapper: TopicConfigWrapper, delta: BodyDelta, prune: bool
    ) -> TopicsStatus:
        """Only the topics that changed since the previous body, in one final call."""
        quoted = quote(args.broker_name)
        writes = [TopicWrite(tc.topicName, tc.queue_data_json(quoted)) for tc in delta.changed]
        chunk = replace(
            self._topic_chunk(args, writes, 0, True),
            removals=list(delta.dropped) if prune else [],
            mappings={t: dumps(info) for t, info in wrapper.topicQueueMappingInfoMap.items()},
            delta_base=delta.base_hash,
        )
        status, _, _ = await self.store.register_topics([chunk])
        return status

    async def _write_all(
        self, args: RegisterBrokerArgs, wrapper: TopicConfigWrapper, prune: bool
    ) -> TopicsStatus:
        configs = sorted(wrapper.topicConfigTable.values(), key=lambda tc: tc.topicName)
        quoted = quote(args.broker_name)
        writes = [TopicWrite(tc.topicName, tc.queue_data_json(quoted)) for tc in configs]
        removals: list[str] = []
        if prune:
            present = {tc.topicName for tc in configs}
            removals = [t for t in await self.store.broker_topics(args.broker_name) if t not in present]
        size = self.settings().registerChunkTopics
        parts = [writes[i : i + size] for i in range(0, len(writes), size)] or [[]]
        chunks = [self._topic_chunk(args, part, i, i == len(parts) - 1) for i, part in enumerate(parts)]
        chunks[-1] = replace(
            chunks[-1],
            removals=removals,
            mappings={t: dumps(info) for t, info in wrapper.topicQueueMappingInfoMap.items()},
        )
        status, _, _ = await self.store.register_topics(chunks)
        return status

    def _registered(
        self, req: RegisterBrokerRequest, header: HeaderOutcome
    ) -> tuple[RegisterBrokerResult | None, Registration | None]:
        outcome = {RegisterStatus.REFUSED: "refused", RegisterStatus.IGNORED: "ignored"}.get(
            header.status, "ok"
        )
        self.count_registration(outcome)
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
            req.clusterName, req.brokerAddr, req.brokerName, req.brokerId, header.epoch
        )

    # ---- 104 UNREGISTER_BROKER, connection close ----
    async def unregister_broker(
        self,
        cluster: str,
        addr: str,
        broker_name: str,
        broker_id: int | str,
        *,
        fence_epoch: int | None = None,
        reason: str = "unregister",
    ) -> bool:
        """Remove a broker address; False when fenced (a newer registration owns it)."""
        if not _storable(cluster, addr, broker_name):
            return fence_epoch is None  # never registered: nothing to remove, nothing to fence
        status, _removed, pending = await self.store.unregister(
            cluster=cluster,
            addr=addr,
            broker_name=broker_name,
            broker_id=broker_id,
            fence_epoch=fence_epoch,
            reason=reason,
        )
        self._wrote()
        if status is UnregisterStatus.FENCED:
            log.info(
                "%s of %s/%s fenced: epoch %s is no longer the live registration",
                reason,
                cluster,
                addr,
                fence_epoch,
            )
            return False
        if pending:
            await self.clean_broker_topics(broker_name)
        return True

    async def clean_broker_topics(self, broker_name: str) -> None:
        topics = await self.store.broker_topics(broker_name)
        parts = list(chunked(topics, self.settings().registerChunkTopics)) or [[]]
        for i, part in enumerate(parts):
            await self.store.clean_topics(broker_name, part, final=i == len(parts) - 1)
        self._wrote()

    async def sweep(self) -> int:
        """The expiry sweep, plus any topic cleanup a crashed worker left unfinished."""
        total = 0
        while True:
            expired, more, names = await self.store.expire(SWEEP_BATCH)
            total += expired
            for name in names:
                await self.clean_broker_topics(name)
            if not more:
                break
        for name in await self.store.pending_cleanups():
            await self.clean_broker_topics(name)
        return total

    # ---- 904, 322 ----
    async def heartbeat(self, cluster: str, addr: str) -> bool:
        if not _storable(cluster, addr):
            return False
        live, _ = await self.store.heartbeat(cluster, addr, "904")
        return live

    async def query_data_version(
        self, cluster: str, addr: str, version: DataVersion | None
    ) -> tuple[bool, DataVersion | None]:
        """(changed, stored version if the broker is live); also refreshes liveness, as in Java."""
        if not _storable(cluster, addr):
            return True, None
        live, stored = await self.store.heartbeat(cluster, addr, "322")
        current = DataVersion.from_obj(orjson.loads(stored)) if live and stored else None
        return (current is None or version is None or current != version), current

    # ---- 205, 327 ----
    async def change_write_perm(self, broker_name: str, *, wipe: bool) -> int:
        check_name(broker_name, "brokerName")
        topics = await self.store.broker_topics(broker_name)
        total = 0
        for part in chunked(topics, self.settings().registerChunkTopics):
            total += await self.store.change_perm(broker_name, part, wipe=wipe)
        self._wrote()
        return total

    # ---- 216, 217 ----
    async def delete_topic(self, topic: str, cluster: str | None = None) -> int:
        check_name(topic, "topic")
        names = await self.store.topic_broker_names(topic)
        for _ in range(5):
            result = await self.store.delete_topic(topic, cluster or None, names)
            if int(result[0]) != KeysStatus.RETRY_KEYS:
                self._wrote()
                return int(result[1])
            names = sorted(set(names) | {str(n) for n in result[1:]})
        raise BadRequest(f"topic {topic!r} kept changing while being deleted; try again")

    async def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> int:
        check_new_topic(topic)
        if not queue_datas:
            return 0
        written = await self.store.register_topic(
            topic, [(q.brokerName, q.to_json(), q.topicSysFlag) for q in queue_datas]
        )
        self._wrote()
        return written

    # ---- 105, 106, 901 ----
    async def route_entry(self, topic: str) -> CachedRoute | None:
        """GET_ROUTEINFO_BY_TOPIC: the route with its encodings, from the worker's cache if any."""
        if not _storable(topic):
            return None  # never cached: a 10 MB name must not become a cache key
        return await self.lookups.get(topic)

    def cached_route(self, topic: str, *, caught_up: bool = False) -> Peeked:
        """GET_ROUTEINFO_BY_TOPIC without waiting: the cached route, False for a cached "no such
        topic", STALE when a catch-up must come first (:meth:`catch_up_routes`), None when only
        :meth:`route_entry` can answer."""
        return self.lookups.peek(topic, caught_up=caught_up)

    async def catch_up_routes(self) -> bool:
        """Bring the route cache's knowledge up to now (one read for every waiting lookup)."""
        return await self.lookups.catch_up()

    async def route(self, topic: str) -> TopicRouteData | None:
        entry = await self.route_entry(topic)
        return entry.data if entry is not None else None

    async def cluster_info(self) -> ClusterInfo:
        brokers, clusters = await self.store.brokers()
        return ClusterInfo(
            brokerAddrTable={n: routes.parse_broker_data(t) for n, t in sorted(brokers.items())},
            clusterAddrTable={c: tuple(orjson.loads(t)) for c, t in sorted(clusters.items())},
        )

    async def broker_member_group(self, cluster: str, broker_name: str) -> dict[int, str]:
        if not _storable(broker_name):
            return {}
        brokers, _ = await self.store.brokers([broker_name])
        if broker_name not in brokers:
            return {}
        return dict(routes.parse_broker_data(brokers[broker_name]).brokerAddrs)

    async def broker_data(self, broker_name: str) -> BrokerData | None:
        if not _storable(broker_name):
            return None
        brokers, _ = await self.store.brokers([broker_name])
        return routes.parse_broker_data(brokers[broker_name]) if broker_name in brokers else None

    # ---- topic lists: 206, 224, 304, 311-313 ----
    async def all_topics(self) -> list[str]:
        if not self.settings().enableAllTopicList:
            raise Disabled()
        return await self.store.all_topics()

    async def topics_by_cluster(self, cluster: str) -> list[str]:
        if not self.settings().enableTopicList:
            raise Disabled()
        if not _storable(cluster):
            return []
        names: list[str] = []
        for _ in range(5):
            result = await self.store.topics_by_cluster(cluster, names)
            if int(result[0]) != KeysStatus.RETRY_KEYS:
                return sorted(str(t) for t in result[1:])
            names = [str(n) for n in result[1:]]
        raise BadRequest(f"cluster {cluster!r} kept changing while being read; try again")

    async def system_topics(self) -> tuple[list[str], str | None]:
        """(cluster names and broker names, the first address of the first broker)."""
        brokers, clusters = await self.store.brokers()
        names: set[str] = set()
        for cluster, members in clusters.items():
            names.add(cluster)
            names.update(orjson.loads(members))
        addr = None
        for _, text in sorted(brokers.items()):
            addrs = routes.parse_broker_data(text).brokerAddrs
            if addrs:
                addr = addrs[min(addrs)]
                break
        return sorted(names), addr

    async def unit_topics(self, kind: str) -> list[str]:
        if not self.settings().enableTopicList:
            raise Disabled()
        flags = await self.store.topic_flags()

        def wanted(flag: int) -> bool:
            if kind == "unit":
                return bool(flag & FLAG_UNIT)
            if kind == "unitSub":
                return bool(flag & FLAG_UNIT_SUB)
            return bool(flag & FLAG_UNIT_SUB) and not flag & FLAG_UNIT

        return sorted(t for t, f in flags.items() if wanted(f))

    # ---- 100, 101, 102, 219 ----
    async def kv_put(self, namespace: str, key: str, value: str | None) -> None:
        check_name(namespace, "namespace")
        check_name(key, "key")
        if value is not None:
            limit = self.settings().kvValueMaxBytes
            size = utf8_length(value)
            if size > limit:
                self.count_limit("kvValueMaxBytes")
                raise TooLarge(
                    f"KV value is {size} bytes; the maximum is {limit} (kvValueMaxBytes)", "kvValueMaxBytes"
                )
        await self.store.kv_put(namespace, key, value)
        self._wrote()

    async def kv_get(self, namespace: str, key: str) -> str | None:
        if not _storable(namespace, key):
            return None  # no such entry can exist; answer as Java does, without asking Redis
        return await self.store.kv_get(namespace, key)

    async def kv_delete(self, namespace: str, key: str) -> bool:
        if not _storable(namespace, key):
            return False
        deleted = await self.store.kv_delete(namespace, key)
        self._wrote()
        return deleted

    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        if not _storable(namespace):
            return None
        return await self.store.kv_list(namespace)


def _storable(*names: str) -> bool:
    """Could these names have been stored? (Writes refuse longer ones: a lookup of such a name
    is answered "not found" at once, without sending the name to Redis or the route cache.)"""
    return all(len(n) <= MAX_NAME_LENGTH for n in names)
