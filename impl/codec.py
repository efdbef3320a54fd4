"""CommitLog record codec: RocketMQ 4.9's on-disk message layout, byte for byte.

Theory of operation
-------------------
A record is big-endian (SPEC §5, RocketMQ ``CommitLog.DefaultAppendMessageCallback``
and ``CommitLog.checkMessageAndReturnSize``)::

    totalSize i32 | magic i32 (0xDAA320A7) | bodyCRC i32 | queueId i32 | flag i32
    | queueOffset i64 | physicalOffset i64 | sysFlag i32 | bornTs i64
    | bornHost (4+4, or 16+4 with sysFlag 0x10) | storeTs i64
    | storeHost (4+4, or 16+4 with sysFlag 0x20) | reconsumeTimes i32
    | preparedTxnOffset i64 | bodyLen i32 + body | topicLen u8 + topic
    | propsLen i16 + props (UTF-8)

A file ends with a blank record ``[remaining i32][0xCBD43194 i32]`` when the
next record plus 8 bytes does not fit.

Encoding is split in two steps because the CommitLog must know a record's
size before it knows where the record goes: ``prepare`` validates a
``MessageRecord`` and encodes its variable parts (it raises ``PutError`` with
RocketMQ's response code for what RocketMQ refuses), ``Prepared.pack`` writes
the bytes once the queue offset and physical offset are known.

``decode_at`` reads one record from a buffer and classifies what it finds:
a ``DecodedRecord``, a ``BLANK`` end-of-file marker, ``END`` (zero bytes: no
more data), or raises ``CorruptRecord`` with a finding code (``BAD_MAGIC``,
``BAD_CRC``, ``BAD_SIZE``, ``TRUNCATED``, ``BAD_PHYSICAL_OFFSET``) and the byte
offset. Validation matches RocketMQ's (magic, CRC, totalSize = calMsgLength)
plus the physical-offset check RocketMQ leaves implicit, plus a torn-write
check RocketMQ lacks: a record whose properties end in a zero byte, or whose
topic holds one, is ``TRUNCATED``. The CRC covers only the body, so a record
whose properties were cut short by a power loss (the unwritten tail reads as
zeros) passes RocketMQ's checks; topics never hold NUL, and ``prepare``
refuses properties that end in NUL (RocketMQ stores them), so a zero there
means the tail was never written.

Deviation: the IPv6 bits of sysFlag (0x10, 0x20) are derived from the host
addresses when encoding, so they can never disagree with the host lengths.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import struct
import zlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

import attrs

from rmqspec.model.config import DEFAULT_DELAY_LEVELS, parse_delay_levels
from rmqspec.model.ids import offset_msg_id
from rmqspec.model.javahash import java_string_hash
from rmqspec.model.limits import check_encode, check_message
from rmqspec.model.message import (
    BORNHOST_V6_FLAG,
    JAVA_INT_MAX,
    JAVA_INT_MIN,
    NAME_VALUE_SEPARATOR,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    STOREHOST_V6_FLAG,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    StoredMessage,
    decode_properties,
    encode_properties,
    record_size,
    transaction_type,
)
from rmqspec.model.results import BrokerError, ResponseCode

MESSAGE_MAGIC: Final = 0xDAA320A7 - (1 << 32)  # as a signed i32: -626843481
BLANK_MAGIC: Final = 0xCBD43194 - (1 << 32)  # as a signed i32: -875286124
END_FILE_MIN_BLANK_LENGTH: Final = 8
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
DEFAULT_DELAY_LEVELS_MS: Final = parse_delay_levels(DEFAULT_DELAY_LEVELS)

# Field positions shared with verify/recovery.
SYSFLAG_POSITION: Final = 36
BORN_TS_POSITION: Final = 40
BORN_HOST_POSITION: Final = 48

_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">iiiiiqqiq")  # totalSize … bornTs: 48 bytes
_BLANK = struct.Struct(">ii")
_I64 = struct.Struct(">q")
_TAIL = struct.Struct(">iqi")  # reconsumeTimes, preparedTxnOffset, bodyLen
_I16 = struct.Struct(">h")
# totalSize … bodyLen with IPv4 born and store hosts: 88 bytes
_HEAD4 = struct.Struct(">iiiiiqqiq4siq4siiqi")
_MIN_RECORD = record_size(0, "", {}, 0) - 0  # smallest possible record (empty body/topic/props)

INT32_MIN, INT32_MAX = JAVA_INT_MIN, JAVA_INT_MAX
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


# -- errors -------------------------------------------------------------------------------


class PutError(BrokerError):
    """A record the store refuses, with RocketMQ's response code and the offending field."""

    def __init__(self, code: ResponseCode, field: str, value: object, reason: str) -> None:
        shown = f"<{len(value)} bytes>" if isinstance(value, (bytes, bytearray)) else repr(value)
        super().__init__(code, f"{field} {shown}: {reason}")
        self.field = field
        self.value = value
        self.reason = reason


