"""What the operations console shows beyond clusters and routes: each broker name's write
permission, derived from its queues, and the queue counts of a page of topics.

Reads only, each bounded in keys read and in Redis round trips: a fleet may hold tens of thousands
of topics, and every open console asks every few seconds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from namesrv.domain.codes import PERM_WRITE
from namesrv.store.registry_store import RegistryStore

MAX_PERM_BROKERS = 1000  # broker names whose write permission is derived (the first, by name)
MAX_PERM_CHECKS = 20_000  # queues read to derive them, over every broker name
PERM_CHUNK = 5000  # queues read per round trip
PERMS_REUSE_S = 30.0  # a derivation serves while the route version stays the same, at most this long
MAX_TOPIC_PAGE = 500  # topics whose queue counts one request reads


@dataclass(frozen=True)
class WritePerm:
    """A broker name's write permission as its queues say (WIPE_WRITE_PERM_OF_BROKER clears the
    write bit of every one, ADD_WRITE_PERM_OF_BROKER sets it back)."""

    topics: int  # topics the broker name has a queue in
    checked: int  # of them, read (MAX_PERM_CHECKS bounds the total)
    writable: int  # of those, with the write bit

    @property
    def label(self) -> str:
        if self.checked == 0:
            return "no queues"
        if self.writable == self.checked:
            return "rw"
        return "read-only" if self.writable == 0 else "partly writable"

    def as_json(self) -> dict[str, object]:
        return {"perm": self.label, "topics": self.topics, "checked": self.checked, "writable": self.writable}


@dataclass(frozen=True)
class TopicQueues:
    """A topic's queue counts, summed over the broker names that hold its queues."""

    topic: str
    read: int
    write: int
    brokers: int

    def as_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "readQueueNums": self.read,
            "writeQueueNums": self.write,
            "brokers": self.brokers,
        }


@dataclass(frozen=True)
class _Derived:
    route_version: int
    at: float  # local monotonic time
    names: tuple[str, ...]
    perms: dict[str, WritePerm]

    def serves(self, route_version: int, names: tuple[str, ...], now: float) -> bool:
        return (self.route_version, self.names) == (route_version, names) and now - self.at < PERMS_REUSE_S


class ConsoleFacts:
    def __init__(self, store: RegistryStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self._perms: _Derived | None = None
        self._lock = asyncio.Lock()  # one derivation at a time: consoles polling together share it

    async def write_perms(self, broker_names: Sequence[str]) -> dict[str, WritePerm]:
        """Each broker name's write permission (the first MAX_PERM_BROKERS names). Every queue
        change moves the route version, so an unchanged version within PERMS_REUSE_S (which also
        covers a Redis that restarted empty and counted up to the same version) reuses the last."""
        names = tuple(sorted(broker_names)[:MAX_PERM_BROKERS])
        async with self._lock:
            version = await self.store.route_version()
            kept = self._perms
            if kept is not None and kept.serves(version, names, self.clock()):
                return kept.perms
            perms = await self._derive(names)
            self._perms = _Derived(version, self.clock(), names, perms)
            return perms

    async def _derive(self, names: Sequence[str]) -> dict[str, WritePerm]:
        topic_sets = await self.store.broker_topic_sets(names)
        budget = MAX_PERM_CHECKS
        pairs: list[tuple[str, str]] = []
        for name, topics in zip(names, topic_sets, strict=True):
            take = topics[: max(budget, 0)]
            budget -= len(take)
            pairs += [(topic, name) for topic in take]
        writable = dict.fromkeys(names, 0)
        checked = dict.fromkeys(names, 0)
        for start in range(0, len(pairs), PERM_CHUNK):
            chunk = pairs[start : start + PERM_CHUNK]
            for (_, name), queue in zip(chunk, await self.store.queues_of(chunk), strict=True):
                if queue is None:  # the topic lost the queue since the set was read
                    continue
                checked[name] += 1
                if int(orjson.loads(queue).get("perm", 0)) & PERM_WRITE:
                    writable[name] += 1
        return {
            name: WritePerm(len(topics), checked[name], writable[name])
            for name, topics in zip(names, topic_sets, strict=True)
        }

    async def topic_queues(self, topics: Sequence[str]) -> list[TopicQueues]:
        """The queue counts of at most MAX_TOPIC_PAGE topics, in one round trip."""
        page = list(topics[:MAX_TOPIC_PAGE])
        counts: list[TopicQueues] = []
        for topic, queues in zip(page, await self.store.topic_queues(page), strict=True):
            read = write = 0
            for text in queues.values():
                queue = orjson.loads(text)
                read += int(queue.get("readQueueNums", 0))
                write += int(queue.get("writeQueueNums", 0))
            counts.append(TopicQueues(topic, read, write, len(queues)))
        return counts
