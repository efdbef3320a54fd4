"""The queue family's rules per queue partition (``mapInArrow``): ORDER_QUEUE_GAP,
OFFSET_OVERRUN, OFFSET_LOST and the lock family (``rules_lock.py``).

One shuffle by (trace, topic, queue_id) of the rows these rules read — stores,
deliveries, acknowledgements, commits, lock and orderly rows — instead of one
per family: the store family keys by (trace, epoch, topic, queue_id), the lock
and consumer families by (trace, group, topic, queue_id), and both are
refinements of the partition key. Each family picks its rows out of the
partition with its own filter, so a row judged here is a row its reference
detector reads.

- ORDER_QUEUE_GAP (``traces.checks_order.detect_queue_gap``): stores by
  (trace, epoch, topic, queue_id, seq); a store whose offset is not the
  previous store's + 1.
- OFFSET_OVERRUN (``traces.checks_delivery.detect_offset_overrun``): an
  offset is pending from a ``deliver`` until the next ``deliver`` or
  acknowledgement of the same offset on the same queue (the next deliver
  starts a new pending interval), and a ``commit_offset`` inside pending
  intervals is judged against the lowest pending offset. "The lowest offset
  pending at each commit" is a stabbing query over row-index intervals,
  answered in numpy over dyadic blocks (``stabbing_min``): each interval is
  split into at most two blocks per level, each block keeps the min of its
  intervals, and a point reads one block per level.
- OFFSET_LOST (``traces.checks_lifecycle.detect_offset_lost``): commits by
  (trace, group, topic, queue_id, seq); a RESTORED commit whose offset is
  not the previous commit's, both after the same number of crashes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from rmqspec.properties.codes import AuditParams, Code
from rmqspec.spark.arrow_judge import NONE, encoded, event_in, finding, ints, judge, keyed, not_null, sorted_segments
from rmqspec.spark.rules import EV, FINDING_SCHEMA, _nn
from rmqspec.spark.rules_lock import LOCK_COLUMNS, lock_judged, lock_rows

__all__ = ["queue_findings", "stabbing_min"]

_OVERRUN_EVENTS = ("deliver", "consume", "send_back", "commit_offset")


def queue_findings(df: DataFrame, params: AuditParams) -> DataFrame:
    """The queue, lock and consumer families' findings (``FINDING_COLUMNS``) of the validated rows ``df``."""
    stores = (EV() == "store") & _nn("topic", "queue_id", "queue_offset")
    overrun = EV().isin(*_OVERRUN_EVENTS) & _nn("group", "topic", "queue_id", "queue_offset")
    rows = (
        df.filter(stores | overrun | lock_rows())
        .select(*LOCK_COLUMNS, "crashes")
        .transform(lambda r: keyed(r, "trace", "topic", "queue_id"))
    )
    return rows.mapInArrow(judge(_Judge(params)), FINDING_SCHEMA)


class _Judge:
    """One partition's queue-family rows in (a table), its findings out."""

    def __init__(self, params: AuditParams):
        self.params = params

    def __call__(self, table: pa.Table) -> list[dict[str, Any]]:
        return [*_queue_gap(table), *_offset_overrun(table), *_offset_lost(table), *lock_judged(table, self.params)]


def _queue_gap(table: pa.Table) -> list[dict[str, Any]]:
    """ORDER_QUEUE_GAP: per (trace, epoch, topic, queue_id), a store whose offset is not the previous + 1."""
    keep = event_in(table, "store") & not_null(table, "topic", "queue_id", "queue_offset")
    if not keep.any():
        return []
    t, new = sorted_segments(table, keep, ("trace", "epoch", "topic", "queue_id"))
    offset, seq = ints(t["queue_offset"], 0), ints(t["seq"], 0)
    bad = np.flatnonzero(~new[1:] & (offset[1:] != offset[:-1] + 1)) + 1
    out = []
    for i in bad.tolist():
        prev, got = int(offset[i - 1]), int(offset[i])
        out.append(
            finding(
                "violation",
                Code.ORDER_QUEUE_GAP.value,
                [seq[i - 1], seq[i]],
                t["trace"][i].as_py(),
                f"queue offset {got} after {prev} (expected {prev + 1})",
                topic=t["topic"][i].as_py(),
                queue_id=t["queue_id"][i].as_py(),
            )
        )
    return out


