"""The registry over time, rebuilt from the ``events`` table: its size per time bucket, and the
route table as of any instant (what a live lookup would have answered). Queue and broker-name
history come from :mod:`.topics`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from namesrv.pipeline import schemas as S
from namesrv.pipeline.kinds import REMOVAL_KINDS
from namesrv.pipeline.schemas import conform
from namesrv.pipeline.topics import (
    ORDER,
    PERM_WRITE,
    Transform,
    name_states,
    queue_changes,
    topic_deletes,
    topic_existence,
)
from namesrv.store.changelog import EventKind as K


def _bucket(t: Column, bucket_ms: int) -> Column:
    return (F.floor(t / bucket_ms) * bucket_ms).cast("long")


def registry_size(
    events: DataFrame, changes: DataFrame, up: DataFrame, bucket_ms: int, log_start_ms: int, log_end_ms: int
) -> DataFrame:
    """``registry_size``: per time bucket [``bucket_start_ts``, ``bucket_end_ts``), the
    registry's size at the end of the bucket and its peak inside it (``peak_*``): clusters,
    broker names, visible brokers (members), topics (with at least one queue), queue entries and
    write queues (the sum of ``writeQueueNums``, whatever the queue's perm: a wiped broker's
    queues still count).

    Answers: how big was the registry over time, and when did it shrink? Counts are built from
    +1/-1 changes, so they are exact when the log starts with an empty registry; for a log whose
    head was trimmed they count only what the log shows (brokers reappear at their next
    registration, topics at their next queue change)."""
    # queues and write queues: per entry, the change in presence and write queue count
    w_entry = Window.partitionBy("topic", "broker_name").orderBy(*ORDER, "pos")
    q = changes.select(
        "topic",
        "broker_name",
        *ORDER,
        "pos",
        "ts",
        "present",
        F.when(F.col("present"), F.col("write_queue_nums")).otherwise(0).alias("_wq"),
    )
    q = q.select(
        "*",
        F.coalesce(F.lag("present").over(w_entry), F.lit(False)).alias("_was"),
        F.coalesce(F.lag("_wq").over(w_entry), F.lit(0)).alias("_was_wq"),
    )
    q = q.select(
        "topic",
        *ORDER,
        "pos",
        "ts",
        (F.col("present").cast("long") - F.col("_was").cast("long")).alias("d_queues"),
        (F.col("_wq") - F.col("_was_wq")).cast("long").alias("d_write_queues"),
    )
    w_topic = Window.partitionBy("topic").orderBy(*ORDER, "pos")
    t = q.select(
        "*", (F.sum("d_queues").over(w_topic.rowsBetween(Window.unboundedPreceding, 0)) > 0).alias("_has")
    )
    t = t.select(
        "ts",
        "d_queues",
        "d_write_queues",
        (
            F.col("_has").cast("long") - F.coalesce(F.lag("_has").over(w_topic), F.lit(False)).cast("long")
        ).alias("d_topics"),
    )
    # broker names and clusters
    w_name = Window.partitionBy("broker_name").orderBy(*ORDER)
    n = name_states(events).select(
        "broker_name",
        *ORDER,
        "ts",
        F.col("broker_data")["cluster"].alias("_cluster"),
        F.col("broker_data").isNotNull().alias("_present"),
    )
    n = n.select(
        "*",
        F.coalesce(F.lag("_present").over(w_name), F.lit(False)).alias("_was"),
        F.lag("_cluster").over(w_name).alias("_was_cluster"),
    )
    joined = n.filter(F.col("_present") & ~F.col("_was")).select(
        F.col("_cluster").alias("cluster"), *ORDER, "ts", F.lit(1).alias("d")
    )
    left = n.filter(~F.col("_present") & F.col("_was")).select(
        F.col("_was_cluster").alias("cluster"), *ORDER, "ts", F.lit(-1).alias("d")
    )
    names = joined.unionByName(left)
    w_cluster = Window.partitionBy("cluster").orderBy(*ORDER)
    c = names.select(
        "*", (F.sum("d").over(w_cluster.rowsBetween(Window.unboundedPreceding, 0)) > 0).alias("_has")
    )
    c = c.select(
        "ts",
        F.col("d").cast("long").alias("d_names"),
        (
            F.col("_has").cast("long") - F.coalesce(F.lag("_has").over(w_cluster), F.lit(False)).cast("long")
        ).alias("d_clusters"),
    )
    # visible brokers: +1 at an up interval's start, -1 at its end unless it runs to the log end
    live = up.select(F.col("start_ts").alias("ts"), F.lit(1).alias("d_live")).unionByName(
        up.filter(F.col("end_ts") < log_end_ms).select(F.col("end_ts").alias("ts"), F.lit(-1).alias("d_live"))
    )
    cols = ("d_clusters", "d_names", "d_live", "d_topics", "d_queues", "d_write_queues")

    def deltas(df: DataFrame) -> DataFrame:
        return df.select(
            _bucket(F.col("ts"), bucket_ms).alias("bucket_start_ts"),
            "ts",
            *[(F.col(c) if c in df.columns else F.lit(0)).cast("long").alias(c) for c in cols],
        )

    all_deltas = deltas(t).unionByName(deltas(c)).unionByName(deltas(live))
    # changes of one instant count together (a re-registration's leave and join are no peak)
    per_instant = all_deltas.groupBy("bucket_start_ts", "ts").agg(*[F.sum(c).alias(c) for c in cols])
    w_in = Window.partitionBy("bucket_start_ts").orderBy("ts").rowsBetween(Window.unboundedPreceding, 0)
    # the highest running sum inside the bucket, relative to its start (0: its start value)
    rises = per_instant.select("bucket_start_ts", *[F.sum(c).over(w_in).alias(c) for c in cols])
    per_bucket = rises.groupBy("bucket_start_ts").agg(
        *[F.greatest(F.max(c), F.lit(0)).alias("rise_" + c) for c in cols],
    )
    sums = per_instant.groupBy("bucket_start_ts").agg(*[F.sum(c).alias(c) for c in cols])
    per_bucket = sums.join(per_bucket, "bucket_start_ts")
    first, last = _bucket(F.lit(log_start_ms), bucket_ms), _bucket(F.lit(log_end_ms), bucket_ms)
    spark = events.sparkSession
    grid = spark.range(1).select(
        F.explode(F.sequence(first, last, F.lit(bucket_ms).cast("long"))).alias("bucket_start_ts")
    )
    rise_cols = ["rise_" + c for c in cols]
    full = grid.join(per_bucket, "bucket_start_ts", "left").fillna(0, subset=[*cols, *rise_cols])
    sizes = ("clusters", "broker_names", "live_brokers", "topics", "queues", "write_queues")
    totals = running_sums(full, "bucket_start_ts", bucket_ms, cols)
    at_end = totals.select(
        "bucket_start_ts",
        *rise_cols,
        *[F.col(d).alias(n) for d, n in zip(cols, sizes, strict=True)],
        *[(F.col(d) - F.col("_own_" + d)).alias("start_" + n) for d, n in zip(cols, sizes, strict=True)],
    )
    out = at_end.select(
        "bucket_start_ts",
        (F.col("bucket_start_ts") + bucket_ms).alias("bucket_end_ts"),
        *sizes,
        *[
            (F.col("start_" + n) + F.col("rise_" + d)).alias("peak_" + n)
            for d, n in zip(cols, sizes, strict=True)
        ],
    )
    return conform(out, S.REGISTRY_SIZE)


BLOCK_BUCKETS = 256  # buckets per block of the running sums (a year of hours: 35 blocks)


def running_sums(
    df: DataFrame, key: str, step: int, cols: tuple[str, ...], block_keys: int = BLOCK_BUCKETS
) -> DataFrame:
    """``df`` with each of ``cols`` replaced by its running sum in ``key`` order (inclusive) and
    the row's own value kept as ``_own_<col>``; ``key`` is a multiple of ``step``.

    No global window (Spark would move every row to one partition): rows are cut into blocks of
    ``block_keys`` consecutive keys, each block sums within itself (a window partitioned
    by block), and a small carry table (one row per block: the total of every earlier block,
    from a join of the block totals with themselves) is added back."""
    block = F.floor(F.col(key) / (step * block_keys)).cast("long").alias("_block")
    blocked = df.select("*", block)
    w = Window.partitionBy("_block").orderBy(key).rowsBetween(Window.unboundedPreceding, 0)
    partial = blocked.select("*", *[F.sum(c).over(w).alias("_run_" + c) for c in cols])
    totals = blocked.groupBy("_block").agg(*[F.sum(c).alias("_tot_" + c) for c in cols])
    earlier = totals.select(F.col("_block").alias("_before"), *[F.col("_tot_" + c) for c in cols])
    carry = (
        totals.select("_block")
        .join(earlier, F.col("_before") < F.col("_block"), "left")
        .groupBy("_block")
        .agg(*[F.coalesce(F.sum("_tot_" + c), F.lit(0)).cast("long").alias("_carry_" + c) for c in cols])
    )
    out = partial.join(F.broadcast(carry), "_block")
    kept = [c for c in df.columns if c not in cols]
    return out.select(
        *kept,
        *[(F.col("_carry_" + c) + F.col("_run_" + c)).alias(c) for c in cols],
        *[F.col(c).alias("_own_" + c) for c in cols],
    )


def route_as_of(as_of_ms: int) -> Transform:
    """events → ``route_as_of``: every topic's route as a live lookup at ``as_of_ms`` would have
    returned it (``getRouteInfo`` rules P1-P6), one row per (topic, broker name).

    Answers: what did the route table look like at 02:59? Rebuilt from the log as the read path
    does: the latest brokerData of each name; the latest queue of each (topic, name); addresses
    hidden when their member's deadline (from its latest register/heartbeat) is before the
    instant; a name that loses every address this way is dropped with its queue, one that loses
    its master while ``enableActingMaster`` is on has the queue's write bit cleared; queues of
    names without brokerData are not returned. A topic that exists at the instant
    (:func:`topic_existence`: it had a queue and no DELETE_TOPIC ended it) but gets nothing back
    has one row with ``broker_name`` ``""`` and null route columns: no route, the lookup answers
    TOPIC_NOT_EXIST. Topics never seen, or deleted, have no row."""

    def _(events: DataFrame) -> DataFrame:
        cut = events.filter(F.col("ts") <= as_of_ms)
        pos = F.struct(*ORDER)
        names = (
            name_states(cut)
            .groupBy("broker_name")
            .agg(F.max_by("broker_data", pos).alias("bd"))
            .filter(F.col("bd").isNotNull())
        )
        kind, result = F.col("kind"), F.col("result")
        refresh = (kind == K.HEARTBEAT) | ((kind == K.REGISTER) & (result == "ok"))
        member = cut.filter(
            refresh | kind.isin(*REMOVAL_KINDS) | ((kind == K.REGISTER) & (result == "ignored"))
        )
        deadlines = (
            member.groupBy("cluster", "broker_addr")
            .agg(F.max_by(F.when(refresh, F.col("deadline")), pos).alias("deadline"))
            .filter(F.col("deadline").isNotNull())
        )
        addrs = names.select(
            "broker_name",
            F.col("bd")["cluster"].alias("cluster"),
            F.explode_outer(F.col("bd")["broker_addrs"]).alias("bid", "addr"),
        )
        addrs = addrs.join(deadlines.withColumnRenamed("broker_addr", "addr"), ["cluster", "addr"], "left")
        visible = F.col("addr").isNotNull() & (F.col("deadline").isNull() | (F.col("deadline") >= as_of_ms))
        per_name = addrs.groupBy("broker_name").agg(
            F.count("addr").alias("_had"),
            F.map_from_entries(
                F.collect_list(F.when(visible, F.struct(F.col("bid").cast("long"), F.col("addr"))))
            ).alias("_visible"),
        )
        per_name = per_name.join(names, "broker_name")
        queues = (
            queue_changes(cut)
            .groupBy("topic", "broker_name")
            .agg(
                F.max_by(
                    F.struct("present", "perm", "read_queue_nums", "write_queue_nums", "topic_sys_flag"),
                    F.struct(*ORDER, "pos"),
                ).alias("q")
            )
            .filter(F.col("q")["present"])
        )
        r = queues.join(per_name, "broker_name")
        n_visible = F.size("_visible")
        r = r.filter(~((F.col("_had") > 0) & (n_visible == 0)))
        dropped = n_visible < F.col("_had")
        no_master = (n_visible == 0) | (F.array_min(F.map_keys("_visible")) > 0)
        acting = F.coalesce(F.col("bd")["enable_acting_master"], F.lit(False))
        perm = F.col("q")["perm"]
        perm = F.when(dropped & acting & no_master, perm.bitwiseAND(F.lit(~PERM_WRITE))).otherwise(perm)
        out = r.select(
            F.lit(as_of_ms).cast("long").alias("as_of_ts"),
            "topic",
            "broker_name",
            F.col("bd")["cluster"].alias("cluster"),
            F.col("_visible").alias("broker_addrs"),
            F.col("bd")["zone_name"].alias("zone_name"),
            acting.alias("enable_acting_master"),
            perm.alias("perm"),
            F.col("q")["read_queue_nums"].alias("read_queue_nums"),
            F.col("q")["write_queue_nums"].alias("write_queue_nums"),
            F.col("q")["topic_sys_flag"].alias("topic_sys_flag"),
        )
        alive = topic_existence(queue_changes(cut), topic_deletes(cut), as_of_ms + 1)
        alive = alive.filter(F.col("to_ts") > as_of_ms).select("topic").distinct()
        routed = out.select("topic").distinct()
        no_route = alive.join(routed, "topic", "left_anti").select(
            F.lit(as_of_ms).cast("long").alias("as_of_ts"), "topic", F.lit("").alias("broker_name")
        )
        return conform(out.unionByName(no_route, allowMissingColumns=True), S.ROUTE_AS_OF)

    return _
