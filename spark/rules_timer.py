"""The timer rules on a message partition: TIMER_EARLY, TIMER_DUPLICATED, TIMER_UNFIRED (RocketMQ 5.x).

Theory of operation
-------------------
Every timer rule reads one msg_key's rows (``traces/checks_timer.py``: its timer sends, its stores in
rmq_sys_wheel_timer and elsewhere, its ``timer_fire``s and deliveries), so it runs on the message
judge's partitions (``rules_message.py``: one shuffle by (trace, msg_key)), which carry
``timer_fire`` rows and their ``detail.from_commitlog_offset`` (``inputs.from_commitlog_offset``).
Timer messages are a small part of a trace, so the partition's rows of the keys that have a timer
row (a ``timer_fire``, a store in rmq_sys_wheel_timer, or a send with ``deliver_ts`` and no delay
level) are handed, trace by trace, to the checker's own detectors — the same code as the reference
checker, agreeing by construction (the differential tests still compare them). What they would
read from other rows comes with the partition or from the driver: the crash rows before each row
(the ``crashes`` column, for TIMER_DUPLICATED), the trace's last drain (the ``drain`` column, and its
ts collected by the facts pass: ``job._facts``) and the at-risk keys (for TIMER_UNFIRED, as in the
checker and the ghost invariant ``properties/inv_timer.py``). TIMER_UNFIRED's other exemption, a timer
copy an ``expire`` row may have taken, reads the trace's ``expire`` rows: the message pass applies it
after this judge (``spark/rules_retention.py``), on the copy rows it partitions for LOST.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from rmqspec.properties.codes import AuditParams
from rmqspec.spark.arrow_judge import Columns, finding
from rmqspec.traces.checks_common import TIMER_TOPIC, Trace
from rmqspec.traces.checks_timer import detect_timer_duplicated, detect_timer_early, detect_timer_unfired

__all__ = ["timer_judged"]


def _timer_rows(cols: Columns) -> np.ndarray:
    """Bool per row: a row of a (trace, msg_key) with a timer row."""
    key = cols.codes("msg_key")
    send = cols.is_("event", "send") & ~cols.null("deliver_ts") & (
        cols.null("delay_level") | (cols.ints("delay_level") <= 0))
    timer = (cols.is_("event", "timer_fire") | (cols.is_("event", "store") & cols.is_("topic", TIMER_TOPIC)) | send)
    timer &= key >= 0
    if not timer.any():
        return timer
    ids = cols.codes("trace") * (int(key.max()) + 1) + key
    return (key >= 0) & np.isin(ids, np.unique(ids[timer]))


def timer_judged(
    cols: Columns, params: AuditParams, risky: Mapping[str, set[str]], drain_ts: Mapping[str, int]
) -> list[dict[str, Any]]:
    """The timer rules' findings of one message partition. ``risky``: msg_key -> the traces whose
    crashes list it at risk; ``drain_ts``: trace -> the ts of its last drain (absent: no drain)."""
    wanted = _timer_rows(cols)
    if not wanted.any():
        return []
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for row in cols.table.filter(pa.array(wanted)).to_pylist():
        clo = row.get("from_commitlog_offset")
        row["detail"] = {"from_commitlog_offset": clo} if clo is not None else None
        by_trace.setdefault(row["trace"], []).append(row)
    out: list[dict[str, Any]] = []
    for trace_id, rows in by_trace.items():
        rows.sort(key=lambda r: r["seq"])
        trace = Trace(
            rows=rows,
            epochs=[0] * len(rows),
            drain_seq=rows[0]["drain"],
            consumers={},
            params=params,
            at_risk=frozenset(k for k, traces in risky.items() if trace_id in traces),
            drain_ts=drain_ts.get(trace_id),
        )
        found = [
            *detect_timer_early(trace),
            *detect_timer_duplicated(trace, [r["crashes"] for r in rows]),
            *detect_timer_unfired(trace, ()),  # retention's exemption: ``rules_retention.apply``
        ]
        out.extend(finding("violation", f.code, list(f.seqs), trace_id, f.reason, **dict(f.keys)) for f in found)
    return out
