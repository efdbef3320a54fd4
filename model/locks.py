"""The broker lock table for orderly consumption.

Theory of operation
-------------------
Follows B/client/rebalance/RebalanceLockManager (RocketMQ 4.9.8): one
``LockEntry(client_id, last_update)`` per (group, message queue). ``lock_batch``
grants a queue that is free, held by the caller (renewal), or held by another
client whose entry expired (``now - last_update > lockMaxLiveTime``, strictly
greater); every grant sets ``last_update = now``. A denied request changes
nothing. ``unlock_batch`` removes an entry only when the caller holds it
(expired or not). The decision is ``lifecycle.lock_decision`` — the same
function the LOCK lifecycle table and its z3 encoding use.

The table lives in memory only: every restart (clean or crash) loses it, as in
RocketMQ. Duplicate queues in one request collapse (RocketMQ takes a Set).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from rmqspec.model.lifecycle import lock_decision, lock_expired
from rmqspec.model.message import MessageQueue


@attrs.frozen
class LockEntry:
    client_id: str
    last_update: int


class LockTable:
    """(group, mq) → LockEntry."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, MessageQueue], LockEntry] = {}

    def lock_batch(
        self, group: str, client_id: str, mqs: Iterable[MessageQueue], now: int, max_live_ms: int
    ) -> list[tuple[MessageQueue, bool]]:
        """Decide each queue (in sorted order, once); returns (mq, granted) pairs."""
        decisions = []
        for mq in sorted(set(mqs)):
            entry = self.entries.get((group, mq))
            holder = entry.client_id if entry else None
            last = entry.last_update if entry else now
            granted = lock_decision(holder, last, client_id, now, max_live_ms)
            if granted:
                self.entries[(group, mq)] = LockEntry(client_id, now)
            decisions.append((mq, granted))
        return decisions

    def unlock_batch(
        self, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> list[MessageQueue]:
        """Release the queues the caller holds; returns the released ones."""
        released = []
        for mq in sorted(set(mqs)):
            entry = self.entries.get((group, mq))
            if entry is not None and entry.client_id == client_id:
                del self.entries[(group, mq)]
                released.append(mq)
        return released

    def group_locked(self, group: str, now: int, max_live_ms: int) -> bool:
        """RebalanceLockManager.isLockAllExpired, negated: some lock of ``group`` is live."""
        return any(g == group and not lock_expired(e.last_update, now, max_live_ms)
                   for (g, _mq), e in self.entries.items())

    def holder(self, group: str, mq: MessageQueue) -> LockEntry | None:
        return self.entries.get((group, mq))

    def clear(self) -> None:
        self.entries.clear()
