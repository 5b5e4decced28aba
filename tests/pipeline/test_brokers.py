"""Sessions, visibility, heartbeat gaps, flapping and daily availability on one exact log."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from namesrv.pipeline import brokers
from namesrv.pipeline import schemas as S
from tests.pipeline.helpers import QUEUE, T0, new_log, parse_lines
from tests.pipeline.helpers import S as SEC

pytestmark = pytest.mark.spark
A, B = "10.0.0.1:10911", "10.0.0.2:10911"  # broker-a master and slave
END = T0 + 65 * SEC


def at(seconds: float) -> int:
    return T0 + int(seconds * SEC)


@pytest.fixture(scope="module")
def events(spark: SparkSession) -> DataFrame:
    """broker-a's master lives four sessions: unregistered, closed (with a late heartbeat and a
    stale close after it), lapsed (re-registered past its deadline), open at the end; its slave
    stops heartbeating and is expired by a sweep two seconds after its deadline."""
    reg, log = new_log()
    topics = {"TopicA": QUEUE}
    reg.register(at(0), "c1", A, "broker-a", 0, topics, timeout=10 * SEC)
    reg.register(at(1), "c1", B, "broker-a", 1, topics, timeout=10 * SEC)
    reg.heartbeat(at(3), "c1", A)
    reg.heartbeat(at(5), "c1", B)
    reg.unregister(at(8), "c1", A, "broker-a", 0)
    reg.heartbeat(at(9), "c1", B)
    epoch = reg.register(at(20), "c1", A, "broker-a", 0, topics, timeout=10 * SEC)
    reg.sweep(at(21))  # B: deadline 19
    reg.heartbeat(at(22), "c1", A)
    reg.heartbeat(at(33), "c1", A)  # 1 s after its deadline: hidden for a second, session kept
    reg.unregister(at(35), "c1", A, "broker-a", 0, reason="close", fence=epoch)
    reg.unregister(at(36), "c1", A, "broker-a", 0, reason="close", fence=epoch)  # stale: fenced
    reg.register(at(40), "c1", A, "broker-a", 0, topics, timeout=10 * SEC)
    reg.register(at(60), "c1", A, "broker-a", 0, topics, timeout=10 * SEC)  # deadline 50 passed
    reg.heartbeat(at(65), "c1", A)
    ev, rejects = parse_lines(spark, log.lines)
    assert rejects.count() == 0
    return ev.cache()


@pytest.fixture(scope="module")
def timeline(events: DataFrame) -> DataFrame:
    return brokers.member_timeline(events).cache()


def test_sessions_and_how_they_ended(spark: SparkSession, timeline: DataFrame) -> None:
    expected = spark.createDataFrame(
        [
            # cluster, addr, no, name, id, start, before_log, end, kind, end event, last refresh,
            # last deadline, timeout, refreshes, duration
            (
                "c1",
                A,
                1,
                "broker-a",
                0,
                at(0),
                False,
                at(8),
                "unregister",
                at(8),
                at(3),
                at(13),
                10_000,
                2,
                8_000,
            ),
            (
                "c1",
                A,
                2,
                "broker-a",
                0,
                at(20),
                False,
                at(35),
                "close",
                at(35),
                at(33),
                at(43),
                10_000,
                3,
                15_000,
            ),
            (
                "c1",
                A,
                3,
                "broker-a",
                0,
                at(40),
                False,
                at(50),
                "lapsed",
                None,
                at(40),
                at(50),
                10_000,
                1,
                10_000,
            ),
            ("c1", A, 4, "broker-a", 0, at(60), False, None, "open", None, at(65), at(75), 10_000, 2, None),
            (
                "c1",
                B,
                1,
                "broker-a",
                1,
                at(1),
                False,
                at(19),
                "expire",
                at(21),
                at(9),
                at(19),
                10_000,
                3,
                18_000,
            ),
        ],
        S.SESSIONS,
    )
    assertDataFrameEqual(timeline.transform(brokers.sessions()), expected)


def test_visible_intervals_follow_deadlines_and_next_events(spark: SparkSession, timeline: DataFrame) -> None:
    rows = [(A, 0, 0, 8), (A, 0, 20, 32), (A, 0, 33, 35), (A, 0, 40, 50), (A, 0, 60, 65), (B, 1, 1, 19)]
    expected = spark.createDataFrame(
        [("c1", addr, "broker-a", bid, at(s), at(e)) for addr, bid, s, e in rows], S.UP_INTERVALS
    )
    assertDataFrameEqual(timeline.transform(brokers.up_intervals(END)), expected)


def test_heartbeat_gaps_against_the_timeout(spark: SparkSession, timeline: DataFrame) -> None:
    expected = spark.createDataFrame(
        [
            # A's gaps in its sessions: 3 s | 2 s, 11 s (late) | - | 5 s
            ("c1", A, "broker-a", 10_000, 8, 4, 3_000, 11_000, 11_000, 1.1, 1, True),
            ("c1", B, "broker-a", 10_000, 3, 2, 4_000, 4_000, 4_000, 0.4, 0, False),
        ],
        S.HEARTBEAT_GAPS,
    )
    assertDataFrameEqual(timeline.transform(brokers.heartbeat_gaps(0.75)), expected)
    histogram = spark.createDataFrame(
        [(0.2, 1), (0.3, 1), (0.4, 2), (0.5, 1), (1.1, 1)], S.HEARTBEAT_GAP_HISTOGRAM
    )
    assertDataFrameEqual(brokers.gap_histogram(timeline), histogram, checkRowOrder=False, atol=1e-9)


def test_flapping_counts_sessions_per_hour_above_the_bound(spark: SparkSession, timeline: DataFrame) -> None:
    sessions = timeline.transform(brokers.sessions())
    expected = spark.createDataFrame([("c1", A, "broker-a", T0, 4)], S.FLAPPING)
    assertDataFrameEqual(sessions.transform(brokers.flapping(3)), expected)
    assert sessions.transform(brokers.flapping(4)).count() == 0


def test_broker_daily_availability_and_removals(
    spark: SparkSession, events: DataFrame, timeline: DataFrame
) -> None:
    sessions = timeline.transform(brokers.sessions())
    up = timeline.transform(brokers.up_intervals(END))
    day = dt.date(2026, 11, 1)
    expected = spark.createDataFrame(
        [
            (day, "c1", "broker-a", A, 65_000, 37_000, 37 / 65, 4, 1, 1, 0, 1, 1),
            (day, "c1", "broker-a", B, 64_000, 18_000, 18 / 64, 1, 0, 0, 1, 0, 0),
        ],
        S.BROKER_DAILY,
    )
    actual = brokers.broker_daily(events, sessions, up, T0, END)
    assertDataFrameEqual(actual, expected, rtol=1e-9)
