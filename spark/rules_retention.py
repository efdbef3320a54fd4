"""LOST's and TIMER_UNFIRED's reading of ``expire`` rows in the Spark audit (issue 42): which keys and
timer copies retention may have taken.

Theory of operation
-------------------
The reference checker's ``traces/checks_retention.verdict`` decides, per key, whether LOST may judge it
(the ``expire`` rows before the drain kept or took early every copy of it) and the clause its reason adds
for a copy taken before fileReservedTime; ``checks_retention.kept`` over ``timer_copies`` whether
TIMER_UNFIRED may judge it (every expire kept its copies in rmq_sys_wheel_timer). Here the same functions
run where the rows are:

- ``expire`` rows are a handful per trace (one per clean pass that deleted): one small collect gives
  them to the driver, per trace, up to its drain (``expires_of``; the transaction pass collects them too,
  for TXN_UNRESOLVED's halves: ``spark/rules_txn.py``); a trace without one costs nothing more;
- the copy rows (``store``, ``send``, ``txn_half`` with a msg_key) of the traces that have one are
  partitioned by (trace, msg_key) and each key's verdicts computed on its own rows (a key has a few);
- ``apply`` drops the LOST findings of keys not judged and adds the clause to the others' reasons,
  one anti-join and one join on (trace, msg_key), LOST findings only, and drops the TIMER_UNFIRED
  findings of keys whose timer copy may be gone, one more anti-join.

A per-key function of the reference is reused rather than restated because the verdict is a small
decision over one key's rows and the trace's few ``expire`` rows; what is Spark's own is where the rows
meet (as ``spark/rules_filter.py`` does with its per-trace reading).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import groupby
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rmqspec.properties.codes import AuditParams, Code
from rmqspec.spark.arrow_judge import keyed
from rmqspec.spark.rules import EV, SEQ
from rmqspec.traces.checks_common import TIMER_TOPIC
from rmqspec.traces.checks_retention import COPY_EVENTS, kept, timer_copies, verdict

__all__ = ["VERDICT_SCHEMA", "apply", "expires_of", "retention_verdicts"]

VERDICT_SCHEMA = T.StructType([
    T.StructField("trace", T.StringType()),
    T.StructField("msg_key", T.StringType()),
    T.StructField("judged", T.BooleanType()),
    T.StructField("clause", T.StringType()),
    T.StructField("timer", T.BooleanType()),  # TIMER_UNFIRED may judge the key
])
_ARROW = pa.schema([("trace", pa.string()), ("msg_key", pa.string()), ("judged", pa.bool_()),
                    ("clause", pa.string()), ("timer", pa.bool_())])
_ROW = ("trace", "seq", "ts", "event", "topic", "queue_id", "queue_offset", "commitlog_offset")
_COPY = ("trace", "seq", "ts", "event", "msg_key", "topic", "queue_id", "queue_offset", "commitlog_offset",
         "delay_level", "deliver_ts")


def _verdicts(expires: Mapping[str, list[dict[str, Any]]], params: AuditParams) -> Any:
    """The ``mapInArrow`` function: each (trace, msg_key)'s verdict, for the keys that are not simply judged."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = [r for b in batches for r in b.to_pylist()]
        rows.sort(key=lambda r: (r["trace"], r["msg_key"], r["seq"]))
        out = []
        for (trace, key), group in groupby(rows, key=lambda r: (r["trace"], r["msg_key"])):
            copies, ran = list(group), expires.get(trace, ())
            got = verdict(copies, ran, params)
            timer = kept(timer_copies(copies).get(key, ()), ran, TIMER_TOPIC)
            if not got.judged or got.reason or not timer:
                out.append({"trace": trace, "msg_key": key, "judged": got.judged, "clause": got.reason,
                            "timer": timer})
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=_ARROW)

    return run


def expires_of(df: DataFrame) -> dict[str, list[dict[str, Any]]]:
    """trace -> its ``expire`` rows up to its drain, in seq order (``checks_retention.expire_rows``), of the
    validated rows ``df`` (with ``drain``): one small collect."""
    drained = F.col("drain").isNotNull() & (SEQ() <= F.col("drain"))
    expires: dict[str, list[dict[str, Any]]] = {}
    cause = F.col("expire_cause")
    for r in df.filter((EV() == "expire") & drained).select(*_ROW, cause).orderBy("trace", "seq").collect():
        row = r.asDict()
        cause_text = row.pop("expire_cause")
        expires.setdefault(r["trace"], []).append({**row, "detail": {"cause": cause_text} if cause_text else None})
    return expires


def retention_verdicts(df: DataFrame, params: AuditParams) -> DataFrame | None:
    """(trace, msg_key, judged, clause, timer) of every key whose LOST or TIMER_UNFIRED the ``expire`` rows
    change, in the validated rows ``df`` (with ``drain``); None when no trace has an ``expire`` row before
    its drain."""
    expires = expires_of(df)
    if not expires:
        return None
    copies = df.filter(EV().isin(*COPY_EVENTS) & F.col("msg_key").isNotNull() & F.col("trace").isin(*expires))
    return keyed(copies.select(*_COPY), "trace", "msg_key").mapInArrow(_verdicts(expires, params), VERDICT_SCHEMA)


def apply(found: DataFrame, verdicts: DataFrame) -> DataFrame:
    """``found`` less the LOST findings of keys not judged and the TIMER_UNFIRED findings of keys whose timer
    copy may be gone, the others' LOST reasons with their clause."""
    unfired = F.col("code") == Code.TIMER_UNFIRED.value
    gone_timer = verdicts.filter(~F.col("timer")).select(F.col("trace").alias("_t"), F.col("msg_key").alias("_k"))
    found = found.join(gone_timer, unfired & (found["trace"] == gone_timer["_t"])
                       & (found["msg_key"] == gone_timer["_k"]), "left_anti")
    lost = F.col("code") == Code.LOST.value

    def part(judged: bool) -> DataFrame:
        return verdicts.filter(F.col("judged") == judged).select(
            F.col("trace").alias("_t"), F.col("msg_key").alias("_k"), "clause")

    gone = part(False)
    found = found.join(gone, lost & (found["trace"] == gone["_t"]) & (found["msg_key"] == gone["_k"]), "left_anti")
    early = part(True)
    joined = found.join(early, lost & (found["trace"] == early["_t"]) & (found["msg_key"] == early["_k"]), "left")
    reason = F.when(F.col("clause").isNotNull(), F.concat(F.col("reason"), F.col("clause"))).otherwise(F.col("reason"))
    return joined.withColumn("reason", reason).select(*found.columns)
