"""The filter rules (issue 15) in Spark: FILTER_MISMATCH, FILTER_SKIPPED, SUBSCRIPTION_INCONSISTENT.

Theory of operation
-------------------
Unlike ``rules.py`` these rules use Python: a SQL92 subscription is evaluated with 4.9.8's Java typing
(``model/sql92.py``: Integer/Long/Double conversions, NaN order, exceptions that abort an evaluation),
which Spark SQL cannot state exactly. So the rows the rules read are cut down with DataFrame operations
first, then the rows of each (trace, topic) are grouped (an RDD ``groupByKey``: no pandas needed) and
run through the reference detectors of ``traces/checks_filter.py`` on the executors — the same code,
so the two audits agree by construction; the differential tests still compare them.

Rows read: ``send`` / ``store`` / ``deliver`` / ``consume`` rows whose ``detail`` carries a
subscription or the message's tags / properties (``inputs.filter_detail``), plus the ``commit_offset``
rows of the (trace, group, topic) those deliveries name and the ``send`` / ``store`` / ``txn_end`` rows
without such a detail on those topics (a message no row states attributes of is not LOST for a group
that filters its topic: whether the group wants it is unknown). Everything else is never shuffled: a trace
without filter details costs one filtered scan. ``with_filter_rules`` adds the findings to the other
rules' and drops the LOST findings ``checks_filter.filter_exempt`` names (a filtering group's messages
no subscription of it selects or whose attributes are unknown, and the FILTER_SKIPPED ones).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from rmqspec.properties.codes import AuditParams, Code
from rmqspec.spark.rules import FINDING_COLUMNS, FINDING_SCHEMA, KEYS
from rmqspec.traces.checks_common import Trace
from rmqspec.traces.checks_filter import (
    detect_filter_mismatch,
    detect_filter_skipped,
    detect_subscription_inconsistent,
    filter_exempt,
)

_ROW_COLUMNS = ("trace", "seq", "ts", "event", "group", "topic", "queue_id", "queue_offset", "msg_key",
                "client_id", "status", "delay_level", "deliver_ts", "filter_detail")
_KIND = {Code.FILTER_MISMATCH.value: "violation", Code.FILTER_SKIPPED.value: "violation"}
EXEMPT_CODE = "_LOST_EXEMPT"  # internal rows: (group, msg_key) LOST must not report


def _judge(rows_in: list[dict[str, Any]]) -> list[tuple]:
    rows = []
    for rec in sorted(rows_in, key=lambda r: r["seq"]):
        row = dict(rec)
        row["detail"] = row.pop("filter_detail")
        rows.append(row)
    trace_id = rows[0]["trace"] if rows else ""
    trace = Trace.build(rows, AuditParams())
    out: list[tuple] = []

    def add(kind: str, code: str, seqs: tuple[int, ...], keys: dict[str, Any], reason: str) -> None:
        out.append((kind, code, [int(s) for s in seqs], trace_id, *[keys.get(name) for name, _ in KEYS], reason))

    for detector in (detect_subscription_inconsistent, detect_filter_mismatch, detect_filter_skipped):
        for f in detector(trace):
            add(_KIND.get(f.code, "observation"), f.code, f.seqs, dict(f.keys), f.reason)
    for group, key in sorted(filter_exempt(trace)):
        add("internal", EXEMPT_CODE, (), {"group": group, "msg_key": key}, "")
    return out


def _by_topic(row: Row) -> tuple[tuple[str, str], dict[str, Any]]:
    d = row.asDict()
    return (d["trace"], d["topic"]), d


def filter_findings(df: DataFrame) -> DataFrame:
    """The three codes plus internal LOST-exemption rows (``EXEMPT_CODE``)."""
    detailed = df.filter(F.col("filter_detail").isNotNull())
    groups = (detailed.filter(F.col("event").isin("deliver", "consume") & F.col("group").isNotNull())
              .select("trace", "group", "topic").distinct())
    commits = df.filter(F.col("event") == "commit_offset").join(groups, ["trace", "group", "topic"], "left_semi")
    # the messages of those topics no row states attributes of (``filter_exempt``: unknown to LOST)
    plain = F.col("event").isin("send", "store", "txn_end") & F.col("filter_detail").isNull()
    unstated = df.filter(plain & F.col("msg_key").isNotNull()).join(
        groups.select("trace", "topic").distinct(), ["trace", "topic"], "left_semi")
    rows = detailed.select(*_ROW_COLUMNS).unionByName(commits.select(*_ROW_COLUMNS)).unionByName(
        unstated.select(*_ROW_COLUMNS))
    judged = rows.rdd.map(_by_topic).groupByKey().flatMap(lambda kv: _judge(list(kv[1])))
    return df.sparkSession.createDataFrame(judged, schema=FINDING_SCHEMA)


def with_filter_rules(findings: DataFrame, df: DataFrame) -> DataFrame:
    """``findings`` of the other rules + the filter rules, minus the exempt LOST findings."""
    extra = filter_findings(df)
    exempt = extra.filter(F.col("code") == EXEMPT_CODE).select(
        "trace", F.col("group").alias("_eg"), F.col("msg_key").alias("_ek")).distinct()
    lost = findings.filter(F.col("code") == Code.LOST.value)
    kept_lost = lost.join(
        exempt,
        (lost["trace"] == exempt["trace"]) & (lost["group"] == exempt["_eg"]) & (lost["msg_key"] == exempt["_ek"]),
        "left_anti",
    )
    others = findings.filter(F.col("code") != Code.LOST.value)
    new = extra.filter(F.col("code") != EXEMPT_CODE).select(*FINDING_COLUMNS)
    return others.unionByName(kept_lost).unionByName(new)
