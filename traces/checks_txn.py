"""Transaction detectors (SPEC §4.6, §8.1): half visibility, resolution, checks."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rmqspec.properties.codes import Code, ObservationCode
from rmqspec.traces.checks_common import Finding, Trace, detail_of, keys_of, observation, violation
from rmqspec.traces.checks_retention import HALF_TOPIC, expire_rows, half_copies, kept


def _halves(trace: Trace, column: str) -> dict[str, Mapping[str, Any]]:
    """The first ``txn_half`` per value of ``column`` (txn_id or msg_key)."""
    out: dict[str, Mapping[str, Any]] = {}
    for _, row in trace.of("txn_half"):
        if row[column] is not None:
            out.setdefault(row[column], row)
    return out


def detect_txn_visibility(trace: Trace) -> Iterator[Finding]:
    """TXN_VISIBLE_BEFORE_COMMIT and TXN_ROLLBACK_VISIBLE: a half became visible.

    SPEC §8.1 / §4.6 (``TransactionalMessageBridge``: halves live in
    RMQ_SYS_TRANS_HALF_TOPIC, the real copy is written only on COMMIT). For
    each ``deliver`` of a msg_key after its first ``txn_half``:
    TXN_VISIBLE_BEFORE_COMMIT if it precedes the first COMMIT ``txn_end`` of
    that msg_key, or if there is no COMMIT and no earlier ROLLBACK —
    seqs = [txn_half, deliver]; TXN_ROLLBACK_VISIBLE if there is no COMMIT
    and it follows a ROLLBACK — seqs = [first ROLLBACK, deliver].
    """
    halves = _halves(trace, "msg_key")
    commit: dict[str, int] = {}
    rollback: dict[str, int] = {}
    for _, row in trace.of("txn_end"):
        if row["msg_key"] is None:
            continue
        if row["status"] == "COMMIT":
            commit.setdefault(row["msg_key"], row["seq"])
        elif row["status"] == "ROLLBACK":
            rollback.setdefault(row["msg_key"], row["seq"])
    for _, row in trace.of("deliver"):
        key = row["msg_key"]
        half = halves.get(key) if key is not None else None
        if half is None or row["seq"] < half["seq"]:
            continue
        keys = keys_of(row, "group", "topic", "msg_key")
        c, r = commit.get(key), rollback.get(key)
        if c is None and r is not None and row["seq"] > r:
            yield violation(
                Code.TXN_ROLLBACK_VISIBLE,
                (r, row["seq"]),
                keys,
                f"{key} delivered although its transaction was rolled back",
            )
        elif (c is not None and row["seq"] < c) or c is None:
            yield violation(
                Code.TXN_VISIBLE_BEFORE_COMMIT,
                (half["seq"], row["seq"]),
                keys,
                f"{key} delivered before its transaction committed",
            )


def detect_txn_double_resolved(trace: Trace) -> Iterator[Finding]:
    """TXN_DOUBLE_RESOLVED (and the DUPLICATE_COMMIT observation).

    SPEC §8.1 / §4.6: a transaction with both COMMIT and ROLLBACK, or
    resolved after ``txn_discard``. Each COMMIT after a ROLLBACK, each
    ROLLBACK after a COMMIT, and each resolution after a discard that no
    resolution preceded, is offending; seqs = [first earlier conflicting
    resolution or that discard, offending txn_end]. A transaction committed
    before a discard stays committed: RocketMQ 4.9 discards the newest re-put
    copy of a half when the COMMIT named an older one, and a later duplicate
    COMMIT is only DUPLICATE_COMMIT.
    A COMMIT after a COMMIT is the DUPLICATE_COMMIT observation
    (RocketMQ 4.9 does not de-duplicate END_TRANSACTION);
    seqs = [first COMMIT, later COMMIT].
    """
    first: dict[tuple[str, str], int] = {}
    for _, row in trace.of("txn_end", "txn_discard"):
        txn = row["txn_id"]
        if txn is None:
            continue
        kind = "DISCARD" if row["event"] == "txn_discard" else row["status"]
        if kind not in ("COMMIT", "ROLLBACK", "DISCARD"):
            continue
        if kind != "DISCARD":
            opposite = "ROLLBACK" if kind == "COMMIT" else "COMMIT"
            earlier = [first[(txn, opposite)]] if (txn, opposite) in first else []
            discard = first.get((txn, "DISCARD"))
            if discard is not None and not any(first.get((txn, k), discard) < discard for k in ("COMMIT", "ROLLBACK")):
                earlier.append(discard)
            keys = keys_of(row, "txn_id", "msg_key")
            if earlier:
                yield violation(
                    Code.TXN_DOUBLE_RESOLVED,
                    (min(earlier), row["seq"]),
                    keys,
                    f"transaction {txn} resolved {kind} after an earlier conflicting resolution",
                )
            if kind == "COMMIT" and (txn, "COMMIT") in first:
                yield observation(
                    ObservationCode.DUPLICATE_COMMIT,
                    (first[(txn, "COMMIT")], row["seq"]),
                    keys,
                    f"transaction {txn} committed twice",
                )
        first.setdefault((txn, kind), row["seq"])


def detect_txn_checks(trace: Trace) -> Iterator[Finding]:
    """TXN_CHECK_EARLY and TXN_CHECK_EXCEEDED: the check service misbehaved.

    SPEC §8.1 / §4.6 (``TransactionalMessageServiceImpl.check``): a
    ``txn_check`` earlier than ``txn_half.ts + transactionTimeOut`` —
    seqs = [txn_half, txn_check]; every ``txn_check`` of a transaction beyond
    the ``transactionCheckMax``-th — seqs = [txn_half, that txn_check].
    A check whose ``detail.check_times`` (the re-put half's
    TRANSACTION_CHECK_TIMES) repeats one already seen for the transaction is a
    re-check after a crash (the check service resumes from its last persisted
    offset, at least once) and does not count again; what
    ``needDiscard`` bounds is that number. Checks of a txn_id without a
    ``txn_half`` are not judged.
    """
    params = trace.params
    halves = _halves(trace, "txn_id")
    counts: dict[str, int] = {}
    seen_times: set[tuple[str, object]] = set()
    for _, row in trace.of("txn_check"):
        half = halves.get(row["txn_id"]) if row["txn_id"] is not None else None
        if half is None:
            continue
        keys = keys_of(half, "txn_id", "msg_key")
        due = half["ts"] + params.transaction_timeout_ms
        if row["ts"] < due:
            yield violation(
                Code.TXN_CHECK_EARLY,
                (half["seq"], row["seq"]),
                keys,
                f"checked at {row['ts']}, not before {due}",
            )
        times = detail_of(row).get("check_times")
        if times is not None:
            if (row["txn_id"], str(times)) in seen_times:
                continue
            seen_times.add((row["txn_id"], str(times)))
        n = counts[row["txn_id"]] = counts.get(row["txn_id"], 0) + 1
        if n > params.transaction_check_max:
            yield violation(
                Code.TXN_CHECK_EXCEEDED,
                (half["seq"], row["seq"]),
                keys,
                f"check {n} exceeds transactionCheckMax {params.transaction_check_max}",
            )


def skipped_halves(trace: Trace) -> set[str]:
    """txn_ids of halves the check service may never see after a power loss.

    RocketMQ 4.9.8 persists the check progress (a consumer offset on the half
    queue) apart from the commitlog: after an ASYNC broker's power loss it may
    point past the truncated half queue, and halves sent afterwards at reused
    positions below it are skipped (docs/fidelity.md). A ``txn_half`` whose
    queue_offset is below 1 + the highest half-queue position (``txn_half`` or
    ``txn_check`` queue_offset) seen before an earlier ``crash`` with status
    ``power`` is exempt; without reused positions nothing is.
    """
    seen, bound = -1, -1
    out: set[str] = set()
    for _, row in trace.of("txn_half", "txn_check", "crash"):
        if row["event"] == "crash":
            if row["status"] == "power":
                bound = max(bound, seen + 1)
        elif row["queue_offset"] is not None:
            if row["event"] == "txn_half" and row["queue_offset"] < bound and row["txn_id"] is not None:
                out.add(row["txn_id"])
            seen = max(seen, row["queue_offset"])
    return out


def detect_txn_unresolved(trace: Trace, skipped: set[str] | None = None,
                          expires: Sequence[Mapping[str, Any]] | None = None) -> Iterator[Finding]:
    """TXN_UNRESOLVED: a half neither committed, rolled back nor discarded by the drain.

    SPEC §8.1 / §4.6 (every half is eventually resolved or discarded): at
    ``drain``, a ``txn_half`` with no COMMIT/ROLLBACK ``txn_end`` and no
    ``txn_discard`` of its txn_id before the drain. Not judged without
    ``drain``, nor for a half whose msg_key a ``crash`` lists in
    ``detail.at_risk`` (an unflushed half may vanish with an ASYNC broker's
    power loss), nor for one ``skipped_halves`` names (``skipped``, when the
    caller computed it from rows ``trace`` lacks), nor for one whose copies
    (its ``txn_half`` and ``txn_check`` rows) an ``expire`` before the drain may
    have taken (``checks_retention.kept``: the check service never reads a
    deleted half again; ``expires``, the trace's ``expire`` rows up to the
    drain when the caller has only some rows). seqs = [txn_half, drain].
    """
    drain = trace.drain_seq
    if drain is None:
        return
    skipped = skipped_halves(trace) if skipped is None else skipped
    expires = expire_rows(trace.rows, drain) if expires is None else expires
    copies = half_copies(trace.rows) if expires else {}
    resolved = {
        r["txn_id"]
        for _, r in trace.of("txn_end", "txn_discard")
        if r["txn_id"] is not None
        and r["seq"] < drain
        and (r["event"] == "txn_discard" or r["status"] in ("COMMIT", "ROLLBACK"))
    }
    for txn, half in sorted(_halves(trace, "txn_id").items(), key=lambda kv: kv[1]["seq"]):
        if half["seq"] < drain and txn not in resolved and half["msg_key"] not in trace.at_risk \
                and txn not in skipped and (not expires or kept(copies[txn], expires, HALF_TOPIC)):
            yield violation(
                Code.TXN_UNRESOLVED,
                (half["seq"], drain),
                keys_of(half, "txn_id", "msg_key"),
                f"transaction {txn} still unresolved at the drain",
            )
