"""The client's side of each ``Broker`` operation: request commands and response parsing, no I/O.

Theory of operation
-------------------
One pair of pure functions per operation of ``rmqspec.model.Broker``
(SPEC §3): ``<op>_request(...) -> RemotingCommand`` builds the request
exactly as the Java 4.9.8 client builds it (ext names and values as in
``codes.REQUESTS`` and the captures in ``../shared/rocketmq-notes/results``), and
``parse_<op>(response)`` turns the broker's answer into the model's result
type (``SendResult``, ``PullResult``, ``ResponseCode``, ``CheckRequest``...).
``RemoteBroker`` (``adapter.py``) only sends what these build and returns
what they parse, so every mapping between the wire and the model is here and
is tested without sockets.

Refusals follow the ``Broker`` protocol: operations that return a result
object raise ``BrokerError(ResponseCode(code), remark)``; ``send_back`` and
``end_transaction`` return the code. A code that ``ResponseCode`` does not
name becomes ``SYSTEM_ERROR`` with the number in the remark. Answers that
are not what the protocol allows (a missing ext field, a body that does not
decode) raise ``ResponseMalformed`` naming the request, field and reason —
the broker under test is to blame.

Sources (4.9.8): ``client/impl/MQClientAPIImpl.java`` (sendMessage,
pullMessage, processSendResponse, processPullResponse, lockBatchMQ,
consumerSendMessageBack, endTransactionOneway), ``client/impl/producer/
DefaultMQProducerImpl.java`` (sendKernelImpl, sendMessageInTransaction),
``common/protocol/heartbeat/*``, ``broker/processor/*``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from rmqspec.impl.codec import to_stored_message
from rmqspec.model.filterapi import build_subscription
from rmqspec.model.javahash import java_string_hash
from rmqspec.model.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_PREPARED_TYPE,
    Message,
    MessageQueue,
    StoredMessage,
    encode_properties,
)
from rmqspec.model.message import (
    PROPERTY_WAIT_STORE_MSG_OK as PROPERTY_WAIT,
)
from rmqspec.model.results import (
    BrokerError,
    CheckRequest,
    PullResult,
    PullStatus,
    ResponseCode,
    SendResult,
    SendStatus,
    TxnAction,
)
from rmqspec.model.sql92 import is_tag_type
from rmqspec.remoting import bodies
from rmqspec.remoting.codes import (
    PULL_FLAG_SUBSCRIPTION,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    RequestCode,
)
from rmqspec.remoting.command import CommandError, LanguageCode, RemotingCommand, request
from rmqspec.remoting.records import BatchItem, encode_batch

DEFAULT_TOPIC = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC, the Java producer's createTopicKey
DEFAULT_TOPIC_QUEUE_NUMS = 4
PERM_READ_WRITE = 6  # PermName.PERM_READ | PERM_WRITE
LANGUAGE = LanguageCode.PYTHON  # what we are; the 4.9.8 broker treats every language alike

# The Java client's SendStatus for the codes a send may succeed with (MQClientAPIImpl.processSendResponse).
SEND_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
COMMIT_OR_ROLLBACK = {
    TxnAction.COMMIT: TRANSACTION_COMMIT_TYPE,
    TxnAction.ROLLBACK: TRANSACTION_ROLLBACK_TYPE,
    TxnAction.UNKNOWN: TRANSACTION_NOT_TYPE,
}


class ResponseMalformed(ValueError):
    """An answer the protocol does not allow: which request, which field, why (the broker is to blame)."""

    def __init__(self, what: str, field: str, reason: str) -> None:
        super().__init__(f"{what}: {field}: {reason}")
        self.what = what
        self.field = field
        self.reason = reason


def response_code(resp: RemotingCommand) -> ResponseCode:
    """The response's code as a ``ResponseCode`` (unnamed codes → SYSTEM_ERROR)."""
    try:
        return ResponseCode(resp.code)
    except ValueError:
        return ResponseCode.SYSTEM_ERROR


