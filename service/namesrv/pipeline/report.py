"""The human report: ``report.md`` with PNG plots, from the pipeline's Parquet tables.

Only small aggregates reach the driver (per-member-day rows, histogram bins, the top intervals,
per-bucket sizes, reject counts): every query below is bounded by the fleet's size or a limit,
never by the number of events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.patches import Rectangle
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from namesrv.pipeline import io

TOP = 20
TIMELINE_TOPICS = 15
CAUSE_COLORS = {"no_route": "#3b0000", "no_live_master": "#d62728", "no_writable_queue": "#ff7f0e"}
CAUSE_WORDS = {
    "no_route": "had no route",
    "no_live_master": "had no live master",
    "no_writable_queue": "had no writable queue",
}
# What the event that started an interval did, in words ("broker pc-b expired").
TRIGGER_WORDS = {
    "expire": "expired",
    "unregister": "unregistered",
    "close": "lost its connection",
    "cleanQueues": "had its queues cleaned",
    "registerQueues": "stopped serving it",
    "wipePerm": "had its write permission wiped",
    "topicRegister": "was registered without write permission",
}
LINE_STYLES = ("-", "--", ":", "-.")


def _num(when: datetime) -> float:
    return float(mdates.date2num(when))  # type: ignore[no-untyped-call]


def _time_axis(ax: Any) -> None:
    """Ticks at round instants that fit the span (seconds for a minute, hours for a day), each
    labelled once, with the date and time of day split (no repeated, ambiguous labels)."""
    locator = mdates.AutoDateLocator(tz=UTC, minticks=4, maxticks=9)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]
    ax.set_xlabel("UTC")


def ts(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def ts_ms(ms: int | None) -> str:
    """An instant to the millisecond (--as-of instants are chosen to the millisecond)."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    s = ms / 1000
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    if not rows:
        return "_none_\n"
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    cells = [["-" if c is None else str(c).replace("|", "\\|") for c in r] for r in rows]
    out += ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join(out) + "\n"


