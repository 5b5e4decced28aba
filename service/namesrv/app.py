"""The composition root: ``create_app(settings)`` builds one worker.

Each resource has its own cleanup context, set up in order and torn down in reverse:
Redis (embedded or external) -> script library and registry -> change feed (fleet-wide config)
-> expiry sweeper -> extra contexts (the remoting listener). A worker holds no route state.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections.abc import AsyncIterator, Callable, Mapping

from aiohttp import web

from namesrv.aio import cancel_and_wait, raise_if_cancelling
from namesrv.changefeed import ChangeFeed
from namesrv.config import Settings
from namesrv.http.api import setup_routes
from namesrv.http.middleware import error_middleware
from namesrv.keys import METRICS, REDIS, REMOTING, SCRIPTS, SERVICE, STORE, WORKER
from namesrv.metrics import Metrics
from namesrv.registry.service import RegistryService
from namesrv.remoting.handlers import HandlerContext
from namesrv.remoting.server import RemotingServer
from namesrv.store.embedded import EmbeddedRedis
from namesrv.store.keyspace import Keyspace
from namesrv.store.redis_client import close_client, connect
from namesrv.store.registry_store import RegistryStore
from namesrv.store.scripts import ScriptRegistry
from namesrv.worker import WorkerState

log = logging.getLogger(__name__)
CleanupContext = Callable[[web.Application], contextlib.AbstractAsyncContextManager[None]]
FEED = web.AppKey("feed", ChangeFeed)
# A lookup waits this long for the change feed to catch up before it reads Redis itself; a read
# that slow means Redis is in trouble, and the lookup's own read would be no faster.
CATCH_UP_TIMEOUT_S = 1.0


async def redis_ctx(app: web.Application) -> AsyncIterator[None]:
    worker = app[WORKER]
    embedded: EmbeddedRedis | None = None
    url = worker.base.redisUrl
    if not url:
        embedded = EmbeddedRedis(worker.base.dataDir)
        url = await embedded.start()
    worker.redis_url = url
    try:
        app[REDIS] = await connect(url, max_connections=worker.base.redisMaxConnections)
        try:
            yield
        finally:
            await close_client(app[REDIS])
    finally:
        if embedded:
            await embedded.stop()


async def registry_ctx(app: web.Application) -> AsyncIterator[None]:
    worker, metrics = app[WORKER], app[METRICS]

    def observe(script: str, seconds: float) -> None:
        metrics.script_latency.labels(script).observe(seconds)

    scripts = ScriptRegistry(app[REDIS], observe=observe)
    await scripts.preload()
    log.info("loaded %d Lua scripts, bundle %s", len(scripts.scripts), scripts.bundle_hash)
    store = RegistryStore(
        app[REDIS],
        Keyspace(worker.base.namespace),
        scripts,
        events_max_len=worker.base.eventsMaxLen,
        worker_id=worker.worker_id,
        max_connections=worker.base.redisMaxConnections,
    )
    await store.check_schema()
    worker.apply_overrides(await store.config_overrides())
    app[SCRIPTS] = scripts
    app[STORE] = store
    service = RegistryService(store, worker.current)
    if worker.base.routeCacheEnabled:
        app[METRICS].watch_route_cache(service.enable_route_cache())
    app[SERVICE] = service
    worker.scripts_loaded = True
    yield


async def changefeed_ctx(app: web.Application) -> AsyncIterator[None]:
    store, worker, cache = app[STORE], app[WORKER], app[SERVICE].cache
    # With a route cache the feed must complete a read well within the staleness bound, idle or
    # not: it polls every quarter of the bound (a few cheap XREADs per second).
    poll = worker.base.routeCacheStalenessMillis / 4000 if cache else None
    feed = ChangeFeed(app[REDIS], store.k.events, poll_interval=poll)

    async def on_change(kind: str, fields: Mapping[str, str]) -> None:
        if cache is not None:
            cache.on_event(kind, fields)
        if kind == "config":
            worker.apply_overrides(await store.config_overrides())

    async def resync() -> None:
        if cache is not None:
            cache.clear()
        worker.apply_overrides(await store.config_overrides())

    feed.subscribe(on_change, resync)
    if cache is not None:
        feed.progress.append(lambda issued: setattr(cache, "feed_read_issued_at", issued))
        cache.catch_up = functools.partial(feed.wait_fresh, CATCH_UP_TIMEOUT_S)
    await feed.start()
    app[FEED] = feed
    try:
        yield
    finally:
        await feed.stop()


async def sweeper_ctx(app: web.Application) -> AsyncIterator[None]:
    service, worker, metrics = app[SERVICE], app[WORKER], app[METRICS]

    async def loop() -> None:
        # Workers start at different times; jitter keeps their sweeps from lining up anyway.
        await asyncio.sleep(random.uniform(0, worker.settings.scanNotActiveBrokerInterval / 1000))
        while True:
            raise_if_cancelling()
            try:
                expired = await service.sweep()
                if expired:
                    metrics.expired.inc(expired)
                    log.info("sweep removed %d expired broker(s)", expired)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("expiry sweep failed; will retry")
            await asyncio.sleep(worker.settings.scanNotActiveBrokerInterval / 1000)

    task = asyncio.create_task(loop(), name="sweeper")
    try:
        yield
    finally:
        await cancel_and_wait(task)


async def remoting_ctx(app: web.Application) -> AsyncIterator[None]:
    worker = app[WORKER]
    server = RemotingServer(HandlerContext(app[SERVICE], worker), app[METRICS])
    await server.start(worker.base.listenHost, worker.base.remotingPort)
    app[REMOTING] = server
    try:
        yield
    finally:
        await server.drain(worker.base.shutdownTimeoutSeconds)


def begin_drain(app: web.Application) -> None:
    """SIGTERM: readiness turns false and the remoting listener stops accepting at once; brokers
    are never removed by our own shutdown."""
    app[WORKER].draining = True
    app[METRICS].ready.set(0)
    if REMOTING in app:
        app[REMOTING].stop_accepting()


def create_app(
    settings: Settings, *, extra_contexts: tuple[CleanupContext, ...] = (), worker: WorkerState | None = None
) -> web.Application:
    # A long enough request line that an over-long topic in a URL reaches our validation and gets
    # a JSON error rather than the HTTP parser's plain-text 400.
    app = web.Application(
        client_max_size=settings.httpMaxBodyBytes,
        middlewares=[error_middleware],
        handler_args={"max_line_size": 65536},
    )
    app[WORKER] = worker or WorkerState(settings)
    app[METRICS] = Metrics()
    app.cleanup_ctx.extend(
        [redis_ctx, registry_ctx, changefeed_ctx, sweeper_ctx, remoting_ctx, *extra_contexts]
    )
    setup_routes(app)
    return app
