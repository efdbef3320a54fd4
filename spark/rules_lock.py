"""The lock family's rules per queue partition (``mapInArrow``): ORDER_KEY_REORDERED,
LOCK_OVERLAP, ORDERLY_WITHOUT_LOCK, ORDERLY_CONCURRENT; and ORDERLY_LOOP_OVERRUN, a row's own judgement, as a
filter of the rows (``loop_findings``, no shuffle).

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
- ORDERLY_WITHOUT_LOCK and ORDERLY_CONCURRENT read every orderly_start (and
  orderly_end) but a broadcasting client's (``broadcasting``: it needs no lock,
  and its windows are its own): 3.5 % of a generated trace, which as row dicts through the
  checker's detectors were ~13 % of the Python workers' time. In numpy, per
  (trace, group, topic, queue_id) by seq: a start's last GRANTED in its queue
  and its client's last GRANTED there are segmented running maxima; a
  client's window is open from each of its starts to its next orderly row,
  so "the most recently opened window of another client open at this start"
  is a stabbing query over those spans (``arrow_judge.stabbing_min``), and a
  client's spans never hold its own rows.
- LOCK_OVERLAP reads only lock and unlock rows (a few per ten thousand), so
  it runs the checker's own detector (``traces/checks_lock.py``) on them: the
  same code as the checker, agreeing by construction.
The differential tests hold all four to the checker.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rmqspec.properties.codes import AuditParams, Code, ObservationCode
from rmqspec.spark.arrow_judge import NONE, Columns, finding, running, stabbing_min
from rmqspec.spark.rules import EV, _finding, _nn
from rmqspec.traces.checks_common import Trace
from rmqspec.traces.checks_lock import detect_lock_overlap

__all__ = ["LOCKING", "LOCK_COLUMNS", "lock_judged", "lock_rows", "loop_findings"]

# The columns the lock family reads (the queue judge's, ``rules_queue.py``: they cover its other families').
LOCK_COLUMNS = ("trace", "seq", "ts", "event", "group", "topic", "queue_id", "client_id", "status", "queue_offset",
                "epoch", "broadcasting")  # fmt: skip
LOCKING = ("lock", "unlock", "orderly_start", "orderly_end")
_QUEUE = ("trace", "group", "topic", "queue_id")
_KEYS = ("group", "topic", "queue_id", "client_id")


def lock_rows() -> Column:
    """The rows the lock family reads: lock, unlock, orderly and SUCCESS consume rows with a full queue
    key and a client."""
    success = (EV() == "consume") & (F.col("status") == "SUCCESS") & F.col("queue_offset").isNotNull()
    return (EV().isin(*LOCKING) | success) & _nn("group", "topic", "queue_id", "client_id")


def lock_judged(cols: Columns, params: AuditParams) -> list[dict[str, Any]]:
    """The lock family's findings of one partition (every row of a queue in it; rows of other
    families are left out here)."""
    keep = cols.has(*_KEYS)
    return [
        *_key_reordered(cols, keep),
        *_lock_overlap(cols.table.filter(pa.array(cols.is_("event", "lock", "unlock") & keep)), params),
        *_without_lock(cols, keep, params.client_lock_ms),
        *_concurrent(cols, keep),
    ]


def _lock_overlap(table: pa.Table, params: AuditParams) -> list[dict[str, Any]]:
    """LOCK_OVERLAP: the checker's detector, per trace, on the lock and unlock rows."""
    out: list[dict[str, Any]] = []
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        by_trace.setdefault(row["trace"], []).append(row)
    for trace_id, rows in by_trace.items():
        rows.sort(key=lambda r: r["seq"])
        epochs = [r["epoch"] for r in rows]
        trace = Trace(rows=rows, epochs=epochs, drain_seq=None, consumers={}, params=params)
        for f in detect_lock_overlap(trace):
            out.append(finding("violation", f.code, list(f.seqs), trace_id, f.reason, **dict(f.keys)))
    return out


def _orderly_finding(cols: Columns, code: Code | ObservationCode, seqs: list[int], row: int,
                     reason: str) -> dict[str, Any]:
    keys = {k: cols.value(k, row) for k in _KEYS}
    kind = "observation" if isinstance(code, ObservationCode) else "violation"
    return finding(kind, code.value, seqs, cols.value("trace", row), reason, **keys)


