"""``ModelBroker``'s background services (a mixin of ``model/broker.py``): ``tick`` runs what is due at
``clock.now()`` in a fixed order — schedule deliveries (levels ascending), 5.x timer fires, the transaction
check round (or, driven from outside, ``check_round``), 5.1.0+'s op batches, consumer-offset and
delay-progress persistence — and the hooks through which the check service writes, checks, discards
and moves its progress. Each fire is a write like a send's (``_fired``, ``_timer_fire``)."""

from __future__ import annotations

from collections.abc import Callable

from rmqspec.model.ghost import (
    Fired,
    TxnNote,
)
from rmqspec.model.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    MessageQueue,
)
from rmqspec.model.putlock import REJECT_CODE, REJECT_REMARK, LockState
from rmqspec.model.queues import (
    PutError,
    PutRequest,
    Record,
)
from rmqspec.model.results import (
    BrokerError,
    CheckRequest,
)
from rmqspec.model.retention import check_disk_ratio
from rmqspec.model.timer import TIMER_TOPIC, fire_properties
from rmqspec.model.transactions import (
    CID_RMQ_SYS_TRANS,
    CheckHooks,
)

# retry_queue_chooser(group, retry_queue_nums, sequence number) -> queue id
RetryQueueChooser = Callable[[str, int, int], int]

DLQ_NUMS_PER_GROUP = 1

