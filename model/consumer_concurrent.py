"""Concurrent consumption: batches, ackIndex, send-back, local re-consume.

Theory of operation
-------------------
Follows RocketMQ 4.9 ``C/impl/consumer/ConsumeMessageConcurrentlyService``
and ``DefaultMQPushConsumerImpl.sendMessageBack``.

- ``submitConsumeRequest`` splits the pulled messages into batches of
  ``consume_message_batch_max_size`` (default 1); each batch is a
  ``consume`` timer due now, so a driver may run batches in any order, as
  the Java thread pool may.
- ``ConsumeRequest.run``: skip when the process queue was dropped; restore
  the topic of retry copies (``resetRetryTopic``); call the listener with the
  batch and a ``ConsumeConcurrentlyContext``. ``None`` or an exception
  counts as RECONSUME_LATER. A result arriving after the queue was dropped
  is ignored (the messages will be redelivered to the new owner).
- ``processConsumeResult``: CONSUME_SUCCESS acks ``0..ackIndex`` (default
  all; clamped to the batch); RECONSUME_LATER sets ackIndex to −1. The rest
  failed. Broadcasting drops failed messages. Clustering sends each failed
  message back (``send_back(group, commitlog_offset,
  context.delay_level_when_next_consume, msgId, maxReconsumeTimes)`` with
  −1 → 16); a message whose send-back fails gets ``reconsume_times + 1`` in
  memory, stays in the ProcessQueue and is consumed again locally after
  5000 ms. Then ``removeMessage`` over the others and an increase-only
  commit of the result when ≥ 0.

Events: one ``consume`` per message of the batch (SUCCESS up to ackIndex,
RECONSUME_LATER after; ``detail`` says ``dropped`` in broadcasting mode and
names the listener's exception), then the broker's ``send_back`` events (a
failed message without one is re-consumed locally), then ``commit_offset``
when the offset moved.

consumeTimeout (``consume_timeout_min``, 15 min; ConsumeMessageConcurrentlyService.cleanExpireMsg
and ProcessQueue.cleanExpiredMsg):

- ``ConsumeRequest.run`` sets ``CONSUME_START_TIME`` on every message of the batch (in the
  ProcessQueue too) before it calls the listener, and classifies the answer as a
  ConsumeReturnType: no status → EXCEPTION or RETURNNULL; a consume that took ≥ consumeTimeout →
  TIME_OUT; else FAILED (RECONSUME_LATER) or SUCCESS. Each ``consume`` event states
  ``detail.consume_start`` and ``detail.return_type``.
- A listener spans time when it sets ``context.runs_for_ms``: its answer is processed that many
  ms after the call (a slow listener, or a GC pause of its consume thread), while the client's
  other work goes on. It is the model's stand-in for a consume thread that is still running.
- Every consumeTimeout (first after one period) the clean task looks at each ProcessQueue: up to
  min(size, 16) times, while the first message of the map has been in a listener for more than
  consumeTimeout, it sends it back with delay level 3 (``sendMessageBack(msg, 3)``) and, when that
  succeeded and it is still the first, removes it from the map without committing; a failed
  send-back leaves it there (the next turn of the loop tries it again). The listener still runs:
  when it answers, processConsumeResult runs as usual — SUCCESS consumes a message whose retry
  copy is already on its way (the duplicate 4.9 users call impossible), RECONSUME_LATER sends it
  back a second time. Orderly consumers have no clean task (cleanExpiredMsg returns for them).

Deviation: when CONSUMER_SEND_MSG_BACK fails, the Java client falls back to
sending a fresh copy to the retry topic with its internal producer; the
model treats the fallback as failed too (SPEC §4.2: a failed send-back means
a local re-consume).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from rmqspec.model.consumer import INTEGER_MAX_VALUE, PushConsumer
from rmqspec.model.message import PROPERTY_CONSUME_START_TIMESTAMP, MessageQueue, StoredMessage
from rmqspec.model.process_queue import ProcessQueue
from rmqspec.model.results import ResponseCode


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeReturnType(enum.Enum):
    """How a consume ended (``ConsumeReturnType``; the consume hooks and message traces read it)."""

    SUCCESS = "SUCCESS"
    TIME_OUT = "TIME_OUT"
    EXCEPTION = "EXCEPTION"
    RETURNNULL = "RETURNNULL"
    FAILED = "FAILED"


def return_type(
    status: ConsumeConcurrentlyStatus | None, error: BaseException | None, consume_rt: int, timeout_ms: int
) -> ConsumeReturnType:
    """ConsumeRequest.run's classification, in its order: no status first, then the time."""
    if status is None:
        return ConsumeReturnType.EXCEPTION if error is not None else ConsumeReturnType.RETURNNULL
    if consume_rt >= timeout_ms:
        return ConsumeReturnType.TIME_OUT
    if status is ConsumeConcurrentlyStatus.RECONSUME_LATER:
        return ConsumeReturnType.FAILED
    return ConsumeReturnType.SUCCESS


