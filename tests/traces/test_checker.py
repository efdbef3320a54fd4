"""The reference checker: the §8.1 cases, the generator's ground truth, reports and bad rows."""

from __future__ import annotations

import json

import pytest

from rmqspec.properties.codes import OBSERVATION_CODES, VIOLATION_CODES, AuditParams
from rmqspec.traces.checker import DETECTORS, check, render_text, report_json
from rmqspec.traces.checker_cases import CASES, PARAMS
from rmqspec.traces.checker_cases_batch import OP_BATCH_CASES, OP_BATCH_PARAMS
from rmqspec.traces.checks_common import Trace
from rmqspec.traces.checks_lifecycle import detect_txn_check_after_resolved
from rmqspec.traces.generator import GenConfig, generate_rows
from rmqspec.traces.notation import parse


def _found(report):
    return sorted((f.code, f.seqs) for f in (*report.violations, *report.observations))


@pytest.mark.parametrize("case", CASES, ids=[c.name[:40] for c in CASES])
def test_hand_written_case(case):
    assert _found(check(parse(case.text), PARAMS)) == sorted(case.expected)


@pytest.mark.parametrize("case", OP_BATCH_CASES, ids=[c.name[:60] for c in OP_BATCH_CASES])
def test_op_batch_case(case):
    """5.1.0+'s batched op messages: the case's findings under op_batch_ms 700, and 4.9's without."""
    assert _found(check(parse(case.text), OP_BATCH_PARAMS)) == sorted(case.expected)
    assert _found(check(parse(case.text), PARAMS)) == sorted(case.expected_49)


@pytest.mark.parametrize("case", OP_BATCH_CASES, ids=[c.name[:60] for c in OP_BATCH_CASES])
def test_op_batch_case_agrees_with_the_conformance_invariant(case):
    """``properties/inv_txn.py`` judges the same checks on the trace as a ghost history (a position is
    resolved by any of its ENDs whose op is written, in both)."""
    from rmqspec.properties.history import History
    from rmqspec.properties.inv_txn import check_txn_check_after_resolved

    for params, expected in ((OP_BATCH_PARAMS, case.expected), (PARAMS, case.expected_49)):
        h = History(params=params)
        for row in parse(case.text):
            fields = {k: v for k, v in row.items() if k not in ("seq", "ts", "event") and v is not None}
            h.emit(row["event"], row["ts"], **{**fields, **({"detail": json.loads(row["detail"])}
                                                            if "detail" in fields else {})})
        assert [v.seq for v in check_txn_check_after_resolved(h)] == \
            [s[-1] for code, s in sorted(expected) if code == "TXN_CHECK_AFTER_RESOLVED"]


def test_op_batch_without_a_needed_ts_judges_nothing():
    """Defensive (a validated row always has ts): with op batching a crash, recover or END whose ts is
    unknown, or a check without one, could have changed whether the op was written: no finding."""
    rows = parse(OP_BATCH_CASES[0].text)

    def found(rows, params=OP_BATCH_PARAMS, downs=None):
        trace = Trace.build(rows, params)
        return [f.seqs for f in detect_txn_check_after_resolved(trace, downs=downs)]

    assert found(rows) == [(6, 10), (7, 11)]
    assert found(rows, downs=[None]) == []  # a restart at an unknown time
    assert found([{**r, "ts": None} if r["seq"] == 6 else r for r in rows]) == [(7, 11)]  # the END's
    assert found([{**r, "ts": None} if r["seq"] == 11 else r for r in rows]) == [(6, 10)]  # the check's
    assert len(found(rows, PARAMS, downs=[None])) == 4  # without batching no ts is read


def test_every_code_has_a_case_and_a_detector_docstring():
    covered = {code for case in CASES for code, _ in case.expected}
    assert covered == set(VIOLATION_CODES) | set(OBSERVATION_CODES)
    for detector in DETECTORS:
        assert detector.__name__.startswith("detect_")
        assert "§8.1" in (detector.__doc__ or ""), detector.__name__


@pytest.mark.parametrize("code", VIOLATION_CODES)
def test_generator_injection_is_found_exactly(code):
    rows, truth = generate_rows(GenConfig(events=3000, seed=3, inject=(code,), inject_count=2))
    report = check(rows)
    assert truth and {t["code"] for t in truth} == {code}
    assert sorted((f.code, f.seqs) for f in report.violations) == sorted((t["code"], tuple(t["seqs"])) for t in truth)


@pytest.mark.parametrize("seed, crashes", [(1, 0), (2, 1), (3, 3)])
def test_clean_generated_traces_have_no_violation(seed, crashes):
    rows, _ = generate_rows(GenConfig(events=6000, seed=seed, crashes=crashes))
    report = check(rows)
    assert report.violations == () and report.clean
    assert report.events_read == len(rows) and report.rows_rejected == 0
    assert report.not_judged == {}


