"""The worker's access policy over its lifetime: built at start-up, the ACL file re-read when it
changes (polled) or on SIGHUP. Every worker reads the same file (a Secret volume in Kubernetes)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator

from aiohttp import web

from namesrv.aio import cancel_and_wait
from namesrv.keys import AUTHORIZER, METRICS, WORKER
from namesrv.security.policy import Authorizer

log = logging.getLogger(__name__)
# How often the ACL file's modification stamp is checked: cheap (one stat), and quick enough
# that a revoked key stops working within seconds of the Secret changing.
ACL_POLL_SECONDS = 2.0


async def _poll(authorizer: Authorizer) -> None:
    while True:
        await asyncio.sleep(ACL_POLL_SECONDS)
        try:
            authorizer.reload_if_changed()
        except Exception:
            log.exception("ACL file check failed; will retry")


async def security_ctx(app: web.Application) -> AsyncIterator[None]:
    # A bad ACL file or allow-list raises ConfigError here, so the worker does not start.
    authorizer = Authorizer.from_settings(app[WORKER].base, app[METRICS].registry)
    app[AUTHORIZER] = authorizer
    if not authorizer.acl_enabled:
        yield
        return
    loop = asyncio.get_running_loop()
    sighup = False
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
        loop.add_signal_handler(signal.SIGHUP, authorizer.reload)
        sighup = True
    task = loop.create_task(_poll(authorizer), name="acl-reload")
    try:
        yield
    finally:
        if sighup:
            loop.remove_signal_handler(signal.SIGHUP)
        await cancel_and_wait(task)
