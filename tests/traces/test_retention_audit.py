"""The audit reads what retention took (issue 42, ``traces/checks_retention.py``): of a broker deleting
expired files LOST reports only what the files it kept hold and no one consumed; of one deleting young files
LOST reports what it took too, its reason naming the deletion; without fileReservedTime in the input that
deletion is not judged. TXN_UNRESOLVED and TIMER_UNFIRED judge a half or a timer copy only where retention
kept it."""

from __future__ import annotations

import attrs

from rmqspec.traces.checker import check
from tests.traces.retention_runs import (
    CONSUMED,
    HALVES_AND_TIMERS,
    PARAMS,
    SENT,
    SUBSCRIPTIONS,
    TIMER_PARAMS,
    retention_trace,
    txn_timer_retention_trace,
)


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


def _halves_and_timers(rows):
    """(halves taken, halves kept, timer keys taken, timer keys kept) by the commitlog's last expire row: a
    half is taken when any of its copies (its txn_half, its re-put by the check) lies below the min."""
    low = max(e["commitlog_offset"] for e in rows if e["event"] == "expire" and e["topic"] is None)
    halves: dict[str, list[int]] = {}
    for r in rows:
        if r["event"] in ("txn_half", "txn_check"):
            halves.setdefault(r["txn_id"], []).append(r["commitlog_offset"])
    timers = {r["msg_key"]: r["commitlog_offset"] for r in rows if r["event"] == "store"
              and r["topic"] == "rmq_sys_wheel_timer"}
    taken_halves = {k for k, offsets in halves.items() if min(offsets) < low}
    taken_timers = {k for k, offset in timers.items() if offset < low}
    assert taken_halves and taken_timers and len(halves) == len(timers) == HALVES_AND_TIMERS // 2
    assert all(len(offsets) == 2 for offsets in halves.values()), "each half re-put once"
    return taken_halves, set(halves) - taken_halves, taken_timers, set(timers) - taken_timers


def _found(rows):
    report = check(rows, TIMER_PARAMS)
    by: dict[str, set[str]] = {}
    for f in report.violations:
        by.setdefault(f.code, set()).add(f.keys["msg_key"])
    for code in ("TXN_UNRESOLVED", "TIMER_UNFIRED"):
        assert "may have taken" in report.not_judged[code]
    return by


def test_halves_and_timer_copies_retention_took_are_not_judged() -> None:
    """The model broker: the halves no producer resolved are TXN_UNRESOLVED where retention kept them
    (every copy at or above the commitlog's min), not where it took one; the timer messages fired before
    their files went (due 71 h after their store, the files 72 h after their last write)."""
    rows = txn_timer_retention_trace(broken=False)
    _, kept_halves, _, _ = _halves_and_timers(rows)
    assert kept_halves and _found(rows) == {"TXN_UNRESOLVED": kept_halves}
    fired = {r["msg_key"] for r in rows if r["event"] == "timer_fire"}
    assert len(fired) == HALVES_AND_TIMERS // 2


def test_a_wheel_that_forgot_its_copies_is_judged_where_retention_kept_them() -> None:
    """The broken ``timer_lost_after_crash``: its wheel forgot every copy at the recovery; TIMER_UNFIRED
    reports the timer messages whose copies retention kept, not those it took (5.x drops a copy whose
    record went: nothing to fire)."""
    rows = txn_timer_retention_trace(broken=True)
    _, kept_halves, _, kept_timers = _halves_and_timers(rows)
    assert not any(r["event"] == "timer_fire" for r in rows)
    assert kept_timers and _found(rows) == {"TXN_UNRESOLVED": kept_halves, "TIMER_UNFIRED": kept_timers}
