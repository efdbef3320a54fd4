"""Pop consumption (RocketMQ 5.x): invisible time, ack, change of invisible time, revive, orderly pop.

Theory of operation
-------------------
Pure state and arithmetic, no broker: ``model/broker_pop.py`` wires it into ``ModelBroker`` (as
``model/timer.py`` is wired by ``broker_services``). Follows the 5.3.3 sources (tag
``rocketmq-all-5.3.3``): B/processor/PopMessageProcessor, AckMessageProcessor,
ChangeInvisibleTimeProcessor, PopReviveService, PopBufferMergeService, B/offset/ConsumerOrderInfoManager,
M/KeyBuilder, M/PopAckConstants, R/protocol/header/ExtraInfoUtil, S/pop/PopCheckPoint (B = broker,
M = common, R = remoting, S = store; each under ``src/main/java/org/apache/rocketmq/…``).

**Pop** (POP_MESSAGE, 200050) hands a group up to 32 messages of a topic (one queue, or every queue
from ``randomQ % readQueueNums`` on when the queue id is −1) and makes them invisible to the group for
``invisibleTime`` ms. The group's pop position in a queue is its ordinary consumer offset
(ConsumerOffsetManager, shared with pull; a first pop starts at the queue's min offset for
``initMode`` MIN — the header's default — and for every ``%RETRY%`` topic, else at the last message,
``max − 1``, unless offset 0 is still in memory, and commits it). A concurrent pop writes one
*checkpoint* per queue it read (PopCheckPoint: start offset, the popped messages' offsets as diffs,
pop time, invisible time, an ack bitmap) and moves the group's offset past what it scanned at once
(PopBufferMergeService commits a ``justOffset`` checkpoint's next-begin offset as soon as the
checkpoint is stored; with ``enablePopBufferMerge`` off — the default — that is within ms). A popped
message carries its *handle* (``PopHandle``, ExtraInfoUtil's extra info: checkpoint start offset, pop
time, invisible time, revive queue id, retry flag, broker name, queue id, queue offset).

**Retry topic.** With probability ``popFromRetryProbability`` % (20) a concurrent pop reads the
group's pop retry topic first (``%RETRY%<group>_<topic>``, or ``%RETRY%<group>+<topic>`` with
``enableRetryTopicV2``, false by default in 5.3.3 and in the newest stored source); otherwise it reads
it after the topic when the topic did not fill the request. One ``randomQ = random.nextInt(100)`` per
request decides both that and the first queue. A retry message is answered under the original topic
with ``POP_CK`` (its extra info) in its properties. An orderly pop never reads the retry topic.

**Revive** (PopReviveService): checkpoints and acks are timer messages on
``rmq_sys_REVIVE_LOG_<cluster>`` (``reviveQueueNum`` = 8 queues; a concurrent pop takes queue
``ckMessageNumber++ % 8``, an orderly one the marker 999), the checkpoint due at ``reviveTime − 1000``
(``reviveTime = popTime + invisibleTime``), an ack at ``reviveTime``. The service revives a checkpoint
once the newest revive-log time it has seen is more than ``ackTimeInterval + 1 s`` (2 s) past the
revive time, so an ack that reaches the log before that cancels the revive; the model revives at the
first ``tick`` with ``now − reviveTime > 2000`` (``revive_due``; the real service is later by up to a
few seconds: its scan sleeps, ``reviveInterval`` 1 s). Each un-acked message is re-put into the pop
retry topic, queue 0 (the checkpoint's own topic when it already is a ``%RETRY%`` topic), with body,
tags, flag, sys flag and born time kept, every property kept (``revived_properties``), ``1ST_POP_TIME``
= the checkpoint's pop time added when the message had none or was never reconsumed, and
``reconsumeTimes + 1`` (5.5.x: ``ORIGIN_GROUP`` = the group added too, and a checkpoint written by a
change of invisible time with ``suspend`` keeps the reconsume times). The retry topic is created on
demand with one queue and the group's offset 0. No dead letter: the broker revives for ever (the client
decides).

**Ack** (ACK_MESSAGE 200051, BATCH_ACK_MESSAGE 200151) of a concurrent pop appends an ack to the
revive log; it is never checked against a checkpoint. Refusals: unknown topic → TOPIC_NOT_EXIST, queue
id outside ``[0, readQueueNums)`` → MESSAGE_ILLEGAL, offset outside ``[min, max]`` → NO_MESSAGE (208);
anything else is SUCCESS — an ack of an unknown or already revived handle too (it matches nothing).
A batch ack skips offsets outside ``[min, max]`` silently; an empty one is NO_MESSAGE.

**Change invisible time** (CHANGE_MESSAGE_INVISIBLETIME 200053) of a concurrent handle writes a new
one-message checkpoint (pop time = now, the new invisible time, start offset = the message's offset)
and then acks the old handle; the answer's pop time and invisible time make the new handle. It is
refused with NO_MESSAGE for an offset outside ``[min, max)``; it does not look for the old checkpoint,
so changing an already revived handle makes the message revive again later.

**Orderly pop** (``order=true``; ConsumerOrderInfoManager) keeps per (topic, group, queue) an
``OrderInfo``: the attempt id, pop time, invisible time, the popped offsets, an ack bitmap, per-offset
next visible times (a change of invisible time) and consumed counts. A queue is *blocked* while one of
its popped messages is un-acked and ``now <`` its next visible time — unless the request's attempt id is
the info's (a retried request). An unblocked orderly pop reads from the group's committed offset, so an
expired batch is handed out again (its messages' consumed counts + 1: ``orderCountInfo``) — no revive,
no retry topic. An orderly ack (``commitAndNext``) sets the message's bit and commits the first
un-acked offset (all acked: last + 1) as the group's offset; an ack below the committed offset, or with
a pop time that is not the info's, changes nothing (SUCCESS); an offset the info does not hold is
MESSAGE_ILLEGAL. An orderly change of invisible time sets that offset's next visible time to
``now + invisibleTime`` (answer: the same pop time, ``invisibleTime = now + new − popTime``).

**Crashes.** Checkpoints and acks are commitlog records (timer messages) in 5.3.3, kept by a kill (the
page cache survives). The revive progress is the consumer offset of ``CID_RMQ_SYS_REVIVE_GROUP`` on the
revive topic, persisted with the consumer offsets (every ``flushConsumerOffsetInterval``): after a crash
the service re-scans from it, so a checkpoint revived after the last persist is revived again
(``PopState.restore``). The pop offsets are consumer offsets too: a crash takes the moves since the last
persist, and those messages are popped again. ConsumerOrderInfoManager is persisted every 10 s and at
shutdown (consumerOrderInfo.json). The model keeps checkpoints and acks in memory and makes them survive
every crash (docs/fidelity.md POP-2: 5.3.3 under ASYNC flush may lose unflushed ones on a power loss).

Simplifications (docs/fidelity.md POP-*): checkpoints and acks are state here, not records, so the
model's commitlog offsets do not count the revive log's and the timer wheel's records; no long polling
(an empty pop answers POLLING_NOT_FOUND at once), no ``restNum``; no PopBufferMergeService merging (off
by default); a revive put that fails rewrites the checkpoint 10 s later every time (5.3.3: 10, 20, 30 …
s by the rewrite count); two checkpoints sharing a merge key (a change of invisible time in the pop's
millisecond) are both kept, an ack going to the oldest holding its offset un-acked (5.3.3's scan keeps one
per key: POP-9); ``randomQ`` is the broker's injected choice (``broker_pop``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from rmqspec.model.message import StoredMessage
from rmqspec.model.results import BrokerError, ResponseCode

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"  # PopAckConstants.REVIVE_TOPIC (+ cluster name)
POP_ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE: the handle of an orderly pop
ACK_TIME_INTERVAL_MS = 1000  # PopAckConstants.ackTimeInterval
REVIVE_MARGIN_MS = ACK_TIME_INTERVAL_MS + 1000  # mergeAndRevive: endTime - reviveTime > ackTimeInterval + SECOND
MAX_POP_NUMS = 32  # PopMessageProcessor: maxMsgNums > 32 is INVALID_PARAMETER
RANDOM_Q_BOUND = 100  # random.nextInt(100)
CK_REWRITE_MS = 10_000  # PopReviveService.rePutCK: the first of ckRewriteIntervalsInSeconds (10 s)
ORDER_INFO_PERSIST_MS = 10_000  # BrokerController: consumerOrderInfoManager.persist every 10 s
PROPERTY_POP_CK = "POP_CK"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
PROPERTY_ORIGIN_GROUP = "ORIGIN_GROUP"
RETRY_PREFIX = "%RETRY%"
# ExtraInfoUtil's retry flag: the handle's topic is the normal topic, a v1 or a v2 pop retry topic
NORMAL, RETRY_V1, RETRY_V2 = "0", "1", "2"
SEPARATOR_V1, SEPARATOR_V2 = "_", "+"
INIT_MIN, INIT_MAX = 0, 1  # ConsumeInitMode
# RequestCode: what a 4.9 broker answers REQUEST_CODE_NOT_SUPPORTED to (" request type <code> not supported")
POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, BATCH_ACK_MESSAGE = 200050, 200051, 200053, 200151


class PopRefused(Exception):
    """A pop request the broker refused; nothing changed. ``code`` is RocketMQ's response code."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(f"{code.name}: {remark}")
        self.code = code
        self.remark = remark


