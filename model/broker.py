"""``ModelBroker``: the abstract executable broker behind the ``Broker`` protocol.

Theory of operation
-------------------
One object per broker; every operation reads ``clock.now()`` once, validates
its request completely, then changes state and emits trace events (SPEC §8)
through ``recorder`` and notes what happened in the fenced-off ``ghost``
history. A refused request changes nothing. Operations delegate to one module
per concern:

- ``queues.Store`` — topics, commitlog order and offsets, consume queues, pull;
- ``schedule.ScheduleService`` — delay levels (delayed sends and retries);
- ``locks.LockTable`` — orderly-consumption locks;
- ``transactions`` — half/op messages and the check service;
- ``offsets.ConsumerOffsets`` — consumer offsets and their persistence;
- ``crash.Durability`` — what a crash may lose.

Request handling follows RocketMQ 4.9.8's B/processor/SendMessageProcessor
(send, consumerSendMsgBack), PullMessageProcessor, EndTransactionProcessor,
AdminBrokerProcessor (lock/unlock batch) and ConsumerManageProcessor. Routing
decisions come from ``lifecycle`` (``route_send_back``,
``effective_max_reconsume_times``, ``lock_decision``, ``check_decision``,
``is_due``) so the model, the lifecycle tables and their z3 encodings share
one definition.

Four mixins hold the rest of the class: ``broker_txn.Transactions`` (halves,
END_TRANSACTION, op messages), ``broker_services.BackgroundServices`` (``tick``,
check rounds, fires), ``broker_restarts.Restarts`` (flush, close, crash,
recover) and ``broker_pop.PopRequests`` (5.x pop, ack, change invisible time, revive).

``tick()`` runs the background services due at ``now``, in a fixed order:
schedule deliveries (levels ascending), the transaction check (when
``transaction_check_interval_ms`` elapsed since the last run or start),
consumer-offset persistence, delay-progress persistence.

Nondeterminism is explicit: ``retry_queue_chooser`` picks the retry queue
(RocketMQ: random % retryQueueNums; default here: round robin, so queue 0 when
there is one queue) and every choice is appended to ``choices`` with the set
of allowed values; after ``crash`` the allowed survivor counts are
``recovery_choices()``. ``fork()`` (or ``copy.deepcopy``) copies the model
cheaply — records are immutable and shared; the clock and recorder are shared.

Deliberate simplifications (see model/README.md): pulls are served for any
group (no subscription-group check); no long polling; the stored properties
follow SendMessageProcessor (``sendpath``: CLUSTER added, WAIT kept out of a
plain copy, empty values dropped), in insertion order; a broker
assigns UNIQ_KEY when the message has none (RocketMQ 5 does, 4.9 does not);
system topics are registered on first write.
"""

from __future__ import annotations

import contextlib
import copy
import ipaddress
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from rmqspec.model.broker_pop import PopRequests
from rmqspec.model.broker_restarts import Restarts
from rmqspec.model.broker_services import BackgroundServices
from rmqspec.model.broker_txn import Transactions
from rmqspec.model.clock import Clock
from rmqspec.model.committing import CommitRealTime
from rmqspec.model.config import BrokerConfig
from rmqspec.model.crash import BrokerState, Durability
from rmqspec.model.events import NullRecorder, Recorder
from rmqspec.model.flushing import FlushRealTime
from rmqspec.model.ghost import (
    Acked,
    Delivered,
    GhostHistory,
    LockEvent,
    OffsetCommitted,
    SentBack,
    Stored,
)
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.lifecycle import DLQ, effective_max_reconsume_times, route_send_back
from rmqspec.model.locks import LockTable
from rmqspec.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    MessageQueue,
    batch_topic,
    check_topic,
    validate_topic,
)
from rmqspec.model.offset_moved import OFFSET_MOVED_TOPIC, offset_moved_body, offset_moved_properties
from rmqspec.model.offsets import ConsumerOffsets
from rmqspec.model.pop import PopState
from rmqspec.model.protocol import Capability
from rmqspec.model.pullfilter import property_filter
from rmqspec.model.putlock import LockState
from rmqspec.model.queues import (
    DLQ_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    SCHEDULE_TOPIC_QUEUE_NUM,
    PutError,
    PutRequest,
    Record,
    Store,
    SubscriptionError,
    client_pull_status,
    dlq_topic,
    retry_topic,
    tag_filter,
    waiting_due,
)
from rmqspec.model.results import (
    BrokerError,
    PullResult,
    PullStatus,
    ResponseCode,
    SendResult,
    SendStatus,
)
from rmqspec.model.retention import Cleaner
from rmqspec.model.schedule import ScheduleService
from rmqspec.model.sendpath import batch_items, plain_send_properties
from rmqspec.model.subscriptions import ConsumerTable, HeartbeatSubs
from rmqspec.model.timer import TIMER_TOPIC, TimerService
from rmqspec.model.transactions import (
    TransactionService,
)

