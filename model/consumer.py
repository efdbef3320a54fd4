"""The push consumer core: subscriptions, rebalance, pulling, offset stores.

Theory of operation
-------------------
Follows RocketMQ 4.9 ``C/impl/consumer/DefaultMQPushConsumerImpl`` (pull
loop and its PullCallback), ``PullAPIWrapper.processPullResult`` (client-side
tag filter), ``RebalanceImpl`` / ``RebalancePushImpl`` (allocation, process
queue table, ``computePullFromWhere``, lock / lockAll / unlock), and the
offset stores ``C/consumer/store/RemoteBrokerOffsetStore`` (clustering) and
``LocalFileOffsetStore`` (broadcasting). The two consume services are
subclasses: ``consumer_concurrent.ConcurrentConsumer`` and
``consumer_orderly.OrderlyConsumer``.

Everything runs on the client's ``TimerQueue`` (``client_timers``):

===================  =====================================================
timer kind           what / when (defaults are RocketMQ's)
===================  =====================================================
``rebalance``        at start, when the group's members change, every 20 s
``pull``             per PullRequest: at once after FOUND / NO_MATCHED_MSG,
                     ``long_polling_recheck_ms`` after NO_NEW_MSG, 50 ms
                     under flow control, 1000 ms suspended (``pull_flow``),
                     1000 ms after an error, with no subscription or
                     (orderly) while not locked (4.9.8's
                     pullTimeDelayMillsWhenException)
``consume``          a consume request, due now (the Java thread pool)
``persist``          offsets to the broker / local store: first after 10 s,
                     then every ``persistConsumerOffsetInterval`` (5 s)
``offset_illegal``   10 s after OFFSET_ILLEGAL: set the offset to the
                     broker's next_begin_offset, persist, drop the queue
===================  =====================================================

Pull results: FOUND → next offset = ``next_begin_offset``, the client-side
tag filter (the subscription's tag set; a SQL92 subscription has none:
``model/subscription_data.py``), ``ProcessQueue.put_messages`` and a
consume request; NO_NEW_MSG / NO_MATCHED_MSG → next offset =
``next_begin_offset`` and, when the process queue is empty, an
increase-only offset update (``correctTagsOffset``); OFFSET_ILLEGAL → the
process queue is dropped at once and the offset fixed 10 s later.
In clustering mode each pull first sends the in-memory offset to the broker
when it changed, as the Java pull request piggybacks ``commitOffset``.

First position (``computePullFromWhere``): the stored offset when there is
one; otherwise CONSUME_FROM_FIRST_OFFSET → 0, CONSUME_FROM_LAST_OFFSET → the
queue's max offset, except a retry topic, which starts at 0; CONSUME_FROM_TIMESTAMP → the broker's
``search_offset`` for ``consume_timestamp`` (a retry topic: its max offset; ``model/timesearch.py``).

Trace events this module and its subclasses emit (the client side of the
split; the broker emits ``store``, ``deliver``, ``send_back``,
``schedule_fire``, ``lock``/``unlock``, ``txn_check``, ``txn_discard``):
``consume`` (one per message and result, status SUCCESS / RECONSUME_LATER,
topic/queue/offset of the stored copy that was pulled, ``msg_key`` =
UNIQ_KEY), ``commit_offset`` (whenever the client's offset table changes;
``detail.increase_only``) and ``orderly_start`` / ``orderly_end``.

Simplifications: one broker; no name server (``Directory`` stands in);
the Java client's threads are timers, so a consume request runs to
completion before anything else of the same client (a listener that
advances the clock models a stalled client); broker-side long polling is
approximated by re-pulling ``long_polling_recheck_ms`` after an empty pull;
pull-time hooks
and the MIN/MAX_OFFSET properties the Java client adds
to pulled messages are not modelled. When the broker has no ``max_offset``
method, the max offset is read from an OFFSET_ILLEGAL pull far past the end
(it returns no message).
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from rmqspec.model import offsets_file
from rmqspec.model.allocate import STRATEGIES
from rmqspec.model.client_timers import Timer, TimerQueue
from rmqspec.model.clock import Clock
from rmqspec.model.compression import uncompressed
from rmqspec.model.consumer_check import check_config
from rmqspec.model.directory import RETRY_GROUP_TOPIC_PREFIX, Directory, retry_topic
from rmqspec.model.events import NullRecorder, Recorder
from rmqspec.model.message import MessageQueue, StoredMessage
from rmqspec.model.process_queue import ProcessQueue
from rmqspec.model.pull_flow import FlowThresholds, Suspendable, held_back
from rmqspec.model.results import PullStatus
from rmqspec.model.subscription_data import MessageSelector, Subscription, pull
from rmqspec.model.timesearch import default_consume_timestamp, search_from_timestamp

INTEGER_MAX_VALUE = 2**31 - 1
_PROBE_OFFSET = 2**62  # far beyond any queue: the broker answers OFFSET_ILLEGAL with max_offset


class MessageModel(enum.Enum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


def _non_negative(_inst: object, attr: attrs.Attribute, value: int) -> None:
    if value < 0:
        raise ValueError(f"{attr.name} must be ≥ 0, got {value}")


def _positive(_inst: object, attr: attrs.Attribute, value: int) -> None:
    if value <= 0:
        raise ValueError(f"{attr.name} must be positive, got {value}")


@attrs.frozen
class ConsumerConfig:
    """DefaultMQPushConsumer knobs (snake case), RocketMQ 4.9 defaults."""

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str | None = None  # yyyyMMddHHmmss (UTC); None: 30 min before the consumer's construction
    allocate_strategy: str = attrs.field(
        default="AVG", validator=attrs.validators.in_(tuple(STRATEGIES))
    )
    consume_message_batch_max_size: int = 1  # the ranges of this block: check_config (model/consumer_check.py)
    pull_batch_size: int = 32
    # -1: concurrent 16, orderly Integer.MAX_VALUE
    max_reconsume_times: int = -1
    suspend_current_queue_time_millis: int = 1000
    pull_interval_ms: int = 0
    long_polling_recheck_ms: int = attrs.field(default=1000, validator=_positive)
    pull_exception_delay_ms: int = attrs.field(default=1000, validator=_non_negative)  # ClientConfig's, 4.9.8
    flow_control_delay_ms: int = attrs.field(default=50, validator=_non_negative)
    pull_threshold_for_queue: int = 1000
    consume_concurrently_max_span: int = 2000
    # consumeThreadMin/Max (the listener pool), the per-topic count threshold and the size thresholds
    # (MiB): checked by check_config; -1 is unlimited for the per-topic ones
    consume_thread_min: int = 20
    consume_thread_max: int = 20
    pull_threshold_for_topic: int = -1
    pull_threshold_size_for_queue: int = 100
    pull_threshold_size_for_topic: int = -1
    persist_consumer_offset_interval_ms: int = attrs.field(default=5000, validator=_positive)
    persist_first_delay_ms: int = attrs.field(default=10_000, validator=_non_negative)
    rebalance_interval_ms: int = attrs.field(default=20_000, validator=_positive)
    lock_interval_ms: int = attrs.field(default=20_000, validator=_positive)
    lock_first_delay_ms: int = attrs.field(default=1000, validator=_non_negative)
    client_lock_max_live_ms: int = attrs.field(default=30_000, validator=_positive)
    pull_max_idle_ms: int = attrs.field(default=120_000, validator=_positive)
    local_reconsume_delay_ms: int = attrs.field(default=5000, validator=_non_negative)
    offset_illegal_fix_delay_ms: int = attrs.field(default=10_000, validator=_non_negative)
    unlock_delay_ms: int = attrs.field(default=20_000, validator=_non_negative)
    max_time_consume_continuously_ms: int = attrs.field(default=60_000, validator=_positive)
    # consumeTimeout, minutes: cleanExpiredMsg's period and threshold; a longer consume is TIME_OUT
    consume_timeout_min: int = attrs.field(default=15, validator=_positive)
    # broadcasting: the root of the offsets files (rocketmq.client.localOffsetStoreDir), None: kept in memory
    offset_store_dir: str | None = None

    def __attrs_post_init__(self) -> None:
        check_config(self)  # DefaultMQPushConsumerImpl.checkConfig's ranges, in its order


@attrs.define(eq=False)
class PullRequest:
    mq: MessageQueue
    pq: ProcessQueue
    next_offset: int
    previously_locked: bool = False


# ---------------------------------------------------------------------------
# Offset stores


class OffsetStore(abc.ABC):
    """The client's in-memory offset table (shared by both stores).

    ``update_offset`` is ``updateOffset(mq, offset, increaseOnly)``; it calls
    ``on_update(mq, offset, increase_only)`` when the table changed.
    """

    kind = "memory"

    def __init__(self, on_update: Callable[[MessageQueue, int, bool], None] | None = None) -> None:
        self.table: dict[MessageQueue, int] = {}
        self._on_update = on_update

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> bool:
        prev = self.table.get(mq)
        if prev is not None and (offset == prev or (increase_only and offset < prev)):
            return False
        self.table[mq] = offset
        if self._on_update is not None:
            self._on_update(mq, offset, increase_only)
        return True

    def read_memory(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    @abc.abstractmethod
    def read_store(self, mq: MessageQueue) -> int:
        """The offset in the backing store (the broker, or local memory)."""

    @abc.abstractmethod
    def persist(self, mq: MessageQueue) -> None:
        """Write one queue's offset to the backing store."""

    @abc.abstractmethod
    def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the offsets of ``mqs`` to the backing store."""

    def remove_offset(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)


class RemoteBrokerOffsetStore(OffsetStore):
    """Clustering: offsets live on the broker (QUERY/UPDATE_CONSUMER_OFFSET)."""

    kind = "broker"

    def __init__(
        self,
        broker: Any,
        group: str,
        on_update: Callable[[MessageQueue, int, bool], None] | None = None,
    ) -> None:
        super().__init__(on_update)
        self._broker = broker
        self._group = group
        self.sent: dict[MessageQueue, int] = {}

    def read_store(self, mq: MessageQueue) -> int:
        """READ_FROM_STORE: the broker's offset (−1 none, −2 on a request error)."""
        try:
            offset = self._broker.query_offset(self._group, mq)
        except Exception:
            return -2
        if offset >= 0:
            self.update_offset(mq, offset, False)
        return offset if offset >= 0 else -1

    def _send(self, mq: MessageQueue, offset: int) -> None:
        self._broker.update_offset(self._group, mq, offset)
        self.sent[mq] = offset

    def persist(self, mq: MessageQueue) -> None:
        offset = self.table.get(mq)
        if offset is None:
            return
        try:
            self._send(mq, offset)
        except Exception:
            return

    def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """``persistAll``: send the offsets of ``mqs``; forget offsets of other queues."""
        keep = set(mqs)
        for mq in sorted(self.table, key=lambda q: (q.topic, q.queue_id)):
            if mq in keep:
                self.persist(mq)
        for mq in [q for q in self.table if q not in keep]:
            del self.table[mq]

    def piggyback(self, mq: MessageQueue) -> None:
        """The pull request's commitOffset: send the in-memory offset when > 0 and changed."""
        offset = self.table.get(mq, -1)
        if offset > 0 and self.sent.get(mq) != offset:
            self._send(mq, offset)


