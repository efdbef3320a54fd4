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

Timer messages (5.x profiles with ``timerWheelEnable``; ``model/timer.py``): a ``send``
whose properties ask for a time (``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC``,
``TIMER_DELAY_MS``; no delay level, no ``TIMER_OUT_MS``) after the server's ``now``
carries ``deliver_ts`` = that time, computed from the server's ``now`` taken before the
broker's put: a lower bound of the broker's due time (``TIMER_OUT_MS + precision`` ≥ the
broker's requested time ≥ this one), so judging with it (TIMER_EARLY) never raises a false
alarm. Topic and queue are the producer's target, the offsets the timer copy's (the
SendResult's). A requested time not after ``now``, an unparsable one (the send was refused
anyway) and a batch item's own timer properties (5.x times only the batch's) give none. A
``deliver`` of a copy the wheel wrote (``TIMER_OUT_MS`` and ``TIMER_DEQUEUE_MS`` among its
properties, outside ``rmq_sys_wheel_timer``) carries ``detail`` = {``timer_out_ms``,
``timer_dequeue_ms``}: the slot it waited in and when the wheel took it out (the broker's
wall clock); a normal ``deliver`` otherwise.

Pop (5.x; ``handlers_pop.py``, and ``RemoteBroker`` given a ``recorder``: ``adapter_pop.py``): a
``pop`` per message handed out (the copy's real topic, ``deliver_ts`` its handle's revive time,
``detail`` the handle, attempt id, order count), an ``ack`` per handle (``status`` the answer's code
name), a ``change_invisible`` (``deliver_ts`` the new revive time) and, the first time a retry copy is
popped, a ``revive`` (``detail.observed``: inferred at the pop, a bound of the revive's time; the
original's offsets are not on the wire).

A server cannot see, and therefore never writes: ``store`` of copies the
broker makes itself (retry, DLQ, schedule, timer, check re-puts), ``schedule_fire``,
``timer_fire``,
``txn_discard``, whether a ``send_back`` went to the retry topic or the DLQ
(so no ``send_back`` row), and nothing at all of the client side:
``consume`` results, ``orderly_start`` / ``orderly_end``, ``drain``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import Recorder
from rmqspec.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    MessageQueue,
    StoredMessage,
)
from rmqspec.model.pop import PopHandle, PoppedMessage
from rmqspec.model.results import CheckRequest, SendResult
from rmqspec.model.timer import (
    PROPERTY_TIMER_DEQUEUE_MS,
    PROPERTY_TIMER_OUT_MS,
    TIMER_TOPIC,
    is_timer_request,
    java_long,
    requested_ms,
)


def timer_deliver_ts(config: BrokerConfig, topic: str, props: Mapping[str, str], now: int) -> int | None:
    """The ``deliver_ts`` of a wire ``send`` with ``props`` at ``now`` (module docstring), else None."""
    if not (config.behaviour.timer_wheel and config.timer_wheel_enable) or topic == TIMER_TOPIC:
        return None
    level = java_long(props.get(PROPERTY_DELAY_TIME_LEVEL) or "")
    if (level is not None and level > 0) or PROPERTY_TIMER_OUT_MS in props:  # a level > 0 wins (DELAY=-1: no)
        return None
    if not is_timer_request(props):
        return None
    at = requested_ms(props, now)
    return at if at is not None and at > now else None


