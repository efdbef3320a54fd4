"""The audit's facts pass: what the driver learns about every trace before any rule runs.

Theory of operation
-------------------
``facts(rows)`` validates nothing itself (``inputs.load`` marks each row's ``problem``); it runs
two cheap jobs over ``inputs.load``'s rows: row counts grouped by (trace, validity, event, unknown
status, filter detail, candidate of ``spark/unjudged.py``, the group and topic of deliver and
consume rows, and the group of a broadcasting client's deliver, consume or commit_offset) with the
first and last seq of each ``traces.unjudged.ANCHORS``, and the valid crash, recover and drain rows
themselves. The driver merges them per trace: row counts, the drain, the epoch bounds and crash
rows (``job._with_trace_facts``), at-risk keys, power losses, the consumers of each topic, the
broadcasting groups (``Trace.broadcasting``), the rows the filter rules read, whether any row may
lack what a rule reads, and the anchors (``unjudged.trace_facts``).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rmqspec.spark import unjudged as unjudged_mod
from rmqspec.traces.checks_common import STATUS_VOCABULARY
from rmqspec.traces.unjudged import ANCHORS

__all__ = ["facts"]


def _unknown_status() -> Column:
    """``event NUL status`` for a row whose status its event's rules do not know, else null."""
    out = F.lit(None).cast("string")
    for event, (known, _codes) in STATUS_VOCABULARY.items():
        bad = (F.col("event") == event) & F.col("status").isNotNull() & ~F.col("status").isin(*sorted(known))
        out = F.when(bad, F.concat(F.col("event"), F.lit("\0"), F.col("status"))).otherwise(out)
    return out


def facts(rows: DataFrame) -> tuple[list[dict[str, Any]], dict[tuple[str, str], int]]:
    """(one dict per trace: n, good, drain, drain_ts (the last drain's seq and ts), bounds, crash_seqs,
    crash_rows ((seq, status) of each
    crash), at_risk, filtered (rows the filter rules read), power (power-loss crashes), consumers
    (topic -> the groups with a valid deliver or consume of it), broadcasting (the groups with a valid
    broadcasting deliver, consume or commit_offset: ``Trace.broadcasting``), candidates (rows that may
    lack what a rule reads: ``spark/unjudged.py``), anchors (name -> (first seq, last seq) of
    ``traces.unjudged.ANCHORS``); (event, status) -> rows with a status their rules do not know).

    Two jobs, both cheap: row counts grouped by (trace, valid, event, unknown status, carries a
    filter detail, is a candidate, on deliver and consume rows their group and topic, and on a
    broadcasting client's rows its group), with the
    anchors' first and last seqs — a count per group, a few hundred groups, merged here — and the
    valid crash, recover and drain rows themselves (a handful per trace)."""
    valid = F.col("problem").isNull()
    consumed = valid & F.col("event").isin("deliver", "consume") & F.col("group").isNotNull()
    consumed = consumed & F.col("topic").isNotNull()
    broadcast = valid & F.col("event").isin("deliver", "consume", "commit_offset") & F.col("group").isNotNull()
    broadcast = broadcast & F.col("broadcasting")
    anchors = unjudged_mod.anchor_columns()
    groups = rows.groupBy(
        "trace",
        valid.alias("valid"),
        "event",
        F.when(valid, _unknown_status()).alias("unknown"),
        (valid & F.col("filter_detail").isNotNull()).alias("filtered"),
        (valid & unjudged_mod.candidate_column()).alias("candidate"),
        F.when(consumed, F.col("group")).alias("c_group"),
        F.when(consumed, F.col("topic")).alias("c_topic"),
        F.when(broadcast, F.col("group")).alias("b_group"),
    ).agg(
        F.count(F.lit(1)).alias("count"),
        *[F.min(F.when(valid & col, F.col("seq"))).alias(f"lo_{name}") for name, col in anchors.items()],
        *[F.max(F.when(valid & col, F.col("seq"))).alias(f"hi_{name}") for name, col in anchors.items()],
    ).collect()
    marks = (
        rows.filter(valid & F.col("event").isin("crash", "recover", "drain"))
        .select("trace", "seq", "ts", "event", "status", "at_risk")
        .collect()
    )
    merged: dict[Any, dict[str, Any]] = {}
    unknown: dict[tuple[str, str], int] = {}

    def of(trace: Any) -> dict[str, Any]:
        if trace not in merged:
            merged[trace] = {"trace": trace, "n": 0, "good": 0, "drain": None, "drain_ts": None, "bounds": [],
                             "crash_seqs": [],
                             "crash_rows": [], "at_risk": set(), "filtered": 0, "power": 0, "consumers": {},
                             "broadcasting": set(), "candidates": 0,
                             "anchors": dict.fromkeys(ANCHORS, (None, None))}  # fmt: skip
        return merged[trace]

    for g in groups:
        into = of(g["trace"])
        into["n"] += g["count"]
        if not g["valid"]:
            continue
        into["good"] += g["count"]
        if g["c_group"] is not None:
            into["consumers"].setdefault(g["c_topic"], set()).add(g["c_group"])
        if g["b_group"] is not None:
            into["broadcasting"].add(g["b_group"])
        into["filtered"] += g["count"] if g["filtered"] else 0
        into["candidates"] += g["count"] if g["candidate"] else 0
        if g["unknown"] is not None:
            event, _, status = g["unknown"].partition("\0")
            unknown[(event, status)] = unknown.get((event, status), 0) + g["count"]
        for name in ANCHORS:
            lo, hi = into["anchors"][name]
            if g[f"lo_{name}"] is not None:
                into["anchors"][name] = (g[f"lo_{name}"] if lo is None else min(lo, g[f"lo_{name}"]),
                                         g[f"hi_{name}"] if hi is None else max(hi, g[f"hi_{name}"]))
    for m in marks:
        into = of(m["trace"])
        if m["event"] == "drain":
            if into["drain"] is None or (m["seq"], m["ts"]) > (into["drain"], into["drain_ts"]):
                into["drain"], into["drain_ts"] = m["seq"], m["ts"]
            continue
        into["bounds"].append(m["seq"])
        if m["event"] == "crash":
            into["crash_seqs"].append(m["seq"])
            into["crash_rows"].append((m["seq"], m["status"]))
            into["power"] += m["status"] == "power"
            into["at_risk"].update(m["at_risk"] or ())
    facts = list(merged.values())
    for row in facts:
        row["bounds"] = sorted(row["bounds"])
        row["crash_seqs"] = sorted(row["crash_seqs"])
        row["at_risk"] = sorted(row["at_risk"])
        row["broadcasting"] = sorted(row["broadcasting"])
    return facts, unknown
