"""Timer messages (RocketMQ 5.x, RIP-43): a delay of any length, delivered by the timer wheel.

Theory of operation
-------------------
Follows the 5.3.3 sources (verified the same in 5.0.0 and 5.1.4); the 4.9 profile has
none of it (a ``TIMER_*`` property is then an ordinary user property).

**The put hook** (``transform``; B/util/HookUtils.handleScheduleMessage, run on every
put of a message of transaction type NOT or COMMIT — sends, commits, send-backs):

- a message with a delay level > 0 loses ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` /
  ``TIMER_DELAY_MS`` (the level wins; the delay-level path re-serializes the map, so the
  stored string has none of them either);
- a message already in ``rmq_sys_wheel_timer`` or carrying ``TIMER_OUT_MS`` (a fired copy,
  its send-backs and their re-sends) is not a timer message again;
- otherwise, with any of the three properties: ``timerWheelEnable=false`` refuses the put
  (WHEEL_TIMER_NOT_ENABLE → SYSTEM_ERROR). The requested deliver time is
  ``now + TIMER_DELAY_SEC × 1000``, else ``now + TIMER_DELAY_MS``, else ``TIMER_DELIVER_MS``
  (``Long.parseLong``; any other text → WHEEL_TIMER_MSG_ILLEGAL → MESSAGE_ILLEGAL). A
  time not after ``now`` stores the message as it is, in its own topic (delivered at
  once). A later one more than ``timerMaxDelaySec`` ahead is refused (MESSAGE_ILLEGAL);
  else it is rounded *down* to the precision — to the largest multiple of
  ``timerPrecisionMs`` strictly below it (``out_ms``) — and stored in
  ``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS``, ``REAL_TOPIC``, ``REAL_QID``.

**Delivery** (S/timer/TimerMessageStore): the write time is the clock rounded down to
the precision; a slot is read once the write time has passed it, so a copy whose
``TIMER_OUT_MS`` is ``out`` is delivered at ``out + precision`` (``due_ms``) or later —
never before the requested time, at most one precision after it. The delivered copy
(``fire_request``, convertMessage) goes to ``REAL_TOPIC`` / ``REAL_QID`` with body, flag,
sys flag, born time and reconsume times kept; its properties string is built with
``TIMER_ENQUEUE_MS`` (the write time when it entered the wheel, as the timer log keeps it;
Long.MAX_VALUE when it was already due then) and ``TIMER_DEQUEUE_MS`` (now) added and *before* REAL_TOPIC / REAL_QID are
cleared from the map, so the stored string keeps them (like 4.9's schedule copies).

**Progress and crashes** (TimerCheckpoint, flushed every ``timerFlushIntervalMs`` by
TimerFlushService and at shutdown): the enqueue pointer (the next offset of the timer
topic's queue to read into the wheel) and the read time (every slot before it was
delivered). A restart re-reads the timer queue from the enqueue pointer and delivers,
from the wheel, every copy whose slot is at or after the read time: a copy delivered
after the last checkpoint is delivered again (at-least-once), none is lost.

Deviations (docs/fidelity.md T-rows): the model runs the enqueue and dequeue services at
``tick`` (RocketMQ: threads polling every ~100 ms × precision); copies due at one tick are
delivered in (slot, queue offset) order (RocketMQ's put threads may interleave them); no
roll for delays beyond ``timerRollWindowSlot`` (2 days: the model never reaches it); no
flow control (``timerCongestNumEachSlot`` is unbounded by default); a copy whose real
topic refuses the put waits for the next tick (RocketMQ drops it when the status is
MESSAGE_ILLEGAL and retries otherwise); no delete messages (``TIMER_DEL_UNIQKEY``: only a
refusal when its time has passed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import attrs

from rmqspec.model.message import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from rmqspec.model.results import ResponseCode

TIMER_TOPIC = "rmq_sys_wheel_timer"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
# the three a producer sets (Message.setDeliverTimeMs / setDelayTimeSec / setDelayTimeMs)
REQUEST_PROPERTIES: tuple[str, ...] = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)

PRECISIONS_MS: tuple[int, ...] = (100, 200, 500, 1000)  # MessageStoreConfig.setTimerPrecisionMs
LONG_MAX = (1 << 63) - 1
_LONG = re.compile(r"[+-]?\d+")  # Long.parseLong reads digits with Character.digit: any Unicode Nd digit

ILLEGAL_REMARK = ("timer message illegal, the delay time should not be bigger than the max delay {max_ms}ms; "
                  "or if set del msg, the delay time should be bigger than the current time")


class TimerRefused(Exception):
    """The put hook refused a timer message; nothing was written."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def normalize_precision(ms: int) -> int:
    """MessageStoreConfig.setTimerPrecisionMs: the largest of 100/200/500/1000 not above ``ms``
    (100 for anything smaller)."""
    chosen = PRECISIONS_MS[0]
    for candidate in PRECISIONS_MS[1:]:
        if ms < candidate:
            return chosen
        chosen = candidate
    return chosen


