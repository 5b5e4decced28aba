"""File formats of an exported change log, shared by the export and the synthetic generator.

Two formats hold the same entries (``id`` = stream entry ID, ``fields`` = the entry's fields as
the Lua scripts wrote them, all strings):

``jsonl``    ``*.jsonl.gz``: one ``{"id": ..., "fields": {...}}`` per line, gzip. Needs nothing
             beyond the service's own dependencies.
``parquet``  ``*.parquet``: columns ``id`` (string), ``fields`` (struct with one string column per
             field the change log knows, :data:`EVENT_FIELDS`; null when the entry lacks it) and
             ``other_fields`` (map of any other field, null when there is none, so nothing the
             stream holds is lost). Columnar: the pipeline reads it without parsing text, several
             times faster than JSON lines. Needs ``pyarrow`` (the ``pipeline`` extra).

This module must not import pyarrow or Spark at import time: the export runs in the service's
image, which has neither unless the ``pipeline`` extra is installed.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

# Every field any event kind carries (lua/README.md, "Change log"). The Parquet layout has one
# column per name; the pipeline's JSON schema reads the same names.
EVENT_FIELDS: tuple[str, ...] = (
    "kind",
    "ts",
    "result",
    "cluster",
    "brokerName",
    "brokerAddr",
    "brokerId",
    "epoch",
    "deadline",
    "timeoutMillis",
    "dataVersion",
    "newSession",
    "mode",
    "brokerData",
    "haServerAddr",
    "via",
    "upserted",
    "queueDatas",
    "removed",
    "final",
    "chunk",
    "source",
    "reason",
    "currentEpoch",
    "count",
    "topic",
    "brokerNames",
    "namespace",
    "key",
    "value",
    "changes",
)
_KNOWN = frozenset(EVENT_FIELDS)

FORMATS: tuple[str, ...] = ("jsonl", "parquet")
SUFFIX: Mapping[str, str] = {"jsonl": ".jsonl.gz", "parquet": ".parquet"}
# Parquet compression: snappy decodes fastest in Spark; files stay small anyway because the
# heavy columns (cluster, broker name/address, kind) are dictionary-encoded.
PARQUET_COMPRESSION = "snappy"

Entry = tuple[str, Mapping[str, str]]


class FormatUnavailable(RuntimeError):
    """The requested file format needs a package that is not installed."""


def check_format(fmt: str) -> None:
    """Fail early (before any Redis read or file write) when ``fmt`` cannot be written here."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        _pyarrow()


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise FormatUnavailable(
            "--format parquet needs pyarrow, which is not installed: "
            "pip install 'namesrv-fleet[pipeline]' (or pyarrow), or use --format jsonl"
        ) from None
    return pa, pq


def jsonl_line(entry_id: str, fields: Mapping[str, str]) -> bytes:
    return orjson.dumps({"id": entry_id, "fields": fields}) + b"\n"


def encode(fmt: str, entries: Sequence[Entry], *, gzip_level: int = 6) -> bytes:
    """The bytes of one file holding ``entries`` in ``fmt``."""
    if fmt == "jsonl":
        payload = b"".join(jsonl_line(i, f) for i, f in entries)
        return gzip.compress(payload, compresslevel=gzip_level)
    if fmt == "parquet":
        return parquet_bytes(entries)
    raise ValueError(f"unknown format {fmt!r}")


def parquet_bytes(entries: Sequence[Entry]) -> bytes:
    """One Parquet file (one row group) with the ``id``/``fields``/``other_fields`` layout.

    Built column by column: pyarrow converts a list of strings per column in C, much faster
    than converting one dict per row."""
    pa, pq = _pyarrow()
    str_t = pa.string()
    ids = pa.array([i for i, _ in entries], type=str_t)
    columns = [pa.array([f.get(name) for _, f in entries], type=str_t) for name in EVENT_FIELDS]
    fields = pa.StructArray.from_arrays(columns, names=list(EVENT_FIELDS))
    other = [[(k, v) for k, v in f.items() if k not in _KNOWN] or None for _, f in entries]
    others = pa.array(other, type=pa.map_(str_t, str_t))
    table = pa.Table.from_arrays([ids, fields, others], names=["id", "fields", "other_fields"])
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=PARQUET_COMPRESSION)
    return sink.getvalue()


def read_parquet(data: bytes) -> list[tuple[str, dict[str, str]]]:
    """(id, fields) of every row of a Parquet file written by :func:`parquet_bytes`: the known
    fields that are set plus ``other_fields`` (tests and tools; the pipeline reads with Spark)."""
    _, pq = _pyarrow()
    rows = pq.read_table(io.BytesIO(data)).to_pylist()
    out = []
    for row in rows:
        fields = {k: v for k, v in (row["fields"] or {}).items() if v is not None}
        fields.update(dict(row["other_fields"] or []))
        out.append((row["id"], fields))
    return out