def _offset_overrun(table: pa.Table) -> list[dict[str, Any]]:
    """OFFSET_OVERRUN: per (trace, group, topic, queue_id) by seq, a commit above the lowest pending offset."""
    keep = event_in(table, *_OVERRUN_EVENTS) & not_null(table, "group", "topic", "queue_id", "queue_offset")
    success = pc.fill_null(pc.equal(table["status"], "SUCCESS"), False).to_numpy(zero_copy_only=False)
    keep &= ~(event_in(table, "consume") & ~success)  # a failed consume neither delivers nor acknowledges
    if not keep.any():
        return []
    t, new = sorted_segments(table, keep, ("trace", "group", "topic", "queue_id"))
    n = t.num_rows
    event, names = encoded(t["event"])
    commit = event == (names.index("commit_offset") if "commit_offset" in names else -2)
    deliver = event == (names.index("deliver") if "deliver" in names else -2)
    if not commit.any() or not deliver.any():
        return []
    offset, seq = ints(t["queue_offset"], 0), ints(t["seq"], 0)
    segment = np.cumsum(new) - 1
    bounds = np.append(np.flatnonzero(new), n)
    # each deliver's pending interval ends at the next deliver / ack of its offset, else at its queue's end
    moves = np.flatnonzero(~commit)
    by_offset = moves[np.lexsort((moves, offset[moves], segment[moves]))]
    same = (segment[by_offset[1:]] == segment[by_offset[:-1]]) & (offset[by_offset[1:]] == offset[by_offset[:-1]])
    end = bounds[segment + 1]
    end[by_offset[:-1][same]] = by_offset[1:][same]
    starts_at = np.flatnonzero(deliver)
    values, rank = np.unique(offset[starts_at], return_inverse=True)
    low = stabbing_min(starts_at + 1, end[starts_at], rank * n + starts_at, np.flatnonzero(commit), n)
    points = np.flatnonzero(commit)
    pending = low != NONE
    lowest = np.where(pending, values[np.where(pending, low // n, 0)], 0)
    bad = pending & (offset[points] > lowest)
    out = []
    for p, d, o in zip(points[bad].tolist(), (low[bad] % n).tolist(), lowest[bad].tolist()):
        out.append(
            finding(
                "violation",
                Code.OFFSET_OVERRUN.value,
                [seq[d], seq[p]],
                t["trace"][p].as_py(),
                f"committed offset {int(offset[p])} passes unacknowledged offset {o}",
                group=t["group"][p].as_py(),
                topic=t["topic"][p].as_py(),
                queue_id=t["queue_id"][p].as_py(),
            )
        )
    return out


def _offset_lost(table: pa.Table) -> list[dict[str, Any]]:
    """OFFSET_LOST: per (trace, group, topic, queue_id) by seq, a RESTORED commit whose offset is not
    the previous commit's, with no crash between them."""
    keep = event_in(table, "commit_offset") & not_null(table, "group", "topic", "queue_id", "queue_offset")
    restored = pc.fill_null(pc.equal(table["status"], "RESTORED"), False).to_numpy(zero_copy_only=False)
    if not (keep & restored).any():
        return []
    t, new = sorted_segments(table, keep, ("trace", "group", "topic", "queue_id"))
    offset, seq, crashes = ints(t["queue_offset"], 0), ints(t["seq"], 0), ints(t["crashes"], 0)
    restored = pc.fill_null(pc.equal(t["status"], "RESTORED"), False).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(restored[1:] & ~new[1:] & (crashes[1:] == crashes[:-1]) & (offset[1:] != offset[:-1])) + 1
    return [
        finding(
            "violation",
            Code.OFFSET_LOST.value,
            [seq[i - 1], seq[i]],
            t["trace"][i].as_py(),
            f"offset {int(offset[i])} after a clean restart, {int(offset[i - 1])} was committed",
            group=t["group"][i].as_py(),
            topic=t["topic"][i].as_py(),
            queue_id=t["queue_id"][i].as_py(),
        )
        for i in bad.tolist()
    ]


def stabbing_min(lo: np.ndarray, hi: np.ndarray, values: np.ndarray, points: np.ndarray, n: int) -> np.ndarray:
    """Per point of ``points`` (in [0, n)), the min of ``values`` over the intervals [lo, hi) holding it
    (``NONE`` where none does).

    Level k splits [0, n) into blocks of 2**k; walking up from the leaves, an interval takes its
    odd-aligned end blocks at each level (at most two) and halves, so each block keeps the min of
    the intervals it is a maximal part of, and a point's answer is the min of its one block per level.
    """
    out = np.full(len(points), NONE, dtype=np.int64)
    live = lo < hi
    lo, hi, values = lo[live].astype(np.int64), hi[live].astype(np.int64), values[live].astype(np.int64)
    level = 0
    while len(lo):
        blocks = np.full((n >> level) + 2, NONE, dtype=np.int64)
        left = (lo & 1) == 1
        np.minimum.at(blocks, lo[left], values[left])
        lo = lo + left
        right = ((hi & 1) == 1) & (lo < hi)
        np.minimum.at(blocks, hi[right] - 1, values[right])
        hi = hi - right
        out = np.minimum(out, blocks[points >> level])
        lo, hi = lo >> 1, hi >> 1
        live = lo < hi
        lo, hi, values = lo[live], hi[live], values[live]
        level += 1
    return out