@attrs.frozen
class PopSettings:
    """The BrokerConfig keys of pop (5.3.3 defaults)."""

    revive_queue_num: int = 8  # reviveQueueNum
    pop_from_retry_probability: int = 20  # popFromRetryProbability (percent)
    enable_retry_topic_v2: bool = False  # enableRetryTopicV2
    retrieve_from_retry_v1: bool = True  # retrieveMessageFromPopRetryTopicV1


def pop_retry_topic(topic: str, group: str, v2: bool) -> str:
    """KeyBuilder.buildPopRetryTopic: ``%RETRY%<group>_<topic>`` (v2: ``+``)."""
    return RETRY_PREFIX + group + (SEPARATOR_V2 if v2 else SEPARATOR_V1) + topic


def retry_flag(topic: str) -> str:
    """ExtraInfoUtil.getRetry: a ``%RETRY%`` topic holding ``+`` is v2, any other ``%RETRY%`` topic v1."""
    if topic.startswith(RETRY_PREFIX) and SEPARATOR_V2 in topic:
        return RETRY_V2
    return RETRY_V1 if topic.startswith(RETRY_PREFIX) else NORMAL


def real_topic(topic: str, group: str, flag: str) -> str:
    """ExtraInfoUtil.getRealTopic: the topic a handle's message lives in (the client acks with it)."""
    if flag == NORMAL:
        return topic
    if flag in (RETRY_V1, RETRY_V2):
        return pop_retry_topic(topic, group, flag == RETRY_V2)
    raise ValueError(f"retry flag must be one of {NORMAL!r}, {RETRY_V1!r}, {RETRY_V2!r}, got {flag!r}")


