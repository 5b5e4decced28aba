"""The job: ``run(spark, cfg)`` wires I/O and the pure transforms, stage by stage.

Stage 1 (ingest) turns the export's lines into the ``events`` and ``rejects`` tables. Stage 2
(answers) reads ``events`` back (columnar, so each answer reads only its columns) and writes one
Parquet table per answer. Only one-row results (the log's span, counts for the summary) are
collected to the driver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from namesrv.pipeline import brokers, dedup, io, parse, registry_history, topics
from namesrv.pipeline import schemas as S

log = logging.getLogger(__name__)
HOUR_MS = 3_600_000

# Every table the job writes, with its schema (docs/PIPELINE.md describes each).
TABLES: dict[str, StructType] = {
    "events": S.EVENTS,
    "rejects": S.REJECTS,
    "export_gaps": S.EXPORT_GAP,
    "log_span": S.LOG_SPAN,
    "sessions": S.SESSIONS,
    "up_intervals": S.UP_INTERVALS,
    "broker_daily": S.BROKER_DAILY,
    "flapping": S.FLAPPING,
    "heartbeat_gaps": S.HEARTBEAT_GAPS,
    "heartbeat_gap_histogram": S.HEARTBEAT_GAP_HISTOGRAM,
    "queue_changes": S.QUEUE_CHANGES,
    "topic_unwritable": S.TOPIC_UNWRITABLE,
    "registry_size": S.REGISTRY_SIZE,
    "route_as_of": S.ROUTE_AS_OF,
}


@dataclass(frozen=True)
class PipelineConfig:
    inputs: tuple[str, ...]
    output: str
    as_of_ms: tuple[int, ...] = ()
    flap_bound: int = 3  # more sessions than this starting in one hour = flapping
    risk_ratio: float = 0.75  # max heartbeat gap / timeout at or above this = at risk
    bucket_ms: int = HOUR_MS  # registry size resolution
    max_skew_ms: int = parse.DEFAULT_MAX_SKEW_MS
    from_events: bool = False  # skip stage 1: reuse <output>/events


@dataclass
class RunSummary:
    events: int = 0
    first_ts: int | None = None
    last_ts: int | None = None
    rejects: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def rejected(self) -> int:
        return sum(self.rejects.values())


@contextmanager
def _stage(summary: RunSummary, name: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    summary.seconds[name] = round(time.perf_counter() - started, 2)
    log.info("stage %s done in %.1f s", name, summary.seconds[name])


def ingest(spark: SparkSession, cfg: PipelineConfig) -> None:
    """Stage 1: lines → ``events`` (deduplicated, typed, partitioned by day) + ``rejects``.

    Every line is parsed and checked once and written once, to a staging folder partitioned by
    status: ``event`` is read back into the events table (one write, one schema), ``reject`` the
    rejects.
    IDs that occur on more than one line are found first by a cheap pass over the raw text (by
    hash); only the lines with such an ID (normally none) are set apart (``check``) and
    deduplicated afterwards, so the common case never shuffles the events."""
    checked, ids = _checked_records(spark, cfg)
    # Counted by a 64-bit hash of the ID: grouping 10M longs is much cheaper than 10M strings. A
    # collision only sets a line apart for the exact deduplication, which groups by the ID itself.
    repeated = ids.groupBy(_id_hash()).count().filter(F.col("count") > 1)
    repeated = repeated.select("_id_hash").persist(StorageLevel.MEMORY_AND_DISK)
    try:
        any_repeated = repeated.limit(1).count() > 0
        status = F.when(F.col("reject_reason").isNotNull(), F.lit("reject"))
        suspect = F.lit(False)
        if any_repeated:
            flags = F.broadcast(repeated.withColumn("_repeated", F.lit(True)))
            checked = checked.select("*", _id_hash()).join(flags, "_id_hash", "left")
            suspect = F.col("reject_reason").isNull() & F.coalesce(F.col("_repeated"), F.lit(False))
            status = status.when(suspect, F.lit("check"))
        status = status.otherwise(F.lit("event"))
        # The event rows' folder becomes the events table as it is: columns only rejects or
        # suspects need stay null there (a null Parquet column costs nothing to write), and
        # the line hash, 8 random bytes per row, is only computed where it is used.
        event = F.col("reject_reason").isNull() & ~suspect
        kept: list[Column | str] = [
            *S.EVENTS.fieldNames(),
            "raw",
            F.when(~event, F.col("source_file")).alias("source_file"),
            "reject_reason",
            "reject_detail",
            F.when(suspect, F.col("line_hash")).alias("line_hash"),
        ]
        staging = io.join(cfg.output, "_staging")
        _write(
            checked.select(*kept, status.alias("status")),
            cfg.output,
            "_staging",
            partition_by=("status", "day"),
        )
    finally:
        repeated.unpersist()
    bad = io.join(staging, "status=reject")
    rejects = (
        dedup.line_rejects(spark.read.schema(S.STAGED_REJECT).parquet(bad))
        if io.path_exists(spark, bad)
        else spark.createDataFrame([], S.REJECTS)
    )
    # The events table is written once, from Parquet reads of the staged rows: every file then
    # has exactly the EVENTS columns with one nullability (a read schema is all-nullable), so
    # pyarrow, pandas and DuckDB open the table as one dataset. Rewriting the staged Parquet is
    # cheap next to the parse, and leaves no staging-only columns in the table.
    events: DataFrame = spark.createDataFrame([], S.EVENTS)
    good = io.join(staging, "status=event")
    if io.path_exists(spark, good):
        events = spark.read.schema(S.EVENTS).parquet(good)
    suspects = io.join(staging, "status=check")
    if io.path_exists(spark, suspects):
        staged = spark.read.schema(S.STAGED_LINE).parquet(suspects)
        deduplicated, duplicates = dedup.split_duplicates(staged)
        events = events.unionByName(deduplicated)
        rejects = rejects.unionByName(duplicates)
    _write(S.conform(events, S.EVENTS), cfg.output, "events", partition_by=("day",))
    _write(rejects.coalesce(1), cfg.output, "rejects")
    io.delete_dir(spark, staging)
    _write(io.read_export_gaps(spark, cfg.inputs).coalesce(1), cfg.output, "export_gaps")


def _id_hash() -> Column:
    return F.xxhash64("id").alias("_id_hash")


def _checked_records(spark: SparkSession, cfg: PipelineConfig) -> tuple[DataFrame, DataFrame]:
    """(every input line or row checked, the ``id`` of each) for the formats present in the
    inputs. Each format is checked in its own branch, so a branch is one generated loop from
    the file scan to the write; the ids come from a cheap separate pass (a regex over the text,
    the ``id`` column alone of Parquet) used to find repeated IDs before the full check."""
    checked: list[DataFrame] = []
    ids: list[DataFrame] = []
    rows = io.read_parquet_lines(spark, cfg.inputs)
    if io.has_files(rows):
        checked.append(
            rows.transform(parse.parquet_records()).transform(parse.check_records(cfg.max_skew_ms))
        )
        ids.append(io.read_parquet_ids(spark, cfg.inputs))
    lines = io.read_lines(spark, cfg.inputs)
    if io.has_files(lines) or not checked:
        checked.append(lines.transform(parse.check_lines(cfg.max_skew_ms)))
        ids.append(io.line_ids(spark, cfg.inputs))
    return _union(checked), _union(ids)


def _union(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def _write(df: DataFrame, root: str, name: str, partition_by: tuple[str, ...] = ()) -> None:
    started = time.perf_counter()
    io.write_table(df, root, name, partition_by)
    log.info("table %s written in %.1f s", name, time.perf_counter() - started)


_CACHE_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"


def answers(spark: SparkSession, cfg: PipelineConfig, summary: RunSummary) -> None:
    """Stage 2: ``events`` → every answer table."""
    out = cfg.output
    events = io.read_table(spark, out, "events", S.EVENTS)
    span_df = topics.log_span(events)
    span = span_df.collect()[0]
    _write(spark.createDataFrame([span], S.LOG_SPAN).coalesce(1), out, "log_span")
    summary.events = int(span["events"])
    summary.first_ts, summary.last_ts = span["first_ts"], span["last_ts"]
    start, end = int(span["first_ts"] or 0), int(span["last_ts"] or 0)

    # The cached timeline is built once and scanned five times: uncompressed it builds faster.
    compressed = spark.conf.get(_CACHE_COMPRESSED, "true") or "true"
    spark.conf.set(_CACHE_COMPRESSED, "false")
    timeline = brokers.member_timeline(events).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        # Built before any answer is planned: only a materialized cache tells the planner that
        # it is partitioned and sorted by member and log order, so the answers that group or
        # scan by member read it as it is instead of shuffling and sorting it again.
        timeline.count()
        _write(timeline.transform(brokers.sessions()), out, "sessions")
        _write(timeline.transform(brokers.up_intervals(end)), out, "up_intervals")
        # repartition, not coalesce: the timeline is already partitioned by member, so the
        # aggregation needs no shuffle and coalesce(1) would pull the whole per-member scan and
        # the percentiles into one task (one core). The result is one row per member.
        gaps = timeline.transform(brokers.heartbeat_gaps(cfg.risk_ratio))
        _write(gaps.repartition(1), out, "heartbeat_gaps")
        _write(brokers.gap_histogram(timeline).coalesce(1), out, "heartbeat_gap_histogram")
        sessions = io.read_table(spark, out, "sessions", S.SESSIONS)
        up = io.read_table(spark, out, "up_intervals", S.UP_INTERVALS)
        _write(sessions.transform(brokers.flapping(cfg.flap_bound)).coalesce(1), out, "flapping")
        # repartition for the same reason: it reads the timeline, whose aggregation needs no shuffle
        daily = brokers.broker_daily(events, sessions, up, start, end, timeline)
        _write(daily.repartition(1), out, "broker_daily")
    finally:
        timeline.unpersist()
        spark.conf.set(_CACHE_COMPRESSED, compressed)

    _write(topics.queue_changes(events), out, "queue_changes")
    changes = io.read_table(spark, out, "queue_changes", S.QUEUE_CHANGES)
    deletes = topics.topic_deletes(events)
    _write(topics.topic_unwritable(changes, up, deletes, end), out, "topic_unwritable")
    size = registry_history.registry_size(events, changes, up, cfg.bucket_ms, start, end)
    _write(size.coalesce(1), out, "registry_size")

    routes: DataFrame = spark.createDataFrame([], S.ROUTE_AS_OF)
    for instant in cfg.as_of_ms:
        routes = routes.unionByName(events.transform(registry_history.route_as_of(instant)))
    _write(routes, out, "route_as_of")


def run(spark: SparkSession, cfg: PipelineConfig) -> RunSummary:
    """Run both stages (or only the answers with ``from_events``) and return a summary."""
    summary = RunSummary()
    if not cfg.from_events:
        with _stage(summary, "ingest"):
            ingest(spark, cfg)
    with _stage(summary, "answers"):
        answers(spark, cfg, summary)
    rejects = io.read_table(spark, cfg.output, "rejects", S.REJECTS)
    summary.rejects = {
        r["reason"]: int(r["n"])
        for r in rejects.groupBy("reason").agg(F.count(F.lit(1)).alias("n")).collect()
    }
    return summary
