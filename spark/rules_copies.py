"""Two lifecycle rules on a message's broker-made copies, on Arrow tables: DLQ_DELAYED and
SCHEDULE_DUPLICATED (``traces.checks_lifecycle``).

Both key by msg_key — DLQ_DELAYED by (trace, group, msg_key), the group of a
``%DLQ%`` store being its topic's suffix; SCHEDULE_DUPLICATED by (trace,
msg_key, reconsume_times with null as 0) — so they run on the message judge's
partitions (``rules_message.py``) instead of in shuffles of their own. Both
count rows of their key so far: segmented cumulative sums over rows sorted
by (key, seq).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmqspec.properties.codes import AuditParams, Code
from rmqspec.spark.arrow_judge import Columns, codes, finding, member, running
from rmqspec.traces.checks_common import DLQ_PREFIX, SCHEDULE_TOPIC

__all__ = ["dlq_delayed", "schedule_duplicated"]


def _upto(values: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Per row, the sum of ``values`` over its segment's rows up to and including it."""
    total = np.cumsum(values)
    ids = np.cumsum(new) - 1
    return total - (total - values)[np.flatnonzero(new)][ids]


def dlq_delayed(cols: Columns, params: AuditParams) -> list[dict[str, Any]]:
    """DLQ_DELAYED: a ``%DLQ%`` store answering an earlier DLQ send-back of its (group, msg_key)
    (its stores so far do not outnumber the send-backs before it) at least the shortest delay
    after the latest of them."""
    back = cols.is_("event", "send_back") & cols.is_("status", "DLQ") & cols.has("group", "msg_key")
    names = cols.names("topic")
    dlq_topics = {t for t in names if t.startswith(DLQ_PREFIX)}
    dlq = cols.is_("event", "store") & member(cols.codes("topic"), names, dlq_topics) & cols.has("msg_key")
    if not back.any() or not dlq.any():
        return []
    # the group of a send-back, the topic's suffix of a DLQ store, as one code per row
    rows = np.flatnonzero(back | dlq)
    taken = pa.array(rows)
    named = pc.if_else(pa.array(back[rows]), cols.table["group"].take(taken),
                       pc.utf8_slice_codeunits(cols.table["topic"].take(taken), len(DLQ_PREFIX)))  # fmt: skip
    group = np.full(cols.n, -1, dtype=np.int64)
    group[rows] = codes(named)
    at, new = cols.sorted(back | dlq, ("trace", group, "msg_key"))
    n = len(at)
    is_back = back[at]
    backs_before = _upto(is_back.astype(np.int64), new) - is_back
    stores = _upto((~is_back).astype(np.int64), new)
    latest = running(np.where(is_back, np.arange(n), n), new, largest=True)
    ts, seq = cols.ints("ts")[at], cols.ints("seq")[at]
    b = np.minimum(latest, n - 1)
    gap = ts - ts[b]
    bad = ~is_back & (latest < n) & (stores <= backs_before) & (gap >= params.shortest_delay_ms)
    return [
        finding(
            "violation",
            Code.DLQ_DELAYED.value,
            [seq[b[j]], seq[j]],
            cols.value("trace", at[j]),
            f"DLQ copy stored {int(gap[j])} ms after its send-back",
            group=cols.value("group", at[b[j]]),
            topic=cols.value("topic", at[b[j]]),
            msg_key=cols.value("msg_key", at[j]),
        )
        for j in np.flatnonzero(bad).tolist()
    ]


def schedule_duplicated(cols: Columns) -> list[dict[str, Any]]:
    """SCHEDULE_DUPLICATED: per (msg_key, reconsume_times or 0), a ``schedule_fire`` that makes the
    fires outnumber the SCHEDULE_TOPIC_XXXX stores so far, with no crash since the first fire."""
    fire = cols.is_("event", "schedule_fire") & cols.has("msg_key")
    sched = cols.is_("event", "store") & cols.is_("topic", SCHEDULE_TOPIC) & cols.has("msg_key")
    if not fire.any():
        return []
    at, new = cols.sorted(fire | sched, ("trace", "msg_key", cols.ints("reconsume_times", 0)))
    n = len(at)
    is_fire = fire[at]
    fired = _upto(is_fire.astype(np.int64), new)
    scheduled = _upto((~is_fire).astype(np.int64), new)
    first = running(np.where(is_fire, np.arange(n), n), new, largest=False)
    first = np.where(is_fire & (first == n), np.arange(n), first)  # a segment's first fire is its own first
    crashes, seq, rt = cols.ints("crashes")[at], cols.ints("seq")[at], cols.ints("reconsume_times", 0)[at]
    f = np.minimum(first, n - 1)
    bad = is_fire & (fired > scheduled) & (crashes[f] == crashes)
    out = []
    for j in np.flatnonzero(bad).tolist():
        key = cols.value("msg_key", at[j])
        reason = (
            f"fire {int(fired[j])} of {key} (reconsume_times {int(rt[j])}), "
            f"{int(scheduled[j])} scheduled, no crash since the first fire"
        )
        out.append(
            finding(
                "violation",
                Code.SCHEDULE_DUPLICATED.value,
                [seq[f[j]], seq[j]],
                cols.value("trace", at[j]),
                reason,
                topic=cols.value("topic", at[j]),
                msg_key=key,
            )
        )
    return out
