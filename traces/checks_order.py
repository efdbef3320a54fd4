"""Ordering detectors (SPEC §4.1, §4.5, §8.1): queue density and orderly key order."""

from __future__ import annotations

from collections.abc import Iterator

from rmqspec.properties.codes import Code
from rmqspec.traces.checks_common import Finding, Trace, has, keys_of, violation


def detect_queue_gap(trace: Trace) -> Iterator[Finding]:
    """ORDER_QUEUE_GAP: a queue's offsets are not dense within an epoch.

    SPEC §8.1: within an epoch, a ``store`` on (topic, queue) whose
    queue_offset is not the previous one + 1. RocketMQ assigns consume-queue
    offsets 0, 1, 2, … in store order (``CommitLog.topicQueueTable``); a
    crash may truncate the tail, so each epoch's first store on a queue
    sets the base and only later stores are judged.
    seqs = [previous store, offending store].
    """
    last: dict[tuple, tuple[int, int]] = {}
    for i, row in trace.of("store"):
        if not has(row, "topic", "queue_id", "queue_offset"):
            continue
        key = (trace.epochs[i], row["topic"], row["queue_id"])
        prev = last.get(key)
        if prev is not None and row["queue_offset"] != prev[1] + 1:
            yield violation(
                Code.ORDER_QUEUE_GAP,
                (prev[0], row["seq"]),
                keys_of(row, "topic", "queue_id"),
                f"queue offset {row['queue_offset']} after {prev[1]} (expected {prev[1] + 1})",
            )
        last[key] = (row["seq"], row["queue_offset"])


def detect_key_reordered(trace: Trace) -> Iterator[Finding]:
    """ORDER_KEY_REORDERED: an orderly owner consumed a queue out of order.

    SPEC §8.1: during one client's uninterrupted orderly ownership of
    (group, topic, queue), a SUCCESS ``consume`` whose queue_offset is not
    greater than the previous SUCCESS one (RocketMQ
    ``ConsumeMessageOrderlyService``: one thread per locked queue, in order).
    Ownership of client c starts at a ``lock`` GRANTED to c and is interrupted
    by a GRANTED to another client, an ``unlock`` by c, or an epoch boundary
    (the broker's lock table is in memory). Only consumes by the owner are
    judged; the first SUCCESS of an ownership sets the base.
    seqs = [previous SUCCESS consume, offending consume].
    """
    owner: dict[tuple, str] = {}
    last: dict[tuple, tuple[int, int]] = {}  # (queue key) -> (seq, offset) of owner's last SUCCESS
    for i, row in trace.of("lock", "unlock", "consume"):
        if not has(row, "group", "topic", "queue_id", "client_id"):
            continue
        qkey = (trace.epochs[i], row["group"], row["topic"], row["queue_id"])
        ev, client = row["event"], row["client_id"]
        if ev == "lock":
            if row["status"] == "GRANTED" and owner.get(qkey) != client:
                owner[qkey] = client
                last.pop(qkey, None)
        elif ev == "unlock":
            if owner.get(qkey) == client:
                del owner[qkey]
                last.pop(qkey, None)
        elif row["status"] == "SUCCESS" and row["queue_offset"] is not None:
            if owner.get(qkey) != client:
                continue
            prev = last.get(qkey)
            if prev is not None and row["queue_offset"] <= prev[1]:
                yield violation(
                    Code.ORDER_KEY_REORDERED,
                    (prev[0], row["seq"]),
                    keys_of(row, "group", "topic", "queue_id", "client_id"),
                    f"orderly SUCCESS of offset {row['queue_offset']} after offset {prev[1]}",
                )
            last[qkey] = (row["seq"], row["queue_offset"])
