"""The LOCK table replayed on ``lock`` / ``unlock`` rows: LOCK_LIFECYCLE.

Theory of operation
-------------------
One instance of ``model/lifecycle.py``'s LOCK per (group, topic, queue_id):
FREE, or HELD with ``LockVars(holder, last_update, max_live)`` where
``max_live`` is the audit's broker lock lifetime. Rows in ``seq`` order:

- ``lock`` (``ts`` = the broker's decision time, ``client_id`` the requester,
  ``status`` GRANTED / DENIED): ``LOCK.enabled(state, "lock", vars,
  {client, now})`` is the row the table takes. The answer names the rows that
  can give it (``OUTCOMES``: GRANTED ⇔ a row whose effect is ``take``, DENIED
  ⇔ a row with no effect). Same class: step. A DENIED where the table grants
  (the queue is free, the requester holds it, or the holder's last grant is
  older than the lifetime) is **LOCK_LIFECYCLE**; the entry is then unknown
  (the broker believes some holder we cannot name). A GRANTED where the table
  denies is LOCK_OVERLAP's (``traces/checks_lock.py``), not reported here;
  either way a GRANTED fixes the entry: (HELD, requester, now) — the
  ``take`` effect.
- ``unlock`` (no answer): ``LOCK.step(state, vars, "unlock", {client})``
  (the holder frees it, anyone else changes nothing) — its effect is seen
  only by the next decision on the queue.
- ``crash`` / ``recover``: the broker's lock table is lost: every entry FREE.

Unknown (design rule 1 of ``inv_replay.py``): a lock without a client or
with a status other than GRANTED / DENIED, an unlock without a client, make
their entry unknown until a GRANTED; a lock or unlock lacking its group,
topic or queue_id makes every entry it may name (the known parts match)
unknown, and any entry first seen later in the same epoch, until the next
restart. Only lock, unlock, crash and recover rows are read, so the Spark
audit runs this per trace on those rows alone.

Deviations: RocketMQ 4.9.8's RebalanceLockManager keys entries by
(group, MessageQueue) where the queue names its broker; a trace has one
broker, as the other lock rules assume.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from rmqspec.model.lifecycle import LOCK, LOCK_DENIED, LOCK_GRANTED, LockVars, Transition
from rmqspec.properties.codes import AuditParams, Code
from rmqspec.properties.inv_replay import Row, TableFinding, found, row_label

__all__ = ["LOCK_KEYS", "OUTCOMES", "LockReplay", "judge_locks"]

# The effects of the rows that can give each answer to a lock request.
OUTCOMES: dict[str, frozenset[str]] = {LOCK_GRANTED: frozenset({"take"}), LOCK_DENIED: frozenset({""})}
LOCK_KEYS = ("group", "topic", "queue_id", "client_id")


@attrs.define
class _Entry:
    known: bool
    state: str
    vars: LockVars
    since: Row | None  # the row that made the known state: a grant, the freeing unlock, the restart


def _matches(pattern: tuple, key: tuple) -> bool:
    return all(p is None or p == k for p, k in zip(pattern, key, strict=True))


class LockReplay:
    """The lock replay, resumable: ``feed`` takes the next rows of a trace (seq order) and returns the
    findings they add (the conformance machine feeds each step's new events)."""

    def __init__(self, params: AuditParams) -> None:
        self.entries: dict[tuple, _Entry] = {}
        self.poisons: list[tuple] = []  # key patterns a row without a full key may have touched, this epoch
        self.ids: dict[str, int] = {}
        self.names: list[str] = []
        self.restart: Row | None = None
        self.fresh = LockVars(max_live=params.broker_lock_ms)

    def _cid(self, client: str) -> int:
        if client not in self.ids:
            self.ids[client] = len(self.names)
            self.names.append(client)
        return self.ids[client]

    def feed(self, rows: Iterable[Row]) -> list[TableFinding]:
        out: list[TableFinding] = []
        for row in rows:
            event = row["event"]
            if event in ("crash", "recover"):
                self.entries.clear()
                self.poisons.clear()
                self.restart = row
            elif event in ("lock", "unlock"):
                finding = self._lock_row(row, event)
                if finding is not None:
                    out.append(finding)
        return out

    def _lock_row(self, row: Row, event: str) -> TableFinding | None:
        key = (row.get("group"), row.get("topic"), row.get("queue_id"))
        if None in key:
            self.poisons.append(key)
            for k, e in self.entries.items():
                if _matches(key, k):
                    e.known = False
            return None
        entry = self.entries.get(key)
        if entry is None:
            known = not any(_matches(p, key) for p in self.poisons)
            entry = self.entries[key] = _Entry(known, "FREE", self.fresh, self.restart)
        client = row.get("client_id")
        status = row.get("status")
        if client is None or (event == "lock" and status not in OUTCOMES):
            entry.known = False
            return None
        args = {"client": self._cid(client), "now": row["ts"]}
        if event == "unlock":
            if entry.known:
                state, new = LOCK.step(entry.state, entry.vars, "unlock", args)
                if (state, new) != (entry.state, entry.vars):
                    entry.state, entry.vars, entry.since = state, new, row
            return None
        if entry.known:
            t = LOCK.enabled(entry.state, "lock", entry.vars, args)
            if t.effect in OUTCOMES[status]:
                if t.effect:
                    entry.state, entry.vars, entry.since = t.target, LOCK.effects[t.effect](entry.vars, args), row
                return None
            if status == LOCK_DENIED:  # a GRANTED the table denies is LOCK_OVERLAP's
                reason = _reason(t, entry, client, row["ts"], self.names)
                entry.known = False
                return found(Code.LOCK_LIFECYCLE.value, [entry.since], row, LOCK_KEYS, reason)
        if status == LOCK_GRANTED:  # the broker's entry is now (requester, now), whatever it was
            entry.known, entry.state, entry.since = True, "HELD", row
            entry.vars = LOCK.effects["take"](self.fresh, args)
        return None


def judge_locks(rows: Iterable[Row], params: AuditParams) -> list[TableFinding]:
    """LOCK_LIFECYCLE findings of ``rows`` (a trace's rows in seq order; others are skipped)."""
    return LockReplay(params).feed(rows)


def _reason(t: Transition, entry: _Entry, client: str, now: int, names: Sequence[str]) -> str:
    if entry.state == "FREE":
        why = "the queue is free"
    elif names[entry.vars.holder] == client:
        why = f"{client} holds it (a renewal)"
    else:
        age = now - entry.vars.last_update
        why = (f"{names[entry.vars.holder]}'s grant is {age} ms old, past the "
               f"{entry.vars.max_live} ms lifetime")
    return f"{row_label(LOCK, t)} grants it ({why}), but the broker DENIED {client}"
