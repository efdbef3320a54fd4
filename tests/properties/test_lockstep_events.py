"""Lockstep compares the brokers' own SPEC §8 trace events when both record (``EventTap``)."""

from __future__ import annotations

import tempfile
from typing import Any

import pytest

from rmqspec.impl import factory as mmap_factory
from rmqspec.model import BrokerConfig, ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.properties.conform_base import _takes_recorder
from rmqspec.properties.lockstep import EventTap, Lockstep, LockstepMismatch, tap_of

START_MS = 1_700_000_000_000
MQ = MessageQueue("T", 0)


class SilentUnlock(ModelBroker):
    """Frees the lock like any broker but records no ``unlock``: no reply shows it."""

    def _emit(self, event: str, ts: int, **fields: Any) -> None:
        if event != "unlock":
            super()._emit(event, ts, **fields)


def _pair(candidate_cls: type[ModelBroker]) -> Lockstep:
    clock = ManualClock(START_MS)
    config = BrokerConfig()
    ls = Lockstep(candidate_cls(clock, config, EventTap()), ModelBroker(clock, config, EventTap()), clock)
    ls.call("create_topic", lambda b: b.create_topic("T", 1))
    ls.call("create_group", lambda b: b.create_group("g"))
    return ls


def test_equal_brokers_agree_and_each_outcome_carries_its_events() -> None:
    ls = _pair(ModelBroker)
    out = ls.call("send", lambda b: b.send(Message(topic="T", body=b"x", uniq_key="K1"), 0))
    assert [e.event for e in out.events] == ["store", "send"]
    assert out.events[1].msg_key == "K1"
    assert ls.call("lock", lambda b: b.lock_batch("g", "c1", [MQ])).value == frozenset({MQ})
    out = ls.call("unlock", lambda b: b.unlock_batch("g", "c1", [MQ]))
    assert [e.event for e in out.events] == ["unlock"]
    assert ls.enabled


def test_an_effect_no_reply_shows_is_caught_by_its_missing_event() -> None:
    ls = _pair(SilentUnlock)
    ls.call("lock", lambda b: b.lock_batch("g", "c1", [MQ]))
    with pytest.raises(LockstepMismatch) as err:
        ls.call("unlock_batch(g, c1, T/0)", lambda b: b.unlock_batch("g", "c1", [MQ]))
    text = str(err.value)
    assert "trace events" in text and "missing event unlock" in text
    assert "no events" in text  # the candidate's side of the report


def test_copies_of_a_fork_record_into_taps_of_their_own() -> None:
    ls = _pair(ModelBroker)
    ls.split(lambda fork: [1, 2], lambda fork, choice: None)
    a, b = ls.forks
    assert tap_of(a) is not tap_of(b)
    tap_of(a).emit("drain", START_MS)
    assert tap_of(b).pending == []


def test_the_taps_are_given_only_to_a_factory_that_takes_a_recorder() -> None:
    assert _takes_recorder(mmap_factory)
    assert not _takes_recorder(lambda clock, config, workdir: None)
    with tempfile.TemporaryDirectory() as root:
        broker = mmap_factory(ManualClock(START_MS), BrokerConfig(), root, recorder=EventTap())
        broker.create_topic("T", 1)
        broker.send(Message(topic="T", body=b"x", uniq_key="K1"), 0)
        assert [e.event for e in tap_of(broker).drain()] == ["store", "send"]
        broker.close()


def test_events_are_not_compared_when_the_model_records_none() -> None:
    clock = ManualClock(START_MS)
    config = BrokerConfig()
    ls = Lockstep(SilentUnlock(clock, config, EventTap()), ModelBroker(clock, config), clock)
    assert not ls.events_compared
    ls.call("create_topic", lambda b: b.create_topic("T", 1))
    out = ls.call("send", lambda b: b.send(Message(topic="T", body=b"x", uniq_key="K1"), 0))
    assert [e.event for e in out.events] == ["store", "send"]  # the candidate's, not judged
    assert ls.enabled
