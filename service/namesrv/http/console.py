"""The read-only operations console at ``/ui``: static files (no build step) and the JSON it reads.

Everything here is a read: it goes through the same ACL middleware as every other GET, and shows
nothing a route or cluster lookup does not (KV values are not shown, only namespace sizes), plus
what brokers told every worker (their version) and this worker's route cache counters."""

from __future__ import annotations

from pathlib import Path

import orjson
from aiohttp import web

from namesrv.domain.errors import BadRequest
from namesrv.keys import HEALTH, SERVICE, WATCH, WORKER
from namesrv.protocol.fastjson import Dialect, RawJson, dumps
from namesrv.protocol.render import cluster_info_obj
from namesrv.registry.console_facts import MAX_TOPIC_PAGE
from namesrv.registry.route_cache import RouteCache
from namesrv.registry.route_lookups import Routes

STATIC = Path(__file__).with_name("console")
FILES = {"": "index.html", "console.js": "console.js", "console.css": "console.css"}
TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
MAX_FILTER = 255  # a topic name's own bound: a longer filter matches nothing


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
    """Clusters, brokers (with version and write permission), KV namespaces and this worker's
    view of the fleet's health."""
    service, worker, health = request.app[SERVICE], request.app[WORKER], request.app[HEALTH]
    info = await service.cluster_info()
    liveness, workers = await service.broker_liveness()
    perms = await service.console.write_perms(list(info.brokerAddrTable))
    body = {
        "worker": worker.worker_id,
        "redis": {"reachable": health.reachable, "reason": health.reason if not health.reachable else ""},
        "cluster": cluster_info_obj(info),
        "liveness": liveness,
        "brokerPerms": {name: perm.as_json() for name, perm in perms.items()},
        "workersSeen": workers,
        "kvNamespaces": await service.kv_namespaces(),
        "topics": len(await service.all_topics()),
        "watchers": request.app[WATCH].watching,
        # fastjson's writer has no floats (no RocketMQ reply holds one): the ratio goes in as orjson text
        "routeCache": RawJson(orjson.dumps(route_cache_stats(service.lookups)).decode()),
        "reportUrl": worker.settings.consoleReportUrl,
    }
    # fastjson's standard dialect: broker ids are integer keys, as in /v1/cluster
    return web.Response(text=dumps(body, Dialect.STANDARD), content_type="application/json")


def route_cache_stats(lookups: Routes) -> dict[str, object]:
    """This worker's route cache since it started: lookups answered from memory (hits), read
    from Redis (misses), and the share of hits among both (None before any lookup)."""
    if not isinstance(lookups, RouteCache):
        return {"enabled": False, "hits": 0, "misses": 0, "hitRatio": None}
    stats = lookups.stats()
    hits, misses = stats["hits"], stats["misses"]
    ratio = round(hits / (hits + misses), 4) if hits + misses else None
    return {"enabled": True, "hits": hits, "misses": misses, "hitRatio": ratio}


async def topics(request: web.Request) -> web.Response:
    """GET /v1/console/topics?filter=&limit=: the topics whose name contains ``filter`` (any
    case), sorted, the first ``limit`` (at most 500) with their queue counts."""
    needle = request.query.get("filter", "").strip().lower()
    if len(needle) > MAX_FILTER:
        raise BadRequest(f"filter must be at most {MAX_FILTER} characters")
    limit = _limit(request.query.get("limit", str(MAX_TOPIC_PAGE)))
    names = await request.app[SERVICE].all_topics()
    matched = [t for t in names if needle in t.lower()] if needle else names
    page = await request.app[SERVICE].console.topic_queues(matched[:limit])
    body = {"total": len(names), "matched": len(matched), "topics": [t.as_json() for t in page]}
    return web.Response(text=dumps(body, Dialect.STANDARD), content_type="application/json")


def _limit(text: str) -> int:
    try:
        limit = int(text)
    except ValueError:
        raise BadRequest(f"limit must be an integer, got {text[:32]!r}") from None
    if not 1 <= limit <= MAX_TOPIC_PAGE:
        raise BadRequest(f"limit must be between 1 and {MAX_TOPIC_PAGE}")
    return limit


def setup_console(app: web.Application) -> None:
    r = app.router
    r.add_get("/ui", page, name="console")
    r.add_get("/ui/{file}", page, name="consoleFile")
    r.add_get("/v1/console/overview", overview, name="consoleOverview")
    r.add_get("/v1/console/topics", topics, name="consoleTopics")
