"""Reading trace inputs for the audit: Parquet directly, JSONL via the traces readers.

Local Parquet files are opened with pyarrow first (footer and required
columns), so a corrupt or foreign file is a one-line ``TraceReadError``
before Spark starts a job. JSONL files are validated line by line by
``rmqspec.traces.jsonl`` (a bad line is a ``Rejected`` with ``file:line``)
and written as Parquet under the audit's work directory, which therefore
must be visible to the executors (a local ``--out`` in local mode). URIs
with a scheme (``hdfs://``, ``s3a://``) are handed to Spark unchecked.

``load`` returns one lazy DataFrame (never cached: each pass of the audit re-reads only the Parquet
columns it needs) with the audit columns plus ``at_risk`` (the msg_keys a ``crash`` lists in
``detail.at_risk``), ``detail`` (its JSON text, for the reference plan), the values some rules read
out of it (``DERIVED_COLUMNS``: ``sb_max``, ``check_times``, ``filter_detail``, ``sb_detail``, a
send-back's detail for the table replay, ``timer_detail``, a timer request's detail for the timer
table's replay, ``pop_detail``, a pop, change or ack's for the pop tables' replay, ``route_detail``, a
routed producer's send's (its attempts),
table's replay, ``pop_detail``, a pop, change or ack's for the pop tables' replay, ``ha_detail``, a
master/slave pair's row's for the pair's replay,
``from_commitlog_offset``, the timer copy a ``timer_fire`` re-put,
``unrecorded``, a send row standing for sends an imported message trace does not record,
``route_queues``, an ordered send's route, ``broadcasting``, a broadcasting client's row,
``from_where``, a broadcasting ``commit_offset`` where a client began pulling a queue, and ``timed_out``,
a consume whose listener outlived consumeTimeout, ``expire_cause``, an ``expire`` row's
``detail.cause``, ``loop_age_ms`` / ``loop_max_ms``, an orderly start's loop, and ``clean_start`` /
``clean_timeout_min``, the client's clean's send-back), ``position``
(``file#row``) and ``problem`` (why a row is rejected, null when valid): the same rules as
``traces.validate.check_row``, as column expressions. ``position`` comes from Spark's ``_metadata``
columns, and Spark keeps them in every scan of a frame that names them, even a query that drops
``position`` (a row index built for every row: ~10-20 % of a narrow pass's scan); ``positions=False``
leaves it null for the plans that read it only for rejected rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import reduce
from pathlib import Path
from urllib.parse import urlparse

import attrs
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rmqspec.model.events import EVENTS
from rmqspec.traces.checks_common import BROADCASTING
from rmqspec.traces.errors import Rejected, TraceReadError
from rmqspec.traces.io import trace_files
from rmqspec.traces.jsonl import iter_jsonl_batches
from rmqspec.traces.parquet import ParquetWriter, open_parquet

TYPES: dict[str, T.DataType] = {
    "seq": T.LongType(),
    "ts": T.LongType(),
    "event": T.StringType(),
    "actor": T.StringType(),
    "group": T.StringType(),
    "topic": T.StringType(),
    "queue_id": T.IntegerType(),
    "queue_offset": T.LongType(),
    "commitlog_offset": T.LongType(),
    "msg_key": T.StringType(),
    "msg_id": T.StringType(),
    "reconsume_times": T.IntegerType(),
    "delay_level": T.IntegerType(),
    "deliver_ts": T.LongType(),
    "status": T.StringType(),
    "client_id": T.StringType(),
    "sharding_key": T.StringType(),
    "txn_id": T.StringType(),
}
AUDIT_COLUMNS: tuple[str, ...] = tuple(TYPES)
# Read out of ``detail`` by ``load`` for the rules that need them.
DERIVED_COLUMNS: tuple[str, ...] = (
    "sb_max", "check_times", "filter_detail", "at_risk", "sb_detail", "from_commitlog_offset", "timer_detail",
    "unrecorded", "route_queues", "broadcasting", "from_where", "timed_out", "expire_cause", "loop_age_ms",
    "loop_max_ms", "clean_start", "clean_timeout_min", "pop_detail", "route_detail",
    "loop_max_ms", "clean_start", "clean_timeout_min", "pop_detail", "ha_detail",
)


@attrs.frozen
class Inputs:
    """What Spark reads (``parquet``) and what the driver already rejected."""

    paths: tuple[str, ...]
    parquet: tuple[str, ...]
    rejected: tuple[Rejected, ...]
    jsonl_rows: int
    seconds: float = 0.0  # spent in ``prepare`` (JSONL conversion): part of the audit's wall time


def _is_uri(path: str) -> bool:
    scheme = urlparse(path).scheme
    return len(scheme) > 1 and scheme != "file"


def prepare(
    paths: Sequence[str],
    work_dir: str | Path,
    on_progress: Callable[[int, int | None], None] | None = None,
) -> Inputs:
    """Check every input and convert JSONL to Parquet under ``work_dir/_jsonl``."""
    started = time.monotonic()
    parquet: list[str] = []
    rejected: list[Rejected] = []
    jsonl_rows = 0
    part = 0
    for raw in paths:
        if _is_uri(raw):
            parquet.append(raw)
            continue
        fmt, files = trace_files(raw)
        if fmt == "parquet":
            for f in files:
                open_parquet(f)
                parquet.append(str(Path(f).resolve()))
            continue
        if _is_uri(str(work_dir)):
            raise TraceReadError(raw, "JSONL input needs a local --out (convert it to Parquet first)")
        target = Path(work_dir) / "_jsonl"
        target.mkdir(parents=True, exist_ok=True)
        for f in files:
            out = target / f"part-{part:05d}.parquet"
            part += 1
            writer = None
            for batch in iter_jsonl_batches(f, 65_536, rejected.append):
                if writer is None:
                    writer = ParquetWriter(out)
                writer.write_batch(batch)
                jsonl_rows += batch.num_rows
                if on_progress:
                    on_progress(jsonl_rows, None)
            if writer is not None:
                writer.close()
                parquet.append(str(out.resolve()))
    return Inputs(tuple(paths), tuple(parquet), tuple(rejected), jsonl_rows, time.monotonic() - started)


def _empty(spark: SparkSession) -> DataFrame:
    fields = [T.StructField(n, t) for n, t in TYPES.items()]
    return spark.createDataFrame([], T.StructType(fields))


def _problem(df: DataFrame) -> tuple[list[Column], Column]:
    """(normalised columns, the reason a row is rejected or null)."""
    present = {f.name: f.dataType for f in df.schema.fields}
    cols: list[Column] = []
    checks: list[tuple[Column, Column]] = []
    for name in ("seq", "ts", "event"):
        if name in present:
            checks.append((F.col(name).isNull(), F.lit(f"missing required field {name!r}")))
    for name, dtype in TYPES.items():
        if name not in present:
            cols.append(F.lit(None).cast(dtype).alias(name))
            continue
        src = F.col(name)
        cast = src.cast(dtype)
        if present[name] != dtype:
            kind = "a string" if isinstance(dtype, T.StringType) else "an integer"
            bad = src.isNotNull() & cast.isNull()
            if isinstance(present[name], (T.FloatType, T.DoubleType, T.DecimalType)):
                bad = bad | (src.isNotNull() & (cast != src))
            checks.append(
                (
                    bad,
                    F.format_string(f"field {name!r}: expected {kind}, got %s", src.cast("string")),
                )
            )
        cols.append(cast.alias(name))
    known = F.col("event").isin(*EVENTS)
    checks.append((~known, F.format_string("unknown event '%s'", F.col("event"))))
    problem = reduce(lambda acc, c: acc.when(c[0], c[1]), checks[1:], F.when(*checks[0]))
    return cols, problem


def load(spark: SparkSession, inputs: Inputs, *, positions: bool = True) -> tuple[DataFrame, bool]:
    """(rows with ``trace``, audit columns, ``position``, ``problem``; has trace_id).
    ``positions`` False: ``position`` is null and the scans read no ``_metadata``."""
    position = F.lit(None).cast("string")
    if not inputs.parquet:
        df = _empty(spark)
    else:
        try:
            df = spark.read.option("mergeSchema", "true").parquet(*inputs.parquet)
            df.schema  # noqa: B018 - resolve the schema now: incompatible files fail here
        except Exception as exc:  # pyspark raises several unrelated types here
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TraceReadError(", ".join(inputs.paths), f"cannot read as Parquet: {first}") from None
        missing = [c for c in ("seq", "ts", "event") if c not in df.columns]
        if missing:
            raise TraceReadError(", ".join(inputs.paths), f"missing column(s) {', '.join(missing)}")
        if positions:
            position = F.concat(
                F.regexp_replace(F.col("_metadata.file_path"), "^file:", ""),
                F.lit("#"),
                F.col("_metadata.row_index").cast("string"),
            )
    has_trace_id = "trace_id" in df.columns
    trace = F.lit("")
    if has_trace_id:  # extras written by rmqspec.traces are JSON-encoded strings
        raw = F.col("trace_id").cast("string")
        decoded = F.get_json_object(F.concat(F.lit('{"v":'), raw, F.lit("}")), "$.v")
        trace = F.coalesce(F.when(raw.rlike('^".*"$'), decoded).otherwise(raw), F.lit(""))
    cols, problem = _problem(df)
    risk = at_risk(df)
    out = df.select(
        trace.alias("trace"),
        *cols,
        risk.alias("at_risk"),
        send_back_max(df).alias("sb_max"),
        check_times(df).alias("check_times"),
        filter_detail(df).alias("filter_detail"),
        send_back_detail(df).alias("sb_detail"),
        from_commitlog_offset(df).alias("from_commitlog_offset"),
        timer_detail(df).alias("timer_detail"),
        pop_detail(df).alias("pop_detail"),
        route_detail(df).alias("route_detail"),
        ha_detail(df).alias("ha_detail"),
        unrecorded(df).alias("unrecorded"),
        route_queues(df).alias("route_queues"),
        loop_number(df, "loop_age_ms").alias("loop_age_ms"),
        loop_number(df, "loop_max_ms").alias("loop_max_ms"),
        clean_number(df, "consume_start").alias("clean_start"),
        clean_number(df, "consume_timeout_min").alias("clean_timeout_min"),
        broadcasting(df).alias("broadcasting"),
        from_where(df).alias("from_where"),
        timed_out(df).alias("timed_out"),
        expire_cause(df).alias("expire_cause"),
        detail_text(df).alias("detail"),
        position.alias("position"),
        problem.alias("problem"),
    )
    return out, has_trace_id


def detail_text(df: DataFrame) -> Column:
    """``detail`` as its JSON text (null when absent): what the reference plan's checker reads."""
    if "detail" not in df.columns:
        return F.lit(None).cast("string")
    return F.col("detail").cast("string")


