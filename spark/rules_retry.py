"""The retry limits' rules on Arrow tables: RETRY_EARLY (send_back clause), DLQ_EARLY, DLQ_MISSED.

They read the ``send_back`` and ``deliver`` rows, which the message judge's
partition holds (``rules_message.py``: it is keyed by (trace, msg_key), and
these rules key by (trace, group, msg_key), a refinement), so they run there
instead of in a shuffle of their own. Definitions: ``traces.checks_retry``.

The max a row is judged against: a send_back's own ``detail.max``
(``sb_max``) when the trace carries it, else the configured max of its
group; a deliver's, that of the latest earlier send_back of the same
(trace, group, msg_key) — a segmented running max over row positions — else
the configured max of its group.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from rmqspec.properties.codes import AuditParams, Code
from rmqspec.spark.arrow_judge import encoded, event_in, finding, ints, running, sorted_segments

__all__ = ["RETRY_COLUMNS", "retry_judged"]

RETRY_COLUMNS = ("trace", "seq", "ts", "event", "group", "topic", "msg_key", "status", "reconsume_times",
                 "delay_level", "deliver_ts", "sb_max")  # fmt: skip


def retry_judged(table: pa.Table, params: AuditParams) -> list[dict[str, Any]]:
    """The findings of the three rules in ``table`` (every send_back and deliver of a
    (trace, group, msg_key) in it; other rows are left out here)."""
    keep = event_in(table, "send_back", "deliver")
    if not keep.any():
        return []
    t, new = sorted_segments(table, keep, ("trace", "group", "msg_key"))
    n = t.num_rows
    event, names = encoded(t["event"])
    back = event == (names.index("send_back") if "send_back" in names else -2)
    group, group_names = encoded(t["group"])
    by_group = np.array([params.retry_max(g) for g in group_names] + [params.retry_max(None)], dtype=np.int64)
    configured = by_group[group]  # code -1 (no group) reads the last entry
    own = np.where(t["sb_max"].is_null().to_numpy(zero_copy_only=False), configured, ints(t["sb_max"], 0))
    latest = running(np.where(back, np.arange(n), n), new, largest=True)
    limit = np.where(back, own, np.where(latest < n, own[np.minimum(latest, n - 1)], configured))
    status, status_names = encoded(t["status"])
    retry = status == (status_names.index("RETRY") if "RETRY" in status_names else -2)
    dlq = status == (status_names.index("DLQ") if "DLQ" in status_names else -2)
    rt_known = ~t["reconsume_times"].is_null().to_numpy(zero_copy_only=False)
    rt = ints(t["reconsume_times"], 0)
    level_known = ~t["delay_level"].is_null().to_numpy(zero_copy_only=False)
    level = ints(t["delay_level"], 0)
    due_known = ~t["deliver_ts"].is_null().to_numpy(zero_copy_only=False)
    wait = ints(t["deliver_ts"], 0) - ints(t["ts"], 0)
    table_ms = np.array(params.delay_levels_ms, dtype=np.int64)
    delay = table_ms[np.clip(level, 1, len(table_ms)) - 1]
    early = back & retry & level_known & due_known & (level >= 1) & (wait < delay)
    dlq_early = back & dlq & rt_known & (level >= 0) & (rt <= limit)
    missed = rt_known & (rt > limit) & ((back & retry) | ~back)
    out = []
    seq = ints(t["seq"], 0)
    for i in np.flatnonzero(early | dlq_early | missed).tolist():
        keys = {k: t[k][i].as_py() for k in ("group", "topic", "msg_key")}
        trace, s, r, cap = t["trace"][i].as_py(), [seq[i]], int(rt[i]), int(limit[i])
        if early[i]:
            reason = f"retry due after {int(wait[i])} ms, level {int(level[i])} needs {int(delay[i])} ms"
            out.append(finding("violation", Code.RETRY_EARLY.value, s, trace, reason, **keys))
        if dlq_early[i]:
            reason = f"dead-lettered after {r} failures, max is {cap}"
            out.append(finding("violation", Code.DLQ_EARLY.value, s, trace, reason, **keys))
        if missed[i]:
            reason = (
                f"retry copy {r} created, max is {cap}: should go to the DLQ"
                if back[i]
                else f"delivered with reconsume_times {r}, max is {cap}"
            )
            out.append(finding("violation", Code.DLQ_MISSED.value, s, trace, reason, **keys))
    return out
