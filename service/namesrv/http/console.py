"""The read-only operations console at ``/ui``: static files (no build step) and the JSON it reads.

Everything here is a read: it goes through the same ACL middleware as every other GET, and shows
nothing a route or cluster lookup does not (KV values are not shown, only namespace sizes)."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from namesrv.keys import HEALTH, SERVICE, WATCH, WORKER
from namesrv.protocol.fastjson import Dialect, dumps
from namesrv.protocol.render import cluster_info_obj

STATIC = Path(__file__).with_name("console")
FILES = {"": "index.html", "console.js": "console.js", "console.css": "console.css"}
TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


async def page(request: web.Request) -> web.StreamResponse:
    name = FILES.get(request.match_info.get("file", ""))
    if name is None:
        raise web.HTTPNotFound(text="no such console file")
    path = STATIC / name
    return web.Response(
        body=path.read_bytes(),
        content_type=TYPES[path.suffix],
        charset="utf-8",
        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
    )


async def overview(request: web.Request) -> web.Response:
    """Clusters, brokers, KV namespaces and this worker's view of the fleet's health."""
    service, worker, health = request.app[SERVICE], request.app[WORKER], request.app[HEALTH]
    info = await service.cluster_info()
    liveness, workers = await service.broker_liveness()
    body = {
        "worker": worker.worker_id,
        "redis": {"reachable": health.reachable, "reason": health.reason if not health.reachable else ""},
        "cluster": cluster_info_obj(info),
        "liveness": liveness,
        "workersSeen": workers,
        "kvNamespaces": await service.kv_namespaces(),
        "topics": len(await service.all_topics()),
        "watchers": request.app[WATCH].watching,
    }
    # fastjson's standard dialect: broker ids are integer keys, as in /v1/cluster
    return web.Response(text=dumps(body, Dialect.STANDARD), content_type="application/json")


def setup_console(app: web.Application) -> None:
    r = app.router
    r.add_get("/ui", page, name="console")
    r.add_get("/ui/{file}", page, name="consoleFile")
    r.add_get("/v1/console/overview", overview, name="consoleOverview")
