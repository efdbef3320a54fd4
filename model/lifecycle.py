"""Finite lifecycles as data: per message, per broker lock, per transaction.

Theory of operation
-------------------
Each lifecycle is a table of ``Transition(source, action, guard, target,
effect)`` rows over a small frozen *variables* record. ``step`` looks the row
up, evaluates the guard, applies the effect and returns the new
``(state, vars)``; an action with no enabled row is refused with
``Refused`` and the state is left unchanged (h11's rule: errors never
half-apply). Guards and effects are plain named functions so that:

- the model broker takes its routing decisions from them
  (``route_send_back``, ``lock_decision``, ``check_decision``);
- ``rmqspec.properties`` encodes the same table in z3, guard by guard and
  effect by effect, and a Hypothesis test evaluates both on the same concrete
  states so they cannot drift;
- ``docs/`` diagrams are generated from the same rows (``to_mermaid``).

Sources (RocketMQ 4.9): B/processor/SendMessageProcessor.consumerSendMsgBack
(retry / DLQ routing), S/CommitLog.putMessage (delay level clamping),
S/schedule/ScheduleMessageService (due rule), B/client/rebalance/
RebalanceLockManager (lock expiry), B/transaction/queue/
TransactionalMessageServiceImpl.check (needDiscard, needSkip, immunity).
RocketMQ 5.x (5.3.3; the ``timer`` table, only where ``Version.timer_wheel``):
B/util/HookUtils.handleScheduleMessage (the put hook: DELAY wins, at once, the
max delay, the slot), S/timer/TimerMessageStore (delivery at the slot's end,
the checkpoint: at-least-once after a crash); the arithmetic is
``model/timer.py``'s (``out_ms``, ``due_ms``).

Simplifications: a message's lifecycle is per (group, logical message); the
transaction lifecycle ignores the op-queue bookkeeping (an op is the
transaction's resolution); time is an integer millisecond clock. The timer
table is its own lifecycle (one timer request: a send, or a COMMIT, carrying
``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``) rather than
rows of MESSAGE: the copy it fires starts MESSAGE's lifecycle at STORED, and
the MESSAGE theorems of ``properties/theorems.py`` stay about MESSAGE alone
(the timer's arithmetic is proved by ``properties/theorems_timer.py``). Not
modelled as rows: ``timerWheelEnable=false`` (SYSTEM_ERROR) and
``TIMER_DEL_UNIQKEY`` (delete messages).

The pop table (5.x pop consumption: one message popped by one group, concurrently; where
``Version.pop``) follows B/processor/PopMessageProcessor (a pop writes a checkpoint: pop time,
invisible time), AckMessageProcessor (an ack marks its checkpoint's bit), ChangeInvisibleTimeProcessor
(a new checkpoint from now, then the old one acked) and PopReviveService (an un-acked checkpoint's
message is put into the pop retry topic with reconsume times + 1 once pop time + invisible time has
come, ``pop_expired``). Its state is the message as the group sees it: READY (the next pop may hand it:
first the original, after a revive the retry copy), POPPED, ACKED. Not rows: a change of the invisible
time with a stale handle (5.3.3 accepts it and writes one more checkpoint, which can revive the message
twice) and crashes (the checkpoints and acks are messages on the revive topic: what a crash keeps is the
store's rule). Orderly pop is its own table, ``pop_order``: one queue of one group
(B/offset/ConsumerOrderInfoManager: checkBlock / needBlock, commitAndNext), a batch in flight blocks the
queue to other attempts until it is acked or past its invisible time, acks that reach the batch's first
messages commit them (``commit``: the consume offset moves to the first message not acked; the rest
still blocks), and an expired batch is handed again from the consume offset, never skipped (an orderly
pop never reads the retry topic). Not rows there: the per-offset visible times a change of the invisible
time sets, and the consumed counts behind the orderly reconsume times.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from rmqspec.model.timer import due_ms, out_ms

# ---------------------------------------------------------------------------
# Table machinery


class Refused(Exception):
    """No enabled transition for this action in this state; nothing changed."""


@attrs.frozen
class Transition:
    source: str
    action: str
    guard: str  # name in the lifecycle's guards, or "" for always
    target: str
    effect: str  # name in the lifecycle's effects, or "" for none
    note: str = ""


@attrs.frozen
class Lifecycle:
    name: str
    states: tuple[str, ...]
    initial: str
    terminal: frozenset[str]
    transitions: tuple[Transition, ...]
    guards: Mapping[str, Callable[[Any, Mapping[str, int]], bool]]
    effects: Mapping[str, Callable[[Any, Mapping[str, int]], Any]]

    def enabled(self, state: str, action: str, vars_: Any, args: Mapping[str, int]) -> Transition:
        """The unique enabled row for ``action`` in ``state``, or ``Refused``."""
        rows = [
            t
            for t in self.transitions
            if t.source == state
            and t.action == action
            and (not t.guard or self.guards[t.guard](vars_, args))
        ]
        if not rows:
            raise Refused(f"{self.name}: {action} not enabled in {state} with {vars_} {dict(args)}")
        if len(rows) > 1:  # the tables are written so that guards are exclusive
            raise AssertionError(f"{self.name}: {action} ambiguous in {state}: {rows}")
        return rows[0]

    def step(
        self, state: str, vars_: Any, action: str, args: Mapping[str, int] | None = None
    ) -> tuple[str, Any]:
        args = args or {}
        row = self.enabled(state, action, vars_, args)
        new_vars = self.effects[row.effect](vars_, args) if row.effect else vars_
        return row.target, new_vars

    def actions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.action for t in self.transitions))

    def to_mermaid(self) -> str:
        """A Mermaid ``stateDiagram-v2`` generated from the table."""
        lines = ["stateDiagram-v2", f"    [*] --> {self.initial}"]
        for t in self.transitions:
            label = t.action + (f" [{t.guard}]" if t.guard else "") + (f" / {t.effect}" if t.effect else "")
            lines.append(f"    {t.source} --> {t.target}: {label}")
        for s in sorted(self.terminal):
            lines.append(f"    {s} --> [*]")
        return "\n".join(lines) + "\n"

    def to_dot(self) -> str:
        """A Graphviz digraph generated from the table."""
        lines = [f'digraph "{self.name}" {{', "  rankdir=LR;", '  node [shape=box, style=rounded];']
        for s in self.states:
            shape = ", peripheries=2" if s in self.terminal else ""
            lines.append(f'  "{s}" [label="{s}"{shape}];')
        lines.append('  "__init" [shape=point];')
        lines.append(f'  "__init" -> "{self.initial}";')
        for t in self.transitions:
            label = t.action + (f"\\n[{t.guard}]" if t.guard else "") + (f"\\n/ {t.effect}" if t.effect else "")
            lines.append(f'  "{t.source}" -> "{t.target}" [label="{label}"];')
        lines.append("}")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Decisions shared with the model broker (one definition each)

RETRY = "RETRY"
DLQ = "DLQ"


def route_send_back(
    reconsume_times: int, max_reconsume_times: int, delay_level: int, max_level: int
) -> tuple[str, int]:
    """CONSUMER_SEND_MSG_BACK routing: ``(DLQ, 0)`` or ``(RETRY, level)``.

    DLQ when ``reconsume_times >= max`` or ``delay_level < 0``; otherwise level
    0 means ``3 + reconsume_times``, and a level above the table is clamped to
    the maximum at store time.
    """
    if reconsume_times >= max_reconsume_times or delay_level < 0:
        return DLQ, 0
    level = 3 + reconsume_times if delay_level == 0 else delay_level
    return RETRY, min(level, max_level)


def effective_max_reconsume_times(request_max: int | None, group_max: int) -> int:
    """The request's max when given (client −1 means 16), else the group's."""
    if request_max is None:
        return group_max
    return 16 if request_max == -1 else request_max


def is_due(deliver_ts: int, now: int) -> bool:
    """A scheduled copy is due when ``deliver_ts <= now`` (ScheduleMessageService)."""
    return deliver_ts <= now


def needs_correction(deliver_ts: int, now: int, delay_ms: int) -> bool:
    """``deliver_ts > now + delay``: the clock went back; deliver now (correctDeliverTimestamp)."""
    return deliver_ts > now + delay_ms


LOCK_GRANTED = "GRANTED"
LOCK_DENIED = "DENIED"


def lock_expired(last_update: int, now: int, max_live_ms: int) -> bool:
    """RebalanceLockManager.LockEntry.isExpired: ``now - last_update > max_live``."""
    return now - last_update > max_live_ms


def lock_decision(
    holder: str | None, last_update: int, client: str, now: int, max_live_ms: int
) -> bool:
    """Whether ``lock_batch`` grants ``client`` the queue (renew, free, or expired)."""
    return holder is None or holder == client or lock_expired(last_update, now, max_live_ms)


CHECK = "CHECK"
SKIP_YOUNG = "SKIP_YOUNG"  # too young: stop the scan of this half queue
DISCARD = "DISCARD"


def check_decision(
    check_times: int,
    born_ts: int,
    now: int,
    *,
    check_max: int,
    immunity_ms: int,
    file_reserved_ms: int,
) -> str:
    """TransactionalMessageServiceImpl.check for one pending half.

    Discard when the half was already checked ``check_max`` times
    (needDiscard) or is older than the file reserved time (needSkip);
    stop when younger than the immunity time (transactionTimeOut, or
    CHECK_IMMUNITY_TIME_IN_SECONDS × 1000); otherwise check (check_times + 1).
    """
    if check_times >= check_max or now - born_ts > file_reserved_ms:
        return DISCARD
    age = now - born_ts
    if 0 <= age < immunity_ms:
        return SKIP_YOUNG
    return CHECK


# ---------------------------------------------------------------------------
# Per-message lifecycle (one logical message, one consumer group)


@attrs.frozen
class MessageVars:
    """Variables of one message's lifecycle for one group.

    ``r``: reconsume_times of the current copy; ``m``: the max reconsume
    times in force; ``deliver_ts``: when the scheduled copy is due;
    ``max_level``: the delay table's size; ``delay``: the chosen level's delay.
    """

    r: int = 0
    m: int = 16
    deliver_ts: int = 0
    max_level: int = 18


def _g_dlq(v: MessageVars, a: Mapping[str, int]) -> bool:
    return route_send_back(v.r, v.m, a["level"], v.max_level)[0] == DLQ


def _g_retry(v: MessageVars, a: Mapping[str, int]) -> bool:
    return not _g_dlq(v, a)


def _g_due(v: MessageVars, a: Mapping[str, int]) -> bool:
    return is_due(v.deliver_ts, a["now"])


def _e_retry(v: MessageVars, a: Mapping[str, int]) -> MessageVars:
    # a["delay"] is the delay of the routed level, looked up by the caller.
    return attrs.evolve(v, r=v.r + 1, deliver_ts=a["now"] + a["delay"])


def _e_dead(v: MessageVars, a: Mapping[str, int]) -> MessageVars:
    return attrs.evolve(v, r=v.r + 1)


MESSAGE = Lifecycle(
    name="message",
    states=("STORED", "DELIVERED", "CONSUMED", "SCHEDULED", "DEAD"),
    initial="STORED",
    terminal=frozenset({"CONSUMED", "DEAD"}),
    transitions=(
        Transition("STORED", "deliver", "", "DELIVERED", "", "pull returns the copy"),
        Transition("DELIVERED", "consume_success", "", "CONSUMED", "", "acked; offset may pass it"),
        Transition("DELIVERED", "send_back", "retry", "SCHEDULED", "retry", "copy to %RETRY% via the schedule topic"),
        Transition("DELIVERED", "send_back", "dlq", "DEAD", "dead", "copy to %DLQ%"),
        # The client bumps its in-memory reconsumeTimes and re-consumes locally after
        # 5 s; the broker routes a later send-back on the *stored* copy's count, so
        # the lifecycle's r (the stored copy's reconsume_times) does not change.
        Transition("DELIVERED", "send_back_failed", "", "DELIVERED", "", "client reconsumes locally after 5 s"),
        Transition("SCHEDULED", "fire", "due", "STORED", "", "schedule service rewrites to %RETRY%"),
    ),
    guards={"retry": _g_retry, "dlq": _g_dlq, "due": _g_due},
    effects={"retry": _e_retry, "dead": _e_dead},
)


# ---------------------------------------------------------------------------
# Broker lock lifecycle (one (group, mq) entry of the lock table)


@attrs.frozen
class LockVars:
    """``holder`` is a client number (−1 = none); ``last_update`` the broker time of the last grant."""

    holder: int = -1
    last_update: int = 0
    max_live: int = 60_000


def _g_grant_free(v: LockVars, a: Mapping[str, int]) -> bool:
    return True


def _g_grant(v: LockVars, a: Mapping[str, int]) -> bool:
    return v.holder == a["client"] or lock_expired(v.last_update, a["now"], v.max_live)


def _g_deny(v: LockVars, a: Mapping[str, int]) -> bool:
    return not _g_grant(v, a)


def _g_holder(v: LockVars, a: Mapping[str, int]) -> bool:
    return v.holder == a["client"]


def _g_not_holder(v: LockVars, a: Mapping[str, int]) -> bool:
    return v.holder != a["client"]


def _e_take(v: LockVars, a: Mapping[str, int]) -> LockVars:
    return attrs.evolve(v, holder=a["client"], last_update=a["now"])


def _e_release(v: LockVars, a: Mapping[str, int]) -> LockVars:
    return attrs.evolve(v, holder=-1)


LOCK = Lifecycle(
    name="lock",
    states=("FREE", "HELD"),
    initial="FREE",
    terminal=frozenset(),
    transitions=(
        Transition("FREE", "lock", "", "HELD", "take", "free queue: granted"),
        Transition("HELD", "lock", "grant", "HELD", "take", "renewal by the holder, or takeover after expiry"),
        Transition("HELD", "lock", "deny", "HELD", "", "held by another, unexpired: not granted"),
        Transition("HELD", "unlock", "holder", "FREE", "release", ""),
        Transition("HELD", "unlock", "not_holder", "HELD", "", "unlock by a non-holder does nothing"),
        Transition("FREE", "unlock", "", "FREE", "", ""),
    ),
    guards={"grant": _g_grant, "deny": _g_deny, "holder": _g_holder, "not_holder": _g_not_holder},
    effects={"take": _e_take, "release": _e_release},
)


# ---------------------------------------------------------------------------
# Transaction lifecycle (one half message)


@attrs.frozen
class TxnVars:
    """``checks``: TRANSACTION_CHECK_TIMES so far; ``born``: the half's born time."""

    checks: int = 0
    born: int = 0
    check_max: int = 15
    immunity: int = 6000
    reserved: int = 72 * 3_600_000


