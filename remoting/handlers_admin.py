"""Admin and lookup requests: UPDATE_AND_CREATE_TOPIC 17, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200,
GET_ALL_TOPIC_CONFIG 21, GET_BROKER_CONFIG 26, SEARCH_OFFSET_BY_TIMESTAMP 29, GET_MAX/MIN_OFFSET 30/31,
VIEW_MESSAGE_BY_ID 33, QUERY_CONSUME_QUEUE 321.

Theory of operation
-------------------
Follows RocketMQ 4.9.8's ``AdminBrokerProcessor`` and
``QueryMessageProcessor.viewMessageById``. Remarks are RocketMQ's, including
its quirks: UPDATE_AND_CREATE_TOPIC and QUERY_CONSUME_QUEUE answer SUCCESS
with the remark "not set any response code" (they never clear the default).
A topic keeps one queue count (rmqspec's brokers keep read = write), so
UPDATE_AND_CREATE_TOPIC uses ``max(readQueueNums, writeQueueNums)``; perm,
filter type and topicSysFlag are accepted and not kept. GET_ALL_TOPIC_CONFIG
and the routes show every topic with perm 6 (and ``TBW102`` with 7).

GET_BROKER_CONFIG answers the configuration the served broker runs with, as
``key=value`` lines (``getAllConfigsFormatString``): the keys ``rmqspec
serve`` understands (messageDelayLevel, transactionTimeOut, ...) plus the
other keys of ``--config``, so a client that reads the broker's timing (the
fixture's RealScenarios does) sees the real values.

SEARCH_OFFSET_BY_TIMESTAMP answers SUCCESS with ``offset``, the served broker's ``search_offset``
(``model.protocol.SearchBroker``; ``getOffsetInQueueByTime``, ``model/timesearch.py``) for any topic and
queue id, existing or not (4.9.8 checks neither); a served broker without ``search_offset`` is refused
with a remark that says so.
"""

from __future__ import annotations

import json
from typing import Any

from rmqspec.model.results import BrokerError, ResponseCode
from rmqspec.remoting import bodies
from rmqspec.remoting.bodies import BodyError
from rmqspec.remoting.command import RemotingCommand
from rmqspec.remoting.context import NOT_SET, Ctx, ok, refuse
from rmqspec.remoting.fields import get_int, get_long, get_str
from rmqspec.remoting.handlers_send import check_topic_name, is_system_topic
from rmqspec.remoting.records import encode_stored
from rmqspec.remoting.served import AUTO_CREATE_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS


