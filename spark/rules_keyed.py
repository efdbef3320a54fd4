"""The keyed pass (``mapInArrow``): ORDER_KEY_SPLIT, a sharding key's routing.

The rows are the ordered sends (a ``send`` with a sharding_key), a small share of a trace; they
are shuffled by (trace, topic, sharding_key), a coarsening of the rule's key (group, topic,
sharding_key, ``detail.route_queues``), and each partition runs the checker's own detector
(``traces/checks_order.detect_key_split``) trace by trace on them, ``detail.route_queues`` handed over
as the derived column ``route_queues`` (``inputs.route_queues``, the checker's reading): the same
code as the reference checker, agreeing by construction (the differential tests still compare them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rmqspec.properties.codes import AuditParams
from rmqspec.spark.arrow_judge import finding, judge, keyed, shipped
from rmqspec.spark.rules import EV, FINDING_SCHEMA
from rmqspec.traces.checks_common import Trace
from rmqspec.traces.checks_order import detect_key_split

__all__ = ["keyed_findings"]

_COLUMNS = ("trace", "seq", "ts", "event", "group", "topic", "queue_id", "msg_key", "sharding_key", "route_queues")


def keyed_findings(df: DataFrame, params: AuditParams, constants: Mapping[str, Any] | None = None) -> DataFrame:
    """ORDER_KEY_SPLIT's findings (``FINDING_COLUMNS``) of the validated rows ``df``."""
    rows, left_out = shipped(
        df.filter((EV() == "send") & F.col("sharding_key").isNotNull() & F.col("route_queues").isNotNull()),
        [F.col(c) for c in _COLUMNS],
        constants or {},
    )
    return keyed(rows, "trace", "topic", "sharding_key").mapInArrow(judge(_Judge(params), left_out), FINDING_SCHEMA)


class _Judge:
    """One partition's ordered sends in, the detector's findings out."""

    def __init__(self, params: AuditParams):
        self.params = params

    def __call__(self, table: pa.Table) -> list[dict[str, Any]]:
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for row in table.to_pylist():
            row["detail"] = {"route_queues": row.pop("route_queues")}  # the detector reads it there
            by_trace.setdefault(row["trace"], []).append(row)
        out: list[dict[str, Any]] = []
        for trace_id, rows in by_trace.items():
            rows.sort(key=lambda r: r["seq"])
            trace = Trace(rows=rows, epochs=[0] * len(rows), drain_seq=None, consumers={}, params=self.params,
                          at_risk=frozenset())
            out.extend(finding("violation", f.code, list(f.seqs), trace_id, f.reason, **f.keys)
                       for f in detect_key_split(trace))
        return out
