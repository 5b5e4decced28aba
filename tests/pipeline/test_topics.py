"""Topic writability, the route table as of an instant, and registry size on one exact log."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from namesrv.pipeline import brokers, topics
from namesrv.pipeline import schemas as S
from tests.pipeline.helpers import QUEUE, T0, new_log, parse_lines
from tests.pipeline.helpers import S as SEC

pytestmark = pytest.mark.spark
A, C = "10.0.0.1:10911", "10.0.1.1:10911"  # masters of broker-a and broker-b
END = T0 + 50 * SEC


def at(seconds: float) -> int:
    return T0 + int(seconds * SEC)


@pytest.fixture(scope="module")
def events(spark: SparkSession) -> DataFrame:
    """TopicOne lives on broker-a only, TopicTwo on broker-a and broker-b. broker-a's master
    crashes (deadline at 15 s, swept at 17 s: its name and queues go), comes back at 25 s, and
    an admin wipes its write permission from 30 s to 40 s."""
    reg, log = new_log()
    t = 10 * SEC
    reg.register(at(0), "c1", A, "broker-a", 0, {"TopicOne": QUEUE, "TopicTwo": QUEUE}, timeout=t)
    reg.register(at(0), "c1", C, "broker-b", 0, {"TopicTwo": QUEUE}, timeout=t)
    for s in (5, 12, 19, 26, 33, 40, 47, 50):
        reg.heartbeat(at(s), "c1", C)
    reg.heartbeat(at(5), "c1", A)
    reg.sweep(at(17))
    reg.register(at(25), "c1", A, "broker-a", 0, {"TopicOne": QUEUE, "TopicTwo": QUEUE}, timeout=t)
    for s in (32, 38, 44, 48):
        reg.heartbeat(at(s), "c1", A)
    reg.change_perm(at(30), "broker-a", wipe=True)
    reg.change_perm(at(40), "broker-a", wipe=False)
    log.lines.sort(key=lambda line: line)  # file order does not matter: the stream ID orders
    ev, rejects = parse_lines(spark, log.lines)
    assert rejects.count() == 0
    return ev.cache()


@pytest.fixture(scope="module")
def up(events: DataFrame) -> DataFrame:
    return brokers.member_timeline(events).transform(brokers.up_intervals(END)).cache()


def test_writability_intervals_and_their_causes(
    spark: SparkSession, events: DataFrame, up: DataFrame
) -> None:
    intervals = topics.queue_changes(events).transform(topics.queue_intervals(END))
    expected = spark.createDataFrame(
        [
            ("TopicOne", at(15), at(17), 2_000, "no_live_master", False),  # master past its deadline
            ("TopicOne", at(30), at(40), 10_000, "no_writable_queue", False),  # write perm wiped
        ],
        S.TOPIC_UNWRITABLE,
    )
    assertDataFrameEqual(topics.topic_unwritable(intervals, up, END), expected)


def _route(as_of: float, rows: list[tuple[str, str, str, int]]) -> list[tuple[object, ...]]:
    addr = {"broker-a": A, "broker-b": C}
    return [
        (at(as_of), topic, name, "c1", {0: addr[name]}, None, False, perm, 8, 8, 0)
        for topic, name, _, perm in rows
    ]


@pytest.mark.parametrize(
    ("as_of", "rows"),
    [
        (
            10,
            [("TopicOne", "broker-a", A, 6), ("TopicTwo", "broker-a", A, 6), ("TopicTwo", "broker-b", C, 6)],
        ),
        # 16 s: broker-a is past its deadline but not swept yet: the read path hides it, and
        # TopicOne (no other broker) has no route at all
        (16, [("TopicTwo", "broker-b", C, 6)]),
        (
            31,
            [("TopicOne", "broker-a", A, 4), ("TopicTwo", "broker-a", A, 4), ("TopicTwo", "broker-b", C, 6)],
        ),
    ],
)
def test_route_as_of(
    spark: SparkSession, events: DataFrame, as_of: float, rows: list[tuple[str, str, str, int]]
) -> None:
    expected = spark.createDataFrame(_route(as_of, rows), S.ROUTE_AS_OF)
    assertDataFrameEqual(events.transform(topics.route_as_of(at(as_of))), expected)


def test_registry_size_at_the_end_of_each_bucket(
    spark: SparkSession, events: DataFrame, up: DataFrame
) -> None:
    changes = topics.queue_changes(events)
    expected = spark.createDataFrame(
        [
            # bucket, clusters, names, visible brokers, topics, queues, write queues
            (at(0), 1, 2, 2, 2, 3, 24),
            (at(10), 1, 1, 1, 1, 1, 8),  # broker-a expired at 15 s, its queues cleaned at 17 s
            (at(20), 1, 2, 2, 2, 3, 24),
            (at(30), 1, 2, 2, 2, 3, 24),
            (at(40), 1, 2, 2, 2, 3, 24),
            (at(50), 1, 2, 2, 2, 3, 24),
        ],
        S.REGISTRY_SIZE,
    )
    actual = topics.registry_size(events, changes, up, 10 * SEC, T0, END)
    assertDataFrameEqual(actual, expected)


def test_log_span(spark: SparkSession, events: DataFrame) -> None:
    span = topics.log_span(events).collect()[0]
    assert (span["first_ts"], span["last_ts"], span["first_id"]) == (T0, END, f"{T0}-0")