def _without_lock(cols: Columns, keep: np.ndarray, limit: int) -> list[dict[str, Any]]:
    """ORDERLY_WITHOUT_LOCK (``traces.checks_lock.detect_orderly_without_lock``): per (trace, group,
    topic, queue_id) by seq, a start whose client has no GRANTED before it, or whose queue's last
    GRANTED went to another client, or whose client's last GRANTED is older than ``limit``. A broadcasting
    client's rows (its start needs no lock; a lock row saying BROADCASTING too) are left out."""
    keep = keep & cols.null("broadcasting")
    starts_ = cols.is_("event", "orderly_start") & keep
    if not starts_.any():
        return []
    granted = cols.is_("event", "lock") & cols.is_("status", "GRANTED") & keep
    at, new = cols.sorted(granted | starts_, _QUEUE)
    by_client, new_client = cols.sorted(granted | starts_, (*_QUEUE, "client_id"))
    n = len(at)
    idx = np.arange(n)
    latest = running(np.where(granted[at], idx, n), new, largest=True)  # the queue's last GRANTED, n: none
    mine = running(np.where(granted[by_client], idx, n), new_client, largest=True)  # the client's, by_client
    where = np.empty(cols.n, dtype=np.int64)
    where[by_client] = idx
    client, seq, ts = cols.codes("client_id"), cols.ints("seq"), cols.ints("ts")
    points = np.flatnonzero(starts_[at])
    rows, own = at[points], mine[where[at[points]]]
    never = own == n
    last = at[np.where(never, 0, latest[points])]  # the client has a GRANTED, so the queue has one
    grant = by_client[np.where(never, 0, own)]
    superseded = ~never & (client[last] != client[rows])
    expired = ~never & ~superseded & (ts[rows] - ts[grant] > limit)
    out = []
    for row, la, gr, nv, sup in zip(*(a[never | superseded | expired].tolist() for a in
                                      (rows, last, grant, never, superseded)), strict=True):  # fmt: skip
        name = cols.value("client_id", row)
        if nv:
            seqs, reason = [seq[row]], f"{name} never locked this queue"
        elif sup:
            seqs, reason = [seq[la], seq[row]], f"{name}'s lock was superseded by {cols.value('client_id', la)}"
        else:
            age = int(ts[row] - ts[gr])
            seqs, reason = [seq[gr], seq[row]], f"{name}'s lock is {age} ms old (client lifetime {limit} ms)"
        out.append(_orderly_finding(cols, Code.ORDERLY_WITHOUT_LOCK, seqs, row, reason))
    return out


def _concurrent(cols: Columns, keep: np.ndarray) -> list[dict[str, Any]]:
    """ORDERLY_CONCURRENT (``traces.checks_lock.detect_orderly_concurrent``): per (trace, group,
    topic, queue_id) by seq, a start while another client's window is open; seqs = [the opening
    start of the most recently opened such window, the start].

    A client's window is open from each of its starts up to its next orderly row (a start opens a
    window when its client's previous orderly row in the queue is an end, or there is none), so a
    start meets the spans (start, next row of the same client) of the other clients; each span
    carries the opening start of its window, and the latest opening wins. A start of a client whose own
    window is open (its previous orderly row there is a start) is offending too, with that window's opening
    start. A start whose queue's last GRANTED went to its own client after the other window opened is the
    observation ORDERLY_LOCK_OUTLIVED instead (``_last_grant``). A broadcasting client's orderly rows are left
    out (its windows are its own)."""
    orderly = cols.is_("event", "orderly_start", "orderly_end") & keep & cols.null("broadcasting")
    is_start = cols.is_("event", "orderly_start")
    if not (orderly & is_start).any():
        return []
    at, new = cols.sorted(orderly, _QUEUE)
    by_client, new_client = cols.sorted(orderly, (*_QUEUE, "client_id"))
    n = len(at)
    idx = np.arange(n)
    where = np.empty(cols.n, dtype=np.int64)
    where[at] = idx  # a row's position in its queue, by seq
    segment_end = np.append(np.flatnonzero(new), n)[np.cumsum(new)]  # per queue position: its queue's end
    start_c = is_start[by_client]
    opens = start_c & (new_client | ~np.concatenate(([False], start_c[:-1])))
    opening = np.where(opens, idx, running(np.where(opens, idx, n), new_client, largest=True))
    spans = np.flatnonzero(start_c)
    pos = where[by_client[spans]]
    following = spans + 1
    last_of_client = (following >= n) | new_client[np.minimum(following, n - 1)]
    hi = np.where(last_of_client, segment_end[pos], where[by_client[np.minimum(following, n - 1)]])
    points = np.flatnonzero(is_start[at])
    low = stabbing_min(pos + 1, hi, n - where[by_client[opening[spans]]], points, n)
    seq = cols.ints("seq")
    grant = _last_grant(cols, orderly & is_start)
    codes = cols.codes("client_id")
    out = []
    for p, v in zip(points[low != NONE].tolist(), low[low != NONE].tolist()):
        row, other = at[p], at[n - v]
        name, theirs = cols.value("client_id", row), cols.value("client_id", other)
        g = grant[row]
        if g >= 0 and codes[g] == codes[row] and seq[g] > seq[other]:  # 4.9 permits it: an observation
            reason = (f"{name} started under the lock the broker granted it after {theirs}'s orderly window "
                      f"opened: {theirs}'s listener outlived its broker lock (4.9 checks the lock only before a batch)")
            out.append(_orderly_finding(cols, ObservationCode.ORDERLY_LOCK_OUTLIVED, [seq[other], seq[g], seq[row]],
                                        row, reason))
            continue
        reason = f"{name} started while {theirs}'s orderly window is open"
        out.append(_orderly_finding(cols, Code.ORDERLY_CONCURRENT, [seq[other], seq[row]], row, reason))
    # a start of a client whose own window is open (its previous orderly row in the queue is a start):
    # two batches of one consumer at once (MessageQueueLock)
    for i in np.flatnonzero(start_c & ~opens).tolist():
        row, first = by_client[i], by_client[opening[i]]
        reason = (f"{cols.value('client_id', row)} started a second batch while its own orderly window is open "
                  "(one thread of a consumer per queue: MessageQueueLock)")
        out.append(_orderly_finding(cols, Code.ORDERLY_CONCURRENT, [seq[first], seq[row]], row, reason))
    return out