def refusal(resp: RemotingCommand, what: str) -> BrokerError:
    """The ``BrokerError`` for a refused request (the remark as the broker wrote it)."""
    code = response_code(resp)
    remark = resp.remark or ""
    if code.value != resp.code:
        remark = f"unknown response code {resp.code} to {what}: {remark}"
    return BrokerError(code, remark)


def _req(code: RequestCode, ext: Mapping[str, Any] | None = None, body: bytes = b"") -> RemotingCommand:
    return request(code, ext, body, language=LANGUAGE)


def _ext_int(resp: RemotingCommand, what: str, name: str) -> int:
    try:
        return resp.ext_int(name)
    except CommandError as exc:
        raise ResponseMalformed(what, exc.field, exc.reason) from None


def _json_body(resp: RemotingCommand, what: str) -> dict[str, Any]:
    try:
        return bodies.loads_object(resp.body, what)
    except bodies.BodyError as exc:
        raise ResponseMalformed(what, "body", str(exc)) from None


def messages_of(body: bytes, what: str) -> tuple[StoredMessage, ...]:
    """Records in commitlog format → the consumer's view (msgId from each record's store host)."""
    try:
        records = bodies.decode_messages(body)
    except bodies.BodyError as exc:
        raise ResponseMalformed(what, "body", str(exc)) from None
    return tuple(to_stored_message(r) for r in records)


def expect_success(resp: RemotingCommand, what: str) -> None:
    if resp.code != ResponseCode.SUCCESS:
        raise refusal(resp, what)


# ----------------------------------------------------------------------------------------------
# name server


def cluster_info_request() -> RemotingCommand:
    return _req(RequestCode.GET_BROKER_CLUSTER_INFO)


def parse_cluster_info(resp: RemotingCommand) -> dict[str, dict[int, str]]:
    """GET_BROKER_CLUSTER_INFO → {broker name: {broker id: address}} (bare integer keys read)."""
    expect_success(resp, "GET_BROKER_CLUSTER_INFO")
    table = _json_body(resp, "GET_BROKER_CLUSTER_INFO").get("brokerAddrTable") or {}
    if not isinstance(table, dict):
        raise ResponseMalformed("GET_BROKER_CLUSTER_INFO", "brokerAddrTable", "not an object")
    out: dict[str, dict[int, str]] = {}
    for name, data in table.items():
        addrs = (data or {}).get("brokerAddrs") or {} if isinstance(data, dict) else None
        if not isinstance(addrs, dict):
            raise ResponseMalformed("GET_BROKER_CLUSTER_INFO", f"brokerAddrTable.{name}.brokerAddrs", "not an object")
        try:
            out[str(name)] = {int(k): str(v) for k, v in addrs.items()}
        except ValueError:
            raise ResponseMalformed("GET_BROKER_CLUSTER_INFO", f"brokerAddrTable.{name}.brokerAddrs",
                                    f"a broker id is not an integer: {sorted(addrs)}") from None
    return out


