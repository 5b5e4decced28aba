"""Command line of the route-history pipeline.

    python -m namesrv.pipeline run EXPORT_DIR... --out TABLES [--as-of TIME]... [--report DIR]
    python -m namesrv.pipeline report TABLES --out DIR
    python -m namesrv.pipeline generate --out DIR [--preset sample|bench] [--events N] ...

``TIME`` is epoch milliseconds or ISO-8601 (``2026-11-22T02:59:00Z``; UTC when no offset).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import fields, replace
from datetime import UTC, datetime

HOUR_MS = 3_600_000


def parse_instant(text: str) -> int:
    """Epoch ms, or an ISO-8601 date-time (UTC unless it has an offset)."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither epoch milliseconds nor ISO-8601") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    units = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": HOUR_MS, "d": 24 * HOUR_MS}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit) and text[: -len(unit)].isdigit():
            return int(text[: -len(unit)]) * units[unit]
    if text.isdigit():
        return int(text)
    raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 15m, 1h or 1d")


def _spark_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--master", help="Spark master when run with python -m (default local[*]; ignored under spark-submit)"
    )
    p.add_argument("--shuffle-partitions", type=int, help="spark.sql.shuffle.partitions (default 8)")
    p.add_argument("--driver-memory", default="4g", help="local mode driver memory (default 4g)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m namesrv.pipeline", description="Route history from the change log."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="export files -> Parquet tables (and a report)")
    run.add_argument(
        "inputs", nargs="+", metavar="EXPORT", help="export folders or files (any Spark-readable path)"
    )
    run.add_argument(
        "--out", required=True, metavar="TABLES", help="where the Parquet tables go (any Spark path)"
    )
    run.add_argument("--as-of", type=parse_instant, action="append", default=[], metavar="TIME",
                     help="rebuild the route table as of this instant (repeatable)")  # fmt: skip
    run.add_argument("--report", metavar="DIR", help="also write the Markdown report with plots here (local)")
    run.add_argument(
        "--flap-bound", type=int, default=3, help="more sessions than this per member-hour = flapping"
    )
    run.add_argument(
        "--risk-ratio", type=float, default=0.75, help="max gap / timeout at which a broker is at risk"
    )
    run.add_argument(
        "--bucket", type=parse_duration_ms, default=HOUR_MS, help="registry size resolution (default 1h)"
    )
    run.add_argument(
        "--max-skew-ms", type=int, default=60_000, help="ts vs stream-id tolerance before out_of_order"
    )
    run.add_argument("--from-events", action="store_true", help="skip ingest: reuse TABLES/events")
    _spark_args(run)

    rep = sub.add_parser("report", help="Parquet tables -> report.md + PNG plots")
    rep.add_argument("tables", metavar="TABLES")
    rep.add_argument("--out", required=True, metavar="DIR")
    rep.add_argument("--risk-ratio", type=float, default=0.75)
    _spark_args(rep)

    gen = sub.add_parser("generate", help="write a synthetic change-log history (export layout)")
    gen.add_argument("--out", required=True, metavar="DIR")
    gen.add_argument("--preset", default="sample", help="sample (default) or bench")
    gen.add_argument("--events", type=int, default=0, help="stop after about this many events (0: no limit)")
    gen.add_argument("--shards", type=int, default=1, help="generator processes (split by cluster)")
    gen.add_argument(
        "--format",
        choices=("jsonl", "parquet"),
        default="jsonl",
        help="file format, as the export's --format (parquet needs pyarrow)",
    )
    from namesrv.pipeline.fleetspec import FleetSpec

    for f in fields(FleetSpec):
        if f.name != "max_events":
            gen.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=None, dest=f.name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "generate":
        return _generate(args)
    from namesrv.pipeline.spark import build_session

    spark = build_session(
        master=args.master, shuffle_partitions=args.shuffle_partitions, driver_memory=args.driver_memory
    )
    try:
        if args.command == "run":
            return _run(spark, args)
        from namesrv.pipeline.report import render

        print(render(spark, args.tables, args.out, args.risk_ratio))
        return 0
    finally:
        spark.stop()


def _run(spark: object, args: argparse.Namespace) -> int:
    from namesrv.pipeline.job import PipelineConfig, run

    cfg = PipelineConfig(
        inputs=tuple(args.inputs),
        output=args.out,
        as_of_ms=tuple(args.as_of),
        flap_bound=args.flap_bound,
        risk_ratio=args.risk_ratio,
        bucket_ms=args.bucket,
        max_skew_ms=args.max_skew_ms,
        from_events=args.from_events,
    )
    started = time.perf_counter()
    summary = run(spark, cfg)  # type: ignore[arg-type]
    report = None
    if args.report:
        from namesrv.pipeline.report import render

        report = str(render(spark, cfg.output, args.report, cfg.risk_ratio))  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    print(
        json.dumps(
            {
                "events": summary.events,
                "rejected": summary.rejected,
                "rejects": summary.rejects,
                "first_ts": summary.first_ts,
                "last_ts": summary.last_ts,
                "seconds": summary.seconds | {"total": round(elapsed, 2)},
                "tables": cfg.output,
                "report": report,
            }
        )
    )
    return 0


def _generate(args: argparse.Namespace) -> int:
    from namesrv.pipeline.fleetspec import PRESETS
    from namesrv.pipeline.synth import generate

    if args.preset not in PRESETS:
        print(f"unknown preset {args.preset!r}; one of {', '.join(PRESETS)}", file=sys.stderr)
        return 2
    spec = PRESETS[args.preset]
    overrides = {k: v for k, v in vars(args).items() if k in {f.name for f in fields(spec)} and v is not None}
    spec = replace(spec, **overrides, max_events=args.events)
    started = time.perf_counter()
    events, bad = generate(spec, args.out, shards=args.shards, fmt=args.format)
    elapsed = time.perf_counter() - started
    print(json.dumps({"events": events, "bad_lines": bad, "seconds": round(elapsed, 2), "out": args.out}))
    return 0
