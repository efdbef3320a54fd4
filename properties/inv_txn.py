"""Transactions as invariants over the ghost history (SPEC §6 and the issue-14 deep guarantees).

Theory of operation
-------------------
Each half message is judged by its ``txn_half``, ``txn_end``, ``txn_check``
and ``txn_discard`` events (keyed by msg_key = the half's UNIQ_KEY):
visibility before COMMIT / after ROLLBACK, one resolution, checks not before
the timeout and at most ``transactionCheckMax``, resolution after a drain,
no check of a resolved copy, no discard before the check limit. Exemptions
name the RocketMQ 4.9.8 persistence they follow (``skipped_by_saved_progress``,
``unseen_ops``). TRANSACTION_CHECK_TIMES going up by one per check, a check
after a discard and a check past fileReservedTime are judged by
``inv_tables.py``'s replay of ``model/lifecycle.py``'s TRANSACTION.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from rmqspec.model.events import TraceEvent
from rmqspec.properties.codes import Code
from rmqspec.properties.history import History, is_visible_topic
from rmqspec.properties.inv_base import Violation, _at_risk, _detail, _until_last_drain, _v
from rmqspec.properties.inv_saved import expired_keys

__all__ = [
    "check_txn_check_after_resolved",
    "check_txn_check_early",
    "check_txn_check_exceeded",
    "check_txn_discard_early",
    "check_txn_double_resolved",
    "check_txn_unresolved",
    "check_txn_visibility",
    "skipped_by_saved_progress",
    "unseen_ops",
]


def _txn_index(h: History) -> dict[str, dict]:
    txns: dict[str, dict] = {}
    for ev in h.events:
        if ev.event == "txn_half":
            txns.setdefault(ev.msg_key, {"half": ev, "commit": [], "rollback": [], "checks": [],
                                         "discard": None})
    return txns


def check_txn_visibility(h: History) -> list[Violation]:
    """A half is never visible before its COMMIT; a rolled-back half never."""
    out = []
    txns = _txn_index(h)
    state: dict[str, str] = {}
    for ev in h.events:
        if ev.msg_key not in txns:
            continue
        if ev.event == "txn_end" and ev.status in ("COMMIT", "ROLLBACK"):
            if state.get(ev.msg_key) != "COMMIT":
                state[ev.msg_key] = ev.status
        elif ev.event in ("store", "deliver") and is_visible_topic(ev.topic):
            now = state.get(ev.msg_key)
            if now == "ROLLBACK":
                out.append(_v(h, Code.TXN_ROLLBACK_VISIBLE, ev,
                              f"rolled-back {ev.msg_key} visible in {ev.topic}", "invisible", ev.event))
            elif now is None:
                out.append(_v(h, Code.TXN_VISIBLE_BEFORE_COMMIT, ev,
                              f"half {ev.msg_key} visible in {ev.topic} before COMMIT",
                              "invisible until COMMIT", ev.event))
    return out


def check_txn_double_resolved(h: History) -> list[Violation]:
    """A transaction is never both committed and rolled back, nor first resolved after discard.

    A transaction resolved before a discard stays resolved: when a COMMIT named an older copy
    of the half, RocketMQ 4.9 goes on checking the newest re-put copy and may discard it; a
    later duplicate COMMIT is then only DUPLICATE_COMMIT (an observation)."""
    out = []
    seen: dict[str, set[str]] = defaultdict(set)
    for ev in h.events:
        if ev.event == "txn_discard":
            if not seen[ev.msg_key] & {"COMMIT", "ROLLBACK"}:
                seen[ev.msg_key].add("DISCARD")
        elif ev.event == "txn_end" and ev.status in ("COMMIT", "ROLLBACK"):
            had = seen[ev.msg_key]
            other = "ROLLBACK" if ev.status == "COMMIT" else "COMMIT"
            if other in had or "DISCARD" in had:
                out.append(_v(h, Code.TXN_DOUBLE_RESOLVED, ev,
                              f"{ev.msg_key} {ev.status} after {sorted(had)}", "one resolution",
                              sorted(had | {ev.status})))
            had.add(ev.status)
    return out


def check_txn_check_early(h: History) -> list[Violation]:
    """No transaction check before the half is ``transactionTimeOut`` old."""
    txns = _txn_index(h)
    out = []
    for ev in h.events:
        if ev.event == "txn_check" and ev.msg_key in txns:
            half = txns[ev.msg_key]["half"]
            if ev.ts - half.ts < h.params.transaction_timeout_ms:
                out.append(_v(h, Code.TXN_CHECK_EARLY, ev,
                              f"{ev.msg_key} checked {ev.ts - half.ts} ms after its half",
                              f">= {h.params.transaction_timeout_ms} ms", ev.ts - half.ts))
    return out


def check_txn_check_exceeded(h: History) -> list[Violation]:
    """A transaction is checked at most ``transactionCheckMax`` times.

    A check carrying ``detail.check_times`` (the re-put half's
    TRANSACTION_CHECK_TIMES) counts once per value: after a crash the check
    service resumes from its last persisted half offset and re-checks copies
    it had checked already — at-least-once, like a scheduled copy — so the
    same number can come twice. What RocketMQ bounds (``needDiscard``) is the
    number itself; a check without it counts on its own.
    """
    seen: dict[str, set[object]] = {}
    out = []
    for ev in h.events:
        if ev.event != "txn_check":
            continue
        times = _detail(ev, "check_times")
        checks = seen.setdefault(ev.msg_key, set())
        checks.add(str(times) if times is not None else ("seq", ev.seq))
        if len(checks) == h.params.transaction_check_max + 1:
            out.append(_v(h, Code.TXN_CHECK_EXCEEDED, ev, f"{ev.msg_key} checked too often",
                          f"<= {h.params.transaction_check_max} checks", len(checks)))
    return out


def skipped_by_saved_progress(events: Iterable[TraceEvent]) -> set[str]:
    """Halves the check service may never see: sent after a power loss at a half-queue
    position below one observed before it.

    RocketMQ 4.9.8 keeps the check progress (CID_RMQ_SYS_TRANS's offset on the half
    queue) in consumerOffset.json, persisted every 5 s, apart from the commitlog. An
    ASYNC broker that loses power can come back with the saved progress X past the
    truncated half queue's end M; halves sent afterwards reuse positions M, M+1, …. A
    check round that reads X while the queue is still shorter corrects the progress to M
    (OFFSET_OVERFLOW_BADLY → next begin = max offset), but once the queue has grown past
    X the scan starts at X and the halves at [M, X) are never checked (docs/fidelity.md).
    The bound is 1 + the highest position seen (half or re-put copy) before the crash;
    a position below it can only have been reused after a truncation, so a SYNC broker
    or a kill never exempts anything.
    """
    seen = -1
    bound = -1
    out: set[str] = set()
    for ev in events:
        if ev.event in ("txn_half", "txn_check") and ev.queue_offset is not None:
            if ev.event == "txn_half" and ev.queue_offset < bound and ev.msg_key:
                out.add(ev.msg_key)
            seen = max(seen, ev.queue_offset)
        elif ev.event == "crash" and ev.status == "power":
            bound = max(bound, seen + 1)
    return out


def check_txn_unresolved(h: History) -> list[Violation]:
    """After a drain every half is committed, rolled back or discarded (except a half the
    check service may legitimately never see: ``skipped_by_saved_progress``; one retention took,
    ``expired_keys``; one pending while the machine held the disk full: a discard whose copy the full
    disk refused leaves no trace, TransactionalMessageCheckService only logs it)."""
    if not h.drained():
        return []
    events = _until_last_drain(h)
    risky = _at_risk(events) | skipped_by_saved_progress(events) \
        | expired_keys(events, h.params.file_reserved_ms, h.forcible)
    if h.disk_full:
        ended = {ev.msg_key: ev.ts for ev in events if ev.event == "txn_end" and ev.status in ("COMMIT", "ROLLBACK")}
        risky |= {ev.msg_key for ev in events if ev.event == "txn_half" and ev.msg_key and any(
            ev.ts <= to and ended.get(ev.msg_key, to + 1) > start for start, to in h.disk_full)}
    done = {ev.msg_key for ev in events
            if (ev.event == "txn_end" and ev.status in ("COMMIT", "ROLLBACK"))
            or ev.event == "txn_discard"}
    return [
        _v(h, Code.TXN_UNRESOLVED, ev, f"half {ev.msg_key} never resolved",
           "COMMIT, ROLLBACK or discard", "pending after drain")
        for ev in events if ev.event == "txn_half" and ev.msg_key not in done | risky
    ]


# ---------------------------------------------------------------------------
# Deep lifecycle guarantees (issue 14)


def _check_times(ev: TraceEvent) -> int | None:
    value = _detail(ev, "check_times")
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def unseen_ops(events: Iterable[TraceEvent]) -> set[int]:
    """seqs of COMMIT/ROLLBACK ``txn_end`` events whose op the check service may never read.

    4.9.8 keeps the check service's op-queue progress (CID_RMQ_SYS_TRANS's offset on the op
    queue) in consumerOffset.json, persisted apart from the commitlog. After an ASYNC
    broker's power loss it can point past the truncated op queue's end; an op written
    afterwards at a reused position below it is never pulled (an empty op queue answers
    NO_MESSAGE_IN_QUEUE, an offset equal to the end OFFSET_OVERFLOW_ONE: both NO_NEW_MSG,
    no correction), so the half it resolves is checked again (docs/fidelity.md, T3). At most
    L positions are reused, L = the ops before the crash whose key it lists ``at_risk``; so
    the first L ops after such a crash are not counted as resolving. Without a power loss
    that lost an op nothing is exempt.
    """
    out: set[int] = set()
    ops: list[str] = []  # msg_keys of the ops so far
    windows: list[list[int]] = []  # [ops still exempt] per lossy crash
    for ev in events:
        if ev.event == "crash" and ev.status == "power":
            risky = set(_detail(ev, "at_risk", ()) or ())
            lost = sum(1 for key in ops if key in risky)
            if lost:
                windows.append([lost])
        elif ev.event == "txn_end" and ev.status in ("COMMIT", "ROLLBACK") and ev.msg_key:
            if any(w[0] > 0 for w in windows):
                out.add(ev.seq)
            for w in windows:
                w[0] -= 1
            ops.append(ev.msg_key)
    return out


def op_written(events: Iterable[TraceEvent], within_ms: int) -> dict[int, int | None]:
    """seq of each COMMIT/ROLLBACK ``txn_end`` event → the time from which its op message is surely
    written (its own time when ops are written at the END, ``within_ms`` = 0), or None when the broker
    may have gone down before then: 5.1.0+ keeps pending ops in memory only (TransactionalOpBatchService),
    so that END may never resolve its half.

    Down before then: a ``crash`` or ``recover`` with its ts in [END.ts, END.ts + ``within_ms``], or a
    ``recover`` that is the first restart event after the END (no ``crash`` between them: the broker
    stopped at a moment the history does not show — a clean shutdown is no event, only the ``recover``
    REOPEN after it — and the shutdown's last batch pass writes only the ops pending for a full
    transactionOpBatchInterval: TransactionalMessageServiceImpl.close → TransactionalOpBatchService's
    last ``batchSendOpMessage``)."""
    events = list(events)
    out: dict[int, int | None] = {}
    downs = [ev.ts for ev in events if ev.event in ("crash", "recover")]
    stopped: set[int] = set()  # ENDs whose first restart event after them is a recover
    waiting: list[int] = []
    for ev in events:
        if ev.event in ("crash", "recover"):
            if ev.event == "recover":
                stopped.update(waiting)
            waiting = []
        elif ev.event == "txn_end" and ev.status in ("COMMIT", "ROLLBACK"):
            waiting.append(ev.seq)
    for ev in events:
        if ev.event == "txn_end" and ev.status in ("COMMIT", "ROLLBACK"):
            due = ev.ts + within_ms
            lost = within_ms > 0 and (ev.seq in stopped or any(ev.ts <= t <= due for t in downs))
            out[ev.seq] = None if lost else due
    return out


def check_txn_check_after_resolved(h: History) -> list[Violation]:
    """No half copy is checked after an op resolved it.

    A check with TRANSACTION_CHECK_TIMES k checks the copy of the half that carries k − 1
    (the half itself for k = 1, else the copy the (k − 1)-th check re-put; after a crash a
    number may repeat, so all copies with k − 1 are candidates). It is a violation when every
    candidate's half-queue position was named by an earlier COMMIT/ROLLBACK — the op that
    makes fillOpRemoveMap skip it. An END_TRANSACTION that names an older copy does not
    resolve a later re-put one (RocketMQ then checks that copy again: allowed). Keys a
    power loss may have lost (``at_risk``: the op may be gone) are not judged, nor ops the
    check service may never read after one (``unseen_ops``). With 5.1.0+'s op batching an
    END resolves only once its op is surely written (``op_written``): never when a crash or a
    restart came within 3 × transactionOpBatchInterval of it, nor when the first restart after it
    is a clean one (a ``recover`` with no ``crash`` before it: the shutdown's time is unknown).
    """
    risky = _at_risk(h.events)
    unseen = unseen_ops(h.events)
    within = h.params.op_written_within_ms
    effective = op_written(h.events, within)
    copies: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    resolved: dict[str, dict[int, list[TraceEvent]]] = defaultdict(lambda: defaultdict(list))
    out = []
    for ev in h.events:
        if not ev.msg_key or ev.queue_offset is None:
            continue
        if ev.event == "txn_half":
            copies[ev.msg_key][0].add(ev.queue_offset)
        elif ev.event == "txn_end" and ev.status in ("COMMIT", "ROLLBACK") and ev.seq not in unseen:
            resolved[ev.msg_key][ev.queue_offset].append(ev)
        elif ev.event == "txn_check":
            times = _check_times(ev)
            if times is None:
                continue
            checked = copies[ev.msg_key].get(times - 1, set())
            # a position is resolved by any of its ENDs whose op is written by now (5.1.0+: an END
            # whose pending op a crash lost may be followed by another END of that copy)
            done = {}
            for p, ends in resolved[ev.msg_key].items():
                written = [e for e in ends
                           if (due := effective.get(e.seq)) is not None and (within == 0 or due < ev.ts)]
                if written:
                    done[p] = written[0]
            if checked and checked <= set(done) and ev.msg_key not in risky:
                op = max((done[p] for p in checked), key=lambda e: e.seq)
                out.append(_v(h, Code.TXN_CHECK_AFTER_RESOLVED, ev,
                              f"{ev.msg_key} checked (check {times}) after {op.status} resolved "
                              f"half position {sorted(checked)}", "no check-back", f"check {times}"))
            copies[ev.msg_key][times].add(ev.queue_offset)
    return out


def check_txn_discard_early(h: History) -> list[Violation]:
    """A half is discarded only after transactionCheckMax checks (or once older than fileReservedTime).

    needDiscard: TRANSACTION_CHECK_TIMES ≥ transactionCheckMax; needSkip: older than the
    reserved time. Checks count as for TXN_CHECK_EXCEEDED (a repeated number counts once).
    """
    halves: dict[str, TraceEvent] = {}
    checks: dict[str, set[object]] = defaultdict(set)
    out = []
    for ev in h.events:
        if ev.event == "txn_half" and ev.msg_key:
            halves.setdefault(ev.msg_key, ev)
        elif ev.event == "txn_check" and ev.msg_key:
            times = _detail(ev, "check_times")
            checks[ev.msg_key].add(str(times) if times is not None else ("seq", ev.seq))
        elif ev.event == "txn_discard" and ev.msg_key in halves:
            n, age = len(checks[ev.msg_key]), ev.ts - halves[ev.msg_key].ts
            if n < h.params.transaction_check_max and age <= h.params.file_reserved_ms:
                out.append(_v(h, Code.TXN_DISCARD_EARLY, ev,
                              f"{ev.msg_key} discarded after {n} checks at age {age} ms",
                              f">= {h.params.transaction_check_max} checks or age > "
                              f"{h.params.file_reserved_ms} ms", f"{n} checks"))
    return out