class CorruptRecord(Exception):
    """Bytes at ``offset`` are not a valid record; ``code`` is a verify finding code."""

    def __init__(self, code: str, offset: int, reason: str) -> None:
        super().__init__(f"{code} at commitlog offset {offset}: {reason}")
        self.code = code
        self.offset = offset
        self.reason = reason
        # For BAD_CRC / BAD_PHYSICAL_OFFSET: the record as read without that check.
        self.record: DecodedRecord | None = None


# -- value types ------------------------------------------------------------------------------

Host = tuple[str, int]


def _props(value: Mapping[str, str]) -> Mapping[str, str]:
    return value if isinstance(value, MappingProxyType) else MappingProxyType(dict(value))


@attrs.frozen
class MessageRecord:
    """What a caller asks the store to append. The store adds queue/physical offsets.

    ``properties`` is the full stored map (system properties included: TAGS,
    KEYS, UNIQ_KEY, DELAY, REAL_TOPIC, …), in the order it is written. ``pairs``, when
    given, is the string to write as ordered pairs that may repeat a name (a batch item:
    ``model/sendpath.batch_item_properties``); ``properties`` is then what readers make of it.
    """

    topic: str
    queue_id: int
    body: bytes
    properties: Mapping[str, str] = attrs.field(factory=dict, converter=_props)
    sys_flag: int = 0
    born_ts: int = 0
    store_ts: int = 0
    born_host: Host = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_txn_offset: int = 0
    flag: int = 0
    pairs: tuple[tuple[str, str], ...] | None = None
    # isWaitStoreMsgOK of the map (not written): under SYNC_FLUSH whether the put waits for the flush
    wait: bool = True

    @property
    def written(self) -> Mapping[str, str] | tuple[tuple[str, str], ...]:
        """What the properties string is written from."""
        return self.pairs if self.pairs is not None else self.properties


@attrs.frozen
class DecodedRecord:
    """One record as read from a CommitLog (``commitlog_offset`` is where it was read)."""

    commitlog_offset: int
    size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_ts: int
    born_host: Host
    store_ts: int
    store_host: Host
    reconsume_times: int
    prepared_txn_offset: int
    body: bytes
    topic: str
    properties: Mapping[str, str] = attrs.field(converter=_props)
    properties_text: str = ""

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k in self.properties.get(PROPERTY_KEYS, "").split(" ") if k)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def msg_id(self) -> str:
        return offset_msg_id(self.store_host[0], self.store_host[1], self.commitlog_offset)

    @property
    def end_offset(self) -> int:
        return self.commitlog_offset + self.size

    def has_queue_entry(self) -> bool:
        """PREPARED and ROLLBACK records get no consume-queue unit (RocketMQ dispatch)."""
        return not is_txn_hidden(self.sys_flag)

    def tags_code(self, delay_levels_ms: Sequence[int] = DEFAULT_DELAY_LEVELS_MS) -> int:
        return tags_code(self.topic, self.properties, self.store_ts, delay_levels_ms)


