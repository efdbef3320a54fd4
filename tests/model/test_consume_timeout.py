"""consumeTimeout and cleanExpiredMsg (issue 42; seeds 000 and 002): a message in a listener for longer
than consumeTimeout is sent back with delay level 3 while the listener still runs.

Facts from RocketMQ 4.9.8's client (``javap -c`` of ProcessQueue.cleanExpiredMsg,
ConsumeMessageConcurrentlyService and its ConsumeRequest): the clean runs every consumeTimeout minutes
(first after one period); it looks at no more than 16 messages, stops at the first whose
CONSUME_START_TIME is unset or not more than consumeTimeout old, sends it back with level 3, and
removes it only when the send-back did not throw and it is still the first; orderly consumers return
at once. ConsumeReturnType is EXCEPTION / RETURNNULL without a status, then TIME_OUT when the consume
took ≥ consumeTimeout, then FAILED or SUCCESS.
"""

from __future__ import annotations

import attrs
import pytest

from rmqspec.model.broker import ModelBroker
from rmqspec.model.client_timers import Driver
from rmqspec.model.clock import ManualClock
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig
from rmqspec.model.consumer_concurrent import (
    ConcurrentConsumer,
    ConsumeConcurrentlyStatus,
    ConsumeReturnType,
    return_type,
)
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import PROPERTY_CONSUME_START_TIMESTAMP, Message
from rmqspec.model.producer import Producer
from rmqspec.model.results import ResponseCode
from rmqspec.traces.checker import check
from rmqspec.traces.checks_delivery import TIMED_OUT_CAUSE
from tests.model.test_client_unit import MQ, OK, World, stored

MINUTE = 60_000
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER


def slow_first(ms: int, status=OK):
    """A listener whose first call on each message runs ``ms``; later calls answer at once."""
    seen: set[int] = set()

    def listener(msgs, ctx):
        if msgs[0].queue_offset not in seen and msgs[0].reconsume_times == 0:
            seen.add(msgs[0].queue_offset)
            ctx.runs_for_ms = ms
        return status

    return listener


def test_return_type_follows_consume_request_order():
    assert return_type(None, ValueError(), 0, MINUTE) is ConsumeReturnType.EXCEPTION
    assert return_type(None, None, 2 * MINUTE, MINUTE) is ConsumeReturnType.RETURNNULL
    assert return_type(OK, None, MINUTE, MINUTE) is ConsumeReturnType.TIME_OUT
    assert return_type(LATER, None, MINUTE, MINUTE) is ConsumeReturnType.TIME_OUT
    assert return_type(LATER, None, MINUTE - 1, MINUTE) is ConsumeReturnType.FAILED
    assert return_type(OK, None, MINUTE - 1, MINUTE) is ConsumeReturnType.SUCCESS


def test_a_running_message_is_sent_back_at_the_first_clean_past_the_timeout_and_removed():
    w = World()
    w.broker.add(stored(0), stored(1))
    c = w.consumer(listener=slow_first(150_000), consume_timeout_min=1)
    c.start()
    c.step()
    pq = c.process_queues[MQ]
    assert pq.get(0).get_property(PROPERTY_CONSUME_START_TIMESTAMP) == "0"
    assert pq.offsets() == [0, 1]  # both listeners still run
    c.run_until(MINUTE)  # the first clean: 60 000 − 0 is not more than the timeout
    assert w.broker.send_backs == []
    c.run_until(2 * MINUTE)
    # offset 0 first, then offset 1 (now the first): level 3, the client's max (16)
    assert [(b[1], b[2], b[4]) for b in w.broker.send_backs] == [(10_000, 3, 16), (10_001, 3, 16)]
    assert pq.offsets() == []
    # the clean commits nothing, but the map is empty now: the next empty pull's correctTagsOffset
    # moves the offset past both running messages (their retry copies carry them)
    assert c.committed_offset(MQ) == 2
    c.run_until(150_000)  # the listeners answer SUCCESS: TIME_OUT, and the offset moves
    consumes = w.recorder.of("consume")
    assert [(e.queue_offset, e.status, e.detail["return_type"], e.detail["consume_start"]) for e in consumes] == [
        (0, "SUCCESS", "TIME_OUT", 0), (1, "SUCCESS", "TIME_OUT", 0)
    ]
    assert c.committed_offset(MQ) == 2
    assert len(w.broker.send_backs) == 2


def test_a_late_reconsume_later_sends_the_message_back_a_second_time():
    w = World()
    w.broker.add(stored(0))
    c = w.consumer(listener=slow_first(130_000, LATER), consume_timeout_min=1)
    c.start()
    c.step()
    c.run_until(130_000)
    assert [b[2] for b in w.broker.send_backs] == [3, 0]  # the clean's, then the answer's


def test_the_clean_stops_at_a_message_not_yet_in_a_listener_and_skips_orderly_consumers():
    w = World()
    w.broker.add(stored(0), stored(1))
    c = w.consumer(listener=slow_first(200_000), consume_timeout_min=1)
    c.start()
    c.step()
    pq = c.process_queues[MQ]
    pq.replace(attrs.evolve(pq.get(1), properties={}))  # as if no consume thread had taken it yet
    c.run_until(2 * MINUTE)
    assert [b[1] for b in w.broker.send_backs] == [10_000]  # offset 1 has no CONSUME_START_TIME
    assert pq.offsets() == [1]


