"""Producer-side requests: SEND_MESSAGE(_V2) 10/310, SEND_BATCH_MESSAGE 320, CONSUMER_SEND_MSG_BACK 36,
END_TRANSACTION 37.

Theory of operation
-------------------
Follows RocketMQ 4.9.8's ``SendMessageProcessor`` / ``AbstractSendMessageProcessor``
(``msgCheck``, ``handleRetryAndDLQ``, ``asyncSendMessage``,
``asyncSendBatchMessage``, ``asyncConsumerSendMsgBack``) and
``EndTransactionProcessor``, over the ``Broker`` protocol:

1. ``msgCheck``: the topic name is checked (SYSTEM_ERROR, TopicValidator's
   remarks), system topics refuse sends (NO_PERMISSION), an unknown topic is
   created when the producer names ``TBW102`` as default topic (queues:
   ``min(defaultTopicQueueNums, 8)``), a ``%RETRY%`` topic with 1 queue, else
   TOPIC_NOT_EXIST; a queue id beyond the topic is SYSTEM_ERROR; a negative one
   picks a queue at random.
2. ``handleRetryAndDLQ``: a send to ``%RETRY%G`` (the Java consumer's own
   retry after a failed send-back) whose ``reconsumeTimes`` reached the max
   (the request's ``maxReconsumeTimes`` from version V3_4_9, else the group's)
   goes to ``%DLQ%G`` queue 0 without delay. The 5.x profiles (``model/versions.py``)
   dead-letter only past the max (``>``), and 5.1.1+ also while an orderly lock of
   the group is live.
3. The wire properties become a ``Message``: TAGS, KEYS, DELAY, UNIQ_KEY map
   to its fields (UNIQ_KEY as sent, in whatever format the client writes —
   56 chars from a Java client on an IPv6 host, mixed case from the Go
   client —, since 4.9.8 never parses it; an empty one is none);
   TRAN_MSG=true makes it a ``send_half`` for PGROUP (else the header's
   producer group); the broker's send path adds CLUSTER=<cluster> as
   the real broker does (``model/sendpath.py``);
   WAIT goes as sent (``Message.wait``: 4.9.8 keeps it out of a plain record
   but a delayed copy or a half carries what the client sent — the Java client
   always "true", the Go client none); the other system properties RocketMQ
   clients may send (RETRY_TOPIC, ORIGIN_MESSAGE_ID, RECONSUME_TIME,
   MAX_RECONSUME_TIMES, MSG_REGION, TRACE_ON, ...) cannot travel through the
   ``Broker`` protocol and are not stored (docs/fidelity.md).
4. The response: SUCCESS with ``msgId`` (offset id), ``queueId`` (as asked),
   ``queueOffset``, plus ``MSG_REGION`` and ``TRACE_ON`` on every answer.

A batch is decoded and validated completely before the first message is
stored, so a bad item stores nothing; it refuses delayed and transactional
items like ``CommitLog.asyncPutMessages``. Its response names every msgId
(comma separated) and the first queue offset.

Timer messages (5.x profiles, ``Version.timer_wheel``; ``model/timer.py``): a send's
``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS`` are user properties of the
``Message``, so the broker's put hook sees them; its refusals arrive as ``BrokerError``
(MESSAGE_ILLEGAL "timer message illegal, …", SYSTEM_ERROR "accurate timer message is not
enabled, …") and are answered with that code and remark, as SendMessageProcessor's
handlePutMessageResult words them. The answer of an accepted one names the timer copy
(queueOffset in ``rmq_sys_wheel_timer`` queue 0, its offset msgId) and the queueId asked for,
as 5.3.3 answers (measured: ``interop/timer_probe.py``). In a batch, 5.x's hook
(HookUtils.handleScheduleMessage on the MessageExtBatch) reads the *batch's* properties only:
an item's own timer properties neither time it nor refuse it (5.3.3: stored at once, the
property kept). The ``Broker`` protocol has one kind of send, whose put hook would time the
item, so an item's own timer properties are dropped before it is sent (deviation: the stored
item lacks them; docs/fidelity.md). Not answered: 5.3.2+'s ``recallHandle`` and 5.x's
``transactionId`` ext fields.

END_TRANSACTION: commitOrRollback 8 commits, 12 rolls back, 0 (the Java
client's UNKNOW) and anything else get no response at all, as in RocketMQ
(the UNKNOWN is still passed to the broker for its trace). Failures carry
``checkPrepareMessage``'s remarks when the broker can look the half up.
"""

from __future__ import annotations

import random
import re
from typing import Any

import attrs