class BackgroundServices:
    """Mixin of ``ModelBroker``: the services ``tick`` runs (see the module docstring)."""


    def tick(self) -> list[CheckRequest]:
        """Run the services due at ``clock.now()``; returns the transaction checks sent."""
        self._require_running()
        now = self._now()
        self._lock_gate(now, "a tick")  # its services may put (model/putlock.py)
        self.durability.on_tick(len(self.store.records), now)  # the GroupCommitService's pass (SYNC)
        readable = self.store.write_pos
        if self.store.buffered:  # the CommitRealTimeService (model/committing.py); the flush sees what it committed
            due = self.store.written_by(now - self.committer.catch_up_ms)
            self.store.commit_to(self.committer.pass_at(now, self.store.committed_where, self.store.write_pos,
                                                        self.config.commitlog_file_size, self.store.buffered_from,
                                                        due))
            readable = self.store.readable_where
        self.durability.on_async_pass(now, readable, self.config.commitlog_file_size,
                                      self.store.records_ending_by)  # FlushRealTimeService (ASYNC)
        self.cleaner.run(now, self.store, self._emit)  # retention first (model/retention.py)
        self.schedule.deliver_due(
            self.store, now, lambda e, n, lv, ts: self._fired(now, e, n, lv, ts)
        )
        if self.config.timer_running:
            self.timer.tick(now, self.store.max_offset(TIMER_TOPIC, 0), self.store.timer_slot,
                            lambda offset, enqueue_ms: self._timer_fire(now, offset, enqueue_ms))
            self.timer.maybe_persist(now)
            if self.config.behaviour.pop:
                self._revive(now)  # PopReviveService (skipped without the timer wheel; model/broker_pop.py)
        interval = self.config.transaction_op_batch_interval_ms
        if self.config.behaviour.op_batch and not self.external_op_batches and self.txn.op_batch_due(now, interval):
            self._write_ops(self.txn.take_ops(now, interval), now)
        requests: list[CheckRequest] = []
        if not self.external_check_rounds and self.txn.check_due(now, self.config.transaction_check_interval_ms):
            requests = self.check_round()
        if now < self.offsets_last_persist:
            self.offsets_last_persist = now
        if now - self.offsets_last_persist >= self.config.flush_consumer_offset_interval_ms:
            self.offsets.persist()
            self.pop_state.persist_revive_progress()  # the revive offsets are consumer offsets (model/pop.py)
            self.offsets_last_persist = now
        self.pop_state.maybe_persist_orders(now)  # consumerOrderInfo.json, every 10 s
        self.schedule.maybe_persist(now, self.config.flush_delay_offset_interval_ms)
        return requests

    def stall_disk(self, ms: int) -> None:
        """``Capability.DISK_STALL``: from now, no flush completes for ``ms`` (``model/crash.py``)."""
        self._require_running()
        self.durability.stall(self._now() + ms)

    def block_next_file(self) -> int:
        """``Capability.FILE_CREATE_FAULT``: the commitlog file after the write position's cannot be created
        until ``unblock_next_file`` or a restart (``model/filefault.py``); returns its start offset."""
        self._require_running()
        return self.store.file_fault.block(self.store.write_pos, self.config.commitlog_file_size)

    def unblock_next_file(self) -> None:
        """``Capability.FILE_CREATE_FAULT``: the obstacle is gone; the next put needing the file creates it."""
        self._require_running()
        self.store.file_fault.unblock()

    def hold_put_lock(self, ms: int) -> None:
        """``Capability.PUT_LOCK_HOLD``: a slow put holds the put lock from now for ``ms`` (model/putlock.py)."""
        self._require_running()
        self.store.put_lock.hold(self._now(), ms)

    def _lock_gate(self, now: int, what: str) -> LockState:
        """The put lock's state for ``what`` (which would put); ``PutWouldWait`` while a put would wait."""
        return self.store.put_lock.gate(now, self.config.os_page_cache_busy_timeout_ms, what)

    def _reject_when_busy(self, now: int) -> None:
        """SendMessageProcessor.rejectRequest while isOSPageCacheBusy: SYSTEM_BUSY before anything is done."""
        if self._lock_gate(now, "a send") is LockState.BUSY:
            raise BrokerError(REJECT_CODE, REJECT_REMARK)

    def set_disk_usage(self, ratio: float) -> None:
        """``Capability.DISK_USAGE``: the usage the clean service sees from its next pass."""
        self.cleaner.disk_ratio = check_disk_ratio(ratio)

    def commitlog_min_offset(self) -> int:
        """GET_BROKER_RUNTIME_INFO's ``commitLogMinOffset``: the first byte retention kept."""
        self._require_running()
        return self.store.commitlog_min

    def check_round(self, reput_visible: bool | int = True) -> list[CheckRequest]:
        """Run one transaction-check round at ``clock.now()`` (the check service's body);
        ``reput_visible``: see ``TransactionService.check``."""
        self._require_running()
        now = self._now()
        self._lock_gate(now, "a check round")  # it may re-put halves (model/putlock.py)
        self.txn.last_check = now
        return self.txn.check(self.store, self.offsets, self.config, now, self._hooks(now), reput_visible)

    def _fired(
        self, now: int, entry: Record, new: Record | None, level: int, deliver_ts: int
    ) -> None:
        if new is None:
            return  # a delayed copy of a half: discarded, nothing stored
        self.durability.on_append(len(self.store.records))  # WAIT=false, flushed at once: model/crash.py
        self._note_store(new, now)
        self.ghost.note_fired(
            Fired(
                now,
                level,
                deliver_ts,
                entry.commitlog_offset,
                new.commitlog_offset,
                new.topic,
                new.queue_id,
                new.uniq_key,
            )
        )
        self._emit(
            "schedule_fire",
            now,
            actor="broker",
            **self._copy(new),
            delay_level=level,
            deliver_ts=deliver_ts,
            detail={
                "from_queue_offset": entry.queue_offset,
                "from_commitlog_offset": entry.commitlog_offset,
            },
        )

    def _timer_fire(self, now: int, offset: int, enqueue_ms: int) -> bool:
        """TimerMessageStore's dequeue: the copy at ``offset`` of the timer queue to its real topic; a copy
        whose record retention took is released, nothing re-put (``dequeue_get_msg_miss``, fidelity TW-6)."""
        entry = self.store.entry(TIMER_TOPIC, 0, offset)
        if self.store.removed(entry.commitlog_offset):
            return True
        request = PutRequest(
            topic=entry.prop(PROPERTY_REAL_TOPIC) or "",
            queue_id=int(entry.prop(PROPERTY_REAL_QUEUE_ID) or "0"),
            body=entry.body,
            properties=fire_properties(entry.props, enqueue_ms, now),
            sys_flag=entry.sys_flag,
            born_ts=entry.born_ts,
            flag=entry.flag,
            reconsume_times=entry.reconsume_times,
        )
        try:
            new = self.store.put(request, now)
        except PutError:
            return False
        deliver_ts = self._deliver_ts(entry)
        self.durability.on_append(len(self.store.records))  # WAIT=false, flushed at once: model/crash.py
        self._note_store(new, now)
        self.ghost.note_timer_fired(
            Fired(now, 0, deliver_ts or 0, entry.commitlog_offset, new.commitlog_offset, new.topic,
                  new.queue_id, new.uniq_key)
        )
        self._emit(
            "timer_fire",
            now,
            actor="broker",
            **self._copy(new),
            deliver_ts=deliver_ts,
            detail={"from_queue_offset": entry.queue_offset, "from_commitlog_offset": entry.commitlog_offset},
        )
        return True

    def _hooks(self, now: int) -> CheckHooks:
        def on_store(record: Record) -> None:  # a check's re-put, a discarded half: WAIT=false, flushed at once
            self.durability.on_append(len(self.store.records))
            self._note_store(record, now)

        def on_check(old: Record, new: Record, times: int) -> None:
            group = old.prop(PROPERTY_PRODUCER_GROUP)
            self.ghost.note_txn(
                TxnNote(now, group, old.uniq_key, old.commitlog_offset, "CHECK", check_times=times)
            )
            self._emit(
                "txn_check",
                now,
                actor="broker",
                group=group,
                topic=old.prop(PROPERTY_REAL_TOPIC),
                queue_offset=new.queue_offset,
                commitlog_offset=new.commitlog_offset,
                msg_key=old.uniq_key,
                msg_id=self._msg_id(new),
                txn_id=old.uniq_key,
                detail={"check_times": times},
            )

        def on_discard(half: Record, copy_: Record) -> None:
            group = half.prop(PROPERTY_PRODUCER_GROUP)
            self.ghost.note_txn(
                TxnNote(now, group, half.uniq_key, half.commitlog_offset, "DISCARD")
            )
            self._emit(
                "txn_discard",
                now,
                actor="broker",
                group=group,
                topic=half.prop(PROPERTY_REAL_TOPIC),
                commitlog_offset=half.commitlog_offset,
                msg_key=half.uniq_key,
                msg_id=self._msg_id(half),
                txn_id=half.uniq_key,
            )

        def on_offset(mq: MessageQueue, offset: int) -> None:
            self._note_offset(now, CID_RMQ_SYS_TRANS, mq, offset, actor="broker")

        return CheckHooks(on_store, on_check, on_discard, on_offset)
