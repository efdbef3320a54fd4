"""Delayed delivery through SCHEDULE_TOPIC_XXXX (SPEC §4.3)."""

from __future__ import annotations

from rmqspec.model import Message, MessageQueue, PullStatus

T = MessageQueue("T", 0)


def test_delivery_exactly_at_deliver_ts_not_one_ms_earlier(broker, clock):
    broker.create_topic("T", 1)
    sent_at = clock.now()
    result = broker.send(Message("T", b"d", delay_level=3), 0)  # 10 s
    assert result.queue_offset == 0  # the schedule queue's offset
    clock.set(sent_at + 10_000 - 1)
    broker.tick()
    assert broker.pull("g", T, 0).status is PullStatus.NO_NEW_MSG
    clock.set(sent_at + 10_000)
    broker.tick()
    got = broker.pull("g", T, 0)
    assert got.status is PullStatus.FOUND
    assert got.messages[0].uniq_key == result.uniq_key
    assert got.messages[0].store_ts == sent_at + 10_000


def test_delayed_copies_fire_in_order_per_level(broker, clock):
    broker.create_topic("T", 1)
    for i in range(3):
        broker.send(Message("T", str(i).encode(), delay_level=1), 0)
        clock.advance(100)
    clock.advance(1000)
    broker.tick()
    got = broker.pull("g", T, 0)
    assert [m.body for m in got.messages] == [b"0", b"1", b"2"]


def test_clock_moved_backwards_triggers_the_correction_rule(broker, clock):
    broker.create_topic("T", 1)
    sent_at = clock.now()
    broker.send(Message("T", b"d", delay_level=3), 0)
    clock.set(sent_at - 60_000)  # deliver_ts > now + delay(3): delivered now
    broker.tick()
    assert broker.pull("g", T, 0).status is PullStatus.FOUND


def test_small_backwards_step_does_not_trigger_correction(broker, clock):
    broker.create_topic("T", 1)
    sent_at = clock.now()
    broker.send(Message("T", b"d", delay_level=3), 0)
    clock.set(sent_at + 8_000)
    broker.tick()
    clock.set(sent_at + 1_000)  # 7 s back: deliver_ts = sent_at + 10 s <= now + 10 s
    broker.tick()
    assert broker.pull("g", T, 0).status is PullStatus.NO_NEW_MSG


def test_clean_restart_does_not_deliver_a_fired_copy_twice(broker, clock):
    broker.create_topic("T", 1)
    broker.send(Message("T", b"d", delay_level=1), 0)
    clock.advance(1_000)
    broker.tick()
    broker.close()
    broker.reopen()
    clock.advance(60_000)
    broker.tick()
    got = broker.pull("g", T, 0)
    assert len(got.messages) == 1
