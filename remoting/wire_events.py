"""SPEC §8 events the server records from what crosses the wire, for a broker that records none.

Theory of operation
-------------------
``MmapBroker`` (and any factory taking ``recorder=``) emits every SPEC §8
event itself, so ``rmqspec serve --trace-out`` hands it the recorder and this
module stays silent (``enabled`` false). A broker built by a factory without a
recorder parameter (``--broker tests.broken_brokers:...``) emits nothing;
then the server writes what it observes at the wire, with the same fields
the mmap broker would give:

- ``send`` (status SEND_OK) and ``txn_half`` from the SendResult of an
  acknowledged send (topic/queue as the producer asked; the copy's offsets);
- ``txn_end`` (COMMIT / ROLLBACK / UNKNOWN, ``detail.from_check``) once the
  broker accepted it;
- ``deliver`` for every message of a FOUND pull response;
- ``commit_offset`` (UPDATE_CONSUMER_OFFSET and the pull's commit flag),
  ``lock`` (GRANTED / DENIED) and ``unlock``;
- ``txn_check`` for every CHECK_TRANSACTION_STATE the broker's ``tick`` asked for.

A server cannot see, and therefore never writes: ``store`` of copies the
broker makes itself (retry, DLQ, schedule, check re-puts), ``schedule_fire``,
``txn_discard``, whether a ``send_back`` went to the retry topic or the DLQ
(so no ``send_back`` row), and nothing at all of the client side:
``consume`` results, ``orderly_start`` / ``orderly_end``, ``drain``.
"""

from __future__ import annotations

from typing import Any

from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import Recorder
from rmqspec.model.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    MessageQueue,
    StoredMessage,
)
from rmqspec.model.results import CheckRequest, SendResult


class WireEvents:
    def __init__(self, recorder: Recorder | None, config: BrokerConfig) -> None:
        self.recorder = recorder
        self.config = config

    @property
    def enabled(self) -> bool:
        return self.recorder is not None

    def _emit(self, event: str, ts: int, **fields: Any) -> None:
        if self.recorder is not None:
            self.recorder.emit(event, ts, **fields)

    def send(self, now: int, result: SendResult, topic: str, queue_id: int, group: str) -> None:
        self._emit("send", now, actor="broker", group=group, topic=topic, queue_id=queue_id,
                   queue_offset=result.queue_offset, commitlog_offset=result.commitlog_offset,
                   msg_key=result.uniq_key, msg_id=result.msg_id, reconsume_times=0, status="SEND_OK")

    def txn_half(self, now: int, result: SendResult, topic: str, queue_id: int, group: str) -> None:
        self._emit("txn_half", now, actor="broker", group=group, topic=topic, queue_id=queue_id,
                   queue_offset=result.queue_offset, commitlog_offset=result.commitlog_offset,
                   msg_key=result.uniq_key, msg_id=result.msg_id, txn_id=result.uniq_key, status="SEND_OK")

    def txn_end(self, now: int, group: str, txn_id: str | None, commitlog_offset: int, action: str,
                from_check: bool) -> None:
        self._emit("txn_end", now, actor="broker", group=group, commitlog_offset=commitlog_offset,
                   msg_key=txn_id, txn_id=txn_id, status=action, detail={"from_check": from_check})

    def deliver(self, now: int, msg: StoredMessage, group: str) -> None:
        self._emit("deliver", now, actor=group, group=group, topic=msg.topic, queue_id=msg.queue_id,
                   queue_offset=msg.queue_offset, commitlog_offset=msg.commitlog_offset, msg_key=msg.uniq_key,
                   msg_id=msg.msg_id, reconsume_times=msg.reconsume_times)

    def commit_offset(self, now: int, group: str, mq: MessageQueue, offset: int) -> None:
        self._emit("commit_offset", now, actor=group, group=group, topic=mq.topic, queue_id=mq.queue_id,
                   queue_offset=offset)

    def lock(self, now: int, group: str, mq: MessageQueue, client_id: str, granted: bool) -> None:
        self._emit("lock", now, actor=client_id, group=group, topic=mq.topic, queue_id=mq.queue_id,
                   client_id=client_id, status="GRANTED" if granted else "DENIED")

    def unlock(self, now: int, group: str, mq: MessageQueue, client_id: str) -> None:
        self._emit("unlock", now, actor=client_id, group=group, topic=mq.topic, queue_id=mq.queue_id,
                   client_id=client_id)

    def txn_check(self, now: int, check: CheckRequest) -> None:
        msg = check.message
        times = msg.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES)
        self._emit("txn_check", now, actor="broker", group=msg.properties.get(PROPERTY_PRODUCER_GROUP),
                   topic=msg.topic, queue_offset=check.tran_state_table_offset,
                   commitlog_offset=check.commitlog_offset, msg_key=msg.uniq_key, msg_id=msg.msg_id,
                   txn_id=check.transaction_id,
                   detail={"check_times": int(times)} if times and times.isdigit() else None)


NO_WIRE_EVENTS = WireEvents(None, BrokerConfig())