def route_request(topic: str) -> RemotingCommand:
    return _req(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def parse_route_queues(resp: RemotingCommand, broker_name: str) -> tuple[int, int] | None:
    """GET_ROUTEINFO_BY_TOPIC → (readQueueNums, writeQueueNums) of ``broker_name``; None if no route."""
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    expect_success(resp, "GET_ROUTEINFO_BY_TOPIC")
    route = _json_body(resp, "GET_ROUTEINFO_BY_TOPIC")
    for queue_data in route.get("queueDatas") or []:
        if isinstance(queue_data, dict) and queue_data.get("brokerName") == broker_name:
            try:
                return int(queue_data["readQueueNums"]), int(queue_data["writeQueueNums"])
            except (KeyError, TypeError, ValueError):
                raise ResponseMalformed("GET_ROUTEINFO_BY_TOPIC", "queueDatas", f"bad entry {queue_data!r}") from None
    return None


# ----------------------------------------------------------------------------------------------
# admin


def create_topic_request(topic: str, queue_nums: int) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC as ``MQClientAPIImpl.createTopic`` sends it (mqadmin updateTopic)."""
    return _req(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": DEFAULT_TOPIC, "readQueueNums": queue_nums,
        "writeQueueNums": queue_nums, "perm": PERM_READ_WRITE, "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0, "order": False,
    })


def create_group_request(group: str, retry_max_times: int, retry_queue_nums: int) -> RemotingCommand:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: a SubscriptionGroupConfig body with the broker's defaults."""
    body = bodies.dumps({
        "brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": True, "consumeFromMinEnable": True,
        "groupName": group, "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": retry_max_times,
        "retryQueueNums": retry_queue_nums, "whichBrokerWhenConsumeSlowly": 1,
    })
    return _req(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)


def heartbeat_request(client_id: str, producer_groups: Iterable[str],
                      consumer_groups: Mapping[str, Iterable[str]]) -> RemotingCommand:
    """HEART_BEAT: producer groups (so checks come here) and pull consumer groups with their topics."""
    consumers = [{
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "consumeType": "CONSUME_ACTIVELY",
        "groupName": group,
        "messageModel": "CLUSTERING",
        "subscriptionDataSet": [{
            "classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
            "subVersion": 0, "tagsSet": [], "topic": topic,
        } for topic in sorted(topics)],
        "unitMode": False,
    } for group, topics in sorted(consumer_groups.items())]
    body = bodies.dumps({
        "clientID": client_id,
        "consumerDataSet": consumers,
        "producerDataSet": [{"groupName": g} for g in sorted(producer_groups)],
    })
    return _req(RequestCode.HEART_BEAT, body=body)


def subscription_data(topic: str, expression: str, expression_type: str, sub_version: int) -> dict[str, Any]:
    """A SubscriptionData as the Java client builds it (``FilterAPI.build``): for TAG the ``||`` parts,
    trimmed, in ``tagsSet`` and their String.hashCode in ``codeSet`` (the broker filters a pull without the
    subscription flag with this codeSet), ``*`` for an empty expression (``model/filterapi.py``); SQL92
    carries no tags."""
    tags: frozenset[str] = frozenset()
    if is_tag_type(expression_type):
        sub = build_subscription(expression)  # model/filterapi.py; SubscriptionSplitError as Java throws
        expression, tags = sub.sub_string, sub.tags
    return {"classFilterMode": False, "codeSet": sorted({java_string_hash(t) for t in tags}),
            "expressionType": expression_type, "subString": expression, "subVersion": sub_version,
            "tagsSet": sorted(tags), "topic": topic}


def consumer_heartbeat_request(client_id: str,
                               groups: Mapping[str, Mapping[str, tuple[str, str, int]]]) -> RemotingCommand:
    """HEART_BEAT of a push consumer client: per group its subscriptions {topic: (expression, type, version)}."""
    consumers = [{
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "consumeType": "CONSUME_PASSIVELY",
        "groupName": group,
        "messageModel": "CLUSTERING",
        "subscriptionDataSet": [subscription_data(topic, *subs[topic]) for topic in sorted(subs)],
        "unitMode": False,
    } for group, subs in sorted(groups.items())]
    body = bodies.dumps({"clientID": client_id, "consumerDataSet": consumers, "producerDataSet": []})
    return _req(RequestCode.HEART_BEAT, body=body)


def unregister_request(client_id: str, *, producer_group: str | None = None,
                       consumer_group: str | None = None) -> RemotingCommand:
    ext: dict[str, str] = {"clientID": client_id}
    if producer_group is not None:
        ext["producerGroup"] = producer_group
    if consumer_group is not None:
        ext["consumerGroup"] = consumer_group
    return _req(RequestCode.UNREGISTER_CLIENT, ext)


# ----------------------------------------------------------------------------------------------
# producing


def send_request(producer_group: str, msg: Message, queue_id: int, properties: Mapping[str, str],
                 born_ts: int, broker_name: str, sys_flag: int = 0) -> RemotingCommand:
    """SEND_MESSAGE_V2 with ext a..n as ``SendMessageRequestHeaderV2`` (``l`` only on retry sends); the
    sysFlag is ``sys_flag`` (a half's) with the message's own bits (a compressed body's)."""
    return _req(RequestCode.SEND_MESSAGE_V2, {
        "a": producer_group, "b": msg.topic, "c": DEFAULT_TOPIC, "d": DEFAULT_TOPIC_QUEUE_NUMS,
        "e": queue_id, "f": sys_flag | msg.sys_flag, "g": born_ts, "h": msg.flag, "i": encode_properties(properties),
        "j": 0, "k": False, "m": False, "n": broker_name,
    }, bytes(msg.body))


def send_batch_request(producer_group: str, topic: str, queue_id: int, items: list[BatchItem], born_ts: int,
                       broker_name: str) -> RemotingCommand:
    """SEND_BATCH_MESSAGE as the Java 4.9.8 client sends ``send(Collection)``: a V2 header with ``m``
    (batch) true and the MessageBatch's own properties (WAIT only), the items encoded as
    MessageDecoder.encodeMessages."""
    return _req(RequestCode.SEND_BATCH_MESSAGE, {
        "a": producer_group, "b": topic, "c": DEFAULT_TOPIC, "d": DEFAULT_TOPIC_QUEUE_NUMS,
        "e": queue_id, "f": 0, "g": born_ts, "h": 0, "i": encode_properties({PROPERTY_WAIT: "true"}),
        "j": 0, "k": False, "m": True, "n": broker_name,
    }, encode_batch(items))


def parse_send_batch(resp: RemotingCommand, uniq_keys: list[str]) -> SendResult:
    """SEND_BATCH_MESSAGE's answer: ``msgId`` is the items' offset msgIds joined by commas; the result
    names the first item's offsets and every UNIQ_KEY joined by commas (the Java client's msgId)."""
    first = attrs.evolve(resp, ext_fields={**resp.ext_fields, "msgId": (resp.ext("msgId") or "").split(",")[0]})
    result = parse_send(first, ",".join(uniq_keys))
    return attrs.evolve(result, msg_id=resp.ext("msgId"))


def half_properties(properties: Mapping[str, str], producer_group: str) -> dict[str, str]:
    """The Java transactional producer's additions (sendMessageInTransaction): TRAN_MSG, PGROUP; no DELAY."""
    props = {k: v for k, v in properties.items() if k != "DELAY"}
    props[PROPERTY_TRANSACTION_PREPARED] = "true"
    props[PROPERTY_PRODUCER_GROUP] = producer_group
    return props


HALF_SYS_FLAG = TRANSACTION_PREPARED_TYPE


def parse_send(resp: RemotingCommand, uniq_key: str) -> SendResult:
    """SEND_MESSAGE_V2's answer → SendResult (commitlog offset = the last 8 bytes of the offset msgId)."""
    status = SEND_STATUS.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise refusal(resp, "SEND_MESSAGE_V2")
    msg_id = resp.ext("msgId")
    if msg_id is None:
        raise ResponseMalformed("SEND_MESSAGE_V2", "msgId", "missing ext field")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ResponseMalformed("SEND_MESSAGE_V2", "msgId", f"not hex: {msg_id!r}") from None
    if len(raw) not in (16, 28):
        raise ResponseMalformed("SEND_MESSAGE_V2", "msgId", f"{len(raw)} bytes, expected 16 or 28: {msg_id!r}")
    return SendResult(status, msg_id, uniq_key, _ext_int(resp, "SEND_MESSAGE_V2", "queueOffset"),
                      int.from_bytes(raw[-8:], "big"))


def end_transaction_request(producer_group: str, commitlog_offset: int, tran_state_table_offset: int,
                            action: TxnAction, from_check: bool, msg_id: str,
                            transaction_id: str | None) -> RemotingCommand:
    """END_TRANSACTION (``EndTransactionRequestHeader``); ``msgId`` is the half's UNIQ_KEY."""
    ext: dict[str, Any] = {
        "producerGroup": producer_group, "tranStateTableOffset": tran_state_table_offset,
        "commitLogOffset": commitlog_offset, "commitOrRollback": COMMIT_OR_ROLLBACK[action],
        "fromTransactionCheck": from_check, "msgId": msg_id,
    }
    if transaction_id is not None:
        ext["transactionId"] = transaction_id
    return _req(RequestCode.END_TRANSACTION, ext)


def parse_code(resp: RemotingCommand) -> ResponseCode:
    """For operations whose result is the response code (send_back, end_transaction)."""
    return response_code(resp)


def runtime_info_request() -> RemotingCommand:
    return _req(RequestCode.GET_BROKER_RUNTIME_INFO)


def parse_dispatch_behind(resp: RemotingCommand, after_flush: bool = False) -> int | None:
    """``dispatchBehindBytes`` of GET_BROKER_RUNTIME_INFO's KVTable body (``{"table": {...}}``): how far
    the broker's ReputMessageService is behind the CommitLog's end; ``None`` when the broker does not
    support the request or the table has no such entry (not a RocketMQ 4.9 broker). Any other refusal
    is a ``BrokerError``: a 4.9.8 broker answers SYSTEM_ERROR (``NoSuchElementException`` from its TPS
    statistics) for its first second or so.

    ``after_flush`` (5.3.0+ under SYNC_FLUSH, which dispatches only what is flushed): nothing behind
    counts as 1 byte behind while ``remainHowManyDataToFlush`` (MixAll.humanReadableByteCount: "0 B",
    "1.2 KiB", …) says the CommitLog holds bytes not yet flushed."""
    if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        return None
    if resp.code != ResponseCode.SUCCESS:
        raise refusal(resp, "GET_BROKER_RUNTIME_INFO")
    table = _json_body(resp, "GET_BROKER_RUNTIME_INFO").get("table")
    table = table if isinstance(table, dict) else {}
    value = table.get("dispatchBehindBytes")
    try:
        behind = int(value) if value is not None else None
    except (TypeError, ValueError):
        raise ResponseMalformed("GET_BROKER_RUNTIME_INFO", "dispatchBehindBytes",
                                f"not an integer: {value!r}") from None
    pending = table.get("remainHowManyDataToFlush")
    if behind is not None and behind <= 0 and after_flush and isinstance(pending, str) \
            and pending.strip().split(" ")[0] not in ("0", "0.0"):
        return 1  # written, not yet flushed: not yet dispatched either
    return behind


# ----------------------------------------------------------------------------------------------
# consuming


def pull_request(group: str, mq: MessageQueue, offset: int, max_nums: int, subscription: str,
                 expression_type: str = "TAG") -> RemotingCommand:
    """PULL_MESSAGE, not suspended, with the subscription and its expressionType in the request (sysFlag = 4)."""
    return _req(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "queueOffset": offset,
        "maxMsgNums": max_nums, "sysFlag": PULL_FLAG_SUBSCRIPTION, "commitOffset": 0,
        "suspendTimeoutMillis": 0, "subscription": subscription, "subVersion": 0, "expressionType": expression_type,
    })


