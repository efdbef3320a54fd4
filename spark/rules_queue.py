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
  starts a new pending interval; a broadcasting client's rows are a queue
  of their own, and any consume of it acknowledges), and a ``commit_offset`` inside pending
  intervals is judged against the lowest pending offset. "The lowest offset
  pending at each commit" is a stabbing query over row-index intervals,
  answered in numpy over dyadic blocks (``arrow_judge.stabbing_min``): each interval is
  split into at most two blocks per level, each block keeps the min of its
  intervals, and a point reads one block per level.
- OFFSET_LOST (``traces.checks_lifecycle.detect_offset_lost``): commits by
  (trace, group, topic, queue_id, seq); a RESTORED commit whose offset is
  not the previous commit's, both after the same number of crashes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rmqspec.properties.codes import AuditParams, Code
from rmqspec.spark.arrow_judge import NONE, Columns, finding, judge, keyed, lexsort, shipped, stabbing_min
from rmqspec.spark.rules import EV, FINDING_SCHEMA, _nn
from rmqspec.spark.rules_lock import LOCK_COLUMNS, LOCKING, lock_judged, lock_rows

__all__ = ["queue_findings"]

_OVERRUN_EVENTS = ("deliver", "consume", "send_back", "commit_offset")


def _narrowed(name: str) -> Column:
    """A column as shuffled: null on the rows that do not need it (narrower rows to shuffle and
    hand to Python). The lock family alone reads a client (on lock, orderly and consume rows)
    and a ts (on lock and orderly rows), OFFSET_OVERRUN a client on a broadcasting client's rows (its own
    queue); ``broadcasting`` is true there, else null (a column of nulls costs next to nothing)."""
    if name == "client_id":
        return F.when(EV().isin(*LOCKING, "consume") | F.col("broadcasting"), F.col(name)).alias(name)
    if name == "ts":
        return F.when(EV().isin(*LOCKING), F.col(name)).alias(name)
    if name == "broadcasting":
        return F.when(F.col(name), F.lit(True)).alias(name)
    return F.col(name)


def queue_findings(df: DataFrame, params: AuditParams, constants: Mapping[str, Any] | None = None) -> DataFrame:
    """The queue, lock and consumer families' findings (``FINDING_COLUMNS``) of the validated rows
    ``df``; ``constants``: columns the driver knows to hold one value (``arrow_judge.shipped``)."""
    stores = (EV() == "store") & _nn("topic", "queue_id", "queue_offset")
    overrun = EV().isin(*_OVERRUN_EVENTS) & _nn("group", "topic", "queue_id", "queue_offset")
    rows, left_out = shipped(
        df.filter(stores | overrun | lock_rows()), [_narrowed(c) for c in (*LOCK_COLUMNS, "crashes")],
        constants or {}
    )
    rows = keyed(rows, "trace", "topic", "queue_id")
    return rows.mapInArrow(judge(_Judge(params), left_out), FINDING_SCHEMA)


class _Judge:
    """One partition's queue-family rows in (a table), its findings out."""

    def __init__(self, params: AuditParams):
        self.params = params

    def __call__(self, table: pa.Table) -> list[dict[str, Any]]:
        cols = Columns(table)
        return [*_queue_gap(cols), *_offset_overrun(cols), *_offset_lost(cols), *lock_judged(cols, self.params)]


def _queue_gap(cols: Columns) -> list[dict[str, Any]]:
    """ORDER_QUEUE_GAP: per (trace, epoch, topic, queue_id), a store whose offset is not the previous + 1."""
    keep = cols.is_("event", "store") & cols.has("topic", "queue_id", "queue_offset")
    if not keep.any():
        return []
    at, new = cols.sorted(keep, ("trace", "epoch", "topic", "queue_id"))
    offset, seq = cols.ints("queue_offset")[at], cols.ints("seq")[at]
    out = []
    for j in (np.flatnonzero(~new[1:] & (offset[1:] != offset[:-1] + 1)) + 1).tolist():
        prev, got, i = int(offset[j - 1]), int(offset[j]), at[j]
        out.append(
            finding(
                "violation",
                Code.ORDER_QUEUE_GAP.value,
                [seq[j - 1], seq[j]],
                cols.value("trace", i),
                f"queue offset {got} after {prev} (expected {prev + 1})",
                topic=cols.value("topic", i),
                queue_id=cols.value("queue_id", i),
            )
        )
    return out


