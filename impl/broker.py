"""``MmapBroker``: the ``Broker`` protocol on the mmap store (RocketMQ 4.9's on-disk format).

Theory of operation
-------------------
One object per broker directory. Every operation reads ``clock.now()`` once,
validates its request completely, then writes and emits SPEC §8 events through
``recorder`` (``broker_events``) at the same points as ``ModelBroker``; a
refused request writes nothing. The broker must be *observably identical* to
the model for the same operation sequence — results, codes, stored messages
(commitlog offsets, msg ids, properties), check requests and events — so the
conformance machine can run both in lockstep. Concerns, one module each:

- ``broker_store.BrokerLog`` — delay routing on put, size limits, lookups,
  getMessage (S/CommitLog, S/DefaultMessageStore) over ``store.MessageStore``;
- ``schedule_service`` — S/schedule/ScheduleMessageService, delayOffset.json;
- ``timer_service`` — 5.x S/timer/TimerMessageStore (the model's wheel), config/timercheck;
- ``txn_service`` — B/transaction/* and EndTransactionProcessor;
- ``locks`` — B/client/rebalance/RebalanceLockManager (memory only);
- ``offsets`` — B/offset/ConsumerOffsetManager, consumerOffset.json;
- ``metadata`` — TopicConfigManager / SubscriptionGroupManager (topics.json,
  subscriptionGroup.json, durable on every change);
- mixins: ``broker_lifecycle`` (flush, close, reopen, crashes, recovery), ``broker_views``
  (read-only views), ``broker_batch``, ``broker_retention``, ``broker_search``, ``broker_pop`` (5.x pop, its
  state in ``pop_service``).

Request handling follows B/processor/SendMessageProcessor (send, a oneway send answering nothing,
consumerSendMsgBack), PullMessageProcessor, EndTransactionProcessor, AdminBrokerProcessor (lock /
unlock batch) and ConsumerManageProcessor; the routing decisions are the shared ``lifecycle``
functions (``route_send_back``, ``effective_max_reconsume_times``, ``lock_decision``,
``check_decision``, ``is_due`` / ``needs_correction``).

``tick()`` runs the background services due at ``now`` in the model's fixed
order: schedule deliveries (levels ascending), on 5.x the timer wheel (enqueue, due
copies delivered, its checkpoint every ``timer_flush_interval_ms``) and the pop revive service,
the transaction check (when ``transaction_check_interval_ms`` elapsed since the last run or the
start), consumer-offset persistence (with the pop revive progress), the order infos (every 10 s),
delay-progress persistence.

Lifecycle: ``open`` recovers the store (normal or abnormal by the abort file,
SPEC §5) and loads topics, groups, consumer offsets and delay progress;
``close`` flushes, persists offsets and progress and removes ``abort``;
``reopen`` opens again; ``crash("kill")`` drops the process (every written byte
survives, in-memory tables are lost), ``crash("power")`` also loses every
byte past the flushed position; ``recover`` reopens with what survived. The
lock table and the check timer never survive a restart; the UNIQ_KEY generator
and the retry-queue counter belong to the object and carry on, like the
model's.

Deliberate choices shared with the model (model/README.md): pulls are served for any group; no
long polling; the stored properties follow SendMessageProcessor (``model.sendpath``: CLUSTER added,
WAIT kept out of a plain copy, empty values dropped); the broker assigns UNIQ_KEY when a message has
none (same deterministic generator as the model); system topics are registered on first write; the
retry queue is chosen round robin (RocketMQ: random) unless a ``retry_queue_chooser`` is given.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from rmqspec.impl.broker_batch import BatchSends
from rmqspec.impl.broker_events import BrokerEvents
from rmqspec.impl.broker_lifecycle import CLOSED, RUNNING, Lifecycle
from rmqspec.impl.broker_pop import PopRequests
from rmqspec.impl.broker_retention import Retention
from rmqspec.impl.broker_search import TimeSearch
from rmqspec.impl.broker_store import (
    SCHEDULE_TOPIC,
    BrokerLog,
    Entry,
    PageCacheBusy,
    PutSpec,
    client_pull_status,
    settle_flushed,
    store_config,
)
from rmqspec.impl.broker_views import BrokerViews
from rmqspec.impl.codec import DecodedRecord
from rmqspec.impl.commitlog import FileCreateFailed
from rmqspec.impl.locks import LockManager
from rmqspec.impl.metadata import GroupConfig, Metadata
from rmqspec.impl.offsets import ConsumerOffsetTable
from rmqspec.impl.schedule_service import ScheduleService
from rmqspec.impl.store import MessageStore
from rmqspec.impl.timer_service import DiskTimerService
from rmqspec.impl.txn_service import (
    CID_RMQ_SYS_TRANS,
    HALF_TOPIC,
    OP_TOPIC,
    OpBatcher,
    TxnChecker,
    TxnHooks,
    check_prepare,
    commit_spec,
    half_spec,
    op_spec,
    real_target_unparsable,
)
from rmqspec.model.clock import Clock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import NullRecorder, Recorder
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.lifecycle import DLQ, effective_max_reconsume_times, route_send_back
from rmqspec.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    MessageQueue,
    check_topic,
    validate_topic,
)
from rmqspec.model.offset_moved import OFFSET_MOVED_TOPIC, offset_moved_body, offset_moved_properties
from rmqspec.model.protocol import Capability
from rmqspec.model.pullfilter import property_filter
from rmqspec.model.putlock import REJECT_CODE, REJECT_REMARK, LockState
from rmqspec.model.queues import DLQ_PREFIX, NOT_ALLOWED_SEND_TOPICS, RETRY_PREFIX, SubscriptionError, tag_filter
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
from rmqspec.model.retention import Cleaner
from rmqspec.model.sendpath import half_send_properties, plain_send_properties
from rmqspec.model.subscriptions import ConsumerTable, HeartbeatSubs
from rmqspec.model.timer import TIMER_TOPIC

SCHEDULE_TOPIC_QUEUE_NUM = 18  # TopicConfigManager
DLQ_NUMS_PER_GROUP = 1


# retry_queue_chooser(group, retry_queue_nums, sequence number) -> queue id
RetryQueueChooser = Callable[[str, int, int], int]


def round_robin_retry_queue(group: str, nums: int, seq: int) -> int:
    """The n-th successful send-back of the broker goes to retry queue ``n % nums``."""
    return seq % nums


class MmapBroker(Lifecycle, BrokerViews, BatchSends, Retention, TimeSearch, PopRequests):
    """The concrete broker (SPEC §3–§5). Build with ``MmapBroker.open``."""

    capabilities = frozenset({Capability.CRASH, Capability.EXACT_TIME, Capability.CLOSE_REOPEN,
                              Capability.ROCKETMQ_STORE, Capability.DISK_USAGE, Capability.DISK_STALL,
                              Capability.FILE_CREATE_FAULT, Capability.PUT_LOCK_HOLD})

    def __init__(
        self,
        root: Path,
        clock: Clock,
        config: BrokerConfig,
        recorder: Recorder | None,
        retry_queue_chooser: RetryQueueChooser,
        uniq_keys: UniqKeyFactory | None,
    ) -> None:
        # Use MmapBroker.open(); __init__ only sets fields.
        self.root = root
        self.clock = clock
        self.config = config
        if config.behaviour.pop:  # 5.x: POP_MESSAGE and the rest (impl/broker_pop.py)
            self.capabilities = type(self).capabilities | {Capability.POP}
        self.recorder: Recorder = recorder if recorder is not None else NullRecorder()
        self.events = BrokerEvents(self.recorder, config)
        self.retry_queue_chooser = retry_queue_chooser
        self.uniq_keys = uniq_keys or UniqKeyFactory(
            client_ip=config.store_host, pid=0, loader_hash=0x4D4F444C
        )
        self.retry_seq = 0
        self.state = CLOSED
        self.slave = False  # brokerRole SLAVE (impl/ha_pair.py): the store refuses puts (checkStoreStatus)
        self._store_v6 = ipaddress.ip_address(config.store_host).version == 6
        self._records = 0  # message records in the commitlog
        self._flushed = 0  # of which durable
        self._unflushed: list[tuple[int, str | None]] = []  # (end, key) of the records past ``_flushed``
        self._crash_kind: str | None = None
        self.store: MessageStore | None = None
        self.log: BrokerLog
        self.meta: Metadata
        self.offsets: ConsumerOffsetTable
        self.schedule: ScheduleService
        self.timer: DiskTimerService | None = None  # 5.x profiles
        self.locks = LockManager()
        self.consumers = ConsumerTable()  # heartbeats (in memory, like ConsumerManager)
        self.txn: TxnChecker
        self.offsets_last_persist = 0
        self.cleaner = Cleaner(config.retention, clock.now())

    @classmethod
    def open(
        cls,
        root: str | os.PathLike[str],
        clock: Clock,
        config: BrokerConfig | None = None,
        recorder: Recorder | None = None,
        *,
        retry_queue_chooser: RetryQueueChooser = round_robin_retry_queue,
        uniq_keys: UniqKeyFactory | None = None,
    ) -> MmapBroker:
        """Open (creating if needed) and recover the broker stored under ``root``."""
        broker = cls(
            Path(root),
            clock,
            config if config is not None else BrokerConfig(),
            recorder,
            retry_queue_chooser,
            uniq_keys,
        )
        broker._start(broker.clock.now())
        return broker

    # ------------------------------------------------------------------
    # start / restart

    def _start(self, now: int) -> None:
        """Open and recover the store, then load every persisted table."""
        self.store = MessageStore.open(self.root, config=store_config(self.config))
        self.log = BrokerLog(self.store, self.config)
        self.log.slave = self.slave
        self.meta = Metadata(self.store.config_dir)
        self.meta.ensure_topic(
            SCHEDULE_TOPIC, max(SCHEDULE_TOPIC_QUEUE_NUM, self.config.max_delay_level)
        )
        self._records = self.log.count_records()
        self._flushed = self._records
        self._unflushed.clear()
        self.offsets = ConsumerOffsetTable(self.store.consumer_offset_path)
        self.offsets_last_persist = now
        self.schedule = ScheduleService(self.config.delay_levels_ms, self.store.delay_offset_path, now)
        self.schedule.load(self.log, now)
        self.timer = None
        if self.config.timer_running:
            self.meta.ensure_topic(TIMER_TOPIC, 1)  # TopicConfigManager, when timerWheelEnable
            self.timer = DiskTimerService.open(self.config.timer, self.store.config_dir, self.log, now)
        self._pop_start(now)  # checkpoints, acks, revive progress, order infos (impl/pop_service.py)
        self.locks.clear()
        self.consumers.clear()
        self.txn = TxnChecker(now)
        self.ops = OpBatcher(now, self.config.transaction_op_batch_interval_ms)  # in memory: lost in a crash
        self._crash_kind = None
        self.store.flushing.start(now)
        self.cleaner.restart(now)
        self.state = RUNNING

    # ------------------------------------------------------------------
    # helpers

    def _require_running(self) -> None:
        if self.state != RUNNING:
            raise BrokerError(ResponseCode.SERVICE_NOT_AVAILABLE, f"broker is {self.state.lower()}")

    def _append(self, spec: PutSpec, now: int) -> Entry:
        return self._written(self.log.put(spec, now), now)

    def _written(self, entry: Entry, now: int) -> Entry:
        self._records += 1
        self._unflushed.append((entry.commitlog_offset + entry.size, entry.uniq_key))
        # a put that waited (SYNC): the group commit flushed all
        self._flushed += settle_flushed(self._unflushed, self.log.store.flushed_offset)
        self.events.store(entry, now)
        return entry

    def append_replica(self, start: int, data: bytes) -> list[DecodedRecord]:
        """A SLAVE's HA write (impl/ha.py): the master's commitlog bytes ``data`` at ``start``, appended and
        dispatched (``MessageStore.append_data``); the records it completed. No event: the pair writes the
        ``replicate`` row."""
        self._require_running()
        assert self.store is not None
        records = self.store.append_data(start, data)
        for r in records:
            self._records += 1
            key = r.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            self._unflushed.append((r.commitlog_offset + r.size, key))
        return records

    def _note_written(self, entry: Entry, now: int) -> None:
        self._written(entry, now)

    def _check_send_target(self, topic: str, queue_id: int) -> None:
        refusal = validate_topic(topic)
        if refusal is not None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, refusal)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise BrokerError(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        if not self.meta.has_topic(topic) and not topic.startswith(RETRY_PREFIX):
            raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        nums = self.meta.queue_nums(topic, 1)
        if not 0 <= queue_id < nums:
            raise BrokerError(self.config.behaviour.illegal_queue_code, f"request queueId[{queue_id}] is illegal")
        if topic.startswith(RETRY_PREFIX) and topic[len(RETRY_PREFIX) :] not in self.meta.groups:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {topic[len(RETRY_PREFIX) :]}",
            )

    def _wire_props(self, msg: Message, now: int) -> tuple[dict[str, str], str]:
        props = msg.wire_properties()
        uniq = msg.uniq_key
        if uniq is None:
            uniq = self.uniq_keys.next(now)
            props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
        return props, uniq

    def _msg_id(self, entry: Entry) -> str:
        return entry.msg_id(self.config)

    # ------------------------------------------------------------------
    # admin

    def create_topic(self, topic: str, queue_nums: int) -> None:
        """UPDATE_AND_CREATE_TOPIC: create, or change the queue count (topics.json)."""
        self._require_running()
        check_topic(topic)
        if queue_nums <= 0:
            raise ValueError(f"queue_nums must be positive, got {queue_nums}")
        self.meta.set_topic(topic, queue_nums)

    def create_group(self, group: str, retry_max_times: int = 16, retry_queue_nums: int = 1) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (subscriptionGroup.json)."""
        self._require_running()
        self.meta.set_group(group, GroupConfig(retry_max_times, retry_queue_nums))

    # ------------------------------------------------------------------
    # producing

    def send(self, msg: Message, queue_id: int, *, _oneway: bool = False) -> SendResult:
        """SEND_MESSAGE. A delayed message answers with its schedule-queue offset."""
        self._require_running()
        now = self.clock.now()
        self._reject_when_busy(now)
        self._check_send_target(msg.topic, queue_id)
        wire, uniq = self._wire_props(msg, now)
        props = plain_send_properties(wire, self.config, delayed=msg.delay_level > 0)
        spec = PutSpec(
            topic=msg.topic,
            queue_id=queue_id,
            body=msg.body,
            properties=tuple(props.items()),
            born_ts=now,
            flag=msg.flag,
            delay_level=msg.delay_level,
            sys_flag=msg.sys_flag,
            wait=msg.waits_for_flush,
        )
        plan = self.log.prepare(spec, now)
        self.meta.ensure_topic(msg.topic, 1)  # a %RETRY% topic created on demand
        entry = self._written(self.log.append(plan), now)
        status = self._put_status(spec.wait, now)
        self.events.send(entry, now, msg.topic, queue_id, uniq, oneway=_oneway, status=status)
        return SendResult(status, self._msg_id(entry), uniq, entry.queue_offset, entry.commitlog_offset)

    def _put_status(self, wait: bool, now: int) -> SendStatus:
        """FLUSH_DISK_TIMEOUT for a SYNC put that waited on a stalled disk (``impl/flushing.py``), else SEND_OK."""
        assert self.store is not None
        stalled = self.config.flush == "SYNC" and wait and self.store.flushing.stalled(now)
        return SendStatus.FLUSH_DISK_TIMEOUT if stalled else SendStatus.SEND_OK

    def stall_disk(self, ms: int) -> None:
        """``Capability.DISK_STALL``: from now, no flush completes for ``ms``."""
        self._require_running()
        assert self.store is not None
        self.store.flushing.stall(self.clock.now() + ms)

    def hold_put_lock(self, ms: int) -> None:
        """``Capability.PUT_LOCK_HOLD``: a slow put holds the put lock from now for ``ms`` (model/putlock.py)."""
        self._require_running()
        self.log.put_lock.hold(self.clock.now(), ms)

    def _reject_when_busy(self, now: int) -> None:
        """SendMessageProcessor.rejectRequest while isOSPageCacheBusy: SYSTEM_BUSY before anything is done."""
        if self.log.lock_state(now, "a send") is LockState.BUSY:
            raise BrokerError(REJECT_CODE, REJECT_REMARK)

    def block_next_file(self) -> int:
        """``Capability.FILE_CREATE_FAULT``: a directory stands at the next commitlog file's path, so creating
        it fails (CREATE_MAPEDFILE_FAILED) until ``unblock_next_file`` or a shutdown (``model/filefault.py``)."""
        self._require_running()
        assert self.store is not None
        return self.store.commitlog.block_next_file()

    def unblock_next_file(self) -> None:
        """``Capability.FILE_CREATE_FAULT``: the obstacle removed."""
        self._require_running()
        assert self.store is not None
        self.store.commitlog.unblock_next_file()

    def send_oneway(self, msg: Message, queue_id: int) -> None:
        """SEND_MESSAGE with the oneway flag: stored as a send is; nothing answered, a refusal included."""
        with contextlib.suppress(BrokerError):
            self.send(msg, queue_id, _oneway=True)

    def send_half(self, msg: Message, queue_id: int, producer_group: str) -> SendResult:
        """SEND_MESSAGE with TRAN_MSG: the half goes to RMQ_SYS_TRANS_HALF_TOPIC queue 0."""
        self._require_running()
        now = self.clock.now()
        self._reject_when_busy(now)
        self._check_send_target(msg.topic, queue_id)
        wire, uniq = self._wire_props(msg, now)
        wire.pop(PROPERTY_DELAY_TIME_LEVEL, None)  # the producer clears DELAY
        wire[PROPERTY_TRANSACTION_PREPARED] = "true"
        wire[PROPERTY_PRODUCER_GROUP] = producer_group
        props = half_send_properties(wire, self.config)
        spec = half_spec(msg.topic, queue_id, msg.body, msg.flag, props, now, msg.sys_flag, msg.waits_for_flush)
        plan = self.log.prepare(spec, now)
        self.meta.ensure_topic(HALF_TOPIC, 1)
        entry = self._written(self.log.append(plan), now)
        status = self._put_status(spec.wait, now)
        self.events.txn_half(entry, now, producer_group, msg.topic, queue_id, uniq, status.value)
        return SendResult(status, self._msg_id(entry), uniq, entry.queue_offset, entry.commitlog_offset)

    def end_transaction(
        self,
        producer_group: str,
        commitlog_offset: int,
        tran_state_table_offset: int,
        action: TxnAction,
        from_check: bool,
    ) -> ResponseCode:
        """END_TRANSACTION. UNKNOWN does nothing; COMMIT/ROLLBACK validate, then write."""
        self._require_running()
        now = self.clock.now()
        half = self.log.look(commitlog_offset)
        txn_id = half.uniq_key if half is not None else None
        if action is TxnAction.UNKNOWN:
            self.events.txn_end(now, producer_group, txn_id, commitlog_offset, action.value, from_check)
            return ResponseCode.SUCCESS
        if check_prepare(half, producer_group, commitlog_offset, tran_state_table_offset):
            return ResponseCode.SYSTEM_ERROR
        assert half is not None
        if action is TxnAction.COMMIT:
            if real_target_unparsable(half):
                return ResponseCode.SYSTEM_ERROR
            self.log.lock_state(now, "END_TRANSACTION's commit")  # its rejectRequest is false (model/putlock.py)
            try:
                plan = self.log.prepare(commit_spec(half, commitlog_offset,
                                                    self.config.behaviour.commit_drops_real_queue), now)
            except (FileCreateFailed, PageCacheBusy):  # sendFinalMessage: SYSTEM_ERROR for both
                return ResponseCode.SYSTEM_ERROR  # model/filefault.py, model/putlock.py
            except BrokerError as refused:  # sendFinalMessage's mapping: a full disk's refusal keeps its code
                return ResponseCode.SERVICE_NOT_AVAILABLE if refused.code is ResponseCode.SERVICE_NOT_AVAILABLE \
                    else ResponseCode.MESSAGE_ILLEGAL
            real = self._written(self.log.append(plan), now)
            topic = half.prop(PROPERTY_REAL_TOPIC) or ""
            queue_id = int(half.prop(PROPERTY_REAL_QUEUE_ID) or "0")
            self.events.send(real, now, topic, queue_id, txn_id, group=producer_group, txn_id=txn_id)
        if self.config.behaviour.op_batch:
            self.ops.offer(half.queue_id, half.queue_offset, now)
        else:  # answered unflushed
            self.log.lock_state(now, "END_TRANSACTION's op")
            self._write_ops([(half.queue_id, str(half.queue_offset))], now, wait=False)
        self.events.txn_end(now, producer_group, txn_id, commitlog_offset, action.value, from_check)
        return ResponseCode.SUCCESS

    # ------------------------------------------------------------------
    # consuming

    def pull(
        self,
        group: str,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        subscription: str | None = "*",
        expression_type: str = "TAG",
        sub_version: int = 0,
    ) -> PullResult:
        """PULL_MESSAGE, answered at once (no long polling), for any group; ``subscription=None``:
        filtered by the group's heartbeated subscription (``model/subscriptions.py``)."""
        self._require_running()
        now = self.clock.now()
        if not self.meta.has_topic(mq.topic):
            raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{mq.topic}] not exist")
        if not 0 <= mq.queue_id < self.meta.topics[mq.topic]:
            raise BrokerError(self.config.behaviour.illegal_queue_code, f"queueId[{mq.queue_id}] is illegal")
        if subscription is None:
            subscription, expression_type = self.consumers.resolve(
                group, mq.topic, sub_version, self.config.behaviour.suggest_todo())
        props_match = property_filter(subscription, expression_type, self.config.enable_property_filter)
        try:
            matches = tag_filter(subscription) if props_match is None else None
        except SubscriptionError as e:
            raise BrokerError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e)) from None
        res = self.log.get_message(mq.topic, mq.queue_id, offset, max_nums, matches, props_match)
        messages = tuple(e.to_stored(self.config) for e in res.entries)
        for e in res.entries:
            self.events.deliver(e, now, group)
        status = client_pull_status(res.status, offset)
        if status is PullStatus.OFFSET_ILLEGAL and self.config.behaviour.offset_moved_event:
            # PULL_OFFSET_MOVED: the master records the event (not 5.2+: model/versions.py)
            with contextlib.suppress(BrokerError):  # generateOffsetMovedEvent ignores a refused put (disk full)
                self._append(PutSpec(OFFSET_MOVED_TOPIC, 0, offset_moved_body(
                    group, self.config.broker_name, mq.topic, mq.queue_id, offset, res.next_begin_offset),
                    offset_moved_properties(group), born_ts=now), now)
        return PullResult(
            status,
            messages,
            res.next_begin_offset,
            res.min_offset,
            res.max_offset,
        )

    def heartbeat(self, group: str, client_id: str, subscriptions: HeartbeatSubs) -> None:
        """HEART_BEAT of one consumer client (``model/subscriptions.py``)."""
        self._require_running()
        self.consumers.heartbeat(group, client_id, subscriptions)

    def unregister_consumer(self, group: str, client_id: str) -> None:
        """UNREGISTER_CLIENT of a consumer client."""
        self._require_running()
        self.consumers.unregister(group, client_id)

    def send_back(
        self,
        group: str,
        commitlog_offset: int,
        delay_level: int,
        origin_msg_id: str | None,
        max_reconsume_times: int | None,
    ) -> ResponseCode:
        """CONSUMER_SEND_MSG_BACK (``origin_msg_id`` is only informational in 4.9)."""
        self._require_running()
        now = self.clock.now()
        if self.log.lock_state(now, "a send-back") is LockState.BUSY:  # rejectRequest (model/putlock.py)
            return ResponseCode.SYSTEM_BUSY
        config = self.meta.groups.get(group)
        if config is None:
            return ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        if config.retry_queue_nums <= 0:
            return ResponseCode.SUCCESS
        retry = RETRY_PREFIX + group
        queue_id = self.retry_queue_chooser(group, config.retry_queue_nums, self.retry_seq)
        if not 0 <= queue_id < config.retry_queue_nums:
            raise ValueError(f"retry queue chooser returned {queue_id} of {config.retry_queue_nums}")
        self.meta.ensure_topic(retry, config.retry_queue_nums)
        original = self.log.look(commitlog_offset)
        if original is None:
            return ResponseCode.SYSTEM_ERROR
        props = original.properties
        if PROPERTY_RETRY_TOPIC not in props:
            props[PROPERTY_RETRY_TOPIC] = original.topic
        props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        max_times = effective_max_reconsume_times(max_reconsume_times, config.retry_max_times)
        route, level = route_send_back(
            original.reconsume_times, max_times, delay_level, self.config.max_delay_level
        )
        if route == DLQ:
            topic, queue_id, put_level = DLQ_PREFIX + group, 0, 0
            props[PROPERTY_DELAY_TIME_LEVEL] = "0"
        else:
            topic, put_level = retry, level
            props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props[PROPERTY_ORIGIN_MESSAGE_ID] = original.prop(
            PROPERTY_ORIGIN_MESSAGE_ID
        ) or self._msg_id(original)
        spec = PutSpec(
            topic=topic,
            queue_id=queue_id,
            body=original.body,
            properties=tuple(props.items()),
            sys_flag=original.sys_flag,
            born_ts=original.born_ts,
            flag=original.flag,
            reconsume_times=original.reconsume_times + 1,
            delay_level=put_level,
            wait=False,  # asyncConsumerSendMsgBack: setWaitStoreMsgOK(false)
        )
        try:
            plan = self.log.prepare(spec, now)
        except BrokerError:
            return ResponseCode.SYSTEM_ERROR
        if route == DLQ:
            self.meta.ensure_topic(topic, DLQ_NUMS_PER_GROUP)
        else:
            self.retry_seq += 1
        copy = self._written(self.log.append(plan), now)
        deliver_ts = copy.tags_code if route != DLQ else None
        reported_level = level if route != DLQ else delay_level
        self.events.send_back(
            original, copy, now, group, route, reported_level, deliver_ts, (topic, queue_id), max_times
        )
        return ResponseCode.SUCCESS

    def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET: stored as given (the client keeps it increase-only)."""
        self._require_running()
        now = self.clock.now()
        self.offsets.update(group, mq, offset)
        self.events.commit_offset(now, group, mq, offset, actor=group)

    def query_offset(self, group: str, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET (ConsumerManageProcessor.queryConsumerOffset): the committed
        offset; never committed: 0 while the queue's min offset is ≤ 0 (its first message is
        not swapped out: ``checkInDiskByConsumeOffset`` is false on stores this size), else −1
        (QUERY_NOT_FOUND); 5.1.0+ also needs a message at offset 0 (``checkInMemByConsumeOffset``)."""
        self._require_running()
        offset = self.offsets.query(group, mq)
        if offset >= 0:
            return offset
        if self.config.behaviour.offset_zero_needs_message and self.store.max_offset(mq.topic, mq.queue_id) <= 0:
            return -1
        return 0 if self.store.min_offset(mq.topic, mq.queue_id) <= 0 else -1

    # ------------------------------------------------------------------
    # orderly locks

    def lock_batch(
        self, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> frozenset[MessageQueue]:
        """LOCK_BATCH_MQ: returns the queues granted (renewed, free or expired)."""
        self._require_running()
        now = self.clock.now()
        granted = []
        for mq, ok in self.locks.lock_batch(
            group, client_id, mqs, now, self.config.broker_lock_max_live_ms
        ):
            self.events.lock(now, group, mq, client_id, "GRANTED" if ok else "DENIED")
            if ok:
                granted.append(mq)
        return frozenset(granted)

    def group_locked(self, group: str) -> bool:
        """Whether an orderly lock of ``group`` is live (5.1.1+'s %RETRY% send rule)."""
        return self.locks.group_locked(group, self.clock.now(), self.config.broker_lock_max_live_ms)

    def unlock_batch(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ: only the holder's entries are removed."""
        self._require_running()
        now = self.clock.now()
        for mq in self.locks.unlock_batch(group, client_id, mqs):
            self.events.unlock(now, group, mq, client_id)

    # ------------------------------------------------------------------
    # background services

    def tick(self) -> list[CheckRequest]:
        """Run the services due at ``clock.now()``; returns the transaction checks sent."""
        self._require_running()
        now = self.clock.now()
        self.log.lock_state(now, "a tick")  # its services may put (model/putlock.py)
        self.log.store.commit_real_time(now)  # the CommitRealTimeService's (a TransientStorePool: model/committing.py)
        self.log.store.flushing.group_commit(now)  # the GroupCommitService's pass (SYNC: model/crash.py)
        self.log.store.flushing.flush_real_time(now)  # the FlushRealTimeService's (ASYNC: model/flushing.py)
        self._flushed += settle_flushed(self._unflushed, self.log.store.flushed_offset)
        self._clean(now)  # retention first (model/retention.py)
        self.schedule.deliver_due(self.log, now, lambda e, n, lv, ts: self._fired(now, e, n, lv, ts))
        if self.timer is not None:
            self.timer.run(self.log, now, lambda entry, new, ts: self._timer_fired(now, entry, new, ts))
            if self.config.behaviour.pop:
                self._revive(now)  # PopReviveService (impl/broker_pop.py)
        if self.config.behaviour.op_batch and self.ops.wake(now):
            self._write_ops(self.ops.drain(now), now)
        requests: list[CheckRequest] = []
        if self.txn.due(now, self.config.transaction_check_interval_ms):
            requests = self.txn.check(self.log, self.offsets, self.config, now, self._hooks(now))
        if now < self.offsets_last_persist:
            self.offsets_last_persist = now
        if now - self.offsets_last_persist >= self.config.flush_consumer_offset_interval_ms:
            self.offsets.persist()
            self._pop_persist_progress()  # the revive offsets are consumer offsets (impl/pop_service.py)
            self.offsets_last_persist = now
        self.pop_state.maybe_persist_orders(now)  # consumerOrderInfo.json, every 10 s
        self.schedule.maybe_persist(now, self.config.flush_delay_offset_interval_ms)
        return requests

    def _write_ops(self, ops: list[tuple[int, str]], now: int, wait: bool = True) -> None:
        """Op messages; one the store refuses is not written, nothing else happens (``ModelBroker._write_ops``)."""
        for queue_id, body in ops:
            self.meta.ensure_topic(OP_TOPIC, 1)
            with contextlib.suppress(BrokerError):
                self._append(op_spec(queue_id, body, now, self._store_v6, wait), now)

    def flush_ops(self) -> None:
        """5.1.0+: write every pending op message now."""
        self._require_running()
        now = self.clock.now()
        self._write_ops(self.ops.drain(now, every=True), now)

    def _fired(self, now: int, entry: Entry, new: Entry | None, level: int, deliver_ts: int) -> None:
        if new is None:
            return  # a delayed copy of a half: dropped, nothing stored
        self._written(new, now)
        self.events.schedule_fire(entry, new, now, level, deliver_ts)

    def _timer_fired(self, now: int, entry: Entry, new: Entry, deliver_ts: int) -> None:
        self._written(new, now)
        self.events.timer_fire(entry, new, now, deliver_ts)

    def _hooks(self, now: int) -> TxnHooks:
        return TxnHooks(
            ensure_topic=self.meta.ensure_topic,
            queue_nums=lambda topic: self.meta.topics[topic],
            on_store=lambda entry: self._note_written(entry, now),
            on_check=lambda old, new, times: self.events.txn_check(old, new, now, times),
            on_discard=lambda half, _copy: self.events.txn_discard(half, now),
            on_offset=lambda mq, offset: self.events.commit_offset(
                now, CID_RMQ_SYS_TRANS, mq, offset, actor="broker"
            ),
        )


def factory(
    clock: Clock,
    config: BrokerConfig | None = None,
    workdir: str | os.PathLike[str] | None = None,
    recorder: Recorder | None = None,
) -> MmapBroker:
    """A ``MmapBroker`` whose store lives in ``workdir`` (required: the store is files)."""
    if workdir is None:
        raise ValueError("the mmap broker needs a workdir for its store")
    return MmapBroker.open(workdir, clock, config, recorder)


__all__ = ["MmapBroker", "factory", "round_robin_retry_queue", "store_config"]
