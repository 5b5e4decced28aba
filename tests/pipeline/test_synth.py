"""The synthetic history generator: deterministic, consistent with the scripts' rules."""

from __future__ import annotations

import collections
import gzip
import json
from dataclasses import replace
from pathlib import Path

from namesrv.events import layout
from namesrv.pipeline.synth import FleetSpec, IdClock, generate, iter_lines

TINY = FleetSpec(
    clusters=2,
    names_per_cluster=2,
    slaves=1,
    topics=40,
    days=0.25,
    heartbeat_ms=5_000,
    crashes=6.0,
    closes=6.0,
)


def test_ids_never_go_back_and_are_unique_across_shards() -> None:
    a, b = IdClock(0, 2), IdClock(1, 2)
    ids = [a.next(5), b.next(5), a.next(5), a.next(4), b.next(6)]
    assert ids == ["5-0", "5-1", "5-2", "5-4", "6-1"]
    assert len(set(ids)) == len(ids)


def test_history_is_deterministic_and_has_every_kind_of_trouble() -> None:
    lines = list(iter_lines(TINY))
    assert lines == list(iter_lines(TINY))
    kinds = collections.Counter(json.loads(line)["fields"]["kind"] for line in lines)
    for kind in ("register", "registerQueues", "heartbeat", "expire", "close", "cleanQueues"):
        assert kinds[kind] > 0, kind
    ids = [json.loads(line)["id"] for line in lines]
    assert len(set(ids)) == len(ids)
    order = [tuple(int(p) for p in i.split("-")) for i in ids]
    assert order == sorted(order)  # written in stream order


def test_generate_writes_the_export_layout_in_parallel_shards(tmp_path: Path) -> None:
    events, bad = generate(TINY, tmp_path, shards=2)
    files = sorted(tmp_path.glob("day=*/part-*.jsonl.gz"))
    assert {f.name[:7] for f in files} == {"part-00", "part-01"}
    lines = [line for f in files for line in gzip.decompress(f.read_bytes()).splitlines()]
    assert (len(lines), bad) == (events, 0)
    assert len({json.loads(line)["id"] for line in lines}) == events


def test_parquet_history_holds_the_same_entries_as_jsonl(tmp_path: Path) -> None:
    spec = replace(TINY, days=0.05, bad_rate=0.01)
    as_jsonl = generate(spec, tmp_path / "jsonl", shards=2)
    assert generate(spec, tmp_path / "parquet", shards=2, fmt="parquet") == as_jsonl
    for text in sorted((tmp_path / "jsonl").glob("day=*/part-*.jsonl.gz")):
        parquet = (
            text.parent.parent.parent
            / "parquet"
            / text.parent.name
            / text.name.replace(".jsonl.gz", ".parquet")
        )
        rows = layout.read_parquet(parquet.read_bytes())
        lines = gzip.decompress(text.read_bytes()).splitlines()
        assert len(rows) == len(lines)
        for (entry_id, fields), line in zip(rows, lines, strict=True):
            try:
                parsed = json.loads(line)
            except json.JSONDecodeError:  # a truncated bad line: the Parquet row lost its fields
                assert fields == {}
                continue
            assert (entry_id, fields) == (parsed["id"], parsed["fields"])
