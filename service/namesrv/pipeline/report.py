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
CAUSE_COLORS = {"no_live_master": "#d62728", "no_writable_queue": "#ff7f0e"}


def _num(when: datetime) -> float:
    return float(mdates.date2num(when))  # type: ignore[no-untyped-call]


def _fmt(pattern: str, tz: Any) -> Any:
    return mdates.DateFormatter(pattern, tz=tz)  # type: ignore[no-untyped-call]


def ts(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


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
        fig.colorbar(im, ax=ax, label="availability (visible time / observed time); <90% is dark red")
        ax.set_title("Broker availability per UTC day")
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
        ax.set_title("Heartbeat gaps of every broker, against its own timeout")
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
        ax.xaxis.set_major_formatter(_fmt("%m-%d %H:%M", tz=UTC))
        ax.set_title("Topics without a writable master queue (top topics by total time)")
        handles = [Rectangle((0, 0), 1, 1, color=c) for c in CAUSE_COLORS.values()]
        ax.legend(handles, list(CAUSE_COLORS), loc="upper right", fontsize=8)
        fig.autofmt_xdate()
        return self._save(fig, "topic-writability.png")

    def size_plot(self, rows: list[Row]) -> str | None:
        if not rows:
            return None
        x = [_dt(r["bucket_start_ts"]) for r in rows]
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
        for col in ("clusters", "broker_names", "live_brokers"):
            top.step(x, [r[col] for r in rows], where="post", label=col)
        top.set_ylabel("count")
        top.legend(fontsize=8, loc="lower right")
        for col in ("topics", "queues"):
            bottom.step(x, [r[col] for r in rows], where="post", label=col)
        bottom.set_ylabel("count")
        bottom.legend(fontsize=8, loc="lower right")
        bottom.xaxis.set_major_formatter(_fmt("%m-%d %H:%M", tz=UTC))
        top.set_title("Registry size at the end of each bucket")
        fig.autofmt_xdate()
        return self._save(fig, "registry-size.png")

    def _save(self, fig: Any, name: str) -> str:
        fig.tight_layout()
        fig.savefig(self.out / name, dpi=110)
        plt.close(fig)
        return name

    # ---- the document ----
    def render(self) -> Path:
        self.out.mkdir(parents=True, exist_ok=True)
        span = self.t("log_span").collect()
        first, last, events = (
            (span[0]["first_ts"], span[0]["last_ts"], span[0]["events"]) if span else (None, None, 0)
        )
        rejects = self.t("rejects")
        by_reason = (
            rejects.groupBy("reason")
            .agg(F.count(F.lit(1)).alias("n"))
            .orderBy(F.desc("n"), "reason")
            .collect()
        )
        examples = (
            (
                rejects.orderBy("reason", "id")
                .groupBy("reason")
                .agg(F.first("id").alias("id"), F.first("detail").alias("detail"))
            )
            .orderBy("reason")
            .collect()
        )
        gaps = self.t("export_gaps").orderBy("detected_at_ms").limit(TOP).collect()
        sessions = self.t("sessions")
        ends = sessions.groupBy("end_kind").agg(F.count(F.lit(1)).alias("n")).orderBy(F.desc("n")).collect()
        daily = self.t("broker_daily").orderBy("cluster", "broker_name", "broker_addr", "day").collect()
        worst = sorted((r for r in daily if r["availability"] is not None), key=lambda r: r["availability"])[
            :10
        ]
        flaps = self.t("flapping").orderBy(F.desc("sessions"), "hour_start_ts").limit(TOP).collect()
        hist = self.t("heartbeat_gap_histogram").orderBy("ratio_lo").collect()
        gstats = self.t("heartbeat_gaps")
        risky = gstats.filter("at_risk").orderBy(F.desc("max_gap_ratio"), "broker_addr").limit(TOP).collect()
        n_members = gstats.count()
        unw = self.t("topic_unwritable")
        worst_topics = (
            unw.groupBy("topic")
            .agg(F.sum("duration_ms").alias("total"), F.count(F.lit(1)).alias("n"))
            .orderBy(F.desc("total"), "topic")
            .limit(TIMELINE_TOPICS)
        )
        top_names = [r["topic"] for r in worst_topics.collect()]
        timeline_rows = unw.filter(F.col("topic").isin(top_names)).collect() if top_names else []
        longest = unw.orderBy(F.desc("duration_ms"), "topic", "start_ts").limit(TOP).collect()
        unw_summary = unw.agg(
            F.count_distinct("topic").alias("topics"),
            F.count(F.lit(1)).alias("n"),
            F.sum("duration_ms").alias("ms"),
        ).collect()[0]
        size = self.t("registry_size").orderBy("bucket_start_ts").collect()
        routes = self.t("route_as_of")
        as_of = (
            routes.groupBy("as_of_ts")
            .agg(F.count_distinct("topic").alias("topics"), F.count(F.lit(1)).alias("queues"))
            .orderBy("as_of_ts")
            .collect()
        )
        route_sample = routes.orderBy("as_of_ts", "topic", "broker_name").limit(10).collect()

        heat = self.availability_heatmap(daily)
        hist_png = self.gap_histogram(hist)
        timeline = self.writability_timeline(timeline_rows, first or 0, last or 0)
        size_png = self.size_plot(size)

        total_rejects = sum(int(r["n"]) for r in by_reason)
        kinds = {r["end_kind"]: int(r["n"]) for r in ends}
        md: list[str] = ["# Route history report\n"]
        md.append(
            f"Change log from **{ts(first)}** to **{ts(last)}** UTC: **{events:,}** events, "
            f"**{total_rejects:,}** rejected lines, **{len(gaps)}** export gaps.\n"
        )
        md.append("## At a glance\n")
        md.append(
            table(
                ["question", "answer"],
                [
                    ["broker sessions", f"{sum(kinds.values()):,}"],
                    [
                        "how they ended",
                        ", ".join(f"{k} {v:,}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
                        or "-",
                    ],
                    ["flapping member-hours", f"{len(flaps)} (more than the bound of sessions in an hour)"],
                    [
                        "brokers at risk of expiring",
                        f"{len(risky)} of {n_members} (max gap ≥ {self.risk_ratio:g} × timeout)",
                    ],
                    [
                        "topics that lost writability",
                        f"{unw_summary['topics'] or 0} topics, {unw_summary['n'] or 0} intervals, "
                        f"{duration(unw_summary['ms'])} in total",
                    ],
                ],
            )
        )
        md.append("\n## Broker availability\n")
        if heat:
            md.append(f"![availability heatmap]({heat})\n")
        md.append("\nLowest member-days:\n\n")
        md.append(
            table(
                [
                    "day",
                    "broker",
                    "address",
                    "availability",
                    "sessions",
                    "unregisters",
                    "closes",
                    "expiries",
                    "fenced",
                    "lapsed",
                ],
                [
                    [
                        r["day"],
                        r["broker_name"],
                        r["broker_addr"],
                        f"{100 * r['availability']:.3f} %",
                        r["sessions_started"],
                        r["unregisters"],
                        r["closes"],
                        r["expiries"],
                        r["fenced"],
                        r["lapsed"],
                    ]
                    for r in worst
                ],
            )  # fmt: skip
        )
        md.append("\n## Flapping brokers\n\n")
        md.append(
            table(
                ["hour (UTC)", "broker", "address", "sessions started"],
                [[ts(r["hour_start_ts"]), r["broker_name"], r["broker_addr"], r["sessions"]] for r in flaps],
            )
        )
        md.append("\n## Heartbeat gaps\n")
        if hist_png:
            md.append(f"![heartbeat gap histogram]({hist_png})\n")
        md.append("\nAt-risk brokers (largest gap relative to the timeout first):\n\n")
        md.append(
            table(
                ["broker", "address", "timeout", "p50", "p99", "max", "max/timeout", "late gaps"],
                [
                    [
                        r["broker_name"],
                        r["broker_addr"],
                        duration(r["timeout_ms"]),
                        duration(r["p50_gap_ms"]),
                        duration(r["p99_gap_ms"]),
                        duration(r["max_gap_ms"]),
                        f"{r['max_gap_ratio']:.2f}",
                        r["late_gaps"],
                    ]
                    for r in risky
                ],
            )  # fmt: skip
        )
        md.append("\n## Topic writability\n")
        if timeline:
            md.append(f"![topic writability timeline]({timeline})\n")
        md.append("\nLongest intervals without a writable master queue:\n\n")
        md.append(
            table(
                ["topic", "from (UTC)", "to (UTC)", "duration", "cause", "still open"],
                [
                    [
                        r["topic"],
                        ts(r["start_ts"]),
                        ts(r["end_ts"]),
                        duration(r["duration_ms"]),
                        r["cause"],
                        r["open_at_end"],
                    ]
                    for r in longest
                ],
            )
        )
        md.append("\n## Registry size over time\n")
        if size_png:
            md.append(f"![registry size]({size_png})\n")
        if size:
            peak, end = max(size, key=lambda r: r["queues"]), size[-1]
            md.append(
                f"\nAt the end of the log: {end['clusters']} clusters, {end['broker_names']} broker names, "
                f"{end['live_brokers']} visible brokers, {end['topics']:,} topics, {end['queues']:,} queues "
                f"(peak {peak['queues']:,} queues at {ts(peak['bucket_start_ts'])}).\n"
            )
        if as_of:
            md.append("\n## Route table as of\n\n")
            md.append(
                table(
                    ["instant (UTC)", "topics with a route", "queues"],
                    [[ts(r["as_of_ts"]), r["topics"], r["queues"]] for r in as_of],
                )
            )
            md.append("\nFirst rows of `route_as_of`:\n\n")
            md.append(
                table(
                    ["topic", "broker", "addresses", "perm", "write queues"],
                    [
                        [
                            r["topic"],
                            r["broker_name"],
                            ", ".join(f"{k}={v}" for k, v in sorted((r["broker_addrs"] or {}).items())),
                            r["perm"],
                            r["write_queue_nums"],
                        ]
                        for r in route_sample
                    ],
                )
            )
        md.append("\n## Rejected lines\n\n")
        example = {e["reason"]: (e["id"], e["detail"]) for e in examples}
        md.append(
            table(
                ["reason", "lines", "example id", "example detail"],
                [[r["reason"], f"{int(r['n']):,}", *example.get(r["reason"], ("", ""))] for r in by_reason],
            )
        )
        md.append(
            "\nEvery rejected line is in the `rejects` table with its reason, detail and source file.\n"
        )
        md.append("\n## Export gaps\n\n")
        md.append(
            table(
                ["detected (UTC)", "after id", "first available id", "events lost", "certain", "note"],
                [
                    [
                        ts(g["detected_at_ms"]),
                        g["after_id"],
                        g["first_available_id"],
                        g["lost"],
                        g["certain"],
                        g["note"],
                    ]
                    for g in gaps
                ],
            )
        )
        path = self.out / "report.md"
        path.write_text("".join(md), encoding="utf-8")
        return path


def render(spark: SparkSession, tables: str, out: str | Path, risk_ratio: float = 0.75) -> Path:
    """Write ``report.md`` and its PNGs to ``out`` from the tables under ``tables``."""
    return Report(spark, tables, Path(out), risk_ratio).render()