def _txn_decision(v: TxnVars, a: Mapping[str, int]) -> str:
    return check_decision(
        v.checks, v.born, a["now"], check_max=v.check_max, immunity_ms=v.immunity,
        file_reserved_ms=v.reserved,
    )


def _g_check(v: TxnVars, a: Mapping[str, int]) -> bool:
    return _txn_decision(v, a) == CHECK


def _g_young(v: TxnVars, a: Mapping[str, int]) -> bool:
    return _txn_decision(v, a) == SKIP_YOUNG


def _g_discard(v: TxnVars, a: Mapping[str, int]) -> bool:
    return _txn_decision(v, a) == DISCARD


def _e_checked(v: TxnVars, a: Mapping[str, int]) -> TxnVars:
    return attrs.evolve(v, checks=v.checks + 1)


TRANSACTION = Lifecycle(
    name="transaction",
    states=("PENDING", "COMMITTED", "ROLLED_BACK", "DISCARDED"),
    initial="PENDING",
    terminal=frozenset({"ROLLED_BACK", "DISCARDED"}),
    transitions=(
        Transition("PENDING", "commit", "", "COMMITTED", "", "real message + op written"),
        Transition("PENDING", "rollback", "", "ROLLED_BACK", "", "op written only"),
        Transition("PENDING", "unknown", "", "PENDING", "", "END_TRANSACTION UNKNOWN does nothing"),
        Transition("PENDING", "check", "check", "PENDING", "checked", "re-put with check times + 1; CheckRequest"),
        Transition("PENDING", "check", "young", "PENDING", "", "younger than the immunity time: scan stops"),
        Transition("PENDING", "check", "discard", "DISCARDED", "", "copied to TRANS_CHECK_MAX_TIME_TOPIC"),
        Transition("COMMITTED", "commit", "", "COMMITTED", "", "duplicate commit: a second real message (4.9)"),
    ),
    guards={"check": _g_check, "young": _g_young, "discard": _g_discard},
    effects={"checked": _e_checked},
)