@dataclass
class Report:
    spark: SparkSession
    tables: str
    out: Path
    risk_ratio: float = 0.75

    def t(self, name: str) -> DataFrame:
        from namesrv.pipeline.job import TABLES

        return io.read_table(self.spark, self.tables, name, TABLES[name])

    # ---- plots ----
    def availability_heatmap(self, rows: list[Row]) -> str | None:
        if not rows:
            return None
        members = sorted({(r["cluster"], r["broker_name"] or "?", r["broker_addr"]) for r in rows})
        days = sorted({r["day"] for r in rows})
        index = {m: i for i, m in enumerate(members)}
        grid = [[float("nan")] * len(days) for _ in members]
        for r in rows:
            if r["availability"] is not None:
                grid[index[(r["cluster"], r["broker_name"] or "?", r["broker_addr"])]][
                    days.index(r["day"])
                ] = r["availability"]
        cmap = LinearSegmentedColormap.from_list(
            "avail", ["#b2182b", "#f4a582", "#fddbc7", "#d9f0d3", "#1b7837"]
        )
        fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(days) + 3.5), max(2.5, 0.28 * len(members) + 1.2)))
        im = ax.imshow(grid, aspect="auto", cmap=cmap, vmin=0.9, vmax=1.0, interpolation="nearest")
        ax.set_xticks(range(len(days)), [str(d) for d in days], rotation=30, ha="right")
        ax.set_yticks(range(len(members)), [f"{n}  {a}" for _, n, a in members], fontsize=7)
        if len(members) * len(days) <= 400:
            for i, row in enumerate(grid):
                for j, v in enumerate(row):
                    if v == v:  # not NaN
                        ax.text(j, i, f"{100 * v:.2f}", ha="center", va="center", fontsize=6)
        bar = fig.colorbar(im, ax=ax)
        bar.set_label("availability\n(visible / observed time)", fontsize=8)
        ax.set_title(
            "Broker availability per UTC day\nlook for red cells: below 100 % (darkest: 90 % or less)",
            fontsize=9,
        )
        return self._save(fig, "availability-heatmap.png")

    def gap_histogram(self, rows: list[Row]) -> str | None:
        if not rows:
            return None
        fig, ax = plt.subplots(figsize=(8, 3.6))
        xs = [r["ratio_lo"] for r in rows]
        ys = [r["gaps"] for r in rows]
        colors = ["#1f77b4" if x < self.risk_ratio else "#ff7f0e" if x < 1.0 else "#d62728" for x in xs]
        ax.bar(xs, ys, width=0.045, align="edge", color=colors)
        ax.set_yscale("log")
        ax.axvline(
            self.risk_ratio, color="#ff7f0e", linestyle="--", label=f"at-risk threshold {self.risk_ratio:g}"
        )
        ax.axvline(1.0, color="#d62728", linestyle="-", label="timeout (broker hidden)")
        ax.set_xlabel("heartbeat gap / heartbeat timeout (last bin: 1.5 and above)")
        ax.set_ylabel("gaps (log scale)")
        ax.set_title(
            "Heartbeat gaps against each broker's timeout: bars past the dashed line came close to expiry",
            fontsize=9,
        )
        ax.legend(loc="upper right", fontsize=8)
        return self._save(fig, "heartbeat-gaps.png")

    def writability_timeline(self, rows: list[Row], first: int, last: int) -> str | None:
        if not rows:
            return None
        topics = sorted({r["topic"] for r in rows})
        fig, ax = plt.subplots(figsize=(10, max(2.2, 0.35 * len(topics) + 1.2)))
        for i, topic in enumerate(topics):
            for cause, color in CAUSE_COLORS.items():
                spans = [
                    (_num(_dt(r["start_ts"])), max(r["duration_ms"], 1) / 86_400_000)
                    for r in rows
                    if r["topic"] == topic and r["cause"] == cause
                ]
                if spans:
                    ax.broken_barh(spans, (i - 0.35, 0.7), facecolors=color, edgecolor=color, linewidth=1.5)
        ax.set_yticks(range(len(topics)), topics, fontsize=7)
        ax.set_xlim(_num(_dt(first)), _num(_dt(last)))
        _time_axis(ax)
        ax.set_title(
            "When topics could not be written (top topics by total time): long bars, darkest = no route",
            fontsize=9,
        )
        handles = [Rectangle((0, 0), 1, 1, color=c) for c in CAUSE_COLORS.values()]
        ax.legend(handles, list(CAUSE_COLORS), loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        return self._save(fig, "topic-writability.png")

    def size_plot(self, rows: list[Row]) -> str | None:
        if not rows:
            return None
        x = [_dt(r["bucket_end_ts"]) for r in rows]  # each value is the state at its bucket's end
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
        # the first series widest and translucent, later ones thinner on top: equal series stay visible
        for i, col in enumerate(("clusters", "broker_names", "live_brokers")):
            values = [r[col] for r in rows]
            top.plot(
                x, values, label=col, linestyle=LINE_STYLES[i], linewidth=4 - 1.2 * i, alpha=0.75, marker="."
            )
        top.set_ylabel("count")
        top.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        for i, col in enumerate(("topics", "queues")):
            values = [r[col] for r in rows]
            bottom.plot(
                x, values, label=col, linestyle=LINE_STYLES[i], linewidth=4 - 1.6 * i, alpha=0.75, marker="."
            )
            peaks = [r["peak_" + col] for r in rows]
            bottom.plot(x, peaks, label=f"{col}, peak in the bucket", linestyle=":", linewidth=2.5 - 1.2 * i)
        bottom.set_ylabel("count")
        bottom.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        _time_axis(bottom)
        top.set_title(
            "Registry size at each bucket's end (dotted: peak inside it): look for drops", fontsize=9
        )
        return self._save(fig, "registry-size.png")

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
        removals = events.filter(F.col("kind").isin("expire", "unregister", "close")).select(
            F.col("broker_name").alias("broker"),
            F.col("kind").alias("r_kind"),
            F.struct(F.col("id_ms").alias("a"), F.col("id_seq").alias("b")).alias("r_pos"),
        )
        pos = F.struct(F.col("id_ms").alias("a"), F.col("id_seq").alias("b"))
        cleaned = (
            trig.filter(F.col("kind") == "cleanQueues")
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

    def _save(self, fig: Any, name: str) -> str:
        fig.tight_layout()
        fig.savefig(self.out / name, dpi=110)
        plt.close(fig)
        return name

    # ---- the document ----
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
        heat = self.availability_heatmap(daily)
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
        png = self.gap_histogram(hist)
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
        png = self.writability_timeline(timeline_rows, first, last)
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
        png = self.size_plot(size)
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


def headline(g: Row) -> str:
    """One group of unwritable intervals in words: "2 topics had no route for 38.0 s (broker
    pc-b expired), still at the end of the log"."""
    n = int(g["topics"])
    text = (
        f"{n} topic{'s' if n != 1 else ''} {CAUSE_WORDS.get(g['cause'], g['cause'])} for {duration(g['ms'])}"
    )
    if g["broker"] and g["kind"] in TRIGGER_WORDS:
        text += f" (broker {g['broker']} {TRIGGER_WORDS[g['kind']]})"
    if g["open_at_end"]:
        text += ", still at the end of the log"
    return text


def render(spark: SparkSession, tables: str, out: str | Path, risk_ratio: float = 0.75) -> Path:
    """Write ``report.md`` and its PNGs to ``out`` from the tables under ``tables``."""
    return Report(spark, tables, Path(out), risk_ratio).render()
