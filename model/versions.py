"""The RocketMQ versions the model follows: what differs between releases, as data.

Theory of operation
-------------------
A *version profile* names a line of RocketMQ releases whose message semantics agree,
and lists, as plain fields, every behaviour in which it differs from 4.9.8. The model,
the mmap broker, ``rmqspec serve`` and the checkers read these fields (never the
profile's name), so a difference is one field here and one branch where the rule is
applied; ``BrokerConfig.version`` carries the profile's name.

- ``rocketmq-4.9``: 4.9.8, the release rmqspec was modelled on (the default).
- ``rocketmq-5.0``: 5.0.x (5.1.0 is 5.0 with batched op messages). ``%RETRY%`` sends (SendMessageProcessor
  .handleRetryAndDLQ) dead-letter when ``reconsumeTimes > maxReconsumeTimes`` instead
  of ``>=``; every send is stored with the broker's region and trace switch
  (AbstractSendMessageProcessor.buildMsgContext, called on every send) and keeps the
  client's ``WAIT`` (the 4.9.8 block that removed it before serializing is gone); a
  half with a ``UNIQ_KEY`` gets ``__transactionId__`` (TransactionalMessageBridge
  .parseHalfMessageInner); a ``%RETRY%`` send it dead-letters is stored with ``DELAY=-1`` (4.9:
  the client's level, which schedules it). Timer messages (``model/timer.py``): a send with
  ``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC`` or ``TIMER_DELAY_MS`` waits in ``rmq_sys_wheel_timer``
  until its time. Pop consumption (``model/pop.py``): POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE,
  CHANGE_MESSAGE_INVISIBLETIME and the revive service.
- ``rocketmq-5.1``: 5.1.1 – 5.1.4. Besides 5.0's: a ``%RETRY%`` send also goes to the DLQ while an orderly lock of the
  group is live (RebalanceLockManager.isLockAllExpired);
  ``transactionCheckInterval`` defaults to 30 s; COMMIT / ROLLBACK op
  messages are written in batches (TransactionalOpBatchService, since 5.1.0), so a check
  round may check a half that was already ended (docs/fidelity.md V7); a never-committed
  consumer offset of an empty queue answers QUERY_NOT_FOUND (checkInMemByConsumeOffset).
- ``rocketmq-5.2``: 5.2.0 – 5.3.3 (the interop tier runs 5.3.3). Besides 5.1's: a stored
  properties string keeps its trailing separator (MessageDecoder.messageProperties2String no
  longer drops it; docs/fidelity.md V3), so a record with properties is one byte longer and
  every later CommitLog offset moves; a pull answered OFFSET_ILLEGAL stores no OFFSET_MOVED_EVENT
  record (measured on 5.3.3 and 5.5.1; when between 5.1.4 and 5.3.3 it stopped is not known).
- ``rocketmq-5.5``: 5.5.0 – 5.5.1 (the interop tier runs 5.5.1; 5.4.x is not verified).
  Besides 5.2's: a committed message no longer stores REAL_TOPIC / REAL_QID
  (EndTransactionProcessor.endMessageTransaction rebuilds the string after clearing them;
  4.9.8 to 5.3.3 stored the half's string); a revived pop message carries ``ORIGIN_GROUP``, and a change of
  invisible time may ``suspend`` (the revive then keeps the reconsume times).

What each field means and where RocketMQ does it is on the field. Differences with no
field, because no client rmqspec drives can reach them, are in ``docs/fidelity.md``
(section "RocketMQ 5.x profiles"): 5.1.1's refusal of an END_TRANSACTION that is not from
a check once the half's ``CHECK_IMMUNITY_TIME_IN_SECONDS`` has passed
(EndTransactionProcessor.rejectCommitOrRollback) needs that system property, which the
Java client refuses to set and ``rmqspec serve`` drops, like 4.9.8's immunity branch of
the check (``model/transactions.py``).
"""

from __future__ import annotations

import attrs

from rmqspec.model.results import ResponseCode

__all__ = ["DEFAULT_VERSION", "VERSIONS", "Version", "version_named"]


