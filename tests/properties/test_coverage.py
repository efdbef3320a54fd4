"""Coverage (issue 14): what a run reached, and that the default budget reaches every row of every
lifecycle table (model/lifecycle.py)."""

from __future__ import annotations

import pytest

from rmqspec.model.lifecycle import LIFECYCLES
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.properties.codes import AuditParams
from rmqspec.properties.coverage import (
    ALL_TRANSITIONS,
    POP_TRANSITIONS,
    TIMER_TRANSITIONS,
    CoverageReport,
    classify,
    label,
)
from rmqspec.properties.history import History
from rmqspec.properties.runner import budget_settings, check_conformance
from tests.untraced import budget_run


def test_every_row_of_every_table_is_listed_once() -> None:
    rows = [label(lc, t) for lc in LIFECYCLES for t in lc.transitions]
    assert list(ALL_TRANSITIONS) == rows and len(set(rows)) == len(rows) == 39
    assert len(TIMER_TRANSITIONS) == 9 and all(t.startswith("timer: ") for t in TIMER_TRANSITIONS)
    assert len(POP_TRANSITIONS) == 11 and all(t.startswith(("pop: ", "pop_order: ")) for t in POP_TRANSITIONS)


def test_classify_names_the_rows_the_observations_took() -> None:
    h = History(params=AuditParams())
    for event, ts, fields in [
        ("deliver", 0, {"topic": "T", "group": "G", "msg_key": "K", "detail": {"client": True}}),
        ("send_back", 1, {"group": "G", "msg_key": "K", "status": "RETRY", "detail": {"code": "SUCCESS"}}),
        ("send_back", 1, {"group": "G", "msg_key": "K", "detail": {"code": "LOST"}}),
        ("schedule_fire", 2, {"topic": "%RETRY%G", "msg_key": "K", "reconsume_times": 1}),
        ("lock", 3, {"group": "OG", "topic": "T", "queue_id": 0, "client_id": "c1", "status": "GRANTED"}),
        ("lock", 4, {"group": "OG", "topic": "T", "queue_id": 0, "client_id": "c2", "status": "DENIED"}),
        ("unlock", 5, {"group": "OG", "topic": "T", "queue_id": 0, "client_id": "c2"}),
        ("unlock", 6, {"group": "OG", "topic": "T", "queue_id": 0, "client_id": "c1"}),
        ("unlock", 7, {"group": "OG", "topic": "T", "queue_id": 0, "client_id": "c1"}),
        ("txn_half", 0, {"msg_key": "X"}),
        ("txn_half", 57_000, {"msg_key": "Y"}),
        ("txn_check", 60_000, {"msg_key": "X"}),
        ("txn_end", 60_001, {"msg_key": "X", "status": "COMMIT"}),
        ("txn_end", 60_002, {"msg_key": "X", "status": "COMMIT"}),
    ]:
        h.emit(event, ts, **fields)
    got = classify(h)
    assert got == {
        "message: STORED --deliver--> DELIVERED": 1,
        "message: DELIVERED --send_back[retry]--> SCHEDULED": 1,
        "message: DELIVERED --send_back_failed--> DELIVERED": 1,
        "message: SCHEDULED --fire[due]--> STORED": 1,
        "lock: FREE --lock--> HELD": 1,
        "lock: HELD --lock[deny]--> HELD": 1,
        "lock: HELD --unlock[not_holder]--> HELD": 1,
        "lock: HELD --unlock[holder]--> FREE": 1,
        "lock: FREE --unlock--> FREE": 1,
        "transaction: PENDING --check[check]--> PENDING": 1,
        "transaction: PENDING --check[young]--> PENDING": 1,
        "transaction: PENDING --commit--> COMMITTED": 1,
        "transaction: COMMITTED --commit--> COMMITTED": 1,
    }


