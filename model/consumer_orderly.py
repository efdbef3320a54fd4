"""Orderly consumption: queue locks, suspend-and-retry, commit of the consuming batch.

Theory of operation
-------------------
Follows RocketMQ 4.9 ``C/impl/consumer/ConsumeMessageOrderlyService`` with
``RebalanceImpl.lock`` / ``lockAll`` / ``unlockAll`` and
``ProcessQueue.takeMessages`` / ``commit`` / ``makeMessageToConsumeAgain``.

Locks (clustering only): ``lock_all`` runs first after ``lock_first_delay_ms``
(1 s) and then every ``lock_interval_ms`` (20 s); a granted queue gets
``locked = True`` and ``last_lock_timestamp = now``, a refused one
``locked = False``; a lock request that fails (lost, broker error) changes
nothing, so the client-side lock ages. The client considers its lock expired
when ``now − last_lock_timestamp > client_lock_max_live_ms`` (30 s). A
rebalance only takes a new queue after ``lock(mq)`` succeeds; a dropped
queue is unlocked at once when it holds no message, else 20 s later
(``unlockDelay``). Shutdown unlocks every queue.

A consume request (``consume`` timer) runs only when the queue is locked and
the lock is not expired (broadcasting: always); otherwise it retries
100 ms later via ``try_lock``: a successful ``lock(mq)`` resubmits after
10 ms, a failed one after 3000 ms. Inside its loop it re-checks the lock
before each batch (not locked / expired → try-lock in 10 ms) and yields
after ``max_time_consume_continuously_ms`` (60 s). Each batch:
``take_messages(consume_message_batch_max_size)`` → ``orderly_start`` →
listener → one ``consume`` event per message → ``orderly_end`` → result:

- SUCCESS → ``commit()`` (last offset of the batch + 1) → offset update
  (``increaseOnly = false``, as ConsumeMessageOrderlyService calls it);
- SUSPEND_CURRENT_QUEUE_A_MOMENT, ``None`` or an exception →
  ``checkReconsumeTimes``: a message below the max gets
  ``reconsume_times + 1`` (in memory) and the batch is consumed again after
  the context's suspend time (−1 → ``suspend_current_queue_time_millis``,
  clamped to [10, 30000]); a message at the max (−1 → Integer.MAX_VALUE) is
  sent back; when every message of the batch was sent back the batch is
  committed, else the whole batch (sent-back ones included, as in RocketMQ)
  is consumed again.

Send-back encoding: the Java client sends a fresh copy to ``%RETRY%{group}``
with RECONSUME_TIME ≥ MAX_RECONSUME_TIMES, which the broker routes to the
DLQ. Through the ``Broker`` protocol that is ``send_back(group,
commitlog_offset, delay_level=−1, msgId, max)``, whose outcome is the same
DLQ copy (SPEC §4.4).

Only ``autoCommit = true`` is modelled (COMMIT / ROLLBACK statuses are not).
The consume lock that ``removeUnnecessaryMessageQueue`` tries is always free
in the model (one timer at a time), so a dropped queue is never left locked
because it was busy.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from rmqspec.model.consumer import INTEGER_MAX_VALUE, PushConsumer
from rmqspec.model.message import MessageQueue, StoredMessage
from rmqspec.model.process_queue import ProcessQueue
from rmqspec.model.results import ResponseCode

TRY_LOCK_WHEN_NOT_LOCKED_MS = 100
TRY_LOCK_IN_LOOP_MS = 10
RESUBMIT_AFTER_LOCK_OK_MS = 10
RESUBMIT_AFTER_LOCK_FAILED_MS = 3000
SUSPEND_MIN_MS = 10
SUSPEND_MAX_MS = 30_000


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    # with ``ConsumeOrderlyContext.auto_commit`` false: COMMIT commits what the queue consumed since the last
    # commit, ROLLBACK puts it all back (consumed again after the suspend time); with it true both are SUCCESS
    ROLLBACK = "ROLLBACK"
    COMMIT = "COMMIT"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@attrs.define
class ConsumeOrderlyContext:
    """``suspend_current_queue_time_millis`` −1 means the consumer's setting."""

    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_millis: int = -1


