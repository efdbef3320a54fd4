"""The broker's view of the mmap store: routing on put, lookup by offset, getMessage.

Theory of operation
-------------------
``MessageStore`` (store.py) appends encoded records and keeps consume queues;
it knows nothing about delay levels as a *routing* rule, about the broker's
size limits, or about pull batches. This module adds exactly that, following
RocketMQ 4.9.8 (S = store/src/main/java/org/apache/rocketmq/store):

- ``BrokerLog.prepare`` (S/CommitLog.asyncPutMessage + calMsgLength +
  DefaultAppendMessageCallback.doAppend's checks): on 5.x profiles a record of
  transaction type NOT or COMMIT first goes through the timer put hook
  (``model.timer.transform``, HookUtils.handleScheduleMessage: DELAY wins, a timer
  message goes to ``rmq_sys_wheel_timer`` queue 0 with TIMER_OUT_MS / REAL_TOPIC /
  REAL_QID, a refusal is a ``BrokerError`` with the model's code and remark); then a
  record of transaction type NOT or COMMIT whose property-*map* DELAY (``PutSpec.delay_level``) is > 0 is
  clamped to the maximum level, gets REAL_TOPIC / REAL_QID and goes to
  ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``. The properties *string* is
  ``PutSpec.properties`` (callers such as the schedule service let the string
  and the map differ, as RocketMQ does). Refusals: ``model.limits`` in
  RocketMQ's order (checkMessage on the string as given: 127 chars of topic,
  32767 chars of properties; then, after routing, 32767 UTF-8 bytes of
  properties → PROPERTIES_SIZE_EXCEEDED, a body over 4 MiB), plus rmqspec's two
  refusals where RocketMQ writes an unreadable or no record.
- ``BrokerLog.append`` writes through ``MessageStore.put``: the store assigns the
  dense queue offset, rolls the file, dispatches the consume-queue unit with the
  tagsCode (Java hash of TAGS; the deliver timestamp in the schedule topic) and
  msyncs under SYNC.
- ``BrokerLog.look`` (DefaultMessageStore.lookMessageByOffset): the record that
  starts exactly at a commitlog offset, or None.
- ``BrokerLog.get_message`` (DefaultMessageStore.getMessage, everything "in
  memory", master): the status table and next-offset rules, the scan window
  (to the end of the consume-queue file, at most ``max(16000, max_nums·20)/20``
  units), the batch limits (``max_nums``, 32 messages, 256 KiB — the first
  message always fits) and tag filtering by the tagsCode *read from the consume
  queue unit* (ExpressionMessageFilter.isMatchedByConsumeQueue), so a filtered
  unit's record is never read; a unit the filter keeps whose record retention
  deleted is MESSAGE_WAS_REMOVING and the rest of its commitlog file is skipped
  (``nextPhyFileStartOffset``), in 4.9.8's order as the model's ``Store.get_message``.

The born host of a record is not observable through the protocol; it is the
store host when its IP family matches the record's BORNHOST_V6 bit, else the
loopback of the other family, so the encoded size always matches the sysFlag.
"""

from __future__ import annotations