# ---------------------------------------------------------------------------
# Timer lifecycle (5.x: one timer request, model/timer.py)

TIMER_LEVEL = "LEVEL"  # a delay level > 0: DELAY wins, the TIMER_* properties are dropped
TIMER_AT_ONCE = "AT_ONCE"  # the requested time is not after now: stored as is, in its own topic
TIMER_ILLEGAL = "ILLEGAL"  # not a Java long, or more than timerMaxDelaySec ahead: MESSAGE_ILLEGAL
TIMER_WHEEL = "WHEEL"  # stored in rmq_sys_wheel_timer until its slot


def timer_decision(level: int, requested: int | None, now: int, max_delay_ms: int) -> str:
    """HookUtils.handleScheduleMessage for a put (NOT / COMMIT) carrying a TIMER_* property:
    ``requested`` is the deliver time it asks for (None: not a Java long)."""
    if level > 0:
        return TIMER_LEVEL
    if requested is None:
        return TIMER_ILLEGAL
    if requested <= now:
        return TIMER_AT_ONCE
    if requested - now > max_delay_ms:
        return TIMER_ILLEGAL
    return TIMER_WHEEL


def timer_due(requested: int, precision_ms: int) -> int:
    """When the wheel delivers a copy asking for ``requested``: its slot (TIMER_OUT_MS, the largest
    multiple of the precision below it) + one precision — the requested time rounded up."""
    return due_ms(out_ms(requested, precision_ms), precision_ms)


