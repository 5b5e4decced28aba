"""Topic writability, the route table as of an instant, and registry size on one exact log."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from namesrv.pipeline import brokers, registry_history, topics
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
    changes = topics.queue_changes(events)
    expected = spark.createDataFrame(
        [
            # master past its deadline at 15 s (no live master), swept at 17 s with its queues:
            # TopicOne has no route until broker-a registers again at 25 s. One interval, named
            # by the worst state it went through.
            ("TopicOne", at(15), at(25), 10_000, "no_route", False),
            ("TopicOne", at(30), at(40), 10_000, "no_writable_queue", False),  # write perm wiped
        ],
        S.TOPIC_UNWRITABLE,
    )
    actual = topics.topic_unwritable(changes, up, topics.topic_deletes(events), END)
    assertDataFrameEqual(actual, expected)


# The run: A heartbeats throughout; B (timeout 5 s) is silent after 19 s, passes its
# deadline at 24 s and is swept 212 ms later; C registers and unregisters twice (10 s and 15 s
# sessions); the log ends at 62 s.
PA, PB, PC = "10.0.2.1:10911", "10.0.2.2:10911", "10.0.2.3:10911"
ABC_END = T0 + 62 * SEC


def _abc_log(spark: SparkSession) -> DataFrame:
    reg, log = new_log()
    t = 10 * SEC
    script: list[tuple[float, Callable[[int], object]]] = [
        (0, lambda ts: reg.register(ts, "c1", PA, "pc-a", 0, {"TA": QUEUE, "Gone": QUEUE}, timeout=t)),
        (0, lambda ts: reg.register(ts, "c1", PB, "pc-b", 0, {"TB1": QUEUE, "TB2": QUEUE}, timeout=5 * SEC)),
        *[(s, lambda ts: reg.heartbeat(ts, "c1", PB)) for s in (5, 10, 15, 19)],
        (24.212, reg.sweep),
        (5, lambda ts: reg.register(ts, "c1", PC, "pc-c", 0, {"TC1": QUEUE, "TC2": QUEUE}, timeout=t)),
        (15, lambda ts: reg.unregister(ts, "c1", PC, "pc-c", 0)),
        (30, lambda ts: reg.register(ts, "c1", PC, "pc-c", 0, {"TC1": QUEUE, "TC2": QUEUE}, timeout=t)),
        (37, lambda ts: reg.heartbeat(ts, "c1", PC)),
        (45, lambda ts: reg.unregister(ts, "c1", PC, "pc-c", 0)),
        (50, lambda ts: reg.topic_delete(ts, "Gone")),  # an explicit delete: no interval
        *[(s, lambda ts: reg.heartbeat(ts, "c1", PA)) for s in (*range(5, 61, 5), 62)],
    ]
    for s, step in sorted(script, key=lambda item: item[0]):
        step(at(s))
    ev, rejects = parse_lines(spark, log.lines)
    assert rejects.count() == 0
    return ev


def test_topics_whose_brokers_left_have_no_route_until_a_queue_returns(spark: SparkSession) -> None:
    events = _abc_log(spark)
    up = brokers.member_timeline(events).transform(brokers.up_intervals(ABC_END))
    actual = topics.topic_unwritable(topics.queue_changes(events), up, topics.topic_deletes(events), ABC_END)
    expected = spark.createDataFrame(
        [
            # B's deadline (24 s) to the end of the log: 212 ms without a live master, then no
            # route at all once the sweep dropped its queues; still so when the log ends
            ("TB1", at(24), ABC_END, 38_000, "no_route", True),
            ("TB2", at(24), ABC_END, 38_000, "no_route", True),
            # C's topics between its sessions (15 s) and after the second (17 s)
            ("TC1", at(15), at(30), 15_000, "no_route", False),
            ("TC2", at(15), at(30), 15_000, "no_route", False),
            ("TC1", at(45), ABC_END, 17_000, "no_route", True),
            ("TC2", at(45), ABC_END, 17_000, "no_route", True),
        ],
        S.TOPIC_UNWRITABLE,
    )
    assertDataFrameEqual(actual, expected)


def test_an_interval_that_ended_at_the_last_event_is_not_open(spark: SparkSession) -> None:
    reg, log = new_log()
    reg.register(at(0), "c1", PA, "pc-a", 0, {"TA": QUEUE}, timeout=60 * SEC)
    reg.change_perm(at(10), "pc-a", wipe=True)
    reg.change_perm(at(20), "pc-a", wipe=False)  # the log's last event restores writability
    events, _ = parse_lines(spark, log.lines)
    end = at(20)
    up = brokers.member_timeline(events).transform(brokers.up_intervals(end))
    actual = topics.topic_unwritable(topics.queue_changes(events), up, topics.topic_deletes(events), end)
    expected = spark.createDataFrame(
        [("TA", at(10), at(20), 10_000, "no_writable_queue", False)], S.TOPIC_UNWRITABLE
    )
    assertDataFrameEqual(actual, expected)


def _route(as_of: float, rows: list[tuple[str, str, str, int]]) -> list[tuple[object, ...]]:
    addr = {"broker-a": A, "broker-b": C}
    return [
        (at(as_of), topic, name, "c1", {0: addr[name]}, None, False, perm, 8, 8, 0)
        if name
        else (at(as_of), topic, "", None, None, None, None, None, None, None, None)
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
        # TopicOne (no other broker) has no route at all: one row without a broker
        (16, [("TopicOne", "", "", 0), ("TopicTwo", "broker-b", C, 6)]),
        # 20 s: swept with its queues at 17 s, TopicOne still has no route (not deleted)
        (20, [("TopicOne", "", "", 0), ("TopicTwo", "broker-b", C, 6)]),
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
    assertDataFrameEqual(events.transform(registry_history.route_as_of(at(as_of))), expected)


def test_registry_size_at_the_end_of_each_bucket(
    spark: SparkSession, events: DataFrame, up: DataFrame
) -> None:
    changes = topics.queue_changes(events)
    # bucket, clusters, names, visible brokers, topics, queues, write queues at its end, then
    # the same at their peak inside the bucket
    full = (1, 2, 2, 2, 3, 24)
    expected = spark.createDataFrame(
        [
            (at(0), at(10), *full, *full),
            # broker-a expired at 15 s (hidden), its name and queues cleaned at 17 s
            (at(10), at(20), 1, 1, 1, 1, 1, 8, *full),
            (at(20), at(30), *full, *full),  # back at 25 s
            (at(30), at(40), *full, *full),
            (at(40), at(50), *full, *full),
            (at(50), at(60), *full, *full),
        ],
        S.REGISTRY_SIZE,
    )
    actual = registry_history.registry_size(events, changes, up, 10 * SEC, T0, END)
    assertDataFrameEqual(actual, expected)


def test_log_span(spark: SparkSession, events: DataFrame) -> None:
    span = topics.log_span(events).collect()[0]
    assert (span["first_ts"], span["last_ts"], span["first_id"]) == (T0, END, f"{T0}-0")


def test_a_delete_in_one_cluster_leaves_the_topic_to_lose_its_route(spark: SparkSession) -> None:
    """DELETE_TOPIC limited to pc-a's cluster removes TB's queue there; TB lives on in pc-b's
    cluster until pc-b unregisters: from then on it has no route (not deleted)."""
    reg, log = new_log()
    reg.register(at(0), "c1", PA, "pc-a", 0, {"TB": QUEUE, "TA": QUEUE}, timeout=60 * SEC)
    reg.register(at(0), "c2", PB, "pc-b", 0, {"TB": QUEUE, "TX": QUEUE}, timeout=60 * SEC)
    reg._drop_queue("TB", "pc-a")
    reg.sink(at(5), "topicDelete", {"topic": "TB", "cluster": "c1", "brokerNames": '["pc-a"]'})
    reg.unregister(at(10), "c2", PB, "pc-b", 0)
    reg.heartbeat(at(20), "c1", PA)
    events, rejects = parse_lines(spark, log.lines)
    assert rejects.count() == 0
    end = at(20)
    up = brokers.member_timeline(events).transform(brokers.up_intervals(end))
    actual = topics.topic_unwritable(topics.queue_changes(events), up, topics.topic_deletes(events), end)
    expected = spark.createDataFrame(
        [("TB", at(10), end, 10_000, "no_route", True), ("TX", at(10), end, 10_000, "no_route", True)],
        S.TOPIC_UNWRITABLE,
    )
    assertDataFrameEqual(actual, expected)


def test_running_sums_carry_across_blocks_without_a_global_window(spark: SparkSession) -> None:
    # 10 buckets in blocks of 3: the carry table must add every earlier block's total
    values = [5, -2, 0, 7, 1, -4, 3, 0, 0, 9]
    rows = [(i * 10, v, 2 * v) for i, v in enumerate(values)]
    df = spark.createDataFrame(rows, "k long, a long, b long")
    out = registry_history.running_sums(df, "k", 10, ("a", "b"), block_keys=3)
    got = sorted((r["k"], r["a"], r["b"], r["_own_a"]) for r in out.collect())
    total, want = 0, []
    for i, v in enumerate(values):
        total += v
        want.append((i * 10, total, 2 * total, v))
    assert got == want
