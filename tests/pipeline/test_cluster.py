"""The pipeline on a real Spark standalone cluster (a master and two 1-core workers on loopback,
started from PySpark's own jars), submitted exactly as docs/PIPELINE.md tells users: its tables
must equal, row by row, those of the same export run in local mode, open with pyarrow, and the run
must move no window's rows to one partition (a property of the plans, the same in either mode).

The local-mode side runs in the Spark tier's shared local session: the same job on the same
export, without a second spark-submit (a JVM of its own, cold, about a minute of the tier)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from namesrv.pipeline.cli import parse_instant
from namesrv.pipeline.job import TABLES, PipelineConfig, run
from namesrv.pipeline.standalone import StandaloneCluster, package_zip, spark_env, submit_command
from tests.polling import scaled

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]
SERVICE = Path(__file__).resolve().parents[2] / "service"
SINGLE_PARTITION = "No Partition Defined for Window operation"
AS_OF = "2026-11-01T02:00:00Z"
CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}


def table_rows(root: Path, name: str) -> list[str]:
    """Every row of a table as pyarrow reads it (so this fails if pyarrow cannot), sorted."""
    rows = pq.read_table(root / name).to_pylist()
    return sorted(repr(sorted(r.items())) for r in rows)


def _run(cmd: list[str], work: Path, name: str) -> str:
    done = subprocess.run(
        cmd, env=spark_env(work), capture_output=True, text=True, timeout=scaled(600), check=False
    )
    (work / f"{name}.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stderr


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from namesrv.pipeline.cli import main

    out = tmp_path_factory.mktemp("export")
    # bad lines too (duplicates among them): the events table then holds deduplicated rows
    assert main(["generate", "--out", str(out), "--events", "3000", "--bad-rate", "0.02"]) == 0
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with StandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1) as c:
        yield c


def test_standalone_cluster_tables_equal_local_mode(
    spark: SparkSession, export: Path, cluster: StandaloneCluster, tmp_path: Path
) -> None:
    zip_path = package_zip(SERVICE, tmp_path / "dist" / "namesrv.zip")
    args = ["run", str(export), "--as-of", AS_OF]
    on_cluster = tmp_path / "cluster-tables"
    cluster_log = _run(
        submit_command(
            cluster.url,
            zip_path,
            [*args, "--out", str(on_cluster)],
            CONF | {"spark.executor.memory": "512m", "spark.cores.max": "2"},
        ),
        tmp_path,
        "cluster",
    )
    local = tmp_path / "local-tables"
    run(spark, PipelineConfig(inputs=(str(export),), output=str(local), as_of_ms=(parse_instant(AS_OF),)))
    assert cluster_log.count(SINGLE_PARTITION) == 0
    # the cluster run really ran on the workers' executors
    executors = list((cluster.work / "worker").rglob("stderr"))
    assert len(executors) >= 1
    for name in TABLES:
        assert table_rows(on_cluster, name) == table_rows(local, name), name
    assert len(table_rows(local, "events")) > 2500
    assert len(table_rows(local, "route_as_of")) > 0
