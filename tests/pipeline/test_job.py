"""The whole job on a synthetic history: every line accounted for, every table and the report."""

from __future__ import annotations

import gzip
import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from pyspark.testing import assertDataFrameEqual

from namesrv.events import layout
from namesrv.pipeline import io
from namesrv.pipeline.cli import main as pipeline_main
from namesrv.pipeline.job import TABLES, PipelineConfig, RunSummary, run
from namesrv.pipeline.report import render
from namesrv.pipeline.synth import generate
from tests.pipeline.test_synth import TINY

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

PARTITIONED = {"events": "day"}  # pyarrow puts a Hive partition column last


def _arrow_names(schema: StructType, name: str) -> list[str]:
    names = schema.fieldNames()
    key = PARTITIONED.get(name)
    return [n for n in names if n != key] + ([key] if key else [])


@dataclass(frozen=True)
class TextRun:
    """One run of the job on a TINY jsonl export with bad lines, shared by the tests below
    (each full run costs tens of seconds of the Spark tier): what was written and what came out."""

    export: Path
    events: int
    bad: int
    cfg: PipelineConfig
    summary: RunSummary


@pytest.fixture(scope="module")
def text_run(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> TextRun:
    root = tmp_path_factory.mktemp("text-run")
    export = root / "jsonl"
    events, bad = generate(replace(TINY, bad_rate=0.01), export, shards=2)
    cfg = PipelineConfig(
        inputs=(str(export),), output=str(root / "tables"), as_of_ms=(TINY.start_ms + 3_600_000,)
    )
    return TextRun(export, events, bad, cfg, run(spark, cfg))


def test_run_accounts_for_every_line_and_writes_every_table(
    spark: SparkSession, text_run: TextRun, tmp_path: Path
) -> None:
    events, bad, cfg, summary = text_run.events, text_run.bad, text_run.cfg, text_run.summary
    lines = sum(len(gzip.decompress(f.read_bytes()).splitlines()) for f in text_run.export.glob("day=*/*.gz"))
    assert bad > 0 and lines == events + bad
    out = cfg.output
    assert summary.events + summary.rejected == lines
    assert summary.events == events  # every bad line was an extra line: none of the good ones is lost
    for name, schema in TABLES.items():
        assert io.table_exists(spark, out, name, schema), name
        # outside Spark too: pyarrow reads each table as one dataset with the documented columns
        assert pq.read_table(f"{out}/{name}").schema.names == _arrow_names(schema, name), name
    assert pq.read_table(f"{out}/events").num_rows == events
    assert io.read_table(spark, out, "route_as_of", TABLES["route_as_of"]).count() > 0
    # the answers alone, from the events table (into a copy: the shared run's tables stay as written)
    again_out = tmp_path / "tables"
    shutil.copytree(Path(out) / "events", again_out / "events")
    shutil.copytree(Path(out) / "rejects", again_out / "rejects")
    again = run(spark, replace(cfg, output=str(again_out), from_events=True))
    assert again.events == summary.events

    report = render(spark, out, tmp_path / "report")
    text = report.read_text()
    for heading in ("Broker availability", "Heartbeat gaps", "Topic writability", "Rejected lines"):
        assert f"## {heading}" in text
    for png in ("availability-heatmap.png", "heartbeat-gaps.png", "registry-size.png"):
        assert (tmp_path / "report" / png).stat().st_size > 1000


def test_cli_generate_and_parse_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        pipeline_main(
            ["generate", "--out", str(tmp_path), "--preset", "sample", "--days", "0.01", "--clusters", "1"]
        )
        == 0
    )
    assert '"events"' in capsys.readouterr().out
    assert pipeline_main(["generate", "--out", str(tmp_path), "--preset", "nope"]) == 2
    with pytest.raises(SystemExit):
        pipeline_main(["run", str(tmp_path), "--out", str(tmp_path / "t"), "--as-of", "yesterday"])


def _to_parquet(src: Path, dst: Path) -> int:
    """The same history as the Parquet export would hold it: every line that is a JSON object
    becomes a row (a corrupt line has no Parquet form); returns the lines left out."""
    skipped = 0
    for f in sorted(src.glob("day=*/*.jsonl.gz")):
        rows = []
        for line in gzip.decompress(f.read_bytes()).splitlines():
            try:
                parsed = json.loads(line)
            except json.JSONDecodeError:
                skipped += 1
                continue
            rows.append((parsed["id"], parsed["fields"]))
        out = dst / f.parent.name / f.name.replace(".jsonl.gz", ".parquet")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(layout.parquet_bytes(rows))
    return skipped


def test_parquet_export_gives_the_same_tables_as_jsonl(
    spark: SparkSession, text_run: TextRun, tmp_path: Path
) -> None:
    corrupt = _to_parquet(text_run.export, tmp_path / "parquet")
    assert corrupt > 0
    text, text_out = text_run.summary, text_run.cfg.output
    cols_out = str(tmp_path / "tables-parquet")
    cols = run(spark, replace(text_run.cfg, inputs=(str(tmp_path / "parquet"),), output=cols_out))
    assert cols.events == text.events and cols.rejected == text.rejected - corrupt
    for name, schema in TABLES.items():
        a, b = io.read_table(spark, text_out, name, schema), io.read_table(spark, cols_out, name, schema)
        if name == "rejects":  # the text has corrupt lines on top; raw and file differ by format
            a = a.filter(F.col("reason") != "corrupt_line").drop("raw", "source_file")
            b = b.drop("raw", "source_file")
        assert a.count() > 0 or name in ("export_gaps", "flapping"), name
        assertDataFrameEqual(b, a, checkRowOrder=False)


def test_a_mixed_export_is_read_whole(spark: SparkSession, tmp_path: Path) -> None:
    """An export folder switched from jsonl to parquet (or the reverse) holds both: every file
    is read, and an entry that is in both is one event plus a duplicate."""
    export = tmp_path / "export"
    events, _ = generate(TINY, export, shards=2)
    files = sorted(export.glob("day=*/*.jsonl.gz"))
    half = len(files) // 2
    _to_parquet(export, tmp_path / "converted")
    for f in files[:half]:
        f.unlink()
    for f in sorted((tmp_path / "converted").glob("day=*/*.parquet"))[: half + 1]:
        (export / f.parent.name).mkdir(exist_ok=True)
        f.rename(export / f.parent.name / f.name)
    summary = run(spark, PipelineConfig(inputs=(str(export),), output=str(tmp_path / "tables")))
    assert summary.events == events
    assert set(summary.rejects) == {"duplicate"} and summary.rejected > 0