@attrs.frozen
class TimerVars:
    """``requested``: the deliver time asked for (``parsed`` 0: the property is not a Java long);
    ``level``: the put's delay level; ``deliver_ts``: the copy's due time once in the wheel;
    ``precision`` (timerPrecisionMs) and ``max_delay`` (timerMaxDelaySec × 1000)."""

    requested: int = 0
    parsed: int = 1
    level: int = 0
    deliver_ts: int = 0
    precision: int = 1000
    max_delay: int = 3 * 24 * 3_600_000


def _timer_decision(v: TimerVars, a: Mapping[str, int]) -> str:
    return timer_decision(v.level, v.requested if v.parsed else None, a["now"], v.max_delay)


def _g_timer(kind: str) -> Callable[[TimerVars, Mapping[str, int]], bool]:
    def guard(v: TimerVars, a: Mapping[str, int]) -> bool:
        return _timer_decision(v, a) == kind

    guard.__name__ = f"_g_timer_{kind.lower()}"
    return guard


def _g_timer_due(v: TimerVars, a: Mapping[str, int]) -> bool:
    return is_due(v.deliver_ts, a["now"])


def _e_slot(v: TimerVars, a: Mapping[str, int]) -> TimerVars:
    return attrs.evolve(v, deliver_ts=timer_due(v.requested, v.precision))


