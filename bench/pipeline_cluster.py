"""Cluster rows of ``make bench-pipeline``: the same export on ``local[2]`` and on a Spark
standalone cluster of 1 and 2 one-core executors on this machine (master and workers started
from PySpark's own jars), each submitted as docs/PIPELINE.md tells users (``spark-submit
--py-files namesrv.zip .../__main__.py run ...``). Prints events/s and the time of each stage and
table; returns the rows for ``bench/results/pipeline.json``."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from namesrv.pipeline.standalone import StandaloneCluster, package_zip, spark_env, submit_command

SERVICE = Path(__file__).resolve().parents[1] / "service"
TABLE_TIME = re.compile(r"table (\w+) written in ([0-9.]+) s")
SINGLE_PARTITION = "No Partition Defined for Window operation"


def _submit(
    master: str, zip_path: Path, export: Path, out: Path, work: Path, conf: dict[str, str]
) -> dict[str, object]:
    cmd = submit_command(master, zip_path, ["run", str(export), "--out", str(out)], conf)
    started = time.perf_counter()
    done = subprocess.run(cmd, env=spark_env(work), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"spark-submit on {master} failed: {done.stderr[-2000:]}")
    # the job's summary is its one JSON line; Spark may print after it
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"spark-submit on {master} printed no summary: {done.stdout[-2000:]}")
    summary = json.loads(lines[-1])
    seconds: dict[str, float] = summary["seconds"]
    return {
        "events": summary["events"],
        "job_s": seconds["total"],
        "submit_wall_s": round(wall, 1),  # + JVM start, executor launch
        "events_per_s": round(summary["events"] / seconds["total"]),
        "stages_s": seconds,
        "tables_s": {m.group(1): float(m.group(2)) for m in TABLE_TIME.finditer(done.stderr)},
        "single_partition_warnings": done.stderr.count(SINGLE_PARTITION),
    }


def cluster_rows(export: Path, work: Path, executors: list[int], partitions: int) -> list[dict[str, object]]:
    zip_path = package_zip(SERVICE, work / "dist" / "namesrv.zip")
    conf = {"spark.sql.shuffle.partitions": str(partitions), "spark.ui.enabled": "false"}
    rows: list[dict[str, object]] = []
    local = _submit(
        "local[2]", zip_path, export, work / "tables-local2", work, conf | {"spark.driver.memory": "2g"}
    )
    rows.append({"mode": "local[2]"} | local)
    for n in executors:
        with StandaloneCluster(work / f"standalone-{n}", workers=n, cores=1, worker_memory="2g") as cluster:
            row = _submit(
                cluster.url,
                zip_path,
                export,
                work / f"tables-standalone-{n}",
                work,
                conf
                | {"spark.executor.memory": "1500m", "spark.cores.max": str(n), "spark.driver.memory": "1g"},
            )
        rows.append({"mode": f"standalone, {n} x 1-core executor"} | row)
    for r in rows:
        print(
            f"  {r['mode']:<32} {r['events']:>11,} events in {r['job_s']:7.1f} s"
            f" = {r['events_per_s']:>9,} events/s"
            f"  (stages {r['stages_s']}; single-partition warnings {r['single_partition_warnings']})"
        )
        slowest = sorted(dict(r["tables_s"]).items(), key=lambda kv: -kv[1])[:5]  # type: ignore[call-overload]
        print("      slowest tables: " + ", ".join(f"{k} {v:.1f} s" for k, v in slowest))
    return rows
