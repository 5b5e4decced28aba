"""Broker answers from the ``events`` table: sessions, liveness, heartbeat gaps, flapping.

A broker's identity is the *member* ``(cluster, broker_addr)`` (RocketMQ's ``BrokerAddrInfo``).
Its liveness events, in log (stream ID) order, are:

* a **refresh**: ``register`` with ``result=ok``, or ``heartbeat``; it sets the member's
  ``deadline`` (refresh time + heartbeat timeout);
* a **session start**: a refresh ``register`` with ``newSession=1`` (no live registration, or the
  previous one was past its deadline);
* a **session end**: the first ``unregister``, ``close`` or ``expire`` of the member after the
  start, or a ``register`` with ``result=ignored`` (R6 drops the member's liveness). ``fenced``
  events are refused removals and end nothing. A session with no end event that is followed by a
  new start ended by **lapsing** at its last deadline.

Visibility (what a route lookup shows) follows the read path: a member is visible from a refresh
until the earlier of that refresh's deadline and the member's next event. So a heartbeat that
comes after the deadline but before the sweep keeps the session (no new start) yet leaves a
hidden gap, exactly as the service behaves.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from namesrv.pipeline import schemas as S
from namesrv.pipeline.kinds import REMOVAL_KINDS
from namesrv.pipeline.schemas import conform

Transform = Callable[[DataFrame], DataFrame]
MEMBER = ("cluster", "broker_addr")
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
ORDER = ("id_ms", "id_seq")


def _member_window() -> WindowSpec:
    return Window.partitionBy(*MEMBER).orderBy(*ORDER)


def member_timeline(events: DataFrame) -> DataFrame:
    """Every liveness event of every member, in log order, with its session.

    Columns: the member, ``id_ms``, ``id_seq``, ``ts``, ``kind``, ``result``, ``broker_name``,
    ``broker_id``, ``deadline``, ``timeout_ms``; ``is_refresh``/``is_start``/``is_end``;
    ``session_no`` (0 = events before the first start in the log); ``after_end`` (an event after
    its session already ended, e.g. a second unregister: it changes nothing); ``next_ts`` (time of
    the member's next event); ``prev_ts``/``prev_timeout_ms``/``prev_session_no`` (the previous
    refresh); ``refresh_no`` (refreshes of the member so far, this one included), ``min_ts``
    (the member's earliest event time so far) and ``last_refresh`` (the session's last refresh
    before its end), which let :func:`sessions` aggregate a few rows per session instead of every
    heartbeat, and :func:`member_first_seen` read one row per member. Used by the other broker
    transforms; cache it when several of them run.

    Every timeline row is a refresh or an end, so a session is a run of refreshes from its
    first row, then its end, then rows after the end until the next start."""
    kind, result = F.col("kind"), F.col("result")
    ev = events.filter(
        kind.isin("heartbeat", *REMOVAL_KINDS) | ((kind == "register") & result.isin("ok", "ignored"))
    ).select(
        *MEMBER,
        *ORDER,
        "ts",
        "kind",
        "result",
        "broker_name",
        "broker_id",
        "deadline",
        "timeout_ms",
        ((kind == "heartbeat") | ((kind == "register") & (result == "ok"))).alias("is_refresh"),
        ((kind == "register") & (result == "ok") & F.coalesce(F.col("new_session"), F.lit(False))).alias(
            "is_start"
        ),
        (kind.isin(*REMOVAL_KINDS) | ((kind == "register") & (result == "ignored"))).alias("is_end"),
    )
    w = _member_window()
    running = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    # Every column comes from one select over one window spec, so Spark plans a single Window
    # operator (one buffered pass per member) instead of two stacked ones. What used to need a
    # second pass is rewritten to depend on the input columns only:
    # * after_end: the row's session already ended iff the latest start-or-end before it is an
    #   end (starts and ends are disjoint kinds; a start itself is never after its end);
    # * prev_session_no: every start is a refresh, so no start lies between the previous
    #   refresh and the row; the previous refresh's session is the row's own, minus one when
    #   the row starts a new one.
    refresh = F.when(F.col("is_refresh"), F.struct(F.col("ts"), F.col("timeout_ms")))
    marker = F.when(F.col("is_start") | F.col("is_end"), F.col("is_end"))
    ev = ev.select(
        "*",
        F.sum(F.col("is_start").cast("long")).over(running).alias("session_no"),
        F.lead("ts").over(w).alias("next_ts"),
        F.last(refresh, ignorenulls=True).over(before).alias("_prev"),
        F.last(marker, ignorenulls=True).over(before).alias("_ended"),
        F.sum(F.col("is_refresh").cast("long")).over(running).alias("refresh_no"),
        F.min("ts").over(running).alias("min_ts"),
        # a refresh that is not a start continues the session's run of refreshes
        F.lead(F.col("is_refresh") & ~F.col("is_start")).over(w).alias("_continued"),
    )
    prev = F.col("_prev")
    after_end = ~F.col("is_start") & F.coalesce(F.col("_ended"), F.lit(False))
    ends_run = ~F.coalesce(F.col("_continued"), F.lit(False))
    return ev.select(
        *MEMBER,
        *ORDER,
        "ts",
        "kind",
        "result",
        "broker_name",
        "broker_id",
        "deadline",
        "timeout_ms",
        "is_refresh",
        "is_start",
        "is_end",
        "session_no",
        after_end.alias("after_end"),
        "next_ts",
        prev["ts"].alias("prev_ts"),
        prev["timeout_ms"].alias("prev_timeout_ms"),
        F.when(prev.isNotNull(), F.col("session_no") - F.col("is_start").cast("long")).alias(
            "prev_session_no"
        ),
        "refresh_no",
        "min_ts",
        (F.col("is_refresh") & ~after_end & ends_run).alias("last_refresh"),
    )


def sessions() -> Transform:
    """member_timeline → ``sessions``: one row per broker session.

    Answers: when did each broker come and go, and how did each session end (``unregister``,
    ``close``, ``expire``, ``ignored``, ``lapsed`` or still ``open`` at the end of the log)?
    ``end_ts`` is when the broker stopped being visible: the ``deadline`` for an expiry or a lapse
    (the expire event itself is written by a sweep, up to a few seconds later: ``end_event_ts``),
    the earlier of the removal and the last deadline otherwise. ``started_before_log`` marks
    session 0, whose start is older than the exported log."""

    def _(timeline: DataFrame) -> DataFrame:
        # A session's own rows (before its end) are its start, a run of refreshes and its end:
        # the start, the end and the run's last refresh carry everything the session needs (the
        # run's length and earliest time as running values), so only those rows are grouped.
        run_end, start = F.col("last_refresh"), F.col("is_start")
        own = timeline.filter(~F.col("after_end") & (start | F.col("is_end") | run_end))
        pos = F.struct(*ORDER)
        # refreshes before the session: none for session 0, all up to its start for the others
        before = F.when(start, F.col("refresh_no") - 1)
        agg = own.groupBy(*MEMBER, "session_no").agg(
            F.min(F.when(start, F.col("ts"))).alias("_start_ts"),
            # used for session 0 only, which has no start: its run of refreshes is the member's
            # first rows, so the earliest time up to the run's end is its first refresh time
            F.min(F.when(run_end, F.col("min_ts"))).alias("_first_refresh_ts"),
            F.min(
                F.when(
                    F.col("is_end"),
                    F.struct(
                        pos.alias("pos"), "kind", "result", "ts", "deadline", "broker_name", "broker_id"
                    ),
                )
            ).alias("_end"),
            F.max(
                F.when(
                    F.col("is_refresh"),
                    F.struct(pos.alias("pos"), "ts", "deadline", "timeout_ms", "broker_name", "broker_id"),
                )
            ).alias("_last"),
            F.coalesce(
                F.max(F.when(run_end, F.col("refresh_no"))) - F.coalesce(F.max(before), F.lit(0)), F.lit(0)
            ).alias("refreshes"),
        )
        agg = agg.filter((F.col("session_no") > 0) | (F.col("refreshes") > 0))
        later = Window.partitionBy(*MEMBER).orderBy("session_no")
        agg = agg.withColumn("_has_next", F.lead("session_no").over(later).isNotNull())
        end, last = F.col("_end"), F.col("_last")
        end_kind = (
            F.when(end.isNotNull() & (end["kind"] == "register"), F.lit("ignored"))
            .when(end.isNotNull(), end["kind"])
            .when(F.col("_has_next"), F.lit("lapsed"))
            .otherwise(F.lit("open"))
        )
        removal_end = F.when(last["deadline"].isNotNull(), F.least(end["ts"], last["deadline"])).otherwise(
            end["ts"]
        )
        end_ts = (
            F.when(end_kind == "expire", F.coalesce(end["deadline"], last["deadline"]))
            .when(end_kind == "lapsed", last["deadline"])
            .when(end_kind == "open", F.lit(None).cast("long"))
            .otherwise(removal_end)
        )
        start_ts = F.coalesce(F.col("_start_ts"), F.col("_first_refresh_ts"))
        out = agg.select(
            *MEMBER,
            "session_no",
            F.coalesce(last["broker_name"], end["broker_name"]).alias("broker_name"),
            F.coalesce(last["broker_id"], end["broker_id"]).alias("broker_id"),
            start_ts.alias("start_ts"),
            (F.col("session_no") == 0).alias("started_before_log"),
            end_ts.alias("end_ts"),
            end_kind.alias("end_kind"),
            end["ts"].alias("end_event_ts"),
            last["ts"].alias("last_refresh_ts"),
            last["deadline"].alias("last_deadline"),
            last["timeout_ms"].alias("timeout_ms"),
            "refreshes",
            (end_ts - start_ts).alias("duration_ms"),
        )
        return conform(out, S.SESSIONS)

    return _


def up_intervals(log_end_ms: int) -> Transform:
    """member_timeline → ``up_intervals``: maximal periods in which a member was visible to
    route lookups, with a constant broker name and id.

    Answers: exactly when could clients see each broker? Each refresh makes the member visible
    until the earlier of its deadline and the member's next event (the end of the log for the
    last one); touching periods are merged."""

    def _(timeline: DataFrame) -> DataFrame:
        seg_end = F.least(F.col("deadline"), F.coalesce(F.col("next_ts"), F.lit(log_end_ms)))
        segs = timeline.filter(F.col("is_refresh") & ~F.col("after_end")).select(
            *MEMBER,
            *ORDER,
            "broker_name",
            "broker_id",
            F.col("ts").alias("s"),
            F.greatest(seg_end, F.col("ts")).alias("e"),
        )
        w = _member_window()
        brk = (
            F.lag("e").over(w).isNull()
            | (F.col("s") > F.lag("e").over(w))
            | ~F.lag("broker_name").over(w).eqNullSafe(F.col("broker_name"))
            | ~F.lag("broker_id").over(w).eqNullSafe(F.col("broker_id"))
        )
        segs = segs.withColumn("_brk", brk.cast("long"))
        segs = segs.withColumn("_island", F.sum("_brk").over(w.rowsBetween(Window.unboundedPreceding, 0)))
        # Name and id are constant inside an island (a change breaks it), so they are grouping
        # keys: the aggregation then keeps only numbers and runs as a hash aggregation on the
        # timeline's order instead of sorting every refresh by island.
        out = (
            segs.groupBy(*MEMBER, "_island", "broker_name", "broker_id")
            .agg(F.min("s").alias("start_ts"), F.max("e").alias("end_ts"))
            .filter(F.col("end_ts") > F.col("start_ts"))
        )
        return conform(out, S.UP_INTERVALS)

    return _


def master_intervals(up: DataFrame) -> DataFrame:
    """up_intervals → (broker_name, start_ts, end_ts): when the broker name had a visible master
    (brokerId 0), overlapping periods of different master addresses merged."""
    m = up.filter(F.col("broker_id") == 0).select("broker_name", "start_ts", "end_ts")
    w = Window.partitionBy("broker_name").orderBy("start_ts", "end_ts")
    reach = F.max("end_ts").over(w.rowsBetween(Window.unboundedPreceding, -1))
    m = m.withColumn("_brk", (reach.isNull() | (F.col("start_ts") > reach)).cast("long"))
    m = m.withColumn("_g", F.sum("_brk").over(w.rowsBetween(Window.unboundedPreceding, 0)))
    return (
        m.groupBy("broker_name", "_g")
        .agg(F.min("start_ts").alias("start_ts"), F.max("end_ts").alias("end_ts"))
        .drop("_g")
    )


def heartbeat_gaps(risk_ratio: float) -> Transform:
    """member_timeline → ``heartbeat_gaps``: per member, the time between consecutive refreshes
    of the same session (p50/p99 by nearest rank, max) against its heartbeat timeout.

    Answers: how close did each broker come to expiring? ``late_gaps`` counts gaps longer than
    the timeout (the broker was hidden from routes until its next heartbeat rescued the session);
    ``at_risk`` is ``max_gap_ratio >= risk_ratio``."""

    def _(timeline: DataFrame) -> DataFrame:
        g = gap_rows(timeline)
        latest = F.struct(*ORDER)
        # One digest answers both percentiles (two calls would build two identical ones).
        percentiles = F.percentile_approx("gap_ms", [0.5, 0.99])
        stats = g.groupBy(*MEMBER).agg(
            F.max_by("broker_name", latest).alias("broker_name"),
            F.max_by("timeout_ms", latest).alias("timeout_ms"),
            F.count(F.lit(1)).alias("refreshes"),
            F.count("gap_ms").alias("gaps"),
            percentiles.alias("_percentiles"),
            F.max("gap_ms").alias("max_gap_ms"),
            F.max("ratio").alias("max_gap_ratio"),
            F.count_if(F.col("gap_ms") > F.col("prev_timeout_ms")).alias("late_gaps"),
        )
        stats = stats.withColumns(
            {
                "p50_gap_ms": F.col("_percentiles")[0],
                "p99_gap_ms": F.col("_percentiles")[1],
            }
        )
        stats = stats.withColumn("at_risk", F.coalesce(F.col("max_gap_ratio") >= risk_ratio, F.lit(False)))
        return conform(stats, S.HEARTBEAT_GAPS)

    return _


def gap_rows(timeline: DataFrame) -> DataFrame:
    """Refresh rows with ``gap_ms`` (null for a session's first refresh) and ``ratio`` = gap /
    the timeout that was running."""
    r = timeline.filter(F.col("is_refresh") & ~F.col("after_end"))
    same = F.col("prev_session_no") == F.col("session_no")
    gap = F.when(same, F.col("ts") - F.col("prev_ts"))
    return r.select(
        *MEMBER,
        *ORDER,
        "broker_name",
        "timeout_ms",
        "prev_timeout_ms",
        gap.alias("gap_ms"),
        F.try_divide(gap.cast("double"), F.col("prev_timeout_ms").cast("double")).alias("ratio"),
    )


def gap_histogram(timeline: DataFrame) -> DataFrame:
    """member_timeline → ``heartbeat_gap_histogram``: gaps counted by gap/timeout ratio in bins
    of 0.05 (the last bin, 1.5, holds everything from 1.5 up)."""
    g = gap_rows(timeline).filter(F.col("ratio").isNotNull())
    lo = F.floor(F.least(F.col("ratio"), F.lit(1.5)) * 20) / 20
    return conform(
        g.groupBy(lo.alias("ratio_lo")).agg(F.count(F.lit(1)).alias("gaps")), S.HEARTBEAT_GAP_HISTOGRAM
    )


def flapping(bound: int) -> Transform:
    """sessions → ``flapping``: member-hours in which more than ``bound`` sessions started.

    Answers: which brokers flapped, and when?"""

    def _(sess: DataFrame) -> DataFrame:
        s = sess.filter(~F.col("started_before_log"))
        hour = (F.floor(F.col("start_ts") / HOUR_MS) * HOUR_MS).cast("long")
        out = (
            s.groupBy(*MEMBER, hour.alias("hour_start_ts"))
            .agg(
                F.max_by("broker_name", "start_ts").alias("broker_name"),
                F.count(F.lit(1)).alias("sessions"),
            )
            .filter(F.col("sessions") > bound)
        )
        return conform(out, S.FLAPPING)

    return _


def _day_of(ms: Column) -> Column:
    return F.date_from_unix_date(F.floor(ms / DAY_MS).cast("int"))


def _day_start(day: Column) -> Column:
    return F.unix_date(day).cast("long") * DAY_MS


# Kinds that show a member is there (fenced included: a refused removal names it too).
_SEEN_KINDS = ("register", "heartbeat", *REMOVAL_KINDS, "fenced")


def member_first_seen(events: DataFrame, timeline: DataFrame | None = None) -> DataFrame:
    """Per member: ``_first_ts`` (time of its first event) and ``broker_name`` (of its latest
    event), over every event that names the member.

    Most of those events are in the member timeline, whose last row of each member carries both
    (``min_ts`` is a running minimum); only the few it leaves out (fenced removals, refused
    registrations) are read from ``events``. Without a timeline, all of them are read from
    ``events``, which sorts every heartbeat by member."""
    known = F.col("broker_addr").isNotNull() & F.col("cluster").isNotNull()
    kind = F.col("kind")
    pos = F.struct(*ORDER)
    partial = [
        F.min("ts").alias("_first_ts"),
        F.max(pos).alias("_pos"),
        F.max_by("broker_name", pos).alias("broker_name"),
    ]
    if timeline is None:
        parts = events.filter(known & kind.isin(*_SEEN_KINDS)).groupBy(*MEMBER).agg(*partial)
    else:
        left_out = (kind == "fenced") | (
            (kind == "register") & ~F.coalesce(F.col("result").isin("ok", "ignored"), F.lit(False))
        )
        latest = timeline.filter(known & F.col("next_ts").isNull()).select(
            *MEMBER, F.col("min_ts").alias("_first_ts"), pos.alias("_pos"), "broker_name"
        )
        parts = latest.unionByName(events.filter(known & left_out).groupBy(*MEMBER).agg(*partial))
    return parts.groupBy(*MEMBER).agg(
        F.min("_first_ts").alias("_first_ts"), F.max_by("broker_name", "_pos").alias("broker_name")
    )


def broker_daily(
    events: DataFrame,
    sess: DataFrame,
    up: DataFrame,
    log_start_ms: int,
    log_end_ms: int,
    timeline: DataFrame | None = None,
) -> DataFrame:
    """``broker_daily``: per member and UTC day of the log, visible time and how sessions began
    and ended.

    Answers: what was each broker's availability each day (``up_ms / observed_ms``, where
    ``observed_ms`` is the part of the day the log covers from the member's first event on),
    and how many clean unregisters, connection closes, expiries, fenced (refused) removals and
    lapses did it have? ``timeline`` (:func:`member_timeline`, cached) makes the first-seen
    pass cheaper; the result is the same without it."""
    first_seen = member_first_seen(events, timeline)
    last_day = _day_of(F.lit(log_end_ms))
    grid = first_seen.select(
        *MEMBER,
        "broker_name",
        "_first_ts",
        F.explode(F.sequence(_day_of(F.col("_first_ts")), last_day)).alias("day"),
    )
    start = F.greatest(_day_start(F.col("day")), F.col("_first_ts"), F.lit(log_start_ms))
    stop = F.least(_day_start(F.col("day")) + DAY_MS, F.lit(log_end_ms))
    grid = grid.select(*MEMBER, "broker_name", "day", F.greatest(stop - start, F.lit(0)).alias("observed_ms"))

    per_day = up.select(
        *MEMBER,
        "start_ts",
        "end_ts",
        F.explode(F.sequence(_day_of(F.col("start_ts")), _day_of(F.col("end_ts") - 1))).alias("day"),
    )
    overlap = F.least(F.col("end_ts"), _day_start(F.col("day")) + DAY_MS) - F.greatest(
        F.col("start_ts"), _day_start(F.col("day"))
    )
    up_ms = per_day.groupBy(*MEMBER, "day").agg(F.sum(overlap).alias("up_ms"))

    kinds = (
        events.filter(F.col("kind").isin(*REMOVAL_KINDS, "fenced"))
        .groupBy(*MEMBER, "day")
        .agg(
            F.count_if(F.col("kind") == "unregister").alias("unregisters"),
            F.count_if(F.col("kind") == "close").alias("closes"),
            F.count_if(F.col("kind") == "expire").alias("expiries"),
            F.count_if(F.col("kind") == "fenced").alias("fenced"),
        )
    )
    started = (
        sess.filter(~F.col("started_before_log"))
        .groupBy(*MEMBER, _day_of(F.col("start_ts")).alias("day"))
        .agg(F.count(F.lit(1)).alias("sessions_started"))
    )
    lapsed = (
        sess.filter(F.col("end_kind") == "lapsed")
        .groupBy(*MEMBER, _day_of(F.col("end_ts")).alias("day"))
        .agg(F.count(F.lit(1)).alias("lapsed"))
    )
    keys = [*MEMBER, "day"]
    out = (
        grid.join(up_ms, keys, "left")
        .join(kinds, keys, "left")
        .join(started, keys, "left")
        .join(lapsed, keys, "left")
    )
    counts = ["up_ms", "sessions_started", "unregisters", "closes", "expiries", "fenced", "lapsed"]
    out = out.fillna(0, subset=counts)
    out = out.withColumn(
        "availability",
        F.when(F.col("observed_ms") > 0, F.col("up_ms") / F.col("observed_ms")),
    )
    return conform(out, S.BROKER_DAILY)
