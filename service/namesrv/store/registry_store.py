"""The route registry in Redis: one typed method per script, and the plain reads.

This is the only module that knows key names and the ARGV layout of each script (documented in
each script's header and in ``lua/README.md``). It speaks in strings and small records; the
RocketMQ rules that span several calls (chunking, retries with the right keys, cleanup after a
removal) live in :mod:`namesrv.registry.service`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from namesrv.domain.codes import ORDER_TOPIC_CONFIG
from namesrv.store.keyspace import Keyspace, live_member
from namesrv.store.redis_client import is_cluster, with_retry
from namesrv.store.scripts import ScriptRegistry

SCHEMA_VERSION = 1
RETRY_KEYS = -3


def _pairs(flat: Sequence[str]) -> dict[str, str]:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


@dataclass(frozen=True)
class HeaderOutcome:
    status: int  # 1 registered, 0 refused (R7), 2 ignored (R6), 3 body needed (nothing changed)
    epoch: int
    mode: int  # 0 no topic writes, 1 upsert all, 2 add missing only
    master_addr: str
    ha_server_addr: str
    order_config: dict[str, str] | None
    route_changed: bool = False  # what a route lookup returns changed (BrokerData, session, deadline)


@dataclass(frozen=True)
class TopicWrite:
    topic: str
    queue_data_json: str
    sys_flag: int


@dataclass(frozen=True)
class RouteSnapshot:
    queue_datas: list[str]
    broker_datas: list[str]
    filters: dict[str, str]
    mappings: dict[str, str]
    order_topic_conf: str | None
    now_ms: int  # the Redis clock when the snapshot was read
    valid_until_ms: int | None  # earliest deadline of the brokers shown (None: none has one)
    hidden_brokers: tuple[str, ...] = ()  # broker names with queues of the topic left out (expired)


class RegistryStore:
    def __init__(
        self,
        redis: Redis,
        keyspace: Keyspace,
        scripts: ScriptRegistry,
        events_max_len: int,
        worker_id: str,
        max_connections: int = 64,
    ) -> None:
        self.redis = redis
        self.k = keyspace
        self.scripts = scripts
        self.max_len = str(events_max_len)
        self.worker_id = worker_id
        # At most this many calls hold a pooled connection; the rest wait their turn. A full pool
        # would otherwise fail requests with "Too many connections" under load. A few connections
        # stay free for the change feed and start-up.
        self._gate = asyncio.Semaphore(max(1, max_connections - 8))

    async def _call(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        async with self._gate:
            return await with_retry(lambda: self.scripts.call(name, keys, args))

    async def _q(self, command: Callable[[], Awaitable[Any]]) -> Any:
        """A plain read (the client decodes replies to str)."""
        async with self._gate:
            return await with_retry(command)

    async def check_schema(self) -> None:
        """Record our data layout version; refuse to run against a newer one."""
        await self.redis.hsetnx(self.k.meta, "schema", SCHEMA_VERSION)
        found = int(await self.redis.hget(self.k.meta, "schema") or SCHEMA_VERSION)
        if found > SCHEMA_VERSION:
            raise RuntimeError(
                f"namespace {self.k.namespace!r} holds schema {found}; this worker "
                f"understands up to {SCHEMA_VERSION}: upgrade the worker"
            )

    # ---- registration ----
    async def register_header(
        self,
        *,
        cluster: str,
        addr: str,
        broker_name: str,
        broker_id: int,
        ha_addr: str,
        zone: str | None,
        timeout_ms: int,
        acting: bool | None,
        data_version_json: str,
        state_version: int,
        filters_json: str | None,
        topic_count: int,
        digest: str,
        token: str,
        return_order: bool,
        prune_leftovers: bool,
        body_hash: str = "",
    ) -> HeaderOutcome:
        k = self.k
        keys = [
            k.clusters,
            k.brokers,
            k.live,
            k.deadlines,
            k.dataversions,
            k.filters,
            k.pending,
            k.epoch,
            k.routever,
            k.events,
            k.bdigest,
            k.kvns,
            k.kv(ORDER_TOPIC_CONFIG),
            k.alive(cluster, addr),
            k.btopics(broker_name),
        ]
        args = [
            cluster,
            addr,
            broker_name,
            broker_id,
            ha_addr,
            zone or "",
            timeout_ms,
            "" if acting is None else ("true" if acting else "false"),
            data_version_json,
            state_version,
            "" if filters_json is None else filters_json,
            topic_count,
            digest,
            token,
            self.worker_id,
            self.max_len,
            "1" if return_order else "0",
            "1" if prune_leftovers else "0",
            body_hash,
        ]
        r = await self._call("registerBroker", keys, args)
        if int(r[0]) == 3:
            return HeaderOutcome(3, 0, 0, "", "", None)
        return HeaderOutcome(
            status=int(r[0]),
            epoch=int(r[1]),
            mode=int(r[2]),
            master_addr=r[3],
            ha_server_addr=r[4],
            order_config=_pairs(r[6]) if int(r[5]) else None,
            route_changed=bool(int(r[7])),
        )

    async def register_topics(
        self,
        *,
        cluster: str,
        addr: str,
        broker_name: str,
        token: str,
        chunks: Sequence[Sequence[TopicWrite]],
        removals: Sequence[str],
        mappings: Mapping[str, str],
    ) -> tuple[bool, int, int]:
        """Write the chunks, pipelined; removals and mappings ride with the final chunk.

        Returns (applied, upserted, removed); applied is False when a newer registration or an
        unregister fenced this one out (the rest of its chunks then change nothing either).
        """
        k = self.k
        fixed = [
            k.pending,
            k.topics,
            k.topicflags,
            k.btopics(broker_name),
            k.dataversions,
            k.bdigest,
            k.routever,
            k.events,
            k.live,
        ]
        member = live_member(cluster, addr)
        pieces = list(chunks) or [[]]

        def build(i: int, chunk: Sequence[TopicWrite]) -> tuple[list[str], list[Any]]:
            final = i == len(pieces) - 1
            rm = list(removals) if final else []
            mp = dict(mappings) if final else {}
            keys = (
                fixed
                + [k.topic(w.topic) for w in chunk]
                + [k.topic(t) for t in rm]
                + [k.mapping(t) for t in mp]
            )
            args: list[Any] = [
                member,
                broker_name,
                token,
                "1" if final else "0",
                len(chunk),
                len(rm),
                len(mp),
                self.max_len,
                i,
            ]
            for w in chunk:
                args += [w.topic, w.queue_data_json, w.sys_flag]
            args += rm
            for t, info in mp.items():
                args += [t, info]
            return keys, args

        async def run() -> list[Any]:
            if is_cluster(self.redis):
                # Redis Cluster refuses scripts in pipelines: one round trip per chunk.
                return [
                    await self.scripts.call("registerBrokerTopics", *build(i, c))
                    for i, c in enumerate(pieces)
                ]
            pipe = self.redis.pipeline(transaction=False)
            for i, chunk in enumerate(pieces):
                await self.scripts.call_in(pipe, "registerBrokerTopics", *build(i, chunk))
            result: list[Any] = await pipe.execute()
            return result

        async with self._gate:
            results = await with_retry(run)
        applied = all(int(r[0]) == 1 for r in results)
        return applied, sum(int(r[1]) for r in results), sum(int(r[2]) for r in results)

    # ---- removal ----
    def _removal_keys(self) -> list[str]:
        k = self.k
        return [
            k.clusters,
            k.brokers,
            k.live,
            k.deadlines,
            k.dataversions,
            k.filters,
            k.pending,
            k.pendingclean,
            k.routever,
            k.events,
        ]

    async def unregister(
        self,
        *,
        cluster: str,
        addr: str,
        broker_name: str,
        broker_id: int | str,
        fence_epoch: int | None,
        reason: str,
    ) -> tuple[int, bool, bool]:
        """Returns (status, removed, cleanup_pending); status -2 means fenced."""
        keys = self._removal_keys() + [self.k.alive(cluster, addr)]
        args = [
            cluster,
            addr,
            broker_name,
            broker_id,
            "" if fence_epoch is None else fence_epoch,
            reason,
            self.max_len,
            self.worker_id,
        ]
        r = await self._call("unregisterBroker", keys, args)
        return int(r[0]), bool(int(r[1])), bool(int(r[2]))

    async def expire(self, limit: int) -> tuple[int, bool, list[str]]:
        """Returns (expired, more_due, broker names needing cleanup)."""
        r = await self._call("expireBrokers", self._removal_keys(), [limit, self.max_len, self.worker_id])
        return int(r[0]), bool(int(r[1])), [str(n) for n in r[2:]]

    async def clean_topics(self, broker_name: str, topics: Sequence[str], final: bool) -> tuple[int, int]:
        k = self.k
        keys = [
            k.brokers,
            k.topics,
            k.topicflags,
            k.btopics(broker_name),
            k.bdigest,
            k.pendingclean,
            k.routever,
            k.events,
        ] + [k.topic(t) for t in topics]
        r = await self._call(
            "cleanBrokerTopics",
            keys,
            [broker_name, "1" if final else "0", self.max_len, len(topics), *topics],
        )
        return int(r[0]), int(r[1])

    async def pending_cleanups(self) -> list[str]:
        return sorted(await self._q(lambda: self.redis.smembers(self.k.pendingclean)))

    async def broker_topics(self, broker_name: str) -> list[str]:
        return sorted(await self._q(lambda: self.redis.smembers(self.k.btopics(broker_name))))

    # ---- liveness ----
    async def heartbeat(self, cluster: str, addr: str, source: str) -> tuple[bool, str | None]:
        k = self.k
        keys = [k.live, k.deadlines, k.dataversions, k.events, k.alive(cluster, addr)]
        r = await self._call(
            "brokerHeartbeat", keys, [live_member(cluster, addr), self.max_len, source, self.worker_id]
        )
        return bool(int(r[0])), (r[1] or None)

    # ---- admin writes ----
    async def change_perm(self, script: str, broker_name: str, topics: Sequence[str]) -> int:
        k = self.k
        keys = [k.routever, k.events] + [k.topic(t) for t in topics]
        r = await self._call(script, keys, [broker_name, self.max_len, len(topics), *topics])
        return int(r[0])

    async def delete_topic(self, topic: str, cluster: str | None, broker_names: Sequence[str]) -> list[Any]:
        k = self.k
        keys = [k.topics, k.topicflags, k.clusters, k.bdigest, k.routever, k.events, k.topic(topic)] + [
            k.btopics(b) for b in broker_names
        ]
        r: list[Any] = await self._call(
            "deleteTopic", keys, [topic, cluster or "", self.max_len, len(broker_names), *broker_names]
        )
        return r

    async def topic_broker_names(self, topic: str) -> list[str]:
        return sorted(await self._q(lambda: self.redis.hkeys(self.k.topic(topic))))

    async def register_topic(self, topic: str, queues: Sequence[tuple[str, str, int]]) -> int:
        k = self.k
        keys = [k.brokers, k.topics, k.topicflags, k.bdigest, k.routever, k.events, k.topic(topic)] + [
            k.btopics(b) for b, _, _ in queues
        ]
        args: list[Any] = [topic, self.max_len, len(queues)]
        for b, qd, flag in queues:
            args += [b, qd, flag]
        r = await self._call("registerTopic", keys, args)
        return int(r[0])

    async def kv_put(self, namespace: str, key: str, value: str | None) -> None:
        k = self.k
        await self._call(
            "kvPut",
            [k.kvns, k.kv(namespace), k.events],
            [namespace, key, value or "", "0" if value is None else "1", self.max_len],
        )

    async def kv_delete(self, namespace: str, key: str) -> bool:
        k = self.k
        r = await self._call("kvDelete", [k.kvns, k.kv(namespace), k.events], [namespace, key, self.max_len])
        return bool(int(r[0]))

    async def update_config(self, changes: Mapping[str, str], changes_json: str) -> int:
        args: list[Any] = [self.max_len, changes_json]
        for name, value in changes.items():
            args += [name, value]
        r = await self._call("updateConfig", [self.k.config, self.k.events], args)
        return int(r[0])

    # ---- reads ----
    async def route(self, topic: str, with_order: bool) -> RouteSnapshot:
        """One snapshot; empty lists (found=False) mean TOPIC_NOT_EXIST."""
        k = self.k
        keys = [k.topic(topic), k.brokers, k.deadlines, k.filters, k.mapping(topic), k.kv(ORDER_TOPIC_CONFIG)]
        r = await self._call("getRouteInfo", keys, [topic, "1" if with_order else "0"])
        return RouteSnapshot(
            queue_datas=list(r[1]) if int(r[0]) else [],
            broker_datas=list(r[2]) if int(r[0]) else [],
            filters=_pairs(r[3]),
            mappings=_pairs(r[4]),
            order_topic_conf=r[5] or None,
            now_ms=int(r[6]),
            valid_until_ms=int(r[7]) if r[7] else None,
            hidden_brokers=tuple(r[8]),
        )

    async def brokers(self, names: Sequence[str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
        """(brokerName -> BrokerData JSON, cluster -> JSON array); clusters only when names is None."""
        k = self.k
        args = ["1"] if names is None else ["0", *names]
        r = await self._call("getBrokers", [k.brokers, k.clusters, k.deadlines], args)
        return _pairs(r[0]), _pairs(r[1])

    async def topics_by_cluster(self, cluster: str, broker_names: Sequence[str]) -> list[Any]:
        k = self.k
        keys = [k.clusters] + [k.btopics(b) for b in broker_names]
        r: list[Any] = await self._call(
            "getTopicsByCluster", keys, [cluster, len(broker_names), *broker_names]
        )
        return r

    async def all_topics(self) -> list[str]:
        return sorted(await self._q(lambda: self.redis.smembers(self.k.topics)))

    async def topic_flags(self) -> dict[str, int]:
        raw = await self._q(lambda: self.redis.hgetall(self.k.topicflags))
        return {str(t): int(f) for t, f in raw.items()}

    async def kv_get(self, namespace: str, key: str) -> str | None:
        value = await self._q(lambda: self.redis.hget(self.k.kv(namespace), key))
        return None if value is None else str(value)

    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        """The namespace's table, or None when the namespace does not exist (one snapshot)."""

        async def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=True)
            pipe.sismember(self.k.kvns, namespace)
            pipe.hgetall(self.k.kv(namespace))
            result: list[Any] = await pipe.execute()
            return result

        exists, table = await with_retry(read)
        return dict(table) if exists else None

    async def config_overrides(self) -> dict[str, str]:
        raw = await self._q(lambda: self.redis.hgetall(self.k.config))
        return {str(k): str(v) for k, v in raw.items()}

    async def data_version(self, cluster: str, addr: str) -> str | None:
        value = await self._q(lambda: self.redis.hget(self.k.dataversions, live_member(cluster, addr)))
        return None if value is None else str(value)

    async def server_time_ms(self) -> int:
        seconds, micros = await self._q(lambda: self.redis.time())
        return int(seconds) * 1000 + int(micros) // 1000

    async def route_version(self) -> int:
        return int(await self._q(lambda: self.redis.get(self.k.routever)) or 0)
