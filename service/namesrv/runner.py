"""Run one worker until SIGTERM/SIGINT, then shut down gracefully.

On the signal, readiness turns false first; then the listeners stop accepting, in-flight requests
get up to ``shutdownTimeoutSeconds`` to finish, and the cleanup contexts close in reverse order.
A worker's own shutdown never removes brokers: they stay registered in Redis and reconnect to
another worker.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from aiohttp import web

from namesrv.app import CleanupContext, begin_drain, create_app
from namesrv.config import Settings
from namesrv.keys import WORKER

log = logging.getLogger(__name__)


async def serve(
    settings: Settings, *, extra_contexts: tuple[CleanupContext, ...] = (), stop: asyncio.Event | None = None
) -> None:
    app = create_app(settings, extra_contexts=extra_contexts)
    runner = web.AppRunner(
        app, handle_signals=False, access_log=None, shutdown_timeout=settings.shutdownTimeoutSeconds
    )
    await runner.setup()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        site = web.TCPSite(
            runner,
            settings.listenHost,
            settings.httpPort,
            reuse_address=True,
            shutdown_timeout=settings.shutdownTimeoutSeconds,
        )
        await site.start()
        log.info(
            "namesrv-fleet worker %s ready: HTTP on %s:%d",
            app[WORKER].worker_id,
            settings.listenHost,
            settings.httpPort,
        )
        print(
            f"The Name Server boot success. serializeType=JSON, http {settings.listenHost}:"
            f"{settings.httpPort}",
            flush=True,
        )
        await stop.wait()
        log.info("shutdown requested: draining (readiness is now false)")
        begin_drain(app)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await runner.cleanup()
        log.info("worker stopped")


def run(settings: Settings, *, extra_contexts: tuple[CleanupContext, ...] = ()) -> None:
    try:
        import uvloop  # optional speed-up

        uvloop.run(serve(settings, extra_contexts=extra_contexts))
    except ImportError:
        asyncio.run(serve(settings, extra_contexts=extra_contexts))