def _last_grant(cols: Columns, starts: np.ndarray) -> np.ndarray:
    """Per row (indexed like ``cols``), for each of ``starts``: its queue's last GRANTED lock row before
    it (a non-broadcasting one), -1 when none; other rows -1."""
    granted = cols.is_("event", "lock") & cols.is_("status", "GRANTED") & cols.has(*_KEYS) & cols.null("broadcasting")
    at, new = cols.sorted(granted | starts, _QUEUE)
    n = len(at)
    latest = running(np.where(granted[at], np.arange(n), n), new, largest=True)
    out = np.full(cols.n, -1, dtype=np.int64)
    found = starts[at] & (latest < n)
    out[at[found]] = at[latest[found]]
    return out


def _key_reordered(cols: Columns, keep: np.ndarray) -> list[dict[str, Any]]:
    """ORDER_KEY_REORDERED (``traces.checks_order.detect_key_reordered``): lock, unlock, ROLLBACK
    orderly_end and SUCCESS consume rows of each (queue, epoch) by seq; an owner's ROLLBACK starts the
    comparison anew, as a new ownership would."""
    success = cols.is_("event", "consume") & cols.is_("status", "SUCCESS") & cols.has("queue_offset") & keep
    if not success.any():
        return []
    rollback = cols.is_("event", "orderly_end") & cols.is_("status", "ROLLBACK") & keep
    at, new_queue = cols.sorted(success | rollback | (cols.is_("event", "lock", "unlock") & keep),
                                ("trace", "group", "topic", "queue_id", "epoch"))  # fmt: skip
    n = len(at)
    client = cols.codes("client_id")[at]
    granted = cols.is_("status", "GRANTED")[at]
    lock, unlock, back = cols.is_("event", "lock")[at], cols.is_("event", "unlock")[at], rollback[at]
    # the owner after each lock / unlock / rollback row, and whether the row ends a run of comparisons
    owner_after = np.full(n, -1, dtype=np.int64)
    ends = np.zeros(n, dtype=bool)
    segment = np.cumsum(new_queue)
    current, owner = -1, -1
    for p in np.flatnonzero(lock | unlock | back).tolist():
        if segment[p] != current:
            current, owner = segment[p], -1
        if lock[p]:
            if granted[p] and owner != client[p]:
                owner, ends[p] = int(client[p]), True
        elif owner == client[p]:
            owner, ends[p] = (owner, True) if back[p] else (-1, True)
        owner_after[p] = owner
    changes = lock | unlock | back
    last_change = running(np.where(changes, np.arange(n), n), new_queue, largest=True)
    owner_at = np.where(last_change < n, owner_after[np.minimum(last_change, n - 1)], -1)
    owned = np.flatnonzero(~changes & (owner_at >= 0) & (owner_at == client))
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


def loop_findings(df: DataFrame) -> DataFrame:
    """ORDERLY_LOOP_OVERRUN (``traces/checks_lock.detect_orderly_loop_overrun``): a row's own judgement, so a
    filter of the validated rows, no shuffle: an ``orderly_start`` stating ``detail.loop_age_ms`` ≥ 0 above its
    ``detail.loop_max_ms`` > 0 (the derived columns of ``inputs.loop_number``); the checker's keys and reason."""
    age, limit = F.col("loop_age_ms"), F.col("loop_max_ms")
    over = df.filter((EV() == "orderly_start") & _nn("loop_age_ms", "loop_max_ms") & (age >= 0) & (limit > 0)
                     & (age > limit))
    reason = F.concat(
        F.coalesce(F.col("client_id"), F.lit("None")), F.lit(" took a batch "), age.cast("string"),
        F.lit(" ms into its consume request's loop (MAX_TIME_CONSUME_CONTINUOUSLY "), limit.cast("string"),
        F.lit(" ms: the request resubmits itself instead)"),
    )
    return _finding(over, Code.ORDERLY_LOOP_OVERRUN.value, [F.col("seq")], ("group", "topic", "queue_id", "client_id"),
                    reason)
