"""``ModelBroker``'s transactional requests (a mixin of ``model/broker.py``): a half goes to
``RMQ_SYS_TRANS_HALF_TOPIC`` (TransactionalMessageBridge.parseHalfMessageInner); END_TRANSACTION
(EndTransactionProcessor) commits — the real message rebuilt from the half — or rolls back, and writes
the op message that resolves the half, at once (4.9) or at the op batch's next pass (5.1.0+,
``flush_ops``); every END is noted in the trace and the ghost history."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from rmqspec.model.ghost import (
    Acked,
    TxnNote,
)
from rmqspec.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    Message,
)
from rmqspec.model.queues import (
    HALF_TOPIC,
    OP_TOPIC,
    SCHEDULE_TOPIC,
    FileCreateFailed,
    PageCacheBusy,
    PutError,
)
from rmqspec.model.results import (
    BrokerError,
    ResponseCode,
    SendResult,
    SendStatus,
    TxnAction,
)
from rmqspec.model.sendpath import half_send_properties
from rmqspec.model.transactions import (
    commit_request,
    half_request,
    op_request,
    real_target_missing,
    validate_end,
)

# retry_queue_chooser(group, retry_queue_nums, sequence number) -> queue id
RetryQueueChooser = Callable[[str, int, int], int]

DLQ_NUMS_PER_GROUP = 1

class Transactions:
    """Mixin of ``ModelBroker``: send_half, end_transaction, the op messages (see the module docstring)."""

    def send_half(self, msg: Message, queue_id: int, producer_group: str) -> SendResult:
        """SEND_MESSAGE with TRAN_MSG: the half goes to RMQ_SYS_TRANS_HALF_TOPIC queue 0."""
        self._require_running()
        now = self._now()
        self._reject_when_busy(now)
        self._check_send_target(msg.topic, queue_id)
        wire, uniq = self._wire_props(msg, now)
        wire.pop(PROPERTY_DELAY_TIME_LEVEL, None)  # the producer clears DELAY
        wire[PROPERTY_TRANSACTION_PREPARED] = "true"
        wire[PROPERTY_PRODUCER_GROUP] = producer_group
        props = half_send_properties(wire, self.config)
        request = half_request(msg.topic, queue_id, msg.body, msg.flag, props, now, msg.sys_flag)
        try:
            record = self.store.prepare(request, now)
        except PutError as e:
            raise BrokerError(e.code, e.remark) from None
        self.store.ensure_topic(HALF_TOPIC, 1)
        self.store.append(record)
        in_time = self.durability.on_append(len(self.store.records), msg.waits_for_flush, now)
        self._note_store(record, now)
        self.ghost.note_acked(
            Acked(
                now,
                "half",
                uniq,
                msg.topic,
                queue_id,
                record.commitlog_offset,
                record.queue_offset,
                self.durability.sync and msg.waits_for_flush and in_time,
            )
        )
        self.ghost.note_txn(TxnNote(now, producer_group, uniq, record.commitlog_offset, "HALF"))
        self._emit(
            "txn_half",
            now,
            actor="broker",
            group=producer_group,
            topic=msg.topic,
            queue_id=queue_id,
            queue_offset=record.queue_offset,
            commitlog_offset=record.commitlog_offset,
            msg_key=uniq,
            msg_id=self._msg_id(record),
            txn_id=uniq,
            status="SEND_OK" if in_time else "FLUSH_DISK_TIMEOUT",  # stored all the same
        )
        return SendResult(
            SendStatus.SEND_OK if in_time else SendStatus.FLUSH_DISK_TIMEOUT,
            self._msg_id(record),
            uniq,
            record.queue_offset,
            record.commitlog_offset,
        )

    def end_transaction(
        self,
        producer_group: str,
        commitlog_offset: int,
        tran_state_table_offset: int,
        action: TxnAction,
        from_check: bool,
    ) -> ResponseCode:
        """END_TRANSACTION. UNKNOWN does nothing; COMMIT/ROLLBACK validate, then write."""
        self._require_running()
        now = self._now()
        half = self.store.look(commitlog_offset)
        txn_id = half.uniq_key if half is not None else None
        if action is TxnAction.UNKNOWN:
            self._note_txn_end(now, producer_group, txn_id, commitlog_offset, action, from_check)
            return ResponseCode.SUCCESS
        if validate_end(half, producer_group, commitlog_offset, tran_state_table_offset):
            return ResponseCode.SYSTEM_ERROR
        assert half is not None
        if action is TxnAction.COMMIT:
            if real_target_missing(half):
                return ResponseCode.SYSTEM_ERROR
            self._lock_gate(now, "END_TRANSACTION's commit")  # its rejectRequest is false (model/putlock.py)
            try:
                real = self.store.prepare(
                    commit_request(half, commitlog_offset, self.config.behaviour.commit_drops_real_queue), now)
            except (FileCreateFailed, PageCacheBusy):  # sendFinalMessage: SYSTEM_ERROR for both
                return ResponseCode.SYSTEM_ERROR  # model/filefault.py, model/putlock.py
            except PutError as refused:  # sendFinalMessage's mapping: a full disk's refusal keeps its code
                return ResponseCode.SERVICE_NOT_AVAILABLE if refused.code is ResponseCode.SERVICE_NOT_AVAILABLE \
                    else ResponseCode.MESSAGE_ILLEGAL
            self.store.append(real)
            self.durability.on_append(len(self.store.records), wait=False)  # endMessageTransaction: WAIT=false
            self._note_store(real, now)
            delayed = real.topic == SCHEDULE_TOPIC
            topic = half.prop(PROPERTY_REAL_TOPIC) or ""
            queue_id = int(half.prop(PROPERTY_REAL_QUEUE_ID) or "0")
            self.ghost.note_acked(
                Acked(
                    now,
                    "commit",
                    txn_id,
                    topic,
                    queue_id,
                    real.commitlog_offset,
                    real.queue_offset,
                    False,  # not waited for: durable at the next group commit
                )
            )
            self._emit(
                "send",
                now,
                actor="broker",
                group=producer_group,
                topic=topic,
                queue_id=queue_id,
                queue_offset=real.queue_offset,
                commitlog_offset=real.commitlog_offset,
                msg_key=txn_id,
                msg_id=self._msg_id(real),
                reconsume_times=real.reconsume_times,
                delay_level=real.queue_id + 1 if delayed else None,
                deliver_ts=self._deliver_ts(real),
                status="SEND_OK",
                txn_id=txn_id,
            )
        if self.config.behaviour.op_batch:  # 5.1.0+: written by the op batch service
            self.txn.enqueue_op(half.queue_id, half.queue_offset, now)
        else:  # answered unflushed
            self._lock_gate(now, "END_TRANSACTION's op")
            self._write_ops([(half.queue_id, str(half.queue_offset))], now, wait=False)
        self._note_txn_end(now, producer_group, txn_id, commitlog_offset, action, from_check)
        return ResponseCode.SUCCESS

    def _write_ops(self, ops: list[tuple[int, str]], now: int, wait: bool = True) -> None:
        """Op messages; ``wait`` False: at an END, answered before the group commit (model/crash.py). An op the
        store refuses is not written and nothing else happens: 4.9.8's END drops deletePrepareMessage's result,
        5.3.3's batchSendOpMessage logs a failed writeOp (docs/fidelity.md WR3)."""
        for queue_id, body in ops:
            self.store.ensure_topic(OP_TOPIC, 1)
            with contextlib.suppress(PutError):
                self._put(op_request(queue_id, body, now, self._store_v6, wait), now)

    def flush_ops(self) -> None:
        """5.1.0+: write every pending op message now (wall-clock mode: the remote broker was seen
        to write its batch)."""
        self._require_running()
        now = self._now()
        self._write_ops(self.txn.take_ops(now, 0, force=True), now)

    def _note_txn_end(
        self,
        now: int,
        group: str,
        txn_id: str | None,
        offset: int,
        action: TxnAction,
        from_check: bool,
    ) -> None:
        self.ghost.note_txn(TxnNote(now, group, txn_id, offset, action.value, from_check))
        self._emit(
            "txn_end",
            now,
            actor="broker",
            group=group,
            commitlog_offset=offset,
            msg_key=txn_id,
            txn_id=txn_id,
            status=action.value,
            detail={"from_check": from_check},
        )