from rmqspec.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    SENDER_SYS_FLAG_BITS,
    SYSTEM_PROPERTY_NAMES,
    InvalidMessage,
    Message,
    decode_properties,
)
from rmqspec.model.results import BrokerError, ResponseCode, SendResult, TxnAction
from rmqspec.model.timer import REQUEST_PROPERTIES as TIMER_REQUEST_PROPERTIES
from rmqspec.remoting.codes import (
    SEND_V2_NAMES,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    RequestCode,
)
from rmqspec.remoting.command import CommandError, RemotingCommand
from rmqspec.remoting.context import NOT_SET, V3_4_9, Ctx, ok, refuse
from rmqspec.remoting.fields import get_bool, get_int, get_long, get_str, opt_int
from rmqspec.remoting.records import decode_batch
from rmqspec.remoting.served import AUTO_CREATE_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS, DLQ_PREFIX, RETRY_PREFIX

MAX_MESSAGE_SIZE = 4 * 1024 * 1024
_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]+")
# TopicValidator.SYSTEM_TOPIC_SET (+ the "rmq_sys_" prefix) and NOT_ALLOWED_SEND_TOPIC_SET
SYSTEM_TOPICS = frozenset({
    "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
})
NOT_ALLOWED_SEND_TOPICS = frozenset({
    "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
})
_MAPPED = frozenset({PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_DELAY_TIME_LEVEL, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                     PROPERTY_TRANSACTION_PREPARED, PROPERTY_PRODUCER_GROUP})


def check_topic_name(topic: str) -> None:
    """TopicValidator.validateTopic (SYSTEM_ERROR with its remarks)."""
    if not topic.strip():
        raise BrokerError(ResponseCode.SYSTEM_ERROR, "The specified topic is blank.")
    if not _TOPIC.fullmatch(topic):
        raise BrokerError(ResponseCode.SYSTEM_ERROR,
                          "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")
    if len(topic) > 127:
        raise BrokerError(ResponseCode.SYSTEM_ERROR, "The specified topic is longer than topic max length.")


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_")


# ----------------------------------------------------------------------------------------------
# SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE


def _send_header(req: RemotingCommand) -> RemotingCommand:
    """The request with SendMessageRequestHeaderV2's one-letter names spelled out (V1 names)."""
    if req.code == RequestCode.SEND_MESSAGE:
        return req
    ext = {SEND_V2_NAMES.get(k, k): v for k, v in req.ext_fields.items()}
    return RemotingCommand(code=req.code, opaque=req.opaque, flag=req.flag, language=req.language,
                           version=req.version, ext_fields=ext, body=req.body, serialize_type=req.serialize_type)


def _send_ext(ctx: Ctx) -> dict[str, str]:
    return {"MSG_REGION": ctx.settings.region, "TRACE_ON": "true"}


