"""Raw export lines → typed ``events`` + ``rejects``: the only place that looks at JSON text.

The export writes gzip JSON lines or Parquet (same entries as columns). Both become the same
records (:func:`text_records`, :func:`parquet_records`) and go through the same checks
(:func:`check_records`); a Parquet row is a "line" below, except that it cannot be corrupt.
Every line ends up in exactly one of the two outputs. A line is rejected (with one ``reason``,
checked in this order) when it is:

``corrupt_line``   not a JSON object of the shape ``{"id": ..., "fields": {...}}`` (or empty)
``missing_field``  ``id``, ``fields``, ``kind``, ``ts`` or a field its kind requires is absent
``bad_id``         ``id`` is not a stream ID ``<ms>-<seq>``
``unknown_kind``   ``kind`` is not one the Lua scripts emit
``bad_number``     a numeric field (``ts``, ``deadline``, ``epoch``...) is not an integer
``bad_value``      an enumerated field has an unknown value (``result``, ``newSession``)
``bad_json``       a JSON field (``brokerData``, ``upserted``, ``removed``...) does not parse
``out_of_order``   ``ts`` disagrees with the stream ID's clock by more than ``max_skew_ms``:
                   the entry is out of place in the log's total order (ID order)
``duplicate``      a second line with an ID already kept (``duplicate_conflict`` when its
                   content differs from the kept line's)

Nothing here collects data to the driver; no Python UDFs (everything runs in the JVM).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from namesrv.pipeline import schemas as S
from namesrv.pipeline.kinds import (
    KNOWN_KINDS,
    NUMERIC_FIELDS,
    NUMERIC_REQUIRED,
    QUEUE_KINDS,
    REGISTER_OK,
    REMOVAL_KINDS,
    REQUIRED,
)
from namesrv.store.changelog import EventKind as K

Transform = Callable[[DataFrame], DataFrame]

DEFAULT_MAX_SKEW_MS = 60_000


def _f(name: str) -> Column:
    """An event field, flattened to a top-level column by :func:`check_lines`."""
    return F.col("f_" + name)


def _num(name: str) -> Column:
    raw = _f(name)
    return F.when(raw != "", raw).try_cast("long")


def _joined(conds: Sequence[tuple[str, Column]]) -> Column:
    """Comma-separated names whose condition holds ("" when none): scalar expressions only, so
    the whole check compiles to Java (higher-order functions would run interpreted per row)."""
    return F.concat_ws(",", *[F.when(cond, F.lit(name)) for name, cond in conds])


def _kinds_requiring(table: Mapping[str, Sequence[str]], name: str) -> list[str]:
    return [k for k, names in table.items() if name in names]


def _first_failure(checks: Sequence[tuple[Column, str, Column]]) -> Column:
    """struct(reason, detail) of the first failing check, or null when every check passes."""
    out: Column = F.lit(None).cast("struct<reason:string,detail:string>")
    for cond, reason, detail in reversed(checks):
        out = F.when(cond, F.struct(F.lit(reason).alias("reason"), detail.alias("detail"))).otherwise(out)
    return out


def _parsed_upserts() -> Column:
    """upserted → array<struct<topic, qd, n>> (null when the JSON does not parse). A pair's
    second element is its QueueData, or (registerQueues) the index of it in ``queueDatas``: an
    index that names none leaves ``qd`` null, which ``bad_json`` reports."""
    arr = F.from_json(_f("upserted"), S.UPSERTED_JSON)
    shared = F.from_json(_f("queueDatas"), S.QUEUE_DATAS_JSON)

    def queue_data(e: Column) -> Column:
        second = F.get(e, 1)
        index = F.when(second.rlike("^[0-9]{1,9}$"), second.cast("int"))
        return F.from_json(F.when(index.isNull(), second).otherwise(F.get(shared, index)), S.QUEUE_DATA_JSON)

    return F.transform(
        arr,
        lambda e: F.struct(F.get(e, 0).alias("topic"), queue_data(e).alias("qd"), F.size(e).alias("n")),
    )


def _parsed_broker_data() -> Column:
    raw = _f("brokerData")
    return F.from_json(F.when(raw != "", raw), S.BROKER_DATA_JSON)


def _bad_json() -> Column:
    """Comma-separated JSON fields the kind uses that do not parse."""
    kind = F.col("kind")
    bd_raw, bd, ups = _f("brokerData"), F.col("_bd"), F.col("_ups")
    bad_bd = kind.isin(K.REGISTER, *REMOVAL_KINDS) & bd_raw.isNotNull() & (bd_raw != "")
    bad_bd = bad_bd & (bd.isNull() | bd["brokerName"].isNull() | bd["brokerAddrs"].isNull())
    bad_ups = kind.isin(*QUEUE_KINDS[:-1]) & (
        ups.isNull()
        | ~F.forall(
            ups,
            lambda e: (
                (e["n"] == 2)
                & e["topic"].isNotNull()
                & e["qd"].isNotNull()
                & e["qd"]["perm"].isNotNull()
                & e["qd"]["brokerName"].isNotNull()
            ),
        )
    )
    bad_removed = kind.isin(K.REGISTER_QUEUES, K.CLEAN_QUEUES) & F.col("_removed").isNull()
    bad_removed = bad_removed | (kind.isin(*REMOVAL_KINDS) & ~_f("removed").isin("0", "1"))
    bad_names = (kind == K.TOPIC_DELETE) & F.col("_broker_names").isNull()
    return _joined(
        [("brokerData", bad_bd), ("upserted", bad_ups), ("removed", bad_removed), ("brokerNames", bad_names)]
    )


def text_records() -> Transform:
    """Raw lines (``value``, ``source_file``) → records: ``value``, ``source_file``, ``id``,
    ``fields`` (struct of strings, :data:`schemas.RAW_FIELDS`) and ``corrupt`` (the line when it
    is not a JSON object). The only JSON parse of the line."""

    def _(raw: DataFrame) -> DataFrame:
        j = F.from_json(F.col("value"), S.RAW_LINE, {"columnNameOfCorruptRecord": S.CORRUPT_COLUMN})
        return raw.select("value", "source_file", j.alias("j")).select(
            "value",
            "source_file",
            F.col("j")["id"].alias("id"),
            F.col("j")["fields"].alias("fields"),
            F.col("j")[S.CORRUPT_COLUMN].alias("corrupt"),
        )

    return _


def parquet_records() -> Transform:
    """Rows of the export's Parquet layout (``id``, ``fields``, ``source_file``) → records, the
    shape :func:`text_records` gives: no text (``value`` null), so nothing can be corrupt; a
    row with a missing ``id``, ``fields`` or field is rejected like a line would be."""

    def _(rows: DataFrame) -> DataFrame:
        return rows.select(
            F.lit(None).cast("string").alias("value"),
            "source_file",
            "id",
            "fields",
            F.lit(None).cast("string").alias("corrupt"),
        )

    return _


def check_lines(max_skew_ms: int = DEFAULT_MAX_SKEW_MS) -> Transform:
    """Raw lines (``value``, ``source_file``) → :func:`check_records` of their JSON."""

    def _(raw: DataFrame) -> DataFrame:
        return raw.transform(text_records()).transform(check_records(max_skew_ms))

    return _


def check_records(max_skew_ms: int = DEFAULT_MAX_SKEW_MS) -> Transform:
    """Records (:func:`text_records` or :func:`parquet_records`) → one row per record with typed
    event columns and ``reject_reason``/``reject_detail`` (null when it is a valid event).

    Answers: which lines can be trusted, and why each other one cannot. Duplicates are decided
    later (:func:`namesrv.pipeline.dedup.split_duplicates`), among lines that pass every other
    check. Intermediate columns are computed in their own projection and referenced by name (the
    optimizer does not inline non-trivial expressions used twice, so each nested JSON value is
    parsed once).

    Heartbeats without JSON fields, nearly all of a log, are checked in a branch of their own
    (:func:`_check`): the same checks with the kind known, which compile to a small loop. The
    other lines are read again for the full checks; the second read costs less than running the
    full checks, which Spark cannot compile into one loop, on every heartbeat."""

    def _(records: DataFrame) -> DataFrame:
        raw = F.col("fields")
        plain = F.coalesce((raw["kind"] == K.HEARTBEAT) & raw["brokerData"].isNull(), F.lit(False))
        heartbeats = _check(records.filter(plain), max_skew_ms, heartbeats=True)
        return heartbeats.unionByName(_check(records.filter(~plain), max_skew_ms, heartbeats=False))

    return _


def _check(records: DataFrame, max_skew_ms: int, heartbeats: bool) -> DataFrame:
    """:func:`check_records` of ``records``; with ``heartbeats``, of heartbeats that carry no
    JSON field only: the kind is then a constant, so the optimizer folds every check and column
    that depends on another kind or on parsed JSON away, and what remains compiles to one small
    loop from the file scan on (no JSON parser, which cannot be compiled into it)."""
    df = records.select(
        "value",
        "source_file",
        "id",
        "fields",
        F.col("fields").isNull().alias("_no_fields"),
        "corrupt",
        *[F.col("fields")[n].alias("f_" + n) for n in S.EVENT_FIELDS],
    )
    id_ms = F.substring_index(F.col("id"), "-", 1).try_cast("long")
    id_seq = F.substring_index(F.col("id"), "-", -1).try_cast("long")
    kind = F.lit(K.HEARTBEAT) if heartbeats else _f("kind")
    key = F.when((kind == K.REGISTER) & (_f("result") == "ok"), F.lit(REGISTER_OK)).otherwise(kind)
    queue_kind = kind.isin(*QUEUE_KINDS[:-1])
    broker_data = F.lit(None).cast(S.BROKER_DATA_JSON) if heartbeats else _parsed_broker_data()
    df = df.select(
        "*",
        kind.alias("kind"),
        key.alias("_key"),
        id_ms.alias("_id_ms"),
        id_seq.alias("_id_seq"),
        _num("ts").alias("ts"),
        F.when(queue_kind, _parsed_upserts()).alias("_ups"),
        broker_data.alias("_bd"),
        F.when(kind.isin(K.REGISTER_QUEUES, K.CLEAN_QUEUES), F.from_json(_f("removed"), S.NAMES_JSON)).alias(
            "_removed"
        ),
        F.when(kind == K.TOPIC_DELETE, F.from_json(_f("brokerNames"), S.NAMES_JSON)).alias("_broker_names"),
    )
    id_ok = F.concat(F.col("_id_ms").cast("string"), F.lit("-"), F.col("_id_seq").cast("string")) == F.col(
        "id"
    )
    df = df.withColumn("id_ms", F.when(id_ok, F.col("_id_ms"))).withColumn(
        "id_seq", F.when(id_ok, F.col("_id_seq"))
    )
    k, key = F.col("kind"), F.col("_key")
    ok = key == REGISTER_OK

    def required(n: str) -> Column:
        kinds = _kinds_requiring(REQUIRED, n)
        plain = [x for x in kinds if x != REGISTER_OK]
        need = k.isin(*plain) if plain else F.lit(False)
        if REGISTER_OK in kinds:
            need = need | ok
        return need

    def bad_number(n: str) -> Column:
        raw_n = _f(n)
        unparsable = raw_n.isNotNull() & (raw_n != "") & _num(n).isNull()
        if n == "ts":
            return unparsable | (raw_n == "")
        kinds = _kinds_requiring(NUMERIC_REQUIRED, n)
        if not kinds:
            return unparsable
        return unparsable | ((raw_n == "") & key.isin(*kinds))

    fields_required = sorted({n for names in REQUIRED.values() for n in names})
    bad_result = (k == K.REGISTER) & ~_f("result").isin("ok", "refused", "ignored")
    bad_new = ok & ~_f("newSession").isin("0", "1")
    df = df.select(
        "*",
        _joined([(n, required(n) & _f(n).isNull()) for n in fields_required]).alias("_missing"),
        _joined([(n, bad_number(n)) for n in NUMERIC_FIELDS]).alias("_bad_num"),
        _joined([("result", bad_result), ("newSession", bad_new)]).alias("_bad_val"),
        _bad_json().alias("_bad_json"),
    )
    skew = F.abs(F.col("ts") - F.col("id_ms"))
    checks: list[tuple[Column, str, Column]] = [
        (F.trim(F.col("value")) == "", "corrupt_line", F.lit("empty line")),
        (F.col("corrupt").isNotNull(), "corrupt_line", F.lit("not a JSON object {id, fields{...}}")),
        (F.col("id").isNull(), "missing_field", F.lit("id")),
        (F.col("_no_fields"), "missing_field", F.lit("fields")),
        (
            F.col("id_ms").isNull() | F.col("id_seq").isNull(),
            "bad_id",
            F.concat(F.lit("id="), F.col("id")),
        ),
        (k.isNull(), "missing_field", F.lit("kind")),
        (~k.isin(*KNOWN_KINDS), "unknown_kind", F.concat(F.lit("kind="), k)),
        (_f("ts").isNull(), "missing_field", F.lit("ts")),
        (F.col("_missing") != "", "missing_field", F.col("_missing")),
        (F.col("_bad_num") != "", "bad_number", F.col("_bad_num")),
        (F.col("_bad_val") != "", "bad_value", F.col("_bad_val")),
        (F.col("_bad_json") != "", "bad_json", F.col("_bad_json")),
        (
            skew > F.lit(max_skew_ms),
            "out_of_order",
            F.format_string("ts %d is %d ms away from its stream id time", F.col("ts"), skew),
        ),
    ]
    df = df.withColumn("_fail", _first_failure(checks))
    return df.select(*_event_columns(), *_reject_columns())


def _event_columns() -> list[Column]:
    kind = F.col("kind")
    bd = F.col("_bd")
    event_bn = _f("brokerName")
    ups = F.transform(
        F.col("_ups"),
        lambda e: F.struct(
            e["topic"].alias("topic"),
            F.when(kind == K.TOPIC_REGISTER, e["qd"]["brokerName"]).otherwise(event_bn).alias("broker_name"),
            e["qd"]["perm"].alias("perm"),
            e["qd"]["readQueueNums"].alias("read_queue_nums"),
            e["qd"]["writeQueueNums"].alias("write_queue_nums"),
            e["qd"]["topicSysFlag"].alias("topic_sys_flag"),
        ),
    )
    return [
        F.col("id"),
        F.col("id_ms"),
        F.col("id_seq"),
        F.col("ts"),
        F.date_from_unix_date(F.floor(F.col("ts") / 86_400_000).cast("int")).alias("day"),
        kind,
        _f("cluster").alias("cluster"),
        event_bn.alias("broker_name"),
        _f("brokerAddr").alias("broker_addr"),
        _num("brokerId").alias("broker_id"),
        _num("epoch").alias("epoch"),
        _num("deadline").alias("deadline"),
        _num("timeoutMillis").alias("timeout_ms"),
        _f("result").alias("result"),
        F.when(_f("newSession").isNotNull(), _f("newSession") == "1").alias("new_session"),
        _num("mode").cast("int").alias("mode"),
        _f("source").alias("source"),
        _f("reason").alias("reason"),
        _num("currentEpoch").alias("current_epoch"),
        F.when(kind.isin(*REMOVAL_KINDS), _f("removed") == "1").alias("name_removed"),
        F.when(
            bd.isNotNull() & bd["brokerName"].isNotNull(),
            F.struct(
                bd["cluster"].alias("cluster"),
                bd["brokerName"].alias("broker_name"),
                bd["brokerAddrs"].alias("broker_addrs"),
                bd["zoneName"].alias("zone_name"),
                F.coalesce(bd["enableActingMaster"], F.lit(False)).alias("enable_acting_master"),
            ),
        ).alias("broker_data"),
        F.when(kind.isin(*QUEUE_KINDS[:-1]), ups).alias("queue_upserts"),
        F.col("_removed").alias("queue_removals"),
        _f("topic").alias("topic"),
        F.col("_broker_names").alias("topic_broker_names"),
        _f("via").alias("via"),
        F.struct(*[_f(n).alias(n) for n in S.EXTRA_FIELDS]).alias("extra"),
    ]


def _reject_columns() -> list[Column]:
    rejected = F.col("_fail").isNotNull()
    # A Parquet row has no text: its raw form is the line the JSON export would have written
    # (serialized only for the rare rejected row).
    raw = F.coalesce(F.col("value"), F.to_json(F.struct("id", "fields")))
    return [
        F.col("_fail")["reason"].alias("reject_reason"),
        F.col("_fail")["detail"].alias("reject_detail"),
        F.when(rejected, raw).alias("raw"),
        F.col("source_file"),
        # Of the parsed content, not the text, so the same entry hashes alike in both formats
        # and whatever the JSON's spacing or key order: the kept copy of a duplicated ID does not
        # depend on the export's format. The job only evaluates it for IDs seen twice.
        F.xxhash64(F.col("id"), F.col("fields")).alias("line_hash"),
    ]
