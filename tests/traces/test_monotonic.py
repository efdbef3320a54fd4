"""Audit monotonicity (issue 41, SPEC §8): removing optional fields from a trace never adds a finding.

The checker may only report what its input proves: a field missing from a row makes part of a rule
"not judged" (``traces/unjudged.py``), never a finding. Each test drops 1-4 droppable units
(``monotone.units``: any optional column of any row, any key of a structured ``detail``) and checks
the findings after the drop are among those before (``monotone.added``: same code, same subject);
"not judged" may grow. Traces: the generator's, with every violation injectable
(``traces/scenarios.py``), ≥ 1,000 per run; Hypothesis-drawn rows over tiny key domains; every
hand-written case of ``traces/checker_cases.py`` with each unit dropped in turn. The last tests show
the property has teeth: without the withholding the same drops add findings.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from monotone import KEPT, added, added_by, claims, dropped, units

from rmqspec.properties.codes import VIOLATION_CODES, AuditParams
from rmqspec.traces import checker, scenarios
from rmqspec.traces.checker import check
from rmqspec.traces.checker_cases import CASES, PARAMS
from rmqspec.traces.checker_cases_batch import OP_BATCH_CASES, OP_BATCH_PARAMS
from rmqspec.traces.checks_common import NEEDS
from rmqspec.traces.generator import GenConfig, generate_rows
from rmqspec.traces.notation import parse
from rmqspec.traces.unjudged import candidate, row_unjudged, trace_facts
from tests.untraced import budget_run

# Generated traces per run: ≥ 1,000 under the ``ci`` profile, more under ``thorough``.
GENERATED = max(1000, 5 * settings.default.max_examples)
DROPS_PER_TRACE = 3
_INJECTABLE = (*scenarios.VIOLATION_CODES, *scenarios.OBSERVATION_CODES)  # what the generator can inject


def _small(seed: int, events: int, crashes: int, inject: tuple[str, ...], p_timer: float = 0.0) -> list[dict[str, Any]]:
    """A small generated trace over a small topology (keys and queues collide often); ``p_timer``: the
    share of 5.x timer messages."""
    rows, _ = generate_rows(GenConfig(events=events, seed=seed, crashes=crashes, inject=inject, producers=2,
                                      topics=2, orderly_topics=1, queues=2, groups=2, orderly_groups=1, clients=2,
                                      p_timer=p_timer))
    return rows


def _drop_sets(data: st.DataObject, rows: list[dict[str, Any]]) -> list[list[tuple[int, str]]]:
    every = units(rows)
    out = []
    for _ in range(DROPS_PER_TRACE):
        n = data.draw(st.integers(1, min(4, len(every))))
        out.append(data.draw(st.lists(st.sampled_from(every), min_size=n, max_size=n, unique=True)))
    return out


def _holds(rows: list[dict[str, Any]], drop_sets: list[list[tuple[int, str]]], params: AuditParams) -> None:
    before = claims(check(rows, params))
    for chosen in drop_sets:
        gained = added_by(rows, chosen, params, before)
        assert not gained, f"dropping {chosen} added {gained}"


@settings(max_examples=GENERATED)
@given(
    seed=st.integers(0, 2**31 - 1),
    events=st.sampled_from((80, 150, 250)),
    crashes=st.sampled_from((0, 0, 1, 2)),
    inject=st.lists(st.sampled_from(_INJECTABLE), max_size=3, unique=True),
    p_timer=st.sampled_from((0.0, 0.0, 0.2)),
    data=st.data(),
)
@budget_run
def test_generated_traces_never_gain_a_finding(seed, events, crashes, inject, p_timer, data):
    rows = _small(seed, events, crashes, tuple(inject), p_timer)
    _holds(rows, _drop_sets(data, rows), AuditParams())


# -------------------------------------------------------------- drawn rows

_EVENTS = ("send", "store", "store", "deliver", "deliver", "consume", "consume", "send_back", "schedule_fire",
           "commit_offset", "lock", "lock", "unlock", "orderly_start", "orderly_end", "txn_half", "txn_end",
           "txn_check", "txn_discard", "crash", "recover", "timer_fire", "timer_fire")  # fmt: skip
_STATUS = {
    "send": ("SEND_OK", None, "FAILED"),
    "consume": ("SUCCESS", "SUCCESS", "RECONSUME_LATER"),
    "send_back": ("RETRY", "RETRY", "DLQ"),
    "lock": ("GRANTED", "GRANTED", "DENIED"),
    "txn_end": ("COMMIT", "ROLLBACK", "UNKNOWN"),
    "crash": ("kill", "power"),
    "commit_offset": (None, None, "RESTORED"),
    "recover": (None, "REOPEN"),
    "orderly_end": ("SUCCESS", None, "ROLLBACK"),
}
_DETAIL = {
    "txn_check": st.fixed_dictionaries({"check_times": st.integers(1, 3)}),
    "send_back": st.fixed_dictionaries({"max": st.integers(0, 2)}),
    "crash": st.fixed_dictionaries({"at_risk": st.lists(st.sampled_from(("K1", "K2")), max_size=1)}),
    "timer_fire": st.fixed_dictionaries({"from_queue_offset": st.integers(0, 1),
                                         "from_commitlog_offset": st.integers(0, 1)}),
    "deliver": st.fixed_dictionaries({"subscription": st.sampled_from(("*", "a", "r='HZ'")),
                                      "expression_type": st.sampled_from(("TAG", "SQL92"))}),
    "send": st.fixed_dictionaries({"tags": st.sampled_from(("a", "b")),
                                   "properties": st.fixed_dictionaries({"r": st.sampled_from(("HZ", "SH"))})}),
}
_DETAIL["consume"] = _DETAIL["deliver"]


@st.composite
def _row(draw: Any) -> dict[str, Any]:
    event = draw(st.sampled_from(_EVENTS))
    row = {
        "event": event,
        "dt": draw(st.sampled_from((0, 1, 999, 1000, 6000, 30_001, 60_000))),
        "group": draw(st.sampled_from(("G", "G", "GSMALL"))),
        "topic": draw(st.sampled_from(("T", "T", "%RETRY%G", "%DLQ%G", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer"))),
        "queue_id": draw(st.sampled_from((0, 1))),
        "queue_offset": draw(st.integers(0, 3)),
        "msg_key": draw(st.sampled_from(("K1", "K2", "K3"))),
        "msg_id": draw(st.sampled_from(("M1", "M2"))),
        "reconsume_times": draw(st.sampled_from((0, 0, 1, 2, 3, 17))),
        "delay_level": draw(st.sampled_from((-1, 0, 1, 3))),
        "due": draw(st.sampled_from((0, 1000, 10_000))),
        "status": draw(st.sampled_from(_STATUS.get(event, (None,)))),
        "client_id": draw(st.sampled_from(("C1", "C2"))),
        "txn_id": draw(st.sampled_from(("K1", "K2"))),
    }
    if event in _DETAIL and draw(st.booleans()):
        row["detail"] = draw(_DETAIL[event])
    return row


@st.composite
def drawn_trace(draw: Any) -> list[dict[str, Any]]:
    """Rows of every event with every field set (so drops matter), keys colliding often, a drain."""
    rows, ts = [], 0
    for seq, d in enumerate(draw(st.lists(_row(), min_size=2, max_size=24))):
        ts += d.pop("dt")
        due = d.pop("due")
        rows.append({"seq": seq, "ts": ts, **d, "deliver_ts": ts + due})
    rows.append({"seq": len(rows), "ts": ts + 1, "event": "drain"})
    return rows


@budget_run
@settings(max_examples=max(400, 2 * settings.default.max_examples))
@given(rows=drawn_trace(), data=st.data())
def test_drawn_traces_never_gain_a_finding(rows, data):
    _holds(rows, _drop_sets(data, rows), PARAMS)


_TXN_EVENTS = ("txn_half", "txn_end", "txn_end", "txn_check", "txn_check", "crash", "recover")


@st.composite
def txn_trace(draw: Any) -> list[dict[str, Any]]:
    """Transaction rows around the op batch window (op_batch_ms 700: 2100 ms), every field set."""
    rows, ts = [], 0
    for seq in range(draw(st.integers(2, 16))):
        event = draw(st.sampled_from(_TXN_EVENTS)) if seq else "txn_half"
        ts += draw(st.sampled_from((0, 1, 700, 2100, 2101, 6000)))
        key = draw(st.sampled_from(("K1", "K2")))
        row = {"seq": seq, "ts": ts, "event": event, "status": draw(st.sampled_from(_STATUS.get(event, (None,))))}
        if event.startswith("txn_"):
            row.update(topic="T", msg_key=key, txn_id=key, queue_offset=draw(st.integers(0, 2)))
        if event == "txn_check":
            row["detail"] = {"check_times": draw(st.integers(1, 2))}
        rows.append(row)
    return rows


@budget_run
@settings(max_examples=max(400, 2 * settings.default.max_examples))
@given(rows=txn_trace(), data=st.data())
def test_transaction_traces_never_gain_a_finding_with_op_batching(rows, data):
    """5.1.0+'s batched ops (op_batch_ms 700: an END counts 2100 ms after it, a crash or recover in
    between loses it): TXN_CHECK_AFTER_RESOLVED reads ts, which is never dropped, and counts any END of
    a position whose op is written (had it kept only a position's first END, dropping that END's txn_id
    would let a later one count: the third case of ``checker_cases_batch``, dropped unit by unit in
    ``test_hand_written_case_drop_each_unit``, shows it). Only that rule is compared here: these rows also reach a
    TXN_LIFECYCLE gap that op batching does not touch (a key's second half after a crash, the first
    one's txn_id dropped), which the generic tests above do not draw."""
    before = claims(check(rows, OP_BATCH_PARAMS))
    for chosen in _drop_sets(data, rows):
        gained = [g for g in added_by(rows, chosen, OP_BATCH_PARAMS, before) if g[0] == "TXN_CHECK_AFTER_RESOLVED"]
        assert not gained, f"dropping {chosen} added {gained}"


@budget_run
@settings(max_examples=max(500, 2 * settings.default.max_examples))
@given(rows=drawn_trace())
def test_every_entry_comes_from_a_candidate_row_and_is_worded(rows):
    """``CANDIDATES`` (the Spark audit's column test) lets through every row with an entry, and
    every (code, event) of an entry has its wording in ``NEEDS``."""
    for chosen in ([], units(rows)[::3], units(rows)[1::2]):
        thinned = checker.validate(dropped(rows, chosen))[0]
        facts = trace_facts(thinned)
        for row in thinned:
            for u in row_unjudged(row, facts):
                assert candidate(row), (row, u)
                if u.code in VIOLATION_CODES:
                    assert row["event"] in dict(NEEDS[u.code]), (u.code, row["event"])


# ------------------------------------------------------------- hand-written

_HAND_WRITTEN = [(c.name, c.text, PARAMS) for c in CASES] + [(c.name, c.text, OP_BATCH_PARAMS) for c in OP_BATCH_CASES]


@budget_run
@pytest.mark.parametrize("name, text, params", _HAND_WRITTEN, ids=[c[0][:40] for c in _HAND_WRITTEN])
def test_hand_written_case_drop_each_unit(name, text, params):
    """Every unit of every row of the case dropped alone, then 20 sampled sets of 2-4 units
    (the op-batch cases of ``checker_cases_batch`` under their parameters)."""
    rows = parse(text)
    before = claims(check(rows, params))
    every = units(rows)
    rnd = random.Random(name)
    sets = [[u] for u in every] + [rnd.sample(every, min(len(every), rnd.randint(2, 4))) for _ in range(20)]
    for chosen in sets:
        gained = added_by(rows, chosen, params, before)
        assert not gained, f"dropping {chosen} added {gained}"


@budget_run
@pytest.mark.parametrize("code", _INJECTABLE)
def test_injected_scenario_drop_each_unit_of_its_rows(code):
    """Each unit of each row near an injected violation's rows dropped in turn (a short trace around
    it: each drop re-checks the whole trace; the long traces are ``test_generated_traces_…``'s)."""
    rows, truth = generate_rows(GenConfig(events=200, seed=9, inject=(code,), crashes=1))
    assert truth, f"the generator injected no {code}"
    before = claims(check(rows))
    cited = {s for t in truth for s in t["seqs"]}
    near = {i for i, r in enumerate(rows) if any(abs(r["seq"] - s) <= 2 for s in cited)}
    for unit in (u for u in units(rows) if u[0] in near):
        gained = added_by(rows, [unit], AuditParams(), before)
        assert not gained, f"dropping {unit} added {gained}"


# ------------------------------------------------------------ regressions

def test_a_schedule_fire_without_reconsume_times_is_not_judged():
    """Issue 41: SCHEDULE_DUPLICATED read a missing reconsume_times of a ``schedule_fire`` as 0 (SPEC §8
    does not require it there), so a SPEC-valid trace of a retry copy fired once gained a finding."""
    text = """
    0 store t=0 topic=SCHEDULE_TOPIC_XXXX q=0 off=0 key=K1 id=S0 rt=0 lvl=1 due=1000
    1 schedule_fire t=1000 topic=T q=0 key=K1 id=S0 rt=0
    2 store t=2000 topic=SCHEDULE_TOPIC_XXXX q=1 off=0 key=K1 id=S1 rt=1 lvl=2 due=7000
    3 schedule_fire t=7000 topic=%RETRY%G q=0 key=K1 id=S1
    4 drain t=8000
    """
    report = check(parse(text))
    assert report.violations == ()
    assert report.not_judged == {
        "DELAY_EARLY": "1 schedule_fire row(s) lack one of msg_key,msg_id,reconsume_times",
        "SCHEDULE_DUPLICATED": "1 schedule_fire row(s) lack one of msg_key,reconsume_times",
    }
    # the same fire with its reconsume_times is judged, and fine
    complete = check(parse(text.replace("id=S1\n", "id=S1 rt=1\n")))
    assert complete.violations == () and complete.not_judged == {}


def test_a_missing_field_withholds_its_scope_from_that_row_on():
    """A store without its offset leaves its queue unjudged from that row on; other queues and
    earlier gaps are still judged."""
    text = """
    0 store t=1 topic=T q=0 off=0 key=A
    1 store t=2 topic=T q=0 off=2 key=B
    2 store t=3 topic=T q=1 off=0 key=C
    3 store t=4 topic=T q=0 key=D
    4 store t=5 topic=T q=0 off=4 key=E
    5 store t=6 topic=T q=1 off=2 key=F
    """
    report = check(parse(text))
    assert [(f.code, f.seqs) for f in report.violations] == [("ORDER_QUEUE_GAP", (0, 1)), ("ORDER_QUEUE_GAP", (2, 5))]
    assert report.not_judged["ORDER_QUEUE_GAP"] == "1 store row(s) lack one of topic,queue_id,queue_offset"


# ----------------------------------------------------------------- teeth

_TEETH = (
    ("ORDER_QUEUE_GAP", "0 store t=1 topic=T q=0 off=0\n1 store t=2 topic=T q=0 off=1\n2 store t=3 topic=T q=0 off=2\n",
     [(1, "queue_offset")]),
    ("OFFSET_OVERRUN", "0 deliver t=1 g=G topic=T q=0 off=0 key=A c=C\n1 store t=1 topic=T q=0 off=0 key=A\n"
     "2 consume t=2 g=G topic=T q=0 off=0 key=A c=C st=SUCCESS\n3 commit_offset t=3 g=G topic=T q=0 off=1\n",
     [(2, "queue_offset")]),
    ("SCHEDULE_DUPLICATED", "0 store t=0 topic=SCHEDULE_TOPIC_XXXX q=0 off=0 key=K rt=0 lvl=1 due=1000\n"
     "1 schedule_fire t=1000 topic=T q=0 key=K rt=0\n2 store t=2000 topic=SCHEDULE_TOPIC_XXXX q=1 off=0 key=K "
     "rt=1 lvl=2 due=7000\n3 schedule_fire t=7000 topic=%RETRY%G q=0 key=K rt=1\n", [(3, "reconsume_times")]),
    ("ORDERLY_WITHOUT_LOCK", "0 lock t=0 g=G topic=T q=0 c=C1 st=GRANTED\n1 orderly_start t=1 g=G topic=T q=0 c=C1\n",
     [(0, "client_id")]),
    ("ORDERLY_CONCURRENT", "0 orderly_start t=0 g=G topic=T q=0 c=C1\n1 orderly_end t=1 g=G topic=T q=0 c=C1\n"
     "2 orderly_start t=2 g=G topic=T q=0 c=C2\n", [(1, "client_id")]),
    ("LOST", "0 send t=0 topic=T q=0 key=K st=SEND_OK\n1 deliver t=1 g=G topic=T q=0 off=0 key=K c=C\n"
     "2 consume t=2 g=G topic=T q=0 off=0 key=K c=C st=SUCCESS\n3 drain t=3\n", [(2, "msg_key")]),
    ("TIMER_EARLY", "0 send t=0 topic=U q=0 key=K st=SEND_OK due=1000\n1 send t=10 topic=U q=0 key=K st=SEND_OK\n"
     "2 deliver t=20 g=G topic=U q=0 off=0 key=K c=C rt=0\n", [(1, "msg_key")]),
    ("TIMER_UNFIRED", "0 store t=0 topic=rmq_sys_wheel_timer q=0 off=0 key=K rt=0 due=1000\n"
     "1 send t=0 topic=U q=0 key=K st=SEND_OK due=1000\n2 store t=1000 topic=U q=0 off=0 key=K rt=0\n"
     "3 timer_fire t=1000 topic=U q=0 off=0 key=K rt=0 due=1000\n4 drain t=2000\n", [(3, "msg_key")]),
)


@pytest.mark.parametrize("code, text, chosen", _TEETH, ids=[t[0] for t in _TEETH])
def test_without_withholding_the_drop_adds_a_finding(monkeypatch, code, text, chosen):
    """Each drop above adds a finding of ``code`` to the detectors' raw findings (the checker before
    issue 41), and none to what the checker reports."""
    rows = parse(text)
    assert not added_by(rows, chosen, AuditParams())
    monkeypatch.setattr(checker, "withhold", lambda findings, _withheld: iter(findings))
    assert [c for c, _, _ in added_by(rows, chosen, AuditParams())] == [code]


def test_without_withholding_generated_drops_add_findings(monkeypatch):
    """The generated-trace property is not vacuous: with the withholding off, its drops add findings."""
    monkeypatch.setattr(checker, "withhold", lambda findings, _withheld: iter(findings))
    rnd, hits = random.Random(41), 0
    for seed in range(40):
        rows = _small(seed, 150, seed % 2, (rnd.choice(scenarios.VIOLATION_CODES),))
        before = claims(check(rows))
        for _ in range(DROPS_PER_TRACE):
            chosen = rnd.sample(units(rows), rnd.randint(1, 4))
            hits += bool(added(before, claims(check(dropped(rows, chosen)))))
    assert hits >= 10


def test_the_kept_units_are_the_documented_conventions():
    """``KEPT`` is what ``traces/unjudged.py`` says an absent value means; a send's acknowledging status
    may be dropped (absent also acknowledges), any other is kept."""
    rows = parse("0 send t=1 topic=T key=A st=SEND_OK\n1 send t=2 topic=T key=B st=FAILED lvl=0\n")
    assert (0, "status") in units(rows) and (1, "status") not in units(rows) and (1, "delay_level") not in units(rows)
    assert {event for event, _ in KEPT} == {"crash", "send_back", "send", "store", "deliver", "consume", "txn_end",
                                            "commit_offset", "orderly_start", "orderly_end"}


_RETENTION_EVENTS = ("send", "send", "store", "store", "txn_half", "consume", "expire", "expire")


@st.composite
def retention_trace(draw: Any) -> list[dict[str, Any]]:
    """Copies and ``expire`` rows (commitlog's and queues', issue 42) around fileReservedTime (PARAMS: 72 h),
    every field set, consumers of T, a drain: LOST's reading of what retention took
    (``traces/checks_retention.py``)."""
    rows: list[dict[str, Any]] = []
    ts = 0
    for seq in range(draw(st.integers(2, 14))):
        event = draw(st.sampled_from(_RETENTION_EVENTS))
        ts += draw(st.sampled_from((0, 1, 3_600_000, 72 * 3_600_000)))
        row: dict[str, Any] = {"seq": seq, "ts": ts, "event": event, "topic": "T",
                               "queue_id": draw(st.sampled_from((0, 1))), "queue_offset": draw(st.integers(0, 3)),
                               "commitlog_offset": draw(st.integers(0, 3)) * 100}
        if event == "expire":
            if draw(st.booleans()):
                row.update(topic=None, queue_id=None, queue_offset=None)
            row["detail"] = {"cause": draw(st.sampled_from(("reserved", "forcibly")))}
        else:
            row.update(msg_key=draw(st.sampled_from(("K1", "K2", "K3"))))
        if event == "send":
            row["status"] = "SEND_OK"
        elif event == "consume":
            row.update(group="G", status="SUCCESS", client_id="C1", commitlog_offset=None)
        rows.append(row)
    rows.append({"seq": len(rows), "ts": ts + 1, "event": "drain"})
    return rows


@budget_run
@settings(max_examples=max(400, 2 * settings.default.max_examples))
@given(rows=retention_trace(), data=st.data())
def test_retention_traces_never_gain_a_finding(rows, data):
    _holds(rows, _drop_sets(data, rows), PARAMS)


_HOMES = ("RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_wheel_timer", "T")
_COPY_ROWS = ("txn_half", "txn_check", "txn_end", "wheel", "send", "timer_fire", "expire", "expire")


@st.composite
def half_timer_retention_trace(draw: Any) -> list[dict[str, Any]]:
    """Halves and their re-put copies (``txn_half`` / ``txn_check``), timer copies (stores in
    rmq_sys_wheel_timer, timer sends), some resolved or fired, and ``expire`` rows of the commitlog and of
    the half, wheel and real queues, every field set, a drain after every timer is due: TXN_UNRESOLVED's and
    TIMER_UNFIRED's reading of what retention took (``traces/checks_retention.kept``)."""
    rows: list[dict[str, Any]] = []
    ts = 0
    for seq in range(draw(st.integers(2, 14))):
        kind = draw(st.sampled_from(_COPY_ROWS))
        ts += draw(st.sampled_from((0, 1, 6000)))
        key = draw(st.sampled_from(("K1", "K2", "K3")))
        row: dict[str, Any] = {"seq": seq, "ts": ts, "event": kind, "queue_id": 0, "queue_offset": draw(
            st.integers(0, 3)), "commitlog_offset": draw(st.integers(0, 3)) * 100}
        if kind == "expire":
            row["topic"] = draw(st.sampled_from((None, *_HOMES)))
            if row["topic"] is None:
                row.update(queue_id=None, queue_offset=None)
        elif kind in ("txn_half", "txn_check", "txn_end"):
            row.update(topic="T", msg_key=key, txn_id=key)
            if kind == "txn_check":
                row["detail"] = {"check_times": seq}
            elif kind == "txn_end":
                row.update(status=draw(st.sampled_from(("COMMIT", "ROLLBACK"))), queue_offset=None)
        elif kind == "wheel":
            row.update(event="store", topic="rmq_sys_wheel_timer", msg_key=key, reconsume_times=0, deliver_ts=1000)
        elif kind == "send":
            row.update(topic="T", msg_key=key, status="SEND_OK", deliver_ts=1000)
        else:
            row.update(topic="T", msg_key=key, reconsume_times=0, deliver_ts=1000,
                       detail={"from_commitlog_offset": row["commitlog_offset"]})
        rows.append(row)
    rows.append({"seq": len(rows), "ts": ts + 2000, "event": "drain"})
    return rows


@budget_run
@settings(max_examples=max(400, 2 * settings.default.max_examples))
@given(rows=half_timer_retention_trace(), data=st.data())
def test_retention_of_halves_and_timer_copies_never_gains_a_finding(rows, data):
    _holds(rows, _drop_sets(data, rows), PARAMS)


def test_retention_drawn_traces_judge_halves_and_timer_copies():
    """The draw above reaches what it tests: a TXN_UNRESOLVED and a TIMER_UNFIRED judged beside an
    ``expire`` row (a kept copy), and one each that an expire withholds."""
    kept = ("0 txn_half t=0 topic=T q=0 off=1 clo=500 key=X txn=X\n"
            "1 store t=0 topic=rmq_sys_wheel_timer q=0 off=1 clo=600 key=K rt=0 due=1000\n"
            "2 send t=0 topic=T q=0 off=1 clo=600 key=K st=SEND_OK due=1000\n")
    codes = {f.code for f in check(parse(kept + "3 expire t=10 clo=400\n4 drain t=2000\n"), PARAMS).violations}
    assert codes == {"TXN_UNRESOLVED", "TIMER_UNFIRED"}
    report = check(parse(kept + "3 expire t=10 clo=700\n4 drain t=2000\n"), PARAMS)
    assert not report.violations
    assert all("may have taken" in report.not_judged[c] for c in ("TXN_UNRESOLVED", "TIMER_UNFIRED"))


_SEEN = ("0 send t=1000 topic=T q=0 key=K1 st=SEND_OK\n1 store t=1000 topic=T q=0 off=0 key=K1\n"
         "2 deliver t=1010 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0\n"
         "3 consume t=1020 g=G topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS\n")


@pytest.mark.parametrize("copies, topic", [
    ("4 send t=2000 topic=T q=0 off=1 clo=5000 key=K2 st=SEND_OK\n5 store t=2000 topic=T q=0 off=1 clo=5000 key=K2\n",
     "T"),
    ("4 txn_half t=2000 topic=T q=0 off=1 clo=5000 key=X txn=X\n5 txn_check t=8000 topic=T off=1 clo=5000 key=X "
     'txn=X detail={"check_times":1}\n', "RMQ_SYS_TRANS_HALF_TOPIC"),
    ("4 store t=2000 topic=rmq_sys_wheel_timer q=0 off=1 clo=5000 key=K2 rt=0 due=3000\n"
     "5 send t=2000 topic=T q=0 off=1 clo=5000 key=K2 st=SEND_OK due=3000\n", "rmq_sys_wheel_timer"),
], ids=["LOST", "TXN_UNRESOLVED", "TIMER_UNFIRED"])
def test_a_queue_expire_row_without_its_topic_and_position_adds_nothing(copies, topic):
    """A queue's ``expire`` row that also gives a commitlog offset, its topic, queue and position dropped,
    reads as a commitlog row: what its position took (the copy at 1, below 2) must not come back judged
    (``checks_retention``: such a row takes a copy only below both of its offsets; LOST reads the rest by the
    commitlog offset)."""
    rows = parse(_SEEN + copies + f"6 expire t=9000 topic={topic} q=0 off=2 clo=4096\n7 drain t=10000\n")
    assert not added_by(rows, [(6, "topic"), (6, "queue_id"), (6, "queue_offset")], PARAMS)
    assert not added_by(rows, [(6, "commitlog_offset")], PARAMS)
