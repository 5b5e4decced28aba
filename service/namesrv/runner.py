"""Run one worker until SIGTERM/SIGINT, then shut down gracefully.

On the signal, readiness turns false first; then the listeners stop accepting, in-flight requests
get up to ``shutdownTimeoutSeconds`` to finish, and the cleanup contexts close in reverse order.
A worker's own shutdown never removes brokers: they stay registered in Redis and reconnect to
another worker.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys

from aiohttp import web

from namesrv import allocator
from namesrv.aio import cancel_and_wait
from namesrv.app import CleanupContext, begin_drain, create_app
from namesrv.config import ConfigError, Settings
from namesrv.keys import HEALTH, REMOTING, WORKER
from namesrv.limits import raise_fd_limit
from namesrv.remoting.guard import FD_HEADROOM
from namesrv.tls import TLS, TlsSite

log = logging.getLogger(__name__)
# Python's defaults (700, 10, 10) run a young collection every 700 container allocations, i.e.
# many times per millisecond under load, and so promote whatever requests are in flight: the
# full collections that follow walk the route cache and the brokers' topic digests (none of it
# cyclic garbage) for 30-60 ms each, a dozen times a minute, and every such pause is a latency
# spike for every lookup queued behind it. Young collections every 10,000 allocations and a
# full one every 1,000 young ones keep cycles collected while the pauses stay rare and short.
GC_THRESHOLDS = (10_000, 10, 100)
# The change feed polls Redis on a thread of its own, so a busy event loop cannot make the
# worker's knowledge stale; but each step of a poll (wake up, send, read the reply) needs the GIL,
# and a thread asking for it waits up to the switch interval while the loop thread runs requests:
# Python's 5 ms, several times a poll, aged a busy worker's knowledge past the 100 ms bound (a
# catch-up at full load). The loop thread gives the GIL up only when the other thread asks, so a
# shorter interval costs nothing while the poll thread sleeps.
SWITCH_INTERVAL_S = 0.0005


class StartupError(Exception):
    """The worker could not start (Redis unreachable, port taken, data directory locked, ...)."""


async def serve(
    settings: Settings, *, extra_contexts: tuple[CleanupContext, ...] = (), stop: asyncio.Event | None = None
) -> None:
    # Descriptors for maxConnections plus Redis connections, the HTTP port and files.
    raise_fd_limit(settings.maxConnections + settings.redisMaxConnections + FD_HEADROOM)
    allocator.tune()  # before any thread: memory freed after big decodes goes back to the system
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        app = create_app(settings, extra_contexts=extra_contexts)
    except ConfigError as exc:
        raise StartupError(str(exc)) from exc
    stop = stop or asyncio.Event()
    app[WORKER].on_fatal = stop.set
    runner = web.AppRunner(
        app, handle_signals=False, access_log=None, shutdown_timeout=settings.shutdownTimeoutSeconds
    )
    try:
        await runner.setup()
    except Exception as exc:
        await runner.cleanup()
        raise StartupError(f"{type(exc).__name__}: {exc}") from exc
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        site = TlsSite(
            runner,
            settings.listenHost,
            settings.httpPort,
            tls=app.get(TLS),
            max_pending=settings.maxConnections,
        )
        try:
            await site.start()
        except OSError as exc:
            raise StartupError(f"cannot listen on {settings.listenHost}:{settings.httpPort}: {exc}") from exc
        # Everything built so far (modules, the app, the scripts) lives as long as the process:
        # move it out of the cyclic GC's reach, so a full collection does not walk it again and
        # again while the event loop waits.
        gc.collect()
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        guarding = asyncio.create_task(allocator.guard_memory(), name="memory-guard")
        remoting = app[REMOTING].port
        log.info(
            "namesrv-fleet worker %s listening: remoting on %s:%d, HTTP on %s:%d; ready once Redis "
            "answers (GET /readyz)",
            app[WORKER].worker_id,
            settings.listenHost,
            remoting,
            settings.listenHost,
            settings.httpPort,
        )
        announcing = asyncio.create_task(announce_when_ready(app, f"{settings.listenHost}:{remoting}"))
        await stop.wait()
        await cancel_and_wait(announcing)
        await cancel_and_wait(guarding)
        if app[WORKER].fatal is None:
            log.info("shutdown requested: draining (readiness is now false)")
        begin_drain(app)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await runner.cleanup()
        log.info("worker stopped")
    if app[WORKER].fatal is not None:
        raise StartupError(app[WORKER].fatal)


async def announce_when_ready(app: web.Application, address: str) -> None:
    """Say "ready" when ``/readyz`` turns 200 (the scripts loaded and Redis reachable), with Java's
    boot line, which operators' scripts look for: a worker that waits for Redis, or stops because
    Redis refused it, never claims to be ready. Then say it again each time Redis comes back."""
    worker, health = app[WORKER], app[HEALTH]
    await worker.linked.wait()
    await health.up.wait()
    log.info("namesrv-fleet worker %s ready", worker.worker_id)
    print(f"The Name Server boot success. serializeType=JSON, address {address}", flush=True)
    while True:
        await health.down.wait()
        await health.up.wait()
        if worker.ready(health.reachable):
            log.info("namesrv-fleet worker %s ready again: Redis answers", worker.worker_id)


def run(settings: Settings, *, extra_contexts: tuple[CleanupContext, ...] = ()) -> None:
    try:
        import uvloop  # optional speed-up

        uvloop.run(serve(settings, extra_contexts=extra_contexts))
    except ImportError:
        asyncio.run(serve(settings, extra_contexts=extra_contexts))
