"""The reference trace checker: SPEC §8.1's rules in plain Python for small traces.

Theory of operation
-------------------
``check(rows)`` validates the rows (a row lacking ``seq``/``ts``/``event``,
with an unknown event or a wrongly typed column is rejected and reported by
position, never raised), splits them by the optional ``trace_id`` column,
sorts each trace by ``seq`` and runs every detector of ``DETECTORS`` over it, then withholds
what the trace's rows lacking fields leave unjudged (``traces.unjudged``: a finding the input
cannot prove is never reported; removing information never adds one) and counts those rows
in the report's ``not_judged``.
Detectors are named after the anomaly they find, defined in their
docstrings (``traces.checks_*``), and return ``Finding`` values; the
``CheckReport`` is data, rendered separately by ``render_text`` and
``report_json``. The Spark audit (``rmqspec.spark``) implements the same
rules at scale and must agree with this module finding for finding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from rmqspec.model.events import FIELDS
from rmqspec.properties.codes import (
    NEEDS_DRAIN,
    OBSERVATION_CODES,
    VIOLATION_CODES,
    AuditParams,
)
from rmqspec.traces import (
    checks_delivery,
    checks_filter,
    checks_ha,
    checks_lifecycle,
    checks_lock,
    checks_order,
    checks_retry,
    checks_route,
    checks_table,
    checks_timer,
    checks_txn,
)
from rmqspec.traces.checks_common import NEEDS, NOT_JUDGED_WHY, STATUS_VOCABULARY, Finding, Trace, unknown_statuses
from rmqspec.traces.errors import Rejected
from rmqspec.traces.unjudged import Withheld, assess, withhold
from rmqspec.traces.validate import check_row, readable_seq

__all__ = [
    "DETECTORS",
    "CheckReport",
    "Finding",
    "Rejected",
    "check",
    "check_trace",
    "judged_trace",
    "not_judged_reasons",
    "render_text",
    "report_json",
    "validate",
]

Detector = Callable[[Trace], Iterator[Finding]]

# Every detector once; codes each may report are in its docstring.
DETECTORS: tuple[Detector, ...] = (
    checks_order.detect_queue_gap,
    checks_order.detect_key_reordered,
    checks_order.detect_key_split,
    checks_delivery.detect_lost,
    checks_delivery.detect_lost_per_client,
    checks_delivery.detect_unexpected,
    checks_delivery.detect_offset_overrun,
    checks_delivery.detect_duplicated,
    checks_delivery.detect_recovered,
    checks_retry.detect_retry_early,
    checks_retry.detect_clean_early,
    checks_retry.detect_dlq_early,
    checks_retry.detect_dlq_missed,
    checks_retry.detect_delay_early,
    checks_lock.detect_lock_overlap,
    checks_lock.detect_orderly_without_lock,
    checks_lock.detect_orderly_concurrent,
    checks_lock.detect_orderly_loop_overrun,
    checks_txn.detect_txn_visibility,
    checks_txn.detect_txn_double_resolved,
    checks_txn.detect_txn_checks,
    checks_txn.detect_txn_unresolved,
    checks_lifecycle.detect_txn_check_after_resolved,
    checks_lifecycle.detect_txn_discard_early,
    checks_lifecycle.detect_dlq_delayed,
    checks_lifecycle.detect_schedule_duplicated,
    checks_lifecycle.detect_offset_lost,
    checks_filter.detect_subscription_inconsistent,
    checks_filter.detect_filter_mismatch,
    checks_filter.detect_filter_skipped,
    checks_table.detect_table_lifecycles,
    checks_timer.detect_timer_early,
    checks_timer.detect_timer_duplicated,
    checks_timer.detect_timer_unfired,
    checks_route.detect_retry_same_broker,
    checks_route.detect_fault_window,
    checks_ha.detect_ha_pair,
)


@attrs.frozen
class CheckReport:
    violations: tuple[Finding, ...]
    observations: tuple[Finding, ...]
    events_read: int
    rows_rejected: int
    not_judged: Mapping[str, str]
    rejected: tuple[Rejected, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.violations

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """(violations, observations): every code mapped to its count, zeros included."""
        v = dict.fromkeys(VIOLATION_CODES, 0)
        o = dict.fromkeys(OBSERVATION_CODES, 0)
        for f in self.violations:
            v[f.code] += 1
        for f in self.observations:
            o[f.code] += 1
        return v, o


def row_problem(row: Any) -> str | None:
    """Why ``row`` cannot be audited, or None: ``traces.validate.check_row``'s rules."""
    if not isinstance(row, Mapping):
        return f"not an object but {type(row).__name__}"
    return check_row(dict(row))


def validate(rows: Iterable[Any]) -> tuple[list[dict[str, Any]], list[Rejected]]:
    """(usable rows with every column present, rejected rows by position ``row N``)."""
    good: list[dict[str, Any]] = []
    bad: list[Rejected] = []
    for index, row in enumerate(rows):
        problem = row_problem(row)
        if problem is not None:
            seq = readable_seq(dict(row)) if isinstance(row, Mapping) else None
            bad.append(Rejected(f"row {index}", seq, problem))
            continue
        full = dict.fromkeys(("seq", "ts", "event", *FIELDS))
        full.update(row)
        good.append(full)
    return good, bad