def _target_queue(ctx: Ctx, conn: Any, h: RemotingCommand) -> tuple[str, int, int]:
    """msgCheck: (topic, queue id, queue count), creating the topic as autoCreateTopicEnable does."""
    topic = get_str(h, "topic")
    check_topic_name(topic)
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise BrokerError(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
    nums = ctx.served.queue_nums(topic)
    if nums is None:
        default_nums = get_int(h, "defaultTopicQueueNums")
        if get_str(h, "defaultTopic") == AUTO_CREATE_TOPIC and default_nums > 0:
            nums = ctx.served.ensure_topic(topic, min(default_nums, DEFAULT_TOPIC_QUEUE_NUMS))
        elif topic.startswith(RETRY_PREFIX):
            nums = ctx.served.ensure_topic(topic, 1)
        else:
            raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{ctx.faq}")
    queue_id = get_int(h, "queueId")
    if queue_id >= nums:
        raise BrokerError(ctx.config.behaviour.illegal_queue_code,
                          f"request queueId[{queue_id}] is illegal, TopicConfig [topicName={topic}, "
                          f"readQueueNums={nums}, writeQueueNums={nums}, perm=RW-] Producer: {conn.peer}")
    if queue_id < 0:
        queue_id = random.randrange(nums)
    return topic, queue_id, nums


def _message(ctx: Ctx, topic: str, body: bytes, props: dict[str, str], flag: int, sys_flag: int = 0) -> Message:
    """The ``Message`` the wire properties describe (see the module docstring, step 3)."""
    delay_text = props.get(PROPERTY_DELAY_TIME_LEVEL)
    delay = 0
    if delay_text:
        try:
            delay = int(delay_text)
        except ValueError:
            raise CommandError("properties.DELAY", f"not an integer: {delay_text!r}") from None
    # a negative level (5.x's DELAY=-1 on a dead-lettered %RETRY% send, or a client's own) is stored as sent
    # and never scheduled (CommitLog / HookUtils: getDelayTimeLevel() > 0)
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_NAMES and k not in _MAPPED}
    uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or None
    try:
        return Message(topic, body, tags=props.get(PROPERTY_TAGS), keys=props.get(PROPERTY_KEYS, ""),
                       properties=user, delay_level=delay, flag=flag, uniq_key=uniq,
                       wait=props.get(PROPERTY_WAIT_STORE_MSG_OK), sys_flag=sys_flag & SENDER_SYS_FLAG_BITS)
    except InvalidMessage as exc:
        raise BrokerError(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None


def _retry_or_dlq(ctx: Ctx, h: RemotingCommand, topic: str, queue_id: int) -> tuple[str, int, bool]:
    """handleRetryAndDLQ: (topic, queue, to_dlq) for a send to a retry topic."""
    if not topic.startswith(RETRY_PREFIX):
        return topic, queue_id, False
    group = topic[len(RETRY_PREFIX):]
    max_times, _queues = ctx.served.ensure_group(group)
    request_max = opt_int(h, "maxReconsumeTimes")
    if h.version >= V3_4_9 and request_max is not None:
        max_times = request_max
    behaviour = ctx.config.behaviour
    times = get_int(h, "reconsumeTimes", 0)
    # 5.0+ compares with > ("the client may have increased reconsumeTimes"); 5.1.1+ also
    # dead-letters while an orderly lock of the group is live
    dead = times > max_times if behaviour.retry_send_dlq_above_max else times >= max_times
    if behaviour.retry_send_dlq_when_locked and ctx.broker.group_locked(group):
        dead = True
    if dead:
        dlq = DLQ_PREFIX + group
        ctx.served.ensure_topic(dlq, 1)
        return dlq, 0, True
    return topic, queue_id, False


def send_message(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    """SEND_MESSAGE 10 / SEND_MESSAGE_V2 310 (a V2 header with batch=true is a batch)."""
    h = _send_header(req)
    if h.ext_bool("batch"):
        return send_batch(ctx, conn, req)
    extra = _send_ext(ctx)
    try:
        topic, queue_id, _nums = _target_queue(ctx, conn, h)
        props = _properties(h)
        stored_topic, stored_queue, to_dlq = _retry_or_dlq(ctx, h, topic, queue_id)
        if to_dlq and ctx.config.behaviour.retry_send_dlq_delay_minus_one:
            # 5.x: DELAY=-1 in the request's properties, stored at once; 4.9.8 keeps the level the client
            # asked for, and a level > 0 schedules the dead letter (docs/fidelity.md P5-10)
            props[PROPERTY_DELAY_TIME_LEVEL] = "-1"
        msg = _message(ctx, stored_topic, req.body, props, get_int(h, "flag"), get_int(h, "sysFlag"))
        group = get_str(h, "producerGroup")
        now = ctx.now()
        if props.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
            pgroup = props.get(PROPERTY_PRODUCER_GROUP) or group
            result = ctx.broker.send_half(msg, stored_queue, pgroup)
            ctx.wire.txn_half(now, result, stored_topic, stored_queue, pgroup)
        elif req.is_oneway and not ctx.wire.enabled and callable(getattr(ctx.broker, "send_oneway", None)):
            # a oneway request: the server writes no answer; a broker recording its own events records it
            # as the oneway send it is (``OnewayBroker``), and says nothing of a refusal either
            ctx.broker.send_oneway(msg, stored_queue)
            ctx.mark_stored()
            return ok(req, extra)
        else:
            result = ctx.broker.send(msg, stored_queue)
            ctx.wire.send(now, result, stored_topic, stored_queue, group, props, oneway=req.is_oneway)
            ctx.mark_stored()
    except BrokerError as exc:
        return refuse(req, exc.code, exc.remark, extra)
    return ok(req, {**extra, **_result_ext(result, queue_id)})


def _properties(h: RemotingCommand) -> dict[str, str]:
    return decode_properties(h.ext_fields.get("properties") or "")


def _result_ext(result: SendResult, queue_id: int) -> dict[str, str]:
    return {"msgId": result.msg_id, "queueId": str(queue_id), "queueOffset": str(result.queue_offset)}


def send_batch(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    """SEND_BATCH_MESSAGE 320: every item checked, then all stored as one append by a broker that takes
    batches (``send_batch``)."""
    h = _send_header(req)
    extra = _send_ext(ctx)
    try:
        topic, queue_id, _nums = _target_queue(ctx, conn, h)
        if len(req.body) > MAX_MESSAGE_SIZE:
            raise BrokerError(ResponseCode.MESSAGE_ILLEGAL,
                              f"the message is illegal, batch body of {len(req.body)} bytes exceeds "
                              f"{MAX_MESSAGE_SIZE}")
        batch_props = _properties(h)
        get_int(h, "flag")  # checked like the header decode does; each item carries its own flag
        messages = []
        timer_wheel = ctx.config.behaviour.timer_wheel
        for index, item in enumerate(decode_batch(req.body)):
            own = item.properties
            if timer_wheel:  # 5.x's hook reads the batch's properties, never an item's (module docstring)
                own = {k: v for k, v in own.items() if k not in TIMER_REQUEST_PROPERTIES}
            props = {**own, **batch_props}
            if props.get(PROPERTY_DELAY_TIME_LEVEL, "0") not in ("", "0") or \
                    props.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
                raise BrokerError(ResponseCode.MESSAGE_ILLEGAL,
                                  f"batch item {index}: delayed and transactional messages cannot be batched")
            messages.append(_message(ctx, topic, item.body, props, item.flag))
        now = ctx.now()
        timed = timer_wheel and any(k in TIMER_REQUEST_PROPERTIES for k in batch_props)
        if not timed and callable(getattr(ctx.broker, "send_batch", None)):  # one append (``BatchBroker``)
            batch = ctx.broker.send_batch(messages, queue_id)
            results = [attrs.evolve(batch, msg_id=msg_id, uniq_key=key, queue_offset=batch.queue_offset + i)
                       for i, (msg_id, key) in enumerate(zip(batch.msg_id.split(","), batch.uniq_key.split(","),
                                                             strict=True))]
        else:  # a broker without batches, a 5.x batch timed by its own properties: one by one (fidelity.md)
            results = [ctx.broker.send(msg, queue_id) for msg in messages]
        for result in results:
            ctx.wire.send(now, result, topic, queue_id, get_str(h, "producerGroup"), batch_props)
        ctx.mark_stored()
    except BrokerError as exc:
        return refuse(req, exc.code, exc.remark, extra)
    return ok(req, {**extra, "msgId": ",".join(r.msg_id for r in results), "queueId": str(queue_id),
                    "queueOffset": str(results[0].queue_offset)})


# ----------------------------------------------------------------------------------------------
# CONSUMER_SEND_MSG_BACK


def send_back(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    group = get_str(req, "group")
    offset = get_long(req, "offset")
    delay_level = get_int(req, "delayLevel")
    max_times = opt_int(req, "maxReconsumeTimes") if req.version >= V3_4_9 else None
    ctx.served.ensure_group(group)
    code = ctx.broker.send_back(group, offset, delay_level, req.ext_fields.get("originMsgId"), max_times)
    code = ResponseCode(code)
    if code is ResponseCode.SUCCESS:
        ctx.mark_stored()
        return ok(req)
    if code is ResponseCode.SYSTEM_ERROR:
        return refuse(req, code, f"look message by offset failed, {offset}")
    if code is ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
        return refuse(req, code, f"subscription group not exist, {group} {ctx.faq}")
    return refuse(req, code, code.name)


# ----------------------------------------------------------------------------------------------
# END_TRANSACTION

_ACTIONS = {TRANSACTION_NOT_TYPE: TxnAction.UNKNOWN, TRANSACTION_COMMIT_TYPE: TxnAction.COMMIT,
            TRANSACTION_ROLLBACK_TYPE: TxnAction.ROLLBACK}


def _prepare_remark(ctx: Ctx, group: str, commitlog_offset: int, tsto: int) -> str:
    """checkPrepareMessage's remark for a refused commit/rollback (when the half can be looked up)."""
    if not ctx.served.can_look_up:
        return "Find prepared transaction message failed"
    half = ctx.served.message_at(commitlog_offset)
    if half is None:
        return "Find prepared transaction message failed"
    if half.properties.get(PROPERTY_PRODUCER_GROUP) != group:
        return "The producer group wrong"
    if half.queue_offset != tsto:
        return "The transaction state table offset wrong"
    return "The commit log offset wrong"


def end_transaction(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand | None:
    group = get_str(req, "producerGroup")
    tsto = get_long(req, "tranStateTableOffset")
    offset = get_long(req, "commitLogOffset")
    kind = get_int(req, "commitOrRollback")
    from_check = get_bool(req, "fromTransactionCheck")
    action = _ACTIONS.get(kind)
    if action is None:
        return None  # EndTransactionProcessor: default -> return null
    now = ctx.now()
    remark = None
    if action is not TxnAction.UNKNOWN:
        remark = _prepare_remark(ctx, group, offset, tsto)
    code = ResponseCode(ctx.broker.end_transaction(group, offset, tsto, action, from_check))
    if code is ResponseCode.SUCCESS:
        ctx.wire.txn_end(now, group, req.ext_fields.get("msgId"), offset, action.value, from_check)
    if action is TxnAction.UNKNOWN:
        return None
    if code is not ResponseCode.SUCCESS:
        return refuse(req, code, remark if code is ResponseCode.SYSTEM_ERROR else code.name)
    if action is TxnAction.COMMIT:
        ctx.mark_stored()
        return ok(req)
    return ok(req, remark=NOT_SET)
