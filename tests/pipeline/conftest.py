from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark", reason="the pipeline extra is not installed")
if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java runtime for Spark", allow_module_level=True)

from pyspark.sql import SparkSession

from namesrv.pipeline.spark import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession for the whole test run (JVM start-up costs seconds)."""
    session = build_session(
        master="local[2]",
        shuffle_partitions=2,
        driver_memory="1g",
        extra={"spark.sql.adaptive.coalescePartitions.enabled": "true", "spark.default.parallelism": "2"},
    )
    yield session
    gateway = session.sparkContext._gateway
    session.stop()
    # The JVM runs as a child with open pipes (it exits when stdin closes): close them, so no
    # ResourceWarning is left for pytest's strict warnings at exit.
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
    if proc is not None:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait(timeout=60)
