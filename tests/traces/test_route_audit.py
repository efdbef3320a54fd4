"""A routed producer's rules (issue 43) in the audit: the conformance machine's invariants and the reference
checker agree, and dropping anything never adds a finding.

Hypothesis draws traces of routed producers' acknowledged sends (``route_runs.route_trace``: gaps in the
attempt numbers, attempts lacking a field, rows without an actor, a fault flag or with odd fault tables).
``properties/inv_route.py``'s invariants over the rows as a ``History`` and the checker's detectors
(``traces/checks_route.py``) over the same rows find the same (code, seq, reason): one definition. Dropping
an attempt's field, an attempt, a key of ``detail`` (but the pair of fault tables, whose absence is 4.9.8's
defaults: ``docs/trace-schema.md``), a row's actor or a row never adds a finding.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from route_runs import route_trace

from rmqspec.model.events import TraceEvent
from rmqspec.properties.codes import AuditParams
from rmqspec.properties.history import History
from rmqspec.properties.inv_route import ROUTE_CODES, ROUTE_INVARIANTS
from rmqspec.traces.checker import check

_TABLES = ("latency_max", "not_available_duration")


def _checked(rows: list[dict[str, Any]]) -> set[tuple[str, int, str]]:
    report = check(rows, AuditParams())
    assert not report.rejected
    return {(f.code, f.seqs[-1], f.reason) for f in report.violations if f.code in ROUTE_CODES}


def _invariants(rows: list[dict[str, Any]]) -> set[tuple[str, int, str]]:
    h = History(params=AuditParams())
    for r in rows:
        detail = json.loads(r["detail"]) if isinstance(r["detail"], str) else r["detail"]
        h.events.append(TraceEvent(seq=r["seq"], ts=r["ts"], event="send", actor=r.get("actor"), group=r["group"],
                                   topic=r["topic"], queue_id=r["queue_id"], msg_key=r["msg_key"],
                                   status=r["status"], detail=detail))
        h.step_of.append(r["seq"])
    return {(v.code, v.seq, v.reason) for inv in ROUTE_INVARIANTS for v in inv.check(h)}


@given(route_trace())
def test_the_invariants_and_the_checker_find_the_same(rows):
    assert _invariants(rows) == _checked(rows)


def _dropped(rows: list[dict[str, Any]], data: st.DataObject) -> list[dict[str, Any]]:
    rows = copy.deepcopy(rows)
    at = data.draw(st.integers(0, len(rows) - 1))
    row = rows[at]
    if isinstance(row["detail"], str):
        row["detail"] = json.loads(row["detail"])
    detail = row["detail"]
    what = data.draw(st.sampled_from(("row", "actor", "detail key", "attempt", "attempt field")))
    if what == "row":
        del rows[at]
    elif what == "actor":
        row.pop("actor", None)
    elif what == "detail key":
        keys = [k for k in detail if k not in _TABLES]
        if keys:
            del detail[data.draw(st.sampled_from(keys))]
    elif detail.get("tries"):
        i = data.draw(st.integers(0, len(detail["tries"]) - 1))
        if what == "attempt":
            del detail["tries"][i]
        elif detail["tries"][i]:
            del detail["tries"][i][data.draw(st.sampled_from(sorted(detail["tries"][i])))]
    return rows


@given(route_trace(), st.data())
def test_dropping_never_adds_a_finding(rows, data):
    before = {(c, s) for c, s, _ in _checked(rows)}
    after = {(c, s) for c, s, _ in _checked(_dropped(rows, data))}
    assert after <= before
