"""``namesrv events export``: resumable, idempotent, crash-safe, loud about lost events."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
import redis

from namesrv import cli
from namesrv.events import layout
from namesrv.events.export import EXIT_GAP, Exporter, ExportError
from namesrv.store.keyspace import Keyspace
from tests.polling import scaled, wait_until

pytestmark = pytest.mark.redis


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.fixture
def stream(client: redis.Redis) -> Iterator[str]:
    name = Keyspace(f"t-{uuid.uuid4().hex[:10]}").events
    yield name
    client.delete(name)


def add(client: redis.Redis, stream: str, n: int, start: int = 0) -> list[str]:
    ids = []
    for i in range(start, start + n):
        ids.append(
            client.xadd(
                stream, {"kind": "kvPut", "ts": "1", "namespace": "ns", "key": f"k{i}", "value": "é"}
            ).decode()
        )
    return ids


def in_stream_order(files: Iterable[Path]) -> list[Path]:
    """Export files in the order of their entries: a file is named after its first entry's id,
    and by name "-13" sorts before "-3" when several batches start in the same millisecond."""
    return sorted(files, key=lambda f: _sid(f.name.removeprefix("events-").split(".", 1)[0]))


def exported(out: Path) -> list[str]:
    ids = []
    for f in in_stream_order(out.glob("day=*/*.jsonl.gz")):
        ids += [json.loads(line)["id"] for line in gzip.decompress(f.read_bytes()).splitlines()]
    return ids


def test_export_twice_in_a_row_writes_each_entry_once(
    client: redis.Redis, stream: str, tmp_path: Path
) -> None:
    ids = add(client, stream, 25)
    first = Exporter(client, stream, tmp_path, batch=10).run()
    assert (first.exported, first.files, first.last_id) == (25, 3, ids[-1])
    again = Exporter(client, stream, tmp_path, batch=10).run()
    assert (again.exported, again.files) == (0, 0)
    more = add(client, stream, 5, start=25)
    third = Exporter(client, stream, tmp_path, batch=10).run()
    assert (third.exported, third.last_id) == (5, more[-1])
    assert exported(tmp_path) == ids + more
    line = gzip.decompress(next(tmp_path.glob("day=*/*.gz")).read_bytes()).splitlines()[0]
    assert json.loads(line)["fields"]["value"] == "é"
    checkpoint = json.loads((tmp_path / "_export" / "checkpoint.json").read_text())
    assert checkpoint == checkpoint | {"stream": stream, "last_id": more[-1], "exported": 30, "ordinal": 30}


def crash_then_rerun(
    client: redis.Redis, stream: str, out: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> tuple[list[str], list[str]]:
    """An export killed after writing its data file, before its checkpoint, then run again once
    the stream grew. Returns the entry IDs added before and after the crash."""
    ids = add(client, stream, 8)

    def crash(self: Exporter, last_id: str, n: int, ordinal: int | None = None) -> None:
        raise KeyboardInterrupt("killed after writing the data file")

    monkeypatch.setattr(Exporter, "write_checkpoint", crash)
    with pytest.raises(KeyboardInterrupt):
        Exporter(client, stream, out, batch=100, fmt=fmt).run()
    monkeypatch.undo()
    more = add(client, stream, 4, start=8)  # the stream grew meanwhile: the rerun's batch is bigger
    Exporter(client, stream, out, batch=100, fmt=fmt).run()
    return ids, more


def test_a_crash_before_the_checkpoint_does_not_duplicate(
    client: redis.Redis, stream: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids, more = crash_then_rerun(client, stream, tmp_path, monkeypatch, "jsonl")
    assert exported(tmp_path) == ids + more  # same file name (first id), rewritten with a superset
    assert not list(tmp_path.glob("day=*/.*tmp*"))


def test_a_trimmed_stream_is_reported_as_a_gap(client: redis.Redis, stream: str, tmp_path: Path) -> None:
    add(client, stream, 5)
    Exporter(client, stream, tmp_path).run()
    lost = add(client, stream, 5, start=5)
    client.xtrim(stream, maxlen=0)  # the export ran too rarely: entries it never saw are gone
    kept = add(client, stream, 3, start=10)
    result = Exporter(client, stream, tmp_path).run()
    assert result.gap_found and result.exported == 3
    gap = json.loads((tmp_path / "_export" / "gaps.jsonl").read_text().splitlines()[0])
    assert gap["certain"] and gap["lost"] == str(len(lost)) and gap["first_available_id"] == kept[0]
    assert not Exporter(client, stream, tmp_path).run().gap_found  # reported once


def test_a_second_export_into_the_same_folder_is_refused(
    client: redis.Redis, stream: str, tmp_path: Path
) -> None:
    add(client, stream, 2)
    exporter = Exporter(client, stream, tmp_path)
    with exporter.locked(), pytest.raises(ExportError, match="another export"):
        Exporter(client, stream, tmp_path).run()
    other = Keyspace("other").events
    Exporter(client, stream, tmp_path).run()
    with pytest.raises(ExportError, match="not"):
        Exporter(client, other, tmp_path).run()


def test_cli_export(
    redis_url: str, client: redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = f"t-{uuid.uuid4().hex[:10]}"
    stream = Keyspace(ns).events
    add(client, stream, 3)
    args = ["events", "export", "--out", str(tmp_path), "--redis-url", redis_url, "--namespace", ns]
    try:
        assert cli.main(args) == 0
        assert "exported 3 events" in capsys.readouterr().out
        add(client, stream, 2, start=3)  # never exported...
        client.xtrim(stream, maxlen=0)  # ...and trimmed
        add(client, stream, 1, start=5)
        assert cli.main(args) == EXIT_GAP
        assert "EVENTS WERE LOST" in capsys.readouterr().err
    finally:
        client.delete(stream)


def test_the_service_flags_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["-p"]) == 0
    assert "namespace=namesrv" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["events"])  # the subcommand is required


def _sid(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def parquet_exported(out: Path) -> list[tuple[str, dict[str, str]]]:
    rows = []
    for f in in_stream_order(out.glob("day=*/*.parquet")):
        rows += layout.read_parquet(f.read_bytes())
    return rows


def test_parquet_export_holds_the_same_entries_and_reruns_idempotently(
    client: redis.Redis, stream: str, tmp_path: Path
) -> None:
    ids = add(client, stream, 25)
    client.xadd(stream, {"kind": "kvPut", "ts": "2", "namespace": "ns", "key": "k", "futureField": "x"})
    as_jsonl, as_parquet = tmp_path / "jsonl", tmp_path / "parquet"
    Exporter(client, stream, as_jsonl, batch=10).run()
    first = Exporter(client, stream, as_parquet, batch=10, fmt="parquet").run()
    assert (first.exported, first.files) == (26, 3)
    assert not list(as_parquet.glob("day=*/*.jsonl.gz"))
    again = Exporter(client, stream, as_parquet, batch=10, fmt="parquet").run()
    assert (again.exported, again.files) == (0, 0)
    lines = []
    for f in in_stream_order(as_jsonl.glob("day=*/*.jsonl.gz")):
        lines += [json.loads(line) for line in gzip.decompress(f.read_bytes()).splitlines()]
    # Within one millisecond the order of entries in a file is not part of the contract; compare in
    # stream-id order (numeric: "-14" comes after "-4").
    rows = sorted(parquet_exported(as_parquet), key=lambda r: _sid(r[0]))
    assert [r[0] for r in rows] == sorted([*ids, lines[-1]["id"]], key=_sid)
    expected = sorted(((line["id"], line["fields"]) for line in lines), key=lambda r: _sid(r[0]))
    assert rows == expected  # unknown fields included
    assert rows[0][1]["value"] == "é"


def test_parquet_export_after_a_crash_rewrites_the_same_file(
    client: redis.Redis, stream: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids, more = crash_then_rerun(client, stream, tmp_path, monkeypatch, "parquet")
    assert [r[0] for r in parquet_exported(tmp_path)] == ids + more
    assert len(list(tmp_path.glob("day=*/*.parquet"))) == 1


def test_parquet_export_without_pyarrow_fails_clearly(redis_url: str, tmp_path: Path) -> None:
    # A separate interpreter in which pyarrow cannot be imported, as in the service's image
    # without the pipeline extra: nothing may be read or written, the message says what to do.
    script = (
        "import sys; sys.modules['pyarrow'] = None; from namesrv import cli; "
        f"sys.exit(cli.main(['events', 'export', '--out', {str(tmp_path / 'out')!r}, "
        f"'--redis-url', {redis_url!r}, '--format', 'parquet']))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--format parquet needs pyarrow" in done.stderr
    assert "--format jsonl" in done.stderr
    assert not (tmp_path / "out").exists()


def test_an_export_killed_mid_run_resumes_with_every_entry_once(
    redis_url: str, client: redis.Redis, tmp_path: Path
) -> None:
    """A real export process, kill -9 while it writes (after some batches, maybe inside a file),
    then a rerun: every entry is in the files exactly once, in order, and no partial file of the
    killed process is left where a reader would see it."""
    ns = f"t-{uuid.uuid4().hex[:10]}"
    stream = Keyspace(ns).events
    pipe = client.pipeline(transaction=False)
    for i in range(30_000):
        pipe.xadd(stream, {"kind": "kvPut", "ts": "1", "namespace": "ns", "key": f"k{i}", "value": "v"})
    ids = [i.decode() for i in pipe.execute()]
    args = ["--out", str(tmp_path), "--redis-url", redis_url, "--namespace", ns, "--batch", "50"]
    cmd = [sys.executable, "-m", "namesrv", "events", "export", *args]
    checkpoint = tmp_path / "_export" / "checkpoint.json"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: checkpoint.exists() or proc.poll() is not None, timeout=60, what="a checkpoint")
        proc.kill()  # SIGKILL: no cleanup runs
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -9, "the export finished before it could be killed"
    before = json.loads(checkpoint.read_text())["exported"]
    assert 0 < before < len(ids)
    try:
        assert subprocess.run(cmd, capture_output=True, timeout=scaled(300), check=False).returncode == 0
        assert exported(tmp_path) == ids
        assert list(tmp_path.glob("day=*/.*")) == []  # the killed run's temporary file is gone
    finally:
        client.delete(stream)


def test_sharded_exporters_write_every_entry_once_even_after_kill_9(
    redis_url: str, client: redis.Redis, tmp_path: Path
) -> None:
    """Two exporter processes (shards 0/2 and 1/2) into one folder; shard 0 is killed -9 mid-run
    and rerun, and both export what arrived meanwhile: every entry is in exactly one file."""
    ns = f"t-{uuid.uuid4().hex[:10]}"
    stream = Keyspace(ns).events

    def fill(n: int, start: int) -> list[str]:
        pipe = client.pipeline(transaction=False)
        for i in range(start, start + n):
            pipe.xadd(stream, {"kind": "kvPut", "ts": "1", "namespace": "ns", "key": f"k{i}", "value": "v"})
        return [i.decode() for i in pipe.execute()]

    def cmd(shard: str) -> list[str]:
        args = ["--out", str(tmp_path), "--redis-url", redis_url, "--namespace", ns, "--batch", "50"]
        return [sys.executable, "-m", "namesrv", "events", "export", *args, "--shard", shard]

    ids = fill(20_000, 0)
    first = tmp_path / "_export" / "shard-0-of-2" / "checkpoint.json"
    try:
        killed = subprocess.Popen(cmd("0/2"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        other = subprocess.Popen(cmd("1/2"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: first.exists() or killed.poll() is not None, timeout=60, what="a checkpoint")
            killed.kill()
        finally:
            killed.wait(timeout=30)
            assert other.wait(timeout=scaled(300)) == 0
        assert killed.returncode == -9, "shard 0 finished before it could be killed"
        ids += fill(500, 20_000)
        for shard in ("0/2", "1/2"):
            assert (
                subprocess.run(cmd(shard), capture_output=True, timeout=scaled(300), check=False).returncode
                == 0
            )
        got = exported(tmp_path)
        assert sorted(got, key=_sid) == ids  # every entry, once
        assert len(got) == len(set(got)) == len(ids)
        assert list(tmp_path.glob("day=*/.*")) == []
        # resharding into the same folder would break the ownership: refused
        done = subprocess.run(cmd("0/3"), capture_output=True, text=True, timeout=scaled(120), check=False)
        assert done.returncode == 2 and "holds an export in 2 shard(s), not 3" in done.stderr
    finally:
        client.delete(stream)
