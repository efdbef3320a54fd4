"""The retry limits' rules on Arrow tables: RETRY_EARLY (send_back clause), DLQ_EARLY, DLQ_MISSED.

They read the ``send_back`` and ``deliver`` rows, which the message judge's
partition holds (``rules_message.py``: it is keyed by (trace, msg_key), and
these rules key by (trace, group, msg_key), a refinement), so they run there
instead of in a shuffle of their own. Definitions: ``traces.checks_retry``.

The max a row is judged against: a send_back's own ``detail.max``
(``sb_max``) when the trace carries it, else the configured max of its
group; a deliver's, that of the latest earlier send_back of the same
(trace, group, msg_key) whose new copy has the deliver's reconsume_times (the
send-back that made it: the largest max of those not routed to the DLQ when
there are any, since a DLQ send-back makes no retry copy — a segmented running
max of values — else the latest one's, a segmented running max over row
positions; the segments are (trace, group, msg_key, reconsume_times)), else
the configured max of its group.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rmqspec.properties.codes import AuditParams, Code
from rmqspec.spark.arrow_judge import Columns, finding, running

__all__ = ["RETRY_COLUMNS", "retry_judged"]

RETRY_COLUMNS = ("trace", "seq", "ts", "event", "group", "topic", "msg_key", "status", "reconsume_times",
                 "delay_level", "deliver_ts", "sb_max")  # fmt: skip


def retry_judged(cols: Columns, params: AuditParams) -> list[dict[str, Any]]:
    """The findings of the three rules in ``cols`` (every send_back and deliver of a
    (trace, group, msg_key) in it; other rows are left out here)."""
    keep = cols.is_("event", "send_back", "deliver")
    if not keep.any():
        return []
    at, new = cols.sorted(keep, ("trace", "group", "msg_key", "reconsume_times"))
    n = len(at)
    back = cols.is_("event", "send_back")[at]
    by_group = np.array([params.retry_max(g) for g in cols.names("group")] + [params.retry_max(None)], dtype=np.int64)
    configured = by_group[cols.codes("group")[at]]  # code -1 (no group) reads the last entry
    own = np.where(cols.null("sb_max")[at], configured, cols.ints("sb_max")[at])
    retry, dlq = cols.is_("status", "RETRY")[at], cols.is_("status", "DLQ")[at]
    latest = running(np.where(back, np.arange(n), n), new, largest=True)
    made = _running_max(own, back & ~dlq, new)  # the makers' largest max (-1: none)
    limit = np.where(back, own, np.where(made >= 0, made,
                                         np.where(latest < n, own[np.minimum(latest, n - 1)], configured)))
    rt_known, rt = ~cols.null("reconsume_times")[at], cols.ints("reconsume_times")[at]
    level_known, level = ~cols.null("delay_level")[at], cols.ints("delay_level")[at]
    due_known = ~cols.null("deliver_ts")[at]
    wait = cols.ints("deliver_ts")[at] - cols.ints("ts")[at]
    table_ms = np.array(params.delay_levels_ms, dtype=np.int64)
    delay = table_ms[np.clip(level, 1, len(table_ms)) - 1]
    early = back & retry & level_known & due_known & (level >= 1) & (wait < delay)
    dlq_early = back & dlq & rt_known & (level >= 0) & (rt <= limit)
    missed = rt_known & (rt > limit) & ((back & retry) | ~back)
    out = []
    seq = cols.ints("seq")[at]
    for j in np.flatnonzero(early | dlq_early | missed).tolist():
        i = at[j]
        keys = {k: cols.value(k, i) for k in ("group", "topic", "msg_key")}
        trace, s, r, cap = cols.value("trace", i), [seq[j]], int(rt[j]), int(limit[j])
        if early[j]:
            reason = f"retry due after {int(wait[j])} ms, level {int(level[j])} needs {int(delay[j])} ms"
            out.append(finding("violation", Code.RETRY_EARLY.value, s, trace, reason, **keys))
        if dlq_early[j]:
            reason = f"dead-lettered after {r} failures, max is {cap}"
            out.append(finding("violation", Code.DLQ_EARLY.value, s, trace, reason, **keys))
        if missed[j]:
            reason = (
                f"retry copy {r} created, max is {cap}: should go to the DLQ"
                if back[j]
                else f"delivered with reconsume_times {r}, max is {cap}"
            )
            out.append(finding("violation", Code.DLQ_MISSED.value, s, trace, reason, **keys))
    return out


def _running_max(values: np.ndarray, eligible: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Per row, the max of ``values`` (>= 0) over the eligible rows before it in its segment, -1 for
    none: one global ``accumulate``, each segment shifted above every earlier one."""
    n = len(values)
    if not n:
        return values
    v = np.maximum(np.where(eligible, values, -1) + 1, 0)  # 0: not eligible
    span = int(v.max()) + 1
    ids = np.cumsum(new) - 1
    incl = np.maximum.accumulate(v + ids * span) - ids * span - 1
    out = np.empty(n, dtype=np.int64)
    out[0] = -1
    out[1:] = incl[:-1]
    out[new] = -1
    return out
