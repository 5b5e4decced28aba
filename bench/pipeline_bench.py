"""Route-history pipeline benchmark: ``make bench-pipeline``.

1. generates N synthetic change-log events (the ``bench`` fleet: 4 clusters x 6 broker names x
   master+slave heartbeating every second, 3,000 topics, crashes, flaps, wipes) with two
   generator processes, in the export's layout (``--format``: Parquet by default, or gzip JSON
   lines) in day folders;
2. runs the whole pipeline (ingest + every answer table) on ``local[2]`` and prints events/s
   end to end;
3. reruns it on the first M events with several ``spark.sql.shuffle.partitions`` values and
   prints how the time changes;
4. cluster mode (``--executors 1,2``): on those M events, ``spark-submit`` to ``local[2]`` and
   to a standalone cluster (master + N one-core workers on this machine, from PySpark's jars),
   printing events/s and the time of each stage and table (bench/pipeline_cluster.py).

Results also go to ``bench/results/pipeline.json``. Data is kept under ``--work`` and reused
when it holds the same number of events (``--fresh`` regenerates).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from namesrv.pipeline.fleetspec import PRESETS
from namesrv.pipeline.job import PipelineConfig, run
from namesrv.pipeline.spark import build_session
from namesrv.pipeline.synth import generate


def _generate(out: Path, events: int, fresh: bool, fmt: str) -> float:
    stamp = out / "_events"
    if not fresh and stamp.exists() and stamp.read_text() == f"{events} {fmt}":
        print(f"reusing {events:,} events in {out}")
        return 0.0
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    made, bad = generate(replace(PRESETS["bench"], max_events=events), out, shards=2, fmt=fmt)
    elapsed = time.perf_counter() - started
    stamp.write_text(f"{events} {fmt}")
    print(f"generated {made:,} events (+{bad} bad lines) in {elapsed:.1f} s ({made / elapsed:,.0f} events/s)")
    return elapsed


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=10_000_000)
    p.add_argument("--partitions", type=int, default=8, help="shuffle partitions of the main run")
    p.add_argument("--sweep", default="2,8,32", help="shuffle partitions to compare ('' to skip)")
    p.add_argument("--sweep-events", type=int, default=2_000_000)
    p.add_argument(
        "--executors", default="1,2", help="standalone cluster sizes to compare with local[2] ('' to skip)"
    )
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "namesrv-pipeline-bench"))
    p.add_argument("--fresh", action="store_true", help="regenerate the data")
    p.add_argument(
        "--format",
        choices=("parquet", "jsonl"),
        default="parquet",
        help="export format of the generated history (default parquet, the fast one)",
    )
    args = p.parse_args()

    work = Path(args.work)
    results: dict[str, object] = {
        "events": args.events,
        "format": args.format,
        "master": args.master,
        "load_before": _load(),
    }
    export = work / f"export-{args.format}"
    results["generate_s"] = round(_generate(export, args.events, args.fresh, args.format), 1)
    spark = build_session(
        master=args.master, shuffle_partitions=args.partitions, driver_memory=args.driver_memory
    )
    try:
        tables = str(work / "tables")
        started = time.perf_counter()
        summary = run(spark, PipelineConfig(inputs=(str(export),), output=tables))
        elapsed = time.perf_counter() - started
        rate = summary.events / elapsed
        results |= {
            "pipeline_s": round(elapsed, 1),
            "events_per_s": round(rate),
            "stages_s": summary.seconds,
            "partitions": args.partitions,
            "load_after": _load(),
        }
        verdict = "within" if elapsed <= 120 else "over"
        print(
            f"pipeline: {summary.events:,} events ({args.format}) in {elapsed:.1f} s = {rate:,.0f} events/s "
            f"end to end on "
            f"{args.master}, {args.partitions} shuffle partitions (stages {summary.seconds}); "
            f"{verdict} the 120 s target; load average {_load()}"
        )
        sweep = [int(x) for x in args.sweep.split(",") if x]
        if sweep:
            small = work / f"export-{args.format}-{args.sweep_events}"
            _generate(small, args.sweep_events, args.fresh, args.format)
            rows = []
            for parts in sweep:
                spark.conf.set("spark.sql.shuffle.partitions", str(parts))
                started = time.perf_counter()
                s = run(spark, PipelineConfig(inputs=(str(small),), output=str(work / f"tables-{parts}")))
                took = time.perf_counter() - started
                rate = s.events / took
                rows.append({"partitions": parts, "seconds": round(took, 1), "events_per_s": round(rate)})
                print(f"  {parts:>3} shuffle partitions: {took:6.1f} s  {rate:>10,.0f} events/s")
            results["sweep"] = {"events": args.sweep_events, "runs": rows}
    finally:
        spark.stop()
    executors = [int(x) for x in args.executors.split(",") if x]
    if executors:
        from bench.pipeline_cluster import cluster_rows

        small = work / f"export-{args.format}-{args.sweep_events}"
        _generate(small, args.sweep_events, args.fresh, args.format)
        print(f"cluster mode ({args.sweep_events:,} events, spark-submit, 4 shuffle partitions):")
        cluster = cluster_rows(small, work, executors, partitions=4)
        results["cluster"] = {"events": args.sweep_events, "runs": cluster}
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "pipeline.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
