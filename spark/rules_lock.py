"""The lock family's rules per queue partition (``mapInArrow``): ORDER_KEY_REORDERED,
LOCK_OVERLAP, ORDERLY_WITHOUT_LOCK, ORDERLY_CONCURRENT.

It reads the lock, unlock, orderly_start / orderly_end and SUCCESS consume
rows (with a full queue key and a client) of a partition holding every row
of their queues: the queue judge's (``rules_queue.py``), which shuffles them
once with the other queue-keyed families.

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
from pyspark.sql import Column
from pyspark.sql import functions as F

from rmqspec.properties.codes import AuditParams, Code
from rmqspec.spark.arrow_judge import Columns, finding, running
from rmqspec.spark.rules import EV, _nn
from rmqspec.traces.checks_common import Trace
from rmqspec.traces.checks_lock import detect_lock_overlap, detect_orderly_concurrent, detect_orderly_without_lock

__all__ = ["LOCKING", "LOCK_COLUMNS", "lock_judged", "lock_rows"]

# The columns the lock family reads (the queue judge's, ``rules_queue.py``: they cover its other families').
LOCK_COLUMNS = ("trace", "seq", "ts", "event", "group", "topic", "queue_id", "client_id", "status", "queue_offset",
                "epoch")  # fmt: skip
LOCKING = ("lock", "unlock", "orderly_start", "orderly_end")
_DETECTORS = (detect_lock_overlap, detect_orderly_without_lock, detect_orderly_concurrent)


def lock_rows() -> Column:
    """The rows the lock family reads: lock, unlock, orderly and SUCCESS consume rows with a full queue
    key and a client."""
    success = (EV() == "consume") & (F.col("status") == "SUCCESS") & F.col("queue_offset").isNotNull()
    return (EV().isin(*LOCKING) | success) & _nn("group", "topic", "queue_id", "client_id")


def lock_judged(cols: Columns, params: AuditParams) -> list[dict[str, Any]]:
    """The lock family's findings of one partition (every row of a queue in it; rows of other
    families are left out here)."""
    keep = cols.has("group", "topic", "queue_id", "client_id")
    locking = cols.is_("event", *LOCKING) & keep
    return [*_key_reordered(cols, keep), *_detected(cols.table.filter(pa.array(locking)), params)]


def _detected(table: pa.Table, params: AuditParams) -> list[dict[str, Any]]:
    """The three lock detectors of the checker, per trace, on the lock and orderly rows."""
    out: list[dict[str, Any]] = []
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        by_trace.setdefault(row["trace"], []).append(row)
    for trace_id, rows in by_trace.items():
        rows.sort(key=lambda r: r["seq"])
        epochs = [r["epoch"] for r in rows]
        trace = Trace(rows=rows, epochs=epochs, drain_seq=None, consumers={}, params=params)
        for detector in _DETECTORS:
            for f in detector(trace):
                out.append(finding("violation", f.code, list(f.seqs), trace_id, f.reason, **dict(f.keys)))
    return out


def _key_reordered(cols: Columns, keep: np.ndarray) -> list[dict[str, Any]]:
    """ORDER_KEY_REORDERED (``traces.checks_order.detect_key_reordered``): lock, unlock and
    SUCCESS consume rows of each (queue, epoch) by seq."""
    success = cols.is_("event", "consume") & cols.is_("status", "SUCCESS") & cols.has("queue_offset") & keep
    if not success.any():
        return []
    at, new_queue = cols.sorted(success | (cols.is_("event", "lock", "unlock") & keep),
                                ("trace", "group", "topic", "queue_id", "epoch"))  # fmt: skip
    n = len(at)
    client = cols.codes("client_id")[at]
    granted = cols.is_("status", "GRANTED")[at]
    lock, unlock = cols.is_("event", "lock")[at], cols.is_("event", "unlock")[at]
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
    owned = np.flatnonzero(~lock & ~unlock & (owner_at >= 0) & (owner_at == client))
    ownership = np.cumsum(new_queue | ends)
    offset, seqs = cols.ints("queue_offset")[at], cols.ints("seq")[at]
    prev, cur = owned[:-1], owned[1:]
    bad = (ownership[prev] == ownership[cur]) & (offset[cur] <= offset[prev])
    out = []
    for p, c in zip(prev[bad].tolist(), cur[bad].tolist()):
        row = {k: cols.value(k, at[c]) for k in ("trace", "group", "topic", "queue_id", "client_id")}
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
