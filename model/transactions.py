"""Transactions: half messages, op messages and the check service.

Theory of operation
-------------------
Follows RocketMQ 4.9.8 B/transaction/queue/TransactionalMessageBridge,
TransactionalMessageServiceImpl, DefaultTransactionalMessageCheckListener,
B/processor/EndTransactionProcessor and B/transaction/
TransactionalMessageCheckService.

- ``half_request`` (parseHalfMessageInner): the producer's message (TRAN_MSG
  = true, PGROUP; the producer already removed DELAY) goes to
  ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with REAL_TOPIC / REAL_QID and
  transaction type NOT, so it gets a consume-queue entry consumers never read.
- ``end``: UNKNOWN does nothing. COMMIT / ROLLBACK look the record up by
  commitlog offset (missing → SYSTEM_ERROR) and check PGROUP, queue offset
  (= tran_state_table_offset) and commitlog offset (mismatch → SYSTEM_ERROR).
  COMMIT writes the real message (endMessageTransaction): topic/queue from
  REAL_*, body, flag, born timestamp, reconsume_times, sys_flag type COMMIT,
  prepared_txn_offset = the half's commitlog offset. RocketMQ builds the
  properties *string* before it clears REAL_TOPIC / REAL_QID / TRAN_MSG from
  the map, so the stored real message still carries them (and PGROUP,
  UNIQ_KEY, TRANSACTION_CHECK_TIMES) — a 4.9 fact the model reproduces. Then
  an op message (both COMMIT and ROLLBACK): ``RMQ_SYS_TRANS_OP_HALF_TOPIC``,
  queue = the half's queue id, TAGS ``d``, body = the half's queue offset in
  decimal, born at ``now``; its stored properties are ``TAGS=d, WAIT=true``
  (the UNIQ_KEY RocketMQ sets afterwards never reaches the string). Nothing
  de-duplicates a second COMMIT: it writes a second real message.
- ``check`` (TransactionalMessageServiceImpl.check), run every
  ``transaction_check_interval_ms``: per half queue, from the consume offsets
  of group ``CID_RMQ_SYS_TRANS`` (−1 → the queue's min offset), load ops in
  batches of 32 into a remove-map (op body offset ≥ half offset) or the done
  list (< half offset); walk the halves: a half in the remove-map is done;
  otherwise ``lifecycle.check_decision`` (TRANSACTION_CHECK_TIMES, born
  timestamp): DISCARD → copy to ``TRANS_CHECK_MAX_TIME_TOPIC``; a half stored
  at/after the run's start stops the scan; SKIP_YOUNG stops the scan; CHECK
  only once the op queue is exhausted (more ops may resolve it), then the
  half is re-put as a new half (TRANSACTION_CHECK_TIMES + 1; RocketMQ's
  renewHalfMessageInner copies neither flag nor reconsume_times) and a
  ``CheckRequest`` is returned for it. Finally the half offset advances to
  the scan position and the op offset over the contiguous run of done ops.

Simplifications: CHECK_IMMUNITY_TIME_IN_SECONDS is a system property a
producer cannot set through ``Message``, so the immunity branch
(checkPrepareQueueOffset) is unreachable and not modelled; a half whose age
equals the timeout exactly is checked (RocketMQ spins until the wall clock
moves one more millisecond); the 60 s per-run time limit does not exist.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from rmqspec.model.config import BrokerConfig
from rmqspec.model.lifecycle import CHECK, DISCARD, SKIP_YOUNG, check_decision
from rmqspec.model.message import (
    BORNHOST_V6_FLAG,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageQueue,
)
from rmqspec.model.offsets import ConsumerOffsets
from rmqspec.model.queues import (
    HALF_TOPIC,
    OP_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    GetStatus,
    PutError,
    PutRequest,
    Record,
    Store,
    bridge_pull_status,
)
from rmqspec.model.results import CheckRequest, PullStatus

CID_RMQ_SYS_TRANS = "CID_RMQ_SYS_TRANS"
REMOVE_TAG = "d"
OP_PULL_BATCH = 32


def reset_transaction_type(sys_flag: int, ttype: int) -> int:
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | ttype


def half_request(
    topic: str,
    queue_id: int,
    body: bytes,
    flag: int,
    props: dict[str, str],
    born_ts: int,
    sys_flag: int = 0,
) -> PutRequest:
    """parseHalfMessageInner: the half as stored (``props`` already has TRAN_MSG/PGROUP)."""
    props = dict(props)
    props[PROPERTY_REAL_TOPIC] = topic
    props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    return PutRequest(
        topic=HALF_TOPIC,
        queue_id=0,
        body=body,
        properties=props,
        sys_flag=reset_transaction_type(sys_flag, TRANSACTION_NOT_TYPE),
        born_ts=born_ts,
        flag=flag,
    )


def op_request(queue_id: int, body: str, now: int, born_v6: bool, wait: bool = True) -> PutRequest:
    """addRemoveTagInTransactionOp (4.9: ``body`` is the half's queue offset) or getOpMessage
    (5.1.0+: the queue offsets of the halves the batch resolves, each followed by a comma)."""
    return PutRequest(
        topic=OP_TOPIC,
        queue_id=queue_id,
        body=body.encode("utf-8"),
        properties=((PROPERTY_TAGS, REMOVE_TAG), (PROPERTY_WAIT_STORE_MSG_OK, "true")),
        sys_flag=BORNHOST_V6_FLAG if born_v6 else 0,
        born_ts=now,
        wait=wait,  # makeOpMessageInner: false (the string says WAIT=true); a batch's: flushed at once
    )


def commit_request(half: Record, commitlog_offset: int, rebuilt: bool = False) -> PutRequest:
    """endMessageTransaction + the processor's sys_flag / prepared offset / TRAN_MSG handling;
    ``rebuilt`` (5.5.0+): the stored string is rebuilt after REAL_TOPIC / REAL_QID are cleared
    (TRAN_MSG, cleared later by the processor, stays)."""
    real_queue = (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)
    string_props = tuple((k, v) for k, v in half.props if k not in real_queue) if rebuilt else half.props
    map_props = {
        k: v
        for k, v in half.props
        if k not in (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED)
    }
    delay = _int_or(map_props.get(PROPERTY_DELAY_TIME_LEVEL), 0)
    return PutRequest(
        topic=half.prop(PROPERTY_REAL_TOPIC) or "",
        queue_id=int(half.prop(PROPERTY_REAL_QUEUE_ID) or "0"),
        body=half.body,
        # when scheduled, CommitLog recomputes the string from the map
        properties=tuple(map_props.items()) if delay > 0 else string_props,
        sys_flag=reset_transaction_type(half.sys_flag, TRANSACTION_COMMIT_TYPE),
        born_ts=half.born_ts,
        flag=half.flag,
        reconsume_times=half.reconsume_times,
        prepared_txn_offset=commitlog_offset,
        delay_level=delay,
    )


def _java_split(text: str, sep: str) -> list[str]:
    """Java's ``String.split`` of a plain separator, trailing empty strings dropped (Java keeps a
    lone "" for an empty text: it parses to -1 and is skipped alike)."""
    parts = text.split(sep)
    while parts and not parts[-1]:
        parts.pop()
    return parts


def _int_or(text: str | None, default: int) -> int:
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        return -1  # Java getInt/getLong answer -1 for garbage


def validate_end(
    record: Record | None, producer_group: str, commitlog_offset: int, tran_state_table_offset: int
) -> str | None:
    """checkPrepareMessage (+ endMessageTransaction's REAL_* parsing): None if OK, else why not."""
    if record is None:
        return "Find prepared transaction message failed"
    pgroup = record.prop(PROPERTY_PRODUCER_GROUP)
    if pgroup is None or pgroup != producer_group:
        return "The producer group wrong"
    if record.queue_offset != tran_state_table_offset:
        return "The transaction state table offset wrong"
    if record.commitlog_offset != commitlog_offset:
        return "The commit log offset wrong"
    return None


def real_target_missing(record: Record) -> bool:
    """endMessageTransaction would fail parsing REAL_TOPIC / REAL_QID."""
    qid = record.prop(PROPERTY_REAL_QUEUE_ID)
    return record.prop(PROPERTY_REAL_TOPIC) is None or qid is None or not qid.lstrip("-").isdigit()


@attrs.frozen
class CheckHooks:
    """Callbacks the broker facade uses to emit events for check-service writes."""

    on_store: Callable[[Record], None]
    on_check: Callable[[Record, Record, int], None]  # old half, new half, check times
    on_discard: Callable[[Record, Record], None]  # half, discarded copy
    on_offset: Callable[[MessageQueue, int], None]


@attrs.frozen
class _OpPull:
    found: bool
    next_offset: int
    last_born: int = 0


class TransactionService:
    """The check service's timer and the check algorithm (state: consumer offsets), and 5.1.0+'s
    op batch service (TransactionalOpBatchService: in memory, lost in a crash)."""

    def __init__(self, now: int, op_interval_ms: int = 0) -> None:
        self.last_check = now
        # per half queue: the queue offsets of ended halves whose op message is not written yet,
        # and when the queue's op context was created or last written (MessageQueueOpContext)
        self.op_pending: dict[int, list[int]] = {}
        self.op_last_write: dict[int, int] = {}
        self.op_wake = now + op_interval_ms  # the batch thread's first wake-up

    def enqueue_op(self, queue_id: int, half_offset: int, now: int) -> None:
        """deletePrepareMessage (5.1.0+): queue ``offset,`` in the half queue's op context."""
        self.op_last_write.setdefault(queue_id, now)
        self.op_pending.setdefault(queue_id, []).append(half_offset)

    def op_batch_due(self, now: int, interval_ms: int) -> bool:
        """The batch thread wakes every ``interval_ms`` from its start (TransactionalOpBatchService)."""
        if now < self.op_wake - interval_ms:
            self.op_wake = now + interval_ms  # re-anchor after a clock step backwards
        if now >= self.op_wake:
            self.op_wake = now + interval_ms
            return True
        return False

    def take_ops(self, now: int, interval_ms: int, force: bool = False) -> list[tuple[int, str]]:
        """batchSendOpMessage: the op bodies of the queues whose context was last written at least
        ``interval_ms`` ago (every queue with ``force``), each ``offset,`` in END order."""
        out = []
        for queue_id in sorted(self.op_pending):
            pending = self.op_pending[queue_id]
            if pending and (force or now - self.op_last_write[queue_id] >= interval_ms):
                out.append((queue_id, "".join(f"{o}," for o in pending)))
                self.op_pending[queue_id] = []
                self.op_last_write[queue_id] = now
        return out

    def check_due(self, now: int, interval_ms: int) -> bool:
        if now < self.last_check:
            self.last_check = now  # re-anchor after a clock step backwards
        if now - self.last_check >= interval_ms:
            self.last_check = now
            return True
        return False

    def check(
        self,
        store: Store,
        offsets: ConsumerOffsets,
        config: BrokerConfig,
        now: int,
        hooks: CheckHooks,
        reput_visible: bool | int = True,
    ) -> list[CheckRequest]:
        """One check round. ``reput_visible``: how many of the copies this round re-puts reach the
        half queue before the scan does — all (True), none (False) or the first k (an int). Our
        stores dispatch at once; the ReputMessageService dispatches a moment later (5.3.0+ under
        SYNC_FLUSH only once flushed), so a real round may stop at any of them: a copy that reached
        ``transactionCheckMax`` is discarded in this round if the scan saw it, else in the next."""
        store.ensure_topic(HALF_TOPIC, 1)  # fetchMessageQueues → selectTopicConfig creates it
        requests: list[CheckRequest] = []
        for queue_id in range(store.topics[HALF_TOPIC]):
            limit = None if reput_visible is True else store.max_offset(HALF_TOPIC, queue_id) + int(reput_visible)
            requests.extend(self._check_queue(store, offsets, config, now, queue_id, hooks, limit))
        return requests

    def _fetch_offset(self, store: Store, offsets: ConsumerOffsets, mq: MessageQueue) -> int:
        offset = offsets.query(CID_RMQ_SYS_TRANS, mq)
        return store.min_offset(mq.topic, mq.queue_id) if offset == -1 else offset

    def _update_offset(
        self, offsets: ConsumerOffsets, mq: MessageQueue, offset: int, hooks: CheckHooks
    ) -> None:
        offsets.update(CID_RMQ_SYS_TRANS, mq, offset)
        hooks.on_offset(mq, offset)

    def _fill_op_remove_map(
        self,
        store: Store,
        offsets: ConsumerOffsets,
        op_mq: MessageQueue,
        pull_offset: int,
        mini_offset: int,
        remove_map: dict[int, int],
        done: list[int],
        hooks: CheckHooks,
        op_sets: dict[int, set[int]],
        batched: bool,
    ) -> _OpPull:
        res = store.get_message(OP_TOPIC, op_mq.queue_id, pull_offset, OP_PULL_BATCH)
        status = bridge_pull_status(res.status)
        if status in (PullStatus.OFFSET_ILLEGAL, PullStatus.NO_MATCHED_MSG):
            self._update_offset(offsets, op_mq, res.next_begin_offset, hooks)
            return _OpPull(False, res.next_begin_offset)
        if status is PullStatus.NO_NEW_MSG:
            return _OpPull(False, res.next_begin_offset)
        for op in res.records:
            text = op.body.decode("utf-8", errors="replace")
            if not batched:  # 4.9: one offset per op; an op of another tag is neither done nor used
                half_offset = _int_or(text, -1)
                if op.prop(PROPERTY_TAGS) == REMOVE_TAG:
                    if half_offset < mini_offset:
                        done.append(op.queue_offset)
                    else:
                        remove_map[half_offset] = op.queue_offset
                        op_sets[op.queue_offset] = {half_offset}
                continue
            # 5.1.0+: comma-separated offsets; the op is done once the scan passed all of them
            halves = set()
            if op.prop(PROPERTY_TAGS) == REMOVE_TAG:
                for piece in _java_split(text, ","):
                    half_offset = _int_or(piece, -1)
                    if half_offset >= mini_offset:
                        remove_map[half_offset] = op.queue_offset
                        halves.add(half_offset)
            if halves:
                op_sets[op.queue_offset] = halves
            else:
                done.append(op.queue_offset)
        return _OpPull(True, res.next_begin_offset, res.records[-1].born_ts)

    def _check_queue(
        self,
        store: Store,
        offsets: ConsumerOffsets,
        config: BrokerConfig,
        now: int,
        queue_id: int,
        hooks: CheckHooks,
        limit: int | None = None,
    ) -> list[CheckRequest]:
        start = now
        timeout = config.transaction_timeout_ms
        half_mq = MessageQueue(HALF_TOPIC, queue_id, config.broker_name)
        op_mq = MessageQueue(OP_TOPIC, queue_id, config.broker_name)
        half_offset = self._fetch_offset(store, offsets, half_mq)
        op_offset = self._fetch_offset(store, offsets, op_mq)
        if half_offset < 0 or op_offset < 0:
            return []
        done: list[int] = []
        remove_map: dict[int, int] = {}
        op_sets: dict[int, set[int]] = {}
        batched = config.behaviour.op_batch
        op_pull = self._fill_op_remove_map(
            store, offsets, op_mq, op_offset, half_offset, remove_map, done, hooks, op_sets, batched
        )
        requests: list[CheckRequest] = []
        null_count = 1
        new_offset = half_offset
        i = half_offset
        while True:
            if i in remove_map:
                op_offset_of = remove_map.pop(i)
                op_sets[op_offset_of].discard(i)
                if not op_sets[op_offset_of]:
                    del op_sets[op_offset_of]
                    done.append(op_offset_of)
            elif limit is not None and i >= limit:
                break  # not dispatched yet: the scan sees no new message (NO_NEW_MSG)
            else:
                res = store.get_message(HALF_TOPIC, queue_id, i, 1)
                if res.status is not GetStatus.FOUND:
                    null_count += 1
                    if (
                        null_count - 1 > 1
                        or bridge_pull_status(res.status) is PullStatus.NO_NEW_MSG
                    ):
                        break
                    i = res.next_begin_offset
                    new_offset = i
                    continue
                half = res.records[0]
                times = _int_or(half.prop(PROPERTY_TRANSACTION_CHECK_TIMES), 0)
                decision = check_decision(
                    times,
                    half.born_ts,
                    now,
                    check_max=config.transaction_check_max,
                    immunity_ms=timeout,
                    file_reserved_ms=config.file_reserved_hours * 3_600_000,
                )
                if decision == DISCARD:
                    self._discard(store, half, times, config, now, hooks)
                    new_offset = i + 1
                    i += 1
                    continue
                if half.store_ts >= start or decision == SKIP_YOUNG:
                    break
                assert decision == CHECK
                age = now - half.born_ts
                need_check = (not op_pull.found) or (op_pull.last_born - start > timeout) or age < 0
                if not need_check:
                    op_pull = self._fill_op_remove_map(
                        store,
                        offsets,
                        op_mq,
                        op_pull.next_offset,
                        half_offset,
                        remove_map,
                        done,
                        hooks,
                        op_sets,
                        batched,
                    )
                    continue
                request = self._put_back(store, half, times + 1, now, config, hooks)
                if request is None:
                    break
                requests.append(request)
            new_offset = i + 1
            i += 1
        if new_offset != half_offset:
            self._update_offset(offsets, half_mq, new_offset, hooks)
        new_op_offset = op_offset
        for offset in sorted(done):
            if offset != new_op_offset:
                break
            new_op_offset += 1
        if new_op_offset != op_offset:
            self._update_offset(offsets, op_mq, new_op_offset, hooks)
        return requests

    def _discard(
        self,
        store: Store,
        half: Record,
        times: int,
        config: BrokerConfig,
        now: int,
        hooks: CheckHooks,
    ) -> None:
        props = half.properties
        if times < config.transaction_check_max:  # needDiscard incremented before needSkip
            props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(times + 1)
        store.ensure_topic(TRANS_CHECK_MAX_TIME_TOPIC, 1)
        request = PutRequest(
            topic=TRANS_CHECK_MAX_TIME_TOPIC,
            queue_id=0,
            body=half.body,
            properties=props,
            sys_flag=half.sys_flag,
            born_ts=half.born_ts,
            flag=half.flag,
            reconsume_times=half.reconsume_times,
        )
        try:
            copy = store.put(request, now)
        except PutError:
            return
        hooks.on_store(copy)
        hooks.on_discard(half, copy)

    def _put_back(
        self,
        store: Store,
        half: Record,
        times: int,
        now: int,
        config: BrokerConfig,
        hooks: CheckHooks,
    ) -> CheckRequest | None:
        props = half.properties
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(times)
        request = PutRequest(  # renewHalfMessageInner: no flag, no reconsume_times
            topic=HALF_TOPIC,
            queue_id=half.queue_id,
            body=half.body,
            properties=props,
            sys_flag=half.sys_flag,
            born_ts=half.born_ts,
        )
        try:
            new = store.put(request, now)
        except PutError:
            return None
        hooks.on_store(new)
        hooks.on_check(half, new, times)
        seen = attrs.evolve(
            half.to_stored(config),
            msg_id=new.msg_id(config),
            topic=half.prop(PROPERTY_REAL_TOPIC) or "",
            queue_id=int(half.prop(PROPERTY_REAL_QUEUE_ID) or "0"),
            queue_offset=new.queue_offset,
            commitlog_offset=new.commitlog_offset,
            # renewHalfMessageInner shares the map and sets WAIT=false after the string was built:
            # the stored copy keeps WAIT=true, the message sent with the check says false.
            properties={**props, PROPERTY_WAIT_STORE_MSG_OK: "false"},
        )
        uniq = half.prop(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return CheckRequest(
            producer_group=half.prop(PROPERTY_PRODUCER_GROUP) or "",
            message=seen,
            transaction_id=uniq,
            commitlog_offset=new.commitlog_offset,
            tran_state_table_offset=new.queue_offset,
        )