import bisect
import enum
import ipaddress
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from rmqspec.impl.codec import END_FILE_MIN_BLANK_LENGTH, CorruptRecord, DecodedRecord, MessageRecord
from rmqspec.impl.codec import tags_code as compute_tags_code
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.model.config import BrokerConfig
from rmqspec.model.ids import offset_msg_id
from rmqspec.model.limits import check_encode, check_message
from rmqspec.model.message import (
    BORNHOST_V6_FLAG,
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
from rmqspec.model.putlock import BUSY_CODE, PC_SYNCHRONIZED_REMARK, LockState, PutLock
from rmqspec.model.queues import DISK_FULL_REMARK, SLAVE_PUT_REMARK, next_file_start
from rmqspec.model.results import BrokerError, PullStatus, ResponseCode
from rmqspec.model.timer import TimerRefused
from rmqspec.model.timer import transform as timer_transform

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
MAX_TRANSFER_COUNT_IN_MEMORY = 32
MAX_TRANSFER_BYTES_IN_MEMORY = 256 * 1024
CQ_UNIT_BYTES = 20
_SCAN_CHUNK = 64

Props = tuple[tuple[str, str], ...]


@attrs.frozen
class PutSpec:
    """What a broker component asks to append (RocketMQ ``MessageExtBrokerInner``).

    ``properties`` is the properties *string* to store (as ordered pairs);
    ``delay_level`` is the DELAY of the property *map* CommitLog routes by; ``wait`` the map's
    ``isWaitStoreMsgOK`` (under SYNC_FLUSH whether the put waits for the flush: ``model/crash.py``).
    """

    topic: str
    queue_id: int
    body: bytes
    properties: Props
    sys_flag: int = 0
    born_ts: int = 0
    flag: int = 0
    reconsume_times: int = 0
    prepared_txn_offset: int = 0
    delay_level: int = 0
    wait: bool = True


@attrs.frozen
class Entry:
    """One commitlog record as the broker's services see it (immutable)."""

    commitlog_offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    flag: int
    props: Props
    sys_flag: int
    born_ts: int
    store_ts: int
    reconsume_times: int
    prepared_txn_offset: int
    tags_code: int

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
        """MessageDecoder.decode of this record (what a consumer sees)."""
        keys = self.prop(PROPERTY_KEYS)
        return StoredMessage(
            msg_id=self.msg_id(config),
            uniq_key=self.uniq_key,
            topic=self.topic,
            queue_id=self.queue_id,
            queue_offset=self.queue_offset,
            commitlog_offset=self.commitlog_offset,
            body=self.body,
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


@attrs.frozen
class Plan:
    """A validated, routed record ready to append."""

    record: MessageRecord
    size: int


class GetStatus(enum.Enum):
    """DefaultMessageStore's GetMessageStatus values a master produces."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"  # the units' records went with deleted files
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"  # the offset's consume-queue file was deleted


@attrs.frozen
class GetResult:
    status: GetStatus
    entries: tuple[Entry, ...]
    next_begin_offset: int
    min_offset: int
    max_offset: int


def client_pull_status(status: GetStatus, request_offset: int) -> PullStatus:
    """PullMessageProcessor's response code as the client's PullAPIWrapper maps it.

    FOUND → SUCCESS → FOUND; NO_MATCHED_MESSAGE → PULL_RETRY_IMMEDIATELY →
    NO_MATCHED_MSG; OFFSET_OVERFLOW_ONE → PULL_NOT_FOUND → NO_NEW_MSG;
    NO_MESSAGE_IN_QUEUE → PULL_NOT_FOUND only when the request offset is 0,
    else PULL_OFFSET_MOVED; MESSAGE_WAS_REMOVING → PULL_RETRY_IMMEDIATELY;
    OFFSET_FOUND_NULL → PULL_NOT_FOUND; the other offset errors →
    PULL_OFFSET_MOVED → OFFSET_ILLEGAL.
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
    """TransactionalMessageBridge.getMessage: the broker reading its own queues."""
    if status is GetStatus.FOUND:
        return PullStatus.FOUND
    if status is GetStatus.NO_MATCHED_MESSAGE:
        return PullStatus.NO_MATCHED_MSG
    if status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.OFFSET_OVERFLOW_ONE):
        return PullStatus.NO_NEW_MSG
    return PullStatus.OFFSET_ILLEGAL


def entry_of(record: DecodedRecord, tags_code: int) -> Entry:
    return Entry(
        commitlog_offset=record.commitlog_offset,
        size=record.size,
        topic=record.topic,
        queue_id=record.queue_id,
        queue_offset=record.queue_offset,
        body=record.body,
        flag=record.flag,
        props=tuple(record.properties.items()),
        sys_flag=record.sys_flag,
        born_ts=record.born_ts,
        store_ts=record.store_ts,
        reconsume_times=record.reconsume_times,
        prepared_txn_offset=record.prepared_txn_offset,
        tags_code=tags_code,
    )


def settle_flushed(unflushed: list[tuple[int, str | None]], flushed_offset: int) -> int:
    """Drop from ``unflushed`` (the (end offset, key) of the records not yet durable, in commitlog order)
    those the flushed position now covers; returns how many."""
    n = bisect.bisect_right(unflushed, flushed_offset, key=lambda item: item[0])
    del unflushed[:n]
    return n


def store_config(config: BrokerConfig) -> StoreConfig:
    """The store settings a ``BrokerConfig`` implies (file size, flush, delays, address)."""
    return StoreConfig(
        commitlog_file_size=config.commitlog_file_size,
        cq_file_size=config.consume_queue_file_size,
        flush=config.flush,
        delay_levels_ms=config.delay_levels_ms,
        store_host=config.store_host,
        store_port=config.store_port,
        properties_trailing_separator=config.behaviour.properties_trailing_separator,
        flush_least_pages=config.flush_commitlog_least_pages,
        flush_thorough_interval_ms=config.flush_commitlog_thorough_interval_ms,
        flush_interval_ms=config.flush_interval_commitlog_ms,
        transient_store_pool=config.transient_store_pool,
        commit_least_pages=config.commit_commitlog_least_pages,
        commit_thorough_interval_ms=config.commit_commitlog_thorough_interval_ms,
        commit_interval_ms=config.commit_interval_commitlog_ms,
    )


class PageCacheBusy(BrokerError):
    """OS_PAGECACHE_BUSY: the put lock is held longer than the timeout (model/putlock.py); nothing written."""


class BrokerLog:
    """Routing, limits, lookups and getMessage over one open ``MessageStore``."""

    def __init__(self, store: MessageStore, config: BrokerConfig) -> None:
        self.store = store
        self.config = config
        self.delays = config.delay_levels_ms
        self.timer = config.timer if config.behaviour.timer_wheel else None  # 5.x (timer_service.py)
        self.cq_file_units = store.config.cq_file_size // CQ_UNIT_BYTES
        self._store_v6 = ipaddress.ip_address(config.store_host).version == 6
        host_v6 = self._store_v6
        self._born_v4 = (config.store_host if not host_v6 else "127.0.0.1", 0)
        self._born_v6 = (config.store_host if host_v6 else "::1", 0)
        self.put_lock = PutLock()  # Capability.PUT_LOCK_HOLD (model/putlock.py); a new one at every start
        self.slave = False  # a SLAVE's store (impl/ha_pair.py): every put refused, records come by replication

    # -- writing ---------------------------------------------------------------

    def prepare(self, spec: PutSpec, now: int) -> Plan:
        """Route and validate ``spec`` as CommitLog would; raises ``BrokerError``."""
        self._check_writable(now)
        props = dict(spec.properties)
        topic, queue_id = spec.topic, spec.queue_id
        trailing = self.config.behaviour.properties_trailing_separator
        refusal = check_message(topic, encode_properties(props, trailing=trailing))
        if refusal is not None:
            raise BrokerError(refusal[0], f"{refusal[1]} {refusal[2]}")
        ttype = transaction_type(spec.sys_flag)
        if ttype in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) and self.timer is not None:
            try:  # 5.x's put hook (HookUtils.handleScheduleMessage, model/timer.py)
                topic, queue_id = timer_transform(topic, queue_id, props, spec.delay_level, now, self.timer)
            except TimerRefused as e:
                raise BrokerError(e.code, e.remark) from None
        if ttype in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) and spec.delay_level > 0:
            level = min(spec.delay_level, len(self.delays))
            props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
            props[PROPERTY_REAL_TOPIC] = topic
            props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
            topic, queue_id = SCHEDULE_TOPIC, level - 1
        sys_flag = spec.sys_flag & ~STOREHOST_V6_FLAG
        if self._store_v6:
            sys_flag |= STOREHOST_V6_FLAG
        size = record_size(len(spec.body), topic, props, sys_flag, trailing=trailing)
        refusal = check_encode(
            topic, encode_properties(props, trailing=trailing), len(spec.body), size, self.config.commitlog_file_size
        )
        if refusal is not None:
            raise BrokerError(refusal[0], f"{refusal[1]} {refusal[2]}")
        born = self._born_v6 if sys_flag & BORNHOST_V6_FLAG else self._born_v4
        record = MessageRecord(
            topic=topic,
            queue_id=queue_id,
            body=bytes(spec.body),
            properties=props,
            sys_flag=sys_flag,
            born_ts=spec.born_ts,
            store_ts=now,
            born_host=born,
            reconsume_times=spec.reconsume_times,
            prepared_txn_offset=spec.prepared_txn_offset,
            flag=spec.flag,
            wait=spec.wait,
        )
        self.store.make_room(size)  # getLastMappedFile: CREATE_MAPEDFILE_FAILED (model/filefault.py)
        return Plan(record, size)

    def prepare_batch(self, specs: Sequence[PutSpec], now: int) -> list[Plan]:
        """A batch's items as one append (``model.queues.Store.prepare_batch``'s rules: each item's pairs
        written as given, no delay or timer routing); raises ``BrokerError``."""
        self._check_writable(now)
        trailing = self.config.behaviour.properties_trailing_separator
        file_size = self.config.commitlog_file_size
        sys_flag = STOREHOST_V6_FLAG if self._store_v6 else 0
        plans = []
        for spec in specs:
            pairs = tuple(spec.properties)
            text = encode_properties(pairs, trailing=trailing)
            size = record_size(len(spec.body), spec.topic, pairs, sys_flag, trailing=trailing)
            refusal = check_message(spec.topic, text) or check_encode(spec.topic, text, len(spec.body), size, file_size)
            if refusal is not None:
                raise BrokerError(refusal[0], f"{refusal[1]} {refusal[2]}")
            plans.append(Plan(MessageRecord(
                topic=spec.topic, queue_id=spec.queue_id, body=bytes(spec.body), properties=dict(pairs), pairs=pairs,
                sys_flag=sys_flag, born_ts=spec.born_ts, store_ts=now, born_host=self._born_v4, flag=spec.flag,
                wait=spec.wait,
            ), size))
        total = sum(p.size for p in plans)
        if total + END_FILE_MIN_BLANK_LENGTH > file_size:
            raise BrokerError(ResponseCode.MESSAGE_ILLEGAL,
                              f"batch of {total} bytes does not fit a commitlog file of {file_size} bytes")
        return plans

    def _check_writable(self, now: int) -> None:
        """checkStoreStatus: a SLAVE's store (impl/ha_pair.py) and a store the clean service marked full
        (model/retention.py) refuse every put; isOSPageCacheBusy."""
        if self.slave:
            raise BrokerError(ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_PUT_REMARK)
        if self.store.disk_full:
            raise BrokerError(ResponseCode.SERVICE_NOT_AVAILABLE, DISK_FULL_REMARK)
        if self.lock_state(now, "a put") is LockState.BUSY:
            raise PageCacheBusy(BUSY_CODE, PC_SYNCHRONIZED_REMARK)

    def lock_state(self, now: int, what: str) -> LockState:
        """The put lock's state for ``what`` (which would put); ``PutWouldWait`` while a put would wait."""
        return self.put_lock.gate(now, self.config.os_page_cache_busy_timeout_ms, what)

    def append_batch(self, plans: Sequence[Plan]) -> list[Entry]:
        results = self.store.put_batch([p.record for p in plans])
        return [self._appended(p.record, result) for p, result in zip(plans, results, strict=True)]

    def append(self, plan: Plan) -> Entry:
        return self._appended(plan.record, self.store.put(plan.record))

    def _appended(self, r: MessageRecord, result: Any) -> Entry:
        code = compute_tags_code(r.topic, r.properties, r.store_ts, self.delays)
        return Entry(
            commitlog_offset=result.commitlog_offset,
            size=result.size,
            topic=r.topic,
            queue_id=r.queue_id,
            queue_offset=result.queue_offset,
            body=r.body,
            flag=r.flag,
            props=r.pairs if r.pairs is not None else tuple(r.properties.items()),
            sys_flag=r.sys_flag,
            born_ts=r.born_ts,
            store_ts=r.store_ts,
            reconsume_times=r.reconsume_times,
            prepared_txn_offset=r.prepared_txn_offset,
            tags_code=code,
        )

    def put(self, spec: PutSpec, now: int) -> Entry:
        return self.append(self.prepare(spec, now))

    # -- reading ---------------------------------------------------------------

    def look(self, commitlog_offset: int) -> Entry | None:
        """lookMessageByOffset: the record starting exactly at ``commitlog_offset``."""
        # below the commitlog's min offset (retention) CommitLog.read finds no file: None below
        if commitlog_offset < 0:
            return None
        try:
            record = self.store.read(commitlog_offset)
        except CorruptRecord:
            return None
        return self._entry(record)

    def _entry(self, record: DecodedRecord) -> Entry:
        return entry_of(record, self.tags_code(record.topic, record.properties, record.store_ts))

    def tags_code(self, topic: str, props: Mapping[str, str], store_ts: int) -> int:
        return compute_tags_code(topic, props, store_ts, self.delays)

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.store.max_offset(topic, queue_id)

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self.store.min_offset(topic, queue_id)

    def entry(self, commitlog_offset: int, tags_code: int) -> Entry:
        """The record a consume-queue unit points at, with the unit's tagsCode."""
        return entry_of(self.store.read(commitlog_offset), tags_code)

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        matches: Callable[[int], bool] | None = None,
        props_match: Callable[[Mapping[str, str]], bool] | None = None,
    ) -> GetResult:
        """DefaultMessageStore.getMessage (see the module docstring)."""
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
        file_end = (offset // self.cq_file_units + 1) * self.cq_file_units
        if self.store.unit_gone(topic, queue_id, offset):
            return GetResult(GetStatus.OFFSET_FOUND_NULL, (), file_end, lo, hi)
        limit_units = max(16000, max_nums * CQ_UNIT_BYTES) // CQ_UNIT_BYTES
        end = min(hi, file_end, offset + limit_units)
        found: list[Entry] = []
        total_bytes = 0
        scanned = 0
        position = offset
        full = False
        missed = GetStatus.NO_MATCHED_MESSAGE  # the last unit's reason when nothing is found
        skip_below = -1  # nextPhyFileStartOffset: after a removed unit, the rest of its file is skipped
        while position < end and not full:
            units = self.store.queue_units(topic, queue_id, position, min(_SCAN_CHUNK, end - position))
            if not units:
                break
            for unit in units:
                if unit.commitlog_offset < skip_below:
                    scanned += 1
                    continue
                if found and (
                    max_nums <= len(found)
                    or total_bytes + unit.size > MAX_TRANSFER_BYTES_IN_MEMORY
                    or len(found) > MAX_TRANSFER_COUNT_IN_MEMORY - 1
                ):
                    full = True
                    break
                scanned += 1
                if matches is not None and not matches(unit.tags_code):
                    missed = GetStatus.NO_MATCHED_MESSAGE
                    continue
                if self.store.removed(unit.commitlog_offset):  # a prefix: nothing found yet
                    missed = GetStatus.MESSAGE_WAS_REMOVING
                    skip_below = next_file_start(unit.commitlog_offset, self.config.commitlog_file_size)
                    continue
                entry = self.entry(unit.commitlog_offset, unit.tags_code)
                if props_match is not None and not props_match(entry.properties):  # isMatchedByCommitLog
                    missed = GetStatus.NO_MATCHED_MESSAGE
                    continue
                found.append(entry)
                total_bytes += unit.size
            position += len(units)
        status = GetStatus.FOUND if found else missed
        return GetResult(status, tuple(found), offset + scanned, lo, hi)

    def all_entries(self) -> list[Entry]:
        """Every message record in commitlog order, read back from the files."""
        commitlog = self.store.commitlog
        return [
            self._entry(item)
            for item in commitlog.scan(
                commitlog.min_offset, limit=commitlog.max_offset, check_crc=False
            )
            if isinstance(item, DecodedRecord)
        ]

    def count_records(self) -> int:
        """How many message records the commitlog holds (blank end markers excluded)."""
        commitlog = self.store.commitlog
        n = 0
        for item in commitlog.scan(
            commitlog.min_offset, limit=commitlog.max_offset, check_crc=False
        ):
            if isinstance(item, DecodedRecord):
                n += 1
        return n
