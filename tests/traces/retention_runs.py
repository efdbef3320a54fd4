"""Recorded traces of retention (issue 42): a model broker whose clean pass deletes expired files, and the
broken ``retention_ignores_reserve`` deleting young ones. Both the reference checker
(``test_retention_audit.py``) and the Spark audit (``tests/spark/test_audit.py``) read them."""

from __future__ import annotations

import datetime
from typing import Any

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message, MessageQueue
from rmqspec.properties.history import audit_params
from tests.broken_brokers import RetentionIgnoresReserve

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
