"""5.x timer messages in the model (model/timer.py and its hooks): each rule of the module docstring."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import default_config
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import BrokerError, ResponseCode
from rmqspec.model.timer import (
    LONG_MAX,
    PRECISIONS_MS,
    TIMER_TOPIC,
    due_ms,
    java_long,
    normalize_precision,
    out_ms,
    requested_ms,
)

T0 = 1_700_000_000_000  # a wall-clock-like start (a multiple of every precision)


def _broker(version: str = "rocketmq-5.2", **config: object) -> tuple[ManualClock, ModelBroker]:
    import attrs

    clock = ManualClock(T0)
    broker = ModelBroker(clock, attrs.evolve(default_config(version), **config), ListRecorder())
    broker.create_topic("T", 2)
    return clock, broker


def _run_until(clock: ManualClock, broker: ModelBroker, end: int, step: int = 50) -> None:
    while clock.now() < end:
        clock.advance(min(step, end - clock.now()))
        broker.tick()


def _real(broker: ModelBroker, queue_id: int = 0) -> list:
    return broker.queue_messages(MessageQueue("T", queue_id))


@pytest.mark.parametrize(("ms", "expected"), [(1, 100), (100, 100), (199, 100), (200, 200), (499, 200),
                                              (500, 500), (999, 500), (1000, 1000), (5000, 1000)])
def test_precision_is_normalized_like_the_setter(ms: int, expected: int) -> None:
    assert normalize_precision(ms) == expected


@pytest.mark.parametrize("text", ["12", "-3", "+7", "9223372036854775807", "１５００", "١٢"])
def test_java_long_accepts_what_parse_long_accepts(text: str) -> None:
    assert java_long(text) == int(text)


@pytest.mark.parametrize("text", ["", " 1", "1 ", "1_000", "1.5", "0x10", "9223372036854775808", "abc"])
def test_java_long_refuses_what_parse_long_refuses(text: str) -> None:
    assert java_long(text) is None


def test_requested_time_prefers_delay_sec_then_delay_ms_then_deliver_ms() -> None:
    props = {"TIMER_DELIVER_MS": "5", "TIMER_DELAY_MS": "20", "TIMER_DELAY_SEC": "3"}
    assert requested_ms(props, 100) == 3100
    del props["TIMER_DELAY_SEC"]
    assert requested_ms(props, 100) == 120
    del props["TIMER_DELAY_MS"]
    assert requested_ms(props, 100) == 5


@given(t=st.integers(0, 10**13), p=st.sampled_from(PRECISIONS_MS))
def test_rounding_reads_the_slot_at_the_requested_time_rounded_up(t: int, p: int) -> None:
    out = out_ms(t, p)
    assert out % p == 0 and out < t <= due_ms(out, p) < t + p


def test_a_timer_send_waits_in_the_wheel_and_fires_at_its_rounded_up_time() -> None:
    clock, broker = _broker()
    result = broker.send(Message("T", b"x", properties={"TIMER_DELAY_MS": "2500"}), 1)
    (copy,) = broker.queue_messages(MessageQueue(TIMER_TOPIC, 0))
    assert (result.queue_offset, result.commitlog_offset) == (copy.queue_offset, copy.commitlog_offset)
    assert (copy.prop("TIMER_OUT_MS"), copy.prop("REAL_TOPIC"), copy.prop("REAL_QID")) == (
        str(T0 + 2000), "T", "1")
    _run_until(clock, broker, T0 + 2999)
    assert _real(broker, 1) == []
    _run_until(clock, broker, T0 + 3000)
    (fired,) = _real(broker, 1)
    assert fired.store_ts == T0 + 3000 and fired.body == b"x"
    props = fired.properties
    # the string was built before REAL_TOPIC / REAL_QID left the map: they stay
    assert props["REAL_TOPIC"] == "T" and props["TIMER_OUT_MS"] == str(T0 + 2000)
    assert (props["TIMER_ENQUEUE_MS"], props["TIMER_DEQUEUE_MS"]) == (str(T0), str(T0 + 3000))
    send, fire = (next(e for e in broker.recorder.events if e.event == name) for name in ("send", "timer_fire"))
    assert (send.deliver_ts, send.delay_level, send.topic) == (T0 + 3000, None, "T")
    assert (fire.deliver_ts, fire.ts, fire.topic, fire.queue_offset) == (T0 + 3000, T0 + 3000, "T", 0)
    assert fire.detail["from_commitlog_offset"] == copy.commitlog_offset


def test_a_copy_already_due_when_enqueued_is_stamped_long_max() -> None:
    clock, broker = _broker()
    broker.send(Message("T", b"x", properties={"TIMER_DELAY_MS": "10"}), 0)
    clock.advance(5000)  # no tick in between: the wheel reads it late
    broker.tick()
    (fired,) = _real(broker)
    assert fired.prop("TIMER_ENQUEUE_MS") == str(LONG_MAX)


def test_the_delay_level_wins_and_the_timer_properties_go() -> None:
    _clock, broker = _broker()
    broker.send(Message("T", b"x", delay_level=2, properties={"TIMER_DELAY_SEC": "1", "K": "v"}), 0)
    assert broker.queue_messages(MessageQueue(TIMER_TOPIC, 0)) == []
    (scheduled,) = broker.queue_messages(MessageQueue("SCHEDULE_TOPIC_XXXX", 1))
    assert "TIMER_DELAY_SEC" not in scheduled.properties and scheduled.prop("K") == "v"


@pytest.mark.parametrize("props", [{"TIMER_DELAY_MS": "0"}, {"TIMER_DELAY_SEC": "-5"},
                                   {"TIMER_DELIVER_MS": str(T0)}])
def test_a_time_not_after_now_is_stored_at_once_in_its_own_topic(props: dict) -> None:
    _clock, broker = _broker()
    broker.send(Message("T", b"x", properties=props), 0)
    (stored,) = _real(broker)
    assert "TIMER_OUT_MS" not in stored.properties


@pytest.mark.parametrize(("config", "props", "code"), [
    ({"timer_max_delay_sec": 60}, {"TIMER_DELAY_SEC": "61"}, ResponseCode.MESSAGE_ILLEGAL),
    ({}, {"TIMER_DELAY_MS": "soon"}, ResponseCode.MESSAGE_ILLEGAL),
    ({"timer_wheel_enable": False}, {"TIMER_DELAY_MS": "1000"}, ResponseCode.SYSTEM_ERROR),
])
def test_refusals(config: dict, props: dict, code: ResponseCode) -> None:
    _clock, broker = _broker(**config)
    with pytest.raises(BrokerError) as exc:
        broker.send(Message("T", b"x", properties=props), 0)
    assert exc.value.code == code
    assert broker.records() == ()


def test_the_max_delay_itself_is_accepted() -> None:
    _clock, broker = _broker(timer_max_delay_sec=60)
    broker.send(Message("T", b"x", properties={"TIMER_DELAY_SEC": "60"}), 0)
    assert len(broker.queue_messages(MessageQueue(TIMER_TOPIC, 0))) == 1


def test_the_4_9_profile_stores_timer_properties_as_user_properties() -> None:
    _clock, broker = _broker("rocketmq-4.9")
    broker.send(Message("T", b"x", properties={"TIMER_DELAY_MS": "2500"}), 0)
    (stored,) = _real(broker)
    assert stored.prop("TIMER_DELAY_MS") == "2500" and "TIMER_OUT_MS" not in stored.properties
    assert not broker.topic_exists(TIMER_TOPIC)


def test_a_half_with_timer_properties_waits_in_the_wheel_for_the_half_topic() -> None:
    """parseHalfMessageInner stores a half as transaction type NOT, so 5.x's put hook times it: the
    half's REAL_TOPIC becomes the half topic and the copy reaches it only when due (the Java client
    clears a transactional message's DELAY level, not its timer properties)."""
    clock, broker = _broker()
    broker.send_half(Message("T", b"x", properties={"TIMER_DELAY_MS": "1500"}), 0, "PG")
    (timed,) = broker.queue_messages(MessageQueue(TIMER_TOPIC, 0))
    assert (timed.prop("REAL_TOPIC"), timed.prop("TRAN_MSG")) == ("RMQ_SYS_TRANS_HALF_TOPIC", "true")
    assert broker.queue_messages(MessageQueue("RMQ_SYS_TRANS_HALF_TOPIC", 0)) == []
    _run_until(clock, broker, T0 + 2000)
    (half,) = broker.queue_messages(MessageQueue("RMQ_SYS_TRANS_HALF_TOPIC", 0))
    assert half.body == b"x" and _real(broker) == []


