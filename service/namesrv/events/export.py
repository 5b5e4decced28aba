"""``namesrv events export``: copy the change log (``{ns}:events``) to gzip JSON-lines or Parquet
files (``--format``, :mod:`.layout`).

Layout under ``--out``::

    day=2026-11-22/events-1795312800123-0.jsonl.gz   one file per batch and UTC day (or .parquet)
    _export/checkpoint.json                          last exported stream ID (atomic replace)
    _export/gaps.jsonl                               one record per detected loss of events
    _export/lock                                     held while an export runs

Each line is ``{"id": "<ms>-<seq>", "fields": {...}}`` with the entry's fields as Redis holds
them (Parquet: the same entries as ``id``/``fields``/``other_fields`` columns). Safe to run on
a schedule and twice in a row:

* it reads with ``XRANGE`` from the checkpoint ID (exclusive) in batches; for each batch it
  writes the data files first (to a temporary name, then renamed), and only then replaces the
  checkpoint. A crash between the two leaves the checkpoint behind; the rerun reads the same
  entries again and, because a file is named after the first ID it holds (per day), rewrites
  the same file with a superset instead of adding a second copy. The pipeline deduplicates by
  ID anyway, so even a copied file cannot double-count;
* a lock file keeps two exports from writing the same folder at once;
* when the stream was trimmed past the checkpoint (the export ran too rarely for the stream's
  ``eventsMaxLen``), events were lost: that is logged as an error, appended to
  ``_export/gaps.jsonl`` (the pipeline reports it) and the command exits with status 3 once the
  available events are exported.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import redis

from namesrv.events import layout
from namesrv.store.changelog import entry_key

log = logging.getLogger(__name__)
EXPORT_DIR = "_export"
EXIT_GAP = 3


class ExportError(RuntimeError):
    """The export cannot run (lock held, unreadable checkpoint, no Redis URL...)."""


def day_of(entry_id: str) -> str:
    return datetime.fromtimestamp(entry_key(entry_id)[0] / 1000, UTC).strftime("%Y-%m-%d")


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Gap:
    stream: str
    detected_at_ms: int
    after_id: str
    first_available_id: str
    lost: str  # how many entries were lost ("" when unknown)
    certain: bool
    note: str

    def to_json(self) -> bytes:
        return orjson.dumps(self.__dict__)


@dataclass
class ExportResult:
    exported: int = 0  # entries written (this shard's)
    read: int = 0  # entries read from the stream (every shard reads all of them)
    files: int = 0
    last_id: str = ""
    gaps: list[Gap] | None = None

    @property
    def gap_found(self) -> bool:
        return bool(self.gaps)


class Exporter:
    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        out: str | os.PathLike[str],
        batch: int = 20_000,
        fmt: str = "jsonl",
        shard: tuple[int, int] = (0, 1),
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be positive")
        index, shards = shard
        if not 0 <= index < shards:
            raise ValueError(f"shard {index}/{shards}: need 0 <= shard < shards")
        # Before anything is read or written: a missing pyarrow must not leave half an export.
        layout.check_format(fmt)
        self.fmt = fmt
        self.client = client
        self.stream = stream
        self.out = Path(out)
        self.shard, self.shards = index, shards
        # One exporter per shard, each with its own checkpoint and lock: shard i writes the
        # entries whose ID millisecond is i modulo the shard count (every entry has exactly one
        # owner, so N exporters never write an entry twice nor skip one); its files are named
        # after its own first entry, so they never collide with another shard's.
        self.tag = "all" if shards == 1 else f"shard-{index}-of-{shards}"
        self.meta = self.out / EXPORT_DIR if shards == 1 else self.out / EXPORT_DIR / self.tag
        self.batch = batch

    def owns(self, entry_id: str) -> bool:
        return self.shards == 1 or entry_key(entry_id)[0] % self.shards == self.shard

    # ---- checkpoint ----
    @property
    def checkpoint_path(self) -> Path:
        return self.meta / "checkpoint.json"

    def read_checkpoint(self) -> tuple[str, int, int | None] | None:
        """(last exported ID, events exported so far, the stream ordinal of the last exported
        entry when known), or None before the first export."""
        try:
            data = orjson.loads(self.checkpoint_path.read_bytes())
        except FileNotFoundError:
            return None
        except orjson.JSONDecodeError as exc:
            raise ExportError(f"{self.checkpoint_path} is not valid JSON: {exc}") from exc
        if data.get("shards", 1) != self.shards:
            raise ExportError(
                f"{self.checkpoint_path} was written by an export in {data.get('shards', 1)} shards, "
                f"not {self.shards}: reshard into another --out"
            )
        if data.get("stream") != self.stream:
            raise ExportError(
                f"{self.out} holds an export of {data.get('stream')!r}, not {self.stream!r}: "
                "use another --out"
            )
        try:
            last = str(data["last_id"])
            entry_key(last)
            ordinal = data.get("ordinal")
            return last, int(data.get("exported", 0)), None if ordinal is None else int(ordinal)
        except (KeyError, ValueError) as exc:
            raise ExportError(f"{self.checkpoint_path} has no valid last_id: {exc}") from exc

    def write_checkpoint(self, last_id: str, exported: int, ordinal: int | None = None) -> None:
        body = {
            "stream": self.stream,
            "last_id": last_id,
            "exported": exported,
            "ordinal": ordinal,
            "shard": self.shard,
            "shards": self.shards,
            "updated_at_ms": _now_ms(),
        }
        _atomic_write(self.checkpoint_path, orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n", self.tag)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.meta.mkdir(parents=True, exist_ok=True)
        with open(self.meta / "lock", "a+b") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ExportError(f"another export is writing {self.out}") from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # ---- gaps ----
    def _stream_info(self) -> dict[str, Any] | None:
        try:
            info: dict[Any, Any] = self.client.xinfo_stream(self.stream)
        except redis.ResponseError:
            return None  # no such stream (yet)
        return {_text(k): v for k, v in info.items()}

    def first_ordinal(self) -> tuple[int | None, str]:
        """(ordinal of the oldest entry still in the stream, its ID). Ordinals count every entry
        ever added (1 = the first): Redis >= 7 reports ``entries-added``, and the service never
        deletes entries from the middle, so oldest = entries-added - length + 1."""
        info = self._stream_info()
        if info is None:
            return None, ""
        first = info.get("first-entry")
        first_id = _text(first[0]) if first else ""
        added = info.get("entries-added")
        if added is None:
            return None, first_id
        return int(added) - int(info.get("length", 0)) + 1, first_id

    def detect_gap(self, checkpoint: str | None, ordinal: int | None) -> Gap | None:
        """Entries after ``checkpoint`` that the stream no longer holds. Exact with Redis >= 7
        (entry ordinals); on 6.2 a trimmed checkpoint entry is reported as a possible gap."""
        oldest, first_id = self.first_ordinal()
        if oldest is not None:
            expected = 1 if checkpoint is None else (ordinal + 1 if ordinal is not None else None)
            if expected is not None and oldest > expected:
                lost = oldest - expected
                note = (
                    f"the stream was trimmed past the checkpoint: {lost} events were lost"
                    if checkpoint
                    else f"first export: the stream's {lost} oldest events were already trimmed"
                )
                return Gap(self.stream, _now_ms(), checkpoint or "0-0", first_id, str(lost), True, note)
            return None
        if (
            checkpoint
            and first_id
            and entry_key(first_id) > entry_key(checkpoint)
            and not self.client.xrange(self.stream, min=checkpoint, max=checkpoint, count=1)
        ):
            note = "checkpoint entry trimmed (Redis < 7 cannot tell whether later ones were)"
            return Gap(self.stream, _now_ms(), checkpoint, first_id, "", False, note)
        return None

    def record_gap(self, gap: Gap) -> None:
        # Shards share one gaps file (the pipeline reads it): O_APPEND keeps each record whole.
        (self.out / EXPORT_DIR).mkdir(parents=True, exist_ok=True)
        with open(self.out / EXPORT_DIR / "gaps.jsonl", "ab") as f:
            f.write(gap.to_json() + b"\n")
            f.flush()
            os.fsync(f.fileno())

    def check_shard_layout(self) -> None:
        """Refuse to mix shard counts in one folder: entries owned by shard i of N are not those
        of shard i of M, so a resharded export would write some entries twice."""
        root = self.out / EXPORT_DIR
        counts = {int(d.name.rsplit("-of-", 1)[1]) for d in root.glob("shard-*-of-*") if d.is_dir()}
        if (root / "checkpoint.json").exists():
            counts.add(1)
        if counts - {self.shards}:
            found = ", ".join(str(n) for n in sorted(counts))
            raise ExportError(
                f"{self.out} holds an export in {found} shard(s), not {self.shards}: "
                "reshard into another --out"
            )

    def remove_partial_files(self) -> None:
        """Delete temporary files a killed export left (kill -9 mid-file): under the lock no
        other export writes here, so every one is dead. Readers skip them anyway (dot names)."""
        pattern = f".*.tmp-{self.tag}-*"
        for stale in [*self.out.glob(f"day=*/{pattern}"), *self.meta.glob(pattern)]:
            stale.unlink(missing_ok=True)

    # ---- data ----
    def write_batch(self, entries: Sequence[tuple[str, dict[str, str]]]) -> int:
        """Write one batch as one file per UTC day, named after its first entry ID (so a rerun
        after a crash rewrites the same file instead of adding a copy)."""
        by_day: dict[str, list[tuple[str, dict[str, str]]]] = defaultdict(list)
        for entry_id, fields in entries:
            by_day[day_of(entry_id)].append((entry_id, fields))
        for day, items in by_day.items():
            folder = self.out / f"day={day}"
            folder.mkdir(parents=True, exist_ok=True)
            name = f"events-{items[0][0]}{layout.SUFFIX[self.fmt]}"
            _atomic_write(folder / name, layout.encode(self.fmt, items), self.tag)
        return len(by_day)

    def run(self, max_events: int = 0) -> ExportResult:
        """Export everything after the checkpoint (at most ``max_events`` when > 0)."""
        result = ExportResult(gaps=[])
        self.check_shard_layout()  # before the lock creates this shard's folder
        with self.locked():
            self.remove_partial_files()
            saved = self.read_checkpoint()
            checkpoint, total, ordinal = saved if saved else (None, 0, None)
            gap = self.detect_gap(checkpoint, ordinal)
            if gap is not None:
                (log.error if gap.certain or checkpoint else log.warning)(
                    "change-log gap on %s after %s: %s (oldest available %s, lost %s)",
                    self.stream,
                    gap.after_id,
                    gap.note,
                    gap.first_available_id or "-",
                    gap.lost or "?",
                )
                self.record_gap(gap)
                if checkpoint is not None:
                    assert result.gaps is not None
                    result.gaps.append(gap)
            last = checkpoint or "0-0"
            if ordinal is None or gap is not None:
                ordinal = None  # re-anchored on the first entry read below
            while not max_events or result.read < max_events:
                count = self.batch if not max_events else min(self.batch, max_events - result.read)
                raw = self.client.xrange(self.stream, min="(" + last, max="+", count=count)
                if not raw:
                    break
                entries = [
                    (_text(entry_id), {_text(k): _text(v) for k, v in (fields or {}).items()})
                    for entry_id, fields in raw
                ]
                if ordinal is None:
                    oldest, first_id = self.first_ordinal()
                    ordinal = None if oldest is None or first_id != entries[0][0] else oldest - 1
                own = [e for e in entries if self.owns(e[0])]
                result.files += self.write_batch(own)
                last = entries[-1][0]
                result.read += len(entries)
                result.exported += len(own)
                if ordinal is not None:
                    ordinal += len(entries)
                self.write_checkpoint(last, total + result.exported, ordinal)
                if len(entries) < count:
                    break
            result.last_id = last
        return result


def _atomic_write(path: Path, data: bytes, tag: str = "all") -> None:
    tmp = path.with_name(f".{path.name}.tmp-{tag}-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _now_ms() -> int:
    return int(time.time() * 1000)