def normal_topic(topic: str, group: str) -> str:
    """KeyBuilder.parseNormalTopic(topic, cid): the topic a pop retry topic stands for."""
    for sep in (SEPARATOR_V2, SEPARATOR_V1):
        prefix = RETRY_PREFIX + group + sep
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return topic


@attrs.frozen
class PopHandle:
    """A popped message's handle: ExtraInfoUtil.buildExtraInfo's eight fields (the ``POP_CK`` property,
    the ack's and change's ``extraInfo``). Enough to ack it, change it, and find its checkpoint."""

    ck_queue_offset: int  # the checkpoint's start offset (an orderly pop's: the start it read from)
    pop_time: int
    invisible_time: int
    revive_qid: int  # POP_ORDER_REVIVE_QUEUE for an orderly pop
    retry: str  # NORMAL, RETRY_V1, RETRY_V2
    broker_name: str
    queue_id: int
    queue_offset: int

    @property
    def order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    @property
    def revive_time(self) -> int:
        """When the message is visible again unless acked (PopCheckPoint.getReviveTime)."""
        return self.pop_time + self.invisible_time

    def extra_info(self) -> str:
        """The wire text, fields separated by MessageConst.KEY_SEPARATOR (a blank)."""
        return " ".join(str(v) for v in attrs.astuple(self))

    @classmethod
    def parse(cls, text: str) -> PopHandle:
        """The handle an extra info names (ExtraInfoUtil.split: 8 blank-separated fields, or 7 whose ck offset
        is the message's); ``ValueError`` naming the field when one is not of its kind."""
        parts = text.split(" ")
        while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
            parts.pop()
        if len(parts) not in (7, 8):
            raise ValueError(f"extra info needs 7 or 8 blank-separated fields: {text!r}")
        ck, pop_time, invisible, qid, flag, broker, queue_id = parts[:7]
        real_topic("", "", flag)  # the flag check
        if not broker:
            raise ValueError("broker_name: empty")
        offset = java_long(parts[7], "queue_offset") if len(parts) == 8 else java_long(ck, "ck_queue_offset")
        return cls(java_long(ck, "ck_queue_offset"), java_long(pop_time, "pop_time"),
                   java_long(invisible, "invisible_time"), java_long(qid, "revive_qid"), flag, broker,
                   java_long(queue_id, "queue_id"), offset)


