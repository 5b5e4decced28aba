"""Watching routes over HTTP (#30): a route's ETag and long-poll, and a Server-Sent Events stream
of changes with resume (``Last-Event-ID``). The fan-out is :mod:`namesrv.registry.watch`."""

from __future__ import annotations

import hashlib
import time

import msgspec
from aiohttp import web

from namesrv.domain.codes import ResponseCode, topic_not_exist_remark
from namesrv.domain.errors import BadRequest, NotFound, NotReady
from namesrv.domain.model import check_name
from namesrv.domain.routes import filter_by_zone
from namesrv.keys import SERVICE, STORE, WATCH, WORKER
from namesrv.protocol.fastjson import Dialect, dumps
from namesrv.protocol.render import route_obj
from namesrv.registry.watch import RESYNC, Change, WatchFilter, backlog, id_after, parse_names, valid_id

JSON = "application/json"
ABSENT_ETAG = '"absent"'  # the version of a topic that does not exist
DEFAULT_WAIT_S = 30.0
KEEPALIVE_S = 15.0  # an SSE comment this often, so proxies keep the stream open
RESUME_MAX = 10_000  # entries a resume reads from the change log; more: resync
MAX_WATCHED = 100  # topics or clusters one watch names


def _etag(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=10).hexdigest() + '"'


async def _route_now(request: web.Request, topic: str) -> tuple[str, bytes | None, tuple[str, ...]]:
    """The route's ETag, its body (None: no such topic) and the broker names it shows."""
    entry = await request.app[SERVICE].route_entry(topic)
    if entry is None:
        return ABSENT_ETAG, None, ()
    zone = request.query.get("zone")
    data = filter_by_zone(entry.data, zone) if zone else entry.data
    body = dumps(route_obj(data), Dialect.STANDARD).encode() if zone else entry.encoded(Dialect.STANDARD)
    return _etag(body), body, tuple(b.brokerName for b in data.brokerDatas)


def _reply(topic: str, etag: str, body: bytes | None) -> web.Response:
    if body is None:  # a refusal like any other (counted as one); its version is '"absent"'
        raise NotFound(topic_not_exist_remark(topic), ResponseCode.TOPIC_NOT_EXIST)
    return web.Response(body=body, content_type=JSON, headers={"ETag": etag})


def _wait_seconds(request: web.Request) -> float:
    raw = request.query.get("wait")
    try:
        wait = DEFAULT_WAIT_S if raw is None else float(raw)
    except ValueError:
        raise BadRequest(f"wait must be a number of seconds, not {str(raw)[:40]!r}") from None
    if not 0 <= wait < float("inf"):
        raise BadRequest("wait must be 0 or more seconds")
    return min(wait, request.app[WORKER].current().watchMaxWaitSeconds)


async def route(request: web.Request) -> web.StreamResponse:
    """GET /v1/routes/{topic}: the route with its ETag; ``?watch=<etag>&wait=<s>`` long-polls
    until the route's version differs from ``watch`` (304 Not Modified after ``wait``)."""
    if request.app[WORKER].waiting_for_service():
        raise NotReady()
    topic = check_name(request.match_info["topic"], "topic")
    watch = request.query.get("watch") if request.query_string else None
    etag, body, brokers = await _route_now(request, topic)
    if watch is None:
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return _reply(topic, etag, body)
    wait = _wait_seconds(request)
    if etag != watch:
        return _reply(topic, etag, body)
    watcher = request.app[WATCH].watch(WatchFilter(frozenset({topic}), brokers=frozenset(brokers)))
    try:
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0 and watcher.dropped is None:
            if not await watcher.next(left):
                continue
            etag, body, brokers = await _route_now(request, topic)
            if etag != watch:
                return _reply(topic, etag, body)
            watcher.filter = WatchFilter(frozenset({topic}), brokers=frozenset(brokers))
    finally:
        watcher.close()
    return web.Response(status=304, headers={"ETag": etag})


def _event(change: Change) -> bytes:
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (change.id.encode(), change.kind.encode(), change.as_json())


async def _brokers_of(request: web.Request, topics: frozenset[str]) -> frozenset[str]:
    names: set[str] = set()
    for topic in topics:
        names.update((await _route_now(request, topic))[2])
    return frozenset(names)


async def watch(request: web.Request) -> web.StreamResponse:
    """GET /v1/watch?topics=a,b&clusters=c: route changes as Server-Sent Events."""
    try:
        topics = parse_names(request.query.get("topics"), MAX_WATCHED)
        clusters = parse_names(request.query.get("clusters"), MAX_WATCHED)
    except ValueError as exc:
        raise BadRequest(f"topics and clusters: {exc}") from None
    for name in topics | clusters:
        check_name(name, "topic or cluster")
    last = request.headers.get("Last-Event-ID") or request.query.get("lastEventId") or ""
    if last and not valid_id(last):
        raise BadRequest("Last-Event-ID must be a change-log entry ID (<ms>-<seq>)")
    hub = request.app[WATCH]
    flt = WatchFilter(topics, clusters, await _brokers_of(request, topics) if topics else frozenset())
    watcher = hub.watch(flt)  # before the log is read: no change falls between the two
    try:
        backlog_changes: list[Change] = []
        if last:
            oldest, entries = await request.app[STORE].changes_after(last, RESUME_MAX + 1)
            if len(entries) > RESUME_MAX or (oldest is not None and id_after(oldest, last)):
                reason = "too far behind" if len(entries) > RESUME_MAX else "the log no longer holds that ID"
                backlog_changes = [Change(last, RESYNC, all_routes=True, detail={"reason": reason})]
            else:
                backlog_changes = [c for c in backlog(entries) if flt.matches(c)]
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        await response.write(b"retry: 1000\n\n")
        sent = last
        for change in backlog_changes:
            await response.write(_event(change))
            sent = change.id if change.kind != RESYNC else sent
        while watcher.dropped is None:
            changes = await watcher.next(KEEPALIVE_S)
            if not changes:
                if watcher.dropped is None:
                    await response.write(b": keepalive\n\n")
                continue
            fresh = [c for c in changes if c.kind == RESYNC or not sent or id_after(c.id, sent)]
            if fresh:
                await response.write(b"".join(_event(c) for c in fresh))
                sent = max((c.id for c in fresh if c.kind != RESYNC), default=sent, key=_order)
            if topics and any(topics.intersection(c.topics) or c.all_routes for c in fresh):
                watcher.filter = WatchFilter(topics, clusters, await _brokers_of(request, topics))
        why = msgspec.json.encode({"reason": watcher.dropped})
        await response.write(b"event: dropped\ndata: %s\n\n" % why)
        return response
    finally:
        watcher.close()


def _order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return (int(ms), int(seq or 0)) if ms.isdigit() and (seq or "0").isdigit() else (-1, -1)


def add_routes(r: web.UrlDispatcher) -> None:
    r.add_get("/v1/watch", watch, name="watch")
