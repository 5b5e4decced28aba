"""Which cached routes one change-log entry can change: the invalidation half of the cache rule.

A route (``TopicRouteData``) is built from: the topic's queues (``{ns}:topic:<t>``), the BrokerData
of the brokers those queues name, the filter servers of those brokers' addresses, the topic's
static-topic mapping, its ORDER_TOPIC_CONFIG entry, the brokers' deadlines (expired ones are
hidden), and two settings (orderMessageEnable, supportActingMaster). Every script that changes one
of them appends an entry naming what it changed (``lua/README.md``, "Change log"); this module maps
that entry to the routes it touches:

=================================  ==========================================================
entry                              routes touched
=================================  ==========================================================
registerQueues                     topics in ``upserted``, ``removed``, ``mapped``
cleanQueues                        topics in ``upserted``/``removed``, and routes showing the broker
wipePerm, addPerm, topicRegister   topics in ``upserted`` (and ``topic``)
topicDelete                        ``topic``
register with routeChanged=1       routes showing the broker name (BrokerData, session, deadline,
                                   filter servers changed)
heartbeat with revived=1           routes showing the broker name, or hiding it as expired
unregister, close, expire          routes showing the broker name, or hiding it
kvPut/kvDelete ORDER_TOPIC_CONFIG  the topic named by ``key``
config                             every route
=================================  ==========================================================

Deadlines moving later (heartbeats) change no route: a cached route already expires at the
earliest deadline it shows. The property test ``tests/integration/test_route_cache_rule.py`` drives
every write code through two caching workers and checks their answers against a worker without a
cache, so a script that changes a route without saying so fails it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import msgspec

from namesrv.domain.codes import ORDER_TOPIC_CONFIG
from namesrv.store.changelog import EventKind

TOPIC_EVENTS = frozenset(
    {
        EventKind.REGISTER_QUEUES,
        EventKind.CLEAN_QUEUES,
        EventKind.WIPE_PERM,
        EventKind.ADD_PERM,
        EventKind.TOPIC_REGISTER,
    }
)
BROKER_EVENTS = frozenset({EventKind.UNREGISTER, EventKind.CLOSE, EventKind.EXPIRE})


@dataclass(frozen=True)
class RouteImpact:
    topics: tuple[str, ...] = ()
    broker: str | None = None  # routes that show this broker name or left it out as expired
    everything: bool = False

    @property
    def none(self) -> bool:
        return not self.topics and self.broker is None and not self.everything


NO_IMPACT = RouteImpact()


class _LastImpact:
    """The impact of the entry the feed is applying: the feed hands one read-only ``fields``
    mapping to every listener in turn (the route cache, the watch hub), and a heal's entries
    name 10,000 topics each, a million in all at the RIP-29 shape, decoded once per listener
    before. Only a read-only mapping is remembered (a dict could change between two calls), and
    it is held, so the identity check cannot match a new one at the same address."""

    def __init__(self) -> None:
        self.fields: Mapping[str, str] | None = None
        self.kind = ""
        self.impact = NO_IMPACT


_last = _LastImpact()


def route_impact(kind: str, fields: Mapping[str, str]) -> RouteImpact:
    """The routes a change-log entry of ``kind`` with ``fields`` can have changed."""
    if _last.fields is fields and _last.kind == kind:
        return _last.impact
    impact = _impact_of(kind, fields)
    if type(fields) is MappingProxyType:
        _last.fields, _last.kind, _last.impact = fields, kind, impact
    return impact


def _impact_of(kind: str, fields: Mapping[str, str]) -> RouteImpact:
    if kind in TOPIC_EVENTS:
        broker = fields.get("brokerName") if kind == EventKind.CLEAN_QUEUES else None
        return RouteImpact(topics=_topics_of(fields), broker=broker)
    if kind == EventKind.TOPIC_DELETE:
        return RouteImpact(topics=(fields.get("topic", ""),))
    if kind in BROKER_EVENTS or _broker_appears(kind, fields):
        return RouteImpact(broker=fields.get("brokerName", ""))
    if kind in (EventKind.KV_PUT, EventKind.KV_DELETE) and fields.get("namespace") == ORDER_TOPIC_CONFIG:
        return RouteImpact(topics=(fields.get("key", ""),))
    if kind == EventKind.CONFIG:
        return RouteImpact(everything=True)
    return NO_IMPACT


def _broker_appears(kind: str, fields: Mapping[str, str]) -> bool:
    """A registration that changed what routes show of the broker, or a heartbeat that revived a
    broker past its deadline: routes may now show it differently."""
    if kind == EventKind.REGISTER:
        return fields.get("routeChanged") == "1"
    return kind == EventKind.HEARTBEAT and fields.get("revived") == "1"


# Only the topic of each upserted pair is needed. registerQueues pairs each topic with the index
# of its QueueData (a number); the other scripts with the QueueData itself, which stays unparsed
# bytes. Every worker applies a new 10,000-topic broker's entries on its event loop: the numbers
# decode in 0.9 ms per 10,000 against 1.5 ms as bytes, and parsing each QueueData into a dict took
# 2.8 ms.
_INDEXED = msgspec.json.Decoder(list[tuple[str, int]])
_UPSERTED = msgspec.json.Decoder(list[tuple[str, msgspec.Raw]])
_NAMES = msgspec.json.Decoder(list[str])


def _topics_of(fields: Mapping[str, str]) -> tuple[str, ...]:
    """Each topic once. Each list an entry carries names a topic once (a script writes each
    topic of its loop once): only topics from more than one list are de-duplicated, which saves
    the watch hub a pass over a heal's million topics."""
    lists: list[list[str]] = []
    upserted = fields.get("upserted")
    if upserted:
        try:
            lists.append([topic for topic, _ in _INDEXED.decode(upserted)])
        except msgspec.ValidationError:  # QueueData objects, or an entry of an older release
            lists.append([topic for topic, _ in _UPSERTED.decode(upserted)])
    for name in ("removed", "mapped"):
        listed = fields.get(name)
        if listed and listed.startswith("["):
            lists.append(_NAMES.decode(listed))
    topic = fields.get("topic")
    if topic:
        lists.append([topic])
    named = [names for names in lists if names]
    if len(named) == 1:
        return tuple(named[0])
    return tuple(dict.fromkeys(topic for names in named for topic in names))
