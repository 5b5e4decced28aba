"""Use-cases of the NameServer: what each request does, whatever transport carried it.

Each method maps to one RocketMQ request code (noted in its docstring). RocketMQ rules that need
more than one script call live here: cleaning a removed broker's topics, asking again with the
right keys when a script answers RETRY_KEYS, and the flags of the effective configuration;
REGISTER_BROKER's own (decoding, chunks, deltas) are in :mod:`namesrv.registry.registration`.
Every write still happens inside a Lua script.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from enum import Enum

import orjson

from namesrv.config import Settings
from namesrv.decode_budget import DecodeBudget
from namesrv.domain import routes
from namesrv.domain.codes import FLAG_UNIT, FLAG_UNIT_SUB, version_name
from namesrv.domain.errors import BadRequest, Disabled, TooLarge
from namesrv.domain.model import (
    MAX_NAME_LENGTH,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    RegisterBrokerRequest,
    RegisterBrokerResult,
    TopicRouteData,
    check_name,
    check_new_topic,
)
from namesrv.limits import utf8_length
from namesrv.protocol import render
from namesrv.protocol.body_delta import RegisterBodyDecoder
from namesrv.registry.console_facts import ConsoleFacts
from namesrv.registry.heal import RegistrationKeeper
from namesrv.registry.kv_tables import KvTables
from namesrv.registry.registration import BrokerRegistrar, Registration
from namesrv.registry.route_lookups import CachedRoute, Peeked, Routes, UncachedRoutes
from namesrv.registry.route_reader import RouteReader
from namesrv.store.registration_args import BodyFacts
from namesrv.store.registry_store import RegistryStore
from namesrv.store.script_args import KeysStatus, KvPutStatus, UnregisterStatus

log = logging.getLogger(__name__)
SWEEP_BATCH = 100


class CloseOutcome(Enum):
    """What a closed connection did to a broker registered over it."""

    DONE = "removed"
    FENCED = "kept: registered again since, over another connection or HTTP"
    GONE = "not removed: it had expired or was removed already"
    HELD = "kept: another open connection to the fleet holds it"


def chunked(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class RegistryService:
    def __init__(
        self,
        store: RegistryStore,
        settings: Callable[[], Settings],
        routes: Routes | None = None,
        *,
        count_registration: Callable[[str], None] = lambda result: None,
        count_limit: Callable[[str], None] = lambda limit: None,
        kv_tables: KvTables | None = None,
        count_heal: Callable[[str, int], None] = lambda outcome, n: None,
    ) -> None:
        self.store = store
        self.settings = settings
        # Route lookups: the worker's cache, or (by default) straight from Redis.
        self.lookups = routes or UncachedRoutes(RouteReader(store, settings).read_once)
        # Requests refused by a size limit, by the option's name.
        self.count_limit = count_limit
        self.kv_tables = kv_tables  # 219 from memory; None: every read goes to Redis
        # The last registration of every broker connected to this worker, for a heal.
        self.keeper = RegistrationKeeper(
            self.register_broker,
            max_bytes=settings().healKeepMaxBytes,
            count=count_heal,
        )
        first = settings()
        budget = DecodeBudget(
            first.decodeBudgetBytes, first.decodeWaitMillis / 1000, count_refusal=self._count_limit
        )
        self.registrar = BrokerRegistrar(
            store, settings, self.lookups, count_registration, budget, count_limit=self._count_limit
        )
        self.console = ConsoleFacts(store)  # the operations console's bounded reads

    def _count_limit(self, limit: str) -> None:
        self.count_limit(limit)  # looked up at each call: callers may replace count_limit

    @property
    def decode_budget(self) -> DecodeBudget:
        """Memory of request bodies being decoded, for both transports."""
        return self.registrar.budget

    def _wrote(self) -> None:
        self.lookups.note_local_write()

    # ---- 103 REGISTER_BROKER ----
    async def register_broker(
        self, req: RegisterBrokerRequest, facts: BodyFacts | None = None, kept: bytes | None = None
    ) -> tuple[RegisterBrokerResult | None, Registration | None]:
        """Returns (None, None) when refused (R7: "register broker failed"); see
        :meth:`BrokerRegistrar.register`."""
        return await self.registrar.register(req, facts, kept)

    @property
    def count_registration(self) -> Callable[[str], None]:
        """Called with each REGISTER_BROKER outcome (ok, refused, ignored), for both transports."""
        return self.registrar.count_registration

    @count_registration.setter
    def count_registration(self, count: Callable[[str], None]) -> None:
        self.registrar.count_registration = count

    @property
    def bodies_decoded(self) -> int:
        """REGISTER_BROKER bodies the registry needed to read."""
        return self.registrar.bodies_decoded

    @property
    def decoder(self) -> RegisterBodyDecoder:
        return self.registrar.decoder

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
        """Remove a broker address; False when fenced (a newer registration owns it, or none is
        live any more)."""
        status = await self._unregister(cluster, addr, broker_name, broker_id, fence_epoch, reason, "")
        return status is UnregisterStatus.DONE

    async def release_broker(self, registration: Registration, holder: str) -> CloseOutcome:
        """A remoting connection that registered the broker closed (``holder`` names it): the
        broker goes only when no other open connection to the fleet holds it, the epoch fence
        deciding otherwise."""
        reg = registration
        status = await self._unregister(
            reg.cluster, reg.addr, reg.broker_name, reg.broker_id, reg.epoch, "close", holder
        )
        return CloseOutcome[status.name]

    async def _unregister(
        self,
        cluster: str,
        addr: str,
        broker_name: str,
        broker_id: int | str,
        fence_epoch: int | None,
        reason: str,
        holder: str,
    ) -> UnregisterStatus:
        if not _storable(cluster, addr, broker_name):
            # never registered: nothing to remove, nothing to fence
            return UnregisterStatus.DONE if fence_epoch is None else UnregisterStatus.GONE
        status, _removed, pending = await self.store.unregister(
            cluster=cluster,
            addr=addr,
            broker_name=broker_name,
            broker_id=broker_id,
            fence_epoch=fence_epoch,
            reason=reason,
            holder=holder,
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
        if pending:
            await self.clean_broker_topics(broker_name)
        return status

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
            status, values = await self.store.delete_topic(topic, cluster or None, names)
            if status is not KeysStatus.RETRY_KEYS:
                self._wrote()
                return int(values[0])
            names = sorted(set(names) | set(values))
        raise BadRequest(f"topic {topic!r} kept changing while being deleted; try again")

    async def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> int:
        check_new_topic(topic)
        if not queue_datas:
            return 0
        written = await self.store.register_topic(
            topic, [(q.brokerName, render.queue_data_json(q), q.topicSysFlag) for q in queue_datas]
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

    def routes_answer_now(self) -> bool:
        """:meth:`cached_route` answers from memory now, without a catch-up."""
        return self.lookups.answers_now()

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

    async def broker_liveness(self) -> tuple[list[dict[str, object]], int]:
        """Each live broker address: heartbeat age and time left before expiry (ms, Redis clock),
        timeout, the worker that took its registration; and how many workers were seen."""
        now, live, deadlines, workers = await self.store.liveness()
        rows: list[dict[str, object]] = []
        for member, raw in sorted(live.items()):
            entry = orjson.loads(raw)
            timeout = int(entry.get("heartbeatTimeoutMillis", 0))
            deadline = deadlines.get(member)
            version = entry.get("version") if isinstance(entry.get("version"), int) else None
            rows.append(
                {
                    "member": member,
                    "brokerName": entry.get("brokerName"),
                    "brokerId": entry.get("brokerId"),
                    "timeoutMillis": timeout,
                    "heartbeatAgeMillis": None if deadline is None else int(now - (deadline - timeout)),
                    "expiresInMillis": None if deadline is None else int(deadline - now),
                    "via": entry.get("via"),
                    # the broker's MQVersion ordinal and its name; None (left out): registered over HTTP
                    "version": version,
                    "versionName": None if version is None else version_name(version),
                }
            )
        return rows, workers

    async def kv_namespaces(self) -> dict[str, int]:
        """Each KV namespace with the bytes it holds (for the operations console)."""
        return {ns: size for ns, size in sorted((await self.store.kv_sizes()).items()) if ns}

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
            status, values = await self.store.topics_by_cluster(cluster, names)
            if status is not KeysStatus.RETRY_KEYS:
                return sorted(values)
            names = values
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
        s = self.settings()
        outcome = await self.store.kv_put(namespace, key, value, s.kvNamespaceMaxBytes, s.kvMaxBytes)
        if outcome.status is KvPutStatus.NAMESPACE_FULL:
            self.count_limit("kvNamespaceMaxBytes")
            raise TooLarge(
                f"KV namespace {namespace[:100]!r} holds {outcome.namespace_bytes} bytes; this put would "
                f"pass its maximum of {s.kvNamespaceMaxBytes} (kvNamespaceMaxBytes): nothing stored",
                "kvNamespaceMaxBytes",
            )
        if outcome.status is KvPutStatus.KV_FULL:
            self.count_limit("kvMaxBytes")
            raise TooLarge(
                f"the KV config holds {outcome.total_bytes} bytes; this put would pass its maximum of "
                f"{s.kvMaxBytes} (kvMaxBytes): nothing stored",
                "kvMaxBytes",
            )
        self._wrote_kv(namespace)

    async def kv_get(self, namespace: str, key: str) -> str | None:
        if not _storable(namespace, key):
            return None  # no such entry can exist; answer as Java does, without asking Redis
        return await self.store.kv_get(namespace, key)

    async def kv_delete(self, namespace: str, key: str) -> bool:
        if not _storable(namespace, key):
            return False
        deleted = await self.store.kv_delete(namespace, key)
        self._wrote_kv(namespace)
        return deleted

    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        if not _storable(namespace):
            return None
        if self.kv_tables is not None:
            return await self.kv_tables.get(namespace)
        return await self.store.kv_list(namespace)

    def _wrote_kv(self, namespace: str) -> None:
        self._wrote()
        if self.kv_tables is not None:
            self.kv_tables.note_local_write(namespace)


def _storable(*names: str) -> bool:
    """Could these names have been stored? (Writes refuse longer ones: a lookup of such a name
    is answered "not found" at once, without sending the name to Redis or the route cache.)"""
    return all(len(n) <= MAX_NAME_LENGTH for n in names)