def java_long(text: str, field: str) -> int:
    """Long.valueOf / Integer.parseInt: an optional sign and decimal digits (any Unicode decimal digit, as
    Character.digit reads them; no blanks, no underscores, no sign alone); ``ValueError`` naming ``field``."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isdecimal():
        raise ValueError(f"{field}: not a number: {text!r}")
    return int(text)


class PopStatus(enum.Enum):
    """The client's PopStatus: SUCCESS is FOUND; POLLING_TIMEOUT (nothing found; the model does not long-poll)
    is POLLING_NOT_FOUND; POLLING_FULL is never answered by the model."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


@attrs.frozen
class PoppedMessage:
    """One message of a pop answer: as the consumer decodes it (a retry message under its original topic,
    with ``POP_CK``), its handle, and for an orderly pop the times it was handed out before
    (``orderCountInfo``; None for a concurrent pop, whose count is ``message.reconsume_times``)."""

    message: StoredMessage
    handle: PopHandle
    order_count: int | None = None


@attrs.frozen
class PopResult:
    """POP_MESSAGE's answer: the messages and the response header's pop time, invisible time and revive
    queue id (``restNum`` is not modelled)."""

    status: PopStatus
    messages: tuple[PoppedMessage, ...]
    pop_time: int
    invisible_time: int
    revive_qid: int


@attrs.frozen
class CheckPoint:
    """PopCheckPoint: one pop of one queue (or one change of invisible time). ``topic`` is the queue's
    real topic (a pop retry topic for a retry read); ``offsets`` the popped messages' queue offsets."""

    group: str
    topic: str
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    broker_name: str
    offsets: tuple[int, ...]
    suspend: bool = False  # 5.5.x: written by a change of invisible time with ``suspend``

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def key(self) -> tuple[str, str, int, int, int, str]:
        """PopReviveService's merge key: topic, group, queue id, start offset, pop time, broker name."""
        return (self.topic, self.group, self.queue_id, self.start_offset, self.pop_time, self.broker_name)


def handle_key(topic: str, group: str, handle: PopHandle) -> tuple[str, str, int, int, int, str]:
    """The merge key of the checkpoint an ack of ``handle`` (in real topic ``topic``) names."""
    return (topic, group, handle.queue_id, handle.ck_queue_offset, handle.pop_time, handle.broker_name)


def revive_due(ck: CheckPoint, now: int) -> bool:
    """Whether the revive service revives ``ck`` at ``now`` (the model's rule; see the docstring)."""
    return now - ck.revive_time > REVIVE_MARGIN_MS


@attrs.define
class Pending:
    """A checkpoint in the revive log with the acks that reached it; ``revived`` once re-put."""

    ck: CheckPoint
    seq: int  # its place in the revive log (ties of revive time)
    acked: frozenset[int] = frozenset()
    revived: bool = False

    def unacked(self) -> tuple[int, ...]:
        return tuple(o for o in self.ck.offsets if o not in self.acked)


def revived_properties(props: Mapping[str, str], reconsume_times: int, pop_time: int,
                       origin_group: str | None = None) -> dict[str, str]:
    """PopReviveService.reviveRetry: every property kept, ``1ST_POP_TIME`` added when the message was never
    reconsumed or has none; 5.5.x also puts ``ORIGIN_GROUP`` (``origin_group``)."""
    out = dict(props)
    if reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in out:
        out[PROPERTY_FIRST_POP_TIME] = str(pop_time)
    if origin_group is not None:
        out[PROPERTY_ORIGIN_GROUP] = origin_group
    return out


