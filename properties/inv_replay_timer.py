"""The TIMER table replayed on timer requests, their wheel copies and fires: MESSAGE_LIFECYCLE.

Theory of operation
-------------------
``model/lifecycle.py``'s TIMER (5.x; HookUtils.handleScheduleMessage + TimerMessageStore) is one
timer request's lifecycle: ``SENT --put[level | at_once | illegal | wheel]-->`` SCHEDULED (DELAY
wins), STORED (at once, in its own topic), REFUSED (MESSAGE_ILLEGAL) or WHEEL (in
rmq_sys_wheel_timer; effect ``slot``: deliver_ts = the requested time's slot + one precision),
then ``WHEEL --fire[due]--> FIRED``, a crash making a fired copy REFIRABLE (it may fire again).
Its findings are MESSAGE_LIFECYCLE: the timer table is the first part of a timer message's
lifecycle (its fired copy starts MESSAGE's at STORED).

A trace shows a request as a ``send`` (or a COMMIT ``txn_end``) carrying ``detail.timer``: the
``requested`` deliver time, ``parsed`` (false: not a Java long), ``precision`` and
``max_delay_ms`` — what the guards read (the conformance machine writes it; a trace without it is
not judged) — with the put's ``ts`` as ``now`` and its ``delay_level``. Per msg_key, rows in
``seq`` order:

- **the put** (the four ``put`` guards): the table's row is ``TIMER.enabled``'s for those values. A
  refused send (``status`` FAILED, ``detail.error`` MESSAGE_ILLEGAL) where the row is not
  ``illegal``, or an acknowledged one where it is, is a finding; another refusal is no timer matter
  (not judged);
- **the timer copy** (a ``store`` in rmq_sys_wheel_timer): it answers the key's oldest request in
  WHEEL not yet answered, and its ``deliver_ts`` must be the ``slot`` effect's (a null is not
  compared). With none in WHEEL, it answers the latest unanswered request the table put elsewhere
  (SCHEDULED: DELAY wins; STORED: at once) — a finding: no row of the table stores it in the
  wheel. A copy no request of the key explains is not judged (a trace may lack the requests);
- **the fire** (``timer_fire``, ``fire[due]``): the copy goes to the request's topic and queue
  (REAL_TOPIC / REAL_QID) with the timer copy's reconsume_times (0); a fire into another place than
  every fired-or-waiting request's is a finding. Early is TIMER_EARLY's; a second fire without a
  crash TIMER_DUPLICATED's (``inv_timer.py``); ``crash`` rows make FIRED requests REFIRABLE.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from rmqspec.model.lifecycle import TIMER, Refused, TimerVars
from rmqspec.model.timer import TIMER_TOPIC
from rmqspec.properties.codes import AuditParams, Code
from rmqspec.properties.inv_replay import Row, TableFinding, detail_of, found, int_or_none, row_label, table_row

__all__ = ["TIMER_KEYS", "TimerReplay", "judge_timers", "timer_vars"]

TIMER_KEYS = ("topic", "msg_key")
_PUT = {t.guard: t for t in TIMER.transitions if t.action == "put"}


def timer_vars(row: Row) -> TimerVars | None:
    """The TIMER variables a request row carries (``detail.timer``), None when it carries not all."""
    timer = detail_of(row).get("timer")
    if not isinstance(timer, Mapping):
        return None
    parsed = timer.get("parsed")
    requested = int_or_none(timer.get("requested"))
    precision, max_delay = int_or_none(timer.get("precision")), int_or_none(timer.get("max_delay_ms"))
    if not isinstance(parsed, bool) or (parsed and requested is None) or not precision or max_delay is None:
        return None
    level = int_or_none(row.get("delay_level")) or 0 if row["event"] == "send" else 0
    return TimerVars(requested=requested or 0, parsed=int(parsed), level=level, precision=precision,
                     max_delay=max_delay)


@attrs.define
class _Request:
    row: Row
    state: str
    vars: TimerVars
    answered: bool = False


class TimerReplay:
    """Resumable: ``feed`` takes the next rows (seq order) and returns the findings they add."""

    def __init__(self, params: AuditParams | None = None) -> None:
        self.keys: dict[str, list[_Request]] = {}

    def feed(self, rows: Iterable[Row]) -> list[TableFinding]:
        out: list[TableFinding] = []
        for row in rows:
            event = row["event"]
            if event == "crash":
                for requests in self.keys.values():
                    for r in requests:
                        r.state = _step(r.state, "crash", r.vars, row)
                continue
            key = row.get("msg_key")
            if key is None:
                continue
            finding = None
            if event == "send" or (event == "txn_end" and row.get("status") == "COMMIT"):
                finding = self._put(key, row)
            elif event == "store" and row.get("topic") == TIMER_TOPIC:
                finding = self._copy(self.keys.get(key, []), row)
            elif event == "timer_fire":
                finding = self._fire(self.keys.get(key, []), row)
            if finding is not None:
                out.append(finding)
        return out

    def _put(self, key: str, row: Row) -> TableFinding | None:
        v = timer_vars(row)
        if v is None:
            return None
        try:
            t = TIMER.enabled("SENT", "put", v, {"now": int(row["ts"])})
        except Refused:
            return None
        state, after = TIMER.step("SENT", v, "put", {"now": int(row["ts"])})
        status = row.get("status")
        if status == "FAILED":
            if detail_of(row).get("error") != "MESSAGE_ILLEGAL" or t.guard == "illegal":
                return None
            asked = v.requested if v.parsed else "not a long"
            return _found(None, row, f"{row_label(TIMER, t)} is the enabled row (requested {asked}, now {row['ts']}, "
                                     f"max delay {v.max_delay} ms, level {v.level}), but the put was refused "
                                     "MESSAGE_ILLEGAL")
        self.keys.setdefault(key, []).append(_Request(row, state, after))
        if t.guard == "illegal":
            return _found(None, row, f"{row_label(TIMER, t)} is the enabled row (requested "
                                     f"{v.requested if v.parsed else 'not a long'}, now {row['ts']}, max delay "
                                     f"{v.max_delay} ms), but the put was acknowledged")
        return None

    def _copy(self, requests: list[_Request], row: Row) -> TableFinding | None:
        waiting = [r for r in requests if not r.answered and r.state in ("WHEEL", "FIRED", "REFIRABLE")]
        if waiting:
            r = waiting[0]
            r.answered = True
            due = int_or_none(row.get("deliver_ts"))
            if due is not None and due != r.vars.deliver_ts:
                t = _PUT["wheel"]
                return _found(r.row, row, f"{row_label(TIMER, t)} / {t.effect} gives deliver_ts {r.vars.deliver_ts} "
                                          f"(requested {r.vars.requested}, precision {r.vars.precision}), but the "
                                          f"timer copy is due at {due}")
            return None
        elsewhere = [r for r in requests if not r.answered and r.state in ("SCHEDULED", "STORED")]
        if not elsewhere:
            return None
        r = elsewhere[-1]
        r.answered = True
        t = _PUT["level"] if r.state == "SCHEDULED" else _PUT["at_once"]
        return _found(r.row, row, f"{row_label(TIMER, t)} is the enabled row (level {r.vars.level}, requested "
                                  f"{r.vars.requested}, now {r.row['ts']}), but the message waits in {TIMER_TOPIC}")

    def _fire(self, requests: list[_Request], row: Row) -> TableFinding | None:
        live = [r for r in requests if r.state in ("WHEEL", "FIRED", "REFIRABLE")]
        if not live:
            return None
        topic, queue = row.get("topic"), int_or_none(row.get("queue_id"))
        rt = int_or_none(row.get("reconsume_times"))
        fits = [r for r in live
                if _same(topic, r.row.get("topic")) and _same(queue, int_or_none(r.row.get("queue_id")))]
        source = next((r.state for r in (fits or live) if r.state != "FIRED"), "WHEEL")
        for r in (fits or live):
            if r.state != "FIRED":
                r.state = "FIRED"
                break
        if fits and rt in (None, 0):
            return None
        want = sorted({f"{r.row.get('topic')}/{r.row.get('queue_id')}" for r in live})
        t = table_row(TIMER, source, "fire", "due")
        return _found(live[0].row, row, f"{row_label(TIMER, t)} puts the copy to REAL_TOPIC / REAL_QID "
                                        f"({', '.join(want)}) with reconsume_times 0, but it was fired into "
                                        f"{topic}/{queue} with reconsume_times {rt}")


def _same(a: Any, b: Any) -> bool:
    return a is None or b is None or a == b


def _step(state: str, action: str, v: TimerVars, row: Row) -> str:
    try:
        return TIMER.step(state, v, action, {"now": int(row["ts"])})[0]
    except Refused:
        return state


def _found(proof: Row | None, row: Row, reason: str) -> TableFinding:
    return found(Code.MESSAGE_LIFECYCLE.value, [proof], row, TIMER_KEYS, reason)


def judge_timers(rows: Iterable[Row], params: AuditParams | None = None) -> list[TableFinding]:
    """MESSAGE_LIFECYCLE findings of the TIMER table on ``rows`` (seq order; other events skipped)."""
    return TimerReplay(params).feed(rows)
