"""The table pass (``spark/rules_table.py``), in-process, against the reference checker.

The pass runs the checker's own replays (``properties/inv_replay_*.py``) on each partition, so what can
differ is what it hands them: the rows it selects and ships (the message rows' ``detail`` only on
send-backs, ``check_times`` text for ``detail.check_times``, the ``epoch`` column for the restarts, the
timer requests' ``detail`` and the ``crashes`` column for the crash rows), the partitioning (per trace,
per msg_key, per txn_id), and the per-trace "unkeyed" facts. Hypothesis draws traces over tiny key
domains with nulls anywhere; each judge, given rows as ``mapInArrow`` would, must give exactly the
checker's findings of its code (keys and reason included); drawn pop traces carry handles, and acks and
changes of the handles popped before. The timer replay is held to the checker on
drawn timer rows too, on the model's recorded timer traces (``tests/traces/timer_runs.py``, their sends
carrying ``detail.timer``) clean and with a TIMER-table row broken in them, and on generated traces
with timer messages and their injected timer violations (``traces/gen_timer.py``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.model.timer import TIMER_TOPIC
from rmqspec.properties.inv_pop import judge_pops
from rmqspec.properties.inv_replay import epochs_of, unkeyed_of
from rmqspec.spark.rules_table import (
    LOCK_COLUMNS,
    MESSAGE_COLUMNS,
    POP_COLUMNS,
    POP_EVENTS,
    TIMER_COLUMNS,
    TXN_COLUMNS,
    _by_trace,
    _locks,
    _messages,
    _timers,
    _Txns,
)
from rmqspec.traces.checker import validate
from rmqspec.traces.checker_cases import PARAMS as _PARAMS
from rmqspec.traces.generator import GenConfig, generate_rows
from tests.spark.judge_runs import checked_rows, drawn_rows, judged_rows
from tests.traces.timer_runs import model_timer_trace
from tests.untraced import budget_run

_STRINGS = {"trace", "event", "group", "topic", "client_id", "status", "msg_key", "txn_id", "check_times", "detail"}
# A drawn trace mixes all four families, or keeps to one (each replay's findings need a few of its rows).
_FAMILIES = {
    "lock": ("lock", "lock", "lock", "unlock", "crash", "recover"),
    "message": ("send_back", "send_back", "store", "store", "store", "schedule_fire", "send", "crash"),
    "txn": ("txn_half", "txn_end", "txn_check", "txn_check", "txn_check", "txn_discard", "crash", "recover"),
    "timer": ("send", "send", "txn_end", "store", "store", "timer_fire", "timer_fire", "crash"),
}
_POP_EVENTS = ("pop", "pop", "pop", "ack", "ack", "change_invisible", "revive", "crash")
_EVENTS = tuple(e for events in _FAMILIES.values() for e in events)
_STATUS = {
    "lock": ("GRANTED", "GRANTED", "DENIED", "DENIED", "EXPIRED", None),
    "send_back": ("RETRY", "RETRY", "DLQ", None),
    "send": ("SEND_OK", "SEND_OK", "FAILED", None),
    "txn_end": ("COMMIT", "COMMIT", "ROLLBACK", "UNKNOWN", None),
    "crash": ("kill",),
}
_POP_STATUS = {
    "pop": ("CONCURRENT", "CONCURRENT", "ORDERLY", None),
    "ack": ("SUCCESS", "SUCCESS", "ACKED", "NO_MESSAGE", None),
    "crash": ("kill", "kill", "power"),
}
_POP_FIELDS = {  # one group and queue mostly
    "group": ("G", "G", "G", "G", "G", None),
    "topic": ("T", "T", "T", "%RETRY%G_T", None),
    "queue_id": (0, 0, 0, 1, None),
    "msg_key": ("K1", "K2", None),
    "reconsume_times": (0, 1, 1, 2, None),
}
_FIELDS = {
    "group": ("G", "G", "H", None),
    "topic": ("T", "SCHEDULE_TOPIC_XXXX", "SCHEDULE_TOPIC_XXXX", "%DLQ%G", "%RETRY%G", "%DLQ%H", TIMER_TOPIC, "U",
              None),
    "queue_id": (0, 1, None),
    "client_id": ("C1", "C2", None),
    "msg_key": ("K1", "K2", None),
    "txn_id": ("K1", "K2", "K1", "K2", "K1", "K2", None),
    "reconsume_times": (0, 1, 1, 2, None),
    "delay_level": (-1, 3, 4, 0, None),
    # absolute due times: a request for 500, 1000, 1500 or 2000 is due at 1000 or 2000 (precision 1000)
    "deliver_ts": (1000, 2000, 5000, None),
}
# The timer requests' ``detail.timer`` (``inv_replay_timer.timer_vars``): the requested time this far after
# the row's ts (None: not a Java long; at most 0: stored at once; past 100 s: illegal), maybe a refusal's error.
_REQUESTED = (-1, 0, 1, 500, 1500, 2000, 200_000, None)


def _pop_detail(draw: Any, row: dict[str, Any], handles: list[str]) -> None:
    """A pop row's handle (ExtraInfoUtil's text: start 0, the pop time, the invisible time, the revive queue
    — 999 orderly —, the retry flag, broker, queue, offset), its attempt and its ``deliver_ts``; an ack's or a
    change's handle one of those handed out (or another), a change's new handle; any of them maybe absent."""
    inv = draw(st.sampled_from((1000, 30_000, 60_000)))
    orderly = row["status"] == "ORDERLY" or (row["status"] is None and draw(st.booleans()))
    new = (f"0 {row['ts']} {inv} {999 if orderly else 0} {draw(st.sampled_from((0, 0, 1)))} b "
           f"{row['queue_id'] or 0} {draw(st.sampled_from((0, 0, 1)))}")
    if row["event"] == "pop":
        handles.append(new)
        row["queue_offset"] = int(new.rsplit(" ", 1)[1])
        row["deliver_ts"] = draw(st.sampled_from((row["ts"] + inv, row["ts"] + inv, None)))
        detail: dict[str, Any] = {"handle": new}
        if orderly and draw(st.integers(0, 4)):
            detail["attempt_id"] = draw(st.sampled_from(("A1", "A1", "A2", None)))
    else:
        detail = {"handle": draw(st.sampled_from((*handles, "0 5 1000 0 0 b 0 0")))}
        row["queue_offset"] = int(detail["handle"].rsplit(" ", 1)[1])
        if row["event"] == "change_invisible":
            detail["new_handle"] = new
            row["deliver_ts"] = row["ts"] + inv
    if draw(st.integers(0, 7)):
        row["detail"] = detail


@st.composite
def _trace(draw: Any) -> list[dict[str, Any]]:
    family = draw(st.sampled_from((*_FAMILIES, "all")))
    rows = drawn_rows(draw, events=_FAMILIES.get(family, _EVENTS), gaps=(0, 1, 30_000, 60_000, 60_001),
                      statuses=_STATUS, fields=_FIELDS, most=40)  # fmt: skip
    for row in rows:
        if family == "timer":  # one key mostly: a request, its copy, a fire, a crash, a fire again
            row["msg_key"] = draw(st.sampled_from(("K1", "K1", "K1", "K2", None)))
        if row["event"] == "txn_check" and draw(st.booleans()):
            row["detail"] = {"check_times": draw(st.sampled_from((0, 1, 2, 3, "2", "x")))}
        elif row["event"] == "send_back" and draw(st.booleans()):
            row["detail"] = {k: draw(st.sampled_from(v)) for k, v in
                             (("code", ("SUCCESS", "SYSTEM_ERROR")), ("requested_level", (0, -1, 3)), ("max", (1, 16)))}
        elif row["event"] in ("send", "txn_end") and draw(st.booleans()):
            after = draw(st.sampled_from(_REQUESTED))
            requested = None if after is None else row["ts"] + after
            row["detail"] = {"timer": {"requested": requested, "parsed": requested is not None,
                                       "precision": draw(st.sampled_from((1000, 1000, 500))), "max_delay_ms": 100_000}}
            if row["status"] == "FAILED":
                row["detail"]["error"] = draw(st.sampled_from(("MESSAGE_ILLEGAL", "SYSTEM_ERROR", None)))
    return rows


@st.composite
def _pop_trace(draw: Any) -> list[dict[str, Any]]:
    """Pop rows: handles on the pops, acks and changes of the handles popped before, revives, crashes."""
    rows = drawn_rows(draw, events=_POP_EVENTS, gaps=(0, 1, 500, 1000, 30_000), statuses=_POP_STATUS,
                      fields=_POP_FIELDS, most=30)  # fmt: skip
    handles: list[str] = []
    for row in rows:
        if row["event"] in ("pop", "ack", "change_invisible"):
            _pop_detail(draw, row, handles)
    return rows


def _shipped(rows: list[dict[str, Any]], columns: tuple[str, ...], keep: Any) -> list[dict[str, Any]]:
    epochs = epochs_of(rows)
    out = []
    crashes = 0
    for row, epoch in zip(rows, epochs, strict=True):
        if keep(row):
            full = {**{c: row.get(c) for c in columns}, "trace": "", "epoch": epoch, "crashes": crashes}
            detail = row.get("detail") or {}
            if "detail" in columns:
                full["detail"] = json.dumps(detail) if detail and _shipped_detail(row, detail) else None
            if "check_times" in columns:
                value = detail.get("check_times")
                full["check_times"] = None if value is None else value if isinstance(value, str) else json.dumps(value)
            out.append({c: full[c] for c in columns})
        crashes += row["event"] == "crash"
    return out


def _shipped_detail(row: dict[str, Any], detail: Any) -> bool:
    """Whether a row's ``detail`` goes with it: a send-back's (``inputs.send_back_detail``), a timer
    request's (``inputs.timer_detail``: a send or COMMIT whose detail text names "timer")."""
    if row["event"] == "send_back":
        return True
    request = row["event"] == "send" or (row["event"] == "txn_end" and row.get("status") == "COMMIT")
    return request and '"timer"' in (detail if isinstance(detail, str) else json.dumps(detail))


