"""Messages as producers send them and as consumers see them.

Follows RocketMQ 4.9 ``Message`` / ``MessageExt`` (M/message), ``MessageConst``
(system property names), ``MessageDecoder.messageProperties2String`` /
``string2messageProperties`` (the properties string) and the client's
``Validators.checkMessage`` / ``checkTopic`` (topic and size rules).

Deliberate difference: the RocketMQ client rejects an empty body; the broker
stores one happily. The model is the broker's view, so an empty body is valid.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_TOPIC_BYTES = 127
MAX_PROPERTIES_BYTES = 32767
JAVA_INT_MIN, JAVA_INT_MAX = -(1 << 31), (1 << 31) - 1  # a Java int's range (Integer.MIN_VALUE/MAX_VALUE)
TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")

# MessageConst property names (SPEC §3.1)
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_BUYER_ID = "BUYER_ID"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_TRANSFER_FLAG = "TRANSFER_FLAG"
PROPERTY_CORRECTION_FLAG = "CORRECTION_FLAG"
PROPERTY_MQ2_FLAG = "MQ2_FLAG"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_CLUSTER = "CLUSTER"  # the broker's send path stores its brokerClusterName here
# Also reserved by 4.9.8's MessageConst.STRING_HASH_SET (Message.putUserProperty refuses them).
RESERVED_4_9_8_NAMES = (
    "INSTANCE_ID",
    "CORRELATION_ID",
    "REPLY_TO_CLIENT",
    "TTL",
    "ARRIVE_TIME",
    "PUSH_REPLY_TIME",
    PROPERTY_CLUSTER,
    "MSG_TYPE",
    "INNER_MULTI_QUEUE_OFFSET",
)

SYSTEM_PROPERTY_NAMES: frozenset[str] = frozenset(
    {
        PROPERTY_KEYS,
        PROPERTY_TAGS,
        PROPERTY_WAIT_STORE_MSG_OK,
        PROPERTY_DELAY_TIME_LEVEL,
        PROPERTY_RETRY_TOPIC,
        PROPERTY_REAL_TOPIC,
        PROPERTY_REAL_QUEUE_ID,
        PROPERTY_TRANSACTION_PREPARED,
        PROPERTY_PRODUCER_GROUP,
        PROPERTY_MIN_OFFSET,
        PROPERTY_MAX_OFFSET,
        PROPERTY_BUYER_ID,
        PROPERTY_ORIGIN_MESSAGE_ID,
        PROPERTY_TRANSFER_FLAG,
        PROPERTY_CORRECTION_FLAG,
        PROPERTY_MQ2_FLAG,
        PROPERTY_RECONSUME_TIME,
        PROPERTY_MSG_REGION,
        PROPERTY_TRACE_SWITCH,
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        PROPERTY_MAX_RECONSUME_TIMES,
        PROPERTY_CONSUME_START_TIMESTAMP,
        PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
        PROPERTY_TRANSACTION_CHECK_TIMES,
        PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
        *RESERVED_4_9_8_NAMES,
    }
)

# sysFlag bits (M/sysflag/MessageSysFlag)
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
COMPRESSION_TYPE_MASK = 0x700  # MessageSysFlag.COMPRESSION_TYPE_COMPARATOR: LZ4 1, ZSTD 2, ZLIB 3 (<< 8)
SENDER_SYS_FLAG_BITS = COMPRESSED_FLAG | COMPRESSION_TYPE_MASK  # what a SEND_MESSAGE's sysFlag may say of a body



def schedules_delay(delay_level: int | None) -> bool:
    """Whether a send's delay level schedules it: only a level > 0 does (CommitLog.putMessage and 5.x's
    HookUtils test ``getDelayTimeLevel() > 0``); a level ≤ 0 (none, 0, a client's -1) is stored as sent."""
    return (delay_level or 0) > 0

def transaction_type(sys_flag: int) -> int:
    """The transaction type bits of a sysFlag (NOT, PREPARED, COMMIT or ROLLBACK)."""
    return sys_flag & TRANSACTION_TYPE_MASK


class InvalidMessage(ValueError):
    """A message RocketMQ would refuse; ``field`` names what is wrong."""

    def __init__(self, field: str, value: Any, reason: str) -> None:
        shown = value if not isinstance(value, (bytes, bytearray)) else f"<{len(value)} bytes>"
        super().__init__(f"invalid message {field} {shown!r}: {reason}")
        self.field = field
        self.value = value
        self.reason = reason


def encode_properties(
    properties: Mapping[str, str] | Iterable[tuple[str, str]], *, trailing: bool = False
) -> str:
    """``name\\x01value\\x02…`` with the last separator dropped (empty map → ""); ``trailing``
    keeps it, as 5.2.0+ stores the string (``model/versions.py``). Ordered pairs may repeat a
    name: a batch item's stored string does (``model/sendpath.batch_item_properties``)."""
    pairs = properties.items() if isinstance(properties, Mapping) else properties
    text = PROPERTY_SEPARATOR.join(f"{name}{NAME_VALUE_SEPARATOR}{value}" for name, value in pairs)
    return text + PROPERTY_SEPARATOR if trailing and text else text


def decode_properties(text: str) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: what every RocketMQ reader makes of the string.

    A pair is kept only with a non-empty name and a non-empty value (Java tests
    ``kvSepIndex > index && kvSepIndex < newIndex - 1``): ``A\\x01`` (an empty
    value) and pairs without ``\\x01`` are dropped; the value runs to the next
    ``\\x02`` and may itself hold ``\\x01``; a repeated name keeps its last value.
    """
    result: dict[str, str] = {}
    if not text:
        return result
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            result[name] = value
    return result


def put_user_property(properties: Mapping[str, str], name: str, value: str) -> dict[str, str]:
    """The Java client's ``Message.putUserProperty``: ``properties`` with ``name`` set, or InvalidMessage.

    4.9.8 refuses a reserved name (``MessageConst.STRING_HASH_SET``, RuntimeException) and a name or value
    that ``trim()`` leaves empty (IllegalArgumentException). rmqspec refuses as well what would make a
    message it cannot send: a separator or a lone surrogate (``Message.validate``; fidelity CL3). A
    ``Message`` built with ``properties=`` is what a producer puts on the wire (a Go client's may hold an
    empty value, which the broker drops): only this function has the Java client's blank check.
    """
    if name in SYSTEM_PROPERTY_NAMES:
        raise InvalidMessage("properties", name, "is a system property name reserved by RocketMQ")
    if java_blank(name) or java_blank(value):
        raise InvalidMessage(f"properties[{name}]", value, "a blank name or value (Java trims it to nothing)")
    return {**properties, name: value}


def java_blank(text: str) -> bool:
    """``text.trim().isEmpty()`` in Java: every char is at most U+0020 (U+00A0 and U+3000 are not blank)."""
    return all(c <= " " for c in text)


def java_length(text: str) -> int:
    """``String.length()`` in Java: UTF-16 code units (a character beyond U+FFFF counts 2)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def check_stored_topic(topic: str) -> None:
    """Raise ``InvalidMessage`` unless a store may hold ``topic``: a client's topic (``check_topic``), or
    a retry or DLQ topic, ``%RETRY%`` / ``%DLQ%`` + a group name of any characters — the broker builds
    it from the group without validating it (consumerSendMsgBack, createTopicInSendMessageBackMethod;
    only the Java client's checkGroup restricts group names) — within the record's 127 bytes."""
    if isinstance(topic, str) and topic.startswith(("%RETRY%", "%DLQ%")) \
            and topic not in ("%RETRY%", "%DLQ%") and len(topic.encode("utf-8", "surrogatepass")) <= MAX_TOPIC_BYTES:
        return
    check_topic(topic)


def batch_topic(msgs: Sequence[Message]) -> str:
    """The topic of a batch the Java client would send (MessageBatch.generateFromList,
    DefaultMQProducer.batch); raises ``InvalidMessage`` as it refuses one: no message, two topics, a
    delay level, a retry topic."""
    if not msgs:
        raise InvalidMessage("batch", [], "a batch holds at least one message")
    topic = msgs[0].topic
    for i, msg in enumerate(msgs):
        if msg.topic != topic:
            raise InvalidMessage(f"batch item {i} topic", msg.topic, f"a batch goes to one topic ({topic!r})")
        if msg.delay_level > 0:
            raise InvalidMessage(f"batch item {i} delay level", msg.delay_level,
                                 "TimeDelayLevel is not supported for batching")
    if topic.startswith("%RETRY%"):
        raise InvalidMessage("batch topic", topic, "Retry Group is not supported for batching")
    return topic


def check_topic(topic: str) -> None:
    """Raise ``InvalidMessage`` unless ``topic`` is a legal RocketMQ topic name."""
    if not isinstance(topic, str) or not topic:
        raise InvalidMessage("topic", topic, "must be a non-empty string")
    if len(topic.encode("utf-8")) > MAX_TOPIC_BYTES:
        raise InvalidMessage("topic", topic, f"longer than {MAX_TOPIC_BYTES} bytes")
    if not TOPIC_PATTERN.match(topic):
        raise InvalidMessage("topic", topic, "may contain only characters [%|a-zA-Z0-9_-]")


def check_uniq_key(uniq_key: Any) -> None:
    """Raise ``InvalidMessage`` unless ``uniq_key`` can travel as the UNIQ_KEY property.

    A UNIQ_KEY is an opaque string: 4.9.8's broker stores whatever the client
    sent (SendMessageProcessor, CommitLog, IndexService and the transaction
    services read it as a string and never parse it), and clients differ —
    the Java client's ``MessageClientIDSetter`` writes 32 upper-case hex chars
    from an IPv4 host and 56 from an IPv6 one, the Go client an upper-case
    prefix with a lower-case suffix, 5.x clients 34 chars. So only what the
    properties string cannot carry is refused: a value holding the separators
    ``\\x01``/``\\x02`` (docs/fidelity.md B14, S9). An empty key is no key
    (``Message`` turns ``""`` into None; the broker drops an empty value, S1).
    """
    if not isinstance(uniq_key, str):
        raise InvalidMessage("uniq_key", uniq_key, "must be a string")
    if NAME_VALUE_SEPARATOR in uniq_key or PROPERTY_SEPARATOR in uniq_key:
        raise InvalidMessage("uniq_key", uniq_key, "contains \\x01/\\x02, the property separators")


def validate_topic(topic: str) -> str | None:
    """TopicValidator.validateTopic on the broker's send path: None, or its remark (SYSTEM_ERROR).

    The store itself takes any topic of at most 127 chars (``limits.check_message``).
    """
    if not topic.strip():
        return "The specified topic is blank."
    if any(ch not in _TOPIC_CHARS for ch in topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if java_length(topic) > MAX_TOPIC_BYTES:
        return "The specified topic is longer than topic max length."
    return None


_TOPIC_CHARS = frozenset("%|-_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _frozen_mapping(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _no_empty_key(value: Any) -> Any:
    """An empty UNIQ_KEY is no key: the broker's string2messageProperties drops an empty value."""
    return None if value == "" else value


def _tuple_of_str(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(k for k in value.split(" ") if k)
    return tuple(value)


@attrs.frozen
class Message:
    """What a producer sends. ``properties`` are user properties only.

    ``uniq_key`` is the producer-assigned UNIQ_KEY, an opaque string in any
    format a client writes (``check_uniq_key``; ``""`` becomes None); the
    reference producer always sets it, a broker assigns one when absent.

    ``wait`` is the WAIT property as the producer sent it: the Java client's
    ``Message`` constructor always sets ``"true"`` (the default), the Go client
    v2 never sends one (None). 4.9.8's send path keeps WAIT out of a plain
    record, but a delayed copy or a half re-serializes the map it decoded, so
    what the client sent is what those records carry (``model/sendpath.py``;
    docs/fidelity.md B15).

    ``delay_level``: a level > 0 schedules the message (clamped to the broker's max); 0 sends no DELAY; a
    negative level is stored as ``DELAY=<level>`` and never scheduled (CommitLog and 5.x's HookUtils act
    on ``getDelayTimeLevel() > 0`` only; 5.x itself writes ``DELAY=-1`` on a dead-lettered ``%RETRY%`` send).
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: tuple[str, ...] = attrs.field(default=(), converter=_tuple_of_str)
    properties: Mapping[str, str] = attrs.field(
        factory=dict, converter=_frozen_mapping, eq=False, hash=False
    )
    delay_level: int = 0
    flag: int = 0
    uniq_key: str | None = attrs.field(default=None, converter=_no_empty_key)
    wait: str | None = attrs.field(default="true", converter=_no_empty_key)
    # the request's sysFlag bits a sender sets: COMPRESSED and the compression type (model/compression.py)
    sys_flag: int = 0

    # attrs compares MappingProxyType by identity; compare the contents instead.
    _props_key: tuple[tuple[str, str], ...] = attrs.field(
        init=False, repr=False, eq=True, hash=True
    )

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_props_key", tuple(sorted(self.properties.items())))
        self.validate()

    def validate(self) -> None:
        """Raise ``InvalidMessage`` for what RocketMQ refuses."""
        check_topic(self.topic)
        if not isinstance(self.body, (bytes, bytearray)):
            raise InvalidMessage("body", self.body, "must be bytes")
        if len(self.body) > MAX_BODY_BYTES:
            raise InvalidMessage("body", self.body, f"larger than {MAX_BODY_BYTES} bytes")
        if self.sys_flag & ~SENDER_SYS_FLAG_BITS:
            raise InvalidMessage("sys_flag", self.sys_flag, "only COMPRESSED and its type bits are a sender's")
        for name in self.properties:
            if name in SYSTEM_PROPERTY_NAMES:
                raise InvalidMessage(
                    "properties", name, "is a system property name reserved by RocketMQ"
                )
            if not name or NAME_VALUE_SEPARATOR in name or PROPERTY_SEPARATOR in name:
                raise InvalidMessage("properties", name, "empty or contains \\x01/\\x02")
        for name, value in self.properties.items():
            if NAME_VALUE_SEPARATOR in value or PROPERTY_SEPARATOR in value:
                raise InvalidMessage(f"properties[{name}]", value, "contains \\x01/\\x02")
        if self.tags is not None and (
            NAME_VALUE_SEPARATOR in self.tags or PROPERTY_SEPARATOR in self.tags
        ):
            raise InvalidMessage("tags", self.tags, "contains \\x01/\\x02")
        for key in self.keys:
            if " " in key or NAME_VALUE_SEPARATOR in key or PROPERTY_SEPARATOR in key:
                raise InvalidMessage("keys", key, "a key may not contain spaces or \\x01/\\x02")
        if self.uniq_key is not None:
            check_uniq_key(self.uniq_key)
        if self.wait is not None and (NAME_VALUE_SEPARATOR in self.wait or PROPERTY_SEPARATOR in self.wait):
            raise InvalidMessage("wait", self.wait, "contains \\x01/\\x02")
        text = encode_properties(self.wire_properties())
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:  # Java's getBytes(UTF-8) would store '?' for it (fidelity B2)
            raise InvalidMessage("properties", text[exc.start:exc.end], "a lone surrogate is not UTF-8") from None
        if size > MAX_PROPERTIES_BYTES:
            raise InvalidMessage(
                "properties", f"<{size} bytes encoded>", f"longer than {MAX_PROPERTIES_BYTES}"
            )

    @property
    def waits_for_flush(self) -> bool:
        """MessageExt.isWaitStoreMsgOK of the map the broker puts: no WAIT is true, else
        ``Boolean.parseBoolean`` (``"true"`` in any case). Under SYNC_FLUSH a put that does not wait is
        acknowledged before the flush (``model/crash.py``)."""
        return self.wait is None or self.wait.lower() == "true"

    def wire_properties(self) -> dict[str, str]:
        """The full property map as the producer puts it on the wire.

        Order: user properties, then TAGS, KEYS, WAIT (``wait``: ``"true"`` as the
        Java client's ``Message`` constructor sets it, none from the Go client),
        DELAY, UNIQ_KEY (when set). What a broker stores from it is
        ``model.sendpath``'s business.
        """
        props = dict(self.properties)
        if self.tags is not None:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            props[PROPERTY_KEYS] = " ".join(self.keys)
        if self.wait is not None:
            props[PROPERTY_WAIT_STORE_MSG_OK] = self.wait
        if self.delay_level != 0:  # a negative level is stored as sent, never scheduled (only > 0 is)
            props[PROPERTY_DELAY_TIME_LEVEL] = str(self.delay_level)
        if self.uniq_key is not None:
            props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self.uniq_key
        return props


@attrs.frozen(order=True)
class MessageQueue:
    """One queue of one topic on the (single) broker."""

    topic: str
    queue_id: int
    broker_name: str = "broker-a"


@attrs.frozen
class StoredMessage:
    """A stored copy as a consumer sees it (RocketMQ ``MessageExt``).

    ``properties`` is the full stored map, system properties included.
    """

    msg_id: str
    uniq_key: str | None
    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    body: bytes
    tags: str | None
    keys: tuple[str, ...]
    properties: Mapping[str, str] = attrs.field(converter=_frozen_mapping, eq=False, hash=False)
    reconsume_times: int
    born_ts: int
    store_ts: int
    sys_flag: int
    prepared_txn_offset: int
    flag: int = 0
    _props_key: tuple[tuple[str, str], ...] = attrs.field(
        init=False, repr=False, eq=True, hash=True
    )

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_props_key", tuple(sorted(self.properties.items())))

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.queue_id)

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    @property
    def delay_level(self) -> int:
        value = self.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        return int(value) if value else 0

    @property
    def origin_message_id(self) -> str | None:
        return self.properties.get(PROPERTY_ORIGIN_MESSAGE_ID)

    @property
    def retry_topic(self) -> str | None:
        return self.properties.get(PROPERTY_RETRY_TOPIC)

    @property
    def transaction_type(self) -> int:
        return transaction_type(self.sys_flag)


def record_size(
    body_len: int,
    topic: str,
    properties: Mapping[str, str] | Iterable[tuple[str, str]],
    sys_flag: int,
    *,
    trailing: bool = False,
) -> int:
    """The CommitLog record length RocketMQ computes (``CommitLog.calMsgLength``); ``trailing``:
    the properties string keeps its last separator (5.2.0+)."""
    born_host = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    store_host = 20 if sys_flag & STOREHOST_V6_FLAG else 8
    topic_len = len(topic.encode("utf-8"))
    props_len = len(encode_properties(properties, trailing=trailing).encode("utf-8"))
    return (
        4  # totalSize
        + 4  # magic
        + 4  # bodyCRC
        + 4  # queueId
        + 4  # flag
        + 8  # queueOffset
        + 8  # physicalOffset
        + 4  # sysFlag
        + 8  # bornTimestamp
        + born_host
        + 8  # storeTimestamp
        + store_host
        + 4  # reconsumeTimes
        + 8  # preparedTransactionOffset
        + 4
        + body_len
        + 1
        + topic_len
        + 2
        + props_len
    )