def expire_cause(df: DataFrame) -> Column:
    """An ``expire`` row's ``detail.cause`` as text (else null): whether retention deleted files past
    fileReservedTime (``reserved``) or at once (``forcibly``), read by ``spark/rules_retention.py``."""
    if "detail" not in df.columns:
        return F.lit(None).cast("string")
    return F.when(F.col("event") == "expire", F.get_json_object(F.col("detail").cast("string"), "$.cause"))


def send_back_detail(df: DataFrame) -> Column:
    """A ``send_back`` row's ``detail`` as its JSON text (else null): what the table replay reads there
    (``detail.code``, ``detail.requested_level``, ``detail.max``: ``spark/rules_table.py``)."""
    if "detail" not in df.columns:
        return F.lit(None).cast("string")
    return F.when(F.col("event") == "send_back", F.col("detail").cast("string"))


def timer_detail(df: DataFrame) -> Column:
    """The ``detail`` text of a ``send`` or COMMIT ``txn_end`` that names ``"timer"`` (else null): the
    timer requests whose ``detail.timer`` the TIMER table's replay reads (``spark/rules_table.py``)."""
    if "detail" not in df.columns:
        return F.lit(None).cast("string")
    text = F.col("detail").cast("string")
    request = (F.col("event") == "send") | ((F.col("event") == "txn_end") & (F.col("status") == "COMMIT"))
    return F.when(request & text.contains('"timer"'), text)


