"""Every schema the pipeline reads or writes, as explicit ``StructType`` values (no inference).

Input: the export's JSON lines (:data:`RAW_LINE`), one change-log entry per line::

    {"id": "1700000000000-0", "fields": {"kind": "register", "ts": "1700000000000", ...}}

``id`` is the Redis Stream entry ID (``<ms>-<seq>``): the dedup key and the total order of the
log. ``fields`` holds the entry's fields exactly as the Lua scripts wrote them (all strings; see
``lua/README.md``, "Change log"). Output tables are documented in ``docs/PIPELINE.md``.

Times are epoch milliseconds (``long``) of the Redis server clock; days are UTC dates.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from namesrv.events import layout


def _s(*fields: tuple[str, DataType] | tuple[str, DataType, bool]) -> StructType:
    """A StructType from (name, type) or (name, type, nullable) tuples; nullable by default.

    Nullability documents what a column guarantees; comparisons in the tests ignore it."""
    out: list[StructField] = []
    for name, dtype, *rest in fields:
        out.append(StructField(name, dtype, bool(rest[0]) if rest else True))
    return StructType(out)


STR, LONG, INT, BOOL, DATE, DOUBLE = (
    StringType(),
    LongType(),
    IntegerType(),
    BooleanType(),
    DateType(),
    DoubleType(),
)

# ---- input ----
CORRUPT_COLUMN = "_corrupt"
# Every field any event kind carries (lua/README.md); all strings. A field the scripts do not
# write is ignored. The list is shared with the export's Parquet layout (one column each).
EVENT_FIELDS = layout.EVENT_FIELDS
RAW_FIELDS = _s(*[(name, STR) for name in EVENT_FIELDS])
RAW_LINE = _s(("id", STR), ("fields", RAW_FIELDS), (CORRUPT_COLUMN, STR))
# The export's Parquet files (namesrv.events.layout): the same entry as columns. ``other_fields``
# (fields the pipeline does not know) is not read.
PARQUET_LINE = _s(("id", STR), ("fields", RAW_FIELDS))

# JSON values inside fields (as the Lua scripts encode them)
BROKER_DATA_JSON = _s(
    ("cluster", STR),
    ("brokerName", STR),
    ("brokerAddrs", MapType(STR, STR)),
    ("zoneName", STR),
    ("enableActingMaster", BOOL),
)
QUEUE_DATA_JSON = _s(
    ("brokerName", STR),
    ("perm", INT),
    ("readQueueNums", INT),
    ("topicSysFlag", INT),
    ("writeQueueNums", INT),
)
UPSERTED_JSON = ArrayType(ArrayType(STR))  # [[topic, QueueData JSON or its index in queueDatas], ...]
QUEUE_DATAS_JSON = ArrayType(STR)  # [QueueData JSON, ...]
NAMES_JSON = ArrayType(STR)  # ["topic", ...] or ["brokerName", ...]

# The export's gap records (``<out>/_export/gaps.jsonl``)
EXPORT_GAP = _s(
    ("stream", STR),
    ("detected_at_ms", LONG),
    ("after_id", STR),
    ("first_available_id", STR),
    ("lost", STR),
    ("certain", BOOL),
    ("note", STR),
)

# ---- clean, typed events (the ``events`` table) ----
BROKER_DATA = _s(
    ("cluster", STR),
    ("broker_name", STR),
    ("broker_addrs", MapType(STR, STR)),
    ("zone_name", STR),
    ("enable_acting_master", BOOL),
)
QUEUE_UPSERT = _s(
    ("topic", STR),
    ("broker_name", STR),
    ("perm", INT),
    ("read_queue_nums", INT),
    ("write_queue_nums", INT),
    ("topic_sys_flag", INT),
)
# Fields kept as they are (diagnostics); null when the event does not carry them.
EXTRA_FIELDS = (
    "dataVersion",
    "haServerAddr",
    "final",
    "chunk",
    "count",
    "namespace",
    "key",
    "value",
    "changes",
)
EXTRA = _s(*[(name, STR) for name in EXTRA_FIELDS])
EVENTS = _s(
    ("id", STR, False),
    ("id_ms", LONG, False),
    ("id_seq", LONG, False),
    ("ts", LONG, False),
    ("day", DATE, False),
    ("kind", STR, False),
    ("cluster", STR),
    ("broker_name", STR),
    ("broker_addr", STR),
    ("broker_id", LONG),
    ("epoch", LONG),
    ("deadline", LONG),
    ("timeout_ms", LONG),
    ("result", STR),
    ("new_session", BOOL),
    ("mode", INT),
    ("source", STR),
    ("reason", STR),
    ("current_epoch", LONG),
    ("name_removed", BOOL),
    ("broker_data", BROKER_DATA),
    ("queue_upserts", ArrayType(QUEUE_UPSERT)),
    ("queue_removals", ArrayType(STR)),
    ("topic", STR),
    ("topic_broker_names", ArrayType(STR)),
    ("via", STR),
    ("extra", EXTRA),
)

REJECTS = _s(
    ("id", STR),
    ("reason", STR, False),
    ("detail", STR),
    ("kind", STR),
    ("ts", LONG),
    ("day", DATE),
    ("raw", STR),
    ("source_file", STR),
)

# What stage 1 reads back of a staged rejected line (columns of parse.check_lines' output).
STAGED_REJECT = _s(
    ("id", STR),
    ("id_ms", LONG),
    ("kind", STR),
    ("ts", LONG),
    ("day", DATE),
    ("raw", STR),
    ("source_file", STR),
    ("reject_reason", STR),
    ("reject_detail", STR),
)

# A staged line whose ID occurs more than once (events columns + what deduplication needs).
STAGED_LINE = StructType(
    [*EVENTS.fields, *_s(("raw", STR), ("source_file", STR), ("line_hash", LONG)).fields]
)

# ---- broker answers ----
SESSIONS = _s(
    ("cluster", STR, False),
    ("broker_addr", STR, False),
    ("session_no", LONG, False),
    ("broker_name", STR),
    ("broker_id", LONG),
    ("start_ts", LONG),
    ("started_before_log", BOOL, False),
    ("end_ts", LONG),
    ("end_kind", STR, False),
    ("end_event_ts", LONG),
    ("last_refresh_ts", LONG),
    ("last_deadline", LONG),
    ("timeout_ms", LONG),
    ("refreshes", LONG, False),
    ("duration_ms", LONG),
)
UP_INTERVALS = _s(
    ("cluster", STR, False),
    ("broker_addr", STR, False),
    ("broker_name", STR),
    ("broker_id", LONG),
    ("start_ts", LONG, False),
    ("end_ts", LONG, False),
)
BROKER_DAILY = _s(
    ("day", DATE, False),
    ("cluster", STR, False),
    ("broker_name", STR),
    ("broker_addr", STR, False),
    ("observed_ms", LONG, False),
    ("up_ms", LONG, False),
    ("availability", DOUBLE),
    ("sessions_started", LONG, False),
    ("unregisters", LONG, False),
    ("closes", LONG, False),
    ("expiries", LONG, False),
    ("fenced", LONG, False),
    ("lapsed", LONG, False),
)
FLAPPING = _s(
    ("cluster", STR, False),
    ("broker_addr", STR, False),
    ("broker_name", STR),
    ("hour_start_ts", LONG, False),
    ("sessions", LONG, False),
)
HEARTBEAT_GAPS = _s(
    ("cluster", STR, False),
    ("broker_addr", STR, False),
    ("broker_name", STR),
    ("timeout_ms", LONG),
    ("refreshes", LONG, False),
    ("gaps", LONG, False),
    ("p50_gap_ms", LONG),
    ("p99_gap_ms", LONG),
    ("max_gap_ms", LONG),
    ("max_gap_ratio", DOUBLE),
    ("late_gaps", LONG, False),
    ("at_risk", BOOL, False),
)
HEARTBEAT_GAP_HISTOGRAM = _s(("ratio_lo", DOUBLE, False), ("gaps", LONG, False))

# ---- topic and registry answers ----
QUEUE_CHANGES = _s(
    ("topic", STR, False),
    ("broker_name", STR, False),
    ("id_ms", LONG, False),
    ("id_seq", LONG, False),
    ("pos", INT, False),
    ("ts", LONG, False),
    ("present", BOOL, False),
    ("perm", INT),
    ("read_queue_nums", INT),
    ("write_queue_nums", INT),
    ("topic_sys_flag", INT),
)
TOPIC_UNWRITABLE = _s(
    ("topic", STR, False),
    ("start_ts", LONG, False),
    ("end_ts", LONG, False),
    ("duration_ms", LONG, False),
    ("cause", STR, False),
    ("open_at_end", BOOL, False),
)
_SIZES = ("clusters", "broker_names", "live_brokers", "topics", "queues", "write_queues")
REGISTRY_SIZE = _s(
    ("bucket_start_ts", LONG, False),
    ("bucket_end_ts", LONG, False),
    *[(n, LONG, False) for n in _SIZES],  # at the end of the bucket
    *[("peak_" + n, LONG, False) for n in _SIZES],  # the highest inside the bucket
)
ROUTE_AS_OF = _s(
    ("as_of_ts", LONG, False),
    ("topic", STR, False),
    ("broker_name", STR, False),
    ("cluster", STR),
    ("broker_addrs", MapType(LONG, STR)),
    ("zone_name", STR),
    ("enable_acting_master", BOOL),
    ("perm", INT),
    ("read_queue_nums", INT),
    ("write_queue_nums", INT),
    ("topic_sys_flag", INT),
)
LOG_SPAN = _s(
    ("first_ts", LONG), ("last_ts", LONG), ("first_id", STR), ("last_id", STR), ("events", LONG, False)
)


def conform(df: DataFrame, schema: StructType) -> DataFrame:
    """Select the schema's columns in its order, cast to its types (fails on a missing column)."""
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])
