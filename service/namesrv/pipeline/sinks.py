"""Where synthetic events go: stream IDs as Redis assigns them, an in-memory log (tests) and the
export's file layout (:class:`ShardWriter`: gzip JSON lines or Parquet in ``day=YYYY-MM-DD``
folders, optionally with bad lines mixed in)."""

from __future__ import annotations

import gzip
import random
from datetime import UTC, datetime
from pathlib import Path

from namesrv.events import layout
from namesrv.pipeline.registry_model import Fields


class IdClock:
    """Stream IDs ``<ms>-<seq>`` as Redis assigns them (never going back), made unique across
    ``shards`` independent generators by interleaving sequence numbers."""

    def __init__(self, shard: int = 0, shards: int = 1) -> None:
        self.shard, self.shards = shard, shards
        self.ms, self.seq = -1, 0

    def next(self, ts: int) -> str:
        if ts > self.ms:
            self.ms, self.seq = ts, 0
        else:
            self.seq += 1
        return f"{self.ms}-{self.seq * self.shards + self.shard}"


def line(entry_id: str, ts: int, kind: str, fields: Fields) -> bytes:
    return layout.jsonl_line(entry_id, {"kind": kind, "ts": str(ts), **fields})


class MemoryLog:
    """A sink that keeps the lines in memory (tests)."""

    def __init__(self) -> None:
        self.clock = IdClock()
        self.lines: list[str] = []

    def __call__(self, ts: int, kind: str, fields: Fields) -> None:
        self.lines.append(line(self.clock.next(ts), ts, kind, fields).decode().rstrip("\n"))


class ShardWriter:
    """Writes one shard's events as ``day=YYYY-MM-DD/part-<shard>-<HH>.jsonl.gz`` (or
    ``.parquet``: :mod:`namesrv.events.layout`), one file per hour of log time, with optional
    bad lines mixed in."""

    def __init__(
        self, out: Path, shard: int, shards: int, bad_rate: float, seed: int, fmt: str = "jsonl"
    ) -> None:
        layout.check_format(fmt)
        self.out, self.shard, self.fmt = out, shard, fmt
        self.clock = IdClock(shard, shards)
        self.rng = random.Random(f"bad/{seed}/{shard}")
        self.bad_rate = bad_rate
        self.hour = -1
        self.path: Path | None = None
        self.file: gzip.GzipFile | None = None
        self.rows: list[layout.Entry] = []  # the current hour's entries, for Parquet
        self.events = 0
        self.bad = 0

    def _roll(self, ts: int) -> None:
        hour = ts // 3_600_000
        if self.path is None or hour != self.hour:
            self.close()
            self.hour = hour
            when = datetime.fromtimestamp(ts / 1000, UTC)
            folder = self.out / f"day={when:%Y-%m-%d}"
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / f"part-{self.shard:02d}-{when:%H}{layout.SUFFIX[self.fmt]}"
            if self.fmt == "jsonl":
                self.file = gzip.GzipFile(self.path, "wb", compresslevel=1)

    def _write(self, entry_id: str, fields: Fields) -> None:
        if self.file is not None:
            self.file.write(layout.jsonl_line(entry_id, fields))
        else:
            self.rows.append((entry_id, fields))

    def __call__(self, ts: int, kind: str, fields: Fields) -> None:
        self._roll(ts)
        entry_id = self.clock.next(ts)
        full = {"kind": kind, "ts": str(ts), **fields}
        self._write(entry_id, full)
        self.events += 1
        if self.bad_rate and self.rng.random() < self.bad_rate:
            self._bad(entry_id, full)
            self.bad += 1

    def _bad(self, entry_id: str, full: Fields) -> None:
        which = self.rng.randrange(5)
        if which == 0:
            self._write(entry_id, full)  # duplicate
        elif which == 1:  # truncated: corrupt text; a Parquet row cannot be, it loses its fields
            if self.file is not None:
                text = layout.jsonl_line(entry_id, full)
                self.file.write(text[: len(text) // 2] + b"\n")
            else:
                self.rows.append((entry_id, {}))
        elif which == 2:
            self._write(entry_id, full | {"kind": "brokerTeleport"})  # unknown kind
        elif which == 3:  # a field the kind requires is missing
            gone = next((k for k in ("brokerName", "topic", "namespace", "changes") if k in full), "")
            self._write(entry_id, {k: v for k, v in full.items() if k != gone})
        else:
            self._write(entry_id, full | {"ts": "soon"})

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        elif self.rows and self.path is not None:
            self.path.write_bytes(layout.parquet_bytes(self.rows))
        self.rows = []
        self.path = None
