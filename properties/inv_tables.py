"""Every row of ``model/lifecycle.py``'s tables judged: who judges it, and the replays as invariants.

Theory of operation
-------------------
The z3 encoding and the diagrams are generated from the lifecycle tables, so
a new row cannot be left out of them; ``TABLE_JUDGES`` does the same for the
trace invariants. It names, for every ``Transition`` of MESSAGE, LOCK,
TRANSACTION, TIMER, POP and POP_ORDER, the violation codes whose findings say that the row's *guard*
was broken (the row taken where its guard is false, or another row taken
where its guard is true; for an unguarded row, the action seen outside its
source state) and the codes that judge its *effect* and target — or, where a
trace cannot show it, why (``guard_unseen`` / ``effect_unseen``).
``tests/properties/test_table_judges.py`` enumerates the tables and fails on
a row without an entry, a side with neither codes nor a reason, or a code no
invariant and no trace detector reports; for every row a ``…_LIFECYCLE``
code judges, a hand-written trace breaking it shows the finding.

The three ``…_LIFECYCLE`` codes come from replaying the tables themselves on
the observations (``inv_replay.py`` and the modules it names): the rows a
trace shows are stepped through ``Lifecycle.enabled`` / ``step`` with the
table's guard and effect functions, and a disagreement the older rules do
not already state is reported. The TIMER table (5.x) is replayed by
``inv_replay_timer.py`` and reports MESSAGE_LIFECYCLE (it is the first part
of a timer message's lifecycle); the pop tables (5.x) by ``inv_pop.py``,
reporting MESSAGE_LIFECYCLE (POP) and LOCK_LIFECYCLE (POP_ORDER) under their
own invariants' names (PopLifecycleProperty, PopOrderLifecycleProperty).
``replay(rows, params)`` runs the five on a trace's rows (the reference
checker's ``traces/checks_table.py``; the Spark audit's
``spark/rules_table.py`` runs each on its partitions, the timer replay
``judge_timers`` per msg_key with the crash rows put back, the pop replay per
trace), and ``TABLE_INVARIANTS`` and ``POP_INVARIANTS`` run them on the
conformance machine's ghost history
(``EventRow`` shows a ``TraceEvent`` as a row), every step (kind ``always``:
each replay only looks back).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import attrs

from rmqspec.model.events import TraceEvent
from rmqspec.model.lifecycle import LIFECYCLES, Lifecycle, Transition
from rmqspec.properties.codes import AuditParams, Code
from rmqspec.properties.history import History
from rmqspec.properties.inv_base import Invariant, Violation
from rmqspec.properties.inv_pop import PopReplay, judge_pops
from rmqspec.properties.inv_replay import (
    ALL_KEYED,
    Row,
    TableFinding,
    Unkeyed,
    epochs_of,
    row_label,
    unkeyed_of,
)
from rmqspec.properties.inv_replay_lock import LockReplay, judge_locks
from rmqspec.properties.inv_replay_message import MessageReplay, judge_messages
from rmqspec.properties.inv_replay_timer import TimerReplay, judge_timers
from rmqspec.properties.inv_replay_txn import TxnReplay, judge_txns

__all__ = [
    "POP_INVARIANTS",
    "TABLE_CODES",
    "TABLE_INVARIANTS",
    "TABLE_JUDGES",
    "EventRow",
    "RowJudges",
    "judges_markdown",
    "judges_of",
    "replay",
    "unjudged",
]

TABLE_CODES: tuple[str, ...] = (Code.MESSAGE_LIFECYCLE, Code.LOCK_LIFECYCLE, Code.TXN_LIFECYCLE)


@attrs.frozen
class RowJudges:
    """Who judges one table row (``lifecycle``, ``source``, ``action``, ``guard`` name it)."""

    lifecycle: str
    source: str
    action: str
    guard: str
    guard_by: tuple[str, ...] = ()  # codes reporting the guard (or the unguarded source) broken
    effect_by: tuple[str, ...] = ()  # codes judging the effect and the target
    how: str = ""  # what those codes see
    guard_unseen: str = ""  # why no trace shows the guard ("" when judged)
    effect_unseen: str = ""  # why no trace shows the effect ("" when judged)


C = Code
TABLE_JUDGES: tuple[RowJudges, ...] = (
    # -- message (per group and logical message) -------------------------------------------------
    RowJudges("message", "STORED", "deliver", "",
              guard_by=(C.UNEXPECTED, C.RETRY_EARLY, C.DELAY_EARLY, C.DLQ_MISSED, C.TXN_VISIBLE_BEFORE_COMMIT,
                        C.TXN_ROLLBACK_VISIBLE),
              how="only a stored copy is delivered: never a key nobody sent, a scheduled copy before its "
                  "fire, a copy past the DLQ threshold, a half before its COMMIT or after its ROLLBACK",
              effect_unseen="no effect: a pull changes no lifecycle variable (the copy a consumer reads back "
                            "is the stored one; ORDER_QUEUE_GAP judges what a position holds)"),
    RowJudges("message", "DELIVERED", "consume_success", "",
              effect_by=(C.OFFSET_OVERRUN, C.LOST),
              how="CONSUMED: only acknowledged copies may be passed by the committed offset; every "
                  "acknowledged send reaches CONSUMED or DEAD",
              guard_unseen="the consumer's listener decides, not the broker: any delivered copy may be "
                           "acknowledged"),
    RowJudges("message", "DELIVERED", "send_back", "retry",
              guard_by=(C.DLQ_MISSED, C.MESSAGE_LIFECYCLE),
              effect_by=(C.MESSAGE_LIFECYCLE, C.RETRY_EARLY),
              how="guard: a RETRY send-back past the max (DLQ_MISSED); a copy scheduled where the send-back "
                  "routes to the DLQ. effect: the scheduled copy's reconsume_times (r + 1) and level (3 + r "
                  "or the requested one, clamped); deliver_ts = now + D(level), earlier is RETRY_EARLY, later "
                  "MESSAGE_LIFECYCLE"),
    RowJudges("message", "DELIVERED", "send_back", "dlq",
              guard_by=(C.DLQ_EARLY, C.MESSAGE_LIFECYCLE),
              effect_by=(C.MESSAGE_LIFECYCLE, C.DLQ_DELAYED, C.DLQ_MISSED),
              how="guard: a DLQ send-back before the max with a level ≥ 0 (DLQ_EARLY); a DLQ copy where the "
                  "send-back routes to a retry. effect: the DLQ copy's reconsume_times (r + 1); DEAD at once "
                  "(DLQ_DELAYED), with a copy in %DLQ% (DLQ_MISSED after a drain)"),
    RowJudges("message", "DELIVERED", "send_back_failed", "",
              effect_by=(C.MESSAGE_LIFECYCLE,),
              how="nothing is written: a retry or DLQ copy that only failed send-backs precede (seen by the "
                  "conformance machine: a failed send-back is not a trace row)",
              guard_unseen="the broker refuses the request (a response code, not a table guard)"),
    RowJudges("message", "SCHEDULED", "fire", "due",
              guard_by=(C.DELAY_EARLY, C.RETRY_EARLY),
              effect_by=(C.MESSAGE_LIFECYCLE, C.SCHEDULE_DUPLICATED),
              how="guard: never before deliver_ts (delayed sends: DELAY_EARLY, retries: RETRY_EARLY). effect "
                  "none: the fired copy keeps its schedule copy's reconsume_times (a %RETRY% copy has r ≥ 1); "
                  "one fire per schedule copy"),
    # -- lock (per group and queue) --------------------------------------------------------------
    RowJudges("lock", "FREE", "lock", "",
              guard_by=(C.LOCK_LIFECYCLE,), effect_by=(C.LOCK_OVERLAP, C.LOCK_LIFECYCLE),
              how="a request on a free queue is granted (DENIED: LOCK_LIFECYCLE); take: later decisions read "
                  "the new holder and last_update"),
    RowJudges("lock", "HELD", "lock", "grant",
              guard_by=(C.LOCK_LIFECYCLE,), effect_by=(C.LOCK_OVERLAP, C.LOCK_LIFECYCLE),
              how="the holder's renewal and a takeover after the lifetime are granted (DENIED: "
                  "LOCK_LIFECYCLE); take: later decisions read holder and last_update"),
    RowJudges("lock", "HELD", "lock", "deny",
              guard_by=(C.LOCK_OVERLAP,), effect_by=(C.LOCK_OVERLAP, C.LOCK_LIFECYCLE),
              how="another client is granted an unexpired lock: LOCK_OVERLAP; a denial changes nothing later "
                  "decisions read"),
    RowJudges("lock", "HELD", "unlock", "holder",
              guard_by=(C.LOCK_LIFECYCLE,), effect_by=(C.LOCK_LIFECYCLE,),
              how="an unlock has no answer: the holder's unlock frees the queue, so a later request on it is "
                  "granted (DENIED: LOCK_LIFECYCLE)"),
    RowJudges("lock", "HELD", "unlock", "not_holder",
              guard_by=(C.LOCK_OVERLAP,), effect_by=(C.LOCK_OVERLAP,),
              how="an unlock by another client changes nothing: a later grant to a third client inside the "
                  "holder's lifetime is LOCK_OVERLAP"),
    RowJudges("lock", "FREE", "unlock", "",
              guard_by=(C.LOCK_LIFECYCLE,), effect_by=(C.LOCK_LIFECYCLE,),
              how="an unlock of a free queue changes nothing: a later request on it is granted (DENIED: "
                  "LOCK_LIFECYCLE)"),
    # -- transaction (per half) ------------------------------------------------------------------
    RowJudges("transaction", "PENDING", "commit", "",
              guard_by=(C.TXN_DOUBLE_RESOLVED,),
              effect_by=(C.TXN_VISIBLE_BEFORE_COMMIT, C.LOST, C.TXN_CHECK_AFTER_RESOLVED),
              how="no COMMIT after a ROLLBACK or a discard; COMMITTED: visible only now, consumed after a "
                  "drain, the copy it names never checked again"),
    RowJudges("transaction", "PENDING", "rollback", "",
              guard_by=(C.TXN_DOUBLE_RESOLVED,), effect_by=(C.TXN_ROLLBACK_VISIBLE, C.TXN_CHECK_AFTER_RESOLVED),
              how="no ROLLBACK after a COMMIT or a discard; ROLLED_BACK: never visible, the copy it names never "
                  "checked again"),
    RowJudges("transaction", "PENDING", "unknown", "",
              effect_by=(C.TXN_UNRESOLVED, C.TXN_LIFECYCLE),
              how="the half stays PENDING: checks go on, their count up by one, until it is resolved or "
                  "discarded (TXN_UNRESOLVED after a drain)",
              guard_unseen="END_TRANSACTION UNKNOWN is accepted in any state and does nothing; a trace shows "
                           "only that it was sent"),
    RowJudges("transaction", "PENDING", "check", "check",
              guard_by=(C.TXN_CHECK_EARLY, C.TXN_CHECK_EXCEEDED, C.TXN_LIFECYCLE),
              effect_by=(C.TXN_LIFECYCLE, C.TXN_CHECK_EXCEEDED, C.TXN_DISCARD_EARLY),
              how="guard: not younger than transactionTimeOut, not past check max, not past fileReservedTime "
                  "(TXN_LIFECYCLE). effect checked: TRANSACTION_CHECK_TIMES = the previous + 1 (TXN_LIFECYCLE); "
                  "the count the limits read"),
    RowJudges("transaction", "PENDING", "check", "young",
              guard_by=(C.TXN_CHECK_EARLY,),
              how="a half younger than transactionTimeOut that is checked took the check row where this one "
                  "was enabled",
              effect_unseen="no effect and no event: the scan stops at the young half; which halves a round "
                            "passed over is not in a trace"),
    RowJudges("transaction", "PENDING", "check", "discard",
              guard_by=(C.TXN_DISCARD_EARLY, C.TXN_CHECK_EXCEEDED, C.TXN_LIFECYCLE),
              effect_by=(C.TXN_DOUBLE_RESOLVED, C.TXN_LIFECYCLE, C.TXN_UNRESOLVED),
              how="guard: discarded only after check max or past fileReservedTime (TXN_DISCARD_EARLY); checked "
                  "where it is enabled (TXN_CHECK_EXCEEDED, TXN_LIFECYCLE). DISCARDED: no resolution and no "
                  "check after it"),
    RowJudges("transaction", "COMMITTED", "commit", "",
              guard_unseen="4.9 accepts a second COMMIT: nothing to judge (observation DUPLICATE_COMMIT)",
              effect_unseen="a second real message: an observation (DUPLICATED), not a violation"),
    # -- timer (5.x, per timer request; inv_replay_timer.py, inv_timer.py) -----------------------
    RowJudges("timer", "SENT", "put", "level",
              guard_by=(C.MESSAGE_LIFECYCLE,), effect_by=(C.DELAY_EARLY, C.SCHEDULE_DUPLICATED),
              how="DELAY wins: a request with a delay level whose copy waits in rmq_sys_wheel_timer (or that is "
                  "refused MESSAGE_ILLEGAL) took another row; SCHEDULED: the delayed message's rules"),
    RowJudges("timer", "SENT", "put", "at_once",
              guard_by=(C.MESSAGE_LIFECYCLE,), effect_by=(C.ORDER_QUEUE_GAP, C.LOST),
              how="a time not after now: a copy in the wheel or a MESSAGE_ILLEGAL refusal took another row; "
                  "STORED: the acknowledged position holds it, it is consumed after a drain"),
    RowJudges("timer", "SENT", "put", "illegal",
              guard_by=(C.MESSAGE_LIFECYCLE,),
              how="not a Java long, or past timerMaxDelaySec: an acknowledged put, or a legal one refused "
                  "MESSAGE_ILLEGAL",
              effect_unseen="nothing is written: a copy of a refused put is the RecoveredObservation's (an "
                            "observation), not a table effect"),
    RowJudges("timer", "SENT", "put", "wheel",
              guard_by=(C.MESSAGE_LIFECYCLE, C.TIMER_EARLY),
              effect_by=(C.MESSAGE_LIFECYCLE, C.TIMER_EARLY),
              how="guard: a legal future time refused (MESSAGE_LIFECYCLE) or stored at once (delivered before "
                  "due: TIMER_EARLY). effect slot: the timer copy's deliver_ts (TIMER_OUT_MS + precision) is the "
                  "requested time's slot + one precision (MESSAGE_LIFECYCLE); never delivered before it "
                  "(TIMER_EARLY)"),
    RowJudges("timer", "WHEEL", "fire", "due",
              guard_by=(C.TIMER_EARLY,), effect_by=(C.MESSAGE_LIFECYCLE, C.TIMER_DUPLICATED),
              how="guard: never before deliver_ts (TIMER_EARLY). FIRED: the copy goes to the request's topic and "
                  "queue with reconsume_times 0 (MESSAGE_LIFECYCLE); no second fire without a crash "
                  "(TIMER_DUPLICATED)"),
    RowJudges("timer", "WHEEL", "crash", "",
              effect_by=(C.TIMER_UNFIRED, C.LOST),
              how="a copy waiting in the wheel survives a crash: it still fires (TIMER_UNFIRED after a drain)",
              guard_unseen="a crash is the environment's, in any state"),
    RowJudges("timer", "FIRED", "crash", "",
              effect_by=(C.TIMER_DUPLICATED,),
              how="REFIRABLE: only a crash lets a fired copy fire again (a second fire with no crash between is "
                  "TIMER_DUPLICATED)",
              guard_unseen="a crash is the environment's, in any state"),
    RowJudges("timer", "REFIRABLE", "fire", "due",
              guard_by=(C.TIMER_EARLY,), effect_by=(C.MESSAGE_LIFECYCLE, C.TIMER_DUPLICATED),
              how="at-least-once: delivered again, never before deliver_ts (TIMER_EARLY), to the request's topic "
                  "and queue (MESSAGE_LIFECYCLE), once more until the next crash (TIMER_DUPLICATED)"),
    RowJudges("timer", "REFIRABLE", "crash", "",
              guard_unseen="a crash is the environment's, in any state",
              effect_unseen="nothing changes: whether the checkpoint had passed the copy (it fires again or not) "
                            "is not in a trace"),
    # -- pop (5.x, per group and message; inv_pop.py) -------------------------------------------
    RowJudges("pop", "READY", "pop", "",
              guard_by=(C.MESSAGE_LIFECYCLE,), effect_by=(C.MESSAGE_LIFECYCLE,),
              how="guard: a hand-out while the message is POPPED before its invisible time ends, or ACKED. "
                  "effect handle: later hand-outs and revives read this pop time + invisible time (deliver_ts)"),
    RowJudges("pop", "POPPED", "ack", "current",
              effect_by=(C.MESSAGE_LIFECYCLE,),
              how="ACKED: the message is never handed out from its checkpoint again nor revived",
              guard_unseen="which handle a client acks is the client's; the broker answers SUCCESS whatever the "
                           "handle (POP-0)"),
    RowJudges("pop", "POPPED", "ack", "stale",
              guard_unseen="which handle a client acks is the client's; the broker answers SUCCESS whatever the "
                           "handle (POP-0)",
              effect_unseen="no effect: the live checkpoint stays, so the revive may come; a broker that let the "
                            "stale ack settle it never revives, an absence no finite trace proves"),
    RowJudges("pop", "POPPED", "change", "current",
              effect_by=(C.MESSAGE_LIFECYCLE,),
              how="handle: the message is invisible until the change's deliver_ts (handed out or revived before "
                  "it: MESSAGE_LIFECYCLE)",
              guard_unseen="a change of a stale handle is accepted too (5.3.3 writes one more checkpoint): the "
                           "message is judged no more after it (inv_pop.py)"),
    RowJudges("pop", "POPPED", "revive", "expired",
              guard_by=(C.MESSAGE_LIFECYCLE,), effect_by=(C.MESSAGE_LIFECYCLE,),
              how="guard: never revived before pop time + invisible time, nor after an ack met its checkpoint. "
                  "effect revived: the copy's reconsume times are the revives so far (+ 1 each), and so are a "
                  "later hand-out's"),
    RowJudges("pop", "READY", "ack", "",
              guard_unseen="an ack is answered in every state (each state has an ack row)",
              effect_unseen="no effect: the revived copy stays and is handed out; a late ack's answer is SUCCESS "
                            "as any other"),
    RowJudges("pop", "ACKED", "ack", "",
              effect_by=(C.MESSAGE_LIFECYCLE,),
              how="ACKED stays: no hand-out from the checkpoint, no revive after a second ack either",
              guard_unseen="an ack is answered in every state (each state has an ack row)"),
    # -- pop_order (5.x, per group and queue, order=true; inv_pop.py) ---------------------------
    RowJudges("pop_order", "IDLE", "pop", "",
              effect_by=(C.LOCK_LIFECYCLE,),
              how="batch: the batch starts at the first message not acked and runs on consecutively; another "
                  "attempt is blocked until it is acked or past its invisible time",
              guard_unseen="a queue with no batch in flight may be popped by any attempt"),
    RowJudges("pop_order", "INFLIGHT", "pop", "free",
              guard_by=(C.LOCK_LIFECYCLE,), effect_by=(C.LOCK_LIFECYCLE,),
              how="guard: handed to another attempt while the batch is in flight (needBlock). effect batch: "
                  "from the first message not acked, the new batch blocks as the first did"),
    RowJudges("pop_order", "INFLIGHT", "commit", "part",
              effect_by=(C.LOCK_LIFECYCLE,),
              how="commit: the next batch starts at the first message not acked (commitAndNext's offset)",
              guard_unseen="a commit is not a trace row: the replay derives it from the acks (how many from the "
                           "offset are acked)"),
    RowJudges("pop_order", "INFLIGHT", "commit", "whole",
              effect_by=(C.LOCK_LIFECYCLE,),
              how="IDLE: the next batch, of any attempt, starts after the acked batch",
              guard_unseen="a commit is not a trace row: the replay derives it from the acks (the whole batch "
                           "acked)"),
)


def judges_of(lifecycle: str, t: Transition) -> RowJudges | None:
    """The entry of ``TABLE_JUDGES`` for row ``t`` of ``lifecycle``, or None."""
    for j in TABLE_JUDGES:
        if (j.lifecycle, j.source, j.action, j.guard) == (lifecycle, t.source, t.action, t.guard):
            return j
    return None


def unjudged(
    lifecycles: Sequence[Lifecycle] = LIFECYCLES, judges: Sequence[RowJudges] = TABLE_JUDGES
) -> list[str]:
    """What leaves a table row unjudged: a row with no entry, a side (guard, effect) with neither
    codes nor a reason, an entry naming no row. Empty when every row is judged."""
    out = []
    for lc in lifecycles:
        for t in lc.transitions:
            j = next((j for j in judges if (j.lifecycle, j.source, j.action, j.guard)
                      == (lc.name, t.source, t.action, t.guard)), None)  # fmt: skip
            if j is None:
                out.append(f"{row_label(lc, t)}: no entry in TABLE_JUDGES")
                continue
            if not (j.guard_by or j.guard_unseen):
                out.append(f"{row_label(lc, t)}: guard {t.guard or '(none)'} neither judged nor unseen")
            if not (j.effect_by or j.effect_unseen):
                out.append(f"{row_label(lc, t)}: effect {t.effect or '(none)'} neither judged nor unseen")
    rows = {(lc.name, t.source, t.action, t.guard) for lc in lifecycles for t in lc.transitions}
    out.extend(f"{j.lifecycle}: {j.source} --{j.action}[{j.guard}]: no such row" for j in judges
               if (j.lifecycle, j.source, j.action, j.guard) not in rows)  # fmt: skip
    return out


def judges_markdown(judges: Sequence[RowJudges] = TABLE_JUDGES) -> str:
    """``TABLE_JUDGES`` as the Markdown table of ``properties/README.md`` (a test holds the two equal)."""
    lines = ["| table row | guard judged by | effect / target judged by |", "|---|---|---|"]
    targets = {(lc.name, t.source, t.action, t.guard): row_label(lc, t) for lc in LIFECYCLES for t in lc.transitions}
    for j in judges:
        label = targets.get((j.lifecycle, j.source, j.action, j.guard), f"{j.lifecycle}: {j.source} --{j.action}")
        guard = ", ".join(j.guard_by) or f"not judged: {j.guard_unseen}"
        effect = ", ".join(j.effect_by) or f"not judged: {j.effect_unseen}"
        lines.append(f"| `{label}` | {guard} | {effect} |")
    return "\n".join(lines) + "\n"


def replay(
    rows: Sequence[Row],
    params: AuditParams,
    epochs: Sequence[int] | None = None,
    unkeyed: Unkeyed | None = None,
) -> list[TableFinding]:
    """Every ``…_LIFECYCLE`` finding of one trace's rows (in seq order)."""
    epochs = epochs_of(rows) if epochs is None else epochs
    unkeyed = unkeyed_of(rows) if unkeyed is None else unkeyed
    return [
        *judge_messages(rows, params, unkeyed),
        *judge_timers(rows, params),
        *judge_locks(rows, params),
        *judge_txns(rows, epochs, params, unkeyed),
        *judge_pops(rows),
    ]


