"""A cached route's body: the same bytes as rendering it whole, kept in pieces shared between
routes when it is long (issue 27: 10,000 routes of the same 100 broker groups)."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from namesrv.domain.model import BrokerData, QueueData, TopicRouteData
from namesrv.protocol.fastjson import Dialect, dumps
from namesrv.protocol.render import (
    broker_data_obj,
    broker_data_text,
    queue_data_obj,
    queue_data_text,
    route_json,
)
from namesrv.registry.route_lookups import SPLIT_FROM_BYTES, CachedRoute, shared_route
from tests.unit.test_fastjson import MAPPING_INFO, ROUTE


def groups(count: int, zone: str | None = None) -> TopicRouteData:
    return TopicRouteData(
        queueDatas=tuple(QueueData(f"broker-{g:03d}", 6, 8, 0, 8) for g in range(count)),
        brokerDatas=tuple(
            BrokerData(
                "DefaultCluster",
                f"broker-{g:03d}",
                {0: f"10.0.{g}.1:10911", 1: f"10.0.{g}.2:10911", 2: f"10.0.{g}.3:10911"},
                zoneName=zone,
            )
            for g in range(count)
        ),
    )


BIG = groups(100, zone="zone-é/1")
TRICKY = replace(
    BIG,
    # texts that look like the keys the body is cut at, inside strings and maps before them
    filterServerTable={'10.0.0.1:10911"queueDatas":[': ('"brokerDatas":[',)},
    orderTopicConf='"queueDatas":[]',
    topicQueueMappingByBroker={"broker-000": MAPPING_INFO},
)


@pytest.mark.parametrize("route", [ROUTE, BIG, TRICKY, groups(1), TopicRouteData((), ())])
@pytest.mark.parametrize("dialect", list(Dialect))
def test_the_body_is_the_route_rendered_whole(route: TopicRouteData, dialect: Dialect) -> None:
    entry = CachedRoute(route, expires_at=1e18)
    assert entry.encoded(dialect) == route_json(route, dialect).encode()
    assert entry.encoded(dialect) == route_json(route, dialect).encode()  # and again, from what it kept


def test_a_short_body_is_kept_whole_and_a_long_one_in_pieces() -> None:
    short, long = CachedRoute(ROUTE, expires_at=1e18), CachedRoute(BIG, expires_at=1e18)
    short.encoded(Dialect.DEFAULT)
    long.encoded(Dialect.DEFAULT)
    assert len(route_json(ROUTE, Dialect.DEFAULT)) < SPLIT_FROM_BYTES <= len(route_json(BIG, Dialect.DEFAULT))
    assert isinstance(short.default, bytes)
    assert isinstance(long.default, tuple) and len(long.default) == 1 + 100 + 1 + 100 + 1


def test_routes_of_the_same_brokers_share_their_pieces() -> None:
    one = CachedRoute(replace(BIG, orderTopicConf="a"), expires_at=1e18)
    other = CachedRoute(replace(BIG, orderTopicConf="b"), expires_at=1e18)
    one.encoded(Dialect.STANDARD)
    other.encoded(Dialect.STANDARD)
    assert isinstance(one.standard, tuple) and isinstance(other.standard, tuple)
    shared = [a is b for a, b in zip(one.standard[1:-1], other.standard[1:-1], strict=True)]
    assert shared == [True] * 100 + [False] + [True] * 100  # all but the piece holding orderTopicConf


def test_alike_routes_share_one_tuple_of_pieces() -> None:
    """The RIP-29 shape: every topic's route is the same 100 groups, its body the same bytes."""
    one, other = CachedRoute(BIG, expires_at=1e18), CachedRoute(replace(BIG), expires_at=1e18)
    assert one.data is not other.data
    one.encoded(Dialect.DEFAULT)
    other.encoded(Dialect.DEFAULT)
    assert isinstance(one.default, tuple) and one.default is other.default


def test_routes_of_the_same_queues_and_brokers_share_their_tuples() -> None:
    """Parsed QueueData and BrokerData are shared already; the tuples of them are too, or each of
    10,000 routes of the same 100 groups keeps two tuples of its own."""
    again = replace(BIG, queueDatas=tuple(list(BIG.queueDatas)), brokerDatas=tuple(list(BIG.brokerDatas)))
    assert again.queueDatas is not BIG.queueDatas and again.brokerDatas is not BIG.brokerDatas
    one, other = shared_route(BIG), shared_route(again)
    assert one.queueDatas is other.queueDatas and one.brokerDatas is other.brokerDatas
    # equal queues are shared; brokers only when they are the same objects (a BrokerData holds a
    # dict: it is not hashable, and one of equal value is a different read)
    copies = groups(100, zone="zone-é/1")
    third = shared_route(copies)
    assert third.queueDatas is one.queueDatas and third.brokerDatas is not one.brokerDatas
    assert third == one and third.brokerDatas == one.brokerDatas


def test_a_memoized_broker_text_is_that_brokers_own() -> None:
    """Rendered BrokerData texts are kept by object identity: objects made and dropped one after
    another reuse ids, and each must still get its own text."""
    for g in range(3000):
        broker = BrokerData("DefaultCluster", f"broker-{g}", {0: f"10.1.{g % 250}.{g // 250}:10911"})
        text = broker_data_text(broker, Dialect.STANDARD)
        assert text == dumps(broker_data_obj(broker), Dialect.STANDARD)
        del broker


def test_queue_texts_are_rendered_by_value() -> None:
    for perm in (2, 4, 6):
        queue = QueueData("broker-a", perm, 8, 0, 8)
        assert queue_data_text(queue, Dialect.DEFAULT) == dumps(queue_data_obj(queue), Dialect.DEFAULT)
        assert f'"perm":{perm},' in queue_data_text(QueueData("broker-a", perm, 8, 0, 8), Dialect.DEFAULT)
