"""Topic answers from the ``events`` table: queue history, existence and writability
(registry size over time and the route table as of an instant: :mod:`.registry_history`).

The topic table (RocketMQ's ``topicQueueTable``: topic → broker name → QueueData) changes only
through events that carry queues: ``registerQueues`` (``upserted``/``removed``), ``cleanQueues``
(removed, or write bit cleared), ``wipePerm``/``addPerm``, ``topicRegister`` and
``topicDelete``. The broker table (``brokerAddrTable``) is the ``brokerData`` of the latest
``register``/``unregister``/``close``/``expire`` of each broker name (``""`` = the name is gone).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from namesrv.pipeline import schemas as S
from namesrv.pipeline.brokers import master_intervals
from namesrv.pipeline.kinds import REMOVAL_KINDS
from namesrv.pipeline.schemas import conform
from namesrv.store.changelog import EventKind as K

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
    dele = events.filter(F.col("kind") == K.TOPIC_DELETE).select(
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
    return events.filter(F.col("kind") == K.TOPIC_DELETE).select("topic", *ORDER, "ts")


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


def name_states(events: DataFrame) -> DataFrame:
    """Broker-name presence after each event that carries brokerData."""
    kind = F.col("kind")
    carries = ((kind == K.REGISTER) & (F.col("result") == "ok")) | kind.isin(*REMOVAL_KINDS)
    return events.filter(carries & F.col("broker_name").isNotNull() & (F.col("broker_name") != "")).select(
        *ORDER, "ts", "broker_name", "broker_data"
    )
