"""What rows lacking fields leave unjudged, in Spark: the reference checker's ``traces/unjudged.py``.

Theory of operation
-------------------
SPEC §8: only ``seq``, ``ts`` and ``event`` are required, and a rule that needs an absent value
judges nothing that value could change: removing information never adds a finding. The
reference checker states what each row lacking fields leaves unjudged in
``traces.unjudged.row_unjudged`` (a function of the row and of its trace's ``TraceFacts``) and
withholds the findings those entries cover. The SQL plans do the same with the same function:

1. the facts pass (``job._facts``) counts per trace the rows ``candidate_column`` lets through
   (the column test of ``traces.unjudged.CANDIDATES``: only those rows can have entries) and keeps
   the first and last seq of each of ``traces.unjudged.ANCHORS`` (``anchor_columns``); with the
   crash rows and at-risk keys it already collects, that is each trace's ``TraceFacts``
   (``trace_facts``);
2. when some row is a candidate, ``entries`` runs ``row_unjudged`` on the candidates alone
   (``mapInArrow``, the checker's own code: the two agree by construction), one output row per
   entry; a complete trace has no candidate and costs nothing more than the facts pass's columns;
3. ``lacking`` counts, per (code, event), the rows with an entry of that code: the summary's
   ``not_judged`` (``traces.checker.not_judged_reasons``, the checker's wording);
4. ``withhold`` removes the covered findings: an anti-join on (trace, code, last seq) for the
   entries of one row, and one on (trace, code) for the entries of a scope (aggregated per scope
   to the lowest ``since``), matching the key columns a scope names (an absent one matches any)
   and an offending seq at or after that ``since``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import reduce
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rmqspec.traces.checks_common import BROADCASTING, SCHEDULE_TOPIC, at_risk_keys
from rmqspec.traces.unjudged import (
    ANCHORS,
    CANDIDATES,
    DETAIL_FIELDS,
    FILTER_EVENTS,
    SET,
    TraceFacts,
    Unjudged,
    Withheld,
    candidate,
    row_unjudged,
)

__all__ = ["ENTRY_SCHEMA", "anchor_columns", "candidate_column", "entries", "lacking", "lasting", "lasting_withheld",
           "trace_facts", "withhold"]

KEY_NAMES: tuple[str, ...] = ("group", "topic", "queue_id", "msg_key", "client_id", "txn_id")
ENTRY_SCHEMA = T.StructType(
    [
        T.StructField("trace", T.StringType()),
        T.StructField("seq", T.LongType()),
        T.StructField("event", T.StringType()),
        T.StructField("code", T.StringType()),
        T.StructField("exact", T.BooleanType()),
        *(T.StructField(k, T.IntegerType() if k == "queue_id" else T.StringType()) for k in KEY_NAMES),
        T.StructField("since", T.LongType()),
    ]
)
_ENTRY_ARROW = pa.schema([pa.field(f.name, pa.int32() if f.name == "queue_id" else
                                   pa.int64() if f.name in ("seq", "since") else
                                   pa.bool_() if f.name == "exact" else pa.string()) for f in ENTRY_SCHEMA.fields])
# The columns ``row_unjudged`` reads (``check_times``, ``from_commitlog_offset``, ``filter_detail``,
# ``unrecorded`` and ``broadcasting``, ``detail.message_model``: ``inputs.DERIVED_COLUMNS``).
_ROW_COLUMNS = ("trace", "seq", "event", "group", "topic", "queue_id", "queue_offset", "msg_key", "msg_id",
                "reconsume_times", "delay_level", "deliver_ts", "status", "client_id", "txn_id", "check_times",
                "from_commitlog_offset", "filter_detail", "unrecorded", "broadcasting")  # fmt: skip
_UNBOUNDED = -(2**63)
_LASTING = pa.schema([pa.field("trace", pa.string()), pa.field("seq", pa.int64())])


def _null(name: str) -> Column:
    return F.col(name).isNull()


def candidate_column(filtered: bool = True) -> Column:
    """``traces.unjudged.candidate`` as a column (on ``inputs.load``'s columns; ``filtered`` False:
    without the filter rows, on columns without ``filter_detail`` and ``DETAIL_FIELDS``: a txn_check
    or timer_fire lacking nothing else not let through)."""
    out = F.col("event").isin(*FILTER_EVENTS) & F.col("filter_detail").isNotNull() if filtered else F.lit(False)
    for event, condition, fields in CANDIDATES:
        every = not fields  # every row the condition lets through
        if not filtered:
            fields = tuple(f for f in fields if f not in DETAIL_FIELDS)
        test = F.col("event") == event
        for name, values in condition:
            known = [v for v in values if v is not None and v is not SET]
            holds = F.col(name).isin(*known) if known else F.lit(False)
            if None in values:
                holds = holds | _null(name)
            if SET in values:
                holds = holds | F.col(name).isNotNull()
            test = test & F.coalesce(holds, F.lit(False))
        if every:
            out = out | test
        elif fields:
            out = out | (test & reduce(lambda a, b: a | b, [_null(f) for f in fields]))
    return out


def anchor_columns() -> dict[str, Column]:
    """``traces.unjudged.anchor`` as one boolean column per anchor."""
    full = reduce(lambda a, b: a & b, [F.col(c).isNotNull() for c in ("group", "topic", "queue_id", "queue_offset")])
    got = {
        "commit": (F.col("event") == "commit_offset") & full,
        "half_position": F.col("event").isin("txn_half", "txn_check") & F.col("queue_offset").isNotNull(),
        "schedule_position": (F.col("event") == "store") & (F.col("topic") == SCHEDULE_TOPIC)
        & F.col("queue_offset").isNotNull(),
        "expire": F.col("event") == "expire",
    }
    assert tuple(got) == ANCHORS
    return {name: F.coalesce(col, F.lit(False)) for name, col in got.items()}


def trace_facts(fact: Mapping[str, Any]) -> TraceFacts:
    """One trace's ``TraceFacts`` from its ``job._facts`` entry."""
    anchors = {name: (lo, hi) for name, (lo, hi) in fact["anchors"].items() if lo is not None}
    crashes = tuple(sorted(fact["crash_rows"], key=lambda c: c[0]))
    drain = (fact["drain"], fact["drain_ts"]) if fact["drain"] is not None else None
    return TraceFacts(crashes, bool(fact["at_risk"]), bool(fact["filtered"]), anchors, drain)