def fired_detail(msg: StoredMessage) -> dict[str, int] | None:
    """``detail`` of a ``deliver`` of a copy the timer wheel wrote (module docstring), else None."""
    if msg.topic == TIMER_TOPIC:
        return None
    out = java_long(msg.properties.get(PROPERTY_TIMER_OUT_MS) or "")
    dequeued = java_long(msg.properties.get(PROPERTY_TIMER_DEQUEUE_MS) or "")
    if out is None or dequeued is None:
        return None
    return {"timer_out_ms": out, "timer_dequeue_ms": dequeued}


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

    def send(self, now: int, result: SendResult, topic: str, queue_id: int, group: str,
             props: Mapping[str, str] | None = None, oneway: bool = False) -> None:
        """A send stored; ``props`` (the wire properties) give a timer message its ``deliver_ts``. A oneway
        request (flag bit 1) is answered nothing: its status is ONEWAY, not acknowledged."""
        if not self.enabled:
            return
        deliver_ts = timer_deliver_ts(self.config, topic, props, now) if props else None
        self._emit("send", now, actor="broker", group=group, topic=topic, queue_id=queue_id,
                   queue_offset=result.queue_offset, commitlog_offset=result.commitlog_offset,
                   msg_key=result.uniq_key, msg_id=result.msg_id, reconsume_times=0,
                   status="ONEWAY" if oneway else "SEND_OK", deliver_ts=deliver_ts,
                   **({"detail": {"send_mode": "ONEWAY"}} if oneway else {}))

    def txn_half(self, now: int, result: SendResult, topic: str, queue_id: int, group: str) -> None:
        self._emit("txn_half", now, actor="broker", group=group, topic=topic, queue_id=queue_id,
                   queue_offset=result.queue_offset, commitlog_offset=result.commitlog_offset,
                   msg_key=result.uniq_key, msg_id=result.msg_id, txn_id=result.uniq_key, status="SEND_OK")

    def txn_end(self, now: int, group: str, txn_id: str | None, commitlog_offset: int, action: str,
                from_check: bool) -> None:
        self._emit("txn_end", now, actor="broker", group=group, commitlog_offset=commitlog_offset,
                   msg_key=txn_id, txn_id=txn_id, status=action, detail={"from_check": from_check})

    def deliver(self, now: int, msg: StoredMessage, group: str) -> None:
        if not self.enabled:
            return
        self._emit("deliver", now, actor=group, group=group, topic=msg.topic, queue_id=msg.queue_id,
                   queue_offset=msg.queue_offset, commitlog_offset=msg.commitlog_offset, msg_key=msg.uniq_key,
                   msg_id=msg.msg_id, reconsume_times=msg.reconsume_times, detail=fired_detail(msg))

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

    # -- pop (5.x; the rows model/broker_pop.py writes, as far as the wire shows them) --------------

    def pop(self, now: int, group: str, p: PoppedMessage, topic: str, attempt_id: str | None) -> None:
        """A message handed out: ``topic`` is the copy's real topic (the retry topic for a revived one)."""
        if not self.enabled:
            return
        h, m = p.handle, p.message
        self._emit("pop", now, actor=group, group=group, topic=topic, queue_id=h.queue_id,
                   queue_offset=h.queue_offset, commitlog_offset=m.commitlog_offset, msg_key=m.uniq_key,
                   msg_id=m.msg_id, reconsume_times=m.reconsume_times, deliver_ts=h.revive_time,
                   status="ORDERLY" if h.order else "CONCURRENT",
                   detail={"handle": h.extra_info(), "attempt_id": attempt_id, "order_count": p.order_count})

    def revive_seen(self, now: int, group: str, p: PoppedMessage, topic: str) -> None:
        """A retry copy popped for the first time: the broker revived it by ``now`` (an upper bound)."""
        if not self.enabled:
            return
        h, m = p.handle, p.message
        self._emit("revive", now, actor="broker", group=group, topic=m.topic, msg_key=m.uniq_key,
                   reconsume_times=m.reconsume_times,
                   detail={"observed": True, "new_topic": topic, "new_queue_id": h.queue_id,
                           "new_queue_offset": h.queue_offset, "new_commitlog_offset": m.commitlog_offset})

    def ack(self, now: int, group: str, topic: str, handle: PopHandle, status: str, batch: bool) -> None:
        """An acked handle; ``status`` the answer's code name (the wire does not say what it met)."""
        self._emit("ack", now, actor=group, group=group, topic=topic, queue_id=handle.queue_id,
                   queue_offset=handle.queue_offset, status=status,
                   detail={"handle": handle.extra_info(), "batch": batch})

    def change_invisible(self, now: int, group: str, topic: str, old: PopHandle, new: PopHandle) -> None:
        self._emit("change_invisible", now, actor=group, group=group, topic=topic, queue_id=old.queue_id,
                   queue_offset=old.queue_offset, deliver_ts=new.revive_time,
                   status="ORDERLY" if old.order else "CONCURRENT",
                   detail={"handle": old.extra_info(), "new_handle": new.extra_info()})


NO_WIRE_EVENTS = WireEvents(None, BrokerConfig())