class LocalOffsetStore(OffsetStore):
    """Broadcasting: offsets persisted on the client (``LocalFileOffsetStore``).

    With a ``path`` the offsets are the real file, with its ``.bak`` (``model/offsets_file.py``: 4.9.8's
    text and write steps; a restarted client reads it back, or the ``.bak`` when it is missing or damaged,
    or nothing when both are: it then starts at the max offset). Without one the "file" is kept in memory
    (``persisted``).
    """

    kind = "local"

    def __init__(self, on_update: Callable[[MessageQueue, int, bool], None] | None = None,
                 path: Path | None = None) -> None:
        super().__init__(on_update)
        self.persisted: dict[MessageQueue, int] = {}
        self.path = path

    def _read_file(self) -> dict[MessageQueue, int] | None:
        """``readLocalOffset``; None also when it throws (the file and its ``.bak`` damaged)."""
        if self.path is None:
            return self.persisted
        try:
            return offsets_file.read(self.path)
        except offsets_file.OffsetsFileError:
            return None

    def read_store(self, mq: MessageQueue) -> int:
        offset = (self._read_file() or {}).get(mq, -1)
        if offset >= 0:
            self.update_offset(mq, offset, False)
        return offset

    def persist(self, mq: MessageQueue) -> None:
        self.persist_all([mq])

    def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """``persistAll``: the file's entries, those of ``mqs`` in the table overwritten, written back."""
        chosen = [mq for mq in mqs if mq in self.table]
        if self.path is None:
            self.persisted.update((mq, self.table[mq]) for mq in chosen)
            return
        if not chosen:
            return
        try:
            table = offsets_file.read(self.path) or {}
        except offsets_file.OffsetsFileError:
            return  # 4.9.8 logs "readLocalOffset exception" and writes nothing
        table.update((mq, self.table[mq]) for mq in chosen)
        offsets_file.write(self.path, offsets_file.render(table))


