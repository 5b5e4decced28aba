"""Small, exact change logs for the Spark tests, and the plumbing to turn them into events."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from namesrv.pipeline import dedup, parse
from namesrv.pipeline.synth import QD, MemoryLog, Registry

T0 = 1_793_491_200_000  # 2026-11-01T00:00:00Z
S = 1_000  # one second in ms
QUEUE: QD = (6, 8, 8, 0)


def lines_df(spark: SparkSession, lines: Sequence[str], source: str = "mem.jsonl") -> DataFrame:
    return spark.createDataFrame([(line, source) for line in lines], "value string, source_file string")


def parse_lines(
    spark: SparkSession, lines: Sequence[str], max_skew_ms: int = 60_000
) -> tuple[DataFrame, DataFrame]:
    """(events, rejects) exactly as stage 1 of the job builds them, each materialized as the job's
    stage 2 reads them back from Parquet: an answer built on the in-memory parse would repeat
    the parse's plan (~70 KB) in every branch that reads the events, and a 2 MB plan took a
    minute to plan and run where the same answer on materialized events takes a few seconds."""
    checked = lines_df(spark, lines).transform(parse.check_lines(max_skew_ms)).cache()
    events, duplicates = dedup.split_duplicates(dedup.valid_lines(checked))
    rejects = dedup.line_rejects(checked).unionByName(duplicates)
    return events.localCheckpoint(), rejects.localCheckpoint()


def new_log() -> tuple[Registry, MemoryLog]:
    log = MemoryLog()
    return Registry(log, chunk=2), log