def pop_detail(df: DataFrame) -> Column:
    """The ``detail`` text of a 5.x pop row (``pop``, ``change_invisible``, ``ack``; else null): the handles
    the pop tables' replay reads (``spark/rules_table.py``)."""
    if "detail" not in df.columns:
        return F.lit(None).cast("string")
    return F.when(F.col("event").isin("pop", "change_invisible", "ack"), F.col("detail").cast("string"))


def route_detail(df: DataFrame) -> Column:
    """The ``detail`` text of a ``send`` with an actor whose text names ``tries`` (else null): a routed
    producer's attempts, what ``spark/rules_route.py`` hands the checker's detectors (issue 43)."""
    if "detail" not in df.columns:
        return F.lit(None).cast("string")
    text = F.col("detail").cast("string")
    return F.when((F.col("event") == "send") & F.col("actor").isNotNull() & text.contains('"tries"'), text)
def ha_detail(df: DataFrame) -> Column:
    """The ``detail`` text of a row the master/slave replay reads (``spark/rules_ha.py``; else null): a
    ``replicate`` or ``ha_link``, or a ``store`` / ``send`` / ``deliver`` whose text names ``"broker"`` (a
    pair's row: ``detail.broker`` / ``detail.broker_id``)."""
    if "detail" not in df.columns:
        return F.lit(None).cast("string")
    text = F.col("detail").cast("string")
    pair = F.col("event").isin("store", "send", "deliver") & text.contains('"broker')
    return F.when(F.col("event").isin("replicate", "ha_link") | pair, text)


