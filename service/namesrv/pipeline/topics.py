"""Topic and registry answers from the ``events`` table: queue history, writability, registry
size over time, and the route table as of any instant.

The topic table (RocketMQ's ``topicQueueTable``: topic → broker name → QueueData) changes only
through events that carry queues: ``registerQueues`` (``upserted``/``removed``), ``cleanQueues``
(removed, or write bit cleared), ``wipePerm``/``addPerm``, ``topicRegister`` and
``topicDelete``. The broker table (``brokerAddrTable``) is the ``brokerData`` of the latest
``register``/``unregister``/``close``/``expire`` of each broker name (``""`` = the name is gone).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from namesrv.pipeline import schemas as S
from namesrv.pipeline.brokers import master_intervals
from namesrv.pipeline.parse import REMOVAL_KINDS, conform

Transform = Callable[[DataFrame], DataFrame]
ORDER = ("id_ms", "id_seq")
PERM_WRITE = 2


def log_span(events: DataFrame) -> DataFrame:
    """``log_span``: first/last event time and ID, and the number of events (one row)."""
    pos = F.struct(*ORDER)
    out = events.agg(
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        F.min_by("id", pos).alias("first_id"),
        F.max_by("id", pos).alias("last_id"),
        F.count(F.lit(1)).alias("events"),
    )
    return conform(out, S.LOG_SPAN)


def queue_changes(events: DataFrame) -> DataFrame:
    """events → ``queue_changes``: one row per change of one (topic, broker name) queue entry,
    ``present`` false for a removal. ``pos`` orders changes inside one event."""
    base = ("id_ms", "id_seq", "ts")
    ups = events.filter(F.col("queue_upserts").isNotNull()).select(
        *base, F.posexplode("queue_upserts").alias("pos", "q")
    )
    ups = ups.select(
        *base,
        "pos",
        F.col("q")["topic"].alias("topic"),
        F.col("q")["broker_name"].alias("broker_name"),
        F.lit(True).alias("present"),
        F.col("q")["perm"].alias("perm"),
        F.col("q")["read_queue_nums"].alias("read_queue_nums"),
        F.col("q")["write_queue_nums"].alias("write_queue_nums"),
        F.col("q")["topic_sys_flag"].alias("topic_sys_flag"),
    )
    none = [
        F.lit(None).cast("int").alias(c)
        for c in ("perm", "read_queue_nums", "write_queue_nums", "topic_sys_flag")
    ]
    rem = events.filter(F.col("queue_removals").isNotNull()).select(
        *base,
        "broker_name",
        F.coalesce(F.size("queue_upserts"), F.lit(0)).alias("_off"),
        F.posexplode("queue_removals").alias("_p", "topic"),
    )
    rem = rem.select(
        *base,
        (F.col("_p") + F.col("_off")).alias("pos"),
        "topic",
        "broker_name",
        F.lit(False).alias("present"),
        *none,
    )
    dele = events.filter(F.col("kind") == "topicDelete").select(
        *base, "topic", F.posexplode("topic_broker_names").alias("pos", "broker_name")
    )
    dele = dele.select(*base, "pos", "topic", "broker_name", F.lit(False).alias("present"), *none)
    return conform(ups.unionByName(rem).unionByName(dele), S.QUEUE_CHANGES)


def queue_intervals(log_end_ms: int) -> Transform:
    """queue_changes → one row per state of a queue entry: [``from_ts``, ``to_ts``) with its
    QueueData (``present`` false: no queue); the last state runs to the end of the log
    (``running`` true: it did not end there, the log did)."""

    def _(changes: DataFrame) -> DataFrame:
        w = Window.partitionBy("topic", "broker_name").orderBy(*ORDER, "pos")
        nxt = F.lead("ts").over(w)
        to = F.coalesce(nxt, F.lit(log_end_ms))
        return changes.select(
            "topic",
            "broker_name",
            "present",
            "perm",
            "write_queue_nums",
            F.col("ts").alias("from_ts"),
            F.greatest(to, F.col("ts")).alias("to_ts"),
            nxt.isNull().alias("running"),
        )

    return _


def _writable(q: DataFrame) -> DataFrame:
    perm_ok = F.col("perm").bitwiseAND(PERM_WRITE) != 0
    return q.filter(F.col("present") & perm_ok & (F.col("write_queue_nums") > 0))


def topic_deletes(events: DataFrame) -> DataFrame:
    """(topic, id_ms, id_seq, ts) of every explicit DELETE_TOPIC: the only end of a topic."""
    return events.filter(F.col("kind") == "topicDelete").select("topic", *ORDER, "ts")


# A DELETE_TOPIC's own mark sorts after the queue removals of the same event.
_AFTER_ALL = 1 << 30


def topic_existence(changes: DataFrame, deletes: DataFrame, horizon_ms: int) -> DataFrame:
    """queue_changes + :func:`topic_deletes` → (topic, from_ts, to_ts): when the topic was known
    to the registry. A topic exists from its first queue until an explicit DELETE_TOPIC leaves
    it without queues; losing its last queue any other way (brokers expired, closed,
    unregistered, queues cleaned or dropped by the broker) leaves it existing with no route. The
    state still in force at the end runs to ``horizon_ms``."""
    w_entry = Window.partitionBy("topic", "broker_name").orderBy(*ORDER, "pos")
    q = changes.select(
        "topic",
        *ORDER,
        "pos",
        "ts",
        (
            F.col("present").cast("long")
            - F.coalesce(F.lag("present").over(w_entry), F.lit(False)).cast("long")
        ).alias("d"),
        F.lit(False).alias("is_delete"),
    )
    d = deletes.select(
        "topic",
        *ORDER,
        F.lit(_AFTER_ALL).alias("pos"),
        "ts",
        F.lit(0).cast("long").alias("d"),
        F.lit(True).alias("is_delete"),
    )
    w = Window.partitionBy("topic").orderBy(*ORDER, "pos")
    run = w.rowsBetween(Window.unboundedPreceding, 0)
    r = q.unionByName(d).select("*", F.sum("d").over(run).alias("n"))
    born = (F.col("n") > 0) & (F.coalesce(F.lag("n").over(w), F.lit(0)) <= 0)
    # a delete ends the topic only when it leaves no queue (one limited to a cluster may not)
    gone = F.col("is_delete") & (F.col("n") <= 0)
    r = r.select("*", F.when(born, F.lit(True)).when(gone, F.lit(False)).alias("_mark"))
    alive = (F.col("n") > 0) | F.coalesce(F.last("_mark", ignorenulls=True).over(run), F.lit(False))
    r = r.select(
        "topic",
        "ts",
        alive.alias("alive"),
        F.coalesce(F.lead("ts").over(w), F.lit(horizon_ms)).alias("to_ts"),
    )
    return r.filter(F.col("alive") & (F.col("to_ts") > F.col("ts"))).select(
        "topic", F.col("ts").alias("from_ts"), "to_ts"
    )


# Causes, worst first: an unwritable interval is named by the worst state it went through.
CAUSES = ("no_route", "no_live_master", "no_writable_queue")


def topic_unwritable(changes: DataFrame, up: DataFrame, deletes: DataFrame, log_end_ms: int) -> DataFrame:
    """queue_changes + up_intervals + :func:`topic_deletes` → ``topic_unwritable``: maximal
    intervals in which a topic existed (:func:`topic_existence`) but no producer could write to
    it.

    Answers: which topics could not be written, when, for how long, and why. A topic is
    writable when one of its queues has the write bit (perm & 2) and write queues, and that
    queue's broker name has a visible master (brokerId 0), as a producer's route needs. While
    unwritable it is in one of three states, and ``cause`` is the worst it went through:
    ``no_route`` (no queue at all: its brokers left; producers get "No route info"),
    ``no_live_master`` (writable queues, none with a visible master), ``no_writable_queue``
    (write bit wiped or cleared, or no write queues). ``open_at_end`` marks an interval still
    running when the log ends (``end_ts`` is then the log's end)."""
    horizon = log_end_ms + 1  # past the log: what still runs at its end never ends here
    ends = F.when(F.col("running"), F.lit(horizon)).otherwise(F.col("to_ts"))
    intervals = changes.transform(queue_intervals(log_end_ms))
    intervals = intervals.select(
        "topic", "broker_name", "present", "perm", "write_queue_nums", "from_ts", ends.alias("to_ts")
    )
    masters = master_intervals(up).select(
        "broker_name",
        F.col("start_ts").alias("m_start"),
        F.when(F.col("end_ts") >= log_end_ms, F.lit(horizon)).otherwise(F.col("end_ts")).alias("m_end"),
    )
    wq = _writable(intervals)
    covered = wq.join(masters, "broker_name").filter(
        (F.col("m_start") < F.col("to_ts")) & (F.col("from_ts") < F.col("m_end"))
    )
    covered = covered.select(
        "topic", F.greatest("from_ts", "m_start").alias("s"), F.least("to_ts", "m_end").alias("e")
    )
    cols = ("de", "dp", "dw", "dq")

    def marks(df: DataFrame, s: str, e: str, column: str) -> DataFrame:
        df = df.filter(F.col(e) > F.col(s))
        zero = [F.lit(0).alias(c) for c in cols if c != column]
        return df.select("topic", F.col(s).alias("t"), F.lit(1).alias(column), *zero).unionByName(
            df.select("topic", F.col(e).alias("t"), F.lit(-1).alias(column), *zero)
        )

    exists = topic_existence(changes, deletes, horizon)
    present = intervals.filter(F.col("present"))
    b = (
        marks(exists, "from_ts", "to_ts", "de")
        .unionByName(marks(present, "from_ts", "to_ts", "dp"))
        .unionByName(marks(covered, "s", "e", "dw"))
        .unionByName(marks(wq, "from_ts", "to_ts", "dq"))
        .groupBy("topic", "t")
        .agg(*[F.sum(c).alias(c) for c in cols])
    )
    w = Window.partitionBy("topic").orderBy("t")
    run = w.rowsBetween(Window.unboundedPreceding, 0)
    b = b.select(
        "topic",
        "t",
        F.lead("t").over(w).alias("next_t"),
        *[F.sum(c).over(run).alias("c" + c[1]) for c in cols],
    )
    exists_now, none_writable = F.col("ce") > 0, F.col("cw") <= 0
    state = (
        F.when(exists_now & (F.col("cp") <= 0), F.lit(0))
        .when(exists_now & none_writable & (F.col("cq") > 0), F.lit(1))
        .when(exists_now & none_writable, F.lit(2))
    )
    # the last mark of a topic is at the horizon or where it stopped existing: nothing follows
    b = b.filter(F.col("next_t").isNotNull()).withColumn("state", state)
    bad = F.col("state").isNotNull()
    brk = ~F.coalesce(F.lag(bad).over(w), F.lit(False)).eqNullSafe(bad)
    b = b.withColumn("_island", F.sum(brk.cast("long")).over(run))
    cause = F.element_at(F.array(*[F.lit(c) for c in CAUSES]), (F.min("state") + 1).cast("int"))
    out = (
        b.filter(bad)
        .groupBy("topic", "_island")
        .agg(cause.alias("cause"), F.min("t").alias("start_ts"), F.max("next_t").alias("_end"))
        .select(
            "topic",
            "start_ts",
            F.least("_end", F.lit(log_end_ms)).alias("end_ts"),
            "cause",
            (F.col("_end") >= horizon).alias("open_at_end"),
        )
        .withColumn("duration_ms", F.col("end_ts") - F.col("start_ts"))
    )
    return conform(out, S.TOPIC_UNWRITABLE)


def _name_states(events: DataFrame) -> DataFrame:
    """Broker-name presence after each event that carries brokerData."""
    kind = F.col("kind")
    carries = ((kind == "register") & (F.col("result") == "ok")) | kind.isin(*REMOVAL_KINDS)
    return events.filter(carries & F.col("broker_name").isNotNull() & (F.col("broker_name") != "")).select(
        *ORDER, "ts", "broker_name", "broker_data"
    )


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
    n = _name_states(events).select(
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
    w = Window.orderBy("bucket_start_ts").rowsBetween(Window.unboundedPreceding, 0)
    sizes = ("clusters", "broker_names", "live_brokers", "topics", "queues", "write_queues")
    at_end = full.select(
        "bucket_start_ts",
        *rise_cols,
        *[F.sum(d).over(w).alias(n) for d, n in zip(cols, sizes, strict=True)],
        *[(F.sum(d).over(w) - F.col(d)).alias("start_" + n) for d, n in zip(cols, sizes, strict=True)],
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
            _name_states(cut)
            .groupBy("broker_name")
            .agg(F.max_by("broker_data", pos).alias("bd"))
            .filter(F.col("bd").isNotNull())
        )
        kind, result = F.col("kind"), F.col("result")
        refresh = (kind == "heartbeat") | ((kind == "register") & (result == "ok"))
        member = cut.filter(
            refresh | kind.isin(*REMOVAL_KINDS) | ((kind == "register") & (result == "ignored"))
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