def pull_registered_request(group: str, mq: MessageQueue, offset: int, max_nums: int, sub_version: int,
                            expression_type: str = "TAG") -> RemotingCommand:
    """PULL_MESSAGE without the subscription flag (sysFlag 0, a push consumer's default
    ``postSubscriptionWhenPull=false``): the broker filters with the group's heartbeated subscription."""
    return _req(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "queueOffset": offset,
        "maxMsgNums": max_nums, "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0,
        "subVersion": sub_version, "expressionType": expression_type,
    })


def check_client_config_request(client_id: str, group: str, topic: str, subscription: str,
                                expression_type: str) -> RemotingCommand:
    """CHECK_CLIENT_CONFIG 46 (what DefaultMQPushConsumer.start asks for a non-TAG subscription):
    the broker compiles the expression; SYSTEM_ERROR without enablePropertyFilter, SUBSCRIPTION_PARSE_FAILED."""
    body = bodies.dumps({
        "clientId": client_id, "group": group,
        "subscriptionData": {
            "classFilterMode": False, "codeSet": [], "expressionType": expression_type, "subString": subscription,
            "subVersion": 0, "tagsSet": [], "topic": topic,
        },
    })
    return _req(RequestCode.CHECK_CLIENT_CONFIG, body=body)


def parse_pull(resp: RemotingCommand) -> PullResult:
    """19 → NO_NEW_MSG, 20 → NO_MATCHED_MSG, 21 → OFFSET_ILLEGAL, 0 → FOUND with the records of the body."""
    status = PULL_STATUS.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise refusal(resp, "PULL_MESSAGE")
    what = "PULL_MESSAGE"
    messages = messages_of(resp.body, what) if status is PullStatus.FOUND else ()
    return PullResult(status, messages, _ext_int(resp, what, "nextBeginOffset"), _ext_int(resp, what, "minOffset"),
                      _ext_int(resp, what, "maxOffset"))