def test_bad_rows_are_rejected_with_position_and_skipped():
    rows = [
        *parse("0 send t=1 topic=T key=K\n1 drain t=2\n"),
        {"seq": 2, "ts": "late", "event": "send"},
        {"seq": 3, "ts": 1, "event": "teleport"},
        {"ts": 1, "event": "send"},
        "not a row",
    ]
    report = check(rows)
    assert report.events_read == 6 and report.rows_rejected == 4
    assert [(r.position, r.seq) for r in report.rejected] == [
        ("row 2", 2), ("row 3", 3), ("row 4", None), ("row 5", None)
    ]  # fmt: skip
    assert "teleport" in report.rejected[1].reason
    assert report.violations == ()  # K is not consumed by anyone: nothing LOST


def test_not_judged_without_drain_and_for_rows_lacking_fields():
    report = check(parse("0 send t=1 topic=T key=K\n1 store t=2 topic=T key=K\n"))
    assert report.not_judged["LOST"] == "no drain event in the trace"
    assert report.not_judged["TXN_UNRESOLVED"] == "no drain event in the trace"
    assert report.not_judged["ORDER_QUEUE_GAP"] == ("1 store row(s) lack one of topic,queue_id,queue_offset")


def test_parameters_change_the_verdict():
    text = "0 lock t=0 g=G topic=T q=0 c=A st=GRANTED\n1 lock t=20000 g=G topic=T q=0 c=B st=GRANTED\n"
    assert [f.code for f in check(parse(text)).violations] == ["LOCK_OVERLAP"]
    assert check(parse(text), AuditParams(broker_lock_ms=10_000)).violations == ()


def test_report_renders_as_text_and_json():
    report = check(parse(CASES[1].text), PARAMS)
    text = render_text(report)
    assert "ORDER_QUEUE_GAP" in text and "seqs=[1, 3]" in text
    data = json.loads(json.dumps(report_json(report)))
    assert data["violations"]["ORDER_QUEUE_GAP"] == 2 and set(data["violations"]) == set(VIOLATION_CODES)
    assert data["violation_rows"][0]["seqs"] == [1, 3] and data["violation_rows"][0]["topic"] == "T"


def test_trace_id_splits_independent_traces():
    a = [{**r, "trace_id": "a"} for r in parse(CASES[1].text)]
    b = [{**r, "trace_id": "b"} for r in parse("0 store t=0 topic=T q=0 off=7\n1 drain t=1\n")]
    report = check(a + b, PARAMS)
    assert {f.trace_id for f in report.violations} == {"a"}
    assert "LOST" in report.not_judged  # trace a has no drain


def test_at_risk_keys_come_from_crash_details_as_text_or_mapping():
    text = """
    0 send t=1 topic=T q=0 key=K1 st=SEND_OK
    1 send t=2 topic=T q=0 key=K2 st=SEND_OK
    2 crash t=3 st=power
    3 recover t=4
    4 deliver t=5 g=G topic=T q=0 off=0 key=K9 c=C1 rt=0
    5 drain t=9
    """
    rows = parse(text)
    assert {f.seqs for f in check(rows).violations if f.code == "LOST"} == {(0, 5), (1, 5)}
    rows[2]["detail"] = {"at_risk": ["K1"]}  # as the conformance machine records it
    assert [f.seqs for f in check(rows).violations if f.code == "LOST"] == [(1, 5)]
    rows[2]["detail"] = '{"at_risk": ["K1", "K2"]}'  # as a trace file stores it
    assert [f.code for f in check(rows).violations if f.code == "LOST"] == []
    # only a crash's detail counts
    rows[2]["detail"] = None
    rows[4]["detail"] = {"at_risk": ["K1", "K2"]}
    assert len([f for f in check(rows).violations if f.code == "LOST"]) == 2


def test_send_status_success_is_acknowledged_and_unknown_statuses_are_reported():
    """A send answered SUCCESS (a response code, SPEC §2) is acknowledged, so LOST judges it; a
    status no rule knows is judged as not acknowledged and reported per value, never skipped."""
    text = (
        "0 send t=1 topic=T q=0 key=K1 st=SUCCESS\n"
        "1 send t=2 topic=T q=0 key=K2 st=OK\n"
        "2 send t=3 topic=T q=0 key=K3 st=OK\n"
        "3 send t=4 topic=T q=0 key=K4 st=SYSTEM_BUSY\n"
        "4 lock t=5 g=G topic=T q=0 c=C1 st=EXPIRED\n"
        "5 deliver t=6 g=G topic=T q=0 off=9 key=KX c=C1 rt=0\n"
        "6 drain t=7\n"
    )
    report = check(parse(text))
    assert [(f.code, f.seqs) for f in report.violations if f.code == "LOST"] == [("LOST", (0, 6))]
    assert report.not_judged["LOST"] == "2 send row(s) with unknown status 'OK'"
    for code in ("LOCK_OVERLAP", "ORDER_KEY_REORDERED", "ORDERLY_WITHOUT_LOCK"):
        assert report.not_judged[code] == "1 lock row(s) with unknown status 'EXPIRED'"
    assert "TXN_UNRESOLVED" not in report.not_judged
