"""Recorded traces of retention (issue 42): a model broker whose clean pass deletes expired files, and the
broken ``retention_ignores_reserve`` deleting young ones; a 5.x model broker's halves and timer copies under
retention, and the broken ``timer_lost_after_crash`` whose wheel forgets its copies. Both the reference
checker (``test_retention_audit.py``) and the Spark audit (``tests/spark/test_audit.py``) read them."""

from __future__ import annotations

import datetime
from typing import Any

import attrs

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig, default_config
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message, MessageQueue
from rmqspec.properties.history import audit_params
from tests.broken_brokers import RetentionIgnoresReserve, TimerLostAfterCrash

HOUR = 3_600_000
# 2026-01-01 03:00 UTC: an hour before deleteWhen's default "04"
T0 = int(datetime.datetime(2026, 1, 1, 3, 0, tzinfo=datetime.UTC).timestamp() * 1000)
CONFIG = BrokerConfig(commitlog_file_size=4096, consume_queue_file_size=200)
PARAMS = audit_params(CONFIG)
SUBSCRIPTIONS = {"G": ("T",)}
SENT = 40
CONSUMED = 5  # group G consumed the first few; the rest waited


def retention_trace(broken: bool) -> list[dict[str, Any]]:
    """Rows of one run: ``SENT`` messages to T (4 files), G consuming the first ``CONSUMED``, then a clean
    pass in the delete hour: the correct broker's three days later (the files expired), the broken one's
    the same morning (it ignores fileReservedTime). A drain ends it."""
    clock, rec = ManualClock(T0), ListRecorder()
    broker = (RetentionIgnoresReserve(clock, CONFIG) if broken else ModelBroker(clock, CONFIG))
    broker.recorder = rec
    broker.create_topic("T", 1)
    for i in range(SENT):
        broker.send(Message(topic="T", body=b"x" * 200, uniq_key=f"K{i:02d}"), 0)
        clock.advance(1000)
    got = broker.pull("G", MessageQueue("T", 0), 0, max_nums=CONSUMED)
    for m in got.messages:
        rec.emit("consume", clock.now(), actor="consumer", group="G", topic="T", queue_id=0,
                 queue_offset=m.queue_offset, msg_key=m.uniq_key, status="SUCCESS", client_id="C1")
    clock.set(T0 + HOUR + 30_000 if broken else T0 + 72 * HOUR + HOUR + 30_000)
    broker.tick()
    assert broker.commitlog_min_offset() > 0, "the pass deleted nothing"
    rec.emit("drain", clock.now(), actor="harness")
    return [ev.as_row() for ev in rec.events]


TIMER_CONFIG = attrs.evolve(default_config("rocketmq-5.2"), commitlog_file_size=4096, consume_queue_file_size=200)
TIMER_PARAMS = audit_params(TIMER_CONFIG)
HALVES_AND_TIMERS = 30  # every other one a half (H01, H03, ...), the others timer messages (M00, M02, ...)


def txn_timer_retention_trace(broken: bool) -> list[dict[str, Any]]:
    """Rows of one 5.x run: ``HALVES_AND_TIMERS`` halves no producer resolves (the check service runs once,
    7 s after the last: each half re-put once, then no more rounds) and timer messages due 71 h later, a
    second apart (the second half of them 2 h after the first), the broker ticking each second; a kill and a
    recovery; then a tick every hour for 74 h: the wheel fires the timer messages (the broken broker's forgot
    them at the recovery) and the clean pass, in the delete hour, deletes the files 72 h old, halves and timer
    copies with them, not the later ones. A drain ends it."""
    clock, rec = ManualClock(T0), ListRecorder()
    broker = (TimerLostAfterCrash if broken else ModelBroker)(clock, TIMER_CONFIG)
    broker.recorder = rec
    broker.external_check_rounds = True  # the one round below: no discard before the drain
    broker.create_topic("T", 1)
    for i in range(HALVES_AND_TIMERS):
        if i == HALVES_AND_TIMERS // 2:
            clock.advance(2 * HOUR)  # the later files are not 72 h old in the delete hour
        if i % 2:
            broker.send_half(Message(topic="T", body=b"x" * 200, uniq_key=f"H{i:02d}"), 0, "P")
        else:
            timer = {"TIMER_DELAY_MS": str(71 * HOUR)}
            broker.send(Message(topic="T", body=b"x" * 200, uniq_key=f"M{i:02d}", properties=timer), 0)
        clock.advance(1000)
        broker.tick()
    clock.advance(7000)
    assert len(broker.check_round()) == HALVES_AND_TIMERS // 2, "every half checked once"
    broker.crash("kill")
    broker.recover()
    for _ in range(74):
        clock.advance(HOUR)
        broker.tick()
    assert broker.commitlog_min_offset() > 0, "the pass deleted nothing"
    rec.emit("drain", clock.now(), actor="harness")
    return [ev.as_row() for ev in rec.events]
