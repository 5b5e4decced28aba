"""The values a worker keeps by the hundred thousand are invisible to Python's cyclic GC: a full
collection walks every tracked object while the event loop waits, so each long-lived tracked object
lengthens a pause that every lookup queued behind it sees (a worker with four 10,000-topic brokers
and 10,000 cached routes tracked 154k objects: 48 ms per full collection)."""

from __future__ import annotations

import gc

from namesrv.domain.model import BrokerData, DataVersion, QueueData, RawBody, TopicConfig, TopicRouteData
from namesrv.protocol.body_delta import RegisterBodyDecoder
from namesrv.protocol.fastjson import Dialect
from namesrv.registry.route_lookups import CachedRoute
from namesrv.sim.bodies import register_body_json
from namesrv.sim.broker import topic_configs


def _route() -> TopicRouteData:
    return TopicRouteData(
        (QueueData("broker-a", 6, 8, 0, 8), QueueData("broker-b", 6, 8, 0, 8)),
        (
            BrokerData("C", "broker-a", {0: "10.0.0.1:10911"}),
            BrokerData("C", "broker-b", {0: "10.0.0.2:10911"}),
        ),
    )


def test_the_domain_values_are_not_tracked() -> None:
    for value in (
        TopicConfig("T", attributes={"a": "b"}),
        QueueData("broker-a", 6, 8, 0, 8),
        BrokerData("C", "broker-a", {0: "10.0.0.1:10911"}),
        DataVersion(1, 0, 2),
        _route(),
    ):
        assert not gc.is_tracked(value), type(value).__name__


def test_a_cached_route_and_its_encodings_leave_nothing_for_a_full_collection() -> None:
    entry = CachedRoute(_route(), expires_at=1e18)
    entry.encoded(Dialect.STANDARD)
    entry.encoded(Dialect.DEFAULT)
    entry.zone_encoded("z1")
    gc.collect()  # tuples of untracked values are untracked by the first collection that sees them
    held = [entry, entry.data, entry.data.queueDatas, entry.data.brokerDatas, entry.zones]
    assert [gc.is_tracked(x) for x in held] == [False] * len(held)


def test_a_long_route_kept_in_shared_pieces_leaves_nothing_for_a_full_collection() -> None:
    from tests.unit.test_route_encoding import BIG

    entry = CachedRoute(BIG, expires_at=1e18)
    entry.encoded(Dialect.STANDARD)
    gc.collect()
    assert isinstance(entry.standard, tuple)
    assert [gc.is_tracked(entry), gc.is_tracked(entry.standard)] == [False, False]


def test_a_decoded_register_body_keeps_its_topic_configs_untracked() -> None:
    body = register_body_json(topic_configs([f"T{i}" for i in range(50)]), DataVersion(1, 0, 2))
    decoded = RegisterBodyDecoder().decode(RawBody(body, 479, False), "C/10.0.0.1:10911", 0)
    table = decoded.wrapper.topicConfigTable
    assert len(table) == 50
    assert not any(gc.is_tracked(tc) for tc in table.values())


def test_the_rendered_texts_kept_for_uncached_reads_leave_nothing_for_a_full_collection() -> None:
    from namesrv.protocol import render
    from tests.unit.test_route_encoding import BIG

    for dialect in Dialect:
        CachedRoute(BIG, expires_at=1e18).encoded(dialect)
    gc.collect()
    kept = [*render._queue_texts.items(), *render._broker_texts.items()]
    assert len(kept) >= 400  # BIG's 100 queues and 100 brokers, in both dialects
    assert [x for x in kept if gc.is_tracked(x[0]) or gc.is_tracked(x[1])] == []
