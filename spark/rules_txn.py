"""The transaction family per txn_id partition (``mapInArrow``): TXN_DOUBLE_RESOLVED,
DUPLICATE_COMMIT, TXN_CHECK_EARLY, TXN_CHECK_EXCEEDED, TXN_UNRESOLVED,
TXN_CHECK_AFTER_RESOLVED and TXN_DISCARD_EARLY.

One shuffle by (trace, txn_id) of the ``txn_half``, ``txn_end``,
``txn_check`` and ``txn_discard`` rows with a txn_id. They are a few percent
of a trace and every rule reads them per transaction, so each partition runs
the checker's own detectors (``traces/checks_txn.py``,
``traces/checks_lifecycle.py``) on its rows, trace by trace: the same code
as the reference checker, agreeing by construction (the differential tests
still compare them).

What the detectors would read from rows outside the family comes from the
driver: the trace's drain (a column); its ``expire`` rows up to the drain (collected, a handful:
TXN_UNRESOLVED does not judge a half they may have taken, ``checks_retention.kept`` over the
partition's ``txn_half`` / ``txn_check`` rows); the msg_keys crashes list as at risk
(collected, few); only when some crash is a power loss, the halves the
check service may skip (``rules._skipped_halves``) and the ops it may never
read (``rules_lifecycle.unseen_ops``), collected once (a few rows); and only
with op batching (``AuditParams.op_batch_ms`` > 0, RocketMQ 5.1.0+), the seq,
ts and event of every crash and recover row, collected (a restart within
3 × op_batch_ms of an END, or a clean one — a ``recover`` with no ``crash``
before it — as the first after it, loses its op: ``checks_lifecycle.op_written_times``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rmqspec.properties.codes import VIOLATION_CODES, AuditParams
from rmqspec.spark.arrow_judge import Columns, finding, judge, keyed, shipped
from rmqspec.spark.rules import EV, FINDING_SCHEMA
from rmqspec.traces.checks_common import Trace
from rmqspec.traces.checks_lifecycle import Restart, detect_txn_check_after_resolved, detect_txn_discard_early
from rmqspec.traces.checks_txn import detect_txn_checks, detect_txn_double_resolved, detect_txn_unresolved

__all__ = ["TXN_EVENTS", "txn_findings"]

TXN_EVENTS = ("txn_half", "txn_end", "txn_check", "txn_discard")
_COLUMNS = ("trace", "seq", "ts", "event", "status", "txn_id", "msg_key", "queue_offset", "check_times", "drain",
            "commitlog_offset")


def txn_findings(
    df: DataFrame,
    params: AuditParams,
    at_risk: DataFrame | None,
    skipped: DataFrame | None,
    unseen: DataFrame | None,
    constants: Mapping[str, Any] | None = None,
    downs: DataFrame | None = None,
    expires: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> DataFrame:
    """The transaction family's findings (``FINDING_COLUMNS``) of the validated rows ``df``.
    ``constants``: columns the driver knows to hold one value (``arrow_judge.shipped``).
    ``skipped``: (s_trace, s_txn) of skippable halves; ``unseen``: (u_trace, u_seq) of unseen ops
    (both None when no crash is a power loss: then there are none). ``downs``: (trace, seq, ts, event)
    of the crash and recover rows, which op batching reads (``params.op_batch_ms`` > 0; None otherwise).
    ``expires``: trace -> its ``expire`` rows up to its drain (``rules_retention.expires_of``; TXN_UNRESOLVED
    does not judge a half they may have taken; None: no trace has one)."""
    risky: dict[str, set[str]] = {}
    for row in at_risk.collect() if at_risk is not None else ():
        risky.setdefault(row["trace"], set()).add(row["msg_key"])
    skips: dict[str, set[str]] = {}
    for row in skipped.collect() if skipped is not None else ():
        skips.setdefault(row["s_trace"], set()).add(row["s_txn"])
    hidden: dict[str, set[int]] = {}
    for row in unseen.collect() if unseen is not None else ():
        hidden.setdefault(row["u_trace"], set()).add(row["u_seq"])
    restarts: dict[str, list[Restart]] = {}
    for row in downs.collect() if downs is not None else ():
        restarts.setdefault(row["trace"], []).append((row["seq"], row["ts"], row["event"]))
    rows, left_out = shipped(
        df.filter(EV().isin(*TXN_EVENTS) & F.col("txn_id").isNotNull()), [F.col(c) for c in _COLUMNS], constants or {}
    )
    rows = keyed(rows, "trace", "txn_id")
    rules = _Judge(params, risky, skips, hidden, restarts if downs is not None else None, expires)
    return rows.mapInArrow(judge(rules, left_out), FINDING_SCHEMA)


class _Judge:
    """One partition's transaction rows in (a table), the detectors' findings out."""

    def __init__(
        self,
        params: AuditParams,
        risky: Mapping[str, set[str]],
        skipped: Mapping[str, set[str]],
        unseen: Mapping[str, set[int]],
        downs: Mapping[str, Sequence[Restart]] | None = None,
        expires: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ):
        """``downs``: per trace, its crash and recover rows as (seq, ts, event) (op batching reads
        them: ``checks_lifecycle.restarts_of``); None: there is no batching, or they are unknown (then,
        with batching, every op may be lost and TXN_CHECK_AFTER_RESOLVED finds nothing, never more).
        ``expires``: per trace, its ``expire`` rows up to its drain (absent: none)."""
        self.params = params
        self.risky = dict(risky)
        self.skipped = dict(skipped)
        self.unseen = dict(unseen)
        self.downs = None if downs is None else {t: list(rs) for t, rs in downs.items()}
        self.expires = {t: list(rs) for t, rs in (expires or {}).items()}

    def __call__(self, table: pa.Table) -> list[dict[str, Any]]:
        table = table.filter(pa.array(rows_to_judge(Columns(table), self.params)))
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for row in table.to_pylist():
            if row["check_times"] is not None:  # the detectors read detail.check_times
                row["detail"] = {"check_times": row["check_times"]}
            by_trace.setdefault(row["trace"], []).append(row)
        out: list[dict[str, Any]] = []
        for trace_id, rows in by_trace.items():
            rows.sort(key=lambda r: r["seq"])
            trace = Trace(
                rows=rows,
                epochs=[0] * len(rows),
                drain_seq=rows[0]["drain"],
                consumers={},
                params=self.params,
                at_risk=frozenset(self.risky.get(trace_id, ())),
            )
            found = [
                *detect_txn_double_resolved(trace),
                *detect_txn_checks(trace),
                *detect_txn_unresolved(trace, self.skipped.get(trace_id, set()), self.expires.get(trace_id, [])),
                *detect_txn_check_after_resolved(trace, self.unseen.get(trace_id, set()), self._downs(trace_id)),
                *detect_txn_discard_early(trace),
            ]
            for f in found:
                kind = "violation" if f.code in VIOLATION_CODES else "observation"
                out.append(finding(kind, f.code, list(f.seqs), trace_id, f.reason, **dict(f.keys)))
        return out

    def _downs(self, trace_id: str) -> list[Restart]:
        if not self.params.op_batch_ms:
            return []
        if self.downs is None:
            return [None]  # unknown restarts: every op may be lost
        return self.downs.get(trace_id, [])


def rows_to_judge(cols: Columns, params: AuditParams) -> np.ndarray:
    """Bool per row: its transaction (trace, txn_id) is one the detectors may find something in.

    Every detector above judges a transaction by its own rows alone (given the trace's drain,
    at-risk keys, skipped halves and unseen ops), so the rows of a transaction that can give no
    finding need not reach them. Most transactions are a half and its COMMIT or ROLLBACK (94 % of
    the transaction rows of a generated 10 M-event trace), and rebuilding rows as dicts for the
    detectors was most of this judge's time. A transaction is kept when any detector's
    precondition holds:

    - TXN_DOUBLE_RESOLVED, DUPLICATE_COMMIT: two resolutions (COMMIT / ROLLBACK ``txn_end`` or
      ``txn_discard``);
    - TXN_DISCARD_EARLY: a ``txn_discard``;
    - TXN_UNRESOLVED: a drain, a half, and no resolution before the drain;
    - TXN_CHECK_EARLY, TXN_CHECK_EXCEEDED: a half and a check, and either more checks than
      ``transactionCheckMax`` (the detector counts at most as many) or a check earlier than the
      latest half's ts + ``transactionTimeOut`` (the detector's due time is the first half's);
    - TXN_CHECK_AFTER_RESOLVED: a check after an op (a COMMIT / ROLLBACK ``txn_end`` with a
      queue_offset; with op batching the op must also be written before the check: narrower);
    - any row without ts (the detectors then decide).

    Each condition is implied by its rule's, so nothing a detector would report is dropped
    (``tests/spark/test_rules_txn.py`` holds the judge to the checker)."""
    trace, txn = cols.codes("trace"), cols.codes("txn_id")  # a partition the judge gets has rows
    _, group = np.unique(trace * (int(txn.max()) + 2) + txn + 1, return_inverse=True)
    group = group.reshape(-1)
    m = int(group.max()) + 1

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(group[mask], minlength=m)

    def extreme(mask: np.ndarray, values: np.ndarray, *, largest: bool) -> np.ndarray:
        out = np.full(m, np.iinfo(np.int64).min if largest else np.iinfo(np.int64).max, dtype=np.int64)
        (np.maximum if largest else np.minimum).at(out, group[mask], values[mask])
        return out

    half, check, discard = (
        cols.is_("event", "txn_half"),
        cols.is_("event", "txn_check"),
        cols.is_("event", "txn_discard"),
    )
    op = cols.is_("event", "txn_end") & cols.is_("status", "COMMIT", "ROLLBACK")
    resolution = op | discard
    seq, ts, no_ts = cols.ints("seq"), cols.ints("ts"), cols.null("ts")
    drain_null, drain = cols.null("drain"), cols.ints("drain")
    halves, checks = count(half) > 0, count(check)
    unresolved = halves & (count(half & ~drain_null) > 0) & (count(resolution & ~drain_null & (seq < drain)) == 0)
    due = extreme(half, ts, largest=True)[group] + params.transaction_timeout_ms
    early = count(check & (ts < due)) > 0
    after_op = extreme(op & ~cols.null("queue_offset"), seq, largest=False) < extreme(check, seq, largest=True)
    keep = (
        (count(resolution) >= 2)
        | (count(discard) > 0)
        | unresolved
        | (halves & ((checks > params.transaction_check_max) | early))
        | after_op
        | (count(no_ts) > 0)
    )
    return keep[group]