def update_and_create_topic(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    topic = get_str(req, "topic")
    check_topic_name(topic)
    if is_system_topic(topic):
        raise BrokerError(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
    nums = max(get_int(req, "readQueueNums"), get_int(req, "writeQueueNums"))
    get_int(req, "perm")
    if nums <= 0:
        raise BrokerError(ResponseCode.SYSTEM_ERROR, f"topic[{topic}]: readQueueNums/writeQueueNums must be > 0")
    ctx.served.create_topic(topic, nums)
    next(ctx.topic_version)
    return ok(req, remark=NOT_SET)


def update_and_create_group(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    doc = bodies.loads_object(req.body, "SubscriptionGroupConfig")
    name = doc.get("groupName")
    if not isinstance(name, str) or not name:
        raise BodyError(0, "SubscriptionGroupConfig.groupName: expected a non-empty string")
    values = []
    for key, default in (("retryMaxTimes", 16), ("retryQueueNums", 1)):
        value = doc.get(key, default)
        if type(value) is not int:
            raise BodyError(0, f"SubscriptionGroupConfig.{key}: expected an integer, got {value!r}")
        values.append(value)
    ctx.served.create_group(name, values[0], values[1])
    return ok(req)


def _topic_config(name: str, nums: int, perm: int = 6) -> dict[str, Any]:
    return {"order": False, "perm": perm, "readQueueNums": nums, "topicFilterType": "SINGLE_TAG",
            "topicName": name, "topicSysFlag": 0, "writeQueueNums": nums}


def all_topic_config(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    table = {AUTO_CREATE_TOPIC: _topic_config(AUTO_CREATE_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS, 7)}
    for name, nums in sorted(ctx.served.topics().items()):
        table[name] = _topic_config(name, nums)
    doc = {"dataVersion": {"counter": next(ctx.topic_version), "timestamp": ctx.now()}, "topicConfigTable": table}
    return ok(req, body=bodies.dumps(doc))


def broker_properties(ctx: Ctx) -> dict[str, str]:
    """The ``key=value`` pairs GET_BROKER_CONFIG answers."""
    c, s = ctx.config, ctx.settings
    props = dict(s.extra_properties)
    props.update({
        "brokerClusterName": s.cluster,
        "brokerName": s.broker_name,
        "brokerId": "0",
        "brokerIP1": s.broker_ip,
        "listenPort": str(s.port),
        "namesrvAddr": s.namesrv_addr,
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "SYNC_FLUSH" if c.flush == "SYNC" else "ASYNC_FLUSH",
        "messageDelayLevel": c.message_delay_level,
        "transactionTimeOut": str(c.transaction_timeout_ms),
        "transactionCheckInterval": str(c.transaction_check_interval_ms),
        "transactionCheckMax": str(c.transaction_check_max),
        "fileReservedTime": str(c.file_reserved_hours),
        "mappedFileSizeCommitLog": str(c.commitlog_file_size),
        "flushConsumerOffsetInterval": str(c.flush_consumer_offset_interval_ms),
        "flushDelayOffsetInterval": str(c.flush_delay_offset_interval_ms),
        "autoCreateTopicEnable": "true",
        "autoCreateSubscriptionGroup": "true",
        "defaultTopicQueueNums": str(DEFAULT_TOPIC_QUEUE_NUMS),
        "longPollingEnable": "true",
        "storePathRootDir": s.store_dir,
    })
    if c.behaviour.timer_wheel:  # 5.x MessageStoreConfig (model/timer.py); 4.9.8 has no such keys
        props.update({
            "timerWheelEnable": "true" if c.timer_wheel_enable else "false",
            "timerPrecisionMs": str(c.timer_precision_ms),
            "timerMaxDelaySec": str(c.timer_max_delay_sec),
            "timerFlushIntervalMs": str(c.timer_flush_interval_ms),
        })
    return props


def broker_config(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    text = "".join(f"{k}={v}\n" for k, v in sorted(broker_properties(ctx).items()))
    version = json.dumps({"counter": 0, "timestamp": ctx.started_ms}, separators=(",", ":"))
    return ok(req, {"version": version}, text.encode("utf-8"))


def max_offset(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    _low, high = ctx.served.queue_range(get_str(req, "topic"), get_int(req, "queueId"))
    return ok(req, {"offset": str(high)})


def min_offset(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    low, _high = ctx.served.queue_range(get_str(req, "topic"), get_int(req, "queueId"))
    return ok(req, {"offset": str(low)})


def search_offset_by_timestamp(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    topic, queue_id, timestamp = get_str(req, "topic"), get_int(req, "queueId"), get_long(req, "timestamp")
    if not ctx.served.can_search:
        return refuse(req, ResponseCode.SYSTEM_ERROR,
                      "SEARCH_OFFSET_BY_TIMESTAMP: the served broker cannot look queue offsets up by time")
    return ok(req, {"offset": str(ctx.served.search_offset(topic, queue_id, timestamp))})


def view_message_by_id(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    offset = get_long(req, "offset")
    if not ctx.served.can_look_up:
        return refuse(req, ResponseCode.SYSTEM_ERROR,
                      "VIEW_MESSAGE_BY_ID: the served broker cannot look messages up by commitlog offset")
    msg = ctx.served.message_at(offset) if offset >= 0 else None
    if msg is None:
        return refuse(req, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
    return ok(req, body=encode_stored(msg, ctx.store_host, ctx.born_host))


def query_consume_queue(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    topic, queue_id = get_str(req, "topic"), get_int(req, "queueId")
    index, count = get_long(req, "index"), get_int(req, "count")
    group = req.ext_fields.get("consumerGroup")
    if not ctx.served.can_list_units:
        return refuse(req, ResponseCode.SYSTEM_ERROR,
                      "QUERY_CONSUME_QUEUE: the served broker cannot list consume-queue units")
    low, high = ctx.served.queue_range(topic, queue_id)
    units = ctx.served.queue_units(topic, queue_id, index, count)
    if units is None:
        return refuse(req, ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
    doc: dict[str, Any] = {"maxQueueIndex": high, "minQueueIndex": low}
    if group is not None:
        info = ctx.clients.consumer_group(group)
        sub = info.subscriptions.get(topic) if info else None
        if sub is None:
            doc["filterData"] = f"{group}@{topic} is not online!"
        else:
            doc["subscriptionData"] = {"classFilterMode": False, "codeSet": [], "expressionType": sub.expression_type,
                                       "subString": sub.sub_string, "subVersion": sub.sub_version, "tagsSet": [],
                                       "topic": topic}
    if not 0 <= index < high or not units:
        return ok(req, remark=f"Index {index} of {queue_id}@{topic} is not exist!")
    doc["queueData"] = [{"eval": False, "physicOffset": phys, "physicSize": size, "tagsCode": tags}
                        for phys, size, tags in units]
    return ok(req, body=bodies.dumps(doc), remark=NOT_SET)
