"""Replaying ``model/lifecycle.py``'s tables on observations: what the three replays share.

Theory of operation
-------------------
The lifecycle tables (MESSAGE, LOCK, TRANSACTION) say, row by row, which
action is enabled in which state (the guard) and what it changes (the
effect). A *replay* walks the rows of a trace (or of the conformance
machine's ghost history, the same SPEC §8 events) in ``seq`` order, keeps one
lifecycle instance per observed key — a lock entry per (group, topic,
queue), a transaction per ``txn_id``, a message's send-backs and copies per
``msg_key`` — and asks the table itself (``Lifecycle.enabled`` / ``step``,
its guard and effect functions) what should have happened. Where the
observation shows another row than the enabled one (a guard broken) or a
value the row's effect did not produce (an effect broken), it reports a
``TableFinding`` named after the lifecycle (``LOCK_LIFECYCLE``,
``TXN_LIFECYCLE``, ``MESSAGE_LIFECYCLE``) whose reason names the row.
Disagreements an older rule already states (a GRANTED the table refuses is
LOCK_OVERLAP, a young half checked is TXN_CHECK_EARLY, …) are left to it:
``inv_tables.TABLE_JUDGES`` maps every row to the codes that judge it.

Design rules, shared by the three replays (``inv_replay_lock.py``,
``inv_replay_txn.py``, ``inv_replay_message.py``):

1. **Unknown is not a default.** A row lacking a value a replay needs makes
   the instance (or the one comparison) *unknown*: it is not judged until an
   observation fixes the state again (a GRANTED names the new holder), never
   judged as if the value were 0 or the row absent. A finding rests on rows
   that carry every value it compares, so removing an optional field from a
   trace never adds a finding (SPEC §8; ``tests/properties/test_table_judges.py``).
2. **Evidence, not absence.** A finding needs a row that contradicts the
   table. Where a rule has to say "no earlier send-back explains this copy",
   it does so only among rows it is sure to see: a trace with a row of that
   kind lacking its key (``Unkeyed``) turns the rule off for the whole trace.
3. **Look back only.** A row is judged against the rows before it (the
   conformance machine judges every prefix; the Spark audit's incremental
   mode stores a day's findings for good).
4. **Restarts.** ``epochs[i]`` counts the ``crash`` / ``recover`` rows before
   row ``i`` (as the reference checker's ``Trace.epochs`` and Spark's
   ``epoch`` column do). The broker's lock table is lost at each; the
   transaction check service may check an older copy again after one.

The replays read plain rows (``Row``: dicts with SPEC §8's columns, or
``inv_tables.EventRow`` over a ``TraceEvent``), so the conformance machine,
the reference checker (``traces/checks_table.py``) and the Spark audit
(``spark/rules_table.py``) run this same code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from rmqspec.model.lifecycle import Lifecycle, Transition
from rmqspec.model.queues import DLQ_PREFIX, RETRY_PREFIX, SCHEDULE_TOPIC

__all__ = [
    "ALL_KEYED",
    "DLQ_PREFIX",
    "RETRY_PREFIX",
    "SCHEDULE_TOPIC",
    "UNKEYED_TXN_EVENTS",
    "Row",
    "TableFinding",
    "Unkeyed",
    "detail_of",
    "epochs_of",
    "found",
    "int_or_none",
    "may_be_delayed",
    "row_label",
    "table_row",
    "unkeyed_of",
    "unkeyed_row",
]



class Row(Protocol):
    """One trace row: ``row["seq"]``, ``row["ts"]``, ``row["event"]`` and ``row.get(column)``."""

    def __getitem__(self, key: str) -> Any: ...

    def get(self, key: str, default: Any = None) -> Any: ...


@attrs.frozen
class TableFinding:
    """A table row broken: the code, the proving rows' seqs then the offending one, keys, why."""

    code: str
    seqs: tuple[int, ...]
    keys: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    reason: str = ""


def found(code: str, proof: Sequence[Row | None], row: Row, names: Sequence[str], reason: str) -> TableFinding:
    """A finding on ``row`` proved by ``proof`` (rows or None), seqs ascending, ``row``'s key columns."""
    seqs = sorted({int(p["seq"]) for p in proof if p is not None} | {int(row["seq"])})
    return TableFinding(code=code, seqs=tuple(seqs), keys={n: row.get(n) for n in names}, reason=reason)


