"""Transactions on the mmap store: half / op records and the check service.

Theory of operation
-------------------
Follows RocketMQ 4.9.8 B/transaction/queue/TransactionalMessageBridge,
TransactionalMessageServiceImpl, DefaultTransactionalMessageCheckListener,
TransactionalMessageUtil and B/processor/EndTransactionProcessor.

Writing (``half_spec``, ``commit_spec``, ``op_spec``):
- a half (parseHalfMessageInner) goes to ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0
  with REAL_TOPIC / REAL_QID appended and transaction type NOT, so it has a
  consume-queue unit that only this service reads;
- COMMIT (endMessageTransaction) writes the real message: topic / queue from
  REAL_*, body, flag, born timestamp, reconsume_times, sys_flag type COMMIT,
  prepared_txn_offset = the half's commitlog offset. The properties string is
  built before REAL_TOPIC / REAL_QID / TRAN_MSG are cleared from the map, so the
  stored copy still carries them (unless the map routes it to the schedule
  topic, where CommitLog rebuilds the string from the map);
- an op (addRemoveTagInTransactionOp) for COMMIT and ROLLBACK:
  ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, queue = the half's queue id, TAGS ``d``,
  body = the half's queue offset in decimal, stored properties ``TAGS=d,
  WAIT=true``.

Checking (``TxnChecker.check``, TransactionalMessageServiceImpl.check, every
``transactionCheckInterval``), per half queue:
1. half / op progress = the consumer offsets of group ``CID_RMQ_SYS_TRANS``
   (−1 → the queue's min offset);
2. ``fillOpRemoveMap``: pull up to 32 ops; an op tagged ``d`` whose body (a half
   offset) is below the half progress is *done*, else it goes into the
   remove-map half offset → op offset; an illegal / unmatched pull moves the op
   progress to the pull's next offset;
3. walk the halves from the progress: a half in the remove-map is done;
   otherwise TRANSACTION_CHECK_TIMES and the born timestamp decide
   (``lifecycle.check_decision``): DISCARD → copy to
   ``TRANS_CHECK_MAX_TIME_TOPIC`` (resolveDiscardMsg); a half stored at or after
   the run's start, or too young, stops the walk; CHECK only when the op queue
   is exhausted (else pull more ops first), then re-put the half
   (putBackHalfMsgQueue / renewHalfMessageInner: TRANSACTION_CHECK_TIMES + 1,
   neither flag nor reconsume_times copied) and answer a ``CheckRequest`` for
   the *re-put* copy;
4. the half progress advances to the walk's position, the op progress over the
   contiguous run of done ops.

Nothing de-duplicates a second COMMIT (a second real message is written), as
in RocketMQ 4.9. Events are emitted by the broker through ``TxnHooks``.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from rmqspec.impl.broker_store import (
    BrokerLog,
    Entry,
    GetStatus,
    PutSpec,
    bridge_pull_status,
)
from rmqspec.impl.offsets import ConsumerOffsetTable
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
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageQueue,
)
from rmqspec.model.results import BrokerError, CheckRequest, PullStatus

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
CID_RMQ_SYS_TRANS = "CID_RMQ_SYS_TRANS"
REMOVE_TAG = "d"
OP_PULL_BATCH = 32


def with_txn_type(sys_flag: int, ttype: int) -> int:
    """MessageSysFlag.resetTransactionValue."""
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | ttype


def java_int(text: str | None, default: int) -> int:
    """NumberUtils-style parse: ``default`` when absent, −1 for garbage (getInt / getLong)."""
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        return -1


def half_spec(topic: str, queue_id: int, body: bytes, flag: int, props: dict[str, str], now: int,
              sys_flag: int = 0, wait: bool = True) -> PutSpec:
    """parseHalfMessageInner (``props`` already carries TRAN_MSG and PGROUP)."""
    stored = dict(props)
    stored[PROPERTY_REAL_TOPIC] = topic
    stored[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    return PutSpec(
        topic=HALF_TOPIC,
        queue_id=0,
        body=body,
        properties=tuple(stored.items()),
        sys_flag=with_txn_type(sys_flag, TRANSACTION_NOT_TYPE),
        born_ts=now,
        flag=flag,
        wait=wait,
    )


def commit_spec(half: Entry, commitlog_offset: int, rebuilt: bool = False) -> PutSpec:
    """endMessageTransaction + the processor's sys_flag / prepared offset handling. The stored string
    is the half's (REAL_TOPIC / REAL_QID / TRAN_MSG still in it), or with ``rebuilt`` (5.5.0+) the
    map after REAL_TOPIC / REAL_QID were cleared; a delayed copy's is the map's (CommitLog re-encodes)."""
    cleared = (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED)
    map_props = tuple((k, v) for k, v in half.props if k not in cleared)
    delay = java_int(dict(map_props).get(PROPERTY_DELAY_TIME_LEVEL), 0)
    stored = tuple((k, v) for k, v in half.props if k not in cleared[:2]) if rebuilt else half.props
    return PutSpec(
        topic=half.prop(PROPERTY_REAL_TOPIC) or "",
        queue_id=int(half.prop(PROPERTY_REAL_QUEUE_ID) or "0"),
        body=half.body,
        properties=map_props if delay > 0 else stored,
        sys_flag=with_txn_type(half.sys_flag, TRANSACTION_COMMIT_TYPE),
        born_ts=half.born_ts,
        flag=half.flag,
        reconsume_times=half.reconsume_times,
        prepared_txn_offset=commitlog_offset,
        delay_level=delay,
        wait=False,  # endMessageTransaction: setWaitStoreMsgOK(false)
    )


def op_spec(queue_id: int, body: str, now: int, born_v6: bool, wait: bool = True) -> PutSpec:
    """An op message of half queue ``queue_id``: addRemoveTagInTransactionOp's (4.9: the half's
    queue offset) or getOpMessage's (5.1.0+: ``offset,`` per half the batch resolves)."""
    return PutSpec(
        topic=OP_TOPIC,
        queue_id=queue_id,
        body=body.encode("utf-8"),
        properties=((PROPERTY_TAGS, REMOVE_TAG), (PROPERTY_WAIT_STORE_MSG_OK, "true")),
        sys_flag=BORNHOST_V6_FLAG if born_v6 else 0,
        born_ts=now,
        wait=wait,  # makeOpMessageInner: false (the string says WAIT=true); a batch's: flushed at once
    )


