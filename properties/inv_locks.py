"""Broker locks and orderly consumption as invariants over the ghost history (SPEC §6).

Theory of operation
-------------------
Three guarantees of RebalanceLockManager and ConsumeMessageOrderlyService,
judged per (group, topic, queue) on the observed ``lock`` / ``unlock`` /
``orderly_start`` / ``orderly_end`` events; a restart (crash or clean
reopen: ``inv_base._restart``) empties the broker's lock table. The lock
table's own rows (a DENIED the table grants, an unlock that frees nothing)
are judged by ``inv_tables.py``'s replay of ``model/lifecycle.py``'s LOCK.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping

from rmqspec.model.events import TraceEvent
from rmqspec.properties.codes import Code
from rmqspec.properties.history import History
from rmqspec.properties.inv_base import Violation, _restart, _v

__all__ = ["check_lock_overlap", "check_orderly_concurrent", "check_orderly_without_lock"]


def _lock_key(ev: TraceEvent) -> tuple:
    return (ev.group, ev.topic, ev.queue_id)


def _with_holders(events: Iterable[TraceEvent]) -> Iterator[tuple[TraceEvent, Mapping[tuple, tuple[str, int]]]]:
    """Each event with the broker's lock table as it stood before it: queue (``_lock_key``) ->
    (client, ts) of the last GRANTED; emptied by a restart, an entry freed by its holder's unlock."""
    holder: dict[tuple, tuple[str, int]] = {}
    for ev in events:
        yield ev, holder
        if _restart(ev):
            holder.clear()
        elif ev.event == "lock" and ev.status == "GRANTED":
            holder[_lock_key(ev)] = (ev.client_id, ev.ts)
        elif ev.event == "unlock" and holder.get(_lock_key(ev), (None,))[0] == ev.client_id:
            del holder[_lock_key(ev)]


def check_lock_overlap(h: History) -> list[Violation]:
    """At most one client holds an unexpired broker lock on a queue at any instant."""
    out = []
    for ev, holder in _with_holders(h.events):
        if ev.event == "lock" and ev.status == "GRANTED":
            prev = holder.get(_lock_key(ev))
            if prev and prev[0] != ev.client_id and ev.ts - prev[1] <= h.params.broker_lock_ms:
                out.append(_v(h, Code.LOCK_OVERLAP, ev,
                              f"{ev.client_id} granted {ev.topic}/{ev.queue_id} held by {prev[0]} "
                              f"since {ev.ts - prev[1]} ms",
                              f"denied until {prev[1] + h.params.broker_lock_ms + 1}", "GRANTED"))
    return out


def check_orderly_without_lock(h: History) -> list[Violation]:
    """Orderly consumption starts only under the client's own unexpired lock."""
    out = []
    for ev, holder in _with_holders(h.events):
        if ev.event == "orderly_start":
            prev = holder.get(_lock_key(ev))
            if prev is None or prev[0] != ev.client_id:
                out.append(_v(h, Code.ORDERLY_WITHOUT_LOCK, ev,
                              f"{ev.client_id} consumes {ev.topic}/{ev.queue_id} orderly",
                              f"lock held by {ev.client_id}", prev[0] if prev else "no lock"))
            elif ev.ts - prev[1] > h.params.client_lock_ms:
                out.append(_v(h, Code.ORDERLY_WITHOUT_LOCK, ev,
                              f"{ev.client_id}'s lock on {ev.topic}/{ev.queue_id} expired",
                              f"age <= {h.params.client_lock_ms}", ev.ts - prev[1]))
    return out


def check_orderly_concurrent(h: History) -> list[Violation]:
    """Two clients' orderly windows on one queue never overlap, nor two batches of one client (its
    MessageQueueLock: one thread of a consumer per queue). A start under a lock the broker granted its
    client after every other open window began is what 4.9 permits (the others' listeners outlived their
    locks: the audit's observation ORDERLY_LOCK_OUTLIVED), not a violation."""
    out = []
    open_: dict[tuple, dict[str, int]] = defaultdict(dict)  # client -> the window's opening index
    granted: dict[tuple, tuple[int, str | None]] = {}  # the queue's last GRANTED: (index, client)
    for i, ev in enumerate(h.events):
        key = _lock_key(ev)
        if ev.event == "lock" and ev.status == "GRANTED":
            granted[key] = (i, ev.client_id)
        elif ev.event == "orderly_start":
            others = set(open_[key]) - {ev.client_id}
            grant = granted.get(key)
            if others and grant is not None and grant[1] == ev.client_id and \
                    grant[0] > max(open_[key][c] for c in others):
                others = set()  # a lawful takeover after the others' locks expired
            if others:
                out.append(_v(h, Code.ORDERLY_CONCURRENT, ev,
                              f"{ev.client_id} and {sorted(others)} consume {ev.topic}/{ev.queue_id}",
                              "one client at a time", f"{sorted(others | {ev.client_id})}"))
            if ev.client_id in open_[key]:
                out.append(_v(h, Code.ORDERLY_CONCURRENT, ev,
                              f"{ev.client_id} starts a second batch on {ev.topic}/{ev.queue_id} while its first "
                              "runs", "one batch of a client at a time (MessageQueueLock)", "two batches"))
            open_[key].setdefault(ev.client_id, i)
        elif ev.event == "orderly_end":
            open_[key].pop(ev.client_id, None)
    return out
