"""The whole job on a synthetic history: every line accounted for, every table and the report."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from namesrv.pipeline import io
from namesrv.pipeline.cli import main as pipeline_main
from namesrv.pipeline.job import TABLES, PipelineConfig, run
from namesrv.pipeline.report import render
from namesrv.pipeline.synth import generate
from tests.pipeline.test_synth import TINY

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]


def test_run_accounts_for_every_line_and_writes_every_table(spark: SparkSession, tmp_path: Path) -> None:
    export = tmp_path / "export"
    events, bad = generate(replace(TINY, bad_rate=0.01), export, shards=2)
    lines = sum(len(gzip.decompress(f.read_bytes()).splitlines()) for f in export.glob("day=*/*.gz"))
    assert bad > 0 and lines == events + bad
    out = str(tmp_path / "tables")
    cfg = PipelineConfig(inputs=(str(export),), output=out, as_of_ms=(TINY.start_ms + 3_600_000,))
    summary = run(spark, cfg)
    assert summary.events + summary.rejected == lines
    assert summary.events == events  # every bad line was an extra line: none of the good ones is lost
    for name, schema in TABLES.items():
        assert io.table_exists(spark, out, name, schema), name
    assert io.read_table(spark, out, "route_as_of", TABLES["route_as_of"]).count() > 0
    again = run(spark, replace(cfg, from_events=True))  # the answers alone, from the events table
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