def test_report_lists_zeros_and_splits_rules_from_results() -> None:
    report = CoverageReport.of({ALL_TRANSITIONS[0]: 3}, {"produce": 2, "pull:FOUND": 5}, {"produce"})
    assert report.rules == (("produce", 2),) and report.results == (("pull:FOUND", 5),)
    assert len(report.missing) == len(ALL_TRANSITIONS) - 1
    text = report.render()
    assert text.startswith(f"coverage: 1/{len(ALL_TRANSITIONS)} lifecycle transitions reached") and "(never)" in text
    data = report.as_dict()
    assert data["reached"] == 1 and data["total"] == 39 and data["rules"] == {"produce": 2}


def test_classify_names_the_timer_rows() -> None:
    """5.x timer requests (``detail.timer``): the put row the observation shows, the wheel's fires, crashes."""
    h = History(params=AuditParams())
    timer = {"timer": {"requested": 5001, "parsed": True, "precision": 1000, "max_delay_ms": 259_200_000}}
    for event, ts, fields in [
        ("send", 1000, {"topic": "T", "msg_key": "W", "status": "SEND_OK", "deliver_ts": 6000, "detail": timer}),
        ("send", 1000, {"topic": "T", "msg_key": "L", "status": "SEND_OK", "delay_level": 1, "detail": timer}),
        ("send", 1000, {"topic": "T", "msg_key": "N", "status": "SEND_OK", "detail": timer}),
        ("send", 1000, {"topic": "T", "msg_key": "I", "status": "FAILED",
                        "detail": {**timer, "error": "MESSAGE_ILLEGAL"}}),
        ("send", 1000, {"topic": "T", "msg_key": "P", "status": "SEND_OK"}),  # no timer request
        ("send", 1000, {"topic": "T", "msg_key": "X", "status": "SEND_OK", "deliver_ts": 9000, "detail": timer}),
        ("timer_fire", 6000, {"topic": "T", "msg_key": "W", "deliver_ts": 6000}),
        ("crash", 6100, {"status": "kill"}),  # W fired (REFIRABLE), X waiting
        ("timer_fire", 6200, {"topic": "T", "msg_key": "W", "deliver_ts": 6000}),  # at-least-once
        ("crash", 6300, {"status": "kill"}),  # W fired again, X still waiting
    ]:
        h.emit(event, ts, **fields)
    got = classify(h)
    assert got == {
        "timer: SENT --put[wheel]--> WHEEL": 2,
        "timer: SENT --put[level]--> SCHEDULED": 1,
        "timer: SENT --put[at_once]--> STORED": 1,
        "timer: SENT --put[illegal]--> REFUSED": 1,
        "timer: WHEEL --fire[due]--> FIRED": 1,
        "timer: WHEEL --crash--> WHEEL": 2,
        "timer: FIRED --crash--> REFIRABLE": 2,
        "timer: REFIRABLE --fire[due]--> FIRED": 1,
    }


def test_a_profile_without_the_wheel_lists_the_timer_rows_as_not_applicable() -> None:
    report = CoverageReport.of({t: 1 for t in ALL_TRANSITIONS if t not in TIMER_TRANSITIONS}, {}, (), timer=False)
    assert report.missing == () and report.not_applicable == TIMER_TRANSITIONS
    assert "(9 not applicable to the profile)" in report.render() and "(n/a)" in report.render()
    assert report.as_dict()["total"] == 30 and report.as_dict()["reached"] == 30
    assert CoverageReport.of({}, {}, ()).missing == ALL_TRANSITIONS  # with the wheel they are missing


def test_where_nobody_pops_the_pop_rows_are_not_applicable() -> None:
    report = CoverageReport.of({t: 1 for t in ALL_TRANSITIONS if t not in POP_TRANSITIONS}, {}, (), pop=False)
    assert report.missing == () and report.not_applicable == POP_TRANSITIONS
    assert "(11 not applicable to the profile)" in report.render()