# ---------------------------------------------------------------------------
# The replays on the conformance machine's ghost history


class EventRow:
    """A ``TraceEvent`` read as a trace row (``row["seq"]``, ``row.get("topic")``)."""

    __slots__ = ("ev",)

    def __init__(self, ev: TraceEvent) -> None:
        self.ev = ev

    def __getitem__(self, key: str) -> Any:
        return getattr(self.ev, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self.ev, key, default)


@attrs.define
class _Replayed:
    """One history's replays so far: the history only grows, so each step feeds only its new events
    (every replay looks back only; a finding on a prefix stays a finding)."""

    ref: weakref.ref[History]
    params: AuditParams
    lock: LockReplay
    message: MessageReplay
    txn: TxnReplay
    timer: TimerReplay
    pop: PopReplay = attrs.Factory(PopReplay)
    seen: int = 0
    epoch: int = 0
    unkeyed: Unkeyed = ALL_KEYED
    found: dict[str, list[Violation]] = attrs.field(factory=lambda: {str(c): [] for c in TABLE_CODES})
    # the pop tables' findings apart: their invariants are PopLifecycleProperty / PopOrderLifecycleProperty
    found_pop: dict[str, list[Violation]] = attrs.field(factory=lambda: {str(c): [] for c in TABLE_CODES})

    @classmethod
    def of(cls, h: History) -> _Replayed:
        return cls(weakref.ref(h), h.params, LockReplay(h.params), MessageReplay(h.params), TxnReplay(h.params),
                   TimerReplay(h.params))

    def catch_up(self, h: History) -> None:
        new = [EventRow(ev) for ev in h.events[self.seen:]]
        epochs = []
        for row in new:
            epochs.append(self.epoch)
            if row["event"] in ("crash", "recover"):
                self.epoch += 1
        self.unkeyed = self.unkeyed | unkeyed_of(new)
        found = [*self.message.feed(new, self.unkeyed), *self.timer.feed(new), *self.lock.feed(new),
                 *self.txn.feed(new, epochs, self.unkeyed)]
        for into, findings in ((self.found, found), (self.found_pop, self.pop.feed(new))):
            for f in sorted(findings, key=lambda f: (f.seqs[-1], f.seqs)):
                into[f.code].append(Violation(code=f.code, step=h.step_of[f.seqs[-1]], reason=f.reason,
                                              seq=f.seqs[-1]))
        self.seen = len(h.events)


