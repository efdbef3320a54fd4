"""The model store: topics, queues as logs, the commitlog order and the pull rules.

Theory of operation
-------------------
The store is a list of immutable ``Record``s in commitlog order plus, per
(topic, queue_id), a consume queue: the list of record indices in queue-offset
order. Nothing is ever rewritten; a crash truncates the list to a prefix and
the consume queues are rebuilt from what survives (RocketMQ's recovery does
the same from the commitlog).

Facts followed (RocketMQ 4.9.8, S = store/src/main/java/org/apache/rocketmq/store):

- S/CommitLog.asyncPutMessage: a message of transaction type NOT or COMMIT
  with a property-map DELAY > 0 is clamped to the maximum level, REAL_TOPIC
  and REAL_QID are added, the properties string is recomputed and the record
  goes to ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``. ``PutRequest`` keeps
  the properties *string* (``properties``) apart from the map's DELAY
  (``delay_level``) because RocketMQ's callers sometimes let them differ
  (ScheduleMessageService.messageTimeup clears DELAY from the map after the
  string was built, so the delivered copy still carries DELAY).
- S/CommitLog.DefaultAppendMessageCallback.doAppend: the physical offset is
  the write position; a record that does not fit (size + 8 > room left in the
  current file) rolls to the next file, i.e. the next multiple of
  ``commitlog_file_size``. PREPARED/ROLLBACK records get queue offset 0 and no
  consume-queue entry. ``calMsgLength`` is ``message.record_size``; the size
  limits and their order are ``limits`` (DefaultMessageStore.checkMessage, then
  MessageExtEncoder.encode).
- S/CommitLog.checkMessageAndReturnSize (dispatch): tagsCode = Java hash of
  TAGS (0 without tags); in the schedule topic, store_ts + delay(level).
- S/DefaultMessageStore.getMessage + isTheBatchFull and
  B/processor/PullMessageProcessor (status → response code) + the client's
  response-code → PullStatus mapping: see ``Store.get_message`` and
  ``client_pull_status``.

Simplifications: one store host; born hosts are IPv4 unless a copy inherits a
v6 flag; the consume-queue "ext" and the in-disk transfer limits do not exist
(everything is "in memory"). Retention (``model/retention.py``) deletes files
logically: records below ``commitlog_min`` stay in the list but are gone to
every reader; each queue keeps its min offset and its first consume-queue file.
"""

from __future__ import annotations

import bisect
import enum
import ipaddress
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from rmqspec.model.committing import buffered_from
from rmqspec.model.config import BrokerConfig
from rmqspec.model.filefault import CREATE_FILE_CODE, CREATE_FILE_REMARK, FileFault
from rmqspec.model.filterapi import SubscriptionSplitError, build_subscription
from rmqspec.model.ids import offset_msg_id
from rmqspec.model.javahash import java_string_hash
from rmqspec.model.limits import check_encode, check_message
from rmqspec.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    STOREHOST_V6_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    StoredMessage,
    encode_properties,
    record_size,
    transaction_type,
)
from rmqspec.model.putlock import PC_SYNCHRONIZED_REMARK, LockState, PutLock
from rmqspec.model.results import PullStatus, ResponseCode
from rmqspec.model.retention import consume_queue_files_to_delete, corrected_min
from rmqspec.model.timer import (
    PROPERTY_TIMER_OUT_MS,
    TIMER_TOPIC,
    RecordGone,
    TimerRefused,
    java_long,
    slot_of_property,
    transform,
)
from rmqspec.model.timesearch import QueueFile, offset_by_time

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
# TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET (the ones a model can meet).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        HALF_TOPIC,
        OP_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)
SCHEDULE_TOPIC_QUEUE_NUM = 18  # TopicConfigManager

CQ_UNIT_BYTES = 20
MAX_TRANSFER_COUNT_IN_MEMORY = 32
MAX_TRANSFER_BYTES_IN_MEMORY = 256 * 1024
END_FILE_MIN_BLANK_LENGTH = 8


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


