"""5.x timer messages: the ghost invariants (properties/inv_timer.py), the TIMER table (model/lifecycle.py)
and its replay (properties/inv_replay_timer.py) on hand-written histories — each fires on the anomaly and
stays quiet on the histories a correct broker makes (the at-least-once fire after a crash included)."""

from __future__ import annotations

import attrs
import pytest

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig, default_config
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder, TraceEvent
from rmqspec.model.lifecycle import (
    TIMER,
    TIMER_AT_ONCE,
    TIMER_ILLEGAL,
    TIMER_LEVEL,
    TIMER_WHEEL,
    Refused,
    TimerVars,
    timer_decision,
    timer_due,
)
from rmqspec.model.message import Message
from rmqspec.model.timer import TIMER_TOPIC, due_ms, out_ms
from rmqspec.properties import invariants as inv
from rmqspec.properties.history import History
from rmqspec.properties.inv_replay_timer import judge_timers
from rmqspec.properties.inv_tables import EventRow

K, L = "A" * 32, "B" * 32
MAX = 3 * 24 * 3_600_000


def _timer(requested: int | None, precision: int = 1000) -> dict:
    return {"timer": {"requested": requested, "parsed": requested is not None, "precision": precision,
                      "max_delay_ms": MAX}}


def _h() -> History:
    h = History.for_config(BrokerConfig(version="rocketmq-5.2"))
    h.subscriptions["G"] = {"T"}
    return h


def _send(h: History, key: str = K, ts: int = 1000, requested: int = 5001, **extra: object) -> None:
    """An acknowledged timer send of the model: deliver_ts = its slot + one precision."""
    h.emit("send", ts, topic="T", queue_id=0, queue_offset=0, msg_key=key, status="SEND_OK",
           deliver_ts=timer_due(requested, 1000), detail=_timer(requested), **extra)


def _copy(h: History, key: str = K, ts: int = 1000, offset: int = 0, due: int = 6000) -> None:
    h.emit("store", ts, topic=TIMER_TOPIC, queue_id=0, queue_offset=offset, commitlog_offset=100 * offset,
           msg_key=key, reconsume_times=0, deliver_ts=due)


def _fire(h: History, ts: int, key: str = K, due: int = 6000, offset: int | None = 0, topic: str = "T") -> None:
    detail = {"from_commitlog_offset": 100 * offset} if offset is not None else {}
    h.emit("timer_fire", ts, topic=topic, queue_id=0, queue_offset=0, msg_key=key, reconsume_times=0,
           deliver_ts=due, detail=detail)


def _codes(h: History) -> list[str]:
    return [v.code for v in inv.evaluate(h, ("always", "eventually"))]


# -- the table -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("level", "requested", "expected"), [
    (0, 1000, TIMER_AT_ONCE),  # now: stored as is
    (0, -5, TIMER_AT_ONCE),  # the past
    (0, 1001, TIMER_WHEEL),
    (0, 1000 + MAX, TIMER_WHEEL),  # exactly timerMaxDelaySec ahead
    (0, 1001 + MAX, TIMER_ILLEGAL),  # one ms past it
    (0, None, TIMER_ILLEGAL),  # not a Java long
    (3, None, TIMER_LEVEL),  # DELAY wins, even over an unparsable property
    (1, 1001 + MAX, TIMER_LEVEL),
])
def test_the_put_decision(level: int, requested: int | None, expected: str) -> None:
    assert timer_decision(level, requested, 1000, MAX) == expected


@pytest.mark.parametrize("precision", [100, 200, 500, 1000])
@pytest.mark.parametrize("offset", [-1, 0, 1])
def test_the_slot_effect_is_the_requested_time_rounded_up(precision: int, offset: int) -> None:
    requested = 1_700_000_000_000 + 7 * precision + offset
    state, after = TIMER.step("SENT", TimerVars(requested=requested, precision=precision), "put",
                              {"now": 1_700_000_000_000})
    assert state == "WHEEL" and after.deliver_ts == due_ms(out_ms(requested, precision), precision)
    assert after.deliver_ts >= requested and after.deliver_ts - requested < precision
    assert after.deliver_ts % precision == 0


def test_fires_need_the_due_time_and_only_a_crash_makes_a_second_one_possible() -> None:
    v = TimerVars(deliver_ts=6000)
    with pytest.raises(Refused):
        TIMER.step("WHEEL", v, "fire", {"now": 5999})
    assert TIMER.step("WHEEL", v, "fire", {"now": 6000})[0] == "FIRED"
    with pytest.raises(Refused):
        TIMER.step("FIRED", v, "fire", {"now": 7000})
    assert TIMER.step("FIRED", v, "crash", {"now": 7000})[0] == "REFIRABLE"
    assert TIMER.step("REFIRABLE", v, "fire", {"now": 7000})[0] == "FIRED"
    assert TIMER.step("WHEEL", v, "crash", {"now": 100})[0] == "WHEEL"