def _judge(facts: Mapping[str, TraceFacts]) -> Any:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: list[dict[str, Any]] = []
            for rec in batch.to_pylist():
                detail: dict[str, Any] = {}
                if rec["filter_detail"] is not None:
                    try:
                        parsed = json.loads(rec["filter_detail"])
                    except ValueError:
                        parsed = None
                    if isinstance(parsed, dict):
                        detail.update(parsed)
                if rec["check_times"] is not None:
                    detail["check_times"] = rec["check_times"]
                if rec["from_commitlog_offset"] is not None:
                    detail["from_commitlog_offset"] = rec["from_commitlog_offset"]
                if rec["unrecorded"] is not None:
                    detail["unrecorded"] = rec["unrecorded"]
                detail.pop("message_model", None)  # a broadcasting client's row: the column's reading
                if rec["broadcasting"]:
                    detail["message_model"] = BROADCASTING
                rec["detail"] = detail
                for u in row_unjudged(rec, facts[rec["trace"]]):
                    entry = {"trace": rec["trace"], "seq": rec["seq"], "event": u.why or rec["event"], "code": u.code,
                             "exact": u.until is not None, "since": u.since, **dict.fromkeys(KEY_NAMES)}
                    entry.update(dict(u.keys))
                    out.append(entry)
            yield pa.RecordBatch.from_pylist(out, schema=_ENTRY_ARROW)

    return run


def entries(base: DataFrame, facts: Mapping[str, TraceFacts]) -> DataFrame:
    """One row per ``Unjudged`` entry of ``base``'s candidate rows (``ENTRY_SCHEMA``), persisted
    (``lacking`` and ``withhold`` both read it; ``unpersist`` it after the findings are written)."""
    rows = base.filter(candidate_column()).select(*_ROW_COLUMNS)
    return rows.mapInArrow(_judge(dict(facts)), ENTRY_SCHEMA).persist(StorageLevel.MEMORY_AND_DISK)