@attrs.frozen
class Record:
    """One commitlog record (immutable; shared between forks of a model)."""

    commitlog_offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    flag: int
    props: tuple[tuple[str, str], ...]
    sys_flag: int
    born_ts: int
    store_ts: int
    reconsume_times: int
    prepared_txn_offset: int
    tags_code: int
    # the first item of a batch: the batch's size, which decided its file (``prepare_batch``); else 0
    batch_bytes: int = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> Record:
        return self

    @property
    def end(self) -> int:
        return self.commitlog_offset + self.size

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.props)

    def prop(self, name: str) -> str | None:
        for key, value in self.props:
            if key == name:
                return value
        return None

    @property
    def uniq_key(self) -> str | None:
        return self.prop(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def msg_id(self, config: BrokerConfig) -> str:
        return offset_msg_id(config.store_host, config.store_port, self.commitlog_offset)

    def to_stored(self, config: BrokerConfig) -> StoredMessage:
        """The record as a consumer decodes it (MessageDecoder.decode)."""
        keys = self.prop(PROPERTY_KEYS)
        return StoredMessage(
            msg_id=self.msg_id(config),
            uniq_key=self.uniq_key,
            topic=self.topic,
            queue_id=self.queue_id,
            queue_offset=self.queue_offset,
            commitlog_offset=self.commitlog_offset,
            body=bytes(self.body),
            tags=self.prop(PROPERTY_TAGS),
            keys=tuple(k for k in keys.split(" ") if k) if keys else (),
            properties=self.properties,
            reconsume_times=self.reconsume_times,
            born_ts=self.born_ts,
            store_ts=self.store_ts,
            sys_flag=self.sys_flag,
            prepared_txn_offset=self.prepared_txn_offset,
            flag=self.flag,
        )


def _props_tuple(
    value: Mapping[str, str] | tuple[tuple[str, str], ...],
) -> tuple[tuple[str, str], ...]:
    if isinstance(value, tuple):
        return value
    return tuple(value.items())


@attrs.frozen
class PutRequest:
    """What a broker component asks the store to append (MessageExtBrokerInner).

    ``properties`` is the properties *string* to store; ``delay_level`` is the
    DELAY of the property *map* that CommitLog routes by; ``wait`` the map's
    ``isWaitStoreMsgOK`` (``model/crash.py``: under SYNC_FLUSH whether the put waits for the flush).
    """

    topic: str
    queue_id: int
    body: bytes
    properties: tuple[tuple[str, str], ...] = attrs.field(converter=_props_tuple)
    sys_flag: int = 0
    born_ts: int = 0
    flag: int = 0
    reconsume_times: int = 0
    prepared_txn_offset: int = 0
    delay_level: int = 0
    wait: bool = True


# SendMessageProcessor's remark for SERVICE_NOT_AVAILABLE starts so (it goes on with the disk's usage)
DISK_FULL_REMARK = ("service not available now. It may be caused by one of the following reasons: "
                    "the broker's disk is full")
# a put on a SLAVE (checkStoreStatus logs "broke role is slave, so putMessage is forbidden"): SendMessageProcessor
# answers code 14 with the same remark as for a full disk (its text goes on "…, messages are put to the slave, …")
SLAVE_PUT_REMARK = DISK_FULL_REMARK


class PutError(Exception):
    """The store refused a record; nothing was written."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(f"{code.name}: {remark}")
        self.code = code
        self.remark = remark


class FileCreateFailed(PutError):
    """CREATE_MAPEDFILE_FAILED: the record needs a commitlog file that cannot be created (model/filefault.py)."""

    def __init__(self) -> None:
        super().__init__(CREATE_FILE_CODE, CREATE_FILE_REMARK)


class PageCacheBusy(PutError):
    """OS_PAGECACHE_BUSY: the put lock is held longer than the timeout (model/putlock.py); nothing written."""

    def __init__(self) -> None:
        super().__init__(ResponseCode.SYSTEM_ERROR, PC_SYNCHRONIZED_REMARK)


class GetStatus(enum.Enum):
    """DefaultMessageStore's GetMessageStatus values the model can produce."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"  # the scanned units' records were deleted (retention)
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"  # the offset's consume-queue file was deleted


@attrs.frozen
class GetResult:
    status: GetStatus
    records: tuple[Record, ...]
    next_begin_offset: int
    min_offset: int
    max_offset: int


def client_pull_status(status: GetStatus, request_offset: int) -> PullStatus:
    """PullMessageProcessor's response code, as the client maps it to a PullStatus.

    SUCCESS → FOUND; PULL_NOT_FOUND → NO_NEW_MSG; PULL_RETRY_IMMEDIATELY →
    NO_MATCHED_MSG; PULL_OFFSET_MOVED → OFFSET_ILLEGAL. An empty queue answers
    PULL_NOT_FOUND only for request offset 0, else PULL_OFFSET_MOVED.
    MESSAGE_WAS_REMOVING is PULL_RETRY_IMMEDIATELY, OFFSET_FOUND_NULL PULL_NOT_FOUND.
    """
    if status is GetStatus.FOUND:
        return PullStatus.FOUND
    if status in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING):
        return PullStatus.NO_MATCHED_MSG
    if status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.OFFSET_FOUND_NULL):
        return PullStatus.NO_NEW_MSG
    if status is GetStatus.NO_MESSAGE_IN_QUEUE:
        return PullStatus.NO_NEW_MSG if request_offset == 0 else PullStatus.OFFSET_ILLEGAL
    return PullStatus.OFFSET_ILLEGAL


