"""Broker lock table for orderly consumption (SPEC §4.5)."""

from __future__ import annotations

from rmqspec.model import MessageQueue

MQ = MessageQueue("T", 0)


def test_lock_taken_by_another_client_at_60001_ms_but_not_at_60000_ms(broker, clock):
    t0 = clock.now()
    assert broker.lock_batch("g", "c1", [MQ]) == frozenset({MQ})
    clock.set(t0 + 60_000)
    assert broker.lock_batch("g", "c2", [MQ]) == frozenset()
    clock.set(t0 + 60_001)
    assert broker.lock_batch("g", "c2", [MQ]) == frozenset({MQ})
    assert broker.lock_batch("g", "c1", [MQ]) == frozenset()


def test_renewals_extend_the_lock(broker, clock):
    t0 = clock.now()
    broker.lock_batch("g", "c1", [MQ])
    clock.set(t0 + 50_000)
    assert broker.lock_batch("g", "c1", [MQ]) == frozenset({MQ})
    clock.set(t0 + 100_000)
    assert broker.lock_batch("g", "c2", [MQ]) == frozenset()
    clock.set(t0 + 110_001)
    assert broker.lock_batch("g", "c2", [MQ]) == frozenset({MQ})


def test_unlock_by_a_non_holder_does_nothing(broker):
    broker.lock_batch("g", "c1", [MQ])
    broker.unlock_batch("g", "c2", [MQ])
    assert broker.lock_batch("g", "c2", [MQ]) == frozenset()
    broker.unlock_batch("g", "c1", [MQ])
    assert broker.lock_batch("g", "c2", [MQ]) == frozenset({MQ})


def test_lock_batch_returns_only_the_granted_queues_and_groups_are_separate(broker):
    other = MessageQueue("T", 1)
    broker.lock_batch("g", "c1", [MQ])
    assert broker.lock_batch("g", "c2", [MQ, other]) == frozenset({other})
    assert broker.lock_batch("h", "c2", [MQ]) == frozenset({MQ})


def test_locks_are_lost_on_restart(broker):
    broker.lock_batch("g", "c1", [MQ])
    broker.close()
    broker.reopen()
    assert broker.lock_batch("g", "c2", [MQ]) == frozenset({MQ})
