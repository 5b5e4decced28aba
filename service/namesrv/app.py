"""The composition root: ``create_app(settings)`` builds one worker.

Each resource has its own cleanup context, set up in order and torn down in reverse:
Redis client (embedded server or external) -> registry (script library, store, route lookups,
change feed, the Redis link brought up in the background) -> expiry sweeper -> extra contexts (the
remoting listener). A worker holds no route state.

Nothing here waits for Redis: the listeners come up at once, ``/livez`` answers, ``/readyz`` says
what is missing, and requests that need Redis fail fast until the link is up. Only an error that
waiting cannot fix (a bad URL, wrong credentials, a Redis too old) stops the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Callable, Mapping

from aiohttp import web
from redis.exceptions import RedisError

from namesrv import allocator
from namesrv.aio import cancel_and_wait, raise_if_cancelling, within
from namesrv.config import Settings
from namesrv.domain.errors import StoreUnavailable
from namesrv.events.budget import events_budget_ctx
from namesrv.http.api import setup_routes
from namesrv.http.middleware import PARSER_MAX_LINE_BYTES, error_middleware
from namesrv.keys import (
    AUTHORIZER,
    FEED,
    HEALTH,
    METRICS,
    REDIS,
    REMOTING,
    SCRIPTS,
    SERVICE,
    STORE,
    WATCH,
    WORKER,
)
from namesrv.metrics import Metrics
from namesrv.registry.changefeed import ChangeFeed
from namesrv.registry.freshness_probe import FreshnessProbe
from namesrv.registry.kv_tables import KvTables
from namesrv.registry.route_cache import RouteCache
from namesrv.registry.route_lookups import Routes, UncachedRoutes
from namesrv.registry.route_reader import RouteReader
from namesrv.registry.service import RegistryService
from namesrv.registry.watch import WatchHub
from namesrv.remoting.context import HandlerContext
from namesrv.remoting.server import RemotingServer
from namesrv.security.http_auth import acl_middleware
from namesrv.security.reload import security_ctx
from namesrv.store.changelog import EventKind
from namesrv.store.embedded import EmbeddedRedis
from namesrv.store.health import RedisHealth
from namesrv.store.keyspace import Keyspace
from namesrv.store.redis_client import (
    check_server,
    close_client,
    describe,
    follow_sentinel_master,
    is_fatal,
    make_client,
)
from namesrv.store.registry_store import RegistryStore
from namesrv.store.scripts import ScriptRegistry
from namesrv.tls import TLS, server_tls, tls_watch_ctx
from namesrv.worker import WorkerState

log = logging.getLogger(__name__)
CleanupContext = Callable[[web.Application], contextlib.AbstractAsyncContextManager[None]]
BRING_UP_RETRY_MAX_S = 2.0
WORKER_BEAT_S = 1.0  # noteWorker: ten beats within unregisterBroker's window (WORKER_WINDOW_MS)


async def redis_ctx(app: web.Application) -> AsyncIterator[None]:
    worker = app[WORKER]
    embedded: EmbeddedRedis | None = None
    url = worker.base.redisUrl
    if not url:
        embedded = EmbeddedRedis(worker.base.dataDir)
        url = await embedded.start()
    worker.redis_url = url
    log.info("registry in Redis at %s", url)  # the log formatter masks a password in it
    try:
        app[REDIS] = make_client(url, max_connections=worker.base.redisMaxConnections)
        app[HEALTH] = RedisHealth()
        try:
            yield
        finally:
            await close_client(app[REDIS])
    finally:
        if embedded:
            await embedded.stop()


class WorkerConfigFollower:
    """Keeps the fleet-wide config overrides and the schema mark current (a FeedListener)."""

    def __init__(self, store: RegistryStore, worker: WorkerState) -> None:
        self.store = store
        self.worker = worker

    async def on_event(self, kind: str, fields: Mapping[str, str]) -> None:
        if kind == EventKind.CONFIG:
            self.worker.apply_overrides(await self.store.config_overrides())

    async def on_reset(self, reason: str) -> None:
        # A new data set: mark its layout, and drop overrides it no longer holds.
        await self.store.check_schema()
        self.worker.apply_overrides(await self.store.config_overrides())

    def on_recovered(self, since: float) -> None:
        pass


async def bring_up(app: web.Application) -> None:
    """Connect to Redis, load the scripts, check the data layout, read the fleet config; retry
    until Redis answers (logging once per distinct reason), stop the worker if it never can."""
    worker, redis, store, scripts = app[WORKER], app[REDIS], app[STORE], app[SCRIPTS]
    where = describe(worker.redis_url)
    delay, last_reason = 0.05, ""

    async def attempt() -> None:
        if await check_server(redis) >= (7, 0):
            scripts.declare_master_only()
        await scripts.preload()
        await store.check_schema()
        worker.apply_overrides(await store.config_overrides())

    while True:
        raise_if_cancelling()
        try:
            await within(max(2.0, worker.base.redisTimeoutMillis / 1000), attempt())
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # StoreUnavailable: the store's calls fail fast until the change feed has seen Redis
            # answer, which may come a moment after this task's own first PING.
            if is_fatal(exc) or not isinstance(exc, RedisError | OSError | TimeoutError | StoreUnavailable):
                worker.fail(f"Redis at {where}: {type(exc).__name__}: {exc}")
                return
            reason = waiting_reason(exc)
            if reason != last_reason:
                log.warning(
                    "waiting for Redis at %s (%s); retrying every %.1f s at most",
                    where,
                    reason,
                    BRING_UP_RETRY_MAX_S,
                )
                last_reason = reason
            await asyncio.sleep(delay)
            delay = min(delay * 2, BRING_UP_RETRY_MAX_S)
            continue
        log.info(
            "connected to Redis at %s; loaded %d Lua scripts, bundle %s",
            where,
            len(scripts.scripts),
            scripts.bundle_hash,
        )
        worker.scripts_loaded = True
        worker.linked.set()
        return


def waiting_reason(exc: BaseException) -> str:
    """The cause to log while waiting for Redis: the store's fast-fail repeats the connection error
    the change feed saw, which must not count as a new reason (one line per state change)."""
    if isinstance(exc, StoreUnavailable):
        return str(exc).removeprefix("Redis unavailable: ")
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def route_lookups(settings: Settings, reader: RouteReader, feed: ChangeFeed) -> Routes:
    if not settings.routeCacheEnabled:
        catch_up_s = settings.redisTimeoutMillis / 1000
        uncached = UncachedRoutes(
            reader.read_once, heal_s=settings.healWindowSeconds, fresh=lambda: feed.wait_fresh(catch_up_s)
        )
        feed.subscribe(uncached)
        return uncached
    cache = RouteCache(
        reader.read,
        feed,
        staleness_s=settings.routeCacheStalenessMillis / 1000,
        outage_s=settings.routeCacheOutageSeconds,
        catch_up_s=settings.redisTimeoutMillis / 1000,
        negative_s=settings.routeNegativeCacheMillis / 1000,
        max_entries=settings.routeCacheMaxEntries,
        refresh_s=settings.routeCacheRefreshSeconds,
        heal_s=settings.healWindowSeconds,
        view=reader.view,
    )
    feed.subscribe(cache)
    return cache


async def registry_ctx(app: web.Application) -> AsyncIterator[None]:
    worker, metrics, health = app[WORKER], app[METRICS], app[HEALTH]
    base = worker.base

    def observe(script: str, seconds: float) -> None:
        metrics.script_latency.labels(script).observe(seconds)

    scripts = ScriptRegistry(app[REDIS], observe=observe)
    timeout_s = base.redisTimeoutMillis / 1000
    store = RegistryStore(
        app[REDIS],
        Keyspace(base.namespace),
        scripts,
        events_max_len=base.eventsMaxLen,
        worker_id=worker.worker_id,
        max_connections=base.redisMaxConnections,
        health=health,
        timeout_s=timeout_s,
        count_failure=metrics.redis_errors.inc,
        write_replicas=base.redisWriteReplicas,
        write_replica_timeout_ms=base.redisWriteReplicaTimeoutMillis,
        count_unreplicated=metrics.unreplicated_writes.inc,
    )
    staleness_s = base.routeCacheStalenessMillis / 1000
    # With a route cache the feed must complete a read well within the staleness bound, idle or
    # not: it polls every quarter of the bound (a few cheap script calls per second), and calls
    # Redis stalled once a poll is outstanding for half of it.
    poll_interval = staleness_s / 4 if base.routeCacheEnabled else 0.25
    feed = ChangeFeed(
        scripts,
        store.k,
        health=health,
        poll_interval=poll_interval,
        timeout_s=timeout_s,
        # never below 50 ms: a long script (a registration chunk) must not look like a stall
        stall_s=max(staleness_s / 2, 0.05),
        on_reset_count=lambda reason: metrics.redis_resets.labels(reason).inc(),
        on_loop_lag=metrics.loop_lag.labels().observe,
        # the poll thread's own connection, made on that thread
        poll_client=lambda: make_client(worker.redis_url, max_connections=2),
        probe=FreshnessProbe(worker.redis_url, base.namespace, interval=poll_interval, timeout_s=timeout_s)
        if base.freshnessProbeEnabled
        else None,
    )
    reader = RouteReader(store, worker.current)
    lookups = route_lookups(base, reader, feed)
    feed.subscribe(WorkerConfigFollower(store, worker))
    kv_tables = KvTables(store.kv_list, feed, staleness_s=staleness_s, catch_up_s=timeout_s)
    feed.subscribe(kv_tables)
    service = RegistryService(
        store,
        worker.current,
        lookups,
        count_registration=lambda result: metrics.registrations.labels(result).inc(),
        count_limit=lambda limit: metrics.limit_refusals.labels(limit).inc(),
        kv_tables=kv_tables,
        count_heal=lambda outcome, n: metrics.heal_replays.labels(outcome).inc(n),
    )
    feed.subscribe(service.keeper)  # after the route cache: it keeps its routes, then the replays start
    # Last: watchers told of a change re-read routes the cache has already dropped.
    watch_hub = WatchHub(lambda: feed.last_id, max_watchers=base.watchMaxWatchers)
    feed.subscribe(watch_hub)
    app[WATCH] = watch_hub
    if isinstance(lookups, RouteCache):
        metrics.watch_route_cache(lookups)
    metrics.watch_decode_budget(service.decode_budget)
    service.decode_budget.on_idle = allocator.trim_soon
    metrics.watch_worker(worker, health)
    metrics.watch_change_feed(feed)
    app[SCRIPTS], app[STORE], app[SERVICE], app[FEED] = scripts, store, service, feed
    starting = asyncio.create_task(bring_up(app), name="redis-bring-up")
    # Twice per staleness bound (one cheap SENTINEL MASTERS each): workers move to a promoted
    # replica within half the bound of one another, so while they move they disagree for less
    # than the bound allows.
    following = asyncio.create_task(
        follow_sentinel_master(
            app[REDIS],
            max(staleness_s / 2, 0.05),
            on_replicas=store.note_replicas_up if base.redisWriteReplicas < 0 else None,
        ),
        name="sentinel-master",
    )
    await feed.start()
    lookups.start()
    try:
        yield
    finally:
        watch_hub.close()  # SSE streams end, so the server's shutdown does not wait for them
        await cancel_and_wait(following)
        await cancel_and_wait(starting)
        await lookups.close()
        await service.keeper.close()
        await feed.stop()
        await store.close()


async def sweeper_ctx(app: web.Application) -> AsyncIterator[None]:
    service, worker, metrics, health = app[SERVICE], app[WORKER], app[METRICS], app[HEALTH]

    async def loop() -> None:
        # Workers start at different times; jitter keeps their sweeps from lining up anyway.
        await asyncio.sleep(random.uniform(0, worker.settings.scanNotActiveBrokerInterval / 1000))
        failing = False
        while True:
            raise_if_cancelling()
            if worker.scripts_loaded and health.reachable:
                try:
                    expired = await service.sweep()
                    if expired:
                        metrics.expired.inc(expired)
                        log.info("sweep removed %d expired broker(s)", expired)
                    failing = False
                except asyncio.CancelledError:
                    raise
                except StoreUnavailable as exc:
                    if not failing:  # the feed reports the outage itself; say it once here
                        log.warning("expiry sweep skipped: %s", exc.remark)
                    failing = True
                except Exception:
                    log.exception("expiry sweep failed; will retry")
            await asyncio.sleep(worker.settings.scanNotActiveBrokerInterval / 1000)

    task = asyncio.create_task(loop(), name="sweeper")
    try:
        yield
    finally:
        await cancel_and_wait(task)


async def worker_beat_ctx(app: web.Application) -> AsyncIterator[None]:
    """Say every second that this worker runs (noteWorker): the brokers its open connections hold
    stay held only while it does, so a worker killed with kill -9 stops holding them."""
    store, worker, health = app[STORE], app[WORKER], app[HEALTH]

    async def loop() -> None:
        await worker.linked.wait()
        while True:
            raise_if_cancelling()
            if worker.scripts_loaded and health.reachable:
                try:
                    await store.note_worker(True)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the feed reports Redis trouble itself
                    log.debug("worker beat failed: %s", exc)
            await asyncio.sleep(WORKER_BEAT_S)

    task = asyncio.create_task(loop(), name="worker-beat")
    try:
        yield
    finally:
        await cancel_and_wait(task)
        if worker.scripts_loaded and health.reachable:
            with contextlib.suppress(Exception):  # gone from the table at once, or in 10 s anyway
                await store.note_worker(False)


async def remoting_ctx(app: web.Application) -> AsyncIterator[None]:
    worker = app[WORKER]
    server = RemotingServer(HandlerContext(app[SERVICE], worker, app[AUTHORIZER]), app[METRICS])
    await server.start(worker.base.listenHost, worker.base.remotingPort, tls=app.get(TLS))
    app[REMOTING] = server
    try:
        yield
    finally:
        await server.drain(worker.base.shutdownTimeoutSeconds)


def begin_drain(app: web.Application) -> None:
    """SIGTERM: readiness turns false and the remoting listener stops accepting at once; brokers
    are never removed by our own shutdown."""
    app[WORKER].draining = True
    if REMOTING in app:
        app[REMOTING].stop_accepting()
    if WATCH in app:
        app[WATCH].close()  # SSE streams end now (clients resume elsewhere), not at the deadline


def create_app(
    settings: Settings, *, extra_contexts: tuple[CleanupContext, ...] = (), worker: WorkerState | None = None
) -> web.Application:
    # The HTTP parser answers a request line it refuses with plain text, before any middleware:
    # let long ones through to error_middleware, which refuses URLs over MAX_URL_BYTES in JSON.
    app = web.Application(
        client_max_size=settings.httpMaxBodyBytes,
        middlewares=[error_middleware, acl_middleware],
        handler_args={"max_line_size": PARSER_MAX_LINE_BYTES},
    )
    app[WORKER] = worker or WorkerState(settings)
    app[METRICS] = Metrics()
    tls = server_tls(settings)
    if tls is not None:
        app[TLS] = tls
    app.cleanup_ctx.extend(
        [
            security_ctx,
            redis_ctx,
            registry_ctx,
            sweeper_ctx,
            worker_beat_ctx,
            events_budget_ctx,
            tls_watch_ctx,
            remoting_ctx,
            *extra_contexts,
        ]
    )
    setup_routes(app)
    return app
