"""The human report: ``report.md`` with PNG plots, from the pipeline's Parquet tables.

Only small aggregates reach the driver (per-member-day rows, histogram bins, the top intervals,
per-bucket sizes, reject counts): every query below is bounded by the fleet's size or a limit,
never by the number of events. The words are in :mod:`.report_text`, the plots in
:mod:`.report_plots`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from namesrv.pipeline import io
from namesrv.pipeline import report_plots as plots
from namesrv.pipeline.kinds import REMOVAL_KINDS
from namesrv.pipeline.report_text import duration, headline, table, ts, ts_ms
from namesrv.store.changelog import EventKind as K

TOP = 20
TIMELINE_TOPICS = 15


@dataclass
class Report:
    spark: SparkSession
    tables: str
    out: Path
    risk_ratio: float = 0.75

    def t(self, name: str) -> DataFrame:
        from namesrv.pipeline.job import TABLES

        return io.read_table(self.spark, self.tables, name, TABLES[name])

    def unwritable_groups(self, limit: int = 6) -> list[Row]:
        """Unwritable intervals grouped for the headline: (cause, broker, what it did, duration,
        still open) with the number of topics, worst first. The broker and what it did come
        from the event behind the interval: for ``no_route`` the last queue removal inside it
        (the one that left the topic without queues), traced back from a ``cleanQueues`` to the
        broker's own removal (expire, unregister, close) it followed; for
        ``no_writable_queue`` the queue change at its start (a wipe)."""
        unw = self.t("topic_unwritable")
        key = ("topic", "start_ts")
        changes = self.t("queue_changes").select(
            "topic", F.col("ts").alias("c_ts"), "id_ms", "id_seq", "present", "pos"
        )
        events = self.t("events")
        removed = (F.col("cause") == "no_route") & ~F.col("present")
        at_start = F.col("c_ts") == F.col("start_ts")
        perm = (F.col("cause") == "no_writable_queue") & F.col("present") & at_start
        inside = (F.col("c_ts") >= F.col("start_ts")) & (F.col("c_ts") <= F.col("end_ts"))
        trig = (
            unw.join(changes, "topic")
            .filter(inside & (removed | perm))
            .groupBy(*key)
            .agg(F.max(F.struct("c_ts", "id_ms", "id_seq", "pos")).alias("_t"))
            .select(*key, F.col("_t")["id_ms"].alias("id_ms"), F.col("_t")["id_seq"].alias("id_seq"))
            .join(
                events.select("id_ms", "id_seq", "kind", F.col("broker_name").alias("broker")),
                ["id_ms", "id_seq"],
            )
        )
        # a cleanQueues follows the broker's own removal: name that instead
        removals = events.filter(F.col("kind").isin(*REMOVAL_KINDS)).select(
            F.col("broker_name").alias("broker"),
            F.col("kind").alias("r_kind"),
            F.struct(F.col("id_ms").alias("a"), F.col("id_seq").alias("b")).alias("r_pos"),
        )
        pos = F.struct(F.col("id_ms").alias("a"), F.col("id_seq").alias("b"))
        cleaned = (
            trig.filter(F.col("kind") == K.CLEAN_QUEUES)
            .join(removals, "broker")
            .filter(F.col("r_pos") <= pos)
            .groupBy(*key)
            .agg(F.max_by("r_kind", "r_pos").alias("r_kind"))
        )
        trig = trig.join(cleaned, list(key), "left").select(
            *key, "broker", F.coalesce("r_kind", "kind").alias("kind")
        )
        rounded = (F.round(F.col("duration_ms") / 100) * 100).cast("long")
        return (
            unw.join(trig, list(key), "left")
            .groupBy("cause", "broker", "kind", rounded.alias("ms"), "open_at_end")
            .agg(F.count_distinct("topic").alias("topics"))
            .orderBy(F.desc(F.col("ms") * F.col("topics")), "cause", "broker")
            .limit(limit)
            .collect()
        )

    # ---- the document: one method per section; each reads its tables, draws its plot and
    # adds its lines to the "at a glance" table ----
    def render(self) -> Path:
        self.out.mkdir(parents=True, exist_ok=True)
        span = self.t("log_span").collect()
        first, last, events = (
            (span[0]["first_ts"], span[0]["last_ts"], span[0]["events"]) if span else (None, None, 0)
        )
        glance: list[list[str]] = []
        sections = [
            self.availability_section(glance),
            self.flapping_section(glance),
            self.heartbeat_section(glance),
            self.writability_section(glance, first or 0, last or 0),
            self.size_section(),
            self.as_of_section(),
        ]
        rejects_md, total_rejects = self.rejects_section()
        gaps_md, n_gaps = self.export_gaps_section()
        md = [
            "# Route history report\n",
            f"Change log from **{ts(first)}** to **{ts(last)}** UTC: **{events:,}** events, "
            f"**{total_rejects:,}** rejected lines, **{n_gaps}** export gaps.\n",
            "## At a glance\n",
            table(["question", "answer"], glance),
            *sections,
            rejects_md,
            gaps_md,
        ]
        path = self.out / "report.md"
        path.write_text("".join(md), encoding="utf-8")
        return path

    def availability_section(self, glance: list[list[str]]) -> str:
        ends = self.t("sessions").groupBy("end_kind").agg(F.count(F.lit(1)).alias("n")).collect()
        kinds = {r["end_kind"]: int(r["n"]) for r in ends}
        glance.append(["broker sessions", f"{sum(kinds.values()):,}"])
        how = ", ".join(f"{k} {v:,}" for k, v in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
        glance.append(["how they ended", how or "-"])
        daily = self.t("broker_daily").orderBy("cluster", "broker_name", "broker_addr", "day").collect()
        rated = [r for r in daily if r["availability"] is not None]
        worst = sorted(rated, key=lambda r: r["availability"])[:10]
        heat = plots.availability_heatmap(self.out, daily)
        md = ["\n## Broker availability\n"]
        if heat:
            md.append(f"![availability heatmap]({heat})\n")
        md.append("\nLowest member-days:\n\n")
        headers = ["day", "broker", "address", "availability", "sessions", "unregisters", "closes"]
        headers += ["expiries", "fenced", "lapsed"]
        counts = ("sessions_started", "unregisters", "closes", "expiries", "fenced", "lapsed")
        rows = [
            [r["day"], r["broker_name"], r["broker_addr"], f"{100 * r['availability']:.3f} %"]
            + [r[c] for c in counts]
            for r in worst
        ]
        md.append(table(headers, rows))
        return "".join(md)

    def flapping_section(self, glance: list[list[str]]) -> str:
        flaps = self.t("flapping").orderBy(F.desc("sessions"), "hour_start_ts").limit(TOP).collect()
        glance.append(["flapping member-hours", f"{len(flaps)} (more than the bound of sessions in an hour)"])
        rows = [[ts(r["hour_start_ts"]), r["broker_name"], r["broker_addr"], r["sessions"]] for r in flaps]
        return "\n## Flapping brokers\n\n" + table(
            ["hour (UTC)", "broker", "address", "sessions started"], rows
        )

    def heartbeat_section(self, glance: list[list[str]]) -> str:
        hist = self.t("heartbeat_gap_histogram").orderBy("ratio_lo").collect()
        gstats = self.t("heartbeat_gaps")
        risky = gstats.filter("at_risk").orderBy(F.desc("max_gap_ratio"), "broker_addr").limit(TOP).collect()
        glance.append(
            [
                "brokers at risk of expiring",
                f"{len(risky)} of {gstats.count()} (max gap ≥ {self.risk_ratio:g} × timeout)",
            ]
        )
        png = plots.gap_histogram(self.out, hist, self.risk_ratio)
        md = ["\n## Heartbeat gaps\n"]
        if png:
            md.append(f"![heartbeat gap histogram]({png})\n")
        md.append("\nAt-risk brokers (largest gap relative to the timeout first):\n\n")
        times = ("timeout_ms", "p50_gap_ms", "p99_gap_ms", "max_gap_ms")
        rows = [
            [r["broker_name"], r["broker_addr"], *[duration(r[c]) for c in times]]
            + [f"{r['max_gap_ratio']:.2f}", r["late_gaps"]]
            for r in risky
        ]
        headers = ["broker", "address", "timeout", "p50", "p99", "max", "max/timeout", "late gaps"]
        md.append(table(headers, rows))
        return "".join(md)

    def writability_section(self, glance: list[list[str]], first: int, last: int) -> str:
        unw = self.t("topic_unwritable")
        summary = unw.agg(
            F.count_distinct("topic").alias("topics"),
            F.count(F.lit(1)).alias("n"),
            F.sum("duration_ms").alias("ms"),
        ).collect()[0]
        open_topics = unw.filter("open_at_end").select("topic").distinct().count()
        glance.append(
            [
                "topics that could not be written",
                f"{summary['topics'] or 0} topics, {summary['n'] or 0} intervals, "
                f"{duration(summary['ms'])} in total"
                + (f"; {open_topics} still so at the end of the log" if open_topics else ""),
            ]
        )
        glance.extend(["", headline(g)] for g in self.unwritable_groups())
        worst_topics = (
            unw.groupBy("topic")
            .agg(F.sum("duration_ms").alias("total"))
            .orderBy(F.desc("total"), "topic")
            .limit(TIMELINE_TOPICS)
        )
        top_names = [r["topic"] for r in worst_topics.collect()]
        timeline_rows = unw.filter(F.col("topic").isin(top_names)).collect() if top_names else []
        longest = unw.orderBy(F.desc("duration_ms"), "topic", "start_ts").limit(TOP).collect()
        png = plots.writability_timeline(self.out, timeline_rows, first, last)
        md = ["\n## Topic writability\n"]
        if png:
            md.append(f"![topic writability timeline]({png})\n")
        md.append(
            "\nLongest intervals in which a topic could not be written (`no_route`: its brokers left, "
            "producers get no route at all):\n\n"
        )
        rows = [
            [r["topic"], ts(r["start_ts"]), ts(r["end_ts"]), duration(r["duration_ms"]), r["cause"]]
            + ["yes" if r["open_at_end"] else "no"]
            for r in longest
        ]
        headers = ["topic", "from (UTC)", "to (UTC)", "duration", "cause", "open at the end of the log"]
        md.append(table(headers, rows))
        return "".join(md)

    def size_section(self) -> str:
        size = self.t("registry_size").orderBy("bucket_start_ts").collect()
        png = plots.size_plot(self.out, size)
        md = ["\n## Registry size over time\n"]
        if png:
            md.append(f"![registry size]({png})\n")
        if size:
            peak, end = max(size, key=lambda r: r["peak_queues"]), size[-1]
            md.append(
                f"\nAt the end of the log: {end['clusters']} clusters, {end['broker_names']} broker names, "
                f"{end['live_brokers']} visible brokers, {end['topics']:,} topics with a queue, "
                f"{end['queues']:,} queues, {end['write_queues']:,} write queues. Peak: "
                f"{peak['peak_queues']:,} queues, in the bucket {ts(peak['bucket_start_ts'])} to "
                f"{ts(peak['bucket_end_ts'])}. Write queues count every queue's `writeQueueNums`, "
                "also of queues whose permission forbids writing (a wiped broker's).\n"
            )
        return "".join(md)

    def as_of_section(self) -> str:
        routes = self.t("route_as_of")
        routed = F.col("broker_name") != ""
        as_of = (
            routes.groupBy("as_of_ts")
            .agg(
                F.count_distinct(F.when(routed, F.col("topic"))).alias("topics"),
                F.count(F.when(routed, F.lit(1))).alias("queues"),
                F.count_distinct(F.when(~routed, F.col("topic"))).alias("no_route"),
            )
            .orderBy("as_of_ts")
            .collect()
        )
        if not as_of:
            return ""
        sample = routes.orderBy("as_of_ts", "topic", "broker_name").limit(10).collect()
        md = ["\n## Route table as of\n\n"]
        headers = ["instant (UTC)", "topics with a route", "queues", "topics without a route"]
        md.append(
            table(headers, [[ts_ms(r["as_of_ts"]), r["topics"], r["queues"], r["no_route"]] for r in as_of])
        )
        md.append("\nFirst rows of `route_as_of`:\n\n")
        rows = [
            [
                ts_ms(r["as_of_ts"]),
                r["topic"],
                r["broker_name"] or "no route",
                ", ".join(f"{k}={v}" for k, v in sorted((r["broker_addrs"] or {}).items())),
                r["perm"],
                r["write_queue_nums"],
            ]
            for r in sample
        ]
        md.append(table(["instant (UTC)", "topic", "broker", "addresses", "perm", "write queues"], rows))
        return "".join(md)

    def rejects_section(self) -> tuple[str, int]:
        rejects = self.t("rejects")
        by_reason = (
            rejects.groupBy("reason")
            .agg(F.count(F.lit(1)).alias("n"))
            .orderBy(F.desc("n"), "reason")
            .collect()
        )
        examples = (
            rejects.orderBy("reason", "id")
            .groupBy("reason")
            .agg(F.first("id").alias("id"), F.first("detail").alias("detail"))
            .collect()
        )
        example = {e["reason"]: (e["id"], e["detail"]) for e in examples}
        rows = [[r["reason"], f"{int(r['n']):,}", *example.get(r["reason"], ("", ""))] for r in by_reason]
        md = "\n## Rejected lines\n\n" + table(["reason", "lines", "example id", "example detail"], rows)
        md += "\nEvery rejected line is in the `rejects` table with its reason, detail and source file.\n"
        return md, sum(int(r["n"]) for r in by_reason)

    def export_gaps_section(self) -> tuple[str, int]:
        gaps = self.t("export_gaps").orderBy("detected_at_ms").limit(TOP).collect()
        cols = ("after_id", "first_available_id", "lost", "certain", "note")
        rows = [[ts(g["detected_at_ms"]), *[g[c] for c in cols]] for g in gaps]
        headers = ["detected (UTC)", "after id", "first available id", "events lost", "certain", "note"]
        return "\n## Export gaps\n\n" + table(headers, rows), len(gaps)


def render(spark: SparkSession, tables: str, out: str | Path, risk_ratio: float = 0.75) -> Path:
    """Write ``report.md`` and its PNGs to ``out`` from the tables under ``tables``."""
    return Report(spark, tables, Path(out), risk_ratio).render()