def test_after_a_kill_a_copy_fired_since_the_checkpoint_fires_again_and_none_is_lost() -> None:
    clock, broker = _broker(timer_flush_interval_ms=1000)
    for delay in (1500, 1700, 4000):
        broker.send(Message("T", str(delay).encode(), properties={"TIMER_DELAY_MS": str(delay)}), 0)
    _run_until(clock, broker, T0 + 2500)  # 1500 and 1700 fired at +2000; checkpoint at +2000 or later
    assert [m.body for m in _real(broker)] == [b"1500", b"1700"]
    broker.crash("kill")
    broker.recover()
    _run_until(clock, broker, T0 + 6000)
    bodies = [m.body for m in _real(broker)]
    assert bodies[:2] == [b"1500", b"1700"] and bodies.count(b"4000") == 1


def test_a_clean_close_fires_nothing_twice() -> None:
    clock, broker = _broker(timer_flush_interval_ms=60_000)
    broker.send(Message("T", b"a", properties={"TIMER_DELAY_MS": "500"}), 0)
    broker.send(Message("T", b"b", properties={"TIMER_DELAY_MS": "3500"}), 0)
    _run_until(clock, broker, T0 + 1500)
    broker.close()
    broker.reopen()
    _run_until(clock, broker, T0 + 5000)
    assert [m.body for m in _real(broker)] == [b"a", b"b"]


def test_a_crash_before_any_checkpoint_fires_everything_again() -> None:
    clock, broker = _broker(timer_flush_interval_ms=60_000)
    broker.send(Message("T", b"a", properties={"TIMER_DELAY_MS": "500"}), 0)
    _run_until(clock, broker, T0 + 1500)
    broker.crash("kill")
    broker.recover()
    _run_until(clock, broker, T0 + 2500)
    assert [m.body for m in _real(broker)] == [b"a", b"a"]


def test_a_disabled_wheel_has_no_timer_topic_and_refuses_timer_messages() -> None:
    _clock, broker = _broker(timer_wheel_enable=False)
    assert not broker.topic_exists(TIMER_TOPIC)


def test_a_direct_send_into_the_timer_topic_with_a_bad_slot_wedges_the_wheel() -> None:
    """RocketMQ's enqueue thread fails on a TIMER_OUT_MS that is no Java long and retries for ever:
    nothing after it is enqueued (timerSkipUnknownError is off by default)."""
    clock, broker = _broker()
    broker.send(Message(TIMER_TOPIC, b"bad", properties={"TIMER_OUT_MS": "abc"}), 0)
    broker.send(Message("T", b"later", properties={"TIMER_DELAY_MS": "500"}), 0)
    _run_until(clock, broker, T0 + 3000)
    assert _real(broker) == []