@attrs.frozen
class Blank:
    """The end-of-file marker: ``remaining`` bytes (to the end of the file) are unused."""

    commitlog_offset: int
    remaining: int


@attrs.frozen
class End:
    """Zero bytes where a record would start: no more data in this file."""

    commitlog_offset: int


def is_txn_hidden(sys_flag: int) -> bool:
    return transaction_type(sys_flag) in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


def to_stored_message(record: DecodedRecord, host: str | None = None, port: int | None = None) -> StoredMessage:
    """The consumer's view of a record; msgId uses ``host:port`` (default: its store host)."""
    host = record.store_host[0] if host is None else host
    port = record.store_host[1] if port is None else port
    return StoredMessage(
        msg_id=offset_msg_id(host, port, record.commitlog_offset),
        uniq_key=record.uniq_key,
        topic=record.topic,
        queue_id=record.queue_id,
        queue_offset=record.queue_offset,
        commitlog_offset=record.commitlog_offset,
        body=record.body,
        tags=record.tags,
        keys=record.keys,
        properties=record.properties,
        reconsume_times=record.reconsume_times,
        born_ts=record.born_ts,
        store_ts=record.store_ts,
        sys_flag=record.sys_flag,
        prepared_txn_offset=record.prepared_txn_offset,
        flag=record.flag,
    )


# -- tagsCode ------------------------------------------------------------------------------

_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def parse_delay_level(text: str | None) -> int | None:
    """``Integer.parseInt`` of a DELAY property; None when absent or not an int."""
    if text is None or not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if INT32_MIN <= value <= INT32_MAX else None


_tags_hash = functools.lru_cache(maxsize=4096)(java_string_hash)


def tags_code(
    topic: str,
    properties: Mapping[str, str],
    store_ts: int,
    delay_levels_ms: Sequence[int] = DEFAULT_DELAY_LEVELS_MS,
) -> int:
    """The consume-queue tagsCode RocketMQ computes (``checkMessageAndReturnSize``).

    Java ``String.hashCode`` of a non-empty TAGS, else 0; for ``SCHEDULE_TOPIC_XXXX``
    with DELAY level > 0 the deliver timestamp ``store_ts + delay(min(level, max))``.
    """
    code = 0
    tags = properties.get(PROPERTY_TAGS)
    if tags:
        code = _tags_hash(tags)
    if topic == SCHEDULE_TOPIC:
        level = parse_delay_level(properties.get(PROPERTY_DELAY_TIME_LEVEL))
        if level is not None and level > 0:
            level = min(level, len(delay_levels_ms))
            code = store_ts + delay_levels_ms[level - 1]
    return code