@attrs.define
class OrderInfo:
    """ConsumerOrderInfoManager.OrderInfo of one (topic, group, queue)."""

    attempt_id: str | None
    pop_time: int
    invisible_time: int
    offsets: tuple[int, ...]
    acked: frozenset[int] = frozenset()
    next_visible: dict[int, int] = attrs.Factory(dict)
    consumed: dict[int, int] = attrs.Factory(dict)

    def need_block(self, attempt_id: str | None, now: int, invisible_time: int) -> bool:
        """needBlock: an un-acked offset still invisible blocks the queue, except for the same attempt (an info
        without a positive invisible time takes the request's, ``invisible_time``)."""
        if not self.offsets or (self.attempt_id is not None and self.attempt_id == attempt_id):
            return False
        if self.invisible_time <= 0:
            self.invisible_time = invisible_time
        return any(now < self.next_visible.get(o, self.pop_time + self.invisible_time)
                   for o in self.offsets if o not in self.acked)

    def next_offset(self) -> int:
        """getNextOffset: the first un-acked offset; all acked: the last + 1."""
        for o in self.offsets:
            if o not in self.acked:
                return o
        return self.offsets[-1] + 1


RANDOM_STRIDE = 37  # coprime with RANDOM_Q_BOUND: the model's randomQ visits 0..99 once every 100 pops


def spread_random(draw: int) -> int:
    """The model's ``randomQ`` for the ``draw``-th pop of a broker: ``draw × 37 mod 100``, a permutation of
    0..99 repeated, so exactly ``popFromRetryProbability`` of every 100 consecutive pops read the retry
    topic first (5.3.3 draws ``random.nextInt(100)``; a lockstep driver forces the real draw instead)."""
    return draw * RANDOM_STRIDE % RANDOM_Q_BOUND


COMMIT_ILLEGAL = -1  # commitAndNext: the offset is not in the info (MESSAGE_ILLEGAL)
COMMIT_STALE = -2  # commitAndNext: the pop time is not the info's (nothing done)


