"""Timer messages (RocketMQ 5.x): TIMER_EARLY, TIMER_DUPLICATED, TIMER_UNFIRED over the ghost history.

Theory of operation
-------------------
RocketMQ 5.x's put hook (B/util/HookUtils.handleScheduleMessage) stores a message carrying
``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS`` and no delay level in
``rmq_sys_wheel_timer`` queue 0, its slot ``TIMER_OUT_MS`` the requested time rounded down to
``timerPrecisionMs``; the wheel (S/timer/TimerMessageStore) re-puts it into its real topic at
``TIMER_OUT_MS + precision`` or later, never before the requested time. Its checkpoint
(TimerCheckpoint, every ``timerFlushIntervalMs`` and at shutdown) makes a crash deliver again what
was delivered since (at-least-once); nothing is lost. ``model/timer.py`` models it; the conformance
machine observes it (``conform_timer.py``): a timer ``send`` (SPEC §8: ``delay_level`` null,
``deliver_ts`` = out + precision; a COMMIT of a half with timer properties is a ``txn_end`` with
``deliver_ts``), the timer copy's ``store`` in rmq_sys_wheel_timer, and each re-put copy's
``timer_fire`` (``deliver_ts`` its due time, ``detail.from_commitlog_offset`` the timer copy's when
the machine knows it).

The same guarantees as the reference checker's ``traces/checks_timer.py`` (the SPEC §8.1
extension), on the ghost history:

- ``check_timer_early`` (always): a ``timer_fire`` before its ``deliver_ts``; a ``deliver`` (or a
  consumer's view of it) of the key with reconsume_times 0 outside rmq_sys_wheel_timer before the
  lowest ``deliver_ts`` of the key's timer sends and timer stores (the bound is dropped at a fire
  of the key, a send of the key that is neither a timer send nor delayed, and a store of the key
  in another topic, as the checker does);
- ``check_timer_duplicated`` (always): a timer copy (msg_key, ``detail.from_commitlog_offset``)
  fired twice with no ``crash`` between; and, per msg_key, more fires than timer copies (its
  stores in rmq_sys_wheel_timer, else its acknowledged timer sends and commits) with no crash
  since the key's first fire (``ScheduleOnceWithoutCrashProperty``'s rule);
- ``check_timer_unfired`` (eventually): at the drain, an acknowledged timer send or commit due at
  or before the drain with no ``timer_fire`` of its key, unless its key is at risk (a power loss
  on an ASYNC broker may take the timer copy: a ``crash``'s ``detail.at_risk``) — the one exemption
  the reference checker and the Spark audit make too (``traces/checks_timer.py``,
  ``spark/rules_timer.py``). A copy waiting in the wheel survives every crash (the TIMER table's
  ``WHEEL --crash--> WHEEL``): the restart rebuilds the wheel from the whole timer queue below the
  checkpoint's enqueue pointer (``model/timer.py`` ``TimerService.restore``), so a copy stored after
  a power loss at a position the loss freed still fires when a second crash follows before the next
  checkpoint (the pointer read again then is the old one, past that position, but the rebuild covers
  it). Such a copy is therefore not exempt; ``skipped_by_saved_timer_progress`` names these keys.

``timer_not_due`` names the keys LOST does not judge: a timer send or commit due after the drain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from rmqspec.model.events import TraceEvent
from rmqspec.model.message import schedules_delay
from rmqspec.model.timer import TIMER_TOPIC
from rmqspec.properties.codes import Code
from rmqspec.properties.history import History
from rmqspec.properties.inv_base import ACKED_SEND, Invariant, Violation, _at_risk, _detail, _until_last_drain, _v

__all__ = [
    "TIMER_INVARIANTS",
    "check_timer_duplicated",
    "check_timer_early",
    "check_timer_unfired",
    "delayed_send",
    "is_timer_request",
    "skipped_by_saved_timer_progress",
    "timer_not_due",
]


def delayed_send(ev: TraceEvent) -> bool:
    """A ``send`` with a delay level > 0: the only levels RocketMQ schedules (a level ≤ 0 is stored as
    sent, never scheduled: CommitLog.putMessage and 5.x's HookUtils test ``getDelayTimeLevel() > 0``)."""
    return ev.event == "send" and schedules_delay(ev.delay_level)


def is_timer_request(ev: TraceEvent) -> bool:
    """A timer ``send`` (not delayed, with ``deliver_ts``) or a COMMIT that became a timer message."""
    if ev.event == "send":
        return not delayed_send(ev) and ev.deliver_ts is not None
    return ev.event == "txn_end" and ev.status == "COMMIT" and ev.deliver_ts is not None


def _acked(ev: TraceEvent) -> bool:
    return ev.event == "txn_end" or ev.status in (None, *ACKED_SEND)


def _from_copy(ev: TraceEvent) -> int | None:
    value = _detail(ev, "from_commitlog_offset")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_timer_early(h: History) -> list[Violation]:
    """A timer copy is never fired, nor its fired copy delivered, before it is due."""
    out: list[Violation] = []
    bound: dict[str, tuple[int, TraceEvent]] = {}
    for ev in h.events:
        key = ev.msg_key
        if key is None:
            continue
        if ev.event == "timer_fire":
            bound.pop(key, None)
            if ev.deliver_ts is not None and ev.ts < ev.deliver_ts:
                out.append(_v(h, Code.TIMER_EARLY, ev, f"timer copy of {key} fired into {ev.topic} "
                              f"{ev.deliver_ts - ev.ts} ms early", f"ts >= {ev.deliver_ts}", ev.ts))
        elif ev.event == "send":
            if is_timer_request(ev):
                if key not in bound or ev.deliver_ts < bound[key][0]:
                    bound[key] = (ev.deliver_ts, ev)
            elif not delayed_send(ev):
                bound.pop(key, None)
        elif ev.event == "store":
            if ev.topic == TIMER_TOPIC:
                if ev.deliver_ts is not None and (key not in bound or ev.deliver_ts < bound[key][0]):
                    bound[key] = (ev.deliver_ts, ev)
            elif ev.topic is not None:
                bound.pop(key, None)
        elif ev.event == "deliver" and ev.reconsume_times == 0 and ev.topic not in (None, TIMER_TOPIC) \
                and key in bound and ev.ts < bound[key][0]:
            due, why = bound[key]
            out.append(_v(h, Code.TIMER_EARLY, ev, f"timer message {key} delivered {due - ev.ts} ms before its "
                          f"{why.event} (event {why.seq}) was due", f"ts >= {due}", ev.ts))
    return out


def check_timer_duplicated(h: History) -> list[Violation]:
    """A timer copy fires once between crashes (at-least-once only across a crash)."""
    out: list[Violation] = []
    crashes = 0
    last: dict[tuple[str, int], tuple[int, int]] = {}  # (key, timer copy) -> (seq, crashes) of its last fire
    stored: Counter[str] = Counter()
    requested: Counter[str] = Counter()
    fired: Counter[str] = Counter()
    first: dict[str, int] = {}
    for ev in h.events:
        key = ev.msg_key
        if ev.event == "crash":
            crashes += 1
        elif key is None:
            continue
        elif ev.event == "store" and ev.topic == TIMER_TOPIC:
            stored[key] += 1
        elif is_timer_request(ev) and _acked(ev):
            requested[key] += 1
        elif ev.event == "timer_fire":
            copy = _from_copy(ev)
            before = last.get((key, copy)) if copy is not None else None
            if before is not None and before[1] == crashes:
                out.append(_v(h, Code.TIMER_DUPLICATED, ev, f"timer copy {copy} of {key} fired again, no crash "
                              f"since its fire (event {before[0]})", "one fire between crashes", "two"))
            if copy is not None:
                last[(key, copy)] = (ev.seq, crashes)
            fired[key] += 1
            first.setdefault(key, crashes)
            copies = stored[key] or requested[key]
            if (before is None or before[1] != crashes) and copies and fired[key] > copies \
                    and first[key] == crashes:
                out.append(_v(h, Code.TIMER_DUPLICATED, ev, f"{key} fired {fired[key]} times from {copies} timer "
                              "copies, no crash since its first fire", f"<= {copies} fires", fired[key]))
    return out


def skipped_by_saved_timer_progress(events: Iterable[TraceEvent]) -> set[str]:
    """Keys whose timer copy was stored after a power loss at a reused rmq_sys_wheel_timer position,
    then a crash came before its fire.

    The checkpoint's enqueue pointer is saved apart from the commitlog (every timerFlushIntervalMs):
    after a power loss truncated the timer queue the restart clamps the pointer to the queue's end in
    memory only, so a crash before the next checkpoint reads the saved pointer — past the copies
    stored since at the reused positions — again (docs/fidelity.md TW-3; the schedule service's twin,
    which does skip such copies, is ``invariants.skipped_by_saved_delay_progress``). The wheel does
    not skip them: ``TimerService.restore`` rebuilds it from every surviving copy below the pointer,
    the reused positions included, so these copies fire (TIMER_UNFIRED does not exempt them;
    ``tests/properties/test_inv_timer.py`` runs the model through it). SYNC brokers and kills alone
    never reuse a position."""
    seen = -1
    bound = 0
    fired: dict[str, int] = {}
    waiting: list[tuple[str, int]] = []
    out: set[str] = set()
    for ev in events:
        if ev.event == "crash":
            out.update(key for key, at in waiting if fired.get(key, -1) < at)
            waiting = []
            if ev.status == "power":
                bound = max(bound, seen + 1)
        elif ev.event == "timer_fire" and ev.msg_key:
            fired[ev.msg_key] = ev.seq
        elif ev.event == "store" and ev.topic == TIMER_TOPIC and ev.queue_offset is not None:
            if ev.msg_key and ev.queue_offset < bound:
                waiting.append((ev.msg_key, ev.seq))
            seen = max(seen, ev.queue_offset)
    return out


def timer_not_due(events: Iterable[TraceEvent], drain_ts: int) -> set[str]:
    """Keys of timer sends and commits due after the drain (LOST does not judge them)."""
    return {ev.msg_key for ev in events if ev.msg_key and is_timer_request(ev) and ev.deliver_ts > drain_ts}


def _drain_ts(h: History) -> int | None:
    return max((e.ts for e in h.events if e.event == "drain"), default=None)


def check_timer_unfired(h: History) -> list[Violation]:
    """At the drain, every acknowledged timer message due by then was fired (unless a power loss may
    have taken its timer copy: its key at risk)."""
    drain_ts = _drain_ts(h)
    if drain_ts is None:
        return []
    events = _until_last_drain(h)
    exempt = _at_risk(events)
    fired = {e.msg_key for e in events if e.event == "timer_fire"}
    out: list[Violation] = []
    seen: set[str] = set()
    for ev in events:
        key = ev.msg_key
        if key and is_timer_request(ev) and _acked(ev) and ev.deliver_ts <= drain_ts \
                and key not in fired and key not in exempt and key not in seen:
            seen.add(key)
            out.append(_v(h, Code.TIMER_UNFIRED, ev, f"timer message {key} due at {ev.deliver_ts} not fired by the "
                          f"drain at {drain_ts}", "a timer_fire", "none"))
    return out


TIMER_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("TimerNotEarlyProperty", Code.TIMER_EARLY, "always",
              "A timer message is never fired, nor delivered, before TIMER_OUT_MS + timerPrecisionMs.",
              "HookUtils.transformTimerMessage + TimerMessageStore.dequeue (5.x)", check_timer_early),
    Invariant("TimerOnceWithoutCrashProperty", Code.TIMER_DUPLICATED, "always",
              "A timer copy is delivered once unless a crash lost the checkpoint since its fire.",
              "TimerCheckpoint (timerFlushIntervalMs, shutdown) + TimerMessageStore.recover (5.x)",
              check_timer_duplicated),
    Invariant("TimerFiredProperty", Code.TIMER_UNFIRED, "eventually",
              "Every acknowledged timer message due before the drain was delivered (none lost by a crash).",
              "TimerMessageStore enqueue/dequeue + TimerCheckpoint recovery (5.x)", check_timer_unfired),
)
