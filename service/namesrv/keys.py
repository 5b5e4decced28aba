"""Typed keys of the aiohttp application: everything a worker owns hangs off these.

A leaf module: the types are imported for the type checker only, so importing the keys pulls in
nothing of the application.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from namesrv.metrics import Metrics
    from namesrv.registry.changefeed import ChangeFeed
    from namesrv.registry.service import RegistryService
    from namesrv.registry.watch import WatchHub
    from namesrv.remoting.server import RemotingServer
    from namesrv.security.policy import Authorizer
    from namesrv.store.health import RedisHealth
    from namesrv.store.registry_store import RegistryStore
    from namesrv.store.scripts import ScriptRegistry
    from namesrv.worker import WorkerState

WORKER: web.AppKey[WorkerState] = web.AppKey("worker")
METRICS: web.AppKey[Metrics] = web.AppKey("metrics")
REDIS: web.AppKey[Redis] = web.AppKey("redis")
HEALTH: web.AppKey[RedisHealth] = web.AppKey("health")
SCRIPTS: web.AppKey[ScriptRegistry] = web.AppKey("scripts")
STORE: web.AppKey[RegistryStore] = web.AppKey("store")
SERVICE: web.AppKey[RegistryService] = web.AppKey("service")
FEED: web.AppKey[ChangeFeed] = web.AppKey("feed")
WATCH: web.AppKey[WatchHub] = web.AppKey("watch")
REMOTING: web.AppKey[RemotingServer] = web.AppKey("remoting")
AUTHORIZER: web.AppKey[Authorizer] = web.AppKey("authorizer")
# Per request: the signed fields the ACL middleware checked (handlers with rules of their own).
ACL_FIELDS: web.RequestKey[dict[str, str]] = web.RequestKey("acl_fields", dict)