def not_judged_reasons(
    has_drain: bool,
    lacking: Mapping[tuple[str, str], int],
    unknown: Mapping[tuple[str, str], int] | None = None,
) -> dict[str, str]:
    """code -> why it was (partly) not judged, from the drain, the rows lacking fields
    and the rows with a status the code's rules do not know.

    ``lacking[(code, event)]`` counts the rows of ``event`` whose missing fields leave part of
    ``code`` unjudged (``traces.unjudged``; ``NEEDS[code]`` names the fields it reads there), and
    ``lacking[(code, why)]`` the rows a rule leaves unjudged for a reason of ``NOT_JUDGED_WHY``
    (timer messages not due at the drain: LOST);
    ``unknown[(event, status)]`` counts the rows of ``event`` whose status is outside
    ``STATUS_VOCABULARY[event]``. The Spark audit uses the same wording.
    """
    out: dict[str, str] = {}
    unknown = unknown or {}
    for code in VIOLATION_CODES:
        parts = []
        if code in NEEDS_DRAIN and not has_drain:
            parts.append("no drain event in the trace")
        for event, fields in NEEDS.get(code, ()):
            n = lacking.get((code, event), 0)
            if n:
                parts.append(f"{n} {event} row(s) lack one of {','.join(fields)}")
        for why, text in NOT_JUDGED_WHY.items():
            if lacking.get((code, why), 0):
                parts.append(f"{lacking[(code, why)]} {text}")
        for (event, status), n in sorted(unknown.items()):
            if n and code in STATUS_VOCABULARY[event][1]:
                parts.append(f"{n} {event} row(s) with unknown status {status!r}")
        if parts:
            out[code] = "; ".join(parts)
    return out


def check_trace(
    rows: list[dict[str, Any]],
    params: AuditParams,
    subscriptions: Mapping[str, Sequence[str]] | None = None,
) -> tuple[Trace, list[Finding]]:
    """(the built trace, every detector's findings) for one trace's valid rows; sorts
    ``rows`` by ``seq`` in place (stable). The Spark audit's reference plan calls this too."""
    rows.sort(key=lambda r: r["seq"])
    trace = Trace.build(rows, params, subscriptions)
    return trace, [finding for detector in DETECTORS for finding in detector(trace)]


def judged_trace(
    rows: list[dict[str, Any]],
    params: AuditParams,
    subscriptions: Mapping[str, Sequence[str]] | None = None,
) -> tuple[Trace, list[Finding], dict[tuple[str, str], int], Withheld]:
    """``check_trace``'s trace and findings less what the rows lacking fields leave unjudged,
    (code, event) -> the rows not judged, and what was withheld (``traces.unjudged.assess``): what
    ``check`` and the Spark audit's reference plan report. ``check_trace`` alone gives the
    detectors' raw findings (the Spark judges' differential tests compare those)."""
    trace, findings = check_trace(rows, params, subscriptions)
    withheld, lacking = assess(trace.rows)
    return trace, list(withhold(findings, withheld)), lacking, withheld


def check(
    rows: Iterable[Any],
    params: AuditParams | None = None,
    *,
    subscriptions: Mapping[str, Sequence[str]] | None = None,
) -> CheckReport:
    """Audit ``rows`` (dicts with SPEC §8's columns) against every §8.1 rule."""
    params = params or AuditParams()
    raw = list(rows)
    good, rejected = validate(raw)
    traces: dict[Any, list[dict[str, Any]]] = {}
    for row in good:
        traces.setdefault(row.get("trace_id"), []).append(row)
    violations: list[Finding] = []
    observations: list[Finding] = []
    has_drain = True
    lacking: dict[tuple[str, str], int] = {}
    for trace_id, trace_rows in traces.items():
        trace, findings, lacks, _ = judged_trace(trace_rows, params, subscriptions)
        has_drain = has_drain and trace.drain_seq is not None
        for key, n in lacks.items():
            lacking[key] = lacking.get(key, 0) + n
        for finding in findings:
            if trace_id is not None:
                finding = attrs.evolve(finding, trace_id=str(trace_id))
            if finding.code in VIOLATION_CODES:
                violations.append(finding)
            else:
                observations.append(finding)
    if not traces:
        has_drain = False
    order = lambda f: (f.trace_id or "", f.seqs[-1], f.code, f.seqs)  # noqa: E731
    return CheckReport(
        violations=tuple(sorted(violations, key=order)),
        observations=tuple(sorted(observations, key=order)),
        events_read=len(raw),
        rows_rejected=len(rejected),
        not_judged=not_judged_reasons(has_drain, lacking, unknown_statuses(good)),
        rejected=tuple(rejected),
    )


def report_json(report: CheckReport) -> dict[str, Any]:
    """The report as JSON-able data (same keys as the Spark audit's summary, plus rows)."""
    v, o = report.counts()
    return {
        "violations": v,
        "observations": o,
        "events_read": report.events_read,
        "rows_rejected": report.rows_rejected,
        "not_judged": dict(report.not_judged),
        "violation_rows": [f.as_dict() for f in report.violations],
        "observation_rows": [f.as_dict() for f in report.observations],
        "rejected": [attrs.asdict(r) for r in report.rejected],
    }


def render_text(report: CheckReport, *, limit: int = 20) -> str:
    """A human summary: a count per code, then up to ``limit`` findings."""
    v, o = report.counts()
    lines = [f"events read: {report.events_read}   rows rejected: {report.rows_rejected}"]
    lines.append(f"{'code':<28}{'kind':<13}{'count':>8}")
    for code, n in v.items():
        note = "  (not judged)" if code in report.not_judged and not n else ""
        lines.append(f"{code:<28}{'violation':<13}{n:>8}{note}")
    for code, n in o.items():
        lines.append(f"{code:<28}{'observation':<13}{n:>8}")
    for code, why in report.not_judged.items():
        lines.append(f"not judged {code}: {why}")
    for f in report.violations[:limit]:
        lines.append(f"{f.code} seqs={list(f.seqs)}: {f.reason}")
    if len(report.violations) > limit:
        lines.append(f"... and {len(report.violations) - limit} more violations")
    return "\n".join(lines)