def filter_detail(df: DataFrame) -> Column:
    """The ``detail`` text of rows the filter rules read (``spark/rules_filter.py``), else null."""
    if "detail" not in df.columns:
        return F.lit(None).cast("string")
    text = F.col("detail").cast("string")
    wanted = F.col("event").isin("send", "store", "deliver", "consume") & (
        text.contains('"subscription"') | text.contains('"properties"') | text.contains('"tags"'))
    return F.when(wanted, text)


def _variant_detail(df: DataFrame) -> Column:
    return F.try_parse_json(F.col("detail").cast("string"))


def send_back_max(df: DataFrame) -> Column:
    """A ``send_back`` row's ``detail.max`` when it is a JSON integer (else null).

    Same reading as ``traces.checks_retry.send_back_max``: the max reconsume
    times the broker routed on; the audit falls back to the configured max.
    """
    if "detail" not in df.columns:
        return F.lit(None).cast("int")
    value = F.try_variant_get(_variant_detail(df), "$.max", "variant")
    integral = F.schema_of_variant(value).isin("TINYINT", "SMALLINT", "INT", "BIGINT")
    return F.when((F.col("event") == "send_back") & integral, F.variant_get(value, "$", "int"))


def from_commitlog_offset(df: DataFrame) -> Column:
    """A ``timer_fire`` row's ``detail.from_commitlog_offset`` (the timer copy it re-put) when it is a
    JSON integer (else null): ``traces.checks_timer.from_commitlog_offset``'s reading."""
    if "detail" not in df.columns:
        return F.lit(None).cast("bigint")
    value = F.try_variant_get(_variant_detail(df), "$.from_commitlog_offset", "variant")
    integral = F.schema_of_variant(value).isin("TINYINT", "SMALLINT", "INT", "BIGINT")
    return F.when((F.col("event") == "timer_fire") & integral, F.try_variant_get(value, "$", "bigint"))


def route_queues(df: DataFrame) -> Column:
    """A ``send`` row's ``detail.route_queues`` when it is a positive JSON integer (else null):
    ``traces.checks_common.route_queues``'s reading (ORDER_KEY_SPLIT, ``spark/rules_keyed.py``)."""
    if "detail" not in df.columns:
        return F.lit(None).cast("bigint")
    value = F.try_variant_get(_variant_detail(df), "$.route_queues", "variant")
    integral = F.schema_of_variant(value).isin("TINYINT", "SMALLINT", "INT", "BIGINT")
    number = F.try_variant_get(value, "$", "bigint")
    return F.when((F.col("event") == "send") & integral & (number > 0), number)


def loop_number(df: DataFrame, name: str) -> Column:
    """An ``orderly_start`` row's ``detail.<name>`` (``loop_age_ms`` or ``loop_max_ms``) when it is a JSON integer
    (else null); ``traces.checks_common.loop_age`` then wants the age ≥ 0 and the limit > 0
    (ORDERLY_LOOP_OVERRUN, ``spark/rules_lock.loop_findings``)."""
    if "detail" not in df.columns:
        return F.lit(None).cast("bigint")
    value = F.try_variant_get(_variant_detail(df), f"$.{name}", "variant")
    integral = F.schema_of_variant(value).isin("TINYINT", "SMALLINT", "INT", "BIGINT")
    return F.when((F.col("event") == "orderly_start") & integral, F.try_variant_get(value, "$", "bigint"))


def clean_number(df: DataFrame, name: str) -> Column:
    """A ``send_back`` row's ``detail.<name>`` (``consume_start`` or ``consume_timeout_min``) when its
    ``detail.clean_expired`` is JSON true and the number a JSON integer (else null): the client's clean sent
    it back (``properties.inv_timeout.clean_timing``'s reading; RETRY_EARLY's clean case,
    ``spark/rules.clean_findings``)."""
    if "detail" not in df.columns:
        return F.lit(None).cast("bigint")
    detail = _variant_detail(df)
    flag = F.try_variant_get(detail, "$.clean_expired", "variant")
    clean = (F.schema_of_variant(flag) == "BOOLEAN") & F.try_variant_get(flag, "$", "boolean")
    value = F.try_variant_get(detail, f"$.{name}", "variant")
    integral = F.schema_of_variant(value).isin("TINYINT", "SMALLINT", "INT", "BIGINT")
    return F.when((F.col("event") == "send_back") & clean & integral, F.try_variant_get(value, "$", "bigint"))


