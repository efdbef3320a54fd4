"""A per-example view of a long-running broker: offsets rebased so the example starts at zero.

Theory of operation
-------------------
In wall-clock mode the conformance machine drives a broker that outlives
its examples (``rmqspec serve``, a real RocketMQ 4.9.8): every example finds
the CommitLog and the shared system queues (``SCHEDULE_TOPIC_XXXX``, the
half, op and discard topics) where the previous one left them, while the
model beside it starts empty. The machine gives every example fresh topic
and group names; ``SessionView`` does the rest: at ``open()`` it measures the
broker's CommitLog end and the end of each shared queue (5.x: also the timer
wheel's ``rmq_sys_wheel_timer``, where a timer send's answer points; whether a
send went there is the put hook's decision, ``model.timer.transform``, taken on
the clock before the send — the machine's wall-clock timer requests never sit
on an edge where a few ms decide), then presents the
broker to the machine as if those were zero — offsets in results are
lowered by the base, offsets in arguments raised, offset message ids
(``msgId``, ``ORIGIN_MESSAGE_ID``) rewritten to match.

The CommitLog end is measured with probe sends to a private topic: three
records of one size, back to back; the base is the third's offset plus that
size. Unequal spacing means something else wrote in between (a late
background write): the measurement is repeated (``OPEN_ATTEMPTS``) and
otherwise refused with a clear error. A shared queue's end is its
``max_offset`` (a pull far beyond it answers OFFSET_ILLEGAL with it).

One record's *size* depends on an offset: the op message END_TRANSACTION
writes has the half's queue offset as its decimal body (5.1.0+: the offsets
of the ENDs one batch pass collected, each followed by a comma), so where
they have more digits on the broker than in the example's view, every later
record moves: the view keeps CommitLog *segments* (after the op, a larger
base, by the extra digits of the offsets in the op's body); the machine says
where the op landed and what it holds (``op_landed``: the op the model wrote).
Check requests are therefore translated when the machine judges them
(``in_view``), not when they arrive: a round's check may arrive before the
machine's model has written the op the broker wrote before that round.

Before measuring, ``open(settle_ms=…)`` waits until the transaction queues
(half, op, discard) have kept their ends for ``settle_ms``: the broker's
check service goes on with an earlier example's (or an earlier run's) halves
on its own — a re-put per check round until ``transactionCheckMax``, then the
discard; after a kill, the rounds its lost progress repeats — and those
writes would otherwise land inside the next example (the machine asks for
``transactionTimeOut + transactionCheckInterval + tolerance``: a half's first
re-put comes at most that long after it was written).

What it cannot hide: any other write the broker makes on its own during the
example that belongs to an earlier one; the lockstep then reports a mismatch
that names the operation.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from rmqspec.model.crash import CRASH_KINDS
from rmqspec.model.ids import offset_msg_id, parse_offset_msg_id
from rmqspec.model.message import Message, MessageQueue, StoredMessage
from rmqspec.model.results import BrokerError, CheckRequest, PullResult, ResponseCode, SendResult, TxnAction
from rmqspec.model.timer import TIMER_TOPIC, TimerRefused, is_timer_request, transform
from rmqspec.properties.history import DISCARD_TOPIC, HALF_TOPIC, OP_TOPIC, SCHEDULE_TOPIC
from rmqspec.properties.wallclock import wall_ms

PROBE_TOPIC = "rmqspec_probe"
OPEN_ATTEMPTS = 5
SETTLE_ROUNDS = 10
FAR = 1 << 40


class SessionError(RuntimeError):
    """The broker's offsets could not be measured (it keeps writing on its own)."""