# -- hosts -------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def encode_host(host: str, port: int) -> bytes:
    """IPv4 → 4 bytes, IPv6 → 16 bytes, then the port as i32."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError as exc:
        raise PutError(ResponseCode.MESSAGE_ILLEGAL, "host", host, "not an IP address") from exc
    if not 0 <= port <= INT32_MAX:
        raise PutError(ResponseCode.MESSAGE_ILLEGAL, "port", port, "out of range")
    return ip.packed + _I32.pack(port)


@functools.lru_cache(maxsize=1024)
def _ip_text(raw: bytes) -> str:
    return str(ipaddress.IPv6Address(raw) if len(raw) == 16 else ipaddress.IPv4Address(raw))


def _decode_host(buf: bytes | memoryview, pos: int, v6: bool) -> Host:
    n = 16 if v6 else 4
    return _ip_text(bytes(buf[pos : pos + n])), _I32.unpack_from(buf, pos + n)[0]


# -- encode ------------------------------------------------------------------------------------


@attrs.frozen
class Prepared:
    """A validated record with its variable parts encoded; ``pack`` finishes it."""

    record: MessageRecord
    size: int
    sys_flag: int
    born_host: bytes
    store_host: bytes
    topic: bytes
    props: bytes
    body_crc: int

    def pack(self, queue_offset: int, physical_offset: int) -> bytes:
        r = self.record
        return b"".join(
            (
                _HEAD.pack(
                    self.size,
                    MESSAGE_MAGIC,
                    self.body_crc,
                    r.queue_id,
                    r.flag,
                    queue_offset,
                    physical_offset,
                    self.sys_flag,
                    r.born_ts,
                ),
                self.born_host,
                _I64.pack(r.store_ts),
                self.store_host,
                _TAIL.pack(r.reconsume_times, r.prepared_txn_offset, len(r.body)),
                r.body,
                bytes((len(self.topic),)),
                self.topic,
                _I16.pack(len(self.props)),
                self.props,
            )
        )


def _check_int(field: str, value: object, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise PutError(ResponseCode.MESSAGE_ILLEGAL, field, value, f"must be an int in [{lo}, {hi}]")


def prepare(
    record: MessageRecord,
    store_host: Host,
    delay_levels_ms: Sequence[int] = DEFAULT_DELAY_LEVELS_MS,
    file_size: int = INT32_MAX,
    *,
    trailing: bool = False,
) -> Prepared:
    """Validate ``record`` as RocketMQ's store does and encode its variable parts.

    Raises ``PutError`` with ``model.limits``' answer (RocketMQ's checkMessage
    then encode: MESSAGE_ILLEGAL for a topic over 127 chars or properties over
    32767 chars or a body over 4 MiB, PROPERTIES_SIZE_EXCEEDED for properties
    over 32767 UTF-8 bytes) or MESSAGE_ILLEGAL for a malformed field. The topic
    is not checked against ``[%|a-zA-Z0-9_-]``: that is the broker's send path
    (TopicValidator), the store takes any topic. ``trailing``: the properties string keeps
    its last separator, as 5.2.0+ writes it.
    """
    if not isinstance(record.topic, str) or not record.topic:
        raise PutError(ResponseCode.MESSAGE_ILLEGAL, "topic", record.topic, "must be a non-empty string")
    if not isinstance(record.body, (bytes, bytearray)):
        raise PutError(ResponseCode.MESSAGE_ILLEGAL, "body", record.body, "must be bytes")
    _check_int("queue_id", record.queue_id, 0, INT32_MAX)
    _check_int("flag", record.flag, INT32_MIN, INT32_MAX)
    _check_int("sys_flag", record.sys_flag, INT32_MIN, INT32_MAX)
    _check_int("reconsume_times", record.reconsume_times, INT32_MIN, INT32_MAX)
    for name in ("born_ts", "store_ts", "prepared_txn_offset"):
        _check_int(name, getattr(record, name), INT64_MIN, INT64_MAX)
    for name, value in (record.pairs if record.pairs is not None else record.properties.items()):
        if not name or NAME_VALUE_SEPARATOR in name or PROPERTY_SEPARATOR in name:
            raise PutError(ResponseCode.MESSAGE_ILLEGAL, "property name", name, "empty or contains \\x01/\\x02")
        if NAME_VALUE_SEPARATOR in value or PROPERTY_SEPARATOR in value:
            raise PutError(ResponseCode.MESSAGE_ILLEGAL, f"property {name}", value, "contains \\x01/\\x02")
    text = encode_properties(record.written, trailing=trailing)
    refusal = check_message(record.topic, text)
    if refusal is not None:
        raise PutError(refusal[0], refusal[1], _shown(record, refusal[1]), refusal[2])
    props = text.encode("utf-8")
    if props.endswith(b"\0"):
        raise PutError(
            ResponseCode.MESSAGE_ILLEGAL,
            "properties",
            text[-40:],
            "end in a NUL character: the record would end in a zero byte, which recovery reads as a torn write",
        )
    if record.topic == SCHEDULE_TOPIC:
        delay = record.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        if delay is not None and parse_delay_level(delay) is None:
            # RocketMQ's reput would fail on it (Integer.parseInt throws) and stop recovery.
            raise PutError(ResponseCode.MESSAGE_ILLEGAL, "DELAY", delay, "not an integer")
    born = encode_host(*record.born_host)
    store = encode_host(*store_host)
    sys_flag = record.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    if len(born) == 20:
        sys_flag |= BORNHOST_V6_FLAG
    if len(store) == 20:
        sys_flag |= STOREHOST_V6_FLAG
    topic = record.topic.encode("utf-8")
    size = record_size(len(record.body), record.topic, record.written, sys_flag, trailing=trailing)
    refusal = check_encode(record.topic, text, len(record.body), size, file_size)
    if refusal is not None:
        raise PutError(refusal[0], refusal[1], _shown(record, refusal[1]), refusal[2])
    return Prepared(
        record=record,
        size=size,
        sys_flag=sys_flag,
        born_host=born,
        store_host=store,
        topic=topic,
        props=props,
        body_crc=body_crc(record.body),
    )


def _shown(record: MessageRecord, field: str) -> object:
    if field == "topic":
        return record.topic
    if field == "properties":
        return f"<{len(record.properties)} properties>"
    return record.body if field == "body" else f"<{len(record.body)}-byte body>"


def body_crc(body: bytes) -> int:
    """RocketMQ's ``UtilAll.crc32``: CRC32 masked to 31 bits."""
    return zlib.crc32(body) & 0x7FFFFFFF