def lasting(rows: DataFrame) -> DataFrame:
    """(trace, seq) of the rows ``traces.unjudged.lasting_rows`` names, for ``spark/carry.py``'s
    aggregations (``rows``: the history's valid rows with ``detail`` as text; a trace whose rows carry
    filter details is carried whole there, so its facts say unfiltered): the candidates (every
    ``txn_check``: its check number is in ``detail``) through ``row_unjudged`` on the executors, each
    trace's facts from two small collects (its crash rows, its anchors' first and last seqs)."""
    ev = F.col("event")
    loose = (ev == "txn_check") | candidate_column(filtered=False)
    crashes: dict[str, list[tuple[int, Any]]] = {}
    risky: set[str] = set()
    drains: dict[str, tuple[int, int]] = {}
    for r in rows.filter(ev.isin("crash", "drain")).select("trace", "seq", "ts", "event", "status", "detail").collect():
        if r["event"] == "drain":  # the last one (of two with one seq, the later ts)
            drains[r["trace"]] = max(drains.get(r["trace"], (r["seq"], r["ts"])), (r["seq"], r["ts"]))
            continue
        crashes.setdefault(r["trace"], []).append((r["seq"], r["status"]))
        if at_risk_keys({"event": "crash", "detail": r["detail"]}):
            risky.add(r["trace"])
    cols = anchor_columns()
    marks = rows.groupBy("trace").agg(*[F.min(F.when(c, F.col("seq"))).alias(f"lo_{n}") for n, c in cols.items()],
                                      *[F.max(F.when(c, F.col("seq"))).alias(f"hi_{n}") for n, c in cols.items()])
    facts: dict[str, TraceFacts] = {}
    for r in marks.collect():
        anchors = {n: (r[f"lo_{n}"], r[f"hi_{n}"]) for n in ANCHORS if r[f"lo_{n}"] is not None}
        facts[r["trace"]] = TraceFacts(tuple(sorted(crashes.get(r["trace"], ()), key=lambda c: c[0])),
                                       r["trace"] in risky, False, anchors, drains.get(r["trace"]))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            kept = [(rec["trace"], rec["seq"]) for rec in batch.to_pylist() if candidate(rec)
                    and any(u.until is None for u in row_unjudged(rec, facts[rec["trace"]]))]
            yield pa.RecordBatch.from_pylist([{"trace": t, "seq": q} for t, q in kept], schema=_LASTING)

    schema = T.StructType([T.StructField("trace", T.StringType()), T.StructField("seq", T.LongType())])
    return rows.filter(loose).drop("epoch", "crashes").mapInArrow(run, schema)


def lasting_withheld(found: DataFrame) -> dict[str, Withheld]:
    """Per trace, the entries of ``found`` beyond their own row (``Withheld.lasting``): what an
    incremental audit withholds from the findings earlier days stored (``spark/incremental.py``)."""
    scoped = found.filter(~F.col("exact")).groupBy("trace", "code", *KEY_NAMES).agg(
        F.min(F.coalesce(F.col("since"), F.lit(_UNBOUNDED))).alias("since"))
    by: dict[str, list[Unjudged]] = {}
    for r in scoped.collect():
        keys = tuple((k, r[k]) for k in KEY_NAMES if r[k] is not None)
        since = None if r["since"] == _UNBOUNDED else r["since"]
        by.setdefault(r["trace"], []).append(Unjudged(r["code"], keys, since))
    return {trace: Withheld.of(entries) for trace, entries in by.items()}


def lacking(found: DataFrame) -> dict[tuple[str, str], int]:
    """(code, event) -> the rows with an entry of that code (``traces.unjudged.not_judged``)."""
    counts = found.select("trace", "seq", "event", "code").distinct().groupBy("code", "event").count().collect()
    return {(r["code"], r["event"]): r["count"] for r in counts}


def withhold(findings: DataFrame, found: DataFrame) -> DataFrame:
    """``findings`` (``rules.FINDING_COLUMNS``) less those an entry of ``found`` covers: two
    anti-joins, on (trace, code, last seq) for the entries of one row and on (trace, code) for the
    others, whose absent keys match any value (a scope's entries aggregated to the lowest
    ``since`` first, so a scope is one row however many rows lack a field in it)."""
    columns = findings.columns
    last = findings.withColumn("_last", F.element_at("seqs", -1))
    exact = found.filter(F.col("exact")).select(
        F.col("trace").alias("_t"), F.col("code").alias("_c"), F.col("seq").alias("_s")).distinct()
    out = last.join(exact, (last["trace"] == exact["_t"]) & (last["code"] == exact["_c"])
                    & (last["_last"] == exact["_s"]), "left_anti")  # fmt: skip
    scoped = found.filter(~F.col("exact")).groupBy("trace", "code", *KEY_NAMES).agg(
        F.min(F.coalesce(F.col("since"), F.lit(_UNBOUNDED))).alias("_since"))
    part = scoped.select(F.col("trace").alias("_t"), F.col("code").alias("_c"), F.col("_since"),
                         *[F.col(k).alias(f"_k_{k}") for k in KEY_NAMES])
    cond = (out["trace"] == part["_t"]) & (out["code"] == part["_c"]) & (out["_last"] >= part["_since"])
    for k in KEY_NAMES:
        cond = cond & (part[f"_k_{k}"].isNull() | (out[k] == part[f"_k_{k}"]))
    return out.join(part, cond, "left_anti").select(*columns)