def send_back_request(group: str, commitlog_offset: int, delay_level: int, origin_msg_id: str | None,
                      max_reconsume_times: int | None, origin_topic: str | None = None) -> RemotingCommand:
    """CONSUMER_SEND_MSG_BACK; ``originTopic`` as the Java client sends it, when known (the ``Broker``
    protocol's ``send_back`` does not name the topic: the adapter remembers what it pulled). 4.9.8 reads
    the topic from the stored message and originTopic only in its consume hooks; 5.1.0+ dereferences it
    on the dead-letter path and answers SYSTEM_ERROR (an NPE) when it is absent (docs/fidelity.md R5-3)."""
    ext: dict[str, Any] = {"offset": commitlog_offset, "group": group, "delayLevel": delay_level, "unitMode": False}
    if origin_topic is not None:
        ext["originTopic"] = origin_topic
    if origin_msg_id is not None:
        ext["originMsgId"] = origin_msg_id
    if max_reconsume_times is not None:
        ext["maxReconsumeTimes"] = max_reconsume_times
    return _req(RequestCode.CONSUMER_SEND_MSG_BACK, ext)


def update_offset_request(group: str, mq: MessageQueue, offset: int) -> RemotingCommand:
    return _req(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": mq.topic,
                                                     "queueId": mq.queue_id, "commitOffset": offset})


