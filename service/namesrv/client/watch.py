"""Follow routes from Python: a long-poll that keeps one topic's route current, and the change
stream (Server-Sent Events) with resume after a disconnect, neither missing nor repeating a
change the log still holds.

    async with aiohttp.ClientSession() as http:
        follower = RouteFollower(http, "http://namesrv:8080", "TopicA")
        await follower.refresh()             # the route now (None: no such topic)
        while await follower.next(wait=30):  # True when the route changed
            print(follower.route)

        async for change in changes(http, "http://namesrv:8080", topics=["TopicA"]):
            print(change["id"], change["kind"], change["topics"], change["brokers"])
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp
import orjson

ABSENT_ETAG = '"absent"'


class RouteFollower:
    """One topic's route, kept current by long-polls (``GET /v1/routes/{topic}?watch=&wait=``)."""

    def __init__(self, http: aiohttp.ClientSession, base_url: str, topic: str) -> None:
        self.http = http
        self.url = f"{base_url.rstrip('/')}/v1/routes/{topic}"
        self.etag: str | None = None
        self.route: dict[str, Any] | None = None

    async def refresh(self) -> dict[str, Any] | None:
        async with self.http.get(self.url) as resp:
            await self._take(resp)
        return self.route

    async def next(self, wait: float = 30.0) -> bool:
        """Wait up to ``wait`` s for the route to change; True when it did (``route`` is new)."""
        if self.etag is None:
            await self.refresh()
            return True
        timeout = aiohttp.ClientTimeout(total=wait + 30)
        params = {"watch": self.etag, "wait": str(wait)}
        async with self.http.get(self.url, params=params, timeout=timeout) as resp:
            if resp.status == 304:
                return False
            await self._take(resp)
        return True

    async def _take(self, resp: aiohttp.ClientResponse) -> None:
        if resp.status not in (200, 404):
            raise RuntimeError(f"GET {self.url}: HTTP {resp.status}: {(await resp.text())[:200]}")
        self.etag = resp.headers.get("ETag", ABSENT_ETAG)
        self.route = orjson.loads(await resp.read()) if resp.status == 200 else None


async def changes(
    http: aiohttp.ClientSession,
    base_url: str,
    *,
    topics: Iterable[str] = (),
    clusters: Iterable[str] = (),
    last_event_id: str | None = None,
    reconnects: int = 10,
    retry_s: float = 1.0,
) -> AsyncIterator[dict[str, Any]]:
    """Changes from ``GET /v1/watch`` as dicts (``id``, ``kind``, ``topics``, ``brokers``, ...).
    A dropped stream is resumed from the last ID seen, up to ``reconnects`` times in a row; a
    ``resync`` change means: re-read the routes you follow (the fleet's log lost entries)."""
    url = f"{base_url.rstrip('/')}/v1/watch"
    params = {k: ",".join(v) for k, v in (("topics", topics), ("clusters", clusters)) if v}
    failures = 0
    while True:
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        try:
            timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
            async with http.get(url, params=params, headers=headers, timeout=timeout) as resp:
                if resp.status != 200:
                    raise RuntimeError(f"GET {url}: HTTP {resp.status}: {(await resp.text())[:200]}")
                async for kind, event_id, data in _events(resp):
                    failures = 0
                    if kind == "dropped":
                        break  # too slow for the server: resume from the last ID
                    if event_id and kind != "resync":
                        last_event_id = event_id
                    yield {**orjson.loads(data), "kind": kind}
        except (TimeoutError, aiohttp.ClientError):
            pass
        failures += 1
        if failures > reconnects:
            raise ConnectionError(f"{url}: the stream failed {failures} times in a row")
        await asyncio.sleep(retry_s)


async def _events(resp: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, str, str]]:
    """(event, id, data) of each SSE event; comments and retry lines are skipped."""
    kind, event_id = "message", ""
    data: list[str] = []
    async for raw in resp.content:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data:
                yield kind, event_id, "\n".join(data)
            kind, event_id, data = "message", "", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                kind = value
            elif name == "id":
                event_id = value
            elif name == "data":
                data.append(value)
