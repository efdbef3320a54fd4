"""The route pass (``mapInArrow``): PRODUCER_RETRY_SAME_BROKER and PRODUCER_FAULT_WINDOW, a routed producer's
attempts (issue 43).

The rows are the ``send`` rows with an ``actor`` whose ``detail`` text names ``tries`` (the derived column
``route_detail``, ``inputs.route_detail``, a cheap column test; a routed producer's acknowledged sends, a
small share of a trace); they are shuffled by (trace,
actor), the producer the window replay keys by, and each partition runs the checker's own detectors
(``traces/checks_route.py``, the rules of ``properties/inv_route.py``) trace by trace on them, in seq
order: the same code as the reference checker, agreeing by construction (the differential tests still
compare them). A row whose ``detail`` the rules cannot read is passed on and left unjudged by them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rmqspec.properties.codes import AuditParams
from rmqspec.spark.arrow_judge import finding, judge, keyed, shipped
from rmqspec.spark.rules import FINDING_SCHEMA
from rmqspec.traces.checks_common import Trace
from rmqspec.traces.checks_route import detect_fault_window, detect_retry_same_broker

__all__ = ["route_findings"]

_COLUMNS = ("trace", "seq", "ts", "event", "actor", "group", "topic", "msg_key", "detail")


def route_findings(df: DataFrame, params: AuditParams, constants: Mapping[str, Any] | None = None) -> DataFrame:
    """The route pass's findings (``FINDING_COLUMNS``) of the validated rows ``df``."""
    rows, left_out = shipped(
        df.filter(F.col("route_detail").isNotNull()),
        [F.col("route_detail").alias("detail") if c == "detail" else F.col(c) for c in _COLUMNS],
        constants or {},
    )
    return keyed(rows, "trace", "actor").mapInArrow(judge(_Judge(params), left_out), FINDING_SCHEMA)


class _Judge:
    """One partition's routed sends in, the detectors' findings out."""

    def __init__(self, params: AuditParams):
        self.params = params

    def __call__(self, table: pa.Table) -> list[dict[str, Any]]:
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for row in table.to_pylist():
            by_trace.setdefault(row["trace"], []).append(row)
        out: list[dict[str, Any]] = []
        for trace_id, rows in by_trace.items():
            rows.sort(key=lambda r: r["seq"])
            trace = Trace(rows=rows, epochs=[0] * len(rows), drain_seq=None, consumers={}, params=self.params,
                          at_risk=frozenset())
            for detect in (detect_retry_same_broker, detect_fault_window):
                out.extend(finding("violation", f.code, list(f.seqs), trace_id, f.reason, **f.keys)
                           for f in detect(trace))
        return out
