"""Typed keys of the aiohttp application: everything a worker owns hangs off these."""

from __future__ import annotations

from aiohttp import web
from redis.asyncio import Redis

from namesrv.metrics import Metrics
from namesrv.registry.service import RegistryService
from namesrv.remoting.server import RemotingServer
from namesrv.store.registry_store import RegistryStore
from namesrv.store.scripts import ScriptRegistry
from namesrv.worker import WorkerState

WORKER = web.AppKey("worker", WorkerState)
METRICS = web.AppKey("metrics", Metrics)
REDIS = web.AppKey("redis", Redis)
SCRIPTS = web.AppKey("scripts", ScriptRegistry)
STORE = web.AppKey("store", RegistryStore)
SERVICE = web.AppKey("service", RegistryService)
REMOTING = web.AppKey("remoting", RemotingServer)
