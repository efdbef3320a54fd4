"""The lock family's rules per queue partition (``mapInArrow``): ORDER_KEY_REORDERED,
LOCK_OVERLAP, ORDERLY_WITHOUT_LOCK, ORDERLY_CONCURRENT.

One shuffle by (trace, group, topic, queue_id) of the lock, unlock,
orderly_start / orderly_end and SUCCESS consume rows (with a full queue key
and a client), instead of one per rule.

- ORDER_KEY_REORDERED reads every SUCCESS consume (a fifth of a trace), so it
  is numpy: the owner of a queue changes only at lock / unlock rows (a few per
  thousand rows), which a Python loop walks; each consume then takes the
  owner after the last such row before it (a segmented running max), and an
  owned consume is compared with the previous owned consume of the same
  ownership segment.
- The other three read only the lock and orderly rows (a few percent), so
  they run the reference detectors of ``traces/checks_lock.py`` themselves on
  those rows: the same code as the checker, agreeing by construction (the
  differential tests still compare them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rmqspec.properties.codes import AuditParams, Code
from rmqspec.spark.arrow_judge import encoded, finding, ints, judge, keyed, running, starts
from rmqspec.spark.rules import EV, FINDING_SCHEMA, _nn
from rmqspec.traces.checks_common import Trace
from rmqspec.traces.checks_lock import detect_lock_overlap, detect_orderly_concurrent, detect_orderly_without_lock

__all__ = ["lock_findings"]

_COLUMNS = ("trace", "seq", "ts", "event", "group", "topic", "queue_id", "client_id", "status", "queue_offset", "epoch")
_QUEUE = ("trace", "group", "topic", "queue_id")
_DETECTORS = (detect_lock_overlap, detect_orderly_without_lock, detect_orderly_concurrent)


def lock_findings(df: DataFrame, params: AuditParams) -> DataFrame:
    """The lock family's findings (``FINDING_COLUMNS``) of the validated rows ``df``."""
    success = (EV() == "consume") & (F.col("status") == "SUCCESS") & F.col("queue_offset").isNotNull()
    rows = (
        df.filter((EV().isin("lock", "unlock", "orderly_start", "orderly_end") | success)
                  & _nn("group", "topic", "queue_id", "client_id"))
        .select(*_COLUMNS)
        .transform(lambda r: keyed(r, *_QUEUE))
    )  # fmt: skip
    return rows.mapInArrow(judge(_Judge(params)), FINDING_SCHEMA)


class _Judge:
    """One partition's lock-family rows in (a table), its findings out."""

    def __init__(self, params: AuditParams):
        self.params = params

    def __call__(self, table: pa.Table) -> list[dict[str, Any]]:
        lock_rows = pc.is_in(table["event"], value_set=pa.array(["lock", "unlock", "orderly_start", "orderly_end"]))
        return [*_key_reordered(table), *self.detected(table.filter(lock_rows))]

    def detected(self, table: pa.Table) -> list[dict[str, Any]]:
        """The three lock detectors of the checker, per trace, on the lock and orderly rows."""
        out: list[dict[str, Any]] = []
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for row in table.to_pylist():
            by_trace.setdefault(row["trace"], []).append(row)
        for trace_id, rows in by_trace.items():
            rows.sort(key=lambda r: r["seq"])
            epochs = [r["epoch"] for r in rows]
            trace = Trace(rows=rows, epochs=epochs, drain_seq=None, consumers={}, params=self.params)
            for detector in _DETECTORS:
                for f in detector(trace):
                    out.append(finding("violation", f.code, list(f.seqs), trace_id, f.reason, **dict(f.keys)))
        return out


def _key_reordered(table: pa.Table) -> list[dict[str, Any]]:
    """ORDER_KEY_REORDERED (``traces.checks_order.detect_key_reordered``): lock, unlock and
    SUCCESS consume rows of each (queue, epoch) by seq."""
    event, names = encoded(table["event"])
    code = {name: i for i, name in enumerate(names)}
    if "consume" not in code:
        return []
    success = pc.fill_null(pc.equal(table["status"], "SUCCESS"), False).to_numpy(zero_copy_only=False)
    success &= (event == code["consume"]) & ~table["queue_offset"].is_null().to_numpy(zero_copy_only=False)
    keep = success | np.isin(event, [code[e] for e in ("lock", "unlock") if e in code])
    if not success.any():
        return []
    t = table.filter(pa.array(keep))
    trace, group, topic = (encoded(t[c])[0] for c in ("trace", "group", "topic"))
    queue, epoch, seq = ints(t["queue_id"], 0), ints(t["epoch"], 0), ints(t["seq"], 0)
    order = np.lexsort((seq, epoch, queue, topic, group, trace))
    t = t.take(pa.array(order))
    new_queue = starts(trace[order], group[order], topic[order], queue[order], epoch[order])
    event, names = encoded(t["event"])
    code = {name: i for i, name in enumerate(names)}
    client, _ = encoded(t["client_id"])
    status, status_names = encoded(t["status"])
    granted = status == (status_names.index("GRANTED") if "GRANTED" in status_names else -2)
    lock, unlock = event == code.get("lock", -2), event == code.get("unlock", -2)
    n = t.num_rows
    # the owner after each lock / unlock row, and whether the row ends an ownership
    owner_after = np.full(n, -1, dtype=np.int64)
    ends = np.zeros(n, dtype=bool)
    segment = np.cumsum(new_queue)
    current, owner = -1, -1
    for p in np.flatnonzero(lock | unlock).tolist():
        if segment[p] != current:
            current, owner = segment[p], -1
        if lock[p]:
            if granted[p] and owner != client[p]:
                owner, ends[p] = int(client[p]), True
        elif owner == client[p]:
            owner, ends[p] = -1, True
        owner_after[p] = owner
    last_change = running(np.where(lock | unlock, np.arange(n), n), new_queue, largest=True)
    owner_at = np.where(last_change < n, owner_after[np.minimum(last_change, n - 1)], -1)
    owned = np.flatnonzero((event == code["consume"]) & (owner_at >= 0) & (owner_at == client))
    ownership = np.cumsum(new_queue | ends)
    offset = ints(t["queue_offset"], 0)
    seqs = ints(t["seq"], 0)
    prev, cur = owned[:-1], owned[1:]
    bad = (ownership[prev] == ownership[cur]) & (offset[cur] <= offset[prev])
    out = []
    for p, c in zip(prev[bad].tolist(), cur[bad].tolist()):
        row = {k: t[k][c].as_py() for k in ("trace", "group", "topic", "queue_id", "client_id")}
        reason = f"orderly SUCCESS of offset {int(offset[c])} after offset {int(offset[p])}"
        out.append(
            finding(
                "violation",
                Code.ORDER_KEY_REORDERED.value,
                [seqs[p], seqs[c]],
                row.pop("trace"),
                reason,
                **row,
            )
        )
    return out
