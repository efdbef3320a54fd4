"""The audit reads what retention took (issue 42, ``traces/checks_retention.py``): of a broker deleting
expired files LOST reports only what the files it kept hold and no one consumed; of one deleting young files
LOST reports what it took too, its reason naming the deletion; without fileReservedTime in the input that
deletion is not judged."""

from __future__ import annotations

import attrs

from rmqspec.traces.checker import check
from tests.traces.retention_runs import CONSUMED, PARAMS, SENT, SUBSCRIPTIONS, retention_trace


def _lost(rows, params=PARAMS):
    report = check(rows, params, subscriptions=SUBSCRIPTIONS)
    assert {f.code for f in report.violations} <= {"LOST"}
    return {f.keys["msg_key"]: f.reason for f in report.violations}


def _split(rows):
    """(the unconsumed keys retention took, the unconsumed keys it kept)."""
    low = max(e["commitlog_offset"] for e in rows if e["event"] == "expire" and e["topic"] is None)
    unconsumed = {r["msg_key"]: r["commitlog_offset"] for r in rows if r["event"] == "store"
                  and int(r["msg_key"][1:]) >= CONSUMED}
    taken = {k for k, offset in unconsumed.items() if offset < low}
    assert taken and len(taken) < len(unconsumed) == SENT - CONSUMED
    return taken, set(unconsumed) - taken


def test_lawful_deletions_are_not_lost() -> None:
    rows = retention_trace(broken=False)
    _, kept = _split(rows)
    lost = _lost(rows)
    assert set(lost) == kept
    assert not any("fileReservedTime" in reason for reason in lost.values())


def test_a_deletion_before_file_reserved_time_is_lost_with_its_cause() -> None:
    rows = retention_trace(broken=True)
    taken, kept = _split(rows)
    lost = _lost(rows)
    assert set(lost) == taken | kept
    assert all(("before fileReservedTime allowed" in lost[k]) == (k in taken) for k in lost)


def test_without_file_reserved_time_a_deletion_is_not_judged() -> None:
    rows = retention_trace(broken=True)
    _, kept = _split(rows)
    assert set(_lost(rows, attrs.evolve(PARAMS, expire_reserved_ms=None))) == kept