TIMER = Lifecycle(
    name="timer",
    states=("SENT", "SCHEDULED", "STORED", "REFUSED", "WHEEL", "FIRED", "REFIRABLE"),
    initial="SENT",
    terminal=frozenset({"SCHEDULED", "STORED", "REFUSED", "FIRED", "REFIRABLE"}),
    transitions=(
        Transition("SENT", "put", "level", "SCHEDULED", "", "DELAY wins: TIMER_* dropped, a delayed message"),
        Transition("SENT", "put", "at_once", "STORED", "", "requested time not after now: stored as is"),
        Transition("SENT", "put", "illegal", "REFUSED", "", "not a long, or past timerMaxDelaySec: MESSAGE_ILLEGAL"),
        Transition("SENT", "put", "wheel", "WHEEL", "slot", "stored in rmq_sys_wheel_timer with TIMER_OUT_MS"),
        Transition("WHEEL", "fire", "due", "FIRED", "", "put to REAL_TOPIC / REAL_QID at out + precision or later"),
        Transition("WHEEL", "crash", "", "WHEEL", "", "a pending copy survives: checkpoint + timer queue re-read"),
        Transition("FIRED", "crash", "", "REFIRABLE", "", "fired after the last checkpoint: may fire again"),
        Transition("REFIRABLE", "fire", "due", "FIRED", "", "at-least-once: delivered again after a crash"),
        Transition("REFIRABLE", "crash", "", "REFIRABLE", "", "still may fire again"),
    ),
    guards={"level": _g_timer(TIMER_LEVEL), "at_once": _g_timer(TIMER_AT_ONCE),
            "illegal": _g_timer(TIMER_ILLEGAL), "wheel": _g_timer(TIMER_WHEEL), "due": _g_timer_due},
    effects={"slot": _e_slot},
)

