"""Keep a topic's route current from a worker's SSE stream, resuming where it left off.

Usage::

    async with aiohttp.ClientSession() as session:
        follower = RouteFollower(session, "http://namesrv:9877", "TopicTest")
        task = asyncio.create_task(follower.run())
        ...  # follower.route is the current route (None: no route), follower.etag its version

On every (re)connection the follower sends the last event id it saw (``Last-Event-ID``), so the
worker replays the events it missed; a ``resync`` event, or a change naming the topic or one of
its brokers, makes it re-read the route. A dropped connection (a worker restart, a slow-consumer
drop) is retried after ``retry_s``, on the same URL (put a load balancer in front for failover).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

MAX_LINE = 1 << 20  # an SSE line longer than this is a broken stream


@dataclass(frozen=True)
class SseEvent:
    id: str
    event: str
    data: str

    def json(self) -> Any:
        return orjson.loads(self.data)


async def sse_events(response: aiohttp.ClientResponse) -> AsyncIterator[SseEvent]:
    """The events of a ``text/event-stream`` response, as the SSE spec frames them."""
    event_id, kind = "", ""
    data: list[str] = []
    async for raw in response.content:
        if len(raw) > MAX_LINE:
            raise ValueError("SSE line too long")
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data or kind:
                yield SseEvent(event_id, kind or "message", "\n".join(data))
            event_id, kind, data = "", "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            event_id = value
        elif name == "event":
            kind = value
        elif name == "data":
            data.append(value)


class RouteFollower:
    def __init__(
        self, session: aiohttp.ClientSession, base_url: str, topic: str, *, retry_s: float = 0.5
    ) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.topic = topic
        self.retry_s = retry_s
        self.route: dict[str, Any] | None = None
        self.etag = ""
        self.last_event_id = ""
        self.seen: list[SseEvent] = []  # every event received, in order (for callers that audit)
        self.connected = asyncio.Event()
        self.reads = 0  # route reads (a resync or a relevant change)

    async def refresh(self) -> None:
        async with self.session.get(f"{self.base_url}/v1/routes/{self.topic}") as resp:
            self.reads += 1
            if resp.status == 404:
                self.route, self.etag = None, resp.headers.get("ETag", "")
                return
            resp.raise_for_status()
            self.route, self.etag = await resp.json(), resp.headers.get("ETag", "")

    def _relevant(self, event: SseEvent) -> bool:
        if event.event in ("resync", "config"):
            return True
        body = event.json()
        if self.topic in body.get("topics", ()):
            return True
        shown = {b.get("brokerName") for b in (self.route or {}).get("brokerDatas", [])}
        return bool(shown.intersection(body.get("brokers", ())))

    async def run_once(self) -> str:
        """One connection: returns why it ended (the worker's drop reason, or the error)."""
        headers = {"Last-Event-ID": self.last_event_id} if self.last_event_id else {}
        url = f"{self.base_url}/v1/watch"
        async with self.session.get(
            url, params={"topics": self.topic}, headers=headers, timeout=None
        ) as resp:
            resp.raise_for_status()
            self.connected.set()
            if not self.last_event_id:
                await self.refresh()  # a first connection starts from the route as it is now
            async for event in sse_events(resp):
                if event.event == "dropped":
                    return str(event.json().get("reason", "dropped"))
                self.seen.append(event)
                if event.id:
                    self.last_event_id = event.id
                if self._relevant(event):
                    await self.refresh()
        return "stream ended"

    async def run(self) -> None:
        while True:
            with contextlib.suppress(aiohttp.ClientError, ValueError):
                await self.run_once()
            self.connected.clear()
            await asyncio.sleep(self.retry_s)