@attrs.frozen
class Version:
    """One profile's behaviours (see the module docstring for the sources)."""

    name: str
    releases: str  # the releases it stands for, for help texts and reports
    # SendMessageProcessor: MSG_REGION=<regionId> and TRACE_ON=<traceOn> stored with every send
    region_properties: bool = False
    # SendMessageProcessor.sendMessage: the client's WAIT is stored with a plain send
    store_wait: bool = False
    # TransactionalMessageBridge.parseHalfMessageInner: __transactionId__=<UNIQ_KEY> on a half
    half_transaction_id: bool = False
    # handleRetryAndDLQ: a %RETRY% send dead-letters when reconsumeTimes > max (4.9: >=)
    retry_send_dlq_above_max: bool = False
    # handleRetryAndDLQ (5.1.1+): ... or when any orderly lock of the group is live
    retry_send_dlq_when_locked: bool = False
    # handleRetryAndDLQ (5.0+): a %RETRY% send it dead-letters is stored with DELAY=-1 (4.9: with the DELAY
    # the client sent, so a level > 0 schedules the dead letter; measured on 4.9.8 and 5.3.3)
    retry_send_dlq_delay_minus_one: bool = False
    # the client's side, which the wire adapter plays: the 5.x client's (Un)LockBatchRequestBody carries
    # onlyThisBroker (false from RebalanceImpl.lock); 4.9.8's class has no such field. The Java brokers take
    # either (fastjson leaves a missing field at its default); rocketmq-rust refuses a body without it
    lock_only_this_broker: bool = False
    # BrokerConfig.transactionCheckInterval's default
    default_check_interval_ms: int = 60_000
    # TransactionalOpBatchService (5.1.0+): an ended half's op message is written later
    op_batch: bool = False
    # TransactionalMessageServiceImpl.check (5.1.0+): a round that finds no new op message while
    # deciding whether a half needs its check sleeps SLEEP_WHILE_NO_OP first (docs/fidelity.md V8):
    # its checks may leave this much after the round began (the model's round is instantaneous)
    check_sleep_ms: int = 0
    # ConsumerManageProcessor.queryConsumerOffset (5.1.0+): a never-committed offset reads 0 only
    # while the queue holds its offset 0 in memory (checkInMemByConsumeOffset; 4.9: unless it was
    # swapped out, checkInDiskByConsumeOffset), so an empty queue answers QUERY_NOT_FOUND
    offset_zero_needs_message: bool = False
    # EndTransactionProcessor.endMessageTransaction (5.5.0+): the committed message's string is
    # rebuilt without REAL_TOPIC / REAL_QID (before: the half's string, with them)
    commit_drops_real_queue: bool = False
    # MessageDecoder.messageProperties2String (5.2.0+): the stored string ends in \x02
    properties_trailing_separator: bool = False
    # HookUtils.handleScheduleMessage + TimerMessageStore (5.0.0+, RIP-43): TIMER_DELIVER_MS /
    # TIMER_DELAY_SEC / TIMER_DELAY_MS make a timer message (model/timer.py); 4.9: user properties
    timer_wheel: bool = False
    # CommitLog.getConfirmOffset (5.3.0+): under SYNC_FLUSH the ReputMessageService builds consume queues
    # only up to the flushed position, and dispatchBehindBytes measures against it: a write whose put does
    # not wait for the flush (a send-back: waitStoreMsgOK=false) is unseen by a pull, while "nothing behind",
    # until the group commit flushes it (ms). The wire adapter's dispatch barrier waits for the flush too;
    # the model shows the copy at once (docs/fidelity.md V9). Set from the 5.2 profile on (on 5.2.0 waiting
    # for a SYNC_FLUSH broker's flush costs nothing)
    dispatch_after_flush: bool = False
    # PullMessageProcessor / DefaultPullMessageResultHandler: a master answering PULL_OFFSET_MOVED stores an
    # OFFSET_MOVED_EVENT record (model/offset_moved.py). 5.3.3 and 5.5.1 log the event and no longer store
    # it (the call to generateOffsetMovedEvent is gone: 5.3.3 broker jar, javap; a run, docs/fidelity.md
    # V10); 5.0 and 5.1 keep 4.9's, unmeasured
    offset_moved_event: bool = True
    # PopMessageProcessor, AckMessageProcessor, ChangeInvisibleTimeProcessor, PopReviveService (5.0.0+): pop
    # consumption (model/pop.py, model/broker_pop.py; facts read in the 5.3.3 source, 5.0 and 5.1 assumed the
    # same); 4.9.8 has no processor for those request codes and answers REQUEST_CODE_NOT_SUPPORTED
    pop: bool = False
    # PopReviveService.reviveRetry (5.5.x; 5.5.1 broker jar, javap): a revived copy also carries ORIGIN_GROUP=<group>
    pop_origin_group: bool = False
    # ChangeInvisibleTimeRequestHeader.suspend (5.5.x): a change with it writes a checkpoint whose revive keeps the
    # reconsume times (PopCheckPoint.suspend); 5.3.3 has no such field (the flag is ignored)
    pop_suspend: bool = False
    # PullMessageProcessor / AbstractSendMessageProcessor.msgCheck: a queue id past the topic's queues is answered
    # INVALID_PARAMETER (29) on 5.3.3 and 5.5.1 (measured: docs/fidelity.md R5-6), SYSTEM_ERROR (1) on 4.9.8;
    # 5.0 and 5.1 keep 4.9's, unmeasured
    illegal_queue_invalid_parameter: bool = False
    # FAQUrl.APPLY_TOPIC_URL (common jar, javap): the URL a TOPIC_NOT_EXIST remark suggests ("\nSee <url> for
    # further details."); 5.0 and 5.1 unmeasured
    faq_url: str = "http://rocketmq.apache.org/docs/faq/"

    def suggest_todo(self) -> str:
        """FAQUrl.suggestTodo: the line every remark that suggests the FAQ ends with (each release's constants
        of FAQUrl all name one URL, ``faq_url``; 4.9.8, 5.3.3 and 5.5.1 common jars, javap)."""
        return f"\nSee {self.faq_url} for further details."

    @property
    def illegal_queue_code(self) -> ResponseCode:
        """The answer to a pull or send naming a queue id past the topic's queues."""
        return ResponseCode.INVALID_PARAMETER if self.illegal_queue_invalid_parameter else ResponseCode.SYSTEM_ERROR


