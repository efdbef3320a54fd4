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
from rmqspec.spark.arrow_judge import event_in, finding, ints, not_null, running, sorted_segments
from rmqspec.traces.checks_common import DLQ_PREFIX, SCHEDULE_TOPIC

__all__ = ["dlq_delayed", "schedule_duplicated"]


def _upto(values: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Per row, the sum of ``values`` over its segment's rows up to and including it."""
    total = np.cumsum(values)
    ids = np.cumsum(new) - 1
    return total - (total - values)[np.flatnonzero(new)][ids]


def _is(table: pa.Table, column: str, value: str) -> np.ndarray:
    return pc.fill_null(pc.equal(table[column], value), False).to_numpy(zero_copy_only=False)


def dlq_delayed(table: pa.Table, params: AuditParams) -> list[dict[str, Any]]:
    """DLQ_DELAYED: a ``%DLQ%`` store answering an earlier DLQ send-back of its (group, msg_key)
    (its stores so far do not outnumber the send-backs before it) at least the shortest delay
    after the latest of them."""
    back = event_in(table, "send_back") & _is(table, "status", "DLQ") & not_null(table, "group", "msg_key")
    dlq = (
        event_in(table, "store")
        & pc.fill_null(pc.starts_with(table["topic"], DLQ_PREFIX), False).to_numpy(zero_copy_only=False)
        & not_null(table, "msg_key")
    )
    if not back.any() or not dlq.any():
        return []
    group = pc.if_else(pa.array(back), table["group"], pc.utf8_slice_codeunits(table["topic"], len(DLQ_PREFIX)))
    t, new = sorted_segments(table.append_column("grp", group), back | dlq, ("trace", "grp", "msg_key"))
    n = t.num_rows
    is_back = event_in(t, "send_back")
    backs_before = _upto(is_back.astype(np.int64), new) - is_back
    stores = _upto((~is_back).astype(np.int64), new)
    latest = running(np.where(is_back, np.arange(n), n), new, largest=True)
    ts, seq = ints(t["ts"], 0), ints(t["seq"], 0)
    b = np.minimum(latest, n - 1)
    gap = ts - ts[b]
    bad = ~is_back & (latest < n) & (stores <= backs_before) & (gap >= params.shortest_delay_ms)
    return [
        finding(
            "violation",
            Code.DLQ_DELAYED.value,
            [seq[b[i]], seq[i]],
            t["trace"][i].as_py(),
            f"DLQ copy stored {int(gap[i])} ms after its send-back",
            group=t["group"][int(b[i])].as_py(),
            topic=t["topic"][int(b[i])].as_py(),
            msg_key=t["msg_key"][i].as_py(),
        )
        for i in np.flatnonzero(bad).tolist()
    ]


def schedule_duplicated(table: pa.Table) -> list[dict[str, Any]]:
    """SCHEDULE_DUPLICATED: per (msg_key, reconsume_times or 0), a ``schedule_fire`` that makes the
    fires outnumber the SCHEDULE_TOPIC_XXXX stores so far, with no crash since the first fire."""
    fire = event_in(table, "schedule_fire")
    sched = event_in(table, "store") & _is(table, "topic", SCHEDULE_TOPIC)
    keep = (fire | sched) & not_null(table, "msg_key")
    if not (fire & keep).any():
        return []
    rt = pc.fill_null(table["reconsume_times"], 0)
    t, new = sorted_segments(table.append_column("rt", rt), keep, ("trace", "msg_key", "rt"))
    n = t.num_rows
    is_fire = event_in(t, "schedule_fire")
    fired = _upto(is_fire.astype(np.int64), new)
    scheduled = _upto((~is_fire).astype(np.int64), new)
    first = running(np.where(is_fire, np.arange(n), n), new, largest=False)
    first = np.where(is_fire & (first == n), np.arange(n), first)  # a segment's first fire is its own first
    crashes, seq = ints(t["crashes"], 0), ints(t["seq"], 0)
    f = np.minimum(first, n - 1)
    bad = is_fire & (fired > scheduled) & (crashes[f] == crashes)
    out = []
    for i in np.flatnonzero(bad).tolist():
        key = t["msg_key"][i].as_py()
        reason = (
            f"fire {int(fired[i])} of {key} (reconsume_times {t['rt'][i].as_py()}), "
            f"{int(scheduled[i])} scheduled, no crash since the first fire"
        )
        out.append(
            finding(
                "violation",
                Code.SCHEDULE_DUPLICATED.value,
                [seq[f[i]], seq[i]],
                t["trace"][i].as_py(),
                reason,
                topic=t["topic"][i].as_py(),
                msg_key=key,
            )
        )
    return out