def bridge_pull_status(status: GetStatus) -> PullStatus:
    """TransactionalMessageBridge.getMessage's mapping (the broker reading its own queues)."""
    if status is GetStatus.FOUND:
        return PullStatus.FOUND
    if status is GetStatus.NO_MATCHED_MESSAGE:
        return PullStatus.NO_MATCHED_MSG
    if status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.OFFSET_OVERFLOW_ONE):
        return PullStatus.NO_NEW_MSG
    return PullStatus.OFFSET_ILLEGAL


class SubscriptionError(ValueError):
    """A subscription expression FilterAPI.buildSubscriptionData refuses."""


def tag_filter(subscription: str | None) -> Callable[[int], bool] | None:
    """The consume-queue tag filter (ExpressionMessageFilter.isMatchedByConsumeQueue).

    ``None`` means "match all" (``*``, empty or None). ``A || B`` matches a unit
    whose tagsCode is in ``{hash(A), hash(B)}`` (the broker compares hash codes,
    not strings; the client re-checks strings). The expression is parsed as
    FilterAPI parses it (``model/filterapi.py``); a split that leaves nothing is
    ``SubscriptionError``.
    """
    try:
        sub = build_subscription(subscription)
    except SubscriptionSplitError as exc:
        raise SubscriptionError(str(exc)) from None
    return None if sub.sub_all else sub.broker_matches


def _is_v6(host: str) -> bool:
    return ipaddress.ip_address(host).version == 6


