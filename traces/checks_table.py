"""The lifecycle tables replayed on a trace: MESSAGE_LIFECYCLE, LOCK_LIFECYCLE, TXN_LIFECYCLE.

Theory of operation
-------------------
One detector runs ``properties/inv_tables.replay``: ``model/lifecycle.py``'s
MESSAGE, LOCK and TRANSACTION tables stepped through (their own guards and
effects) on the rows a trace shows, a finding where the trace shows another
row or another value than the table gives — the same code the conformance
machine's invariants (``properties/inv_tables.py``) and the Spark audit
(``spark/rules_table.py``) run. The rules, what each reads and when a row
is not judged are in the docstrings of ``properties/inv_replay_*.py`` and in
``traces/README.md`` ("Table replay"). Monotone: a row lacking a value a rule
needs leaves its instance unjudged, never judged as if it were 0 or absent.
"""

from __future__ import annotations

from collections.abc import Iterator

from rmqspec.properties.inv_tables import replay
from rmqspec.traces.checks_common import Finding, Trace

__all__ = ["detect_table_lifecycles"]


def detect_table_lifecycles(trace: Trace) -> Iterator[Finding]:
    """MESSAGE_LIFECYCLE, LOCK_LIFECYCLE, TXN_LIFECYCLE: a row of a lifecycle table broken (SPEC §8.1).

    LOCK_LIFECYCLE: a ``lock`` DENIED that the LOCK table grants — the queue
    free (never granted, freed by its holder's ``unlock``, or a restart
    since), the requester its holder, or the holder's last GRANTED older than
    the broker lifetime. seqs = [the row that made the entry so (the grant,
    the unlock, the crash / recover), DENIED] (just [DENIED] on a queue never
    seen). TXN_LIFECYCLE: a ``txn_check`` of a pending half older than
    fileReservedTime ([txn_half, check]); with no restart since the half, one
    after its ``txn_discard`` ([txn_discard, check]) or whose ``check_times``
    is less than the previous check's + 1 (0 at the half; after a restart
    since the half, less than 1; [previous check or txn_half, check]). MESSAGE_LIFECYCLE: a retry
    copy (``store`` in SCHEDULE_TOPIC_XXXX with reconsume_times ≥ 1) or DLQ
    copy answering an earlier ``send_back`` that no earlier successful
    send-back of the key explains (place, group, reconsume_times, level;
    [latest send_back, store]); a ``schedule_fire`` / ``%RETRY%`` store whose
    reconsume_times no earlier schedule copy of the key has ([latest schedule
    copy, fire]) or that is 0 ([store]); a RETRY ``send_back`` whose
    deliver_ts is later than ts + its level's delay ([send_back]).
    """
    for f in replay(trace.rows, trace.params, trace.epochs):
        yield Finding(code=f.code, seqs=f.seqs, keys=dict(f.keys), reason=f.reason)