def _offset_overrun(cols: Columns) -> list[dict[str, Any]]:
    """OFFSET_OVERRUN: per (trace, group, topic, queue_id) by seq, a commit above the lowest pending offset.
    A broadcasting client's rows are a queue of their own (per client; without a client, none), and its
    consumes of any status acknowledge."""
    broadcast = ~cols.null("broadcasting")
    # a failed consume neither delivers nor acknowledges, but a broadcasting client drops it
    failed = cols.is_("event", "consume") & ~cols.is_("status", "SUCCESS") & ~broadcast
    keep = cols.is_("event", *_OVERRUN_EVENTS) & cols.has("group", "topic", "queue_id", "queue_offset") & ~failed
    keep &= ~(broadcast & cols.null("client_id"))
    if not keep.any():
        return []
    own = np.where(broadcast, cols.codes("client_id"), -1)
    at, new = cols.sorted(keep, ("trace", "group", "topic", "queue_id", own))
    n = len(at)
    commit, deliver = cols.is_("event", "commit_offset")[at], cols.is_("event", "deliver")[at]
    if not commit.any() or not deliver.any():
        return []
    offset, seq = cols.ints("queue_offset")[at], cols.ints("seq")[at]
    segment = np.cumsum(new) - 1
    bounds = np.append(np.flatnonzero(new), n)
    # each deliver's pending interval ends at the next deliver / ack of its offset, else at its queue's end
    moves = np.flatnonzero(~commit)
    by_offset = moves[lexsort((moves, offset[moves], segment[moves]))]
    same = (segment[by_offset[1:]] == segment[by_offset[:-1]]) & (offset[by_offset[1:]] == offset[by_offset[:-1]])
    end = bounds[segment + 1]
    end[by_offset[:-1][same]] = by_offset[1:][same]
    starts_at = np.flatnonzero(deliver)
    values, rank = np.unique(offset[starts_at], return_inverse=True)
    points = np.flatnonzero(commit)
    low = stabbing_min(starts_at + 1, end[starts_at], rank * n + starts_at, points, n)
    pending = low != NONE
    lowest = np.where(pending, values[np.where(pending, low // n, 0)], 0)
    bad = pending & (offset[points] > lowest)
    out = []
    for p, d, o in zip(points[bad].tolist(), (low[bad] % n).tolist(), lowest[bad].tolist()):
        i = at[p]
        out.append(
            finding(
                "violation",
                Code.OFFSET_OVERRUN.value,
                [seq[d], seq[p]],
                cols.value("trace", i),
                f"committed offset {int(offset[p])} passes unacknowledged offset {o}",
                group=cols.value("group", i),
                topic=cols.value("topic", i),
                queue_id=cols.value("queue_id", i),
            )
        )
    return out


def _offset_lost(cols: Columns) -> list[dict[str, Any]]:
    """OFFSET_LOST: per (trace, group, topic, queue_id) by seq, a RESTORED commit whose offset is not
    the previous commit's, with no crash between them."""
    keep = cols.is_("event", "commit_offset") & cols.has("group", "topic", "queue_id", "queue_offset")
    if not (keep & cols.is_("status", "RESTORED")).any():
        return []
    at, new = cols.sorted(keep, ("trace", "group", "topic", "queue_id"))
    offset, seq, crashes = cols.ints("queue_offset")[at], cols.ints("seq")[at], cols.ints("crashes")[at]
    restored = cols.is_("status", "RESTORED")[at]
    bad = np.flatnonzero(restored[1:] & ~new[1:] & (crashes[1:] == crashes[:-1]) & (offset[1:] != offset[:-1])) + 1
    return [
        finding(
            "violation",
            Code.OFFSET_LOST.value,
            [seq[j - 1], seq[j]],
            cols.value("trace", at[j]),
            f"offset {int(offset[j])} after a clean restart, {int(offset[j - 1])} was committed",
            group=cols.value("group", at[j]),
            topic=cols.value("topic", at[j]),
            queue_id=cols.value("queue_id", at[j]),
        )
        for j in bad.tolist()
    ]