def test_a_failed_send_back_keeps_the_message_and_is_tried_again_in_the_same_turn():
    w = World()
    w.broker.add(stored(0))
    w.broker.send_back_code = ResponseCode.SYSTEM_ERROR
    c = w.consumer(listener=slow_first(200_000), consume_timeout_min=1)
    c.start()
    c.step()
    c.run_until(2 * MINUTE)
    assert len(w.broker.send_backs) == 1  # min(size 1, 16) turns
    assert c.process_queues[MQ].offsets() == [0]
    c.run_until(3 * MINUTE)
    assert len(w.broker.send_backs) == 2


def test_orderly_consumers_have_no_clean_task():
    from rmqspec.model.consumer_orderly import OrderlyConsumer

    w = World()
    c = w.consumer(cls=OrderlyConsumer, listener=lambda m, x: None, consume_timeout_min=1)
    c.start()
    assert "clean_expire" not in {t.kind for t in c.timers.pending()}


@pytest.mark.parametrize("timeout_min", [1, 15])
def test_a_slow_listener_against_the_model_broker_audits_clean(timeout_min):
    """End to end: the clean's send-back, the retry copy consumed, the original's late SUCCESS — a
    DUPLICATED observation and no violation (the default 15 min run uses RocketMQ's defaults)."""
    clock = ManualClock(1_700_000_000_000)
    rec = ListRecorder()
    broker = ModelBroker(clock, recorder=rec)
    d = Directory()
    d.create_topic(broker, "T", 1)
    d.create_group(broker, "G")
    runs = (timeout_min * 2 + 1) * MINUTE
    c = ConcurrentConsumer(
        broker, clock, d, "G", "c1", slow_first(runs),
        config=ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                              consume_timeout_min=timeout_min),
        recorder=rec,
    )
    c.subscribe("T")
    p = Producer(broker, clock, d, "P", recorder=rec)
    driver = Driver(clock, broker, max_step_ms=1000)
    driver.add(c)
    c.start()
    driver.step()
    key = p.send(Message("T", b"slow")).uniq_key
    driver.run_for(runs + MINUTE)
    c.shutdown()
    rec.emit("drain", clock.now(), actor="test")
    rows = [e.as_row() for e in rec.events]
    backs = [r for r in rows if r["event"] == "send_back"]
    assert [(r["msg_key"], r["delay_level"], r["status"]) for r in backs] == [(key, 3, "RETRY")]
    consumes = [(r["topic"], r["detail"]["return_type"]) for r in rows if r["event"] == "consume"]
    assert consumes == [("%RETRY%G", "SUCCESS"), ("T", "TIME_OUT")]  # the retry copy first, then the original
    report = check(rows)
    assert report.violations == ()
    assert [(f.code, f.keys.get("msg_key")) for f in report.observations] == [("DUPLICATED", key)]


@pytest.mark.parametrize("kind", ["model", "mmap"])
def test_the_check_workload_times_out_a_payment_and_audits_clean(kind, tmp_path):
    """``rmqspec check``'s workload: G-payments' slow first delivery of txn-commit is sent back by the clean
    (level 3), its retry copy consumed, the original answered TIME_OUT; the trace has no violation."""
    from rmqspec.cli.workload import T0, run_workload
    from rmqspec.impl.broker import MmapBroker
    from rmqspec.model.config import default_config

    clock = ManualClock(T0)
    rec = ListRecorder()
    if kind == "model":
        broker = ModelBroker(clock, recorder=rec)
    else:
        broker = MmapBroker.open(tmp_path, clock, default_config(), rec)
    try:
        run_workload(broker, clock, rec)
    finally:
        broker.close()
    rows = [e.as_row() for e in rec.events]
    pay = [r for r in rows if r["group"] == "G-payments"]
    # txn-commit is stored twice (the workload's second END_TRANSACTION COMMIT): each copy times out once
    backs = [(r["queue_offset"], r["delay_level"], r["status"]) for r in pay if r["event"] == "send_back"]
    timed_out = [r for r in pay if r["event"] == "consume" and r["detail"]["return_type"] == "TIME_OUT"]
    assert backs == [(r["queue_offset"], 3, "RETRY") for r in timed_out] and len(backs) == 2
    assert all(r["status"] == "SUCCESS" and r["ts"] - r["detail"]["consume_start"] == 150_000 for r in timed_out)
    report = check(rows)
    assert report.violations == ()
    dups = [f for f in report.observations if f.code == "DUPLICATED" and f.keys["group"] == "G-payments"]
    assert {f.keys["msg_key"] for f in dups} == {r["msg_key"] for r in timed_out}
    named = {f.seqs[-1] for f in dups if f.reason.endswith(TIMED_OUT_CAUSE)}  # the audit names the cause
    assert named == {r["seq"] for r in timed_out}
    # the second COMMIT's copy: its retry copy's consume is a duplicate whose own rows say no TIME_OUT
    assert any(TIMED_OUT_CAUSE not in f.reason for f in dups)