CLEAN_EXPIRED_MAX = 16  # cleanExpiredMsg looks at no more than 16 messages of a queue per turn
CLEAN_EXPIRED_LEVEL = 3  # the delay level of its send-back


@attrs.define
class ConsumeConcurrentlyContext:
    """What the listener may set: ``ack_index`` and ``delay_level_when_next_consume``.

    ``delay_level_when_next_consume``: 0 lets the broker choose 3 + reconsume
    times; −1 sends failed messages straight to the DLQ; > 0 is the level.
    """

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = INTEGER_MAX_VALUE
    # model only: the listener answers this many ms after its call (see the module docstring)
    runs_for_ms: int = 0


ConcurrentListener = Callable[
    [Sequence[StoredMessage], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus | None
]


class ConcurrentConsumer(PushConsumer):
    """A push consumer with MessageListenerConcurrently semantics."""

    orderly = False

    @property
    def consume_timeout_ms(self) -> int:
        return self.config.consume_timeout_min * 60_000

    def _start_service(self) -> None:
        """``scheduleAtFixedRate(cleanExpireMsg, consumeTimeout, consumeTimeout, MINUTES)``."""
        self.timers.schedule(self.consume_timeout_ms, "clean_expire", self._clean_expire_task)

    def _clean_expire_task(self) -> None:
        if not self.running:
            return
        self.timers.schedule(self.consume_timeout_ms, "clean_expire", self._clean_expire_task)
        for mq, pq in list(self.process_queues.items()):
            self.clean_expired(pq, mq)

    def clean_expired(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        """ProcessQueue.cleanExpiredMsg for one queue (see the module docstring)."""
        for _ in range(min(len(pq.offsets()), CLEAN_EXPIRED_MAX)):
            now = self.clock.now()
            msg = pq.expired_head(now, self.consume_timeout_ms)
            if msg is None:
                break
            if not self._send_message_back(msg, ConsumeConcurrentlyContext(mq, CLEAN_EXPIRED_LEVEL)):
                continue
            head = pq.head()
            if head is not None and head.queue_offset == msg.queue_offset:
                pq.remove_messages([msg.queue_offset], now)

    def max_reconsume_times(self) -> int:
        """``getMaxReconsumeTimes``: −1 means 16."""
        value = self.config.max_reconsume_times
        return 16 if value == -1 else value

    def _submit_consume_request(
        self, msgs: Sequence[StoredMessage], pq: ProcessQueue, mq: MessageQueue, dispatch: bool
    ) -> None:
        size = self.config.consume_message_batch_max_size
        for start in range(0, len(msgs), size):
            batch = list(msgs[start : start + size])
            self.timers.schedule(
                0, "consume", lambda b=batch: self.consume_request(b, pq, mq), key=mq
            )

    def consume_request(
        self, msgs: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue
    ) -> None:
        """ConsumeRequest.run for one batch."""
        if pq.dropped or not self.running:
            return
        begin = self.clock.now()
        msgs = [
            attrs.evolve(m, properties={**m.properties, PROPERTY_CONSUME_START_TIMESTAMP: str(begin)})
            for m in (self.reset_retry_topic(m) for m in msgs)
        ]
        for m in msgs:
            pq.replace(m)
        context = ConsumeConcurrentlyContext(mq)
        status: Any = None
        error: BaseException | None = None
        try:
            status = self.listener(tuple(msgs), context)
        except Exception as exc:  # the listener's failure is a consume result
            error = exc
        if not isinstance(status, ConsumeConcurrentlyStatus):
            status = None

        def answer() -> None:
            kind = return_type(status, error, self.clock.now() - begin, self.consume_timeout_ms)
            if pq.dropped:
                return
            final = status if status is not None else ConsumeConcurrentlyStatus.RECONSUME_LATER
            self.process_consume_result(final, context, msgs, pq, mq, error, (begin, kind))

        if context.runs_for_ms > 0:
            self.timers.schedule(context.runs_for_ms, "consume_answer", answer, key=mq)
        else:
            answer()

    def process_consume_result(
        self,
        status: ConsumeConcurrentlyStatus,
        context: ConsumeConcurrentlyContext,
        msgs: list[StoredMessage],
        pq: ProcessQueue,
        mq: MessageQueue,
        error: BaseException | None = None,
        timing: tuple[int, ConsumeReturnType] | None = None,
    ) -> None:
        """``timing``: (CONSUME_START_TIME, ConsumeReturnType), stated in each ``consume`` event."""
        if not msgs:
            return
        ack_index = context.ack_index
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            # Java clamps the top; below −1 it would index out of range, so
            # the model clamps there too (every message failed).
            ack_index = max(min(ack_index, len(msgs) - 1), -1)
        else:
            ack_index = -1
        failed = msgs[ack_index + 1 :]
        failed_offsets = {m.queue_offset for m in failed}
        remaining = list(msgs)
        for m in msgs:
            ok = m.queue_offset not in failed_offsets
            detail: dict[str, Any] = {}
            if not ok and error is not None:
                detail["exception"] = type(error).__name__
            if not ok and not self.clustering:
                detail["dropped"] = True
            if timing is not None:
                detail["consume_start"], detail["return_type"] = timing[0], timing[1].value
            self._emit_consume(mq, m, "SUCCESS" if ok else "RECONSUME_LATER", detail or None)
        if self.clustering:
            back_failed: list[StoredMessage] = []
            for m in failed:
                if not self._send_message_back(m, context):
                    again = attrs.evolve(m, reconsume_times=m.reconsume_times + 1)
                    pq.replace(again)
                    back_failed.append(again)
            if back_failed:
                keep = {m.queue_offset for m in back_failed}
                remaining = [m for m in msgs if m.queue_offset not in keep]
                self.timers.schedule(
                    self.config.local_reconsume_delay_ms,
                    "consume_later",
                    lambda: self._submit_consume_request(back_failed, pq, mq, True),
                    key=mq,
                )
        offset = pq.remove_messages([m.queue_offset for m in remaining], self.clock.now())
        if offset >= 0 and not pq.dropped:
            self.offset_store.update_offset(mq, offset, True)

    def _send_message_back(self, msg: StoredMessage, context: ConsumeConcurrentlyContext) -> bool:
        """CONSUMER_SEND_MSG_BACK; True when the broker answered SUCCESS."""
        try:
            code = self.broker.send_back(
                self.group,
                msg.commitlog_offset,
                context.delay_level_when_next_consume,
                msg.uniq_key or msg.msg_id,
                self.max_reconsume_times(),
            )
        except Exception:
            return False
        return code == ResponseCode.SUCCESS
