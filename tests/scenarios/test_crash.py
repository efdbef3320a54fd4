"""Crash semantics through the protocol: SYNC vs ASYNC, kill vs power (SPEC §4, §5)."""

from __future__ import annotations

import pytest

from rmqspec.model import BrokerConfig, Message, MessageQueue, PullStatus, ResponseCode
from rmqspec.model.results import BrokerError

T = MessageQueue("T", 0)


def _send(broker, n, start=0):
    return [broker.send(Message("T", f"m{i}".encode()), 0) for i in range(start, start + n)]


@pytest.mark.parametrize("kind", ["kill", "power"])
def test_sync_flush_keeps_every_acknowledged_send(make_crash_broker, kind):
    broker = make_crash_broker(BrokerConfig(flush="SYNC"))
    broker.create_topic("T", 1)
    _send(broker, 5)
    broker.crash(kind)
    broker.recover()
    assert len(broker.pull("g", T, 0).messages) == 5


def test_async_kill_keeps_every_written_record(make_crash_broker):
    broker = make_crash_broker(BrokerConfig(flush="ASYNC"))
    broker.create_topic("T", 1)
    _send(broker, 5)
    broker.crash("kill")
    broker.recover()
    assert len(broker.pull("g", T, 0).messages) == 5


def test_async_power_loss_then_sends_continue_densely(make_crash_broker):
    broker = make_crash_broker(BrokerConfig(flush="ASYNC"))
    broker.create_topic("T", 1)
    _send(broker, 3)
    broker.flush()
    _send(broker, 2, start=3)
    broker.crash("power")
    broker.recover()
    kept = broker.pull("g", T, 0)
    assert 3 <= len(kept.messages) <= 5
    assert [m.body for m in kept.messages] == [f"m{i}".encode() for i in range(len(kept.messages))]
    again = broker.send(Message("T", b"after"), 0)
    assert again.queue_offset == len(kept.messages)


def test_unpersisted_consumer_offset_is_lost_and_persisted_one_survives(make_crash_broker, clock):
    broker = make_crash_broker()
    broker.update_offset("g", T, 3)
    broker.crash("kill")
    broker.recover()
    assert broker.query_offset("g", T) == 0  # lost: as never committed
    broker.update_offset("g", T, 4)
    clock.advance(5_000)
    broker.tick()
    broker.crash("kill")
    broker.recover()
    assert broker.query_offset("g", T) == 4


def test_close_persists_offsets(broker):
    broker.update_offset("g", T, 9)
    broker.close()
    broker.reopen()
    assert broker.query_offset("g", T) == 9


def test_a_scheduled_copy_may_be_delivered_again_after_a_crash(make_crash_broker, clock):
    broker = make_crash_broker()
    broker.create_topic("T", 1)
    broker.send(Message("T", b"d", delay_level=1), 0)
    clock.advance(1_000)
    broker.tick()  # fired; progress not yet persisted (10 s interval)
    broker.crash("kill")
    broker.recover()
    broker.tick()
    copies = broker.pull("g", T, 0).messages
    assert [m.body for m in copies] == [b"d", b"d"]  # duplicate, not loss


def test_locks_are_lost_on_crash(make_crash_broker):
    broker = make_crash_broker()
    broker.lock_batch("g", "c1", [T])
    broker.crash("kill")
    broker.recover()
    assert broker.lock_batch("g", "c2", [T]) == frozenset({T})


def test_a_crashed_broker_refuses_requests(make_crash_broker):
    broker = make_crash_broker()
    broker.create_topic("T", 1)
    broker.crash("power")
    with pytest.raises(BrokerError) as down:
        broker.send(Message("T", b"x"), 0)
    assert down.value.code == ResponseCode.SERVICE_NOT_AVAILABLE
    broker.recover()
    assert broker.pull("g", T, 0).status is PullStatus.NO_NEW_MSG
