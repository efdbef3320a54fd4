"""The TRANSACTION table replayed on ``txn_*`` rows: TXN_LIFECYCLE.

Theory of operation
-------------------
One instance of ``model/lifecycle.py``'s TRANSACTION per ``txn_id``, from its
first ``txn_half`` (rows of a transaction whose half the trace lacks are not
judged): PENDING with ``TxnVars(checks, born = the half's ts, check_max,
immunity = transactionTimeOut, reserved = fileReservedTime)``. Rows in
``seq`` order:

- ``txn_end`` COMMIT / ROLLBACK / UNKNOWN: ``TRANSACTION.step``; a second
  resolution the table refuses changes nothing here (TXN_DOUBLE_RESOLVED
  states it); another status makes the state unknown.
- ``txn_discard``: DISCARDED (a discard the guard forbids is
  TXN_DISCARD_EARLY's).
- ``txn_check`` with ``detail.check_times`` k (the TRANSACTION_CHECK_TIMES of
  the re-put copy, 1-based) at ``ts``. At most one finding per check, the
  first that applies:

  1. **after a discard**: the half is DISCARDED and no restart happened since
     the half: no row checks a discarded half;
  2. **past fileReservedTime**: PENDING and ``TRANSACTION.enabled(…, "check",
     {now})`` with the count left out is the ``discard`` row — the half is
     older than fileReservedTime, so the table discards it unchecked (a young
     half checked is TXN_CHECK_EARLY's, one checked past the count limit
     TXN_CHECK_EXCEEDED's);
  3. **the count**: the ``checked`` effect sets the count to the previous
     one + 1 (0 at the half), so with no restart since the half k must be at
     least that: more is allowed, since 4.9.8 re-puts a half and bumps its
     count even when the check never reaches a producer
     (``sendCheckMessage`` finds no channel of the group and only logs:
     docs/fidelity.md O2 (b)), but a count that does not grow is a check the
     effect did not count. Judged whatever the state: 4.9.8 goes on checking
     a re-put copy that a COMMIT naming an older copy did not resolve
     (TXN_CHECK_AFTER_RESOLVED).

Restarts: the check service keeps its progress apart from the commitlog,
so after a ``crash`` (a ``recover`` is counted too) it may read copies it had
read before (fidelity O1): the half then has two chains of re-put copies,
each checked every round with its own count, and one may be discarded while
the other is checked on. So for a transaction with a restart since its half,
1 is not judged and 3 asks only k ≥ 1.

Unknown: a check without ``check_times`` leaves the count unknown until the
next check; a ``txn_end`` whose status is not COMMIT / ROLLBACK / UNKNOWN
leaves the state unknown (2 and 1 need it known). A trace with a
``txn_end``, ``txn_check`` or ``txn_discard`` lacking its txn_id (it may be
any transaction's: a missed COMMIT, check or discard) has 2 and 3 not judged
(``Unkeyed.txn_rows``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence

import attrs

from rmqspec.model.lifecycle import TRANSACTION, Refused, TxnVars
from rmqspec.properties.codes import AuditParams, Code
from rmqspec.properties.inv_replay import (
    ALL_KEYED,
    Row,
    TableFinding,
    Unkeyed,
    detail_of,
    found,
    int_or_none,
    row_label,
    table_row,
)

__all__ = ["TXN_KEYS", "TxnReplay", "judge_txns"]

TXN_KEYS = ("msg_key", "txn_id")
_ACTIONS = {"COMMIT": "commit", "ROLLBACK": "rollback", "UNKNOWN": "unknown"}
_CHECKED = table_row(TRANSACTION, "PENDING", "check", "check")
_DISCARD = table_row(TRANSACTION, "PENDING", "check", "discard")


@attrs.define
class _Txn:
    half: Row
    vars: TxnVars
    state: str | None  # None: unknown (a txn_end whose status the table does not name)
    last: Row  # the half or the latest check: where the count was last seen
    count: int | None  # TRANSACTION_CHECK_TIMES after ``last`` (0 at the half); None: unknown
    epoch: int  # restarts before the half
    discard: Row | None = None  # the txn_discard


class TxnReplay:
    """The transaction replay, resumable: ``feed`` takes the next rows of a trace (seq order) with their
    epochs and returns the findings they add."""

    def __init__(self, params: AuditParams) -> None:
        self.params = params
        self.txns: dict[str, _Txn] = {}

    def feed(self, rows: Iterable[Row], epochs: Iterable[int], unkeyed: Unkeyed = ALL_KEYED) -> list[TableFinding]:
        out: list[TableFinding] = []
        params, txns = self.params, self.txns
        for row, epoch in zip(rows, epochs, strict=True):
            event = row["event"]
            tid = row.get("txn_id")
            if tid is None or event not in ("txn_half", "txn_end", "txn_check", "txn_discard"):
                continue
            txn = txns.get(tid)
            if event == "txn_half":
                if txn is None:
                    born = TxnVars(born=row["ts"], check_max=params.transaction_check_max,
                                   immunity=params.transaction_timeout_ms, reserved=params.file_reserved_ms)
                    txns[tid] = _Txn(row, born, "PENDING", row, 0, epoch)
                continue
            if txn is None:
                continue
            if event == "txn_end":
                action = _ACTIONS.get(row.get("status"))  # type: ignore[arg-type]
                if action is None:
                    txn.state = None
                elif txn.state is not None:
                    # a second resolution the table refuses: TXN_DOUBLE_RESOLVED's; nothing changes here
                    with contextlib.suppress(Refused):
                        txn.state, txn.vars = TRANSACTION.step(txn.state, txn.vars, action, {"now": row["ts"]})
            elif event == "txn_discard":
                txn.state, txn.discard = "DISCARDED", row
            else:
                finding = _judge_check(txn, row, epoch, unkeyed)
                if finding is not None:
                    out.append(finding)
                txn.last, txn.count = row, int_or_none(detail_of(row).get("check_times"))
        return out


def judge_txns(
    rows: Iterable[Row], epochs: Sequence[int], params: AuditParams, unkeyed: Unkeyed = ALL_KEYED
) -> list[TableFinding]:
    """TXN_LIFECYCLE findings of ``rows`` (seq order, ``epochs`` per row; others are skipped)."""
    return TxnReplay(params).feed(rows, epochs, unkeyed)


def _judge_check(txn: _Txn, row: Row, epoch: int, unkeyed: Unkeyed) -> TableFinding | None:
    now = row["ts"]
    k = int_or_none(detail_of(row).get("check_times"))
    code = Code.TXN_LIFECYCLE.value
    restarted = epoch != txn.epoch  # a restart since the half: copies may be read twice (two chains)
    if txn.state == "DISCARDED" and txn.discard is not None and not restarted:
        return found(code, [txn.discard], row, TXN_KEYS,
                     f"{row_label(TRANSACTION, _DISCARD)} made the half DISCARDED and no row checks a "
                     f"discarded half, but it was checked (check {k})")
    if unkeyed.txn_rows:
        return None
    if txn.state == "PENDING":
        t = TRANSACTION.enabled("PENDING", "check", attrs.evolve(txn.vars, checks=0), {"now": now})
        if t.guard == "discard":
            return found(code, [txn.half], row, TXN_KEYS,
                         f"{row_label(TRANSACTION, t)} is enabled (the half is {now - txn.vars.born} ms old, "
                         f"past fileReservedTime {txn.vars.reserved} ms: discarded unchecked), but it was checked")
    if k is None or txn.count is None:
        return None
    expected = TRANSACTION.effects[_CHECKED.effect](attrs.evolve(txn.vars, checks=txn.count), {"now": now}).checks
    least = 1 if restarted else expected
    if k >= least:
        return None
    since = " (a restart since the half: a copy may be read again, but counts start at 1)" if restarted else ""
    return found(code, [txn.last], row, TXN_KEYS,
                 f"{row_label(TRANSACTION, _CHECKED)} / {_CHECKED.effect} sets TRANSACTION_CHECK_TIMES to "
                 f"{expected} after {txn.count}, at least {least}{since}, but the check carries {k}")