@attrs.define
class PopState:
    """A broker's pop state: the revive log's checkpoints, the orderly infos, the revive-queue counter, and
    what a restart finds of them (see the module docstring, "Crashes")."""

    pending: dict[int, Pending] = attrs.Factory(dict)  # by seq: the revive log's order
    by_key: dict[tuple[str, str, int, int, int, str], list[int]] = attrs.Factory(dict)  # merge key -> seqs
    orders: dict[tuple[str, str, int], OrderInfo] = attrs.Factory(dict)
    ck_number: int = 0  # PopMessageProcessor.ckMessageNumber
    seq: int = 0
    draws: int = 0  # pops so far (spread_random's argument)
    forced_random: int | None = None  # the next pop's randomQ, when a driver chose it
    persisted_revived: frozenset[int] = frozenset()
    persisted_orders: dict[tuple[str, str, int], OrderInfo] = attrs.Factory(dict)
    last_order_persist: int = 0

    def next_revive_qid(self, queue_num: int) -> int:
        qid = self.ck_number % queue_num
        self.ck_number += 1
        return qid

    def random_q(self) -> int:
        """The next pop's ``randomQ``: the forced value (once), else ``spread_random``."""
        forced, self.forced_random = self.forced_random, None
        value = spread_random(self.draws) if forced is None else forced
        self.draws += 1
        return value

    def add(self, ck: CheckPoint) -> None:
        """A checkpoint written to the revive log."""
        self.pending[self.seq] = Pending(ck, self.seq)
        self.by_key.setdefault(ck.key, []).append(self.seq)
        self.seq += 1

    def ack(self, key: tuple[str, str, int, int, int, str], offset: int) -> Pending | None:
        """An ack reaching the revive log: sets the offset's bit of the oldest checkpoint with merge key ``key``
        that holds the offset un-acked (two share a key only after a change of invisible time in the pop's
        millisecond: docs/fidelity.md POP-9); None when no checkpoint holds the offset ("invalid ack index")."""
        holding = [p for s in self.by_key.get(key, ()) if offset in (p := self.pending[s]).ck.offsets]
        if not holding:
            return None
        found = next((p for p in holding if offset not in p.acked), holding[-1])
        found.acked = found.acked | {offset}
        return found

    def due(self, now: int) -> list[Pending]:
        """The checkpoints the revive service revives at ``now``, in revive-log order."""
        due = [p for p in self.pending.values() if not p.revived and revive_due(p.ck, now)]
        return sorted(due, key=lambda p: (p.ck.revive_time, p.seq))

    def order_info(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.orders.get((topic, group, queue_id))

    def update_order(self, topic: str, group: str, queue_id: int, info: OrderInfo) -> None:
        """ConsumerOrderInfoManager.update: the new info, consumed counts merged from the old one (an offset
        popped again counts one more, unless the attempt id is the same)."""
        old = self.orders.get((topic, group, queue_id))
        if old is not None:
            if old.attempt_id is not None and old.attempt_id == info.attempt_id:
                info.consumed = dict(old.consumed)
            else:
                info.consumed = {o: old.consumed.get(o, 0) + 1 for o in info.offsets if o in old.offsets}
        self.orders[(topic, group, queue_id)] = info

    def commit_and_next(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int) -> int:
        """commitAndNext: the offset to commit after acking ``offset``; COMMIT_ILLEGAL / COMMIT_STALE."""
        info = self.orders.get((topic, group, queue_id))
        if info is None:
            return offset + 1
        if not info.offsets:
            return COMMIT_ILLEGAL
        if pop_time != info.pop_time:
            return COMMIT_STALE
        if offset not in info.offsets:
            return COMMIT_ILLEGAL
        info.acked = info.acked | {offset}
        return info.next_offset()

    def persist_revive_progress(self) -> None:
        """The revive offsets reach consumerOffset.json (with the consumer offsets)."""
        self.persisted_revived = frozenset(seq for seq, p in self.pending.items() if p.revived)

    def maybe_persist_orders(self, now: int) -> None:
        if now < self.last_order_persist:
            self.last_order_persist = now  # a clock step back: re-anchor
        if now - self.last_order_persist >= ORDER_INFO_PERSIST_MS:
            self.persist_orders(now)

    def persist_orders(self, now: int) -> None:
        self.persisted_orders = {k: attrs.evolve(v, next_visible=dict(v.next_visible), consumed=dict(v.consumed))
                                 for k, v in self.orders.items()}
        self.last_order_persist = now

    def restore(self, now: int) -> None:
        """A restart: the revive service re-scans from its persisted progress (a checkpoint revived since is
        revived again); the orderly infos are consumerOrderInfo.json's."""
        for seq, p in self.pending.items():
            p.revived = seq in self.persisted_revived
        self.orders = {k: attrs.evolve(v, next_visible=dict(v.next_visible), consumed=dict(v.consumed))
                       for k, v in self.persisted_orders.items()}
        self.last_order_persist = now


# ----------------------------------------------------------------------------------------------------------
# request rules shared by every broker that pops (the model's, model/broker_pop.py, and the mmap broker's,
# impl/broker_pop.py): pure functions of what the broker looked up

PARSE_FAILED = "parse the consumer's subscription failed"


def topic_not_exist(topic: str, faq_url: str) -> BrokerError:
    """TOPIC_NOT_EXIST as the pop, ack and change processors word it (FAQUrl.suggestTodo(APPLY_TOPIC_URL))."""
    return BrokerError(ResponseCode.TOPIC_NOT_EXIST,
                       f"topic[{topic}] not exist, apply first please! \nSee {faq_url} for further details.")


def check_pop_request(host: str, max_nums: int, timer_wheel: bool, topic: str, topic_nums: int | None,
                      queue_id: int, group: str, group_exists: bool, faq_url: str) -> None:
    """PopMessageProcessor's refusals, in its order (``topic_nums`` None: no such topic); ``BrokerError``."""
    if max_nums > MAX_POP_NUMS:
        raise BrokerError(ResponseCode.INVALID_PARAMETER,
                          f"the broker[{host}] pop message's num is greater than {MAX_POP_NUMS}")
    if not timer_wheel:
        raise BrokerError(ResponseCode.SYSTEM_ERROR,
                          f"the broker[{host}] pop message is forbidden because timerWheelEnable is false")
    if topic_nums is None:
        raise topic_not_exist(topic, faq_url)
    if queue_id >= topic_nums:
        raise BrokerError(ResponseCode.INVALID_PARAMETER, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                          f"topicConfig.readQueueNums:[{topic_nums}]")
    if not group_exists:
        raise BrokerError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist")


@attrs.frozen
class RetryChoice:
    """What one ``randomQ`` decides of a pop: the retry topic read, and whether it is read first."""

    first: bool
    topic: str


def retry_choice(settings: PopSettings, random_q: int, topic: str, group: str) -> RetryChoice:
    """PopMessageProcessor: ``randomQ < popFromRetryProbability`` reads the retry topic first; with v2 on (and
    v1 still read) an even ``randomQ`` reads the v1 retry topic."""
    v1 = settings.enable_retry_topic_v2 and settings.retrieve_from_retry_v1 and random_q % 2 == 0
    return RetryChoice(random_q < settings.pop_from_retry_probability,
                       pop_retry_topic(topic, group, settings.enable_retry_topic_v2 and not v1))


def init_pop_offset(topic: str, lo: int, hi: int, init_mode: int) -> int:
    """getInitOffset: a group's first pop of a queue ``[lo, hi)`` starts at ``lo`` for initMode MIN and every
    ``%RETRY%`` topic; else at 0 while offset 0 is still in the queue (initPopOffsetByCheckMsgInMem), else at the
    last message."""
    if init_mode == INIT_MIN or topic.startswith(RETRY_PREFIX):
        return lo
    if lo <= 0 < hi:
        return 0
    return max(hi - 1, 0)


CHANGE_NOT_SET = "not set any response code"  # RemotingCommand's remark until a processor sets one


def check_handle_queue(topic: str, handle: PopHandle, topic_nums: int | None, lo: int, hi: int,
                       change: bool, faq_url: str) -> None:
    """The ack's and change's refusals (``topic_nums`` None: no such topic): TOPIC_NOT_EXIST, MESSAGE_ILLEGAL,
    NO_MESSAGE (an ack's offset outside ``[lo, hi]``, a change's outside ``[lo, hi)``: ChangeInvisibleTimeProcessor
    sets no remark, so the answer keeps ``CHANGE_NOT_SET``, measured on 5.3.3); ``BrokerError``."""
    if topic_nums is None:
        raise topic_not_exist(topic, faq_url)
    if not 0 <= handle.queue_id < topic_nums:
        raise BrokerError(ResponseCode.MESSAGE_ILLEGAL, f"queueId[{handle.queue_id}] is illegal, topic:[{topic}] "
                          f"topicConfig.readQueueNums:[{topic_nums}]")
    if change and not lo <= handle.queue_offset < hi:
        raise BrokerError(ResponseCode.NO_MESSAGE, CHANGE_NOT_SET)
    if handle.queue_offset < lo or handle.queue_offset > hi:
        raise BrokerError(ResponseCode.NO_MESSAGE, f"offset is illegal, key:{topic}@{handle.queue_id}, "
                          f"commit:{handle.queue_offset}, store:{lo}~{hi}")


def changed_handle(handle: PopHandle, now: int, invisible_ms: int) -> PopHandle:
    """CHANGE_MESSAGE_INVISIBLETIME's answer as a handle: a concurrent one names the new one-message checkpoint
    (pop time now); an orderly one keeps its pop time, its invisible time reaching ``now + invisible_ms``."""
    if handle.order:  # the 5.x client builds it with ck offset = the message's (changeInvisibleTimeAsync)
        return attrs.evolve(handle, ck_queue_offset=handle.queue_offset,
                            invisible_time=now + invisible_ms - handle.pop_time)
    return attrs.evolve(handle, ck_queue_offset=handle.queue_offset, pop_time=now, invisible_time=invisible_ms)


def changed_checkpoint(group: str, topic: str, handle: PopHandle, now: int, invisible_ms: int,
                       suspend: bool) -> CheckPoint:
    """The one-message checkpoint a concurrent change of invisible time writes."""
    return CheckPoint(group, topic, handle.queue_id, handle.queue_offset, now, invisible_ms, handle.revive_qid,
                      handle.broker_name, (handle.queue_offset,), suspend)


def revive_target(ck: CheckPoint, v2: bool) -> str:
    """Where the revive service re-puts ``ck``'s messages: its own topic when it is a ``%RETRY%`` one, else the
    pop retry topic."""
    return ck.topic if ck.topic.startswith(RETRY_PREFIX) else pop_retry_topic(ck.topic, ck.group, v2)


def rewritten_checkpoint(ck: CheckPoint, offset: int) -> CheckPoint:
    """rePutCK: a revive put that failed leaves one message's checkpoint, due ``CK_REWRITE_MS`` later."""
    return attrs.evolve(ck, start_offset=offset, offsets=(offset,), invisible_time=ck.invisible_time + CK_REWRITE_MS)