def _timer_row(row: dict[str, Any]) -> bool:
    """``rules_table._timer_rows``: a timer request, a copy in rmq_sys_wheel_timer or a fire, with a msg_key."""
    copy = row["event"] == "store" and row.get("topic") == TIMER_TOPIC
    request = row["event"] in ("send", "txn_end") and _shipped_detail(row, row.get("detail") or {})
    return row.get("msg_key") is not None and (request or copy or row["event"] == "timer_fire")


def _message_row(row: dict[str, Any]) -> bool:
    topic = row.get("topic")
    copy = topic is None or topic == "SCHEDULE_TOPIC_XXXX" or topic.startswith(("%DLQ%", "%RETRY%"))
    delayed = row["event"] == "send" and (row.get("delay_level") is None or row["delay_level"] > 0)
    return row.get("msg_key") is not None and (row["event"] in ("send_back", "schedule_fire")
                                               or (row["event"] == "store" and copy) or delayed)


def _judged(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    good, rejected = validate(rows)
    assert not rejected
    unkeyed = {"": unkeyed_of(good)}
    lock = _shipped(good, LOCK_COLUMNS, lambda r: r["event"] in ("lock", "unlock", "crash", "recover"))
    message = _shipped(good, MESSAGE_COLUMNS, _message_row)
    txn = _shipped(good, TXN_COLUMNS, lambda r: r["event"].startswith("txn_") and r.get("txn_id") is not None)
    found = [
        *judged_rows(_by_trace(_locks(_PARAMS)), lock, LOCK_COLUMNS, _STRINGS),
        *judged_rows(_by_trace(_messages(_PARAMS, unkeyed)), message, MESSAGE_COLUMNS, _STRINGS),
        *judged_rows(_Txns(_PARAMS, unkeyed), txn, TXN_COLUMNS, _STRINGS),
        *_timer_judged(good),
        *_pop_judged(good),
    ]
    return sorted((f["code"], tuple(f["seqs"]), f["group"], f["topic"], f["queue_id"], f["msg_key"], f["client_id"],
                   f["txn_id"], f["reason"]) for f in found)  # fmt: skip


def _timer_judged(good: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The timer replay's findings as its judge gives them, on the rows ``rules_table`` ships it."""
    return judged_rows(_by_trace(_timers(_PARAMS)), _shipped(good, TIMER_COLUMNS, _timer_row), TIMER_COLUMNS,
                       _STRINGS)


def _pop_judged(good: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pop replay's findings as its judge gives them, on the rows ``rules_table`` ships it (every pop
    row's ``detail`` as JSON text)."""
    shipped = [{**{c: r.get(c) for c in POP_COLUMNS}, "trace": "",
                "detail": json.dumps(r["detail"]) if r.get("detail") else None}
               for r in good if r["event"] in POP_EVENTS]  # fmt: skip
    return judged_rows(_by_trace(lambda _trace, rows: judge_pops(rows)), shipped, POP_COLUMNS, _STRINGS)


def _checked(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (f.code, f.seqs, *(f.keys.get(k) for k in ("group", "topic", "queue_id", "msg_key", "client_id", "txn_id")),
         f.reason)
        for f in checked_rows(rows, {"MESSAGE_LIFECYCLE", "LOCK_LIFECYCLE", "TXN_LIFECYCLE"}, _PARAMS)
    )  # fmt: skip


@given(_trace())
def test_the_table_judges_find_what_the_checker_finds(rows):
    assert _judged(rows) == _checked(rows)


@budget_run
def test_every_replay_is_reached_by_the_drawn_traces():
    """The drawn traces give findings of all three codes, the TIMER table's among MESSAGE_LIFECYCLE's (its
    reasons name a ``timer:`` row): else the test above proves little."""
    seen: set[str] = set()

    @settings(max_examples=300)
    @given(_trace())
    def collect(rows: list[dict[str, Any]]) -> None:
        found = _checked(rows)
        seen.update(code for code, *_ in found)
        seen.update("timer" for *_, reason in found if "timer: " in reason)
        seen.update("refire" for *_, reason in found if "timer: REFIRABLE" in reason)
        seen.update("fired_elsewhere" for *_, reason in found if "a delayed copy fires into" in reason)

    collect()
    assert seen == {"MESSAGE_LIFECYCLE", "LOCK_LIFECYCLE", "TXN_LIFECYCLE", "timer", "refire", "fired_elsewhere"}


@given(_pop_trace())
def test_the_pop_judge_finds_what_the_checker_finds(rows):
    assert _judged(rows) == _checked(rows)


@budget_run
def test_both_pop_tables_are_reached_by_the_drawn_pop_traces():
    """The drawn pop traces give findings of the POP table (MESSAGE_LIFECYCLE) and of POP_ORDER
    (LOCK_LIFECYCLE), each reason naming its table's row: else the test above proves little."""
    seen: set[str] = set()

    @settings(max_examples=300)
    @given(_pop_trace())
    def collect(rows: list[dict[str, Any]]) -> None:
        seen.update(f"{code} {reason.split(':')[0]}" for code, *_, reason in _checked(rows))

    collect()
    assert seen == {"MESSAGE_LIFECYCLE pop", "LOCK_LIFECYCLE pop_order"}


def _timer_findings(rows: list[dict[str, Any]]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(the timer judge's, the checker's) MESSAGE_LIFECYCLE findings of the TIMER table on ``rows``."""
    good, rejected = validate(rows)
    assert not rejected
    judged = sorted((f["code"], tuple(f["seqs"]), f["topic"], f["msg_key"], f["reason"]) for f in _timer_judged(good))
    checked = sorted((f.code, f.seqs, f.keys.get("topic"), f.keys.get("msg_key"), f.reason)
                     for f in checked_rows(rows, {"MESSAGE_LIFECYCLE"}, _PARAMS) if f.reason.startswith("timer: "))
    return judged, checked


def test_the_timer_judge_puts_the_crash_rows_back():
    """A fired copy fires again after a crash into another queue: the finding names the REFIRABLE row, which
    only the crash makes the source (without it the request is FIRED and the row named WHEEL's); two crashes
    act as one, a crash before the key's first row on no request. The judge sees no crash row."""
    timer = {"timer": {"requested": 1500, "parsed": True, "precision": 1000, "max_delay_ms": 100_000}}
    rows = [
        {"seq": 0, "ts": 0, "event": "crash", "status": "kill"},
        {"seq": 1, "ts": 10, "event": "send", "topic": "T", "queue_id": 0, "msg_key": "K1", "status": "SEND_OK",
         "deliver_ts": 2000, "detail": timer},
        {"seq": 2, "ts": 10, "event": "store", "topic": TIMER_TOPIC, "queue_id": 0, "msg_key": "K1",
         "deliver_ts": 2000},
        {"seq": 3, "ts": 2000, "event": "timer_fire", "topic": "T", "queue_id": 0, "msg_key": "K1",
         "reconsume_times": 0, "deliver_ts": 2000},
        {"seq": 4, "ts": 2100, "event": "crash", "status": "kill"},
        {"seq": 5, "ts": 2200, "event": "crash", "status": "power"},
        {"seq": 6, "ts": 2300, "event": "timer_fire", "topic": "T", "queue_id": 1, "msg_key": "K1",
         "reconsume_times": 0, "deliver_ts": 2000},
    ]
    judged, checked = _timer_findings(rows)
    assert judged == checked and len(checked) == 1
    assert checked[0][1] == (1, 6) and "timer: REFIRABLE --fire[due]--> FIRED" in checked[0][4]
    judged, checked = _timer_findings([r for r in rows if r["seq"] not in (4, 5)])
    assert judged == checked and "timer: WHEEL --fire[due]--> FIRED" in checked[0][4]


@pytest.mark.parametrize("seed", range(6))
def test_the_timer_replay_finds_nothing_in_the_models_timer_traces(seed):
    """What the model did under a 5.x profile (its sends carrying ``detail.timer``; kills, power losses,
    clean restarts; copies fired again after a crash) is the TIMER table's: no finding, in both."""
    rows = model_timer_trace(seed, drain_early=seed % 2 == 1, requests=True)
    assert sum(bool((r.get("detail") or {}).get("timer")) for r in rows) >= 3
    assert _timer_findings(rows) == ([], [])


def _broken(rows: list[dict[str, Any]], seed: int) -> tuple[list[dict[str, Any]], int]:
    """``rows`` with one TIMER-table row broken: a fire into another queue, a fire with reconsume_times 1,
    or a request for the wheel acknowledged past the max delay (the seq of the row changed)."""
    rows = [dict(r) for r in rows]
    fires = [r for r in rows if r["event"] == "timer_fire"]
    wheel = [r for r in rows if r["event"] == "send" and (r.get("detail") or {}).get("timer")
             and r["deliver_ts"] is not None and not r["delay_level"]]  # fmt: skip
    row = fires[seed % len(fires)] if seed % 3 < 2 else wheel[seed % len(wheel)]
    if seed % 3 == 0:
        row["queue_id"] = 7
    elif seed % 3 == 1:
        row["reconsume_times"] = 1
    else:
        row["detail"] = {"timer": {**row["detail"]["timer"], "max_delay_ms": 0}}
    return rows, row["seq"]


@pytest.mark.parametrize("seed", range(9))
def test_the_timer_replay_finds_what_the_checker_finds_in_broken_model_traces(seed):
    """The model's traces with a TIMER row broken in them: the judge (crash rows only as the ``crashes``
    column) gives the checker's findings, one of them on the broken row."""
    rows, seq = _broken(model_timer_trace(seed, requests=True), seed)
    judged, checked = _timer_findings(rows)
    assert judged == checked
    assert any(seq in f[1] for f in checked), (seq, checked)


@pytest.mark.parametrize("code", ["TIMER_EARLY", "TIMER_DUPLICATED", "TIMER_UNFIRED"])
def test_the_timer_replay_agrees_on_generated_timer_traces(code):
    """Generated 5.x traces (timer messages, crashes that make the wheel fire again) with an injected
    timer violation: no ``detail.timer``, so no request is judged — in both."""
    rows, _ = generate_rows(GenConfig(events=3000, seed=3, crashes=2, p_timer=0.2, inject=(code,)))
    assert _timer_findings(rows) == ([], [])