OrderlyListener = Callable[
    [Sequence[StoredMessage], ConsumeOrderlyContext], ConsumeOrderlyStatus | None
]


def clamp_suspend(ms: int, default_ms: int) -> int:
    """``submitConsumeRequestLater``: −1 → the default, then clamp to [10, 30000]."""
    if ms == -1:
        ms = default_ms
    return min(max(ms, SUSPEND_MIN_MS), SUSPEND_MAX_MS)


class OrderlyConsumer(PushConsumer):
    """A push consumer with MessageListenerOrderly semantics."""

    orderly = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stopped = False

    def max_reconsume_times(self) -> int:
        """``getMaxReconsumeTimes``: −1 means Integer.MAX_VALUE."""
        value = self.config.max_reconsume_times
        return INTEGER_MAX_VALUE if value == -1 else value

    # -- service lifecycle -----------------------------------------------
    def _start_service(self) -> None:
        self.stopped = False
        if self.clustering:
            self.timers.schedule(self.config.lock_first_delay_ms, "lock_all", self._lock_all_task)

    def _lock_all_task(self) -> None:
        if self.stopped or not self.running:
            return
        self.lock_all()
        self.timers.schedule(self.config.lock_interval_ms, "lock_all", self._lock_all_task)

    def _shutdown_service(self) -> None:
        self.stopped = True
        if self.clustering:
            self.unlock_all()

    def kill(self) -> None:
        self.stopped = True
        super().kill()

    def lock(self, mq: MessageQueue) -> bool:
        if self.stopped:
            return False
        return super().lock(mq)

    # -- scheduling ------------------------------------------------------
    def _submit_consume_request(
        self, msgs: Sequence[StoredMessage], pq: ProcessQueue, mq: MessageQueue, dispatch: bool
    ) -> None:
        if dispatch:
            self._consume_later(pq, mq, 0)

    def _consume_later(self, pq: ProcessQueue, mq: MessageQueue, delay: int) -> None:
        self.timers.schedule(delay, "consume", lambda: self.consume_request(pq, mq), key=mq)

    def submit_consume_request_later(self, pq: ProcessQueue, mq: MessageQueue, ms: int) -> None:
        delay = clamp_suspend(ms, self.config.suspend_current_queue_time_millis)
        self._consume_later(pq, mq, delay)

    def try_lock_later_and_reconsume(self, mq: MessageQueue, pq: ProcessQueue, delay: int) -> None:
        def attempt() -> None:
            if self.lock(mq):
                self.submit_consume_request_later(pq, mq, RESUBMIT_AFTER_LOCK_OK_MS)
            else:
                self.submit_consume_request_later(pq, mq, RESUBMIT_AFTER_LOCK_FAILED_MS)

        self.timers.schedule(delay, "try_lock", attempt, key=mq)

    # -- ConsumeRequest.run ---------------------------------------------------
    def lock_valid(self, pq: ProcessQueue) -> bool:
        """Locked and not expired on the client (always true when broadcasting)."""
        if not self.clustering:
            return True
        return pq.locked and not pq.is_lock_expired(
            self.clock.now(), self.config.client_lock_max_live_ms
        )

    def consume_request(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        if pq.dropped or not self.running:
            return
        if not self.lock_valid(pq):
            self.try_lock_later_and_reconsume(mq, pq, TRY_LOCK_WHEN_NOT_LOCKED_MS)
            return
        begin = self.clock.now()
        while True:
            if pq.dropped or not self.running:
                return
            if self.clustering and not self.lock_valid(pq):
                self.try_lock_later_and_reconsume(mq, pq, TRY_LOCK_IN_LOOP_MS)
                return
            if self.clock.now() - begin > self.config.max_time_consume_continuously_ms:
                self.submit_consume_request_later(pq, mq, 10)
                return
            msgs = pq.take_messages(self.config.consume_message_batch_max_size, self.clock.now())
            if not msgs:
                return
            if not self._consume_batch(msgs, pq, mq):
                return

    def _consume_batch(self, msgs: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue) -> bool:
        context = ConsumeOrderlyContext(mq)
        offsets = [m.queue_offset for m in msgs]
        self._emit(
            "orderly_start", topic=mq.topic, queue_id=mq.queue_id, queue_offset=offsets[0],
            msg_key=msgs[0].uniq_key,
            detail={"offsets": offsets, "lock_age_ms": self.clock.now() - pq.last_lock_timestamp},
        )
        status: Any = None
        error: BaseException | None = None
        try:
            status = self.listener(tuple(msgs), context)
        except Exception as exc:  # the listener's failure is a consume result
            error = exc
        if not isinstance(status, ConsumeOrderlyStatus):
            status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        # consumed: SUCCESS, COMMIT, and ROLLBACK under autoCommit (4.9.8 then reads it as SUCCESS)
        ok = status in (ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.COMMIT) or (
            context.auto_commit and status is ConsumeOrderlyStatus.ROLLBACK)
        for m in msgs:
            detail: dict[str, Any] = {"orderly_status": status.value}
            if error is not None:
                detail["exception"] = type(error).__name__
            self._emit_consume(mq, m, "SUCCESS" if ok else "RECONSUME_LATER", detail)
        self._emit(
            "orderly_end", topic=mq.topic, queue_id=mq.queue_id, queue_offset=offsets[0],
            msg_key=msgs[0].uniq_key, status=status.value, detail={"offsets": offsets},
        )
        return self.process_consume_result(msgs, status, context, pq, mq)

    def process_consume_result(
        self,
        msgs: list[StoredMessage],
        status: ConsumeOrderlyStatus,
        context: ConsumeOrderlyContext,
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> bool:
        """Returns whether the request continues with the next batch (4.9.8's processConsumeResult, read
        with ``javap -c``). autoCommit: SUCCESS, COMMIT and ROLLBACK commit the queue's consumed messages;
        without it SUCCESS commits nothing (they stay taken), COMMIT commits them all, ROLLBACK puts them all
        back (``ProcessQueue.rollback``) and consumes again after the suspend time; SUSPEND retries the
        batch, and at the reconsume limit (every message sent back) commits only under autoCommit."""
        commit_offset = -1
        continue_consume = True
        auto = context.auto_commit
        if status is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
            suspend, updated = self.check_reconsume_times(msgs)
            if suspend:
                pq.make_messages_to_consume_again(updated)
                self.submit_consume_request_later(
                    pq, mq, context.suspend_current_queue_time_millis
                )
                continue_consume = False
            elif auto:
                commit_offset = pq.commit()
        elif auto or status is ConsumeOrderlyStatus.COMMIT:
            commit_offset = pq.commit()
        elif status is ConsumeOrderlyStatus.ROLLBACK:
            pq.rollback()
            self.submit_consume_request_later(pq, mq, context.suspend_current_queue_time_millis)
            continue_consume = False
        if commit_offset >= 0 and not pq.dropped:
            self.offset_store.update_offset(mq, commit_offset, False)
        return continue_consume

    def check_reconsume_times(self, msgs: list[StoredMessage]) -> tuple[bool, list[StoredMessage]]:
        """``checkReconsumeTimes``: (suspend?, the batch with updated reconsume_times)."""
        suspend = False
        updated: list[StoredMessage] = []
        limit = self.max_reconsume_times()
        for m in msgs:
            if m.reconsume_times >= limit and self.send_message_back(m):
                updated.append(m)
                continue
            suspend = True
            updated.append(attrs.evolve(m, reconsume_times=m.reconsume_times + 1))
        return suspend, updated

    def send_message_back(self, msg: StoredMessage) -> bool:
        """The limit was reached: the broker routes the message to the DLQ."""
        try:
            code = self.broker.send_back(
                self.group, msg.commitlog_offset, -1, msg.uniq_key or msg.msg_id,
                self.max_reconsume_times(),
            )
        except Exception:
            return False
        return code == ResponseCode.SUCCESS
