"""Consumer-side requests: PULL_MESSAGE 11, QUERY/UPDATE_CONSUMER_OFFSET 14/15, HEART_BEAT 34,
UNREGISTER_CLIENT 35, GET_CONSUMER_LIST_BY_GROUP 38, LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42,
CHECK_CLIENT_CONFIG 46.

Theory of operation
-------------------
Follows RocketMQ 4.9.8's ``PullMessageProcessor``, ``ConsumerManageProcessor``,
``ClientManageProcessor`` and ``AdminBrokerProcessor`` (lock/unlock) over the
``Broker`` protocol:

PULL_MESSAGE: the subscription group is auto-created; the topic must exist
(TOPIC_NOT_EXIST) and the queue id be below its queue count (SYSTEM_ERROR);
the filter is the request's ``subscription`` when sysFlag has the
subscription bit (4), else ``Broker.pull(subscription=None, sub_version=…)``:
the group's heartbeated subscription as ``model/subscriptions.py`` keeps it
(highest subVersion wins; SUBSCRIPTION_NOT_EXIST 24, SUBSCRIPTION_NOT_LATEST 25,
FILTER_DATA_NOT_EXIST 27, FILTER_DATA_NOT_LATEST 28); the expression and its ``expressionType``
(TAG or SQL92) go to ``Broker.pull``, which refuses SQL92 with SYSTEM_ERROR unless the
broker runs with ``enablePropertyFilter=true`` (``model/pullfilter.py``). The
broker's ``PullResult`` maps to the response code and the remark the store
status gives (``pull_answer``): FOUND → 0 with the messages in commitlog
format; NO_NEW_MSG → 19 PULL_NOT_FOUND (OFFSET_OVERFLOW_ONE at the max,
NO_MESSAGE_IN_QUEUE on an empty queue, else OFFSET_FOUND_NULL: retention took
the offset's consume-queue file); NO_MATCHED_MSG → 20 PULL_RETRY_IMMEDIATELY
(MESSAGE_WAS_REMOVING under a ``*`` subscription, else NO_MATCHED_MESSAGE:
fidelity R6); OFFSET_ILLEGAL → 21 PULL_OFFSET_MOVED (OFFSET_TOO_SMALL /
OFFSET_OVERFLOW_BADLY / NO_MESSAGE_IN_QUEUE). A PULL_NOT_FOUND with the
suspend bit (2) is held (``longpoll``) for ``suspendTimeoutMillis``. With the
commit bit (1) the request's ``commitOffset`` is stored — also for a held pull,
never again when the held pull is re-run.

QUERY_CONSUMER_OFFSET: the committed offset; a queue never committed whose
min offset is 0 answers 0 (``checkInDiskByConsumeOffset`` is false for a
store this size), else QUERY_NOT_FOUND 22.

HEART_BEAT registers the connection (``clients``), auto-creates each consumer
group and its ``%RETRY%`` topic, hands each group's subscriptions to
``Broker.heartbeat`` and notifies the groups that changed; a consumer channel
that leaves (unregister, close, expiry) leaves the broker's table too.
"""

from __future__ import annotations

from typing import Any

from rmqspec.model.message import MessageQueue
from rmqspec.model.pullfilter import disabled_remark
from rmqspec.model.results import BrokerError, PullResult, PullStatus, ResponseCode
from rmqspec.model.sql92 import SQL92, FilterParseError, compile_filter, is_tag_type
from rmqspec.remoting import bodies
from rmqspec.remoting.bodies import BodyError
from rmqspec.remoting.clients import parse_heartbeat
from rmqspec.remoting.codes import PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUBSCRIPTION, PULL_FLAG_SUSPEND
from rmqspec.remoting.command import RemotingCommand
from rmqspec.remoting.context import Ctx, ok, refuse
from rmqspec.remoting.fields import INT64, get_int, get_long, get_str
from rmqspec.remoting.longpoll import HeldPull
from rmqspec.remoting.records import encode_many
from rmqspec.remoting.served import RETRY_PREFIX

PULL_NOT_FOUND = 19
PULL_RETRY_IMMEDIATELY = 20
PULL_OFFSET_MOVED = 21
QUERY_NOT_FOUND = 22