def check_prepare(
    half: Entry | None, producer_group: str, commitlog_offset: int, tran_state_table_offset: int
) -> str | None:
    """EndTransactionProcessor.checkPrepareMessage: None when the half matches the request."""
    if half is None:
        return "Find prepared transaction message failed"
    pgroup = half.prop(PROPERTY_PRODUCER_GROUP)
    if pgroup is None or pgroup != producer_group:
        return "The producer group wrong"
    if half.queue_offset != tran_state_table_offset:
        return "The transaction state table offset wrong"
    if half.commitlog_offset != commitlog_offset:
        return "The commit log offset wrong"
    return None


def real_target_unparsable(half: Entry) -> bool:
    """endMessageTransaction would throw parsing REAL_TOPIC / REAL_QID."""
    qid = half.prop(PROPERTY_REAL_QUEUE_ID)
    return half.prop(PROPERTY_REAL_TOPIC) is None or qid is None or not qid.lstrip("-").isdigit()


@attrs.frozen
class TxnHooks:
    """What the broker does for each write / decision of the check service (events)."""

    ensure_topic: Callable[[str, int], None]
    queue_nums: Callable[[str], int]
    on_store: Callable[[Entry], None]
    on_check: Callable[[Entry, Entry, int], None]  # old half, re-put half, check times
    on_discard: Callable[[Entry, Entry], None]  # half, discarded copy
    on_offset: Callable[[MessageQueue, int], None]


@attrs.frozen
class _OpPull:
    found: bool
    next_offset: int
    last_born: int = 0


class OpBatcher:
    """5.1.0+'s TransactionalOpBatchService: per half queue a context of ``offset,`` strings (in
    memory only) with the time it was created or last written; a thread that wakes every
    ``interval`` ms from its start and writes the contexts last written at least that long ago."""

    def __init__(self, now: int, interval_ms: int) -> None:
        self.interval = interval_ms
        self.wake_at = now + interval_ms
        self.contexts: dict[int, tuple[int, list[str]]] = {}  # queue -> (last write, data)

    def offer(self, queue_id: int, half_offset: int, now: int) -> None:
        """deletePrepareMessage: the context is created on a queue's first END."""
        last, data = self.contexts.get(queue_id, (now, []))
        self.contexts[queue_id] = (last, [*data, f"{half_offset},"])

    def wake(self, now: int) -> bool:
        if self.wake_at - self.interval > now:
            self.wake_at = now + self.interval  # the clock went backwards
        if now < self.wake_at:
            return False
        self.wake_at = now + self.interval
        return True

    def drain(self, now: int, every: bool = False) -> list[tuple[int, str]]:
        """batchSendOpMessage (``every``: regardless of the interval), queues in id order."""
        out = []
        for queue_id, (last, data) in sorted(self.contexts.items()):
            if data and (every or now - last >= self.interval):
                out.append((queue_id, "".join(data)))
                self.contexts[queue_id] = (now, [])
        return out


