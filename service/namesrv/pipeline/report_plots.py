"""The report's PNG plots (matplotlib, Agg backend): each draws rows the report collected and
returns the file name it wrote under ``out``, or None when there is nothing to draw."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.patches import Rectangle
from pyspark.sql import Row

CAUSE_COLORS = {"no_route": "#3b0000", "no_live_master": "#d62728", "no_writable_queue": "#ff7f0e"}
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


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def availability_heatmap(out: Path, rows: list[Row]) -> str | None:
    if not rows:
        return None
    members = sorted({(r["cluster"], r["broker_name"] or "?", r["broker_addr"]) for r in rows})
    days = sorted({r["day"] for r in rows})
    index = {m: i for i, m in enumerate(members)}
    grid = [[float("nan")] * len(days) for _ in members]
    for r in rows:
        if r["availability"] is not None:
            grid[index[(r["cluster"], r["broker_name"] or "?", r["broker_addr"])]][days.index(r["day"])] = r[
                "availability"
            ]
    cmap = LinearSegmentedColormap.from_list("avail", ["#b2182b", "#f4a582", "#fddbc7", "#d9f0d3", "#1b7837"])
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
    return _save(fig, out, "availability-heatmap.png")


def gap_histogram(out: Path, rows: list[Row], risk_ratio: float) -> str | None:
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8, 3.6))
    xs = [r["ratio_lo"] for r in rows]
    ys = [r["gaps"] for r in rows]
    colors = ["#1f77b4" if x < risk_ratio else "#ff7f0e" if x < 1.0 else "#d62728" for x in xs]
    ax.bar(xs, ys, width=0.045, align="edge", color=colors)
    ax.set_yscale("log")
    ax.axvline(risk_ratio, color="#ff7f0e", linestyle="--", label=f"at-risk threshold {risk_ratio:g}")
    ax.axvline(1.0, color="#d62728", linestyle="-", label="timeout (broker hidden)")
    ax.set_xlabel("heartbeat gap / heartbeat timeout (last bin: 1.5 and above)")
    ax.set_ylabel("gaps (log scale)")
    ax.set_title(
        "Heartbeat gaps against each broker's timeout: bars past the dashed line came close to expiry",
        fontsize=9,
    )
    ax.legend(loc="upper right", fontsize=8)
    return _save(fig, out, "heartbeat-gaps.png")


def writability_timeline(out: Path, rows: list[Row], first: int, last: int) -> str | None:
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
    return _save(fig, out, "topic-writability.png")


def size_plot(out: Path, rows: list[Row]) -> str | None:
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
    top.set_title("Registry size at each bucket's end (dotted: peak inside it): look for drops", fontsize=9)
    return _save(fig, out, "registry-size.png")


def _save(fig: Any, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name