def pull_answer(result: PullResult, offset: int, match_all: bool = False) -> tuple[int, str]:
    """(response code, remark = GetMessageStatus name) of a pull result (PullMessageProcessor's switch).

    The store's status is read back from the result: NO_NEW_MSG is NO_MESSAGE_IN_QUEUE on an empty
    queue, OFFSET_OVERFLOW_ONE at the max, else OFFSET_FOUND_NULL (the offset's consume-queue file was
    deleted); NO_MATCHED_MSG under a request subscription that matches every tag (``match_all``) can only
    be MESSAGE_WAS_REMOVING (the units' records went with their files); under any other filter, or the
    group's heartbeated one, the remark says NO_MATCHED_MESSAGE (4.9.8 names the last judged unit's
    reason, which the result does not tell: fidelity R6)."""
    if result.status is PullStatus.FOUND:
        return ResponseCode.SUCCESS, "FOUND"
    if result.status is PullStatus.NO_MATCHED_MSG:
        return PULL_RETRY_IMMEDIATELY, "MESSAGE_WAS_REMOVING" if match_all else "NO_MATCHED_MESSAGE"
    if result.status is PullStatus.NO_NEW_MSG:
        if result.max_offset == 0:
            return PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE"
        return PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE" if offset == result.max_offset else "OFFSET_FOUND_NULL"
    if result.max_offset == 0:
        return PULL_OFFSET_MOVED, "NO_MESSAGE_IN_QUEUE"
    return PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL" if offset < result.min_offset else "OFFSET_OVERFLOW_BADLY"


def _subscription(req: RemotingCommand, sys_flag: int) -> tuple[str | None, str]:
    """The request's (expression, type) with the subscription bit, else (None, type): the broker
    filters with the group's heartbeated subscription (``model/subscriptions.py``)."""
    kind = req.ext_fields.get("expressionType") or "TAG"
    if sys_flag & PULL_FLAG_SUBSCRIPTION:
        return req.ext_fields.get("subscription") or "*", kind
    return None, kind


def process_pull(ctx: Ctx, conn: Any, req: RemotingCommand, allow_suspend: bool) -> RemotingCommand | None:
    """PullMessageProcessor.processRequest; ``allow_suspend`` false when a held pull is re-run."""
    group = get_str(req, "consumerGroup")
    topic = get_str(req, "topic")
    queue_id = get_int(req, "queueId")
    offset = get_long(req, "queueOffset")
    max_nums = get_int(req, "maxMsgNums")
    sys_flag = get_int(req, "sysFlag")
    commit_offset = get_long(req, "commitOffset")
    suspend_ms = get_long(req, "suspendTimeoutMillis")
    sub_version = get_long(req, "subVersion")
    ctx.served.ensure_group(group)
    nums = ctx.served.queue_nums(topic)
    if nums is None:
        raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{ctx.faq}")
    if not 0 <= queue_id < nums:
        raise BrokerError(ctx.config.behaviour.illegal_queue_code,
                          f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{nums}] "
                          f"consumer:[{conn.peer}]")
    expression, kind = _subscription(req, sys_flag)
    mq = MessageQueue(topic, queue_id)
    try:
        result = ctx.broker.pull(group, mq, offset, max(max_nums, 1), expression, kind, sub_version)
    except BrokerError as exc:
        if exc.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED:
            raise BrokerError(exc.code, "parse the consumer's subscription failed") from None
        raise
    code, remark = pull_answer(result, offset, expression in ("*", "") and is_tag_type(kind))
    now = ctx.now()
    response: RemotingCommand | None
    ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": str(result.next_begin_offset),
           "minOffset": str(result.min_offset), "maxOffset": str(result.max_offset)}
    if code == ResponseCode.SUCCESS:
        for msg in result.messages:
            ctx.wire.deliver(now, msg, group)
        body = encode_many(result.messages, ctx.store_host, ctx.born_host)
        response = ok(req, ext, body, remark)
    elif code == PULL_NOT_FOUND and allow_suspend and sys_flag & PULL_FLAG_SUSPEND:
        ctx.held.hold(HeldPull(conn, req, topic, queue_id, offset, now + max(suspend_ms, 0)))
        response = None
    else:
        response = refuse(req, code, remark, ext)
    if allow_suspend and sys_flag & PULL_FLAG_COMMIT_OFFSET:
        ctx.broker.update_offset(group, mq, commit_offset)
        ctx.wire.commit_offset(now, group, mq, commit_offset)
    return response


