"""The request codes rmqspec speaks, with their ext fields and bodies, as one table (data).

Theory of operation
-------------------
``REQUESTS`` maps a ``RequestCode`` to a ``RequestSpec``: who serves it
(``namesrv``, ``broker``, or ``client`` for the broker's requests on a
client connection), whether RocketMQ sends it oneway, the ext fields of the
request (exact wire names, as RocketMQ 4.9.8's ``*RequestHeader`` classes
and the captures in ``../shared/rocketmq-notes/results/wire_full.jsonl.gz`` spell
them; ``required`` as the header's ``@CFNotNull``), the request body, and the
ext fields of a successful response. The client, the server, the fuzzer and
the README's table are driven by this table.

Sources: ``common/protocol/RequestCode.java``, ``ResponseCode.java``,
``common/protocol/header/**``; facts verified on a running 4.9.8 broker in
``../shared/rocketmq-notes/README.md`` ("Remoting protocol facts").
"""

from __future__ import annotations

import enum

import attrs


class RequestCode(enum.IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    CHECK_CLIENT_CONFIG = 46
    REGISTER_BROKER = 103
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    # 5.x broker-side assignment (remoting/handlers_assign.py)
    QUERY_ASSIGNMENT = 400
    SET_MESSAGE_REQUEST_MODE = 401
    # 5.x pop (model/pop.py; remoting/pop_ops.py, handlers_pop.py)
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    BATCH_ACK_MESSAGE = 200151


# SendMessageRequestHeaderV2's one-letter names (SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2).
SEND_V2_NAMES = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
    "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName",
}
SEND_V1_NAMES = {v: k for k, v in SEND_V2_NAMES.items()}

# PullMessageRequestHeader.sysFlag bits (PullSysFlag).
PULL_FLAG_COMMIT_OFFSET = 1
PULL_FLAG_SUSPEND = 2
PULL_FLAG_SUBSCRIPTION = 4
PULL_FLAG_CLASS_FILTER = 8
PULL_FLAG_LITE_PULL = 16

# EndTransactionRequestHeader.commitOrRollback (MessageSysFlag.TRANSACTION_*_TYPE).
TRANSACTION_NOT_TYPE = 0
TRANSACTION_COMMIT_TYPE = 8
TRANSACTION_ROLLBACK_TYPE = 12


class Body(enum.Enum):
    NONE = "none"
    JSON = "json"  # a fastjson object (see ``bodies.py``)
    MESSAGE = "message"  # the message body bytes
    BATCH = "batch"  # MessageDecoder.encodeMessages of the batch
    MESSAGES = "messages"  # stored messages back to back in commitlog format
    TEXT = "text"  # java.util.Properties text


@attrs.frozen
class Field:
    name: str
    required: bool = True


def _fields(*names: str) -> tuple[Field, ...]:
    """``"name"`` is required, ``"name?"`` optional."""
    return tuple(Field(n.rstrip("?"), not n.endswith("?")) for n in names)


@attrs.frozen
class RequestSpec:
    code: RequestCode
    server: str  # namesrv | broker | client
    ext: tuple[Field, ...] = ()
    body: Body = Body.NONE
    response_ext: tuple[str, ...] = ()
    response_body: Body = Body.NONE
    oneway: bool = False  # how the Java 4.9.8 client (or broker) sends it

    @property
    def name(self) -> str:
        return self.code.name

    def missing(self, ext: dict[str, str] | object) -> list[str]:
        """Required ext fields absent from ``ext``."""
        present = ext if isinstance(ext, dict) else dict(ext)  # type: ignore[call-overload]
        return [f.name for f in self.ext if f.required and f.name not in present]


_SEND_V2 = _fields("a", "b", "c", "d", "e", "f", "g", "h", "i?", "j?", "k?", "l?", "m?", "n?")
_SEND_RESPONSE = ("msgId", "queueId", "queueOffset", "transactionId?", "MSG_REGION", "TRACE_ON")

