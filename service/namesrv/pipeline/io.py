"""The only module that touches paths: read the export's lines, read and write Parquet tables.

Paths are anything Spark reads (``/local/dir``, ``file:///``, ``hdfs://``, ``s3a://``): they are
joined with ``/`` and handed to Spark, never opened by Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from namesrv.pipeline import schemas as S

LINE_FILES = "*.jsonl*"  # events-*.jsonl.gz from the export, part-*.jsonl.gz from the generator
PARQUET_FILES = "*.parquet"  # the same entries as columns (export/generator --format parquet)
EXPORT_DIR = "_export"  # checkpoint and gap records; Spark skips paths starting with "_"


def join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *parts])


def read_lines(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Every line of every ``*.jsonl[.gz]`` file under ``paths`` (recursively, day partitions
    included) as (``value``, ``source_file``). Files are gzip-decompressed by extension."""
    return _line_files(spark, paths).select(F.col("value"), F.col("_metadata.file_path").alias("source_file"))


def _line_files(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    return (
        spark.read.option("recursiveFileLookup", "true")
        .option("pathGlobFilter", LINE_FILES)
        .text(list(paths))
    )


def read_parquet_lines(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Every row of every ``*.parquet`` export file under ``paths`` (recursively) as (``id``,
    ``fields``, ``source_file``): the columns of the export's Parquet layout, read with the
    explicit schema (``fields`` a struct of strings, like the parsed JSON of a line)."""
    return _parquet_files(spark, paths).select(
        "id", "fields", F.col("_metadata.file_path").alias("source_file")
    )


def read_parquet_ids(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The non-null ``id`` of every row of every ``*.parquet`` export file under ``paths``.

    Read without the file's path: Spark would build its whole file metadata struct (row index
    included) for every row, which costs more than reading the IDs themselves."""
    return _parquet_files(spark, paths).select("id").filter(F.col("id").isNotNull())


def _parquet_files(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    return (
        spark.read.schema(S.PARQUET_LINE)
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", PARQUET_FILES)
        .parquet(*paths)
    )


def has_files(df: DataFrame) -> bool:
    """Whether a file-based DataFrame reads at least one file (a listing, no data read): lets
    the job plan only the formats present, so an absent one costs no code generation."""
    return len(df.inputFiles()) > 0


def read_export_gaps(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The gap records the export wrote next to the data (empty when there are none)."""
    frames = []
    for p in paths:
        gaps = join(p, EXPORT_DIR, "gaps.jsonl")
        if path_exists(spark, gaps):
            frames.append(spark.read.schema(S.EXPORT_GAP).json(gaps))
    if not frames:
        return spark.createDataFrame([], S.EXPORT_GAP)
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def line_ids(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The ``id`` of each line of every ``*.jsonl[.gz]`` file under ``paths``, read cheaply from
    the text (the export writes it first; no file metadata, see :func:`read_parquet_ids`): used
    to find IDs that occur more than once before the full parse."""
    first = F.regexp_extract(F.col("value"), r'^\s*\{\s*"id"\s*:\s*"([^"]*)"', 1)
    return _line_files(spark, paths).select(first.alias("id")).filter(F.col("id") != "")


def _fs_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    target = jvm.org.apache.hadoop.fs.Path(path)
    return target.getFileSystem(conf), target


def path_exists(spark: SparkSession, path: str) -> bool:
    fs, target = _fs_path(spark, path)
    return bool(fs.exists(target))


def delete_dir(spark: SparkSession, path: str) -> None:
    fs, target = _fs_path(spark, path)
    if fs.exists(target):
        fs.delete(target, True)


def write_table(df: DataFrame, root: str, name: str, partition_by: Sequence[str] = ()) -> None:
    """Replace table ``name`` under ``root`` (Parquet)."""
    writer = df.write.mode("overwrite")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(join(root, name))


def read_table(spark: SparkSession, root: str, name: str, schema: StructType) -> DataFrame:
    return spark.read.schema(schema).parquet(join(root, name))


def table_exists(spark: SparkSession, root: str, name: str, schema: StructType) -> bool:
    try:
        read_table(spark, root, name, schema).limit(0).collect()
    except AnalysisException:
        return False
    return True