def row_label(lifecycle: Lifecycle, t: Transition) -> str:
    """``lock: HELD --lock[grant]--> HELD`` (the label of ``properties/coverage.py``)."""
    guard = f"[{t.guard}]" if t.guard else ""
    return f"{lifecycle.name}: {t.source} --{t.action}{guard}--> {t.target}"


def table_row(lifecycle: Lifecycle, source: str, action: str, guard: str) -> Transition:
    """The row of ``lifecycle`` with this source, action and guard (KeyError if none)."""
    for t in lifecycle.transitions:
        if (t.source, t.action, t.guard) == (source, action, guard):
            return t
    raise KeyError(f"{lifecycle.name}: no row {source} --{action}[{guard}]")


def detail_of(row: Row) -> Mapping[str, Any]:
    """A row's ``detail`` as a mapping (JSON text is parsed); {} when absent or not an object."""
    detail = row.get("detail")
    if isinstance(detail, str):
        try:
            detail = json.loads(detail)
        except ValueError:
            return {}
    return detail if isinstance(detail, Mapping) else {}


def int_or_none(value: Any) -> int | None:
    """``value`` as an int (an int, or a string of digits such as a Java property), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def epochs_of(rows: Iterable[Row]) -> list[int]:
    """Per row, the ``crash`` / ``recover`` rows before it."""
    out, epoch = [], 0
    for row in rows:
        out.append(epoch)
        if row["event"] in ("crash", "recover"):
            epoch += 1
    return out


@attrs.frozen
class Unkeyed:
    """Whether a trace has rows a replay cannot attribute to their instance (design rule 2): a
    ``send_back`` without msg_key; a ``store`` without msg_key that may be a send-back's copy (its
    topic absent, SCHEDULE_TOPIC_XXXX or a ``%DLQ%`` topic: ``copies``) or a fire's schedule copy
    (its topic absent or SCHEDULE_TOPIC_XXXX: ``schedules``); a ``txn_end`` / ``txn_check`` /
    ``txn_discard`` without txn_id; a ``send`` without msg_key that may be a delayed one (its
    delay_level absent or above 0: ``sends``)."""

    send_backs: bool = False
    copies: bool = False
    schedules: bool = False
    txn_rows: bool = False
    sends: bool = False

    def __or__(self, other: Unkeyed) -> Unkeyed:
        return Unkeyed(*(a or b for a, b in zip(attrs.astuple(self), attrs.astuple(other), strict=True)))


UNKEYED_TXN_EVENTS = ("txn_end", "txn_check", "txn_discard")
ALL_KEYED = Unkeyed()


def unkeyed_row(row: Row) -> Unkeyed:
    """What one row alone makes unattributable (``unkeyed_of`` is the trace's union)."""
    event = row["event"]
    if event == "send_back":
        return Unkeyed(send_backs=row.get("msg_key") is None)
    if event == "store" and row.get("msg_key") is None:
        topic = row.get("topic")
        schedule = topic is None or topic == SCHEDULE_TOPIC
        return Unkeyed(copies=schedule or topic.startswith(DLQ_PREFIX), schedules=schedule)
    if event in UNKEYED_TXN_EVENTS:
        return Unkeyed(txn_rows=row.get("txn_id") is None)
    if event == "send":
        return Unkeyed(sends=row.get("msg_key") is None and may_be_delayed(row))
    return ALL_KEYED


def may_be_delayed(row: Row) -> bool:
    """A ``send`` that may have gone through SCHEDULE_TOPIC_XXXX: its delay_level unknown or above 0."""
    level = int_or_none(row.get("delay_level"))
    return level is None or level > 0


def unkeyed_of(rows: Iterable[Row]) -> Unkeyed:
    backs = copies = schedules = txn = sends = False
    for row in rows:
        event = row["event"]
        if event == "send_back":
            backs = backs or row.get("msg_key") is None
        elif event == "store":
            if row.get("msg_key") is None:
                topic = row.get("topic")
                schedule = topic is None or topic == SCHEDULE_TOPIC
                copies = copies or schedule or topic.startswith(DLQ_PREFIX)
                schedules = schedules or schedule
        elif event in UNKEYED_TXN_EVENTS:
            txn = txn or row.get("txn_id") is None
        elif event == "send":
            sends = sends or (row.get("msg_key") is None and may_be_delayed(row))
    return Unkeyed(backs, copies, schedules, txn, sends)

