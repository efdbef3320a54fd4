"""The broker lock table for orderly consumption (in memory; lost on every restart).

Theory of operation
-------------------
Follows B/client/rebalance/RebalanceLockManager (RocketMQ 4.9.8): one entry
``(client_id, last_update)`` per (group, message queue). ``try_lock_batch``
decides each requested queue once (the request is a Set; rmqspec visits it in
sorted order so traces are deterministic): granted when free, held by the
caller (renewal) or expired (``now − last_update > lockMaxLiveTime``); every
grant sets ``last_update = now``. ``unlock_batch`` removes only the caller's
entries. The grant rule is ``lifecycle.lock_decision``, shared with the model
and its z3 encoding. RocketMQ never persists this table, so neither do we.
"""

from __future__ import annotations

from collections.abc import Iterable

from rmqspec.model.lifecycle import lock_decision, lock_expired
from rmqspec.model.message import MessageQueue


class LockManager:
    def __init__(self) -> None:
        self.entries: dict[tuple[str, MessageQueue], tuple[str, int]] = {}

    def lock_batch(
        self, group: str, client_id: str, mqs: Iterable[MessageQueue], now: int, max_live_ms: int
    ) -> list[tuple[MessageQueue, bool]]:
        decisions = []
        for mq in sorted(set(mqs)):
            holder, last = self.entries.get((group, mq), (None, now))
            granted = lock_decision(holder, last, client_id, now, max_live_ms)
            if granted:
                self.entries[(group, mq)] = (client_id, now)
            decisions.append((mq, granted))
        return decisions

    def unlock_batch(
        self, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> list[MessageQueue]:
        released = []
        for mq in sorted(set(mqs)):
            entry = self.entries.get((group, mq))
            if entry is not None and entry[0] == client_id:
                del self.entries[(group, mq)]
                released.append(mq)
        return released

    def group_locked(self, group: str, now: int, max_live_ms: int) -> bool:
        """RebalanceLockManager.isLockAllExpired, negated: some lock of ``group`` is live."""
        return any(g == group and not lock_expired(last, now, max_live_ms)
                   for (g, _mq), (_client, last) in self.entries.items())

    def clear(self) -> None:
        self.entries.clear()