def test_the_pop_rows_are_the_ones_the_pop_replay_takes() -> None:
    """classify counts the POP / POP_ORDER rows the invariants' replay itself stepped: a pop, a change, a
    revive, a late ack, a pop of the revived copy, an ack and a second one; an orderly batch of two acked."""
    h = History(params=AuditParams())

    def handle(pop_ts: int, inv: int, off: int, rq: int = 0, flag: int = 0) -> str:
        return f"0 {pop_ts} {inv} {rq} {flag} broker-a 0 {off}"

    concurrent = {"group": "G", "topic": "T", "queue_id": 0, "queue_offset": 0, "msg_key": "K"}
    h.emit("pop", 1000, **concurrent, status="CONCURRENT", reconsume_times=0, deliver_ts=2000,
           detail={"handle": handle(1000, 1000, 0)})
    h.emit("change_invisible", 1100, group="G", topic="T", deliver_ts=3100,
           detail={"handle": handle(1000, 1000, 0), "new_handle": handle(1100, 2000, 0)})
    h.emit("revive", 3200, group="G", topic="%RETRY%G_T", msg_key="K", reconsume_times=1)
    h.emit("ack", 3300, group="G", topic="T", status="SUCCESS", detail={"handle": handle(1100, 2000, 0)})
    h.emit("pop", 3400, **{**concurrent, "topic": "%RETRY%G_T"}, status="CONCURRENT", reconsume_times=1,
           deliver_ts=6400, detail={"handle": handle(3400, 3000, 0, flag=1)})
    for ts in (3500, 3600):
        h.emit("ack", ts, group="G", topic="%RETRY%G_T", status="SUCCESS",
               detail={"handle": handle(3400, 3000, 0, flag=1)})
    for off in (0, 1):
        h.emit("pop", 4000, group="G", topic="T", queue_id=1, queue_offset=off, msg_key=f"O{off}", status="ORDERLY",
               deliver_ts=7000, detail={"handle": handle(4000, 3000, off, rq=999), "attempt_id": "A1"})
    for off in (0, 1):
        h.emit("ack", 4100, group="G", topic="T", queue_id=1, queue_offset=off, status="SUCCESS",
               detail={"handle": handle(4000, 3000, off, rq=999)})
    got = {k: v for k, v in classify(h).items() if k in POP_TRANSITIONS}
    assert got == {
        "pop: READY --pop--> POPPED": 2,
        "pop: POPPED --change[current]--> POPPED": 1,
        "pop: POPPED --revive[expired]--> READY": 1,
        "pop: READY --ack--> READY": 1,
        "pop: POPPED --ack[current]--> ACKED": 1,
        "pop: ACKED --ack--> ACKED": 1,
        "pop_order: IDLE --pop--> INFLIGHT": 1,
        "pop_order: INFLIGHT --commit[part]--> INFLIGHT": 1,
        "pop_order: INFLIGHT --commit[whole]--> IDLE": 1,
    }


@budget_run
@pytest.mark.xdist_group("default-run")  # the run tests/test_conformance.py judges too
def test_the_default_budget_reaches_every_lifecycle_transition() -> None:
    """``rmqspec conform``'s default budget (ci: 40 × 30) takes every row of every table the profile has
    (4.9: the TIMER table is not applicable)."""
    from tests.default_runs import mmap_default_run

    result = mmap_default_run()
    assert result.passed, result.render()
    report = result.coverage_report
    assert report is not None and report.missing == (), report.render()
    assert report.not_applicable == TIMER_TRANSITIONS + POP_TRANSITIONS


@budget_run
def test_the_default_budget_reaches_every_timer_transition_under_5_2() -> None:
    """Under a 5.x profile the default budget takes every row, the TIMER table's included."""
    result = check_conformance(model_factory, profile="rocketmq-5.2", settings=budget_settings())
    assert result.passed, result.render()
    report = result.coverage_report
    assert report is not None and report.not_applicable == () and report.missing == (), report.render()
