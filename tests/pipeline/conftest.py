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
from tests.polling import scaled

SPARK_TIMEOUT_S = 300
# The tier runs hundreds of small, different queries on a few thousand rows: compiling each plan
# to Java (whole-stage code generation, Janino) and re-planning it at every stage (adaptive
# execution) cost more than running it. Without them the same 25 tests of test_brokers,
# test_topics, test_parse and test_job took 104 s instead of 145 s. The rows a plan computes do
# not depend on either; the job's own settings (codegen limits, AQE) are what the standalone
# cluster test and `make bench-pipeline` run.
TEST_SESSION_CONF = {
    "spark.default.parallelism": "2",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.ui.enabled": "false",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Spark tests time out by the thread method, never by a signal, and scale with the load.

    The cause of the "org.apache.spark.sql.classic.SparkSession does not exist in the JVM"
    failures under load: pytest-timeout's default (SIGALRM) raised ``Failed`` (a BaseException)
    inside a py4j call of a slow test. py4j only cleans up on ``Exception``, so the thread's
    connection to the JVM kept the unread answer of the interrupted call, and the next call of
    every later test on the one shared session read an answer meant for another command (here a
    class lookup). The thread method ends the whole run with every stack dumped instead: one
    clear timeout, no corrupted session; the budget grows with NAMESRV_TEST_LOAD_FACTOR."""
    for item in items:
        if item.get_closest_marker("spark") is None:
            continue
        marker = item.get_closest_marker("timeout")
        seconds = float(marker.args[0]) if marker and marker.args else SPARK_TIMEOUT_S
        item.add_marker(pytest.mark.timeout(scaled(max(seconds, SPARK_TIMEOUT_S)), method="thread"))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession for the whole test run (JVM start-up costs seconds)."""
    session = build_session(
        master="local[2]",
        shuffle_partitions=2,
        # 2g: the whole Spark tier shares this one session serially; at 1g a late, tiny test ran
        # out of aggregation memory after ~2,900 stages of earlier ones (caches, broadcast state)
        driver_memory="2g",
        extra=TEST_SESSION_CONF,
    )
    yield session
    session.catalog.clearCache()
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