# ---------------------------------------------------------------------------
# The push consumer


class ConsumerStateError(RuntimeError):
    """Caller misuse: the consumer is not in a state that allows the call."""


class PushConsumer(abc.ABC, Suspendable):
    """DefaultMQPushConsumerImpl without its consume service (see subclasses)."""

    orderly = False

    def __init__(
        self,
        broker: Any,
        clock: Clock,
        directory: Directory,
        group: str,
        client_id: str,
        listener: Callable[..., Any],
        *,
        config: ConsumerConfig | None = None,
        recorder: Recorder | None = None,
        timers: TimerQueue | None = None,
    ) -> None:
        self.broker = broker
        self.clock = clock
        self.directory = directory
        self.group = group
        self.client_id = client_id
        self.listener = listener
        self.config = config or ConsumerConfig()
        self.consume_timestamp = self.config.consume_timestamp or default_consume_timestamp(clock.now())
        self.recorder: Recorder = recorder if recorder is not None else NullRecorder()
        self.timers = timers if timers is not None else TimerQueue(clock)
        self.subscriptions: dict[str, Subscription] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.running = False
        self._rebalance_timer: Timer | None = None
        self.thresholds = FlowThresholds.of(self.config)  # messageQueueChanged rewrites them (model/pull_flow.py)
        self.offset_store: OffsetStore
        if self.clustering:
            self.offset_store = RemoteBrokerOffsetStore(broker, group, self._offset_updated)
        else:
            root = self.config.offset_store_dir
            self.offset_store = LocalOffsetStore(
                self._offset_updated,
                offsets_file.offsets_path(Path(root), client_id, group) if root is not None else None,
            )

    # -- configuration ---------------------------------------------------
    @property
    def clustering(self) -> bool:
        return self.config.message_model is MessageModel.CLUSTERING

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """``subscribe(topic, "TagA || TagB")``; ``*`` or empty means every tag. A ``MessageSelector``
        (``MessageSelector.by_sql("a > 1")``) is ``subscribe(topic, selector)``: ``model/subscription_data.py``."""
        now = self.clock.now()  # SubscriptionData's subVersion
        if isinstance(expression, MessageSelector):
            self.subscriptions[topic] = Subscription.build(topic, expression, now)
        else:
            self.subscriptions[topic] = Subscription.parse(topic, expression, now)
        if self.running:
            self._arm_rebalance(0)

    def heartbeat_subscriptions(self) -> dict[str, tuple[str, str, int]]:
        """What this client's HEART_BEAT carries for its group: every subscription as
        ``{topic: (expression, expression_type, sub_version)}`` (``Broker.heartbeat``). The reference
        client does not send heartbeats itself (its pulls carry their subscription); a driver may."""
        return {topic: sub.heartbeat_entry() for topic, sub in sorted(self.subscriptions.items())}

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        if self.running:
            self._arm_rebalance(0)

    # -- lifecycle -------------------------------------------------------
    def start(self) -> None:
        """Subscribe the retry topic (clustering), arm the periodic tasks, join the group."""
        if self.running:
            raise ConsumerStateError(f"consumer {self.client_id} already started")
        if self.clustering:
            self.subscriptions[retry_topic(self.group)] = Subscription.parse(
                retry_topic(self.group), "*", self.clock.now()
            )
        self.running = True
        self.timers.schedule(self.config.persist_first_delay_ms, "persist", self._persist_task)
        self._start_service()
        self._arm_rebalance(0)
        self.directory.join(self.group, self)

    def shutdown(self) -> None:
        """Clean shutdown: unlock (orderly), persist offsets, leave the group, drop queues."""
        if not self.running:
            return
        self._shutdown_service()
        self.offset_store.persist_all(list(self.process_queues))
        self.running = False
        self.timers.cancel_all()
        self.directory.leave(self.group, self)
        for pq in self.process_queues.values():
            pq.dropped = True
        self.process_queues.clear()

    def kill(self) -> None:
        """The client process dies: nothing is persisted or unlocked; the group is told."""
        self.running = False
        self.timers.cancel_all()
        self.directory.leave(self.group, self)
        for pq in self.process_queues.values():
            pq.dropped = True
        self.process_queues.clear()

    def on_members_changed(self) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED → rebalanceImmediately."""
        if self.running:
            self._arm_rebalance(0)

    # -- stepping --------------------------------------------------------
    def next_due(self) -> int | None:
        return self.timers.next_due()

    def due(self) -> list[Timer]:
        return self.timers.due()

    def run(self, timer: Timer) -> bool:
        """Run one timer chosen by a driver; False if it was not live."""
        if not self.timers.pop(timer):
            return False
        timer.action()
        return True

    def step(self) -> int:
        """Run every timer due at ``clock.now()`` (including ones armed while running)."""
        ran = 0
        while True:
            due = self.timers.due()
            if not due:
                return ran
            for timer in due:
                if self.run(timer):
                    ran += 1

    def run_until(self, t: int) -> int:
        """Advance a manual clock timer by timer up to ``t``; the broker is not ticked."""
        ran = self.step()
        while True:
            nxt = self.timers.next_due()
            if nxt is None or nxt > t:
                break
            self.clock.set(max(nxt, self.clock.now()))  # type: ignore[attr-defined]
            ran += self.step()
        if self.clock.now() < t:
            self.clock.set(t)  # type: ignore[attr-defined]
        return ran

    # -- events ----------------------------------------------------------
    def _emit(self, event: str, **fields: Any) -> None:
        if not self.clustering:  # a broadcasting client's rows say so (docs/trace-schema.md)
            fields["detail"] = {**(fields.get("detail") or {}), "message_model": MessageModel.BROADCASTING.value}
        self.recorder.emit(
            event, self.clock.now(), actor=self.client_id, client_id=self.client_id,
            group=self.group, **fields,
        )

    def _offset_updated(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        self._emit(
            "commit_offset", topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
            detail={"increase_only": increase_only, "store": self.offset_store.kind},
        )

    def _emit_consume(
        self,
        mq: MessageQueue,
        msg: StoredMessage,
        status: str,
        detail: dict[str, Any] | None = None,
    ) -> None:
        sub = self.subscriptions.get(mq.topic)
        stated = None if sub is None else sub.consume_detail(msg)  # a non-TAG subscription states itself
        if stated is not None:
            detail = {**(detail or {}), **stated}
        self._emit(
            "consume", topic=mq.topic, queue_id=mq.queue_id, queue_offset=msg.queue_offset,
            commitlog_offset=msg.commitlog_offset, msg_key=msg.uniq_key, msg_id=msg.msg_id,
            reconsume_times=msg.reconsume_times, status=status, detail=detail,
        )

    # -- periodic tasks --------------------------------------------------
    def _persist_task(self) -> None:
        if not self.running:
            return
        self.offset_store.persist_all(list(self.process_queues))
        self.timers.schedule(
            self.config.persist_consumer_offset_interval_ms, "persist", self._persist_task
        )

    def _arm_rebalance(self, delay: int) -> None:
        current = self._rebalance_timer
        if current is not None:
            if not current.cancelled and current.due <= self.clock.now() + delay:
                return
            self.timers.cancel(current)
        self._rebalance_timer = self.timers.schedule(delay, "rebalance", self._rebalance_task)

    def _rebalance_task(self) -> None:
        self._rebalance_timer = None
        if not self.running:
            return
        if not self.paused:  # DefaultMQPushConsumerImpl.doRebalance
            self.do_rebalance()
        self._arm_rebalance(self.config.rebalance_interval_ms)

    # -- rebalance (RebalanceImpl) ----------------------------------------
    def do_rebalance(self) -> None:
        for topic in list(self.subscriptions):
            self._rebalance_by_topic(topic)
        for mq in [q for q in self.process_queues if q.topic not in self.subscriptions]:
            self.process_queues.pop(mq).dropped = True

    def assigned(self, topic: str) -> list[MessageQueue]:
        """The queues of ``topic`` this client should own now."""
        if not self.directory.has_route(topic):
            return []
        mqs = self.directory.queues(topic)
        if not self.clustering:
            return mqs
        cids = self.directory.consumer_ids(self.group)
        if not cids:
            return []
        return STRATEGIES[self.config.allocate_strategy](self.client_id, mqs, cids)

    def _rebalance_by_topic(self, topic: str) -> None:
        if not self.directory.has_route(topic):
            return
        allocated = set(self.assigned(topic))
        now = self.clock.now()
        changed = False
        for mq, pq in list(self.process_queues.items()):
            if mq.topic != topic:
                continue
            if mq not in allocated or pq.is_pull_expired(now, self.config.pull_max_idle_ms):
                pq.dropped = True
                if self.remove_unnecessary_message_queue(mq, pq):
                    del self.process_queues[mq]
                    changed = True
        requests: list[PullRequest] = []
        for mq in sorted(allocated, key=lambda q: q.queue_id):
            if mq in self.process_queues:
                continue
            if self.orderly and not self.lock(mq):  # isOrder → lock(mq), in both message models (fidelity CL19)
                continue
            self.offset_store.remove_offset(mq)
            pq = ProcessQueue(created_at=now)
            pq.locked = True
            next_offset = self.compute_pull_from_where(mq)
            if next_offset >= 0:
                self.process_queues[mq] = pq
                requests.append(PullRequest(mq, pq, next_offset))
        for req in requests:
            self._pull_later(req, 0)
        if changed or requests:  # messageQueueChanged
            self.thresholds.on_queues_changed(self.config, len(self.process_queues))

    def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """RebalancePushImpl: persist and forget the offset; orderly clustering unlocks.

        Orderly clustering tries the consume lock (4.9.8: ``tryLock(1000 ms)``;
        the model does not wait): held by a running listener → the queue is
        neither unlocked nor removed, ``try_unlock_times + 1``, False. Free →
        ``unlockDelay``: unlock now when the queue holds no message, else
        ``unlock_delay_ms`` (20 s) later.
        """
        self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)
        if self.orderly and self.clustering:
            if pq.consume_lock_held:
                pq.try_unlock_times += 1
                return False
            if pq.has_temp_message():
                self.timers.schedule(
                    self.config.unlock_delay_ms, "unlock_delay", lambda: self.unlock(mq), key=mq
                )
            else:
                self.unlock(mq)
        return True

    def remove_process_queue(self, mq: MessageQueue) -> None:
        pq = self.process_queues.pop(mq, None)
        if pq is not None:
            pq.dropped = True
            self.remove_unnecessary_message_queue(mq, pq)

    def compute_pull_from_where(self, mq: MessageQueue) -> int:
        last = self.offset_store.read_store(mq)
        if last >= 0:
            return last
        if last != -1:
            return -1
        first = self.config.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        if self.config.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            start = search_from_timestamp(self, mq)
        else:
            start = 0 if first or mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else self.max_offset(mq)
        if start >= 0 and not self.clustering:  # where a broadcasting run starts: what lies below is not its
            self._emit("commit_offset", topic=mq.topic, queue_id=mq.queue_id, queue_offset=start,
                       detail={"from_where": self.config.consume_from_where.value, "store": self.offset_store.kind})
        return start

    def max_offset(self, mq: MessageQueue) -> int:
        """The queue's max offset (−1 when the broker cannot be asked)."""
        try:
            direct = getattr(self.broker, "max_offset", None)
            if callable(direct):
                return int(direct(mq))
            probe = self.broker.pull(self.group, mq, _PROBE_OFFSET, 1, "*")
            return probe.max_offset
        except Exception:
            return -1

    # -- locks (RebalanceImpl.lock / lockAll / unlock) --------------------
    def lock(self, mq: MessageQueue) -> bool:
        try:
            granted = self.broker.lock_batch(self.group, self.client_id, [mq])
        except Exception:
            return False
        now = self.clock.now()
        for q in granted:
            pq = self.process_queues.get(q)
            if pq is not None:
                pq.locked = True
                pq.last_lock_timestamp = now
        return mq in granted

    def lock_all(self) -> None:
        mqs = sorted(self.process_queues, key=lambda q: (q.topic, q.queue_id))
        if not mqs:
            return
        try:
            granted = self.broker.lock_batch(self.group, self.client_id, mqs)
        except Exception:
            return
        now = self.clock.now()
        for mq in mqs:
            pq = self.process_queues.get(mq)
            if pq is None:
                continue
            if mq in granted:
                pq.locked = True
                pq.last_lock_timestamp = now
            else:
                pq.locked = False

    def unlock(self, mq: MessageQueue) -> None:
        try:
            self.broker.unlock_batch(self.group, self.client_id, [mq])
        except Exception:
            return

    def unlock_all(self) -> None:
        mqs = sorted(self.process_queues, key=lambda q: (q.topic, q.queue_id))
        if not mqs:
            return
        try:
            self.broker.unlock_batch(self.group, self.client_id, mqs)
        except Exception:
            return
        for mq in mqs:
            self.process_queues[mq].locked = False

    # -- pulling (DefaultMQPushConsumerImpl.pullMessage) ------------------
    def _pull_later(self, req: PullRequest, delay: int) -> None:
        self.timers.schedule(delay, "pull", lambda: self.pull_message(req), key=req.mq)

    def pull_message(self, req: PullRequest) -> None:
        pq, mq = req.pq, req.mq
        if pq.dropped or not self.running:
            return
        pq.last_pull_timestamp = self.clock.now()
        cfg = self.config
        delay = held_back(cfg, self.thresholds, pq, paused=self.paused, orderly=self.orderly)
        if delay is not None:  # suspended, or cache flow control (model/pull_flow.py)
            self._pull_later(req, delay)
            return
        if self.orderly and not pq.locked:
            self._pull_later(req, cfg.pull_exception_delay_ms)
            return
        if self.orderly and not req.previously_locked:
            offset = self.compute_pull_from_where(mq)
            if offset < 0:
                self._pull_later(req, cfg.pull_exception_delay_ms)
                return
            req.previously_locked = True
            req.next_offset = offset
        sub = self.subscriptions.get(mq.topic)
        if sub is None:
            self._pull_later(req, cfg.pull_exception_delay_ms)
            return
        try:
            if isinstance(self.offset_store, RemoteBrokerOffsetStore):
                self.offset_store.piggyback(mq)
            result = pull(self.broker, self.group, mq, req.next_offset, cfg.pull_batch_size, sub)
        except Exception:
            self._pull_later(req, cfg.pull_exception_delay_ms)
            return
        self._on_pull_result(req, sub, result)

    def _on_pull_result(self, req: PullRequest, sub: Subscription, result: Any) -> None:
        pq, mq = req.pq, req.mq
        if result.status is PullStatus.FOUND:
            req.next_offset = result.next_begin_offset
            msgs = [uncompressed(m) for m in result.messages if sub.matches(m)]  # MessageDecoder.decodes
            if not msgs:
                self._pull_later(req, 0)
                return
            dispatch = pq.put_messages(msgs)
            self._submit_consume_request(msgs, pq, mq, dispatch)
            self._pull_later(req, self.config.pull_interval_ms)
        elif result.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            req.next_offset = result.next_begin_offset
            if pq.msg_count == 0:
                self.offset_store.update_offset(mq, req.next_offset, True)
            held = result.status is PullStatus.NO_NEW_MSG
            delay = self.config.long_polling_recheck_ms if held else 0
            self._pull_later(req, delay)
        else:  # OFFSET_ILLEGAL
            req.next_offset = result.next_begin_offset
            pq.dropped = True
            fixed = result.next_begin_offset

            def fix() -> None:
                self.offset_store.update_offset(mq, fixed, False)
                self.offset_store.persist(mq)
                self.remove_process_queue(mq)

            self.timers.schedule(
                self.config.offset_illegal_fix_delay_ms, "offset_illegal", fix, key=mq
            )

    # -- consume service hooks ---------------------------------------------
    def _start_service(self) -> None:
        """Arm the consume service's periodic tasks."""

    def _shutdown_service(self) -> None:
        """Stop the consume service (orderly clustering unlocks everything)."""

    @abc.abstractmethod
    def _submit_consume_request(
        self, msgs: Sequence[StoredMessage], pq: ProcessQueue, mq: MessageQueue, dispatch: bool
    ) -> None:
        """Hand pulled messages to the consume service (concurrent or orderly)."""

    # -- helpers for drivers and invariants ---------------------------------
    def committed_offset(self, mq: MessageQueue) -> int:
        """The offset in the client's table (−1 when none)."""
        return self.offset_store.read_memory(mq)

    def reset_retry_topic(self, msg: StoredMessage) -> StoredMessage:
        """``resetRetryTopic``: a copy from ``%RETRY%{group}`` gets its RETRY_TOPIC back."""
        original = msg.retry_topic
        if original is not None and msg.topic == retry_topic(self.group):
            return attrs.evolve(msg, topic=original)
        return msg