def query_offset_request(group: str, mq: MessageQueue) -> RemotingCommand:
    return _req(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": mq.topic,
                                                    "queueId": mq.queue_id})


def parse_query_offset(resp: RemotingCommand) -> int:
    """QUERY_CONSUMER_OFFSET → the offset; QUERY_NOT_FOUND (22) → −1."""
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return -1
    expect_success(resp, "QUERY_CONSUMER_OFFSET")
    return _ext_int(resp, "QUERY_CONSUMER_OFFSET", "offset")


def max_offset_request(mq: MessageQueue) -> RemotingCommand:
    """GET_MAX_OFFSET (MQClientAPIImpl.getMaxOffset): the queue's consume-queue max offset."""
    return _req(RequestCode.GET_MAX_OFFSET, {"topic": mq.topic, "queueId": mq.queue_id})


def parse_max_offset(resp: RemotingCommand) -> int:
    """GET_MAX_OFFSET → the offset; any other code raises ``BrokerError``."""
    expect_success(resp, "GET_MAX_OFFSET")
    return _ext_int(resp, "GET_MAX_OFFSET", "offset")


def search_offset_request(mq: MessageQueue, timestamp: int) -> RemotingCommand:
    """SEARCH_OFFSET_BY_TIMESTAMP (MQClientAPIImpl.searchOffset)."""
    return _req(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": mq.topic, "queueId": mq.queue_id,
                                                         "timestamp": timestamp})