REQUESTS: dict[RequestCode, RequestSpec] = {s.code: s for s in (
    RequestSpec(RequestCode.GET_ROUTEINFO_BY_TOPIC, "namesrv", _fields("topic", "acceptStandardJsonOnly?"),
                response_body=Body.JSON),
    RequestSpec(RequestCode.GET_BROKER_CLUSTER_INFO, "namesrv", response_body=Body.JSON),
    RequestSpec(RequestCode.HEART_BEAT, "broker", body=Body.JSON),
    RequestSpec(RequestCode.CHECK_CLIENT_CONFIG, "broker", body=Body.JSON),
    RequestSpec(RequestCode.SEND_MESSAGE, "broker",
                _fields("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
                        "bornTimestamp", "flag", "properties?", "reconsumeTimes?", "unitMode?", "batch?",
                        "maxReconsumeTimes?", "brokerName?"),
                body=Body.MESSAGE, response_ext=_SEND_RESPONSE),
    RequestSpec(RequestCode.SEND_MESSAGE_V2, "broker", _SEND_V2, body=Body.MESSAGE, response_ext=_SEND_RESPONSE),
    RequestSpec(RequestCode.SEND_BATCH_MESSAGE, "broker", _SEND_V2, body=Body.BATCH, response_ext=_SEND_RESPONSE),
    RequestSpec(RequestCode.PULL_MESSAGE, "broker",
                _fields("consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
                        "commitOffset", "suspendTimeoutMillis", "subscription?", "subVersion", "expressionType?"),
                response_ext=("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"),
                response_body=Body.MESSAGES),
    RequestSpec(RequestCode.QUERY_CONSUMER_OFFSET, "broker", _fields("consumerGroup", "topic", "queueId"),
                response_ext=("offset",)),
    RequestSpec(RequestCode.UPDATE_CONSUMER_OFFSET, "broker",
                _fields("consumerGroup", "topic", "queueId", "commitOffset")),
    RequestSpec(RequestCode.CONSUMER_SEND_MSG_BACK, "broker",
                _fields("offset", "group", "delayLevel", "originMsgId?", "originTopic?", "unitMode?",
                        "maxReconsumeTimes?")),
    RequestSpec(RequestCode.END_TRANSACTION, "broker",
                _fields("producerGroup", "tranStateTableOffset", "commitLogOffset", "commitOrRollback",
                        "fromTransactionCheck?", "msgId", "transactionId?"), oneway=True),
    RequestSpec(RequestCode.CHECK_TRANSACTION_STATE, "client",
                _fields("tranStateTableOffset", "commitLogOffset", "msgId?", "transactionId?", "offsetMsgId?"),
                body=Body.MESSAGES, oneway=True),
    RequestSpec(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, "client", _fields("consumerGroup"), oneway=True),
    RequestSpec(RequestCode.LOCK_BATCH_MQ, "broker", body=Body.JSON, response_body=Body.JSON),
    RequestSpec(RequestCode.UNLOCK_BATCH_MQ, "broker", body=Body.JSON),
    RequestSpec(RequestCode.UPDATE_AND_CREATE_TOPIC, "broker",
                _fields("topic", "defaultTopic", "readQueueNums", "writeQueueNums", "perm", "topicFilterType",
                        "topicSysFlag?", "order")),
    RequestSpec(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, "broker", body=Body.JSON),
    RequestSpec(RequestCode.GET_CONSUMER_LIST_BY_GROUP, "broker", _fields("consumerGroup"),
                response_body=Body.JSON),
    RequestSpec(RequestCode.UNREGISTER_CLIENT, "broker", _fields("clientID", "producerGroup?", "consumerGroup?")),
    RequestSpec(RequestCode.VIEW_MESSAGE_BY_ID, "broker", _fields("offset"), response_body=Body.MESSAGES),
    RequestSpec(RequestCode.GET_MAX_OFFSET, "broker", _fields("topic", "queueId"), response_ext=("offset",)),
    RequestSpec(RequestCode.GET_MIN_OFFSET, "broker", _fields("topic", "queueId"), response_ext=("offset",)),
    RequestSpec(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, "broker", _fields("topic", "queueId", "timestamp"),
                response_ext=("offset",)),
    RequestSpec(RequestCode.GET_ALL_TOPIC_CONFIG, "broker", response_body=Body.JSON),
    RequestSpec(RequestCode.GET_BROKER_CONFIG, "broker", response_body=Body.TEXT),
    RequestSpec(RequestCode.GET_BROKER_RUNTIME_INFO, "broker", response_body=Body.JSON),
    RequestSpec(RequestCode.QUERY_CONSUME_QUEUE, "broker",
                _fields("topic", "queueId", "index", "count", "consumerGroup?"), response_body=Body.JSON),
    # 5.x QueryAssignmentProcessor: JSON bodies, no ext fields
    RequestSpec(RequestCode.QUERY_ASSIGNMENT, "broker", body=Body.JSON, response_body=Body.JSON),
    RequestSpec(RequestCode.SET_MESSAGE_REQUEST_MODE, "broker", body=Body.JSON),
    # 5.x (5.3.3's PopMessageRequestHeader, AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader; BatchAck)
    RequestSpec(RequestCode.POP_MESSAGE, "broker",
                _fields("consumerGroup", "topic", "queueId", "maxMsgNums", "invisibleTime", "pollTime", "bornTime",
                        "initMode", "expType?", "exp?", "order?", "attemptId?"),
                response_ext=("popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo",
                              "msgOffsetInfo", "orderCountInfo?"), response_body=Body.MESSAGES),
    RequestSpec(RequestCode.ACK_MESSAGE, "broker", _fields("consumerGroup", "topic", "queueId", "extraInfo", "offset")),
    RequestSpec(RequestCode.BATCH_ACK_MESSAGE, "broker", body=Body.JSON),
    RequestSpec(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, "broker",
                _fields("consumerGroup", "topic", "queueId", "extraInfo", "offset", "invisibleTime", "suspend?"),
                response_ext=("popTime", "invisibleTime", "reviveQid")),
)}


def spec_of(code: int) -> RequestSpec | None:
    try:
        return REQUESTS.get(RequestCode(code))
    except ValueError:
        return None


def unsupported_remark(code: int) -> str:
    """The remark of RocketMQ's REQUEST_CODE_NOT_SUPPORTED (3) answer (NettyRemotingAbstract)."""
    return f" request type {code} not supported"