# The last histories seen, by identity with a weak reference (``History`` compares by value).
_REPLAYED: dict[int, _Replayed] = {}
_KEPT = 4


def _replayed(h: History) -> _Replayed:
    r = _REPLAYED.get(id(h))
    if r is None or r.ref() is not h or r.params is not h.params or r.seen > len(h.events):
        while len(_REPLAYED) >= _KEPT:
            del _REPLAYED[next(iter(_REPLAYED))]
        r = _REPLAYED[id(h)] = _Replayed.of(h)
    r.catch_up(h)
    return r


def check_message_lifecycle(h: History) -> list[Violation]:
    """The copies send-backs make and fires keep are the MESSAGE table's (``inv_replay_message.py``); a
    timer request's put, wheel copy and fire are the TIMER table's (``inv_replay_timer.py``)."""
    return list(_replayed(h).found[Code.MESSAGE_LIFECYCLE])


def check_lock_lifecycle(h: History) -> list[Violation]:
    """Lock answers are the LOCK table's, replayed from the grants and unlocks (``inv_replay_lock.py``)."""
    return list(_replayed(h).found[Code.LOCK_LIFECYCLE])


def check_txn_lifecycle(h: History) -> list[Violation]:
    """Checks are the TRANSACTION table's: counts grow, none after a discard (``inv_replay_txn.py``)."""
    return list(_replayed(h).found[Code.TXN_LIFECYCLE])


