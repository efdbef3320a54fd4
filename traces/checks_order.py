"""Ordering detectors (SPEC §4.1, §4.5, §8.1): queue density, orderly key order and a key's routing."""

from __future__ import annotations

from collections.abc import Iterator

from rmqspec.properties.codes import Code
from rmqspec.traces.checks_common import Finding, Trace, has, keys_of, route_queues, violation


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
    judged; the first SUCCESS of an ownership sets the base. An owner's
    ``orderly_end`` of status ROLLBACK sets it anew: a listener without
    autoCommit rolled back everything consumed since its last commit, which it
    consumes again in order (``ProcessQueue.rollback``).
    seqs = [previous SUCCESS consume, offending consume].
    """
    owner: dict[tuple, str] = {}
    last: dict[tuple, tuple[int, int]] = {}  # (queue key) -> (seq, offset) of owner's last SUCCESS
    for i, row in trace.of("lock", "unlock", "consume", "orderly_end"):
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
        elif ev == "orderly_end":
            if row["status"] == "ROLLBACK" and owner.get(qkey) == client:
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


def detect_key_split(trace: Trace) -> Iterator[Finding]:
    """ORDER_KEY_SPLIT: one route sent a sharding key's messages to two queues.

    SPEC §8.1 extension (issue 42; seed 001's producer half): an ordered send picks its queue with
    a MessageQueueSelector over the topic's route (``SelectMessageQueueByHash``:
    ``abs(arg.hashCode()) % mqs.size()``), so while the route gives the same queues one producer
    group's sends of one sharding key go to one queue, and an orderly consumer sees them in send
    order. The route is told by the number of queues the selector chose among
    (``detail.route_queues``): a send on a route of another size is another route version, judged
    apart. A ``send`` of (group, topic, sharding_key, route_queues) to a queue_id other than an
    earlier such send's; sends lacking one of those (or the queue_id) are not judged, and, since a
    finding needs two sends that state everything, a row losing a field only removes findings.
    seqs = [the earliest such send to another queue, offending send].
    """
    first: dict[tuple, dict[int, int]] = {}  # (group, topic, key, route) -> queue_id -> first seq
    for _, row in trace.of("send"):
        route = route_queues(row)
        if route is None or not has(row, "group", "topic", "queue_id", "sharding_key"):
            continue
        queues = first.setdefault((row["group"], row["topic"], row["sharding_key"], route), {})
        others = [(seq, q) for q, seq in queues.items() if q != row["queue_id"]]
        if others:
            seq, q = min(others)
            yield violation(
                Code.ORDER_KEY_SPLIT,
                (seq, row["seq"]),
                keys_of(row, "group", "topic", "queue_id", "msg_key"),
                f"sharding key {row['sharding_key']!r} sent to queue {row['queue_id']} after queue {q} "
                f"on the same route ({route} queues)",
            )
        queues.setdefault(row["queue_id"], row["seq"])