class SessionView:
    """Wraps ``broker`` (whose delay table has ``levels`` levels); call ``open`` before use."""

    def __init__(self, broker: Any, levels: int, config: Any = None) -> None:
        self.broker = broker
        self.levels = levels
        self.config = config  # the BrokerConfig: with a timer wheel (5.x), its queue is shared too
        # CommitLog offsets: the broker's offset c is the example's c - base_i for the last segment
        # (start_i, base_i) with start_i <= c (an op message with a longer body opens a segment)
        self.segments: list[tuple[int, int]] = [(0, 0)]
        self.queue_base: dict[MessageQueue, int] = {}
        self.existing: set[str] = set()  # shared system topics the broker already has
        self.capabilities = getattr(broker, "capabilities", frozenset())
        self.crash_kinds = getattr(broker, "crash_kinds", CRASH_KINDS)

    def __getattr__(self, name: str) -> Any:  # recovery_choices, crash, recover, ...
        return getattr(self.broker, name)

    # -- measuring ---------------------------------------------------------------------------

    def open(self, observer: str, clock: Any, settle_ms: int = 0) -> None:
        """Measure the bases; ``observer`` is a group that may pull every queue. With ``settle_ms``
        first wait (``settle``) until the transaction queues have not moved for that long."""
        if settle_ms > 0:
            self.settle(observer, settle_ms)
        shared = [MessageQueue(SCHEDULE_TOPIC, q) for q in range(self.levels)]
        shared += [MessageQueue(t, 0) for t in (HALF_TOPIC, OP_TOPIC, DISCARD_TOPIC)]
        if self.config is not None and self.config.timer_running:
            shared.append(MessageQueue(TIMER_TOPIC, 0))
        for mq in shared:
            self.queue_base[mq] = self._queue_end(observer, mq)
        self.broker.create_topic(PROBE_TOPIC, 1)
        for _ in range(OPEN_ATTEMPTS):
            offsets = [self.broker.send(self._probe(clock), 0).commitlog_offset for _ in range(3)]
            step = offsets[1] - offsets[0]
            if step > 0 and offsets[2] - offsets[1] == step:
                self.segments = [(0, offsets[2] + step)]
                return
        raise SessionError(f"the broker wrote between probe sends {OPEN_ATTEMPTS} times in a row "
                           f"(offsets {offsets}): it is not quiescent, cannot start an example")

    def rebase(self, observer: str, clock: Any, model_end: int, queue_ends: Mapping[MessageQueue, int]) -> None:
        """Measure again, mid-example, after writes the model does not make (5.x pop: checkpoints and
        acks as timer messages, docs/fidelity.md POP-1): the broker's CommitLog end (probe sends, as
        ``open``) becomes the model's ``model_end`` from here on (a new segment), and each shared queue's
        end the model's ``queue_ends[mq]``. Only when the broker is quiet (the caller waits)."""
        for mq, end in queue_ends.items():
            self.queue_base[mq] = self._queue_end(observer, mq, note=False) - end
        offsets: list[int] = []
        for _ in range(OPEN_ATTEMPTS):
            offsets = [self.broker.send(self._probe(clock), 0).commitlog_offset for _ in range(3)]
            step = offsets[1] - offsets[0]
            if step > 0 and offsets[2] - offsets[1] == step:
                broker_end = offsets[2] + step
                self.segments.append((broker_end, broker_end - model_end))
                return
        raise SessionError(f"the broker wrote between probe sends {OPEN_ATTEMPTS} times in a row "
                           f"(offsets {offsets}): it is not quiescent, cannot rebase")

    def settle(self, observer: str, quiet_ms: int, poll_ms: int = 200) -> int:
        """Wait until the half, op and discard queues have kept their ends for ``quiet_ms`` (at most
        ``SETTLE_ROUNDS`` times that); returns the ms waited. A broker that has never stored a half
        is settled at once. Why: the check service goes on with an earlier example's halves on its
        own (a re-put per round until ``transactionCheckMax``, then the discard; after a kill, the
        rounds its lost progress repeats), and those writes would land inside the next example."""
        queues = [MessageQueue(t, 0) for t in (HALF_TOPIC, OP_TOPIC, DISCARD_TOPIC)]
        started = time.monotonic()
        ends = [self._queue_end(observer, mq, note=False) for mq in queues]
        if not any(ends):
            return 0
        since = started
        while (time.monotonic() - since) * 1000 < quiet_ms:
            if (time.monotonic() - started) * 1000 > SETTLE_ROUNDS * quiet_ms:
                raise SessionError(f"the broker's transaction queues kept moving for "
                                   f"{SETTLE_ROUNDS * quiet_ms} ms (ends {ends}): it is not quiescent, "
                                   "cannot start an example")
            time.sleep(poll_ms / 1000)
            now = [self._queue_end(observer, mq, note=False) for mq in queues]
            if now != ends:
                ends, since = now, time.monotonic()
        return round((time.monotonic() - started) * 1000)

    @staticmethod
    def _probe(clock: Any) -> Message:
        return Message(topic=PROBE_TOPIC, body=b"probe", tags=None, keys=(), properties={},
                       uniq_key="%032X" % (clock.now() & ((1 << 128) - 1)))

    def _queue_end(self, observer: str, mq: MessageQueue, note: bool = True) -> int:
        try:
            res = self.broker.pull(observer, mq, FAR, 1, "*")
        except BrokerError:
            return 0
        if note:
            self.existing.add(mq.topic)
        return res.max_offset

    # -- translation -------------------------------------------------------------------------

    def _qbase(self, mq: MessageQueue) -> int:
        return self.queue_base.get(mq, 0)

    @property
    def base(self) -> int:
        return self.segments[-1][1]

    def down(self, offset: int) -> int:
        """The broker's CommitLog offset as the example sees it."""
        return offset - next(base for start, base in reversed(self.segments) if start <= offset)

    def up(self, offset: int) -> int:
        """The example's CommitLog offset on the broker."""
        for start, base in reversed(self.segments):
            if offset + base >= start:
                return offset + base
        return offset + self.segments[0][1]

    def _msg_id(self, msg_id: str | None) -> str | None:
        if not msg_id:
            return msg_id
        try:
            host, port, off = parse_offset_msg_id(msg_id)
        except ValueError:
            return msg_id
        return offset_msg_id(host, port, self.down(off))

    def _stored(self, m: StoredMessage, queue_base: int | None = None) -> StoredMessage:
        qb = self._qbase(m.queue) if queue_base is None else queue_base
        props = dict(m.properties)
        if "ORIGIN_MESSAGE_ID" in props:
            props["ORIGIN_MESSAGE_ID"] = self._msg_id(props["ORIGIN_MESSAGE_ID"]) or ""
        return attrs.evolve(
            m, commitlog_offset=self.down(m.commitlog_offset), msg_id=self._msg_id(m.msg_id),
            queue_offset=m.queue_offset - qb, properties=props,
            prepared_txn_offset=self.down(m.prepared_txn_offset) if m.prepared_txn_offset else 0)

    def _sent(self, res: SendResult, mq: MessageQueue | None) -> SendResult:
        qb = self._qbase(mq) if mq is not None else 0
        return attrs.evolve(res, commitlog_offset=self.down(res.commitlog_offset), msg_id=self._msg_id(res.msg_id),
                            queue_offset=res.queue_offset - qb)

    # -- the Broker protocol -----------------------------------------------------------------

    def create_topic(self, topic: str, queue_nums: int) -> None:
        self.broker.create_topic(topic, queue_nums)

    def create_group(self, group: str, retry_max_times: int = 16, retry_queue_nums: int = 1) -> None:
        self.broker.create_group(group, retry_max_times, retry_queue_nums)

    def send(self, msg: Message, queue_id: int) -> SendResult:
        timed = self._timed(msg, queue_id)
        res = self.broker.send(msg, queue_id)
        mq = MessageQueue(SCHEDULE_TOPIC, min(msg.delay_level, self.levels) - 1) if msg.delay_level > 0 else None
        return self._sent(res, MessageQueue(TIMER_TOPIC, 0) if timed else mq)

    def _timed(self, msg: Message, queue_id: int) -> bool:
        """Whether the broker's put hook sends ``msg`` into the timer wheel (its answer then names the
        wheel's queue)."""
        props = msg.wire_properties()
        if self.config is None or not self.config.timer_running or not is_timer_request(props):
            return False
        try:
            topic, _ = transform(msg.topic, queue_id, props, msg.delay_level, wall_ms(), self.config.timer)
        except TimerRefused:
            return False
        return topic == TIMER_TOPIC

    def send_half(self, msg: Message, queue_id: int, producer_group: str) -> SendResult:
        return self._sent(self.broker.send_half(msg, queue_id, producer_group), MessageQueue(HALF_TOPIC, 0))

    def end_transaction(self, producer_group: str, commitlog_offset: int, tran_state_table_offset: int,
                        action: TxnAction, from_check: bool) -> ResponseCode:
        half_offset = tran_state_table_offset + self._qbase(MessageQueue(HALF_TOPIC, 0))
        code = self.broker.end_transaction(producer_group, self.up(commitlog_offset), half_offset,
                                           action, from_check)
        return code

    def op_queue_end(self, observer: str) -> int:
        """The op queue's end on the broker (5.1.0+ writes an END's op later, in a batch)."""
        return self._queue_end(observer, MessageQueue(OP_TOPIC, 0), note=False)

    def await_op(self, observer: str, before: int, timeout_ms: int, poll_ms: int = 5) -> bool:
        """Poll until the op queue's end passes ``before`` (the batch with the last END's op was
        written); False if it did not within ``timeout_ms``."""
        deadline = time.monotonic() + timeout_ms / 1000
        while self._queue_end(observer, MessageQueue(OP_TOPIC, 0), note=False) <= before:
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_ms / 1000)
        self.existing.add(OP_TOPIC)
        return True

    def op_landed(self, offset: int, body: bytes) -> None:
        """The op message the model wrote at ``offset`` in the example's view, with ``body``, was
        written by the broker too (up to the op the two agree). Its body lists the removed halves'
        queue offsets in decimal (4.9.8: one; 5.1.0+: those one batch pass collected, each followed by
        a comma), each ``qbase`` larger on the broker: where that has more digits, every later record
        moves by the extra digits of all of them."""
        half = self._qbase(MessageQueue(HALF_TOPIC, 0))
        longer = sum(len(str(int(n) + half)) - len(n) for n in re.findall(r"\d+", body.decode("ascii", "replace")))
        if longer:
            self.segments.append((offset + self.base + 1, self.base + longer))

    def pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int = 32,
             subscription: str | None = "*", expression_type: str = "TAG", sub_version: int = 0) -> PullResult:
        qb = self._qbase(mq)
        res = self.broker.pull(group, mq, offset + qb, max_nums, subscription, expression_type, sub_version)
        return attrs.evolve(
            res, messages=tuple(self._stored(m, qb) for m in res.messages),
            next_begin_offset=max(0, res.next_begin_offset - qb), min_offset=max(0, res.min_offset - qb),
            max_offset=max(0, res.max_offset - qb))

    def heartbeat(self, group: str, client_id: str, subscriptions: Mapping[str, tuple[str, str, int]]) -> None:
        self.broker.heartbeat(group, client_id, subscriptions)  # names and versions are the session's

    def unregister_consumer(self, group: str, client_id: str) -> None:
        self.broker.unregister_consumer(group, client_id)

    def send_back(self, group: str, commitlog_offset: int, delay_level: int, origin_msg_id: str | None,
                  max_reconsume_times: int | None) -> ResponseCode:
        return self.broker.send_back(group, self.up(commitlog_offset), delay_level, origin_msg_id,
                                     max_reconsume_times)

    def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self.broker.update_offset(group, mq, offset)

    def query_offset(self, group: str, mq: MessageQueue) -> int:
        return self.broker.query_offset(group, mq)

    def lock_batch(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> frozenset[MessageQueue]:
        return self.broker.lock_batch(group, client_id, mqs)

    def unlock_batch(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None:
        self.broker.unlock_batch(group, client_id, mqs)

    def in_view(self, r: CheckRequest) -> CheckRequest:
        """A check request as the example sees it. Translated when it is judged, not when it
        arrives: an op message the broker wrote before the copy the check names moves that copy by
        the op's extra digits (``op_landed``), and the machine learns of the op only when its model
        writes it, which may be after the check arrived (5.1.0+: the op batch is seen, then the
        model replays the rounds before it and writes the op)."""
        half = self._qbase(MessageQueue(HALF_TOPIC, 0))
        return attrs.evolve(r, commitlog_offset=self.down(r.commitlog_offset),
                            tran_state_table_offset=r.tran_state_table_offset - half,
                            message=self._stored(r.message, half))

    def tick(self) -> list[CheckRequest]:
        return [self.in_view(r) for r in self.broker.tick()]

    def tick_timed(self, now: int) -> list[tuple[int, CheckRequest]]:
        """The checks received since the last tick, each with its arrival time, *as the broker
        sent them* (``in_view`` translates one when it is judged). A broker without
        ``tick_timed`` gives none: they all arrived ``now``. (The check's message cannot say when
        its round ran: 4.9.8 sends the half as read, with the previous copy's store time.)"""
        timed = getattr(self.broker, "tick_timed", None)
        return timed() if timed is not None else [(now, r) for r in self.broker.tick()]

    def flush(self) -> None:
        self.broker.flush()

    def close(self) -> None:
        self.broker.close()

