"""A master/slave pair's rules in Spark (issue 43): HA_SYNC_ACK_UNREPLICATED, HA_SYNC_ACK_LOST,
HA_SLAVE_SERVED_UNSTORED, HA_SLAVE_BEYOND_REPLICATED, HA_SLAVE_NOT_PREFIX, HA_SLAVE_WROTE and the observation
HA_ASYNC_TAIL_LOST.

Theory of operation
-------------------
The reference checker (``traces/checks_ha.py``) and this pass run the same replay,
``properties/inv_replay_ha.judge_pair``, so they agree by construction; what the pass decides is which rows
meet. A pair's rows are few (a master and a slave's sends, stores, transfers and link changes, beside a
cluster's traffic of single brokers), and the replay reads a trace's pairs in one seq-ordered pass (a row
without a broker name may be any pair's), so the pass is a per-trace replay, as ``spark/rules_table.py``
does for the lock and pop tables:

1. the pair traces: those with a ``replicate`` or ``ha_link`` row, or a row whose ``ha_detail`` names
   ``"broker_id"`` (a small distinct of trace ids, broadcast);
2. their rows of the events the replay reads (``inv_replay_ha.HA_EVENTS``), with ``detail`` the pair rows' JSON
   text (``inputs.ha_detail``: null on a row naming no broker, which the replay reads as a row without
   ``detail.broker`` / ``broker_id`` — what it is), left-semi-joined to them, one shuffle by trace;
3. a ``mapInArrow`` judge hands each trace's rows, in seq order, to the replay; its findings become rows of
   ``FINDING_SCHEMA`` (``kind`` observation for HA_ASYNC_TAIL_LOST).

A trace with no pair row costs the filter of step 1 only. The cost of a pair trace is its stores, sends and
deliveries in one partition: fine for the pairs the conformance machine and the interop runs record
(``model/ha_pair.py``), not meant for a cluster's day of traffic in one trace id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rmqspec.properties.inv_replay_ha import HA_EVENTS, judge_pair
from rmqspec.spark.arrow_judge import finding, judge, keyed, shipped
from rmqspec.spark.rules import EV, FINDING_SCHEMA

__all__ = ["HA_COLUMNS", "ha_findings"]

HA_COLUMNS = ("trace", "seq", "event", "status", "commitlog_offset", "msg_key", "detail")


def ha_findings(df: DataFrame, constants: Mapping[str, Any] | None = None) -> list[DataFrame]:
    """The pair replay's findings (``FINDING_COLUMNS``) of the validated rows ``df`` (with ``trace``)."""
    constants = constants or {}
    marked = EV().isin("replicate", "ha_link") | F.coalesce(F.col("ha_detail").contains('"broker_id"'), F.lit(False))
    pairs = df.filter(marked).select("trace").distinct()
    rows = df.filter(EV().isin(*HA_EVENTS)).join(F.broadcast(pairs), "trace", "left_semi")
    ha, left = shipped(rows, [F.col("ha_detail").alias(c) if c == "detail" else F.col(c) for c in HA_COLUMNS],
                       constants)
    ha = keyed(ha, "trace") if "trace" in ha.columns else ha.coalesce(1)
    return [ha.mapInArrow(judge(_by_trace, left), FINDING_SCHEMA)]


def _by_trace(table: pa.Table) -> list[dict[str, Any]]:
    """A judge: the partition's rows by trace, in seq order, through ``judge_pair``."""
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        by_trace.setdefault(row["trace"], []).append(row)
    out: list[dict[str, Any]] = []
    for trace_id, rows in by_trace.items():
        rows.sort(key=lambda r: r["seq"])
        for f in judge_pair(rows):
            out.append(finding("observation" if f.observation else "violation", f.code, list(f.seqs), trace_id,
                               f.reason, **dict(f.keys)))
    return out
