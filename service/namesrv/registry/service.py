"""Use-cases of the NameServer: what each request does, whatever transport carried it.

Each method maps to one RocketMQ request code (noted in its docstring). RocketMQ rules that need
more than one script call live here: splitting a big registration into bounded chunks, cleaning
a removed broker's topics, asking again with the right keys when a script answers -3, and the
flags of the effective configuration. Every write still happens inside a Lua script.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import orjson

from namesrv.config import Settings
from namesrv.domain import routes
from namesrv.domain.codes import FLAG_UNIT, FLAG_UNIT_SUB
from namesrv.domain.errors import BadRequest, Disabled
from namesrv.domain.model import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    RegisterBrokerRequest,
    RegisterBrokerResult,
    TopicRouteData,
    check_addr,
    check_name,
)
from namesrv.protocol.fastjson import dumps, quote
from namesrv.registry.route_cache import NO_NAMES, CachedRoute, Lookup, RouteCache
from namesrv.store.registry_store import RETRY_KEYS, HeaderOutcome, RegistryStore, TopicWrite

log = logging.getLogger(__name__)
MIN_TIMEOUT_MS = 1000
MAX_TIMEOUT_MS = 24 * 3600 * 1000
SWEEP_BATCH = 100


def topic_digest(names: Sequence[str]) -> str:
    return hashlib.sha1("\n".join(sorted(names)).encode()).hexdigest()


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
    def __init__(self, store: RegistryStore, settings: Callable[[], Settings]) -> None:
        self.store = store
        self.settings = settings
        self.cache: RouteCache | None = None
        self.bodies_decoded = 0  # REGISTER_BROKER bodies the registry needed to read

    def enable_route_cache(self) -> RouteCache:
        s = self.settings()
        self.cache = RouteCache(
            self.read_route,
            staleness_s=s.routeCacheStalenessMillis / 1000,
            negative_s=s.routeNegativeCacheMillis / 1000,
            max_entries=s.routeCacheMaxEntries,
            view=self._route_view,
        )
        return self.cache

    def _wrote(self) -> None:
        if self.cache is not None:
            self.cache.note_local_write()

    def _route_view(self) -> tuple[bool, bool]:
        """The settings that shape a route; the cache starts over when they change."""
        s = self.settings()
        return s.orderMessageEnable, s.supportActingMaster

    # ---- 103 REGISTER_BROKER ----
    async def register_broker(
        self, req: RegisterBrokerRequest
    ) -> tuple[RegisterBrokerResult | None, Registration | None]:
        """Returns (None, None) when refused (R7: "register broker failed").

        A request whose body is still raw (``req.body``) first asks Redis to reuse the last
        complete registration of that same body: the common periodic re-registration then costs
        one short Redis call and no decoding. Only when Redis needs the content is it decoded."""
        s = self.settings()
        check_name(req.clusterName, "clusterName")
        check_name(req.brokerName, "brokerName")
        check_addr(req.brokerAddr, "brokerAddr")
        if req.brokerId < 0:
            raise BadRequest(f"brokerId must be >= 0, got {req.brokerId}")
        timeout = req.heartbeatTimeoutMillis or s.defaultBrokerTimeoutMillis
        if not MIN_TIMEOUT_MS <= timeout <= MAX_TIMEOUT_MS:
            raise BadRequest(f"heartbeatTimeoutMillis must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS}")
        token = uuid.uuid4().hex
        body_hash = req.body.hash if req.body is not None else ""
        register_header = functools.partial(
            self.store.register_header,
            cluster=req.clusterName,
            addr=req.brokerAddr,
            broker_name=req.brokerName,
            broker_id=req.brokerId,
            ha_addr=req.haServerAddr,
            zone=req.zoneName,
            timeout_ms=timeout,
            acting=req.enableActingMaster,
            token=token,
            return_order=s.returnOrderTopicConfigToBroker,
            body_hash=body_hash,
        )
        wrapper, filters = req.wrapper, req.filterServerList
        if wrapper is None:
            assert req.body is not None, "a registration needs a wrapper or a body"
            header = await register_header(
                data_version_json="",
                state_version=0,
                filters_json=None,
                topic_count=0,
                digest="",
                prune_leftovers=s.deleteTopicWithBrokerRegistration,
            )
            if header.status != 3:
                if header.route_changed:
                    self._wrote()
                return self._registered(req, header)
            self.bodies_decoded += 1
            wrapper, filters = await req.body.decode()
        for server in filters or ():
            check_addr(server, "filterServerList entry")
        configs = sorted(wrapper.topicConfigTable.values(), key=lambda tc: tc.topicName)
        names = [tc.topicName for tc in configs]
        prune = s.deleteTopicWithBrokerRegistration and not wrapper.topicQueueMappingInfoMap
        header = await register_header(
            data_version_json=wrapper.dataVersion.to_json(),
            state_version=wrapper.dataVersion.stateVersion,
            filters_json=None if filters is None else dumps(list(filters)),
            topic_count=len(names),
            digest=topic_digest(names),
            prune_leftovers=prune,
        )
        if header.route_changed:
            self._wrote()
        if header.status == 1 and header.mode:
            quoted = quote(req.brokerName)
            writes = [TopicWrite(tc.topicName, tc.queue_data_json(quoted), tc.topicSysFlag) for tc in configs]
            removals: list[str] = []
            if prune:
                present = set(names)
                removals = [t for t in await self.store.broker_topics(req.brokerName) if t not in present]
            size = s.registerChunkTopics
            chunks = [writes[i : i + size] for i in range(0, len(writes), size)]
            mappings = {t: dumps(info) for t, info in wrapper.topicQueueMappingInfoMap.items()}
            applied, _, _ = await self.store.register_topics(
                cluster=req.clusterName,
                addr=req.brokerAddr,
                broker_name=req.brokerName,
                token=token,
                chunks=chunks,
                removals=removals,
                mappings=mappings,
            )
            self._wrote()
            if not applied:
                log.info(
                    "topic writes of %s/%s superseded by a newer registration or an unregister",
                    req.clusterName,
                    req.brokerAddr,
                )
        return self._registered(req, header)

    def _registered(
        self, req: RegisterBrokerRequest, header: HeaderOutcome
    ) -> tuple[RegisterBrokerResult | None, Registration | None]:
        if header.status == 0:
            return None, None
        if header.status == 2:
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
        status, _removed, pending = await self.store.unregister(
            cluster=cluster,
            addr=addr,
            broker_name=broker_name,
            broker_id=broker_id,
            fence_epoch=fence_epoch,
            reason=reason,
        )
        self._wrote()
        if status == -2:
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
        live, _ = await self.store.heartbeat(cluster, addr, "904")
        return live

    async def query_data_version(
        self, cluster: str, addr: str, version: DataVersion | None
    ) -> tuple[bool, DataVersion | None]:
        """(changed, stored version if the broker is live); also refreshes liveness, as in Java."""
        live, stored = await self.store.heartbeat(cluster, addr, "322")
        current = DataVersion.from_obj(orjson.loads(stored)) if live and stored else None
        return (current is None or version is None or current != version), current

    # ---- 205, 327 ----
    async def change_write_perm(self, broker_name: str, *, wipe: bool) -> int:
        check_name(broker_name, "brokerName")
        script = "wipeWritePerm" if wipe else "addWritePerm"
        topics = await self.store.broker_topics(broker_name)
        total = 0
        for part in chunked(topics, self.settings().registerChunkTopics):
            total += await self.store.change_perm(script, broker_name, part)
        self._wrote()
        return total

    # ---- 216, 217 ----
    async def delete_topic(self, topic: str, cluster: str | None = None) -> int:
        check_name(topic, "topic")
        names = await self.store.topic_broker_names(topic)
        for _ in range(5):
            result = await self.store.delete_topic(topic, cluster or None, names)
            if int(result[0]) != RETRY_KEYS:
                self._wrote()
                return int(result[1])
            names = sorted(set(names) | {str(n) for n in result[1:]})
        raise BadRequest(f"topic {topic!r} kept changing while being deleted; try again")

    async def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> int:
        check_name(topic, "topic")
        if not queue_datas:
            return 0
        written = await self.store.register_topic(
            topic, [(q.brokerName, q.to_json(), q.topicSysFlag) for q in queue_datas]
        )
        self._wrote()
        return written

    # ---- 105, 106, 901 ----
    async def read_route(self, topic: str) -> Lookup:
        """The route straight from Redis, and until when (local monotonic time) it may be served:
        the earliest deadline of the brokers it shows, measured on the Redis clock."""
        s = self.settings()
        started = time.monotonic()
        snap = await self.store.route(topic, with_order=s.orderMessageEnable)
        valid_until = math.inf
        if snap.valid_until_ms is not None:
            valid_until = started + (snap.valid_until_ms - snap.now_ms) / 1000
        hidden = frozenset(snap.hidden_brokers) if snap.hidden_brokers else NO_NAMES
        if not snap.broker_datas:
            return Lookup(None, valid_until, hidden)
        data = routes.assemble(
            topic,
            snap.queue_datas,
            snap.broker_datas,
            snap.filters,
            snap.mappings,
            snap.order_topic_conf,
            support_acting_master=s.supportActingMaster,
        )
        return Lookup(data, valid_until, hidden)

    async def route_entry(self, topic: str) -> CachedRoute | None:
        """GET_ROUTEINFO_BY_TOPIC: the route with its encodings, from the worker's cache if any."""
        if self.cache is not None:
            return await self.cache.get(topic)
        lookup = await self.read_route(topic)
        return CachedRoute(lookup.route, lookup.valid_until) if lookup.route is not None else None

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
        brokers, _ = await self.store.brokers([broker_name])
        if broker_name not in brokers:
            return {}
        return dict(routes.parse_broker_data(brokers[broker_name]).brokerAddrs)

    async def broker_data(self, broker_name: str) -> BrokerData | None:
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
        names: list[str] = []
        for _ in range(5):
            result = await self.store.topics_by_cluster(cluster, names)
            if int(result[0]) != RETRY_KEYS:
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
        await self.store.kv_put(namespace, key, value)
        self._wrote()

    async def kv_get(self, namespace: str, key: str) -> str | None:
        return await self.store.kv_get(namespace, key)

    async def kv_delete(self, namespace: str, key: str) -> bool:
        deleted = await self.store.kv_delete(namespace, key)
        self._wrote()
        return deleted

    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        return await self.store.kv_list(namespace)