def encode_record(
    record: MessageRecord,
    *,
    queue_offset: int,
    physical_offset: int,
    store_host: Host = ("127.0.0.1", 10911),
) -> bytes:
    """Validate and encode one record in a single call."""
    return prepare(record, store_host).pack(queue_offset, physical_offset)


def encode_blank(remaining: int) -> bytes:
    return _BLANK.pack(remaining, BLANK_MAGIC)


# -- decode ------------------------------------------------------------------------------------


def decode_at(
    buf: bytes | memoryview,
    pos: int,
    *,
    base_offset: int = 0,
    limit: int | None = None,
    check_crc: bool = True,
    check_physical: bool = True,
    check_tail: bool = True,
) -> DecodedRecord | Blank | End:
    """Decode what starts at ``buf[pos]``; its commitlog offset is ``base_offset + pos``.

    ``limit`` is the end of valid data in ``buf`` (default ``len(buf)``, i.e. the
    end of the file). Raises ``CorruptRecord`` for anything that is not a valid
    record, a blank end marker or zeros. ``check_crc``, ``check_physical`` and
    ``check_tail`` (properties ending in a zero byte, a topic holding one: a
    torn write) can be turned off for lenient reads.
    """
    end = len(buf) if limit is None else limit
    offset = base_offset + pos
    avail = end - pos
    if avail <= 0:
        return End(offset)
    if avail < 8:
        if not any(buf[pos:end]):
            return End(offset)
        raise CorruptRecord("TRUNCATED", offset, f"only {avail} bytes left, less than a header")
    total, magic = _BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        if total != avail:
            raise CorruptRecord("BAD_SIZE", offset, f"blank record says {total} bytes remain, file has {avail}")
        return Blank(offset, total)
    if magic != MESSAGE_MAGIC:
        if total == 0 and magic == 0:
            return End(offset)
        raise CorruptRecord("BAD_MAGIC", offset, f"magic 0x{magic & 0xFFFFFFFF:08X}")
    if total < _MIN_RECORD:
        raise CorruptRecord("BAD_SIZE", offset, f"totalSize {total} below the minimum {_MIN_RECORD}")
    if total > avail:
        raise CorruptRecord("TRUNCATED", offset, f"totalSize {total} but only {avail} bytes left in the file")
    if not sys_flag_v6(buf, pos) and total >= _HEAD4.size + 3:
        # the common case: IPv4 born and store hosts, the whole fixed part in one unpack
        (
            _total,
            _magic,
            crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_ts,
            born_ip,
            born_port,
            store_ts,
            store_ip,
            store_port,
            reconsume_times,
            prepared_txn_offset,
            body_len,
        ) = _HEAD4.unpack_from(buf, pos)
        born_host = (_ip_text(born_ip), born_port)
        store_host = (_ip_text(store_ip), store_port)
        p = pos + _HEAD4.size
    else:
        (
            _total,
            _magic,
            crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_ts,
        ) = _HEAD.unpack_from(buf, pos)
        p = pos + _HEAD.size
        born_v6 = bool(sys_flag & BORNHOST_V6_FLAG)
        store_v6 = bool(sys_flag & STOREHOST_V6_FLAG)
        born_len = 20 if born_v6 else 8
        store_len = 20 if store_v6 else 8
        fixed = _HEAD.size + born_len + 8 + store_len + _TAIL.size
        if fixed + 3 > total:
            raise CorruptRecord("BAD_SIZE", offset, f"totalSize {total} smaller than its header")
        born_host = _decode_host(buf, p, born_v6)
        p += born_len
        (store_ts,) = _I64.unpack_from(buf, p)
        p += 8
        store_host = _decode_host(buf, p, store_v6)
        p += store_len
        reconsume_times, prepared_txn_offset, body_len = _TAIL.unpack_from(buf, p)
        p += _TAIL.size
    stop = pos + total
    if body_len < 0 or p + body_len + 3 > stop:
        raise CorruptRecord("BAD_SIZE", offset, f"bodyLen {body_len} overruns totalSize {total}")
    body = bytes(buf[p : p + body_len])
    p += body_len
    topic_len = buf[p]
    p += 1
    if p + topic_len + 2 > stop:
        raise CorruptRecord("BAD_SIZE", offset, f"topicLen {topic_len} overruns totalSize {total}")
    topic_raw = bytes(buf[p : p + topic_len])
    p += topic_len
    (props_len,) = _I16.unpack_from(buf, p)
    p += 2
    if props_len < 0 or p + props_len != stop:
        raise CorruptRecord(
            "BAD_SIZE",
            offset,
            f"totalSize {total} != computed length {p + max(props_len, 0) - pos}",
        )
    props_raw = bytes(buf[p : p + props_len])
    if check_tail and ((props_len and buf[stop - 1] == 0) or b"\0" in topic_raw):
        # Properties never end in NUL (``prepare`` refuses them) and topics hold no NUL:
        # zeros there mean the record's tail was never written. RocketMQ checks only
        # lengths and the body CRC and keeps such a record.
        raise CorruptRecord("TRUNCATED", offset, "the record's tail is zeros: it was never written")
    if check_crc:
        actual = zlib.crc32(body) & 0x7FFFFFFF
        if actual != crc:
            raise CorruptRecord("BAD_CRC", offset, f"bodyCRC {crc} != CRC32(body) {actual}")
    if check_physical and physical_offset != offset:
        raise CorruptRecord("BAD_PHYSICAL_OFFSET", offset, f"physicalOffset field says {physical_offset}")
    topic = topic_raw.decode("utf-8", errors="replace")
    text = props_raw.decode("utf-8", errors="replace")
    return DecodedRecord(
        offset,
        total,
        crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_ts,
        born_host,
        store_ts,
        store_host,
        reconsume_times,
        prepared_txn_offset,
        body,
        topic,
        MappingProxyType(decode_properties(text)),
        text,
    )


def sys_flag_v6(buf: bytes | memoryview, pos: int) -> bool:
    """Whether the record at ``pos`` has an IPv6 born or store host (its header is at least 40 bytes)."""
    return bool(buf[pos + SYSFLAG_POSITION + 3] & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG))


def decode_record(data: bytes, *, base_offset: int = 0, check_crc: bool = True) -> DecodedRecord:
    """Decode exactly one record from ``data`` (which holds it at position 0)."""
    result = decode_at(data, 0, base_offset=base_offset, limit=len(data), check_crc=check_crc)
    if not isinstance(result, DecodedRecord):
        raise CorruptRecord("BAD_MAGIC", base_offset, f"no message record here ({result!r})")
    return result


def peek_size(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(totalSize, magic) at ``pos`` without validation."""
    return _BLANK.unpack_from(buf, pos)
