"""An independent statement of 4.9.8's lookup by time (SEARCH_OFFSET_BY_TIMESTAMP), read off the model store.

``allowed(store, topic, queue_id, timestamp)`` says which answers ``getOffsetInQueueByTime`` may give, without
its binary search: the consume-queue file is the first kept one whose last unit was stored at or after the
timestamp (else the last file); among that file's units at or above the queue's min offset whose record the
commitlog still keeps, a unit stored at exactly the timestamp is the answer (any of them: which one depends
on the probes); else the last unit stored before it or the first stored after it, the nearer in time, the
earlier on a tie, or the one there is; with no such unit, the unit before the file (0 for the first file);
with no file at all, 0. The statement holds for store times that never decrease along a queue (the clock
only moves forward). ``kind`` names which clause answered, so tests can require each to be reached.
"""

from __future__ import annotations

from typing import Any

UNIT = 20


def allowed(store: Any, topic: str, queue_id: int, timestamp: int) -> tuple[set[int], str]:
    """(the answers the rule allows, the clause that gives them) for the model ``Store`` ``store``."""
    key = (topic, queue_id)
    units = store.queues.get(key, [])
    if not units:
        return {0}, "no_queue"
    per_file = store.config.consume_queue_file_size // UNIT
    first_kept = store.cq_first.get(key, 0)
    files = [units[j * per_file:(j + 1) * per_file] for j in range(first_kept, (len(units) - 1) // per_file + 1)]
    starts = [j * per_file for j in range(first_kept, (len(units) - 1) // per_file + 1)]
    chosen = next((k for k, f in enumerate(files) if store.records[f[-1]].store_ts >= timestamp), len(files) - 1)
    start = starts[chosen]
    live = [(start + k, store.records[i].store_ts) for k, i in enumerate(files[chosen])
            if start + k >= store.queue_min.get(key, 0) and store.records[i].commitlog_offset >= store.commitlog_min]
    gone = len(live) < len(files[chosen])  # units below the min offset or whose record retention deleted
    kind = ("later_file:" if start > 0 else "") + ("gone:" if gone else "")
    if not live:
        return {max(start - 1, 0)}, kind + "nothing_kept"
    exact = {o for o, ts in live if ts == timestamp}
    if exact:
        return exact, kind + ("exact_tie" if len(exact) > 1 else "exact")
    before = [(o, ts) for o, ts in live if ts < timestamp]
    after = [(o, ts) for o, ts in live if ts > timestamp]
    if not before:
        return {after[0][0]}, kind + "before_all"
    if not after:
        return {before[-1][0]}, kind + "after_all"
    (lo, lts), (ro, rts) = before[-1], after[0]
    if timestamp - lts > rts - timestamp:
        return {ro}, kind + "nearer_after"
    return {lo}, kind + ("tie_before" if timestamp - lts == rts - timestamp else "nearer_before")


def stamps(store: Any, topic: str, queue_id: int) -> list[int]:
    """The store times of the queue's units (in queue order)."""
    return [store.records[i].store_ts for i in store.queues.get((topic, queue_id), [])]