# -- TIMER_EARLY -----------------------------------------------------------------------------------


def test_a_fire_before_its_deliver_ts_is_early() -> None:
    h = _h()
    _send(h)
    _copy(h)
    _fire(h, 5999)
    (v,) = inv.check_timer_early(h)
    assert v.code == "TIMER_EARLY" and v.seq == 2 and v.expected == "ts >= 6000"
    h2 = _h()
    _send(h2)
    _copy(h2)
    _fire(h2, 6000)
    assert inv.check_timer_early(h2) == []


def test_a_delivery_before_the_send_is_due_is_early_even_without_a_fire() -> None:
    """A client's trace shows no fire: the send's deliver_ts bounds the first delivery of the key."""
    h = _h()
    _send(h)
    h.emit("deliver", 5000, group="G", topic="T", queue_id=0, queue_offset=0, msg_key=K, reconsume_times=0)
    (v,) = inv.check_timer_early(h)
    assert v.seq == 1 and "delivered 1000 ms before" in v.reason
    h2 = _h()
    _send(h2)
    h2.emit("deliver", 6000, group="G", topic="T", queue_id=0, queue_offset=0, msg_key=K, reconsume_times=0)
    assert inv.check_timer_early(h2) == []


def test_a_plain_resend_of_the_key_drops_the_bound() -> None:
    h = _h()
    _send(h)
    h.emit("send", 1500, topic="T", queue_id=0, queue_offset=1, msg_key=K, status="SEND_OK")
    h.emit("deliver", 1600, group="G", topic="T", queue_id=0, queue_offset=1, msg_key=K, reconsume_times=0)
    assert inv.check_timer_early(h) == []


# -- TIMER_DUPLICATED ------------------------------------------------------------------------------


def test_a_second_fire_without_a_crash_is_duplicated_and_after_a_crash_is_not() -> None:
    h = _h()
    _send(h)
    _copy(h)
    _fire(h, 6000)
    _fire(h, 6500)
    assert [v.code for v in inv.check_timer_duplicated(h)] == ["TIMER_DUPLICATED"]
    h2 = _h()
    _send(h2)
    _copy(h2)
    _fire(h2, 6000)
    h2.emit("crash", 6100, status="kill")
    h2.emit("recover", 6100, status="kill")
    _fire(h2, 6200)  # fired after the last checkpoint: delivered again (at-least-once)
    assert inv.check_timer_duplicated(h2) == []


def test_duplicates_are_counted_per_key_when_the_fire_names_no_timer_copy() -> None:
    h = _h()
    _send(h)
    _copy(h)
    _fire(h, 6000, offset=None)
    _fire(h, 6500, offset=None)
    (v,) = inv.check_timer_duplicated(h)
    assert v.seq == 3 and "2 times from 1 timer copies" in v.reason
    h2 = _h()  # two copies of the key (two timer sends), two fires: fine
    _send(h2)
    _copy(h2)
    _send(h2, requested=7001)
    _copy(h2, offset=1, due=8000)
    _fire(h2, 6000, offset=None)
    _fire(h2, 8000, offset=None)
    assert inv.check_timer_duplicated(h2) == []


# -- TIMER_UNFIRED and LOST ------------------------------------------------------------------------


def test_a_due_timer_message_never_fired_by_the_drain_is_unfired() -> None:
    h = _h()
    _send(h)
    _copy(h)
    assert inv.check_timer_unfired(h) == []  # needs the drain
    h.emit("drain", 10_000)
    (v,) = inv.check_timer_unfired(h)
    assert v.code == "TIMER_UNFIRED" and v.seq == 0
    assert "LOST" in _codes(h)


def test_a_timer_message_not_due_at_the_drain_is_judged_by_neither() -> None:
    h = _h()
    _send(h, requested=50_001)  # due at 51 000
    h.emit("drain", 10_000)
    assert inv.check_timer_unfired(h) == [] and inv.check_no_loss(h) == []
    assert inv.timer_not_due(h.events, 10_000) == {K}


def test_a_fired_and_consumed_timer_message_is_neither_lost_nor_unfired() -> None:
    h = _h()
    _send(h)
    _copy(h)
    h.emit("store", 6000, topic="T", queue_id=0, queue_offset=0, msg_key=K, reconsume_times=0)
    _fire(h, 6000)
    h.emit("consume", 6100, group="G", topic="T", queue_id=0, queue_offset=0, msg_key=K, status="SUCCESS")
    h.emit("drain", 10_000)
    assert _codes(h) == []


def test_a_copy_at_risk_is_exempt() -> None:
    h = _h()
    _send(h)
    h.emit("crash", 2000, status="power", detail={"at_risk": [K]})
    h.emit("drain", 10_000)
    assert inv.check_timer_unfired(h) == [] and inv.check_no_loss(h) == []