class Store:
    """Commitlog + consume queues + topic table of the model broker."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.delays = config.delay_levels_ms
        self.records: list[Record] = []
        self.index: dict[int, int] = {}  # commitlog offset → index in records
        self.write_pos = 0
        self.queues: dict[tuple[str, int], list[int]] = {}
        self.topics: dict[str, int] = {}  # topic → queue nums (topics.json is always durable)
        # retention (model/retention.py): the first commitlog byte kept; per queue its min offset and
        # the index of its first consume-queue file; the commitlog min the queues were last cleaned at
        self.commitlog_min = 0
        self.queue_min: dict[tuple[str, int], int] = {}
        self.cq_first: dict[tuple[str, int], int] = {}
        self.cleaned_at = 0
        self.disk_full = False  # the clean service found the disk over 0.90: every put is refused
        self._store_v6 = _is_v6(config.store_host)
        # TransientStorePool (model/committing.py): records are dispatched (consume queues, lookups) only
        # once readable; ``dispatched`` records are, ``committed_where`` is the CommitRealTimeService's
        # committedWhere, ``pending`` the queue offsets assigned to records not yet dispatched, and records
        # before ``buffered_from`` (files loaded at the start, no write buffer) are readable as written.
        # Without the pool every record is dispatched at its append.
        self.buffered = config.transient_store_pool
        self.dispatched = 0
        self.committed_where = 0
        self.buffered_from = 0
        self.pending: dict[tuple[str, int], int] = {}
        # (last record's end, the next file's start) of each recovery that resumed there (stepped over a blank)
        self.resumed_at: set[tuple[int, int]] = set()
        self.file_fault = FileFault()  # Capability.FILE_CREATE_FAULT (model/filefault.py)
        self.put_lock = PutLock()  # Capability.PUT_LOCK_HOLD (model/putlock.py)
        self.slave = False  # a SLAVE's store (model/ha_pair.py): every put refused, records arrive by replication

    # -- topics ---------------------------------------------------------

    def has_topic(self, topic: str) -> bool:
        return topic in self.topics

    def ensure_topic(self, topic: str, queue_nums: int) -> None:
        """createTopicInSendMessageBackMethod: create if absent, never resize."""
        self.topics.setdefault(topic, queue_nums)

    # -- writing --------------------------------------------------------

    def prepare(self, req: PutRequest, now: int) -> Record:
        """The record ``req`` would become if appended now (raises ``PutError``)."""
        self._check_writable(now)
        props = dict(req.properties)
        topic, queue_id = req.topic, req.queue_id
        trailing = self.config.behaviour.properties_trailing_separator
        refusal = check_message(topic, encode_properties(props, trailing=trailing))
        if refusal is not None:
            raise PutError(refusal[0], f"{refusal[1]} {refusal[2]}")
        ttype = transaction_type(req.sys_flag)
        if ttype in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) and self.config.behaviour.timer_wheel:
            try:  # 5.x's put hook (model/timer.py)
                topic, queue_id = transform(topic, queue_id, props, req.delay_level, now, self.config.timer)
            except TimerRefused as e:
                raise PutError(e.code, e.remark) from None
        if ttype in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) and req.delay_level > 0:
            level = min(req.delay_level, len(self.delays))
            props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
            props[PROPERTY_REAL_TOPIC] = topic
            props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
            topic, queue_id = SCHEDULE_TOPIC, level - 1
        sys_flag = req.sys_flag
        if self._store_v6:
            sys_flag |= STOREHOST_V6_FLAG
        size = record_size(len(req.body), topic, props, sys_flag, trailing=trailing)
        file_size = self.config.commitlog_file_size
        refusal = check_encode(topic, encode_properties(props, trailing=trailing), len(req.body), size, file_size)
        if refusal is not None:
            raise PutError(refusal[0], f"{refusal[1]} {refusal[2]}")
        pos = self.write_pos
        room = file_size - pos % file_size
        if size + END_FILE_MIN_BLANK_LENGTH > room:
            pos += room
        self._check_creatable(pos)
        in_queue = ttype in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
        queue_offset = self.next_queue_offset(topic, queue_id) if in_queue else 0
        return Record(
            commitlog_offset=pos,
            size=size,
            topic=topic,
            queue_id=queue_id,
            queue_offset=queue_offset,
            body=bytes(req.body),
            flag=req.flag,
            props=tuple(props.items()),
            sys_flag=sys_flag,
            born_ts=req.born_ts,
            store_ts=now,
            reconsume_times=req.reconsume_times,
            prepared_txn_offset=req.prepared_txn_offset,
            tags_code=self._tags_code(topic, props, now),
        )

    def prepare_batch(self, reqs: Sequence[PutRequest], now: int) -> list[Record]:
        """The records a batch becomes if appended now, as one append (CommitLog.putMessages): each item's
        properties pairs stored as given (a name may repeat), no delay or timer routing, consecutive queue
        offsets, the whole batch in one file — the next one when it does not fit before the end marker.
        Raises ``PutError`` (a batch larger than a file is refused)."""
        self._check_writable(now)
        trailing = self.config.behaviour.properties_trailing_separator
        file_size = self.config.commitlog_file_size
        sys_flag = STOREHOST_V6_FLAG if self._store_v6 else 0
        sizes = []
        for req in reqs:
            text = encode_properties(req.properties, trailing=trailing)
            size = record_size(len(req.body), req.topic, req.properties, sys_flag, trailing=trailing)
            refusal = check_message(req.topic, text) or check_encode(req.topic, text, len(req.body), size, file_size)
            if refusal is not None:
                raise PutError(refusal[0], f"{refusal[1]} {refusal[2]}")
            sizes.append(size)
        total = sum(sizes)
        if total + END_FILE_MIN_BLANK_LENGTH > file_size:
            raise PutError(ResponseCode.MESSAGE_ILLEGAL,
                           f"batch of {total} bytes does not fit a commitlog file of {file_size} bytes")
        pos = self.write_pos
        room = file_size - pos % file_size
        if total + END_FILE_MIN_BLANK_LENGTH > room:
            pos += room
        self._check_creatable(pos)
        records: list[Record] = []
        for req, size in zip(reqs, sizes, strict=True):
            base = self.next_queue_offset(req.topic, req.queue_id)
            records.append(Record(
                commitlog_offset=pos, size=size, topic=req.topic, queue_id=req.queue_id,
                queue_offset=base + sum(1 for r in records if (r.topic, r.queue_id) == (req.topic, req.queue_id)),
                body=bytes(req.body), flag=req.flag, props=req.properties, sys_flag=sys_flag, born_ts=req.born_ts,
                store_ts=now, reconsume_times=0, prepared_txn_offset=0,
                tags_code=self._tags_code(req.topic, dict(req.properties), now),
                batch_bytes=0 if records else total,
            ))
            pos += size
        return records

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next record of (topic, queue) gets (CommitLog's topicQueueTable): the
        consume queue's length plus the records assigned but not yet dispatched."""
        return len(self.queues.get((topic, queue_id), ())) + self.pending.get((topic, queue_id), 0)

    def _check_creatable(self, pos: int) -> None:
        """CommitLog.putMessage's ``getLastMappedFile(0)``: a record starting in the uncreatable file is
        refused (CREATE_MAPEDFILE_FAILED); a roll wrote the old file's blank end first (model/filefault.py)."""
        if not self.file_fault.refuses(pos):
            return
        if pos > self.write_pos:
            self.write_pos = self.file_fault.uncreated = pos
        raise FileCreateFailed()

    def append(self, record: Record) -> Record:
        self.file_fault.uncreated = None  # the record's file was created
        self.index[record.commitlog_offset] = len(self.records)
        self.records.append(record)
        self.write_pos = record.end
        if not self.buffered or record.end <= self.buffered_from:  # no write buffer: readable at once
            self.dispatch_to(len(self.records))
        elif transaction_type(record.sys_flag) in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            key = (record.topic, record.queue_id)
            self.pending[key] = self.pending.get(key, 0) + 1
        return record

    def dispatch_to(self, count: int) -> None:
        """The reput: the consume-queue units of the records before ``count`` (those committed)."""
        for i in range(self.dispatched, count):
            record = self.records[i]
            if transaction_type(record.sys_flag) in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
                key = (record.topic, record.queue_id)
                self.queues.setdefault(key, []).append(i)
                if self.buffered and record.commitlog_offset >= self.buffered_from:
                    self.pending[key] -= 1
        self.dispatched = max(self.dispatched, count)

    def commit_to(self, where: int) -> None:
        """committedWhere moved to ``where`` (model/committing.py): dispatch what it covers."""
        self.committed_where = max(self.committed_where, where)
        self.dispatch_to(self.records_ending_by(self.committed_where))

    @property
    def readable_where(self) -> int:
        """One past the last readable byte (getReadPosition: the files without a write buffer as written)."""
        if not self.buffered:
            return self.write_pos
        return max(self.committed_where, min(self.write_pos, self.buffered_from))

    def written_by(self, cutoff: int) -> int:
        """The end of the longest run of records past the readable ones stored at or before ``cutoff`` (what the
        CommitRealTimeService surely committed since: ``CommitRealTime.catch_up_ms``)."""
        end = self.committed_where
        for record in self.records[self.dispatched:]:
            if record.store_ts > cutoff:
                break
            end = record.end
        return end

    def commit_all(self) -> None:
        """Everything written committed (an explicit flush, a clean shutdown)."""
        self.commit_to(self.write_pos)

    def put(self, req: PutRequest, now: int) -> Record:
        return self.append(self.prepare(req, now))

    def _tags_code(self, topic: str, props: Mapping[str, str], store_ts: int) -> int:
        tags = props.get(PROPERTY_TAGS)
        code = java_string_hash(tags) if tags else 0
        level_text = props.get(PROPERTY_DELAY_TIME_LEVEL)
        if topic == SCHEDULE_TOPIC and level_text is not None:
            level = min(int(level_text), len(self.delays))
            if level > 0:
                code = store_ts + self.delays[level - 1]
        return code

    def truncate(self, survivors: int, end: int | None = None) -> list[Record]:
        """Keep the first ``survivors`` records; rebuild the consume queues. Returns the lost. ``end``: the
        recovered write position when it is past the last survivor (``Durability.recovered_end``)."""
        lost = self.records[survivors:]
        self.file_fault.uncreated = None  # ``end`` is where recovery resumes
        del self.records[survivors:]
        self.index = {r.commitlog_offset: i for i, r in enumerate(self.records)}
        last_end = self.records[-1].end if self.records else 0
        self.write_pos = max(last_end, self.commitlog_min, end or 0)
        if end is not None and end > max(last_end, self.commitlog_min):
            self.resumed_at.add((last_end, end))  # recovery stepped over a blank into the next file (wellformed.py)
        self.queues = {}
        for i, r in enumerate(self.records):
            if transaction_type(r.sys_flag) in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
                self.queues.setdefault((r.topic, r.queue_id), []).append(i)
        self.restarted()
        return lost

    def resume_before_blank(self) -> None:
        """A clean start after a failed roll: no file follows the old file's blank end, so recovery resumes
        where the blank starts (the last record's end; model/filefault.py)."""
        if self.file_fault.uncreated is not None:
            self.write_pos = max(self.records[-1].end if self.records else 0, self.commitlog_min)
            self.file_fault.uncreated = None

    def restarted(self) -> None:
        """A start (a recovery, a reopen): every record kept is on disk and dispatched; the files up to the
        end were loaded without a write buffer (model/committing.py). The uncreatable file's fault ended with
        the process (model/filefault.py)."""
        self.file_fault = FileFault()
        self.put_lock = PutLock()  # the slow put completed
        self.dispatched = len(self.records)  # the consume queues were rebuilt from every record kept
        self.pending = {}
        self.committed_where = self.write_pos
        if self.buffered:
            self.buffered_from = buffered_from(self.write_pos, self.config.commitlog_file_size)

    # -- retention (model/retention.py) ----------------------------------

    def _check_writable(self, now: int) -> None:
        """DefaultMessageStore.checkStoreStatus: a SLAVE's store and a disk-full store refuse every put; then
        isOSPageCacheBusy."""
        if self.slave:
            raise PutError(ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_PUT_REMARK)
        if self.disk_full:
            raise PutError(ResponseCode.SERVICE_NOT_AVAILABLE, DISK_FULL_REMARK)
        if self.put_lock.gate(now, self.config.os_page_cache_busy_timeout_ms, "a put") is LockState.BUSY:
            raise PageCacheBusy()

    @property
    def commitlog_min_offset(self) -> int:
        return self.commitlog_min

    def queue_mins(self) -> Mapping[tuple[str, int], int]:
        return self.queue_min

    def unit_gone(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the consume-queue file holding ``offset`` was deleted."""
        per_file = self.config.consume_queue_file_size // CQ_UNIT_BYTES
        return offset < self.cq_first.get((topic, queue_id), 0) * per_file

    def removed_count(self) -> int:
        """How many records went with deleted commitlog files (the oldest ones); the trace's record
        counts are of the records kept."""
        return self._first_kept()

    def records_ending_by(self, pos: int) -> int:
        """How many records end at or before commitlog position ``pos`` (the flushed ones, ASYNC)."""
        return bisect.bisect_right(self.records, pos, key=lambda r: r.end)

    def _first_kept(self) -> int:
        """The index of the first record at or above the commitlog's min offset."""
        return bisect.bisect_left(self.records, self.commitlog_min, key=lambda r: r.commitlog_offset)

    def removed(self, commitlog_offset: int) -> bool:
        """Whether the record at ``commitlog_offset`` went with a deleted commitlog file."""
        return commitlog_offset < self.commitlog_min

    def file_rolls(self) -> list[int | None]:
        """Each commitlog file's age reference, oldest first: the store time of the next file's first
        record (the put that wrote its blank end); None for the last file."""
        if not self.records:
            return []
        size = self.config.commitlog_file_size
        first, last = self.commitlog_min // size, self.records[-1].commitlog_offset // size
        firsts: dict[int, int] = {}
        for r in self.records[self._first_kept():]:
            firsts.setdefault(r.commitlog_offset // size, r.store_ts)
        return [firsts.get(k + 1) if k < last else None for k in range(first, last + 1)]

    def delete_files(self, count: int) -> None:
        """Delete the ``count`` oldest commitlog files."""
        size = self.config.commitlog_file_size
        self.commitlog_min = (self.commitlog_min // size + count) * size

    def clean_queues(self) -> None:
        """CleanConsumeQueueService's pass: only when the commitlog's min offset grew."""
        if self.commitlog_min <= self.cleaned_at:
            return
        self.cleaned_at = self.commitlog_min
        units_per_file = self.config.consume_queue_file_size // CQ_UNIT_BYTES
        for key, units in self.queues.items():
            first = self.cq_first.get(key, 0)
            files = range(first, (len(units) - 1) // units_per_file + 1)
            lasts = [self.records[units[(j + 1) * units_per_file - 1]].commitlog_offset
                     if (j + 1) * units_per_file <= len(units) else None for j in files]
            self.cq_first[key] = first + consume_queue_files_to_delete(lasts, self.commitlog_min)
            self._correct_min(key, self.queue_min.get(key, 0))

    def correct_min_offsets(self) -> None:
        """A restart's recoverTopicQueueTable: every queue corrected from min offset 0."""
        self.cleaned_at = 0
        for key in self.queues:
            self._correct_min(key, 0)

    def _correct_min(self, key: tuple[str, int], current: int) -> None:
        units = self.queues[key]
        per_file = self.config.consume_queue_file_size // CQ_UNIT_BYTES
        start = self.cq_first.get(key, 0) * per_file
        first_file = [self.records[i].commitlog_offset for i in units[start:start + per_file]]
        self.queue_min[key] = corrected_min(first_file, start, self.commitlog_min, current)

    # -- reading --------------------------------------------------------

    def look(self, commitlog_offset: int) -> Record | None:
        """lookMessageByOffset: the record starting exactly at ``commitlog_offset``."""
        i = self.index.get(commitlog_offset)
        # an uncommitted record is past the read position (selectMappedBuffer): not found
        return None if i is None or i >= self.dispatched or self.removed(commitlog_offset) else self.records[i]

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The consume queue's max offset (exclusive: the next offset to assign)."""
        return len(self.queues.get((topic, queue_id), ()))

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self.queue_min.get((topic, queue_id), 0)

    def queue_files(self, topic: str, queue_id: int) -> list[QueueFile]:
        """The queue's consume-queue files still kept; a file's last-modified time is the store time of
        its last unit's record (model/timesearch.py)."""
        units = self.queues.get((topic, queue_id), [])
        per_file = self.config.consume_queue_file_size // CQ_UNIT_BYTES
        out = []
        for j in range(self.cq_first.get((topic, queue_id), 0), (len(units) + per_file - 1) // per_file):
            recs = [self.records[i] for i in units[j * per_file:(j + 1) * per_file]]
            out.append(QueueFile(j * per_file, recs[-1].store_ts, [(r.commitlog_offset, r.size) for r in recs]))
        return out

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """getOffsetInQueueByTime (model/timesearch.py)."""
        def store_ts_at(offset: int, _size: int) -> int:
            i = self.index.get(offset)
            return -1 if i is None or self.removed(offset) else self.records[i].store_ts

        return offset_by_time(self.queue_files(topic, queue_id), timestamp, self.min_offset(topic, queue_id),
                              self.commitlog_min, store_ts_at)

    def timer_slot(self, offset: int) -> int | None:
        """TIMER_OUT_MS of the timer queue's entry at ``offset`` (model/timer.py); None when it is
        not a Java long; raises ``RecordGone`` when retention took its record."""
        entry = self.entry(TIMER_TOPIC, 0, offset)
        if offset < self.min_offset(TIMER_TOPIC, 0) or self.removed(entry.commitlog_offset):
            raise RecordGone(f"timer-queue entry {offset}")
        return java_long(entry.prop("TIMER_OUT_MS") or "")

    def entry(self, topic: str, queue_id: int, offset: int) -> Record:
        return self.records[self.queues[(topic, queue_id)][offset]]

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        matches: Callable[[int], bool] | None = None,
        props_match: Callable[[Mapping[str, str]], bool] | None = None,
    ) -> GetResult:
        """DefaultMessageStore.getMessage (master, everything in memory).

        ``max == 0`` → NO_MESSAGE_IN_QUEUE next 0; ``offset < min`` →
        OFFSET_TOO_SMALL next min; ``offset == max`` → OFFSET_OVERFLOW_ONE next
        offset; ``offset > max`` → OFFSET_OVERFLOW_BADLY next max (4.9.4+);
        otherwise scan units [offset, end of that consume-queue file) but at
        most ``max(16000, max_nums*20) / 20`` units; a unit that would overflow
        the batch (``max_nums``, 32 messages, 256 KiB of record bytes — the
        first message always fits) stops the scan before it is counted;
        filtered-out units are skipped. next = offset + units scanned. In
        4.9.8's order a unit is tested against the tag filter before its
        record is read: a removed unit the filter rejects is NO_MATCHED_MESSAGE,
        one it keeps MESSAGE_WAS_REMOVING, and the units after it in the same
        commitlog file are skipped unjudged (``nextPhyFileStartOffset``). The
        status without a message found is the last judged unit's reason.
        """
        lo = self.min_offset(topic, queue_id)
        hi = self.max_offset(topic, queue_id)
        if hi == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, (), 0, lo, hi)
        if offset < lo:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, (), lo, lo, hi)
        if offset == hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, (), offset, lo, hi)
        if offset > hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, (), hi, lo, hi)
        units = self.queues[(topic, queue_id)]
        file_units = self.config.consume_queue_file_size // CQ_UNIT_BYTES  # mappedFileSizeConsumeQueue / 20
        file_end = (offset // file_units + 1) * file_units
        if self.unit_gone(topic, queue_id, offset):
            return GetResult(GetStatus.OFFSET_FOUND_NULL, (), file_end, lo, hi)
        limit_units = max(16000, max_nums * CQ_UNIT_BYTES) // CQ_UNIT_BYTES
        end = min(hi, file_end, offset + limit_units)
        found: list[Record] = []
        total_bytes = 0
        scanned = 0
        missed = GetStatus.NO_MATCHED_MESSAGE  # the last unit's reason when nothing is found
        skip_below = -1  # nextPhyFileStartOffset: after a removed unit, the rest of its file is skipped
        for q in range(offset, end):
            record = self.records[units[q]]
            if record.commitlog_offset < skip_below:
                scanned += 1
                continue
            if found and (
                max_nums <= len(found)
                or total_bytes + record.size > MAX_TRANSFER_BYTES_IN_MEMORY
                or len(found) > MAX_TRANSFER_COUNT_IN_MEMORY - 1
            ):
                break
            scanned += 1
            if matches is not None and not matches(record.tags_code):  # isMatchedByConsumeQueue
                missed = GetStatus.NO_MATCHED_MESSAGE
                continue
            if self.removed(record.commitlog_offset):  # removed units are a prefix: nothing found yet
                missed = GetStatus.MESSAGE_WAS_REMOVING
                skip_below = next_file_start(record.commitlog_offset, self.config.commitlog_file_size)
                continue
            if props_match is not None and not props_match(record.properties):  # isMatchedByCommitLog
                missed = GetStatus.NO_MATCHED_MESSAGE
                continue
            found.append(record)
            total_bytes += record.size
        status = GetStatus.FOUND if found else missed
        return GetResult(status, tuple(found), offset + scanned, lo, hi)


def next_file_start(commitlog_offset: int, file_size: int) -> int:
    """CommitLog.rollNextFile: the start of the commitlog file after the one holding ``commitlog_offset``."""
    return commitlog_offset + file_size - commitlog_offset % file_size


def waiting_due(copy: Any, precision_ms: int) -> int | None:
    """When a copy waiting in the schedule topic (its tags code is its due time) or in the timer topic (the
    end of its ``TIMER_OUT_MS`` slot) becomes due; None for any other copy. ``copy``: a model ``Record`` or
    an mmap ``Entry`` (``topic``, ``tags_code``, ``prop``)."""
    if copy.topic == SCHEDULE_TOPIC:
        return int(copy.tags_code)
    if copy.topic == TIMER_TOPIC:
        slot = slot_of_property(copy.prop(PROPERTY_TIMER_OUT_MS), precision_ms)
        return None if slot is None else slot[1]
    return None
