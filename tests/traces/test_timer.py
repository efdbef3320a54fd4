"""The timer rules (TIMER_EARLY, TIMER_DUPLICATED, TIMER_UNFIRED; LOST at a drain before a timer message is
due) on recorded model traces, generated traces and the hand-written cases of ``checker_cases_timer``."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from monotone import added_by, claims, units
from structural import audit
from timer_runs import model_restart_timer_trace, model_timer_trace, reused_timer_positions, waiting_keys

from rmqspec.properties import invariants as inv
from rmqspec.properties.codes import AuditParams
from rmqspec.properties.history import History
from rmqspec.traces import checker
from rmqspec.traces.checker import check, check_trace
from rmqspec.traces.checker_cases import PARAMS
from rmqspec.traces.checker_cases_timer import TIMER_CASES
from rmqspec.traces.checks_common import NOT_DUE, NOT_JUDGED_WHY
from rmqspec.traces.generator import GenConfig, generate_rows
from rmqspec.traces.notation import parse
from tests.untraced import budget_run

SEEDS = range(40)
_NOT_DUE_TEXT = NOT_JUDGED_WHY[NOT_DUE]


def _timer_codes(report: checker.CheckReport) -> list[tuple[str, tuple[int, ...]]]:
    return [(f.code, f.seqs) for f in report.violations if f.code.startswith("TIMER_")]


@budget_run
def test_model_traces_with_timer_messages_and_crashes_audit_clean():
    """What the model did under a 5.x profile — timer messages fired once, again after a crash
    (at-least-once), never early — breaks no rule; a drain before some are due leaves their LOST
    unjudged, with the reason, and no TIMER_UNFIRED."""
    seen = Counter()
    for seed in SEEDS:
        rows = model_timer_trace(seed)
        report = check(rows)
        assert report.violations == () and report.not_judged == {}, (seed, report.violations[:3])
        fires = [r["detail"]["from_commitlog_offset"] for r in rows if r["event"] == "timer_fire"]
        seen["fires"] += len(fires)
        seen["again"] += len(fires) - len(set(fires))
        seen["crashes"] += sum(r["event"] == "crash" for r in rows)
        early = model_timer_trace(seed, drain_early=True)
        report = check(early)
        waiting = waiting_keys(early)
        assert _timer_codes(report) == [], seed
        assert not [f for f in report.violations if f.code == "LOST" and f.keys["msg_key"] in waiting], seed
        assert set(report.not_judged) <= {"LOST"}, report.not_judged
        if waiting:
            seen["waiting"] += 1
            assert _NOT_DUE_TEXT in report.not_judged["LOST"]
    assert seen["fires"] > 300 and seen["crashes"] > 20
    assert seen["again"] > 10, "no crash made the wheel deliver a copy again"
    assert seen["waiting"] > 10, "no drain came before a timer message was due"


@budget_run
def test_without_its_crashes_a_model_trace_shows_the_fires_again():
    """The teeth of TIMER_DUPLICATED: the same traces with their crash rows taken out (and seqs kept)
    show every copy the wheel delivered again as fired twice."""
    found = 0
    for seed in SEEDS:
        rows = model_timer_trace(seed)
        fires = Counter(r["detail"]["from_commitlog_offset"] for r in rows if r["event"] == "timer_fire")
        again = sum(n - 1 for n in fires.values())
        report = check([r for r in rows if r["event"] != "crash"])
        assert sum(f.code == "TIMER_DUPLICATED" for f in report.violations) == again, seed
        found += again
    assert found > 10


@pytest.mark.parametrize("flush", ["SYNC", "ASYNC"])
def test_a_power_loss_and_a_crash_close_behind_it_audit_clean(flush):
    """The model under ``default_config("rocketmq-5.2")`` (and with ASYNC flushing) through a power loss
    and a second crash before the next timer checkpoint (``model_restart_timer_trace``): the reference
    checker and the ghost invariants find no timer violation, and TIMER_UNFIRED is judged (a power
    crash's at-risk keys are the only copies the model may lose). Under ASYNC the loss frees
    timer-queue positions the next sends reuse, and the copies there fire all the same."""
    reused_and_fired = 0
    for seed in range(12):
        rows = model_restart_timer_trace(seed, flush)
        report = check(rows)
        assert report.violations == (), (seed, report.violations[:3])
        assert "TIMER_UNFIRED" not in report.not_judged, report.not_judged
        h = History(params=AuditParams())
        for row in rows:
            h.emit(row["event"], row["ts"], **{k: v for k, v in row.items() if k not in ("seq", "ts", "event")})
        assert [v.code for check_ in (inv.check_timer_unfired, inv.check_timer_duplicated, inv.check_timer_early)
                for v in check_(h)] == [], seed
        fired = {r["msg_key"] for r in rows if r["event"] == "timer_fire"}
        risky = {k for r in rows if r["event"] == "crash" for k in (r["detail"] or {}).get("at_risk", ())}
        assert flush == "ASYNC" or not risky
        reused_and_fired += len((reused_timer_positions(rows) & fired) - risky)
    assert (reused_and_fired > 5) == (flush == "ASYNC"), reused_and_fired


@pytest.mark.parametrize("seed", range(8))
def test_model_traces_never_gain_a_finding(seed):
    """SPEC §8 on the recorded traces: 30 sets of 1-4 dropped units each add no finding."""
    rows = model_timer_trace(seed, drain_early=seed % 2 == 1)
    before = claims(check(rows))
    every = units(rows)
    rnd = random.Random(seed)
    for _ in range(30):
        chosen = rnd.sample(every, rnd.randint(1, 4))
        assert not added_by(rows, chosen, AuditParams(), before), chosen


@pytest.mark.parametrize("seed, crashes", [(1, 0), (2, 1), (3, 3)])
def test_generated_traces_with_timer_messages_are_clean(seed, crashes):
    rows, truth = generate_rows(GenConfig(events=8000, seed=seed, crashes=crashes, p_timer=0.2))
    report = check(rows)
    assert truth == [] and report.violations == () and report.not_judged == {}
    assert audit(rows) == []
    fires = Counter((r["msg_key"], r["detail"]["from_commitlog_offset"]) for r in rows if r["event"] == "timer_fire")
    assert len(fires) > 100
    assert crashes < 3 or max(fires.values()) > 1  # the crashes made the wheel deliver some copies again


def test_the_timer_switch_leaves_4_9_traces_as_they_were():
    """``p_timer`` 0 (the default, RocketMQ 4.9) draws nothing more: the trace is the one without the knob."""
    a, _ = generate_rows(GenConfig(events=3000, seed=5, crashes=1))
    b, _ = generate_rows(GenConfig(events=3000, seed=5, crashes=1, p_timer=0.0))
    assert a == b and not any(r["event"] == "timer_fire" for r in a)


def test_lost_does_not_judge_a_timer_message_not_due_at_the_drain():
    """The detector finds the waiting message LOST; the audit withholds it and says why."""
    _, text, expected = TIMER_CASES[3]
    rows = parse(text)
    report = check(rows, PARAMS)
    assert sorted((f.code, f.seqs) for f in report.violations) == sorted(expected)
    assert report.not_judged == {"LOST": f"2 {_NOT_DUE_TEXT}"}
    _, raw = check_trace(checker.validate(rows)[0], PARAMS)
    assert ("LOST", (5, 20)) in {(f.code, f.seqs) for f in raw}  # K3, due at 9001, drained at 9000


def test_a_client_side_trace_judges_no_fire():
    """Sends with deliver_ts and deliveries, no broker rows: nothing says whether the wheel fired, so no
    TIMER_UNFIRED; a message not due at the drain is not judged by LOST."""
    text = """
    0 send t=0 topic=T q=0 key=K1 st=SEND_OK due=3000
    1 send t=0 topic=T q=0 key=K2 st=SEND_OK due=9500
    2 deliver t=3000 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
    3 consume t=3000 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0 st=SUCCESS
    4 drain t=9000
    """
    report = check(parse(text))
    assert report.violations == ()
    assert report.not_judged == {"LOST": f"1 {_NOT_DUE_TEXT}"}


def test_timer_rows_lacking_fields_are_not_judged():
    _, text, expected = TIMER_CASES[4]
    report = check(parse(text), PARAMS)
    assert expected == () and report.violations == ()
    assert report.not_judged["TIMER_EARLY"] == ("2 timer_fire row(s) lack one of msg_key,deliver_ts; "
                                                 "1 deliver row(s) lack one of topic,msg_key,reconsume_times")
    assert report.not_judged["TIMER_DUPLICATED"] == (
        "2 timer_fire row(s) lack one of msg_key,detail.from_commitlog_offset")
    assert report.not_judged["TIMER_UNFIRED"] == "1 timer_fire row(s) lack one of msg_key"
    # the same rows complete give the findings the missing fields hid (a fire without msg_key may be any
    # key's: the deliver clause is not judged after it)
    complete = text
    for row, more in (("5 timer_fire t=1000 topic=T q=0 off=0 key=K1 rt=0", " due=2000"),
                      ("9 timer_fire t=2000 topic=T q=0 off=2", " key=K2"),
                      ("11 deliver t=3000 g=G topic=U q=0 off=0 key=K3 c=C1", " rt=0"),
                      ("7 timer_fire t=2000 topic=T q=0 off=1 key=K1 rt=0 due=2000",
                       ' detail={"from_queue_offset":0,"from_commitlog_offset":0}')):
        assert row in complete
        complete = complete.replace(row, row + more)
    assert sorted((f.code, f.seqs) for f in check(parse(complete), PARAMS).violations) == [
        ("TIMER_DUPLICATED", (5, 7)), ("TIMER_EARLY", (5,)), ("TIMER_EARLY", (10, 11))]


def test_without_a_drain_timer_unfired_is_not_judged():
    rows = [r for r in parse(TIMER_CASES[3][1]) if r["event"] != "drain"]
    report = check(rows, PARAMS)
    assert _timer_codes(report) == []
    assert report.not_judged["TIMER_UNFIRED"] == "no drain event in the trace"