def test_a_copy_at_a_position_a_power_loss_freed_is_not_exempt() -> None:
    """Stored after a power loss at a freed timer-queue position, then a kill before the next checkpoint:
    the wheel still fires it (the model below), so unfired at the drain it is TIMER_UNFIRED — as the
    reference checker judges the same rows (``checker_cases_timer``)."""
    h = _h()
    _send(h, key=L)
    _copy(h, key=L, offset=0)
    h.emit("crash", 1500, status="power", detail={"at_risk": [L]})
    _send(h, ts=1600)
    _copy(h, ts=1600, offset=0)
    h.emit("crash", 1700, status="kill")
    assert inv.skipped_by_saved_timer_progress(h.events) == {K}
    h.emit("drain", 10_000)
    (v,) = inv.check_timer_unfired(h)
    assert v.seq == 3 and K in v.reason


def test_the_model_fires_a_copy_at_a_freed_position_after_a_second_crash() -> None:
    """What the exemption TIMER_UNFIRED no longer makes rested on: an ASYNC broker loses the unflushed
    timer copy L in a power loss after the checkpoint counted it (its saved pointer is 1, the queue
    empty); K is stored at the freed position 0; a kill before the next checkpoint reads pointer 1
    again — and the restart rebuilds the wheel from the queue below it, K included: K fires."""
    clock = ManualClock(1_700_000_000_000)
    recorder = ListRecorder()
    broker = ModelBroker(clock, attrs.evolve(default_config("rocketmq-5.2"), flush="ASYNC"), recorder)
    Directory().create_topic(broker, "T", 1)

    def send(key: str, delay_ms: int) -> int:
        msg = Message("T", b"x", properties={"TIMER_DELAY_MS": str(delay_ms)}, uniq_key=key)
        return broker.send(msg, 0).queue_offset

    assert send(L, 20_000) == 0
    clock.advance(2500)
    broker.tick()  # the wheel reads L, the checkpoint saves pointer 1
    assert broker.timer.persisted[0] == 1
    broker.crash("power")
    broker.recover(broker.recovery_choices()[0])  # L was never flushed
    assert send(K, 3000) == 0  # the freed position
    clock.advance(300)
    broker.crash("kill")  # before the next checkpoint: the saved pointer is still 1
    broker.recover()
    assert broker.timer.persisted[0] == 1
    for _ in range(40):
        clock.advance(100)
        broker.tick()
    assert [e.msg_key for e in recorder.events if e.event == "timer_fire"] == [K]
    assert inv.skipped_by_saved_timer_progress(TraceEvent(**e.as_row()) for e in recorder.events) == {K}


def test_a_timer_send_reports_its_timer_copy_offsets_without_an_order_gap() -> None:
    """The send's queue_offset is the timer copy's: the real topic's position holds another message."""
    h = _h()
    h.emit("store", 500, topic="T", queue_id=0, queue_offset=0, msg_key=L, msg_id="m0")
    _send(h)  # queue_offset 0 of rmq_sys_wheel_timer
    assert inv.check_queue_order(h) == []


# -- the replay: MESSAGE_LIFECYCLE ---------------------------------------------------------------------


def _replay(h: History) -> list[str]:
    return [f.reason for f in judge_timers([EventRow(e) for e in h.events])]


def test_a_correct_timer_history_replays_clean() -> None:
    h = _h()
    _send(h)
    _copy(h)
    _fire(h, 6000)
    h.emit("crash", 6100, status="kill")
    _fire(h, 6200)
    h.emit("send", 1000, topic="T", queue_id=0, msg_key=L, status="FAILED",
           detail={**_timer(1001 + MAX), "error": "MESSAGE_ILLEGAL"})
    assert _replay(h) == []
    assert [v.code for v in inv.BY_NAME["MessageLifecycleProperty"].check(h)] == []


def test_a_refusal_that_is_no_timer_matter_is_not_judged() -> None:
    h = _h()
    h.emit("send", 1000, topic="T", queue_id=0, msg_key=K, status="FAILED",
           detail={**_timer(5001), "error": "TOPIC_NOT_EXIST"})
    assert _replay(h) == []


def test_requests_without_their_timer_detail_are_not_judged() -> None:
    """Removing information never adds a finding: a send without ``detail.timer``, then a copy in the wheel."""
    h = _h()
    h.emit("send", 1000, topic="T", queue_id=0, msg_key=K, status="SEND_OK", delay_level=1)
    _copy(h)
    _fire(h, 6000, topic="U")
    assert _replay(h) == []


def test_a_fire_into_another_topic_is_a_message_lifecycle_finding() -> None:
    h = _h()
    _send(h)
    _copy(h)
    _fire(h, 6000, topic="U")
    (reason,) = _replay(h)
    assert "timer: WHEEL --fire[due]--> FIRED" in reason and "fired into U/0" in reason
