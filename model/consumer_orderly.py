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
rebalance only takes a new queue after ``lock(mq)`` succeeds — in both message
models: a broadcasting client asks too, renews nothing and unlocks nothing, so a
second client of its group is refused each queue the first locked until that
lock expires on the broker (fidelity CL19); a dropped (clustering) queue is
unlocked at once when it holds no message, else 20 s later (``unlockDelay``).
Shutdown unlocks every queue (clustering).

A consume request (``consume`` timer) runs only when the queue is locked and
the lock is not expired (broadcasting: always); otherwise it retries
100 ms later via ``try_lock``: a successful ``lock(mq)`` resubmits after
10 ms, a failed one after 3000 ms. Inside its loop it re-checks the lock
before each batch (not locked / expired → try-lock in 10 ms) and yields
after ``max_time_consume_continuously_ms`` (60 s). Each batch:
``take_messages(consume_message_batch_max_size)`` → ``orderly_start`` (its detail states
``loop_age_ms``, the loop's age at that check, and ``loop_max_ms``: ORDERLY_LOOP_OVERRUN) →
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

``autoCommit`` (the listener may clear ``context.auto_commit``) selects
between two tables, as ``processConsumeResult`` does in 4.9.8:

- auto-commit: COMMIT and ROLLBACK are illegal there and are treated as
  SUCCESS (a warning, then ``commit()``); SUSPEND as above;
- manual commit: SUCCESS commits nothing (the batch stays in the consuming
  map and the loop takes the next messages); COMMIT → ``commit()`` of every
  message taken since the last commit; ROLLBACK → ``rollback()`` (all of
  them back into the map) and a resubmit after the context's suspend time;
  SUSPEND → ``checkReconsumeTimes``: some message below the max → consume
  again later, else nothing (no commit).

The consume lock (``ProcessQueue.consumeLock``, ``pq.consume_lock_held``) is
held while the listener runs; after taking it the request re-checks
``dropped`` (a dropped queue ends the request, its batch left in the
consuming map). ``removeUnnecessaryMessageQueue`` tries it: when it is held
the queue is neither unlocked nor removed (``try_unlock_times + 1``,
``model/consumer.py``). The model's client is single-threaded, so the lock
is only seen busy by a rebalance that the listener itself runs (a listener
that drives the consumer's clock or rebalance); 4.9.8 waits up to 1 s
(``tryLock(1000 ms)``), the model does not wait (fidelity CL9).
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
    ROLLBACK = "ROLLBACK"  # deprecated in 4.9.8; only meaningful with autoCommit = false
    COMMIT = "COMMIT"  # deprecated in 4.9.8; only meaningful with autoCommit = false
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
    # CHECK: lock 2, the local MessageQueueLock (one consume request per queue at a time). A client
    # without it (tests/model/test_orderly_mq_lock.py) starts a second batch while its first runs:
    # ORDERLY_CONCURRENT's same-client case catches it.
    uses_message_queue_lock = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stopped = False
        self._mq_locked: set[MessageQueue] = set()  # queues whose MessageQueueLock a request holds
        self._mq_waiting: dict[MessageQueue, list[ProcessQueue]] = {}  # requests blocked on it

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
        """``ConsumeRequest.run``: under the queue's MessageQueueLock (``synchronized (objLock)``).

        A request that finds the lock held blocks: the model queues it and runs it when the holder
        returns (the model's client is single-threaded, so only a request started from inside a
        running listener can find it held)."""
        if pq.dropped or not self.running:
            return
        if self.uses_message_queue_lock:
            if mq in self._mq_locked:
                self._mq_waiting.setdefault(mq, []).append(pq)
                return
            self._mq_locked.add(mq)
        try:
            self._consume_request_locked(pq, mq)
        finally:
            if self.uses_message_queue_lock:
                self._mq_locked.discard(mq)
                waiting = self._mq_waiting.get(mq)
                if waiting:
                    self.consume_request(waiting.pop(0), mq)

    def _consume_request_locked(self, pq: ProcessQueue, mq: MessageQueue) -> None:
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
            loop_age = self.clock.now() - begin
            if self._past_max_time(loop_age):
                self.submit_consume_request_later(pq, mq, 10)
                return
            msgs = pq.take_messages(self.config.consume_message_batch_max_size, self.clock.now())
            if not msgs:
                return
            if not self._consume_batch(msgs, pq, mq, loop_age):
                return

    def _past_max_time(self, interval: int) -> bool:
        """``interval > MAX_TIME_CONSUME_CONTINUOUSLY``: the request resubmits itself 10 ms later."""
        return interval > self.config.max_time_consume_continuously_ms

    def _consume_batch(
        self, msgs: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue, loop_age: int | None = None
    ) -> bool:
        """One batch; ``loop_age``: ms since the request's loop began (``beginTime``), at the check before it."""
        status: Any = None
        error: BaseException | None = None
        if pq.dropped:  # re-checked under the consume lock: the request ends
            return False
        context = ConsumeOrderlyContext(mq)
        offsets = [m.queue_offset for m in msgs]
        self._emit(
            "orderly_start", topic=mq.topic, queue_id=mq.queue_id, queue_offset=offsets[0],
            msg_key=msgs[0].uniq_key,
            detail=self._start_detail(offsets, pq, loop_age),
        )
        pq.consume_lock_held = True  # ProcessQueue.consumeLock, held while the listener runs
        try:
            status = self.listener(tuple(msgs), context)
        except Exception as exc:  # the listener's failure is a consume result
            error = exc
        finally:
            pq.consume_lock_held = False
        if not isinstance(status, ConsumeOrderlyStatus):
            status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        ok = status in (ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.COMMIT) or (
            context.auto_commit and status is ConsumeOrderlyStatus.ROLLBACK
        )
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

    def _start_detail(self, offsets: list[int], pq: ProcessQueue, loop_age: int | None) -> dict[str, Any]:
        """``orderly_start``'s detail: the batch's offsets, the client lock's age and, from the loop, its age
        and the client's MAX_TIME_CONSUME_CONTINUOUSLY (ORDERLY_LOOP_OVERRUN judges them)."""
        detail: dict[str, Any] = {"offsets": offsets, "lock_age_ms": self.clock.now() - pq.last_lock_timestamp}
        if loop_age is not None:
            detail["loop_age_ms"] = loop_age
            detail["loop_max_ms"] = self.config.max_time_consume_continuously_ms
        return detail

    def process_consume_result(
        self,
        msgs: list[StoredMessage],
        status: ConsumeOrderlyStatus,
        context: ConsumeOrderlyContext,
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> bool:
        """Returns whether the request continues with the next batch."""
        commit_offset = -1
        continue_consume = True
        suspended = status is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        # auto-commit: SUCCESS, and COMMIT / ROLLBACK (a warning, then as SUCCESS); manual: COMMIT
        if (context.auto_commit and not suspended) or status is ConsumeOrderlyStatus.COMMIT:
            commit_offset = pq.commit()
        elif status is ConsumeOrderlyStatus.ROLLBACK:
            pq.rollback()
            self.submit_consume_request_later(pq, mq, context.suspend_current_queue_time_millis)
            continue_consume = False
        elif suspended:
            suspend, updated = self.check_reconsume_times(msgs)
            if suspend:
                pq.make_messages_to_consume_again(updated)
                self.submit_consume_request_later(
                    pq, mq, context.suspend_current_queue_time_millis
                )
                continue_consume = False
            elif context.auto_commit:
                commit_offset = pq.commit()
        # manual commit and SUCCESS: nothing (the batch stays in the consuming map)
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