class TxnChecker:
    """The check timer and the check algorithm; its progress lives in the consumer offsets."""

    def __init__(self, now: int) -> None:
        self.last_check = now

    def due(self, now: int, interval_ms: int) -> bool:
        if now < self.last_check:
            self.last_check = now  # re-anchor after a clock step backwards
        if now - self.last_check >= interval_ms:
            self.last_check = now
            return True
        return False

    def check(
        self,
        log: BrokerLog,
        offsets: ConsumerOffsetTable,
        config: BrokerConfig,
        now: int,
        hooks: TxnHooks,
    ) -> list[CheckRequest]:
        hooks.ensure_topic(HALF_TOPIC, 1)  # fetchMessageQueues → selectTopicConfig
        requests: list[CheckRequest] = []
        for queue_id in range(hooks.queue_nums(HALF_TOPIC)):
            requests += _QueueCheck(log, offsets, config, now, queue_id, hooks).run()
        return requests


class _QueueCheck:
    """One run of the check over one half queue."""

    def __init__(
        self,
        log: BrokerLog,
        offsets: ConsumerOffsetTable,
        config: BrokerConfig,
        now: int,
        queue_id: int,
        hooks: TxnHooks,
    ) -> None:
        self.log = log
        self.offsets = offsets
        self.config = config
        self.now = now
        self.hooks = hooks
        self.half_mq = MessageQueue(HALF_TOPIC, queue_id, config.broker_name)
        self.op_mq = MessageQueue(OP_TOPIC, queue_id, config.broker_name)
        self.remove_map: dict[int, int] = {}
        self.done_ops: list[int] = []
        self.op_halves: dict[int, set[int]] = {}  # op queue offset -> the halves it still names

    def _progress(self, mq: MessageQueue) -> int:
        offset = self.offsets.query(CID_RMQ_SYS_TRANS, mq)
        return self.log.min_offset(mq.topic, mq.queue_id) if offset == -1 else offset

    def _commit(self, mq: MessageQueue, offset: int) -> None:
        self.offsets.update(CID_RMQ_SYS_TRANS, mq, offset)
        self.hooks.on_offset(mq, offset)

    def _fill_remove_map(self, pull_offset: int, mini_offset: int) -> _OpPull:
        res = self.log.get_message(OP_TOPIC, self.op_mq.queue_id, pull_offset, OP_PULL_BATCH)
        status = bridge_pull_status(res.status)
        if status in (PullStatus.OFFSET_ILLEGAL, PullStatus.NO_MATCHED_MSG):
            self._commit(self.op_mq, res.next_begin_offset)
            return _OpPull(False, res.next_begin_offset)
        if status is PullStatus.NO_NEW_MSG:
            return _OpPull(False, res.next_begin_offset)
        batched = self.config.behaviour.op_batch
        for op in res.entries:
            text = op.body.decode("utf-8", errors="replace")
            removing = op.prop(PROPERTY_TAGS) == REMOVE_TAG
            # 4.9: the body is one offset; 5.1.0+: offsets each followed by a comma (String.split)
            pieces = (text.split(",") if batched else [text]) if removing else []
            named = {n for n in (java_int(p, -1) for p in pieces if p) if n >= mini_offset}
            for n in named:
                self.remove_map[n] = op.queue_offset
            if named:
                self.op_halves[op.queue_offset] = named
            elif batched or (removing and pieces):
                self.done_ops.append(op.queue_offset)  # 4.9 leaves an op of another tag pending
        return _OpPull(True, res.next_begin_offset, res.entries[-1].born_ts)

    def run(self) -> list[CheckRequest]:
        start = self.now
        timeout = self.config.transaction_timeout_ms
        half_offset = self._progress(self.half_mq)
        op_offset = self._progress(self.op_mq)
        if half_offset < 0 or op_offset < 0:
            return []
        op_pull = self._fill_remove_map(op_offset, half_offset)
        requests: list[CheckRequest] = []
        misses = 0
        new_offset = half_offset
        i = half_offset
        while True:
            if i in self.remove_map:
                op = self.remove_map.pop(i)
                self.op_halves[op].discard(i)
                if not self.op_halves[op]:
                    del self.op_halves[op]
                    self.done_ops.append(op)
                new_offset = i = i + 1
                continue
            res = self.log.get_message(HALF_TOPIC, self.half_mq.queue_id, i, 1)
            if res.status is not GetStatus.FOUND:  # getHalfMsg returned no message
                misses += 1
                if misses > 1 or bridge_pull_status(res.status) is PullStatus.NO_NEW_MSG:
                    break
                new_offset = i = res.next_begin_offset
                continue
            half = res.entries[0]
            times = java_int(half.prop(PROPERTY_TRANSACTION_CHECK_TIMES), 0)
            decision = check_decision(
                times,
                half.born_ts,
                self.now,
                check_max=self.config.transaction_check_max,
                immunity_ms=timeout,
                file_reserved_ms=self.config.file_reserved_hours * 3_600_000,
            )
            if decision == DISCARD:
                self._discard(half, times)
                new_offset = i = i + 1
                continue
            if half.store_ts >= start or decision == SKIP_YOUNG:
                break
            assert decision == CHECK
            age = self.now - half.born_ts
            need_check = (not op_pull.found) or (op_pull.last_born - start > timeout) or age < 0
            if not need_check:
                op_pull = self._fill_remove_map(op_pull.next_offset, half_offset)
                continue
            request = self._put_back(half, times + 1)
            if request is None:
                break
            requests.append(request)
            new_offset = i = i + 1
        if new_offset != half_offset:
            self._commit(self.half_mq, new_offset)
        new_op_offset = op_offset
        for offset in sorted(self.done_ops):
            if offset != new_op_offset:
                break
            new_op_offset += 1
        if new_op_offset != op_offset:
            self._commit(self.op_mq, new_op_offset)
        return requests

    def _discard(self, half: Entry, times: int) -> None:
        props = half.properties
        if times < self.config.transaction_check_max:  # needDiscard incremented before needSkip
            props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(times + 1)
        self.hooks.ensure_topic(TRANS_CHECK_MAX_TIME_TOPIC, 1)
        spec = PutSpec(
            topic=TRANS_CHECK_MAX_TIME_TOPIC,
            queue_id=0,
            body=half.body,
            properties=tuple(props.items()),
            sys_flag=half.sys_flag,
            born_ts=half.born_ts,
            flag=half.flag,
            reconsume_times=half.reconsume_times,
        )
        try:
            copy = self.log.put(spec, self.now)
        except BrokerError:
            return
        self.hooks.on_store(copy)
        self.hooks.on_discard(half, copy)

    def _put_back(self, half: Entry, times: int) -> CheckRequest | None:
        props = half.properties
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(times)
        spec = PutSpec(  # renewHalfMessageInner: no flag, no reconsume_times
            topic=HALF_TOPIC,
            queue_id=half.queue_id,
            body=half.body,
            properties=tuple(props.items()),
            sys_flag=half.sys_flag,
            born_ts=half.born_ts,
        )
        try:
            new = self.log.put(spec, self.now)
        except BrokerError:
            return None
        self.hooks.on_store(new)
        self.hooks.on_check(half, new, times)
        seen = attrs.evolve(
            half.to_stored(self.config),
            msg_id=new.msg_id(self.config),
            topic=half.prop(PROPERTY_REAL_TOPIC) or "",
            queue_id=int(half.prop(PROPERTY_REAL_QUEUE_ID) or "0"),
            queue_offset=new.queue_offset,
            commitlog_offset=new.commitlog_offset,
            # renewHalfMessageInner shares the map and sets WAIT=false after the string was built:
            # the stored copy keeps WAIT=true, the message sent with the check says false.
            properties={**props, PROPERTY_WAIT_STORE_MSG_OK: "false"},
        )
        return CheckRequest(
            producer_group=half.prop(PROPERTY_PRODUCER_GROUP) or "",
            message=seen,
            transaction_id=half.uniq_key,
            commitlog_offset=new.commitlog_offset,
            tran_state_table_offset=new.queue_offset,
        )
