"""Lines → events + rejects: every bad line is counted with its reason, nothing crashes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType
from pyspark.testing import assertDataFrameEqual

from namesrv.pipeline import dedup, io, parse
from namesrv.pipeline import schemas as S
from tests.pipeline.helpers import QUEUE, T0, new_log, parse_lines
from tests.pipeline.helpers import S as SEC

pytestmark = pytest.mark.spark
A = "10.0.0.1:10911"
DAY = dt.date(2026, 11, 1)


def entry(entry_id: str, **fields: str) -> str:
    return json.dumps({"id": entry_id, "fields": fields})


def heartbeat_fields(ts: int) -> dict[str, str]:
    return {
        "kind": "heartbeat",
        "ts": str(ts),
        "cluster": "c1",
        "brokerName": "broker-a",
        "brokerAddr": A,
        "brokerId": "0",
        "epoch": "1",
        "deadline": str(ts + 10 * SEC),
        "timeoutMillis": "10000",
        "source": "904",
        "via": "w1",
    }


def test_valid_events_are_typed(spark: SparkSession) -> None:
    reg, log = new_log()
    reg.register(T0, "c1", A, "broker-a", 0, {"TopicA": QUEUE}, timeout=10 * SEC)
    reg.heartbeat(T0 + SEC, "c1", A)
    reg.unregister(T0 + 2 * SEC, "c1", A, "broker-a", 0)
    events, rejects = parse_lines(spark, log.lines)
    assert rejects.count() == 0
    cols = [
        "id",
        "ts",
        "day",
        "kind",
        "broker_id",
        "epoch",
        "deadline",
        "timeout_ms",
        "new_session",
        "name_removed",
    ]
    expected = spark.createDataFrame(
        [
            (f"{T0}-0", T0, DAY, "register", 0, 1, T0 + 10 * SEC, 10_000, True, None),
            (f"{T0}-1", T0, DAY, "registerQueues", None, 1, None, None, None, None),
            (f"{T0 + SEC}-0", T0 + SEC, DAY, "heartbeat", 0, 1, T0 + 11 * SEC, 10_000, None, None),
            (f"{T0 + 2 * SEC}-0", T0 + 2 * SEC, DAY, "unregister", 0, 1, None, None, None, True),
            (f"{T0 + 2 * SEC}-1", T0 + 2 * SEC, DAY, "cleanQueues", None, None, None, None, None, None),
        ],
        "id string, ts long, day date, kind string, broker_id long, epoch long, deadline long, "
        "timeout_ms long, new_session boolean, name_removed boolean",
    )
    assertDataFrameEqual(events.select(*cols), expected)
    queues = events.select(
        "kind", F.col("queue_upserts")["topic"].alias("t"), "queue_removals", "broker_data"
    )
    rows = {r["kind"]: r for r in queues.collect()}
    assert rows["registerQueues"]["t"] == ["TopicA"]
    assert rows["cleanQueues"]["queue_removals"] == ["TopicA"]
    assert rows["register"]["broker_data"]["broker_addrs"] == {"0": A}
    assert rows["unregister"]["broker_data"] is None  # "" = the name is gone


def test_every_bad_line_is_rejected_with_a_reason(spark: SparkSession) -> None:
    good = entry(f"{T0}-0", **heartbeat_fields(T0))
    no_deadline = {k: v for k, v in heartbeat_fields(T0 + 3 * SEC).items() if k != "deadline"}
    lines = [
        good,
        "garbage {",
        "   ",
        entry("x-1", **heartbeat_fields(T0)),
        entry(f"{T0 + SEC}-0", kind="brokerTeleport", ts=str(T0 + SEC)),
        entry(f"{T0 + 2 * SEC}-0", **no_deadline),
        entry(f"{T0 + 3 * SEC}-0", **(heartbeat_fields(T0) | {"ts": "soon"})),
        entry(
            f"{T0 + 4 * SEC}-0",
            kind="register",
            ts=str(T0 + 4 * SEC),
            result="maybe",
            cluster="c1",
            brokerName="broker-a",
            brokerAddr=A,
            brokerId="0",
        ),
        entry(
            f"{T0 + 5 * SEC}-0",
            kind="registerQueues",
            ts=str(T0 + 5 * SEC),
            cluster="c1",
            brokerName="broker-a",
            brokerAddr=A,
            upserted="[[not json",
            removed="[]",
        ),
        entry(f"{T0 + 6 * SEC}-0", **heartbeat_fields(T0 + 6 * SEC - 120 * SEC)),  # ts far from the id
        good,  # the same line twice
        entry(f"{T0 + 7 * SEC}-0", **heartbeat_fields(T0 + 7 * SEC)),
        entry(
            f"{T0 + 7 * SEC}-0", **(heartbeat_fields(T0 + 7 * SEC) | {"via": "w2"})
        ),  # same id, other content
    ]
    events, rejects = parse_lines(spark, lines)
    assert sorted(r["id"] for r in events.select("id").collect()) == [f"{T0}-0", f"{T0 + 7 * SEC}-0"]
    expected = spark.createDataFrame(
        [
            (None, "corrupt_line", "not a JSON object {id, fields{...}}"),
            (None, "corrupt_line", "empty line"),
            ("x-1", "bad_id", "id=x-1"),
            (f"{T0 + SEC}-0", "unknown_kind", "kind=brokerTeleport"),
            (f"{T0 + 2 * SEC}-0", "missing_field", "deadline"),
            (f"{T0 + 3 * SEC}-0", "bad_number", "ts"),
            (f"{T0 + 4 * SEC}-0", "bad_value", "result"),
            (f"{T0 + 5 * SEC}-0", "bad_json", "upserted"),
            (
                f"{T0 + 6 * SEC}-0",
                "out_of_order",
                f"ts {T0 - 114 * SEC} is 120000 ms away from its stream id time",
            ),
            (f"{T0}-0", "duplicate", "identical copy 2 of 2"),
            (
                f"{T0 + 7 * SEC}-0",
                "duplicate_conflict",
                "same id as a kept line with different content (2 variants)",
            ),
        ],
        "id string, reason string, detail string",
    )
    assertDataFrameEqual(rejects.select("id", "reason", "detail"), expected)
    raw = {r["reason"]: r["raw"] for r in rejects.filter(F.col("reason") == "corrupt_line").collect()}
    assert raw["corrupt_line"] in ("garbage {", "   ")  # the line itself is kept for operators
    assert rejects.filter(F.col("source_file") != "mem.jsonl").count() == 0


def test_queue_data_by_index_reads_as_written_out(spark: SparkSession) -> None:
    """registerQueues names each upsert's QueueData by its index in ``queueDatas``; older entries
    (and the other kinds) write it out. Both read the same; an index that names none is
    rejected."""
    qd8 = '{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}'
    qd4 = '{"brokerName":"broker-a","perm":4,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}'
    base = {
        "kind": "registerQueues",
        "cluster": "c1",
        "brokerName": "broker-a",
        "brokerAddr": A,
        "removed": "[]",
    }

    def queues(i: int, **fields: str) -> str:
        return entry(f"{T0 + i * SEC}-0", **(base | {"ts": str(T0 + i * SEC)} | fields))

    lines = [
        queues(0, upserted=f'[["A",{qd8}],["B",{qd4}],["C",{qd8}]]'),
        queues(1, upserted='[["A",0],["B",1],["C",0]]', queueDatas=f"[{qd8},{qd4}]"),
        queues(2, upserted='[["A",0],["B",2]]', queueDatas=f"[{qd8},{qd4}]"),
        queues(3, upserted='[["A",0]]'),
    ]
    events, rejects = parse_lines(spark, lines)
    written = [
        [(q["topic"], q["perm"], q["read_queue_nums"]) for q in r["queue_upserts"]]
        for r in events.orderBy("id").collect()
    ]
    assert written == [[("A", 6, 8), ("B", 4, 4), ("C", 6, 8)]] * 2
    assert sorted((r["id"], r["reason"], r["detail"]) for r in rejects.collect()) == [
        (f"{T0 + 2 * SEC}-0", "bad_json", "upserted"),
        (f"{T0 + 3 * SEC}-0", "bad_json", "upserted"),
    ]


def test_a_parquet_export_written_before_queue_datas_still_reads(spark: SparkSession, tmp_path: Path) -> None:
    """Files of an earlier export have no ``queueDatas`` column: read with today's schema it is
    null, and the QueueData written in place parses as before."""
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    before = [f for f in S.EVENT_FIELDS if f != "queueDatas"]
    qd = '{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}'
    fields = {f: None for f in before} | {
        "kind": "registerQueues",
        "ts": str(T0),
        "cluster": "c1",
        "brokerName": "broker-a",
        "brokerAddr": A,
        "upserted": f'[["A",{qd}]]',
        "removed": "[]",
    }
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("fields", pa.struct([(f, pa.string()) for f in before])),
            ("other_fields", pa.map_(pa.string(), pa.string())),
        ]
    )
    rows = [{"id": f"{T0}-0", "fields": fields, "other_fields": None}]
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp_path / "old.parquet")
    checked = io.read_parquet_lines(spark, [str(tmp_path)]).transform(parse.parquet_records())
    checked = checked.transform(parse.check_records())
    events = dedup.valid_lines(checked).collect()
    assert [[(q["topic"], q["read_queue_nums"]) for q in r["queue_upserts"]] for r in events] == [[("A", 8)]]


def test_out_of_order_tolerance_is_configurable(spark: SparkSession) -> None:
    line = entry(f"{T0}-0", **heartbeat_fields(T0 - 5 * SEC))
    assert parse_lines(spark, [line], max_skew_ms=10_000)[1].count() == 0
    assert parse_lines(spark, [line], max_skew_ms=1_000)[1].count() == 1


def test_parquet_rows_are_checked_like_lines(spark: SparkSession) -> None:
    """Rows of the Parquet export go through the same checks: no text, so nothing is corrupt,
    but a missing id, fields or field, a bad number or a duplicate is rejected the same way."""
    good = heartbeat_fields(T0)
    rows = [
        (f"{T0}-0", good),
        (None, good),
        (f"{T0 + SEC}-0", None),
        (f"{T0 + 2 * SEC}-0", heartbeat_fields(T0 + 2 * SEC) | {"kind": "brokerTeleport"}),
        (f"{T0 + 3 * SEC}-0", heartbeat_fields(T0 + 3 * SEC) | {"deadline": "soon"}),
        (f"{T0}-0", good),  # the same entry twice
    ]
    schema = StructType(
        [*S.PARQUET_LINE.fields, StructField("source_file", S.STR)]  # what io.read_parquet_lines gives
    )
    df = spark.createDataFrame([(i, f, "a.parquet") for i, f in rows], schema)
    checked = df.transform(parse.parquet_records()).transform(parse.check_records()).cache()
    events, duplicates = dedup.split_duplicates(dedup.valid_lines(checked))
    rejects = dedup.line_rejects(checked).unionByName(duplicates)
    assert [r["id"] for r in events.collect()] == [f"{T0}-0"]
    expected = spark.createDataFrame(
        [
            (None, "missing_field", "id"),
            (f"{T0 + SEC}-0", "missing_field", "fields"),
            (f"{T0 + 2 * SEC}-0", "unknown_kind", "kind=brokerTeleport"),
            (f"{T0 + 3 * SEC}-0", "bad_number", "deadline"),
            (f"{T0}-0", "duplicate", "identical copy 2 of 2"),
        ],
        "id string, reason string, detail string",
    )
    assertDataFrameEqual(rejects.select("id", "reason", "detail"), expected)
    raw = {r["reason"] + ":" + (r["detail"] or ""): r["raw"] for r in rejects.collect()}
    # the raw form of a row is the line the JSON export would have written
    assert json.loads(raw["missing_field:fields"]) == {"id": f"{T0 + SEC}-0"}
    assert json.loads(raw["bad_number:deadline"]) == {
        "id": f"{T0 + 3 * SEC}-0",
        "fields": heartbeat_fields(T0 + 3 * SEC) | {"deadline": "soon"},
    }


def test_a_duplicated_entry_keeps_the_same_copy_in_both_formats(spark: SparkSession) -> None:
    """The kept copy of an ID is chosen by a hash of the parsed entry, not of the text: the
    same entries as spaced JSON text or as Parquet rows keep the same copy."""
    a = heartbeat_fields(T0)
    b = a | {"via": "w2"}
    lines = [json.dumps({"id": f"{T0}-0", "fields": f}, indent=1).replace("\n", "") for f in (a, b)]
    from_text, _ = parse_lines(spark, lines)
    schema = StructType([*S.PARQUET_LINE.fields, StructField("source_file", S.STR)])
    df = spark.createDataFrame([(f"{T0}-0", f, "p") for f in (b, a)], schema)
    # cached like the job's staged lines: deduplication reads the checked rows more than once
    checked = df.transform(parse.parquet_records()).transform(parse.check_records()).cache()
    from_rows, _ = dedup.split_duplicates(dedup.valid_lines(checked))
    assertDataFrameEqual(from_rows, from_text)