def java_long(text: str) -> int | None:
    """``Long.parseLong``: an optional sign and decimal digits (any script's, as ``Character.digit``
    reads them: real 5.3.3 times ``TIMER_DELAY_MS="１５００"``) within 64 bits, else None."""
    if not _LONG.fullmatch(text):
        return None
    value = int(text)
    return value if -(1 << 63) <= value <= LONG_MAX else None


def _wrap(value: int) -> int:
    """Java ``long`` arithmetic: wrap to 64 bits."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def requested_ms(props: Mapping[str, str], now: int) -> int | None:
    """The deliver time a timer message asks for (DELAY_SEC, else DELAY_MS, else DELIVER_MS);
    None when the property it uses is not a Java long (WHEEL_TIMER_MSG_ILLEGAL)."""
    if (text := props.get(PROPERTY_TIMER_DELAY_SEC)) is not None:
        sec = java_long(text)
        return None if sec is None else _wrap(now + _wrap(sec * 1000))
    if (text := props.get(PROPERTY_TIMER_DELAY_MS)) is not None:
        ms = java_long(text)
        return None if ms is None else _wrap(now + ms)
    return java_long(props.get(PROPERTY_TIMER_DELIVER_MS) or "")


def out_ms(deliver_ms: int, precision_ms: int) -> int:
    """HookUtils.transformTimerMessage: the largest multiple of the precision below ``deliver_ms``."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


def due_ms(out: int, precision_ms: int) -> int:
    """The earliest delivery of a copy with ``TIMER_OUT_MS = out``: its slot is read once the
    (rounded) write time has passed it."""
    return out + precision_ms


def slot_of_property(text: str | None, precision_ms: int) -> tuple[int, int] | None:
    """(``TIMER_OUT_MS``, due time) of a copy in the timer topic; None when the property is
    missing or not a Java long (only a send straight into ``rmq_sys_wheel_timer`` makes one)."""
    out = java_long(text or "")
    return None if out is None else (out, due_ms(out, precision_ms))


def is_timer_request(props: Mapping[str, str]) -> bool:
    return any(name in props for name in REQUEST_PROPERTIES)


@attrs.frozen
class TimerSettings:
    """The MessageStoreConfig keys of the timer (5.x defaults)."""

    enabled: bool = True  # timerWheelEnable
    precision_ms: int = 1000  # timerPrecisionMs (normalized)
    max_delay_sec: int = 3 * 24 * 3600  # timerMaxDelaySec
    flush_interval_ms: int = 1000  # timerFlushIntervalMs: the checkpoint's period


def transform(
    topic: str, queue_id: int, props: dict[str, str], delay_level: int, now: int, settings: TimerSettings
) -> tuple[str, int]:
    """The put hook for a message of transaction type NOT / COMMIT: edits ``props`` in place and
    returns where the message goes; raises ``TimerRefused`` (see the module docstring)."""
    if delay_level > 0:
        for name in REQUEST_PROPERTIES:
            props.pop(name, None)
        return topic, queue_id
    if topic == TIMER_TOPIC or PROPERTY_TIMER_OUT_MS in props or not is_timer_request(props):
        return topic, queue_id
    if not settings.enabled:
        raise TimerRefused(ResponseCode.SYSTEM_ERROR,
                           "accurate timer message is not enabled, timerWheelEnable is false")
    illegal = TimerRefused(ResponseCode.MESSAGE_ILLEGAL, ILLEGAL_REMARK.format(max_ms=settings.max_delay_sec * 1000))
    deliver = requested_ms(props, now)
    if deliver is None:
        raise illegal
    if deliver <= now:
        if PROPERTY_TIMER_DEL_UNIQKEY in props:
            raise illegal
        return topic, queue_id
    if deliver - now > settings.max_delay_sec * 1000:
        raise illegal
    props[PROPERTY_TIMER_OUT_MS] = str(out_ms(deliver, settings.precision_ms))
    props[PROPERTY_REAL_TOPIC] = topic
    props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    return TIMER_TOPIC, 0


