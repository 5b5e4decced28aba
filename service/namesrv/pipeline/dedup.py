"""Valid lines → one event per stream ID, and every rejected line in the ``rejects`` schema.

:func:`split_duplicates` answers "did the export (or a copy of it) hold the same entry twice?";
:func:`line_rejects` collects the lines :mod:`namesrv.pipeline.parse` refused.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from namesrv.pipeline import schemas as S
from namesrv.pipeline.schemas import conform


def valid_lines(checked: DataFrame) -> DataFrame:
    return checked.filter(F.col("reject_reason").isNull())


def split_duplicates(valid: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Lines that passed every check → (events with one row per stream ID, duplicate rejects).

    Answers: did the export (or a copy of it) hold the same entry twice? The kept line of an ID
    is the one with the smallest line hash, so reruns keep the same line. Only IDs seen more
    than once are shuffled by ID (found with a slim count), so the common case costs one small
    aggregation."""
    counts = valid.groupBy("id").agg(
        F.count(F.lit(1)).alias("_copies"), F.count_distinct("line_hash").alias("_variants")
    )
    # Broadcast: only duplicated IDs (normally none) travel; the events themselves are not shuffled.
    dup_ids = F.broadcast(counts.filter(F.col("_copies") > 1))
    flagged = valid.join(dup_ids, "id", "left")
    unique = flagged.filter(F.col("_copies").isNull())
    dups = flagged.filter(F.col("_copies").isNotNull())
    w = Window.partitionBy("id").orderBy("line_hash", "source_file")
    ranked = dups.withColumn("_rank", F.row_number().over(w)).withColumn(
        "_kept_hash", F.first("line_hash").over(w)
    )
    kept = ranked.filter(F.col("_rank") == 1)
    events = unique.unionByName(kept.drop("_rank", "_kept_hash")).select(*S.EVENTS.fieldNames())
    extra = ranked.filter(F.col("_rank") > 1)
    conflict = F.col("line_hash") != F.col("_kept_hash")
    rejects = extra.select(
        F.col("id"),
        F.when(conflict, F.lit("duplicate_conflict")).otherwise(F.lit("duplicate")).alias("reason"),
        F.when(
            conflict,
            F.format_string(
                "same id as a kept line with different content (%d variants)", F.col("_variants")
            ),
        )
        .otherwise(F.format_string("identical copy %d of %d", F.col("_rank"), F.col("_copies")))
        .alias("detail"),
        F.col("kind"),
        F.col("ts"),
        F.col("day"),
        F.lit(None).cast("string").alias("raw"),
        F.col("source_file"),
    )
    return conform(events, S.EVENTS), conform(rejects, S.REJECTS)


def line_rejects(checked: DataFrame) -> DataFrame:
    """Every line that failed a check before deduplication, in the ``rejects`` schema."""
    bad = checked.filter(F.col("reject_reason").isNotNull())
    day = F.coalesce(F.col("day"), F.date_from_unix_date(F.floor(F.col("id_ms") / 86_400_000).cast("int")))
    return conform(
        bad.select(
            F.col("id"),
            F.col("reject_reason").alias("reason"),
            F.col("reject_detail").alias("detail"),
            F.col("kind"),
            F.col("ts"),
            day.alias("day"),
            F.col("raw"),
            F.col("source_file"),
        ),
        S.REJECTS,
    )