def parse_search_offset(resp: RemotingCommand) -> int:
    """SEARCH_OFFSET_BY_TIMESTAMP → the offset; any other code raises ``BrokerError`` (MQBrokerException)."""
    expect_success(resp, "SEARCH_OFFSET_BY_TIMESTAMP")
    return _ext_int(resp, "SEARCH_OFFSET_BY_TIMESTAMP", "offset")


def lock_body(group: str, client_id: str, mqs: Iterable[MessageQueue], broker_name: str,
              only_this_broker: bool = False) -> bytes:
    """(Un)LockBatchRequestBody as 4.9.8's client sends it, or with ``only_this_broker`` as 5.x's (its
    ``onlyThisBroker`` field, false: ``Version.lock_only_this_broker``)."""
    body: dict[str, Any] = {
        "clientId": client_id, "consumerGroup": group,
        "mqSet": [{"brokerName": broker_name, "queueId": mq.queue_id, "topic": mq.topic} for mq in mqs],
    }
    if only_this_broker:
        body["onlyThisBroker"] = False
    return bodies.dumps(body)


def lock_request(group: str, client_id: str, mqs: Iterable[MessageQueue], broker_name: str,
                 only_this_broker: bool = False) -> RemotingCommand:
    return _req(RequestCode.LOCK_BATCH_MQ, body=lock_body(group, client_id, mqs, broker_name, only_this_broker))


def unlock_request(group: str, client_id: str, mqs: Iterable[MessageQueue], broker_name: str,
                   only_this_broker: bool = False) -> RemotingCommand:
    return _req(RequestCode.UNLOCK_BATCH_MQ, body=lock_body(group, client_id, mqs, broker_name, only_this_broker))


def parse_lock(resp: RemotingCommand, asked: Iterable[MessageQueue]) -> frozenset[MessageQueue]:
    """LOCK_BATCH_MQ → the asked queues in ``lockOKMQSet`` (matched by topic and queue id)."""
    expect_success(resp, "LOCK_BATCH_MQ")
    by_key = {(mq.topic, mq.queue_id): mq for mq in asked}
    granted: set[MessageQueue] = set()
    entries = _json_body(resp, "LOCK_BATCH_MQ").get("lockOKMQSet") or []
    if not isinstance(entries, list):
        raise ResponseMalformed("LOCK_BATCH_MQ", "lockOKMQSet", "not a list")
    for entry in entries:
        try:
            key = (str(entry["topic"]), int(entry["queueId"]))
        except (KeyError, TypeError, ValueError):
            raise ResponseMalformed("LOCK_BATCH_MQ", "lockOKMQSet", f"bad entry {entry!r}") from None
        if key not in by_key:
            raise ResponseMalformed("LOCK_BATCH_MQ", "lockOKMQSet", f"granted {key} that was not asked for")
        granted.add(by_key[key])
    return frozenset(granted)


# ----------------------------------------------------------------------------------------------
# requests from the broker


def parse_check(cmd: RemotingCommand) -> CheckRequest:
    """CHECK_TRANSACTION_STATE → CheckRequest (the body's one record; producer group from its PGROUP)."""
    what = "CHECK_TRANSACTION_STATE"
    messages = messages_of(cmd.body, what)
    if len(messages) != 1:
        raise ResponseMalformed(what, "body", f"{len(messages)} records, expected 1")
    message = messages[0]
    group = message.properties.get(PROPERTY_PRODUCER_GROUP)
    if group is None:
        raise ResponseMalformed(what, "body", "the half message has no PGROUP property")
    transaction_id = cmd.ext("transactionId") or cmd.ext("msgId") or message.uniq_key
    return CheckRequest(group, message, transaction_id, _ext_int(cmd, what, "commitLogOffset"),
                        _ext_int(cmd, what, "tranStateTableOffset"))