# retry_queue_chooser(group, retry_queue_nums, sequence number) -> queue id
RetryQueueChooser = Callable[[str, int, int], int]

DLQ_NUMS_PER_GROUP = 1


def round_robin_retry_queue(group: str, nums: int, seq: int) -> int:
    """Default chooser: the n-th retry of the broker goes to queue ``n % nums``."""
    return seq % nums


@attrs.frozen
class GroupConfig:
    retry_max_times: int = 16
    retry_queue_nums: int = 1


@attrs.frozen
class Choice:
    """A nondeterministic choice the model made; ``allowed`` is every value RocketMQ could pick."""

    kind: str
    ts: int
    allowed: range
    taken: int
    detail: tuple[tuple[str, Any], ...] = ()


class ModelBroker(Transactions, BackgroundServices, Restarts, PopRequests):
    """The reference broker (SPEC §3, §4). See the module docstring."""

    capabilities = frozenset({Capability.CRASH, Capability.EXACT_TIME, Capability.CLOSE_REOPEN,
                              Capability.DISK_USAGE, Capability.DISK_STALL, Capability.FILE_CREATE_FAULT,
                              Capability.PUT_LOCK_HOLD, Capability.POP})

    def __init__(
        self,
        clock: Clock,
        config: BrokerConfig | None = None,
        recorder: Recorder | None = None,
        *,
        retry_queue_chooser: RetryQueueChooser = round_robin_retry_queue,
        uniq_keys: UniqKeyFactory | None = None,
    ) -> None:
        self.clock = clock
        self.config = config if config is not None else BrokerConfig()
        self.recorder: Recorder = recorder if recorder is not None else NullRecorder()
        self.retry_queue_chooser = retry_queue_chooser
        self.uniq_keys = uniq_keys or UniqKeyFactory(
            client_ip=self.config.store_host, pid=0, loader_hash=0x4D4F444C
        )
        now = clock.now()
        self.ghost = GhostHistory()  # written, never read, by broker logic
        self.store = Store(self.config)
        self.store.ensure_topic(
            SCHEDULE_TOPIC, max(SCHEDULE_TOPIC_QUEUE_NUM, self.config.max_delay_level)
        )
        self.groups: dict[str, GroupConfig] = {}
        self.offsets = ConsumerOffsets()
        self.offsets_last_persist = now
        self.schedule = ScheduleService(self.config.delay_levels_ms, now)
        self.timer = TimerService(self.config.timer, last_persist=now)  # 5.x (model/timer.py)
        if self.config.timer_running:
            self.store.ensure_topic(TIMER_TOPIC, 1)  # TopicConfigManager, when timerWheelEnable
        self.locks = LockTable()
        self.pop_state = PopState()  # 5.x pop: checkpoints, orderly infos (model/pop.py, broker_pop.py)
        self.consumers = ConsumerTable()  # heartbeats (in memory, like ConsumerManager)
        self.txn = TransactionService(now, self.config.transaction_op_batch_interval_ms)
        self.cleaner = Cleaner(self.config.retention, now)  # retention (model/retention.py)
        # Wall-clock conformance runs check rounds when the remote broker is seen to run them
        # (its round phase is unknown): ``tick`` then leaves them to ``check_round``; likewise the
        # op batches of 5.1.0+ (``flush_ops``, when the remote broker is seen to write them).
        self.external_check_rounds = False
        self.external_op_batches = False
        self.durability = Durability(sync=self.config.flush == "SYNC", flusher=FlushRealTime(
            self.config.flush_commitlog_least_pages, self.config.flush_commitlog_thorough_interval_ms,
            self.config.flush_interval_commitlog_ms, now))
        # TransientStorePool (model/committing.py): the CommitRealTimeService
        self.committer = CommitRealTime(self.config.commit_commitlog_least_pages,
                                        self.config.commit_commitlog_thorough_interval_ms,
                                        interval_ms=self.config.commit_interval_commitlog_ms)
        self.state = BrokerState.RUNNING
        self.retry_seq = 0
        self.choices: list[Choice] = []
        self.forced_retry_queue: int | None = None
        self.high_water_ts = now
        self._store_v6 = ipaddress.ip_address(self.config.store_host).version == 6

    # ------------------------------------------------------------------
    # copying

    def __deepcopy__(self, memo: dict[int, Any]) -> ModelBroker:
        memo[id(self.clock)] = self.clock
        memo[id(self.recorder)] = self.recorder
        memo[id(self.config)] = self.config
        new = object.__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            setattr(new, key, copy.deepcopy(value, memo))
        return new

    def fork(self, recorder: Recorder | None = None) -> ModelBroker:
        """An independent copy sharing the clock; events go to ``recorder`` (default: dropped)."""
        new = copy.deepcopy(self)
        new.recorder = recorder if recorder is not None else NullRecorder()
        return new

    # ------------------------------------------------------------------
    # helpers

    def _now(self) -> int:
        now = self.clock.now()
        self.high_water_ts = max(self.high_water_ts, now)
        return now

    def _require_running(self) -> None:
        if self.state is not BrokerState.RUNNING:
            raise BrokerError(
                ResponseCode.SERVICE_NOT_AVAILABLE, f"broker is {self.state.value.lower()}"
            )

    def _emit(self, event: str, ts: int, **fields: Any) -> None:
        self.recorder.emit(event, ts, **fields)

    def _msg_id(self, record: Record) -> str:
        return record.msg_id(self.config)

    def _copy(self, record: Record) -> dict[str, Any]:
        """The trace columns naming one stored copy: where it is and who it is."""
        return {
            "topic": record.topic,
            "queue_id": record.queue_id,
            "queue_offset": record.queue_offset,
            "commitlog_offset": record.commitlog_offset,
            "msg_key": record.uniq_key,
            "msg_id": self._msg_id(record),
            "reconsume_times": record.reconsume_times,
        }

    def _put(self, request: PutRequest, now: int) -> Record:
        record = self.store.put(request, now)
        self.durability.on_append(len(self.store.records), request.wait)
        self._note_store(record, now)
        return record

    def _deliver_ts(self, record: Record) -> int | None:
        return waiting_due(record, self.config.timer_precision_ms)

    def _note_store(self, record: Record, now: int) -> None:
        scheduled = record.topic == SCHEDULE_TOPIC
        deliver_ts = self._deliver_ts(record)
        level = record.queue_id + 1 if scheduled else None
        self.ghost.note_stored(
            Stored(
                now,
                record.topic,
                record.queue_id,
                record.queue_offset,
                record.commitlog_offset,
                record.uniq_key,
                record.reconsume_times,
                deliver_ts,
            )
        )
        self._emit(
            "store",
            now,
            actor="broker",
            **self._copy(record),
            delay_level=level,
            deliver_ts=deliver_ts,
        )

    def _check_send_target(self, topic: str, queue_id: int) -> None:
        refusal = validate_topic(topic)
        if refusal is not None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, refusal)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise BrokerError(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        if not self.store.has_topic(topic) and not topic.startswith(RETRY_PREFIX):
            raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        nums = self.store.topics.get(topic, 1)
        if not 0 <= queue_id < nums:
            raise BrokerError(self.config.behaviour.illegal_queue_code, f"request queueId[{queue_id}] is illegal")
        if topic.startswith(RETRY_PREFIX) and topic[len(RETRY_PREFIX) :] not in self.groups:
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

    # ------------------------------------------------------------------
    # admin

    def create_topic(self, topic: str, queue_nums: int) -> None:
        """UPDATE_AND_CREATE_TOPIC: create, or change the queue count of an existing topic."""
        self._require_running()
        check_topic(topic)
        if queue_nums <= 0:
            raise ValueError(f"queue_nums must be positive, got {queue_nums}")
        self.store.topics[topic] = queue_nums

    def create_group(
        self, group: str, retry_max_times: int = 16, retry_queue_nums: int = 1
    ) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (durable, like subscriptionGroup.json)."""
        self._require_running()
        self.groups[group] = GroupConfig(retry_max_times, retry_queue_nums)

    # ------------------------------------------------------------------
    # producing

    def send(self, msg: Message, queue_id: int) -> SendResult:
        """SEND_MESSAGE. A delayed message answers with its schedule-queue offset."""
        return self._send(msg, queue_id, "SEND_OK")

    def send_oneway(self, msg: Message, queue_id: int) -> None:
        """SEND_MESSAGE with the oneway flag (sendOneway): stored as a send is, nothing answered — a
        refusal included (SendMessageProcessor writes no response to a oneway request). Its ``send``
        event has status ONEWAY: no producer ever saw it acknowledged."""
        with contextlib.suppress(BrokerError):
            self._send(msg, queue_id, "ONEWAY")

    def send_batch(self, msgs: Sequence[Message], queue_id: int) -> SendResult:
        """SEND_BATCH_MESSAGE (``DefaultMQProducer.send(Collection)``): the messages stored as one append
        (``Store.prepare_batch``: consecutive offsets, one file) with one born and one store timestamp,
        each with its own properties and the batch's (``batch_item_properties``); a retry topic or a batch
        body past 4 MiB is refused (MESSAGE_ILLEGAL). The answer names the first item's offsets and every
        item's msgId and UNIQ_KEY, joined by commas (AppendMessageResult's msgId; the client's)."""
        self._require_running()
        now = self._now()
        self._reject_when_busy(now)
        topic = batch_topic(msgs)
        self._check_send_target(topic, queue_id)
        items = batch_items(msgs, lambda m: self._wire_props(m, now), self.config)
        reqs = [PutRequest(topic=topic, queue_id=queue_id, body=msg.body, flag=msg.flag, born_ts=now, properties=props)
                for msg, (props, _uniq) in zip(msgs, items, strict=True)]
        keys = [uniq for _props, uniq in items]
        try:
            records = self.store.prepare_batch(reqs, now)
        except PutError as e:
            raise BrokerError(e.code, e.remark) from None
        wait = msgs[0].waits_for_flush  # MessageBatch.generateFromList takes the first message's WAIT
        in_time = True
        for i, (record, uniq) in enumerate(zip(records, keys, strict=True)):
            self.store.append(record)
            # one flush request for the batch: stalled for one item, stalled for all
            in_time = self.durability.on_append(len(self.store.records), wait, now)
            self._note_store(record, now)
            self.ghost.note_acked(Acked(now, "plain", uniq, topic, queue_id, record.commitlog_offset,
                                        record.queue_offset, self.durability.sync and wait and in_time))
            self._emit("send", now, actor="broker", topic=topic, queue_id=queue_id, queue_offset=record.queue_offset,
                       commitlog_offset=record.commitlog_offset, msg_key=uniq, msg_id=self._msg_id(record),
                       reconsume_times=0, status="SEND_OK" if in_time else "FLUSH_DISK_TIMEOUT",
                       detail={"batch_index": i, "batch_size": len(records)})
        status = SendStatus.SEND_OK if in_time else SendStatus.FLUSH_DISK_TIMEOUT
        return SendResult(status, ",".join(self._msg_id(r) for r in records), ",".join(keys),
                          records[0].queue_offset, records[0].commitlog_offset)

    def _send(self, msg: Message, queue_id: int, status: str) -> SendResult:
        self._require_running()
        now = self._now()
        self._reject_when_busy(now)
        self._check_send_target(msg.topic, queue_id)
        wire, uniq = self._wire_props(msg, now)
        props = plain_send_properties(wire, self.config, delayed=msg.delay_level > 0)
        request = PutRequest(
            topic=msg.topic,
            queue_id=queue_id,
            body=msg.body,
            properties=props,
            born_ts=now,
            flag=msg.flag,
            delay_level=msg.delay_level,
            sys_flag=msg.sys_flag,
        )
        try:
            record = self.store.prepare(request, now)
        except PutError as e:
            raise BrokerError(e.code, e.remark) from None
        self.store.ensure_topic(msg.topic, 1)  # a %RETRY% topic created on demand
        self.store.append(record)
        in_time = self.durability.on_append(len(self.store.records), msg.waits_for_flush, now)
        if not in_time and status == "SEND_OK":
            status = "FLUSH_DISK_TIMEOUT"  # stored all the same (SendMessageProcessor: code 10)
        self._note_store(record, now)
        delayed = record.topic == SCHEDULE_TOPIC
        timer = record.topic == TIMER_TOPIC
        self.ghost.note_acked(
            Acked(
                now,
                "delayed" if delayed else "timer" if timer else "plain",
                uniq,
                msg.topic,
                queue_id,
                record.commitlog_offset,
                record.queue_offset,
                self.durability.sync and msg.waits_for_flush and in_time,
            )
        )
        self._emit(
            "send",
            now,
            actor="broker",
            topic=msg.topic,
            queue_id=queue_id,
            queue_offset=record.queue_offset,
            commitlog_offset=record.commitlog_offset,
            msg_key=uniq,
            msg_id=self._msg_id(record),
            reconsume_times=0,
            delay_level=record.queue_id + 1 if delayed else None,
            deliver_ts=self._deliver_ts(record),
            status=status,
            **({"detail": {"send_mode": "ONEWAY"}} if status == "ONEWAY" else {}),
        )
        return SendResult(
            SendStatus.SEND_OK if in_time else SendStatus.FLUSH_DISK_TIMEOUT,
            self._msg_id(record),
            uniq,
            record.queue_offset,
            record.commitlog_offset,
        )

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
        """PULL_MESSAGE, answered at once (no long polling), for any group. ``subscription=None`` is a
        pull without the subscription flag: the group's heartbeated subscription filters it
        (``subscriptions.ConsumerTable.resolve`` with the request's ``sub_version``)."""
        self._require_running()
        now = self._now()
        if not self.store.has_topic(mq.topic):
            raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{mq.topic}] not exist")
        if not 0 <= mq.queue_id < self.store.topics[mq.topic]:
            raise BrokerError(self.config.behaviour.illegal_queue_code, f"queueId[{mq.queue_id}] is illegal")
        if subscription is None:
            subscription, expression_type = self.consumers.resolve(
                group, mq.topic, sub_version, self.config.behaviour.suggest_todo())
        props_match = property_filter(subscription, expression_type, self.config.enable_property_filter)
        try:
            matches = tag_filter(subscription) if props_match is None else None
        except SubscriptionError as e:
            raise BrokerError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e)) from None
        res = self.store.get_message(mq.topic, mq.queue_id, offset, max_nums, matches, props_match)
        messages = tuple(r.to_stored(self.config) for r in res.records)
        for r in res.records:
            self.ghost.note_delivered(
                Delivered(
                    now,
                    group,
                    r.topic,
                    r.queue_id,
                    r.queue_offset,
                    r.commitlog_offset,
                    r.uniq_key,
                    r.reconsume_times,
                )
            )
            self._emit(
                "deliver",
                now,
                actor=group,
                group=group,
                **self._copy(r),
            )
        status = client_pull_status(res.status, offset)
        if status is PullStatus.OFFSET_ILLEGAL and self.config.behaviour.offset_moved_event:
            # PULL_OFFSET_MOVED: the master records the event (not 5.2+: model/versions.py)
            with contextlib.suppress(PutError):  # generateOffsetMovedEvent ignores a refused put (disk full)
                self._put(PutRequest(OFFSET_MOVED_TOPIC, 0, offset_moved_body(
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
        """HEART_BEAT of one consumer client: ``{topic: (expression, expression_type, sub_version)}``;
        ``subscriptions`` module docstring."""
        self._require_running()
        self.consumers.heartbeat(group, client_id, subscriptions)

    def unregister_consumer(self, group: str, client_id: str) -> None:
        """UNREGISTER_CLIENT of a consumer client (the last one takes the group's subscriptions)."""
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
        now = self._now()
        if self._lock_gate(now, "a send-back") is LockState.BUSY:  # rejectRequest (model/putlock.py)
            return ResponseCode.SYSTEM_BUSY
        forced, self.forced_retry_queue = self.forced_retry_queue, None  # one send-back only
        config = self.groups.get(group)
        if config is None:
            return ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        if config.retry_queue_nums <= 0:
            return ResponseCode.SUCCESS
        retry = retry_topic(group)
        if forced is not None:
            queue_id = forced
        else:
            queue_id = self.retry_queue_chooser(group, config.retry_queue_nums, self.retry_seq)
        if not 0 <= queue_id < config.retry_queue_nums:
            raise ValueError(
                f"retry queue chooser returned {queue_id} of {config.retry_queue_nums}"
            )
        self.store.ensure_topic(retry, config.retry_queue_nums)
        original = self.store.look(commitlog_offset)
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
            topic, queue_id, put_level = dlq_topic(group), 0, 0
            props[PROPERTY_DELAY_TIME_LEVEL] = "0"
        else:
            topic, put_level = retry, level
            props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props[PROPERTY_ORIGIN_MESSAGE_ID] = original.prop(
            PROPERTY_ORIGIN_MESSAGE_ID
        ) or self._msg_id(original)
        request = PutRequest(
            topic=topic,
            queue_id=queue_id,
            body=original.body,
            properties=props,
            sys_flag=original.sys_flag,
            born_ts=original.born_ts,
            flag=original.flag,
            reconsume_times=original.reconsume_times + 1,
            delay_level=put_level,
        )
        try:
            record = self.store.prepare(request, now)
        except PutError:
            return ResponseCode.SYSTEM_ERROR
        if route == DLQ:
            self.store.ensure_topic(topic, DLQ_NUMS_PER_GROUP)
        else:
            self.choices.append(
                Choice(
                    "retry_queue",
                    now,
                    range(config.retry_queue_nums),
                    queue_id,
                    (("group", group), ("commitlog_offset", record.commitlog_offset)),
                )
            )
            self.retry_seq += 1
        self.store.append(record)
        self.durability.on_append(len(self.store.records), wait=False)  # asyncConsumerSendMsgBack: WAIT=false
        self._note_store(record, now)
        deliver_ts = record.tags_code if route != DLQ else None
        reported_level = level if route != DLQ else delay_level
        self.ghost.note_sent_back(
            SentBack(
                now,
                group,
                route,
                original.uniq_key,
                original.commitlog_offset,
                record.commitlog_offset,
                record.reconsume_times,
                reported_level,
                deliver_ts,
            )
        )
        self._emit(
            "send_back",
            now,
            actor=group,
            group=group,
            topic=original.topic,
            queue_id=original.queue_id,
            queue_offset=original.queue_offset,
            commitlog_offset=original.commitlog_offset,
            msg_key=original.uniq_key,
            msg_id=self._msg_id(original),
            reconsume_times=record.reconsume_times,
            delay_level=reported_level,
            deliver_ts=deliver_ts,
            status=route,
            detail={
                "new_topic": topic,
                "new_queue_id": queue_id,
                "new_commitlog_offset": record.commitlog_offset,
                "max": max_times,  # the max reconsume times in force (request's or group's)
            },
        )
        return ResponseCode.SUCCESS

    def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET: stored as given (the client keeps it increase-only)."""
        self._require_running()
        now = self._now()
        self.offsets.update(group, mq, offset)
        self._note_offset(now, group, mq, offset, actor=group)

    def _note_offset(self, now: int, group: str, mq: MessageQueue, offset: int, actor: str) -> None:
        self.ghost.note_committed(OffsetCommitted(now, group, mq.topic, mq.queue_id, offset))
        self._emit(
            "commit_offset",
            now,
            actor=actor,
            group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
        )

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

    def search_offset(self, topic: str, queue_id: int, timestamp: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: getOffsetInQueueByTime (model/timesearch.py); 0 without a queue."""
        self._require_running()
        return self.store.offset_by_time(topic, queue_id, timestamp)

    # ------------------------------------------------------------------
    # orderly locks

    def lock_batch(
        self, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> frozenset[MessageQueue]:
        """LOCK_BATCH_MQ: returns the queues granted (renewed, free or expired)."""
        self._require_running()
        now = self._now()
        granted = []
        for mq, ok in self.locks.lock_batch(
            group, client_id, mqs, now, self.config.broker_lock_max_live_ms
        ):
            status = "GRANTED" if ok else "DENIED"
            self.ghost.note_lock(LockEvent(now, group, mq.topic, mq.queue_id, client_id, status))
            self._emit(
                "lock",
                now,
                actor=client_id,
                group=group,
                topic=mq.topic,
                queue_id=mq.queue_id,
                client_id=client_id,
                status=status,
            )
            if ok:
                granted.append(mq)
        return frozenset(granted)

    def group_locked(self, group: str) -> bool:
        """Whether an orderly lock of ``group`` is live (5.1.1+'s %RETRY% send rule)."""
        return self.locks.group_locked(group, self._now(), self.config.broker_lock_max_live_ms)

    def unlock_batch(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ: only the holder's entries are removed."""
        self._require_running()
        now = self._now()
        for mq in self.locks.unlock_batch(group, client_id, mqs):
            self.ghost.note_lock(
                LockEvent(now, group, mq.topic, mq.queue_id, client_id, "RELEASED")
            )
            self._emit(
                "unlock",
                now,
                actor=client_id,
                group=group,
                topic=mq.topic,
                queue_id=mq.queue_id,
                client_id=client_id,
            )

    # ------------------------------------------------------------------
    # inspection (tests, well-formedness, lockstep checkers)

    def retry_queue_choices(self, group: str) -> range:
        """The retry queues RocketMQ may pick for ``group``'s next send-back (random % nums)."""
        config = self.groups.get(group)
        return range(max(config.retry_queue_nums, 1) if config else 1)

    def force_retry_queue(self, queue_id: int | None) -> None:
        """Make the next successful-path send-back use ``queue_id`` (a lockstep fork's choice)."""
        self.forced_retry_queue = queue_id

    def records(self) -> tuple[Record, ...]:
        return tuple(self.store.records)

    def queue_messages(self, mq: MessageQueue) -> list[Record]:
        return [
            self.store.entry(mq.topic, mq.queue_id, i)
            for i in range(self.store.max_offset(mq.topic, mq.queue_id))
        ]

    def topic_exists(self, topic: str) -> bool:
        return self.store.has_topic(topic)

    @staticmethod
    def is_system_topic(topic: str) -> bool:
        return topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith((RETRY_PREFIX, DLQ_PREFIX))
