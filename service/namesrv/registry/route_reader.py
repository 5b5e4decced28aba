"""A route straight from Redis: one snapshot script call, assembled by RocketMQ's rules (P1-P7)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from namesrv.config import Settings
from namesrv.domain import routes
from namesrv.registry.route_lookups import NO_NAMES, Lookup
from namesrv.store.registry_store import RegistryStore


class RouteReader:
    def __init__(self, store: RegistryStore, settings: Callable[[], Settings]) -> None:
        self.store = store
        self.settings = settings

    def view(self) -> tuple[bool, bool]:
        """The settings that shape a route; a cache starts over when they change."""
        s = self.settings()
        return s.orderMessageEnable, s.supportActingMaster

    async def read(self, topic: str) -> Lookup:
        """The route, and until when (local monotonic time) it may be served: the earliest
        deadline of the brokers it shows, measured on the Redis clock; with each address's
        deadline, for a cache."""
        return await self._read(topic, for_cache=True)

    async def read_once(self, topic: str) -> Lookup:
        """The route for one answer (no cache keeps it): no address's deadline, and valid until
        the earliest deadline of any broker. While no broker is past its deadline, Redis spends
        a sixth of ``read``'s time on a 100-group route (``python -m bench.route_read``)."""
        return await self._read(topic, for_cache=False)

    async def _read(self, topic: str, *, for_cache: bool) -> Lookup:
        s = self.settings()
        started = time.monotonic()
        snap = await self.store.route(topic, with_order=s.orderMessageEnable, for_cache=for_cache)
        valid_until = math.inf
        # Redis time -> local time, measured early rather than late: a deadline converted with it
        # comes before the real one, never after.
        offset = started - snap.now_ms / 1000
        if snap.valid_until_ms is not None:
            valid_until = offset + snap.valid_until_ms / 1000
        hidden = frozenset(snap.hidden_brokers) if snap.hidden_brokers else NO_NAMES
        if not snap.broker_datas:
            return Lookup(
                None,
                valid_until,
                hidden,
                clock_offset=offset,
                instance=snap.instance,
                newest_id=snap.newest_id,
            )
        data = routes.assemble(
            topic,
            snap.queue_datas,
            snap.broker_datas,
            snap.filters,
            snap.mappings,
            snap.order_topic_conf,
            support_acting_master=s.supportActingMaster,
        )
        deadlines = {member: offset + ms / 1000 for member, ms in snap.deadlines.items()}
        return Lookup(data, valid_until, hidden, deadlines, offset)
