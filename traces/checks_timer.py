"""Timer message detectors (RocketMQ 5.x, RIP-43): TIMER_EARLY, TIMER_DUPLICATED, TIMER_UNFIRED.

Theory of operation
-------------------
RocketMQ 5.x's put hook (B/util/HookUtils.handleScheduleMessage) stores a message carrying
``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS`` (and no delay level) in
``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS`` = the requested time rounded down to
``timerPrecisionMs``; the timer wheel (S/timer/TimerMessageStore) re-puts it into its real topic
at ``TIMER_OUT_MS + precision`` or later — never before the requested time. Its checkpoint
(TimerCheckpoint, flushed every ``timerFlushIntervalMs`` and at shutdown) holds the enqueue
pointer and the read time: after a crash the copies delivered since the last checkpoint are
delivered again (at-least-once), none is lost. ``model/timer.py`` is the model of it.

What a trace shows of it (SPEC §8 and ``traces/README.md``): the timer ``send`` (real topic and
queue, ``delay_level`` null, ``deliver_ts`` = the earliest legal delivery; a client-side trace may
give the send's start + the requested delay, a lower bound of it), the ``store`` of the timer copy
in ``rmq_sys_wheel_timer`` (with ``deliver_ts``), and one ``timer_fire`` per re-put (the new copy in
the real topic, ``deliver_ts`` = its due time, ``detail.from_commitlog_offset`` = the timer copy's).
A timer send is ``checks_common.timer_send``. The Spark audit runs these detectors on the message
pass's partitions (``spark/rules_timer.py``), and the conformance machine's invariants
(``properties/invariants.py``) judge the same guarantees on its ghost history.

LOST does not judge a timer message not yet due at the drain: ``traces/unjudged.py`` leaves its
msg_key unjudged for LOST, with the reason ``checks_common.NOT_JUDGED_WHY``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rmqspec.properties.codes import Code
from rmqspec.traces.checks_common import (
    TIMER_TOPIC,
    Finding,
    Trace,
    acked_send,
    delayed_send,
    detail_of,
    keys_of,
    timer_send,
    violation,
)
from rmqspec.traces.checks_retention import expire_rows, kept, timer_copies

__all__ = ["detect_timer_duplicated", "detect_timer_early", "detect_timer_unfired", "from_commitlog_offset"]


def from_commitlog_offset(row: Mapping[str, Any]) -> int | None:
    """A ``timer_fire``'s ``detail.from_commitlog_offset`` (the timer copy it re-put) when it is a
    JSON integer within 64 bits, else None (the Spark audit reads it the same way: ``spark/inputs.py``)."""
    value = detail_of(row).get("from_commitlog_offset")
    if isinstance(value, int) and not isinstance(value, bool) and -(1 << 63) <= value < 1 << 63:
        return value
    return None


def detect_timer_early(trace: Trace) -> Iterator[Finding]:
    """TIMER_EARLY: a timer message fired or delivered before it was due.

    SPEC §8.1 extension (5.x timer messages; TimerMessageStore never delivers a copy before
    ``TIMER_OUT_MS + timerPrecisionMs``). Fire clause: a ``timer_fire`` (with a msg_key) whose ts is
    before its own ``deliver_ts``; seqs = [timer_fire]. Deliver clause, for traces that show no
    fire (a client's): per msg_key, the timer sends (``checks_common.timer_send``) and the stores in
    rmq_sys_wheel_timer with ``deliver_ts`` bound its first copy's delivery by the lowest of their
    ``deliver_ts``; a ``deliver`` of the key with reconsume_times 0 outside rmq_sys_wheel_timer and
    before that bound is early; seqs = [the send or store giving the bound, deliver]. The bound is
    dropped at a ``timer_fire`` of the key (an early fire is the offending event, not its
    deliveries), at a send of the key that is neither a timer send nor delayed (a resend whose
    requested time had passed is stored as it is: deliverable at once) and at a store of the key
    in any other topic (such a copy may be delivered at once); a later timer send or store sets it
    again. A delivery exactly at the bound is on time. Rows lacking what this reads are not
    judged (``traces/unjudged.py``).
    """
    bound: dict[str, tuple[int, int]] = {}  # msg_key -> (lowest deliver_ts, its row's seq)
    for _, row in trace.of("send", "store", "timer_fire", "deliver"):
        key, ev = row["msg_key"], row["event"]
        if key is None:
            continue
        if ev == "timer_fire":
            bound.pop(key, None)
            if row["deliver_ts"] is not None and row["ts"] < row["deliver_ts"]:
                yield violation(
                    Code.TIMER_EARLY,
                    (row["seq"],),
                    keys_of(row, "topic", "msg_key"),
                    f"timer copy fired at {row['ts']}, due at {row['deliver_ts']}",
                )
        elif ev == "send":
            if timer_send(row):
                bound[key] = min(bound.get(key, (row["deliver_ts"], row["seq"])), (row["deliver_ts"], row["seq"]))
            elif not delayed_send(row):
                bound.pop(key, None)
        elif ev == "store":
            if row["topic"] == TIMER_TOPIC:
                if row["deliver_ts"] is not None:
                    due = (row["deliver_ts"], row["seq"])
                    bound[key] = min(bound.get(key, due), due)
            elif row["topic"] is not None:
                bound.pop(key, None)
        elif row["reconsume_times"] == 0 and row["topic"] not in (None, TIMER_TOPIC) and key in bound:
            due, seq = bound[key]
            if row["ts"] < due:
                yield violation(
                    Code.TIMER_EARLY,
                    (seq, row["seq"]),
                    keys_of(row, "group", "topic", "msg_key"),
                    f"timer message delivered at {row['ts']}, due at {due}",
                )


def detect_timer_duplicated(trace: Trace, crashes: Sequence[int] | None = None) -> Iterator[Finding]:
    """TIMER_DUPLICATED: one timer copy fired twice with no crash in between.

    SPEC §8.1 extension (5.x timer messages). TimerCheckpoint is flushed every
    ``timerFlushIntervalMs`` and at a clean shutdown: only a crash (kill or power) makes the wheel
    deliver a copy again. A ``timer_fire`` whose timer copy — (msg_key,
    ``detail.from_commitlog_offset``) — fired before with no ``crash`` since that fire.
    seqs = [that earlier fire, this fire]. A fire without msg_key or an integral
    ``detail.from_commitlog_offset`` names no copy: not judged (``traces/unjudged.py``).
    ``crashes``: per row of ``trace``, the crash rows before it, when the caller has only some rows
    (the Spark audit's message partitions); else counted from the trace's ``crash`` rows.
    """
    last: dict[tuple[str, int], tuple[int, int]] = {}  # copy -> (seq, crashes) of its latest fire
    counted = 0
    for i, row in trace.of("crash", "timer_fire"):
        if row["event"] == "crash":
            counted += 1
            continue
        copy, key = from_commitlog_offset(row), row["msg_key"]
        if copy is None or key is None:
            continue
        now = counted if crashes is None else crashes[i]
        before = last.get((key, copy))
        if before is not None and before[1] == now:
            yield violation(
                Code.TIMER_DUPLICATED,
                (before[0], row["seq"]),
                keys_of(row, "topic", "msg_key"),
                f"timer copy {copy} of {key} fired again, no crash since its fire at seq {before[0]}",
            )
        last[(key, copy)] = (row["seq"], now)


def detect_timer_unfired(trace: Trace, expires: Sequence[Mapping[str, Any]] | None = None) -> Iterator[Finding]:
    """TIMER_UNFIRED: a timer message due before the drain that the wheel never delivered.

    SPEC §8.1 extension (5.x timer messages; needs a ``drain``). At the drain, an acknowledged
    (as LOST: ``checks_common.acked_send``) timer ``send`` (``checks_common.timer_send``) before it
    whose ``deliver_ts`` is at or before the drain's ts, with no ``timer_fire`` of its msg_key
    before the drain, unless its msg_key is at risk (a ``crash``'s ``detail.at_risk``: written after
    the last flush of a broker that lost power). Only a message whose timer copy the trace shows (a
    ``store`` of its msg_key in rmq_sys_wheel_timer before the drain) is judged: a trace recorded on
    the client side shows no broker's copies nor fires. One finding per msg_key, at its first such
    send; seqs = [send, drain]. A timer send due after the drain is not judged here, nor by LOST.
    The at-risk keys are the only exemption, as in the ghost invariant (``properties/inv_timer.py``):
    a copy waiting in the wheel survives every crash — one stored after a power loss at a position
    the loss freed too, when a second crash comes before the next checkpoint (TimerCheckpoint's old
    enqueue pointer is read again, but the restart rebuilds the wheel from the whole timer queue
    below it: ``model/timer.py`` ``TimerService.restore``). Retention is the other: a key is not judged
    when an ``expire`` before the drain may have taken its timer copy (``checks_retention.kept`` over
    ``timer_copies``: the wheel drops a copy whose record went; ``expires``, the trace's ``expire`` rows
    up to the drain when the caller has only some rows).
    """
    drain, drain_ts = trace.drain_seq, trace.drain_ts
    if drain is None or drain_ts is None:
        return
    expires = expire_rows(trace.rows, drain) if expires is None else expires
    copies = timer_copies(r for r in trace.rows if r["seq"] <= drain) if expires else {}
    fired: set[str] = set()
    stored: set[str] = set()
    due: dict[str, Mapping[str, Any]] = {}
    for _, row in trace.of("send", "store", "timer_fire"):
        key = row["msg_key"]
        if row["seq"] > drain or key is None:
            continue
        if row["event"] == "timer_fire":
            fired.add(key)
        elif row["event"] == "store":
            if row["topic"] == TIMER_TOPIC:
                stored.add(key)
        elif timer_send(row) and acked_send(row) and row["deliver_ts"] <= drain_ts:
            due.setdefault(key, row)
    for key, row in due.items():
        if key in stored and key not in fired and key not in trace.at_risk \
                and (not expires or kept(copies.get(key, ()), expires, TIMER_TOPIC)):
            yield violation(
                Code.TIMER_UNFIRED,
                (row["seq"], drain),
                keys_of(row, "topic", "msg_key"),
                f"timer message {key} due at {row['deliver_ts']}, not fired by the drain at {drain_ts}",
            )