TABLE_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("MessageLifecycleProperty", Code.MESSAGE_LIFECYCLE, "always",
              "A send-back's copy has the reconsume_times, place and level the MESSAGE table gives it, and "
              "a fire keeps them.",
              "SendMessageProcessor.consumerSendMsgBack + ScheduleMessageService (model/lifecycle.py MESSAGE)",
              check_message_lifecycle),
    Invariant("LockLifecycleProperty", Code.LOCK_LIFECYCLE, "always",
              "A lock request the LOCK table grants (free queue, renewal, expired holder) is never denied.",
              "RebalanceLockManager.tryLockBatch / unlockBatch (model/lifecycle.py LOCK)",
              check_lock_lifecycle),
    Invariant("TxnLifecycleProperty", Code.TXN_LIFECYCLE, "always",
              "Each check bumps TRANSACTION_CHECK_TIMES by one; a discarded or expired half is not checked.",
              "TransactionalMessageServiceImpl.check / needDiscard / needSkip (model/lifecycle.py TRANSACTION)",
              check_txn_lifecycle),
)

POP_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("PopLifecycleProperty", Code.MESSAGE_LIFECYCLE, "always",
              "A popped message is not handed out again before its invisible time ends nor after an ack met its "
              "checkpoint, is revived only after it and with reconsume times + 1.",
              "PopMessageProcessor, AckMessageProcessor, ChangeInvisibleTimeProcessor, PopReviveService "
              "(model/lifecycle.py POP)",
              lambda h: list(_replayed(h).found_pop[Code.MESSAGE_LIFECYCLE])),
    Invariant("PopOrderLifecycleProperty", Code.LOCK_LIFECYCLE, "always",
              "An orderly popped queue is handed to another attempt only when its batch is acked or past its "
              "invisible time, and always from the first message not acked.",
              "ConsumerOrderInfoManager.checkBlock / commitAndNext (model/lifecycle.py POP_ORDER)",
              lambda h: list(_replayed(h).found_pop[Code.LOCK_LIFECYCLE])),
)
