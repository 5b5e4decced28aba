"""The route registry in Redis: one typed method per script, and the plain reads.

The registry's scripts are called only here (the change feed polls ``readChanges`` itself), each
through its call object (:mod:`namesrv.store.script_call`: KEYS, ARGV and the decoded reply next
to each other, in :mod:`namesrv.store.registration_args` and :mod:`namesrv.store.script_args`).
This module adds the deadlines, the Redis health gate and replicated writes, and speaks in strings
and small records; the RocketMQ rules that span several calls (chunking, retries with the right
keys, cleanup after a removal) live in :mod:`namesrv.registry.service`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

from redis.asyncio import Redis

from namesrv.aio import within
from namesrv.domain.errors import StoreUnavailable, WriteNotReplicated
from namesrv.store.health import RedisHealth
from namesrv.store.keyspace import Keyspace, live_member
from namesrv.store.redis_client import with_retry
from namesrv.store.registration_args import (
    HeaderOutcome,
    RegisterBrokerArgs,
    RegisterTopicsArgs,
    TopicsOutcome,
)
from namesrv.store.script_args import (
    CleanTopicsArgs,
    DeleteTopicArgs,
    ExpireArgs,
    ExpireOutcome,
    GetBrokersArgs,
    HeartbeatArgs,
    KeysOutcome,
    KvDeleteArgs,
    KvPutArgs,
    KvPutOutcome,
    NoteWorkerArgs,
    PermMode,
    RegisterTopicArgs,
    RouteInfoArgs,
    RouteSnapshot,
    SetPermArgs,
    TopicsByClusterArgs,
    UnregisterArgs,
    UnregisterOutcome,
    UpdateConfigArgs,
)
from namesrv.store.script_call import CallContext, ScriptCall
from namesrv.store.script_pipe import LANES, ScriptPipe
from namesrv.store.scripts import ScriptRegistry

__all__ = ["SCHEMA_VERSION", "HeaderOutcome", "RegistryStore", "RouteSnapshot"]
R = TypeVar("R")
T = TypeVar("T")
# Seconds a call may take beyond the deadline, for work no client waits on: set by a task for
# every call it makes (a heal's replay, registry/heal.py); 0 for requests.
redis_patience: ContextVar[float] = ContextVar("redis_patience", default=0.0)

SCHEMA_VERSION = 1
UNBOUNDED_S = 86_400.0  # a store without a timeout (tests, tools) still gives each call a deadline


class RegistryStore:
    def __init__(
        self,
        redis: Redis,
        keyspace: Keyspace,
        scripts: ScriptRegistry,
        events_max_len: int,
        worker_id: str,
        max_connections: int = 64,
        *,
        health: RedisHealth | None = None,
        timeout_s: float | None = None,
        count_failure: Callable[[], None] = lambda: None,
        write_replicas: int = 0,
        write_replica_timeout_ms: int = 500,
        count_unreplicated: Callable[[], None] = lambda: None,
    ) -> None:
        self.redis = redis
        self.k = keyspace
        self.scripts = scripts
        self.max_len = str(events_max_len)
        self.worker_id = worker_id
        self.ctx = CallContext(keyspace, self.max_len, worker_id)
        # Route reads share a few connections of their own (store/script_pipe.py); not on a
        # Cluster client, whose connections belong to its nodes.
        self.pipe = ScriptPipe(redis, scripts) if ScriptPipe.supports(redis) else None
        # At most this many calls hold a pooled connection; the rest wait their turn. A full pool
        # would otherwise fail requests with "Too many connections" under load. A few connections
        # stay free for the change feed and start-up, and the route reads' own.
        self._gate = asyncio.Semaphore(max(1, max_connections - 8 - (LANES if self.pipe else 0)))
        self.health = health
        self.timeout_s = timeout_s
        self._count_failure = count_failure  # a call that failed for good (namesrv_redis_errors_total)
        # A write a client is told succeeded must be on this many replicas first (redisWriteReplicas;
        # -1: every replica the Sentinels consider up, as note_replicas_up last heard).
        self.write_replicas = write_replicas
        self.replicas_up = 1
        self.write_replica_timeout_ms = write_replica_timeout_ms
        self._count_unreplicated = count_unreplicated

    async def _bounded(self, command: Callable[[], Awaitable[T]], slack_s: float = 0.0) -> T:
        """``command`` through the pool's gate, bounded by :meth:`_held_to_deadline`."""

        async def send(limit_s: float | None) -> T:
            if limit_s is None:
                result: T = await self._gated(command)
                return result
            return await within(limit_s, self._gated(command))

        return await self._held_to_deadline(send, slack_s)

    async def _held_to_deadline(self, send: Callable[[float | None], Awaitable[T]], slack_s: float) -> T:
        """One Redis call (with its brief retries), never longer than the deadline: a request
        fails fast when Redis is known to be out, and within ``timeout_s`` (plus ``slack_s``, the
        time the call may wait on replicas) when it stalls. ``send(limit_s)`` makes the call and
        raises TimeoutError once ``limit_s`` has passed (None: the store has no deadline)."""
        try:
            health = self.health
            if health is not None and not health.reachable:
                raise StoreUnavailable(f"Redis unavailable: {health.reason}")
            sent_at = time.monotonic()
            limit_s = None if self.timeout_s is None else self.timeout_s + slack_s + redis_patience.get()
            try:
                result = await send(limit_s)
            except TimeoutError:
                if limit_s is None:
                    raise
                raise StoreUnavailable(
                    f"Redis unavailable: no answer within {limit_s * 1000:.0f} ms"
                ) from None
            if health is not None:
                health.note_answer(sent_at)
            return result
        except StoreUnavailable:
            self._count_failure()
            raise

    async def _gated(self, command: Callable[[], Awaitable[Any]]) -> Any:
        async with self._gate:
            return await with_retry(command)

    async def _piped(self, call: ScriptCall[R]) -> R:
        """A read through :attr:`pipe`, held to the same deadline, health gate and retries as
        :meth:`_bounded`; the deadline covers the retries too."""
        pipe = self.pipe
        if pipe is None:
            return await self._run(call)
        keys, argv = call.keys(self.k), call.argv(self.ctx)

        async def send(limit_s: float | None) -> Any:
            deadline = time.monotonic() + (UNBOUNDED_S if limit_s is None else limit_s)
            return await with_retry(lambda: pipe.call(call.SCRIPT, keys, argv, deadline - time.monotonic()))

        return call.decode(await self._held_to_deadline(send, 0.0))

    async def close(self) -> None:
        if self.pipe is not None:
            await self.pipe.close()

    async def _run(self, call: ScriptCall[R]) -> R:
        """A script call no client is told of on its own: reads, sweeps, cleanups, a
        registration's chunks before its last (a later waited write covers them, replicas
        applying writes in order)."""
        return await self._bounded(lambda: self.scripts.run(call, self.ctx))

    async def _write(self, call: ScriptCall[R], *, acked: bool = True) -> R:
        """A script call whose success a client is told of (``acked``): with redisWriteReplicas,
        answered only once that many replicas hold it, so a Sentinel failover cannot lose it."""
        replicas = self.write_replicas
        if not replicas or not acked:
            return await self._run(call)
        if replicas < 0:
            replicas = self.replicas_up
        timeout_ms = self.write_replica_timeout_ms
        reply, held = await self._bounded(
            lambda: self.scripts.run_replicated(call, self.ctx, replicas, timeout_ms), timeout_ms / 1000
        )
        if held < replicas:
            self._count_unreplicated()
            raise WriteNotReplicated(
                f"write not confirmed by {replicas} Redis replica(s) within {timeout_ms} ms "
                f"(redisWriteReplicas; {held} did): the master has it, a failover may lose it; retry"
            )
        return reply

    def note_replicas_up(self, count: int) -> None:
        """How many replicas the Sentinels consider up; never below 1, so a master left without
        replicas fails writes instead of answering writes a failover would lose."""
        self.replicas_up = max(1, count)

    async def _q(self, command: Callable[[], Awaitable[Any]]) -> Any:
        """A plain read (the client decodes replies to str)."""
        return await self._bounded(command)

    async def check_schema(self) -> None:
        """Record our data layout version; refuse to run against a newer one. Called when Redis
        just came back with a new data set, on connections that Redis may have reset: retried."""
        await with_retry(lambda: self.redis.hsetnx(self.k.meta, "schema", SCHEMA_VERSION))
        found = int(await with_retry(lambda: self.redis.hget(self.k.meta, "schema")) or SCHEMA_VERSION)
        if found > SCHEMA_VERSION:
            raise RuntimeError(
                f"namespace {self.k.namespace!r} holds schema {found}; this worker "
                f"understands up to {SCHEMA_VERSION}: upgrade the worker"
            )

    # ---- registration ----
    async def register_header(self, args: RegisterBrokerArgs) -> HeaderOutcome:
        return await self._write(args)

    async def register_topics(self, chunk: RegisterTopicsArgs) -> TopicsOutcome:
        """Write one chunk (removals and mappings ride with the final one).

        One EVALSHA, not a pipeline: redis-py asks ``SCRIPT EXISTS`` before every pipeline that
        holds a script, a second round trip per chunk that the event loop can only take up
        between two chunk builds, and Redis sat idle for about a third of a new 10,000-topic
        broker's writes.

        The status is FENCED when a newer registration or an unregister fenced this one out (the
        rest of its chunks then change nothing either), DELTA_REFUSED when a delta chunk found
        Redis no longer holding what its earlier body wrote."""
        return await self._write(chunk, acked=chunk.final)

    # ---- removal ----
    async def unregister(
        self,
        *,
        cluster: str,
        addr: str,
        broker_name: str,
        broker_id: int | str,
        fence_epoch: int | None,
        reason: str,
        holder: str = "",
    ) -> UnregisterOutcome:
        return await self._write(
            UnregisterArgs(cluster, addr, broker_name, broker_id, fence_epoch, reason, holder)
        )

    async def expire(self, limit: int) -> ExpireOutcome:
        return await self._run(ExpireArgs(limit))

    async def clean_topics(self, broker_name: str, topics: Sequence[str], final: bool) -> tuple[int, int]:
        """(queues removed, queues whose write bit was cleared)"""
        return await self._run(CleanTopicsArgs(broker_name, topics, final))

    async def pending_cleanups(self) -> list[str]:
        return sorted(await self._q(lambda: self.redis.smembers(self.k.pendingclean)))

    async def broker_topics(self, broker_name: str) -> list[str]:
        return sorted(await self._q(lambda: self.redis.smembers(self.k.btopics(broker_name))))

    # ---- liveness ----
    async def heartbeat(self, cluster: str, addr: str, source: str) -> tuple[bool, str | None]:
        return await self._write(HeartbeatArgs(cluster, addr, source))

    async def note_worker(self, running: bool) -> int:
        """This worker runs (or stops); returns how many workers run."""
        return await self._run(NoteWorkerArgs(running))

    # ---- admin writes ----
    async def change_perm(self, broker_name: str, topics: Sequence[str], *, wipe: bool) -> int:
        """WIPE (clear the write bit) or ADD (perm 6) on the broker's queue in each topic; returns
        how many of the topics hold one."""
        return await self._write(SetPermArgs(broker_name, topics, PermMode.WIPE if wipe else PermMode.ADD))

    async def delete_topic(self, topic: str, cluster: str | None, broker_names: Sequence[str]) -> KeysOutcome:
        return await self._write(DeleteTopicArgs(topic, cluster, broker_names))

    async def topic_broker_names(self, topic: str) -> list[str]:
        return sorted(await self._q(lambda: self.redis.hkeys(self.k.topic(topic))))

    async def register_topic(self, topic: str, queues: Sequence[tuple[str, str, int]]) -> int:
        return await self._write(RegisterTopicArgs(topic, queues))

    async def kv_put(
        self, namespace: str, key: str, value: str | None, namespace_max: int, total_max: int
    ) -> KvPutOutcome:
        return await self._write(KvPutArgs(namespace, key, value, namespace_max, total_max))

    async def kv_delete(self, namespace: str, key: str) -> bool:
        return await self._write(KvDeleteArgs(namespace, key))

    async def update_config(self, changes: Mapping[str, str], changes_json: str) -> int:
        return await self._write(UpdateConfigArgs(changes, changes_json))

    # ---- reads ----
    async def route(self, topic: str, with_order: bool, for_cache: bool = True) -> RouteSnapshot:
        """One snapshot; empty lists mean TOPIC_NOT_EXIST. ``for_cache``: the reader keeps the
        route, so it needs each address's deadline (``RouteSnapshot.deadlines``)."""
        return await self._piped(RouteInfoArgs(topic, with_order, for_cache))

    async def brokers(self, names: Sequence[str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
        """(brokerName -> BrokerData JSON, cluster -> JSON array); clusters only when names is None."""
        return await self._run(GetBrokersArgs(names))

    async def topics_by_cluster(self, cluster: str, broker_names: Sequence[str]) -> KeysOutcome:
        return await self._run(TopicsByClusterArgs(cluster, broker_names))

    async def all_topics(self) -> list[str]:
        return sorted(await self._q(lambda: self.redis.smembers(self.k.topics)))

    async def topic_flags(self) -> dict[str, int]:
        raw = await self._q(lambda: self.redis.hgetall(self.k.topicflags))
        return {str(t): int(f) for t, f in raw.items()}

    async def kv_get(self, namespace: str, key: str) -> str | None:
        value = await self._q(lambda: self.redis.hget(self.k.kv(namespace), key))
        return None if value is None else str(value)

    async def kv_sizes(self) -> dict[str, int]:
        """Bytes of each KV namespace as accounted ('' is the whole KV's)."""
        raw = await self._q(lambda: self.redis.hgetall(self.k.kvbytes))
        return {str(k): int(v) for k, v in raw.items()}

    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        """The namespace's table, or None when the namespace does not exist (one snapshot)."""

        async def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=True)
            pipe.sismember(self.k.kvns, namespace)
            pipe.hgetall(self.k.kv(namespace))
            result: list[Any] = await pipe.execute()
            return result

        exists, table = await self._bounded(read)
        return dict(table) if exists else None

    async def _pipelined(self, queue: Callable[[Any, Any], object], items: Sequence[Any]) -> list[Any]:
        """One non-transactional pipeline of ``queue(pipe, item)`` for every item: one round trip."""

        async def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)
            for item in items:
                queue(pipe, item)
            return list(await pipe.execute())

        return await self._bounded(read) if items else []

    async def broker_topic_sets(self, broker_names: Sequence[str]) -> list[list[str]]:
        """The topics each broker name has queues in (``{ns}:btopics:<name>``), in one round trip."""
        replies = await self._pipelined(lambda pipe, name: pipe.smembers(self.k.btopics(name)), broker_names)
        return [sorted(str(t) for t in members) for members in replies]

    async def queues_of(self, pairs: Sequence[tuple[str, str]]) -> list[str | None]:
        """The QueueData JSON of each (topic, broker name), None where it has none: one round trip."""
        replies = await self._pipelined(lambda pipe, pair: pipe.hget(self.k.topic(pair[0]), pair[1]), pairs)
        return [None if v is None else str(v) for v in replies]

    async def topic_queues(self, topics: Sequence[str]) -> list[dict[str, str]]:
        """Each topic's queues (broker name -> QueueData JSON; empty: no such topic), one round trip."""
        replies = await self._pipelined(lambda pipe, topic: pipe.hgetall(self.k.topic(topic)), topics)
        return [{str(k): str(v) for k, v in q.items()} for q in replies]

    async def config_overrides(self) -> dict[str, str]:
        raw = await self._q(lambda: self.redis.hgetall(self.k.config))
        return {str(k): str(v) for k, v in raw.items()}

    async def data_version(self, cluster: str, addr: str) -> str | None:
        value = await self._q(lambda: self.redis.hget(self.k.dataversions, live_member(cluster, addr)))
        return None if value is None else str(value)

    async def liveness(self) -> tuple[int, dict[str, str], dict[str, float], int]:
        """Redis time (ms), the live table, each member's deadline (ms), and how many workers
        noted themselves: one snapshot (MULTI), for the operations console."""

        async def read() -> list[Any]:
            pipe = self.redis.pipeline(transaction=True)
            pipe.time()
            pipe.hgetall(self.k.live)
            pipe.zrange(self.k.deadlines, 0, -1, withscores=True)
            pipe.hlen(self.k.workers)
            return list(await pipe.execute())

        (seconds, micros), live, deadlines, workers = await self._q(read)
        now = int(seconds) * 1000 + int(micros) // 1000
        return (
            now,
            {str(k): str(v) for k, v in live.items()},
            {str(m): float(d) for m, d in deadlines},
            int(workers),
        )

    async def server_time_ms(self) -> int:
        seconds, micros = await self._q(lambda: self.redis.time())
        return int(seconds) * 1000 + int(micros) // 1000

    async def route_version(self) -> int:
        return int(await self._q(lambda: self.redis.get(self.k.routever)) or 0)