_V49 = Version("rocketmq-4.9", "4.9.8")
_V50 = attrs.evolve(_V49, name="rocketmq-5.0", releases="5.0.x", region_properties=True, store_wait=True,
                    half_transaction_id=True, retry_send_dlq_above_max=True, retry_send_dlq_delay_minus_one=True,
                    timer_wheel=True, pop=True, lock_only_this_broker=True)
_V51 = attrs.evolve(_V50, name="rocketmq-5.1", releases="5.1.1 – 5.1.4", retry_send_dlq_when_locked=True,
                    default_check_interval_ms=30_000, op_batch=True, offset_zero_needs_message=True,
                    check_sleep_ms=1000)
_V52 = attrs.evolve(_V51, name="rocketmq-5.2", releases="5.2.0 – 5.3.3", properties_trailing_separator=True,
                    dispatch_after_flush=True, offset_moved_event=False, illegal_queue_invalid_parameter=True,
                    faq_url="https://rocketmq.apache.org/docs/bestPractice/06FAQ")
_V55 = attrs.evolve(_V52, name="rocketmq-5.5", releases="5.5.0 – 5.5.1", commit_drops_real_queue=True,
                    pop_origin_group=True, pop_suspend=True, faq_url="https://rocketmq.apache.org/docs/faq/")
VERSIONS: dict[str, Version] = {v.name: v for v in (_V49, _V50, _V51, _V52, _V55)}
DEFAULT_VERSION = "rocketmq-4.9"


def version_named(name: str) -> Version:
    """The profile called ``name``; ``ValueError`` naming the choices for any other."""
    try:
        return VERSIONS[name]
    except KeyError:
        raise ValueError(f"unknown RocketMQ version profile {name!r}; choose one of {sorted(VERSIONS)}") from None