# ---------------------------------------------------------------------------
# Pop lifecycle (5.x: one message popped by one consumer group, concurrently)


def pop_expired(pop_ts: int, invisible_ms: int, now: int) -> bool:
    """PopReviveService: a checkpoint's message is revived only once its revive time, pop time +
    invisible time, has come (``reviveTime <= now``); 5.3.3 revives later still (the revive log is
    read behind the clock), never earlier."""
    return now >= pop_ts + invisible_ms


@attrs.frozen
class PopVars:
    """``r``: the reconsume times of the copy the group pops next (the revived copy carries + 1);
    ``pop_ts`` / ``inv``: the pop time and invisible time of the live checkpoint (ExtraInfoUtil's
    popTime, invisibleTime); ``h``: the number of that checkpoint's handle — every pop and every change
    of the invisible time hands out a new one (0: none yet)."""

    r: int = 0
    pop_ts: int = 0
    inv: int = 0
    h: int = 0


def _g_pop_current(v: PopVars, a: Mapping[str, int]) -> bool:
    return a["handle"] == v.h


def _g_pop_stale(v: PopVars, a: Mapping[str, int]) -> bool:
    return a["handle"] != v.h


def _g_pop_expired(v: PopVars, a: Mapping[str, int]) -> bool:
    return pop_expired(v.pop_ts, v.inv, a["now"])


def _e_pop_handle(v: PopVars, a: Mapping[str, int]) -> PopVars:
    return attrs.evolve(v, pop_ts=a["now"], inv=a["invisible"], h=v.h + 1)


def _e_revived(v: PopVars, a: Mapping[str, int]) -> PopVars:
    return attrs.evolve(v, r=v.r + 1)