def pull_message(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand | None:
    return process_pull(ctx, conn, req, allow_suspend=True)


# ----------------------------------------------------------------------------------------------
# offsets


def query_consumer_offset(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    group, topic, queue_id = get_str(req, "consumerGroup"), get_str(req, "topic"), get_int(req, "queueId")
    offset = ctx.broker.query_offset(group, MessageQueue(topic, queue_id))
    if offset >= 0:
        return ok(req, {"offset": str(offset)})
    low, _high = ctx.served.queue_range(topic, queue_id)
    if low <= 0:
        return ok(req, {"offset": "0"})
    return refuse(req, QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")


def update_consumer_offset(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    group, topic, queue_id = get_str(req, "consumerGroup"), get_str(req, "topic"), get_int(req, "queueId")
    offset = get_int(req, "commitOffset", bounds=INT64)
    mq = MessageQueue(topic, queue_id)
    ctx.broker.update_offset(group, mq, offset)
    ctx.wire.commit_offset(ctx.now(), group, mq, offset)
    return ok(req)


# ----------------------------------------------------------------------------------------------
# clients


def check_client_config(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    """CHECK_CLIENT_CONFIG 46 (ClientManageProcessor.checkClientConfig): a TAG subscription is fine; another
    type is SYSTEM_ERROR without enablePropertyFilter, else it must compile (SUBSCRIPTION_PARSE_FAILED)."""
    doc = bodies.loads_object(req.body, "CheckClientRequestBody") if req.body else {}
    sub = doc.get("subscriptionData")
    if isinstance(sub, dict):
        kind = sub.get("expressionType")
        text = sub.get("subString")
        if not is_tag_type(kind if isinstance(kind, str) else None):
            if not ctx.config.enable_property_filter:
                raise BrokerError(ResponseCode.SYSTEM_ERROR, disabled_remark(str(kind)))
            if kind != SQL92 or not isinstance(text, str):
                raise BrokerError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"no filter registered for type {kind}")
            try:
                compile_filter(text)
            except FilterParseError as exc:
                raise BrokerError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc)) from None
    return ok(req)


def heart_beat(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    hb = parse_heartbeat(bodies.loads_object(req.body, "HeartbeatData"))
    for data in hb.consumers:
        _max, retry_queues = ctx.served.ensure_group(data.group)
        ctx.served.ensure_topic(RETRY_PREFIX + data.group, max(retry_queues, 1))
    changed = ctx.clients.heartbeat(conn, hb, req.language.name, req.version, ctx.now())
    for data in hb.consumers:
        ctx.broker.heartbeat(data.group, hb.client_id,
                             {s.topic: (s.sub_string, s.expression_type, s.sub_version) for s in data.subscriptions})
    for group in changed:
        ctx.notify_consumers(group)
    return ok(req)


def forget_departed(ctx: Ctx) -> None:
    """Consumer channels the registry dropped leave the broker's subscription table too."""
    for group, client_id in ctx.clients.take_departed():
        if client_id not in ctx.clients.consumer_ids(group):
            ctx.broker.unregister_consumer(group, client_id)


def unregister_client(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    get_str(req, "clientID")
    for group in ctx.clients.unregister(conn, req.ext_fields.get("producerGroup"),
                                        req.ext_fields.get("consumerGroup")):
        ctx.notify_consumers(group)
    forget_departed(ctx)
    return ok(req)


def consumer_list(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    group = get_str(req, "consumerGroup")
    ids = ctx.clients.consumer_ids(group)
    if not ids:
        return refuse(req, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
    return ok(req, body=bodies.dumps({"consumerIdList": ids}))


# ----------------------------------------------------------------------------------------------
# orderly locks


def _lock_body(ctx: Ctx, req: RemotingCommand) -> tuple[str, str, list[MessageQueue]]:
    doc = bodies.loads_object(req.body, "LockBatchRequestBody")
    group, client = doc.get("consumerGroup"), doc.get("clientId")
    if not isinstance(group, str):
        raise BodyError(0, "consumerGroup: expected a string")
    if not isinstance(client, str):
        raise BodyError(0, "clientId: expected a string")
    raw = doc.get("mqSet") or []
    if not isinstance(raw, list):
        raise BodyError(0, "mqSet: expected a list")
    mqs = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("topic"), str) \
                or type(item.get("queueId")) is not int:
            raise BodyError(0, f"mqSet[{i}]: expected {{topic, brokerName, queueId}}")
        mqs.append(MessageQueue(item["topic"], item["queueId"],
                                str(item.get("brokerName") or ctx.settings.broker_name)))
    return group, client, mqs


def _mq_json(mq: MessageQueue) -> dict[str, Any]:
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}


def lock_batch(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    group, client, mqs = _lock_body(ctx, req)
    granted = ctx.broker.lock_batch(group, client, mqs)
    now = ctx.now()
    for mq in mqs:
        ctx.wire.lock(now, group, mq, client, mq in granted)
    return ok(req, body=bodies.dumps({"lockOKMQSet": [_mq_json(mq) for mq in sorted(granted)]}))


def unlock_batch(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    group, client, mqs = _lock_body(ctx, req)
    ctx.broker.unlock_batch(group, client, mqs)
    now = ctx.now()
    for mq in mqs:
        ctx.wire.unlock(now, group, mq, client)
    return ok(req)