def fire_properties(entry_props: tuple[tuple[str, str], ...], enqueue_ms: int, now: int) -> dict[str, str]:
    """convert + convertMessage: the delivered copy's properties string (REAL_TOPIC / REAL_QID
    still in it; see the module docstring)."""
    props = dict(entry_props)
    props[PROPERTY_TIMER_ENQUEUE_MS] = str(enqueue_ms)
    props[PROPERTY_TIMER_DEQUEUE_MS] = str(now)
    return props


@attrs.frozen
class Pending:
    """A copy in the wheel: its slot, its place in the timer queue, when it entered the wheel."""

    out: int
    offset: int
    enqueue_ms: int


# deliver(offset in the timer queue, TIMER_ENQUEUE_MS) -> True when the copy was written
Deliver = Callable[[int, int], bool]
# slot_of(offset) -> TIMER_OUT_MS of the timer queue's entry at that offset (None: not a Java long); raises
# ``RecordGone`` when retention took the entry's record
SlotOf = Callable[[int], int | None]


class RecordGone(Exception):
    """The timer-queue entry's record is gone (retention deleted its commitlog file, or the unit is below the
    queue's min). 5.3.3's TimerEnqueueGetService skips such a unit (``enqueue_get_miss``; "currQueueOffset
    … is smaller than minOffsetInQueue") and its dequeue releases a request whose record it cannot read
    (``dequeue_get_msg_miss``): nothing is re-put (fidelity TW-6)."""


@attrs.define
class TimerService:
    """The wheel's state: enqueue pointer, read time, pending copies, the checkpoint."""

    settings: TimerSettings
    queue_offset: int = 0  # the next timer-queue offset to enqueue
    read_ms: int = 0  # every slot below it was delivered
    wheel: list[Pending] = attrs.Factory(list)
    enqueue_times: dict[int, int] = attrs.Factory(dict)  # the timer log: offset -> its write time
    persisted: tuple[int, int] = (0, 0)  # (queue_offset, read_ms) of the last checkpoint
    last_persist: int = 0

    def _floor(self, now: int) -> int:
        return now // self.settings.precision_ms * self.settings.precision_ms

    def tick(self, now: int, max_offset: int, slot_of: SlotOf, deliver: Deliver) -> None:
        """Enqueue every new timer-queue entry, then deliver every due copy, slot by slot."""
        write_ms = self._floor(now)
        while self.queue_offset < max_offset:
            try:
                out = slot_of(self.queue_offset)
            except RecordGone:
                self.queue_offset += 1  # skipped: never in the wheel
                continue
            if out is None:
                # a copy sent straight into the timer topic with a TIMER_OUT_MS that is no Java long:
                # RocketMQ's enqueue thread fails on it and retries for ever (timerSkipUnknownError off)
                break
            # TimerEnqueuePutService: a copy already due when it is read goes straight to delivery
            enqueue_ms = LONG_MAX if out < write_ms else write_ms
            self.wheel.append(Pending(out, self.queue_offset, enqueue_ms))
            self.enqueue_times[self.queue_offset] = enqueue_ms
            self.queue_offset += 1
        due = sorted((p for p in self.wheel if p.out < write_ms), key=lambda p: (p.out, p.offset))
        for pending in due:
            if not deliver(pending.offset, pending.enqueue_ms):
                break  # the put failed: this slot and later ones wait for the next tick
            self.wheel.remove(pending)
        else:
            self.read_ms = max(self.read_ms, write_ms)

    def maybe_persist(self, now: int) -> None:
        if now < self.last_persist:
            self.last_persist = now  # a clock step back: re-anchor
        if now - self.last_persist >= self.settings.flush_interval_ms:
            self.persist(now)

    def persist(self, now: int) -> None:
        self.persisted = (self.queue_offset, self.read_ms)
        self.last_persist = now

    def restore(self, now: int, max_offset: int, slot_of: SlotOf) -> None:
        """TimerMessageStore.load/recover: the checkpoint's pointers; the wheel again holds every
        surviving copy before the enqueue pointer whose slot is not below the read time (the
        timer log up to the pointer was flushed with the checkpoint, write times included)."""
        queue_offset, read_ms = self.persisted
        self.queue_offset = min(queue_offset, max_offset)
        self.read_ms = read_ms
        self.enqueue_times = {o: t for o, t in self.enqueue_times.items() if o < self.queue_offset}
        self.wheel = [
            Pending(out, offset, self.enqueue_times.get(offset, now))
            for offset in range(self.queue_offset)
            if (out := _kept_slot(slot_of, offset)) is not None and out >= read_ms
        ]
        self.last_persist = now


def _kept_slot(slot_of: SlotOf, offset: int) -> int | None:
    """``slot_of(offset)``, None when retention took the entry's record (``RecordGone``)."""
    try:
        return slot_of(offset)
    except RecordGone:
        return None