POP = Lifecycle(
    name="pop",
    states=("READY", "POPPED", "ACKED"),
    initial="READY",
    terminal=frozenset({"ACKED"}),
    transitions=(
        Transition("READY", "pop", "", "POPPED", "handle", "a checkpoint: invisible until pop time + inv"),
        Transition("POPPED", "ack", "current", "ACKED", "", "the ack meets its checkpoint: never revived"),
        Transition("POPPED", "ack", "stale", "POPPED", "", "an older handle's ack: the live checkpoint stays"),
        Transition("POPPED", "change", "current", "POPPED", "handle",
                   "CHANGE_MESSAGE_INVISIBLETIME: a new checkpoint from now, the old one acked"),
        Transition("POPPED", "revive", "expired", "READY", "revived",
                   "no ack by the revive time: a copy in the pop retry topic, reconsume times + 1"),
        Transition("READY", "ack", "", "READY", "", "an ack after the revive: the revived copy stays"),
        Transition("ACKED", "ack", "", "ACKED", "", "a second ack of the same handle changes nothing"),
    ),
    guards={"current": _g_pop_current, "stale": _g_pop_stale, "expired": _g_pop_expired},
    effects={"handle": _e_pop_handle, "revived": _e_revived},
)

# ---------------------------------------------------------------------------
# Orderly pop lifecycle (5.x: one queue popped by one consumer group with order=true)


def pop_order_blocked(att: int, pop_ts: int, inv: int, now: int, attempt: int) -> bool:
    """ConsumerOrderInfoManager.OrderInfo.needBlock for a queue with a batch in flight: a pop of
    another attempt (attemptId) is blocked while the batch is neither acked nor past pop time +
    invisible time; the same attempt (the client sending its request again) is not."""
    return attempt != att and not pop_expired(pop_ts, inv, now)


@attrs.frozen
class PopOrderVars:
    """``off``: the group's consume offset in the queue (the first message not acked); ``n``: the
    size of the batch in flight from ``off`` (0: none); ``pop_ts`` / ``inv`` / ``att``: that batch's
    pop time, invisible time and attempt."""

    off: int = 0
    n: int = 0
    pop_ts: int = 0
    inv: int = 0
    att: int = 0


def _g_order_free(v: PopOrderVars, a: Mapping[str, int]) -> bool:
    return not pop_order_blocked(v.att, v.pop_ts, v.inv, a["now"], a["attempt"])


def _g_order_part(v: PopOrderVars, a: Mapping[str, int]) -> bool:
    return 1 <= a["count"] < v.n


def _g_order_whole(v: PopOrderVars, a: Mapping[str, int]) -> bool:
    return a["count"] == v.n


def _e_order_batch(v: PopOrderVars, a: Mapping[str, int]) -> PopOrderVars:
    return attrs.evolve(v, n=a["batch"], pop_ts=a["now"], inv=a["invisible"], att=a["attempt"])


def _e_order_commit(v: PopOrderVars, a: Mapping[str, int]) -> PopOrderVars:
    return attrs.evolve(v, off=v.off + a["count"], n=v.n - a["count"])


POP_ORDER = Lifecycle(
    name="pop_order",
    states=("IDLE", "INFLIGHT"),
    initial="IDLE",
    terminal=frozenset(),
    transitions=(
        Transition("IDLE", "pop", "", "INFLIGHT", "batch", "a batch from the consume offset"),
        Transition("INFLIGHT", "pop", "free", "INFLIGHT", "batch",
                   "the same attempt, or the batch is past its invisible time: handed again from the offset"),
        Transition("INFLIGHT", "commit", "part", "INFLIGHT", "commit",
                   "acks reached the first count messages: commitAndNext moves the offset, the rest still blocks"),
        Transition("INFLIGHT", "commit", "whole", "IDLE", "commit", "every message of the batch acked"),
    ),
    guards={"free": _g_order_free, "part": _g_order_part, "whole": _g_order_whole},
    effects={"batch": _e_order_batch, "commit": _e_order_commit},
)

# Every table: proved (properties/theorems*.py), drawn (model/diagrams.py), every row judged by a trace rule
# (properties/inv_tables.py TABLE_JUDGES) and reached by the conformance machine (properties/coverage.py).
LIFECYCLES: tuple[Lifecycle, ...] = (MESSAGE, LOCK, TRANSACTION, TIMER, POP, POP_ORDER)
# The 5.x pop tables among them: no profile without pop (4.9) takes their rows (coverage: not applicable).
POP_LIFECYCLES: tuple[Lifecycle, ...] = (POP, POP_ORDER)
