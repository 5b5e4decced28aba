"""Building the SparkSession: the same code for ``python -m`` (local mode) and ``spark-submit``.

Under ``spark-submit`` the master, memory and the rest come from its flags and
``spark-defaults.conf``; we only add settings the pipeline's answers depend on (UTC session time
zone) or that keep its generated code fast (codegen limits), and leave everything else alone.
Run directly (``python -m namesrv.pipeline``), we start a local Spark with the given master and
quiet, UI-less defaults.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pyspark.sql import SparkSession

APP_NAME = "namesrv-route-history"


def under_spark_submit() -> bool:
    """True when this Python process was started by spark-submit (it passes the gateway port)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def local_conf(master: str, shuffle_partitions: int, driver_memory: str) -> dict[str, str]:
    return {
        "spark.master": master,
        "spark.driver.memory": driver_memory,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }


def build_session(
    *,
    master: str | None = None,
    shuffle_partitions: int | None = None,
    driver_memory: str = "4g",
    extra: Mapping[str, str] | None = None,
) -> SparkSession:
    builder = (
        SparkSession.builder.appName(APP_NAME)
        .config("spark.sql.session.timeZone", "UTC")
        # The line checks compile to one large method; above HotSpot's 8000-byte limit the JIT
        # would leave it interpreted (3x slower), so let Spark split it instead.
        .config("spark.sql.codegen.hugeMethodLimit", "8000")
        # The heartbeat branch of the line checks compiles small; fused with the other branch
        # into one union stage it would share that branch's oversized code and lose it.
        .config("spark.sql.codegen.wholeStage.union.enabled", "false")
    )
    if not under_spark_submit():
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf = local_conf(master or "local[*]", shuffle_partitions or 8, driver_memory)
        for key, value in conf.items():
            builder = builder.config(key, value)
    elif shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("NAMESRV_SPARK_LOG_LEVEL", "WARN"))
    return spark
