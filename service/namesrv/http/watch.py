"""HTTP watch endpoints: a route with its ETag, a route long-poll, and the SSE change stream.

The fan-out and its bounds live in :mod:`namesrv.registry.watch`; this module only speaks HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib

import orjson
from aiohttp import web

from namesrv.domain.codes import ResponseCode, topic_not_exist_remark
from namesrv.domain.errors import BadRequest, Busy, NotFound, NotReady
from namesrv.domain.model import check_name
from namesrv.domain.routes import filter_by_zone
from namesrv.keys import SERVICE, WATCH, WORKER
from namesrv.protocol.fastjson import Dialect, dumps
from namesrv.protocol.render import route_obj
from namesrv.registry.watch import MAX_FILTER_NAMES, TooManyWatchers, Watcher
from namesrv.store.changelog import entry_key

JSON = "application/json"
MAX_WAIT_S = 60.0  # a long-poll's `wait` is capped here (proxies cut idle requests near 60 s)
KEEPALIVE_S = 15.0  # an SSE comment this often keeps proxies from closing an idle stream
ABSENT = '"absent"'  # the ETag of a topic that has no route (a long-poll may wait for one)


async def _route_body(request: web.Request, topic: str) -> bytes | None:
    entry = await request.app[SERVICE].route_entry(topic)
    if entry is None:
        return None
    zone = request.query.get("zone")
    if zone:
        return dumps(route_obj(filter_by_zone(entry.data, zone)), Dialect.STANDARD).encode()
    return entry.encoded(Dialect.STANDARD)


def etag_of(body: bytes | None) -> str:
    """The route's version: a digest of what it shows, so every worker gives the same ETag."""
    if body is None:
        return ABSENT
    return '"' + hashlib.sha1(body, usedforsecurity=False).hexdigest()[:20] + '"'


def _unquoted(tag: str) -> str:
    return tag.strip().removeprefix("W/").strip('"')


async def route(request: web.Request) -> web.Response:
    """GET /v1/routes/{topic}: the route with its ETag; ``?watch=<etag>&wait=<s>`` long-polls."""
    if request.app[WORKER].waiting_for_service():
        raise NotReady()
    topic = check_name(request.match_info["topic"], "topic")
    watched = request.query.get("watch")
    if watched is None:
        return _answer(topic, await _route_body(request, topic))
    wait = _seconds(request.query.get("wait", "30"))
    hub = request.app[WATCH]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        body = await _route_body(request, topic)
        remaining = deadline - loop.time()
        if _unquoted(etag_of(body)) != _unquoted(watched) or remaining <= 0:
            return _answer(topic, body, watched=True)
        await hub.changed(remaining)


def _seconds(text: str) -> float:
    try:
        wait = float(text)
    except ValueError:
        raise BadRequest(f"wait must be a number of seconds, got {text[:32]!r}") from None
    if not 0 <= wait <= MAX_WAIT_S:
        raise BadRequest(f"wait must be between 0 and {MAX_WAIT_S:.0f} seconds")
    return wait


def _answer(topic: str, body: bytes | None, *, watched: bool = False) -> web.Response:
    tag = etag_of(body)
    if body is None:
        if watched:  # a long-poll reports "still no route" with its tag, not an error
            return web.Response(
                status=404, body=b'{"code":17,"remark":"absent"}', content_type=JSON, headers={"ETag": tag}
            )
        raise NotFound(topic_not_exist_remark(topic), ResponseCode.TOPIC_NOT_EXIST)
    return web.Response(body=body, content_type=JSON, headers={"ETag": tag, "Cache-Control": "no-cache"})


def _names(request: web.Request, key: str, what: str) -> list[str]:
    raw = request.query.get(key, "")
    names = [n for n in raw.split(",") if n]
    if len(names) > MAX_FILTER_NAMES:
        raise BadRequest(f"at most {MAX_FILTER_NAMES} {key} per watch")
    return [check_name(n, what) for n in names]


async def watch(request: web.Request) -> web.StreamResponse:
    """GET /v1/watch: Server-Sent Events of route, broker and permission changes."""
    topics = _names(request, "topics", "topic")
    clusters = _names(request, "clusters", "cluster")
    last = request.headers.get("Last-Event-ID") or request.query.get("lastEventId") or None
    if last is not None:
        try:
            entry_key(last)
        except ValueError:
            raise BadRequest(f"Last-Event-ID is not a change-log id: {last[:40]!r}") from None
    if request.app[WORKER].draining:
        raise NotReady()  # shutting down: the client resumes on another worker
    hub = request.app[WATCH]
    try:
        watcher = hub.watch(topics, clusters, last)
    except TooManyWatchers as exc:
        raise Busy(str(exc)) from None
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    try:
        await response.prepare(request)
        await response.write(b"retry: 1000\n\n")
        await _stream(response, watcher)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        hub.unwatch(watcher)
    return response


async def _stream(response: web.StreamResponse, watcher: Watcher) -> None:
    closed = asyncio.ensure_future(watcher.closed.wait())
    try:
        while True:
            getting = asyncio.ensure_future(watcher.queue.get())
            done, _ = await asyncio.wait(
                {getting, closed}, timeout=KEEPALIVE_S, return_when=asyncio.FIRST_COMPLETED
            )
            if getting not in done:
                getting.cancel()
            if getting in done:
                event = getting.result()
                frame = b""
                if event.id:
                    frame += b"id: " + event.id.encode() + b"\n"
                frame += (
                    b"event: " + event.kind.encode() + b"\ndata: " + orjson.dumps(event.as_json()) + b"\n\n"
                )
                await response.write(frame)
            elif closed in done:
                reason = watcher.dropped or "closed"
                await response.write(b"event: dropped\ndata: " + orjson.dumps({"reason": reason}) + b"\n\n")
                return
            else:
                await response.write(b": keep-alive\n\n")
    finally:
        closed.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await closed