def broadcasting(df: DataFrame) -> Column:
    """Whether a row's ``detail.message_model`` is the JSON string BROADCASTING, never null (any event;
    ``traces.checks_common.broadcasting_row``'s reading: a broadcasting client's row, issue 42). Like
    ``broadcasting_row``, only a detail whose text names BROADCASTING is parsed (most rows: none). Works on
    any frame with ``detail`` (``spark/carry.py`` reads it on the history's rows)."""
    if "detail" not in df.columns:
        return F.lit(False)
    text = F.col("detail").cast("string")
    value = F.try_variant_get(F.try_parse_json(text), "$.message_model", "variant")
    named = (F.schema_of_variant(value) == "STRING") & (F.variant_get(value, "$", "string") == BROADCASTING)
    return F.coalesce(F.when(text.contains(BROADCASTING), named), F.lit(False))


def from_where(df: DataFrame) -> Column:
    """Whether a broadcasting ``commit_offset``'s ``detail`` has ``from_where`` (any value, JSON null too),
    never null: where the client began pulling the queue without a stored offset, a run's start
    (``traces.checks_delivery._broadcast_runs``' reading)."""
    if "detail" not in df.columns:
        return F.lit(False)
    value = F.try_variant_get(_variant_detail(df), "$.from_where", "variant")
    start = (F.col("event") == "commit_offset") & broadcasting(df)
    return F.coalesce(F.when(start, value.isNotNull()), F.lit(False))


def timed_out(df: DataFrame) -> Column:
    """Whether a ``consume``'s ``detail.return_type`` is the JSON string TIME_OUT (its listener outlived
    consumeTimeout), never null: ``traces.checks_delivery._timed_out``'s reading (DUPLICATED's reason),
    parsed only where the text names TIME_OUT."""
    if "detail" not in df.columns:
        return F.lit(False)
    text = F.col("detail").cast("string")
    value = F.try_variant_get(F.try_parse_json(text), "$.return_type", "variant")
    named = (F.schema_of_variant(value) == "STRING") & (F.variant_get(value, "$", "string") == "TIME_OUT")
    return F.coalesce(F.when((F.col("event") == "consume") & text.contains("TIME_OUT"), named), F.lit(False))


def unrecorded(df: DataFrame) -> Column:
    """A ``send`` row's ``detail.unrecorded`` when it is JSON true or false (else null): the row an imported
    RocketMQ message trace adds for the sends it does not record (``traces.msgtrace``), read as
    ``traces.unjudged`` reads it (the reason UNEXPECTED is not judged)."""
    if "detail" not in df.columns:
        return F.lit(None).cast("boolean")
    value = F.try_variant_get(_variant_detail(df), "$.unrecorded", "variant")
    boolean = F.schema_of_variant(value) == "BOOLEAN"
    return F.when((F.col("event") == "send") & boolean, F.variant_get(value, "$", "boolean"))


def check_times(df: DataFrame) -> Column:
    """A ``txn_check`` row's ``detail.check_times`` as text (else null).

    Same reading as ``traces.checks_txn.detect_txn_checks``: a re-check that
    repeats a number already seen is not counted again.
    """
    if "detail" not in df.columns:
        return F.lit(None).cast("string")
    value = F.try_variant_get(_variant_detail(df), "$.check_times", "variant")
    text = F.when(F.schema_of_variant(value) == "STRING", F.variant_get(value, "$", "string")).otherwise(
        F.to_json(value)
    )
    known = value.isNotNull() & (F.schema_of_variant(value) != "VOID")
    return F.when((F.col("event") == "txn_check") & known, text)


def at_risk(df: DataFrame) -> Column:
    """The string entries of a ``crash`` row's ``detail.at_risk`` (null for other rows).

    Same reading as ``traces.checks_common.at_risk_keys``: ``detail`` must be a
    JSON object whose ``at_risk`` is a list; entries that are not strings are
    ignored. Parsed only on ``crash`` rows (a variant, so types are visible).
    """
    if "detail" not in df.columns:
        return F.lit(None).cast("array<string>")
    parsed = F.try_variant_get(F.try_parse_json(F.col("detail").cast("string")), "$.at_risk", "array<variant>")
    keys = F.transform(
        F.filter(parsed, lambda x: F.schema_of_variant(x) == "STRING"),
        lambda x: F.variant_get(x, "$", "string"),
    )
    return F.when(F.col("event") == "crash", keys)
