"""Broker-lock and orderly-consumption detectors (SPEC §4.5, §8.1)."""

from __future__ import annotations

from collections.abc import Iterator

from rmqspec.properties.codes import Code, ObservationCode
from rmqspec.traces.checks_common import (
    Finding,
    Trace,
    broadcasting_row,
    has,
    keys_of,
    loop_age,
    observation,
    violation,
)

_QUEUE = ("group", "topic", "queue_id", "client_id")


def detect_lock_overlap(trace: Trace) -> Iterator[Finding]:
    """LOCK_OVERLAP: the broker granted a queue lock another client still held.

    SPEC §8.1 / §4.5 (``RebalanceLockManager.tryLockBatch``: expired iff
    ``now − lastUpdate > lockMaxLiveTime``): a ``lock`` GRANTED on (group,
    topic, queue) to client c while the other client's last GRANTED is
    ≤ broker lifetime old (exactly 60000 ms still holds) and not ``unlock``ed
    by it since. "The other client" is the holder of the most recent GRANTED
    to a client other than c, within the epoch (a crash empties the lock
    table). Renewals by c inside that lifetime are offending too.
    seqs = [other client's last GRANTED, offending GRANTED].
    """
    limit = trace.params.broker_lock_ms
    last: dict[tuple, tuple[str, int, int]] = {}  # queue -> (client, seq, ts) of last grant
    other: dict[tuple, tuple[str, int, int] | None] = {}  # queue -> grant before the current run
    unlocked: dict[tuple, int] = {}  # (queue, client) -> seq of its last unlock
    for i, row in trace.of("lock", "unlock"):
        if not has(row, *_QUEUE):
            continue
        qkey = (trace.epochs[i], row["group"], row["topic"], row["queue_id"])
        client = row["client_id"]
        if row["event"] == "unlock":
            unlocked[(qkey, client)] = row["seq"]
            continue
        if row["status"] != "GRANTED":
            continue
        prev = last.get(qkey)
        if prev is not None and prev[0] != client:
            other[qkey] = prev
        held = other.get(qkey) if prev is not None else None
        if held is not None:
            o_client, o_seq, o_ts = held
            freed = unlocked.get((qkey, o_client), -1) > o_seq
            if not freed and row["ts"] - o_ts <= limit:
                yield violation(
                    Code.LOCK_OVERLAP,
                    (o_seq, row["seq"]),
                    keys_of(row, *_QUEUE),
                    f"granted to {client} while {o_client}'s lock is {row['ts'] - o_ts} ms old"
                    f" (lifetime {limit} ms)",
                )
        last[qkey] = (client, row["seq"], row["ts"])


def detect_orderly_without_lock(trace: Trace) -> Iterator[Finding]:
    """ORDERLY_WITHOUT_LOCK: orderly consumption started without a valid lock.

    SPEC §8.1 / §4.5 (``ConsumeMessageOrderlyService.ConsumeRequest``: runs
    only if ``processQueue.isLocked() && !isLockExpired()``, client lifetime
    30000 ms; a broadcasting client's start, ``broadcasting_row``, needs no
    lock): an ``orderly_start`` by c whose last GRANTED on that queue is
    missing (seqs = [orderly_start]), superseded by a later GRANTED to
    another client (seqs = [the most recent such GRANTED, orderly_start]),
    or older than the client lifetime (> 30000 ms; seqs = [c's GRANTED,
    orderly_start]). Superseded wins over expired.
    """
    limit = trace.params.client_lock_ms
    mine: dict[tuple, tuple[int, int]] = {}  # (queue, client) -> (seq, ts) of its last grant
    latest: dict[tuple, tuple[str, int]] = {}  # queue -> (client, seq) of the last grant
    for _, row in trace.of("lock", "orderly_start"):
        if not has(row, *_QUEUE) or broadcasting_row(row):
            continue
        qkey = (row["group"], row["topic"], row["queue_id"])
        client = row["client_id"]
        if row["event"] == "lock":
            if row["status"] == "GRANTED":
                mine[(qkey, client)] = (row["seq"], row["ts"])
                latest[qkey] = (client, row["seq"])
            continue
        keys = keys_of(row, *_QUEUE)
        grant = mine.get((qkey, client))
        if grant is None:
            yield violation(
                Code.ORDERLY_WITHOUT_LOCK, (row["seq"],), keys, f"{client} never locked this queue"
            )
        elif latest[qkey][0] != client:
            yield violation(
                Code.ORDERLY_WITHOUT_LOCK,
                (latest[qkey][1], row["seq"]),
                keys,
                f"{client}'s lock was superseded by {latest[qkey][0]}",
            )
        elif row["ts"] - grant[1] > limit:
            yield violation(
                Code.ORDERLY_WITHOUT_LOCK,
                (grant[0], row["seq"]),
                keys,
                f"{client}'s lock is {row['ts'] - grant[1]} ms old (client lifetime {limit} ms)",
            )


def detect_orderly_concurrent(trace: Trace) -> Iterator[Finding]:
    """ORDERLY_CONCURRENT: two clients, or two batches of one client, consumed one queue in orderly mode
    at once.

    SPEC §8.1 / §4.5: two clients' ``orderly_start``…``orderly_end`` windows
    on the same (group, topic, queue) overlap (a broadcasting client's windows, ``broadcasting_row``, are
    its own: every client of the group consumes every queue). A client's window opens at a
    start when it has none open and closes at its next ``orderly_end``; an
    unclosed window lasts to the end of the trace. Every start while another
    client's window is open is offending, and so is a client's start while its own window is open: the
    client's MessageQueueLock (lock 2, ConsumeMessageOrderlyService) lets one thread of a consumer
    consume a queue at a time, so a second batch of one client before the first one's end is two
    batches at once.
    seqs = [opening start of the most recently opened other window (or of the client's own), offending start].

    What 4.9 permits is an observation, ORDERLY_LOCK_OUTLIVED: a start of client b while a's window is
    open, when the queue's last GRANTED before it went to b after a's window opened. ConsumeMessageOrderlyService
    checks the lock only before a batch, so a's listener outlived its broker lock and the broker lawfully
    granted b the queue (a lock granted twice is LOCK_OVERLAP, a start without one ORDERLY_WITHOUT_LOCK).
    seqs = [a's opening start, b's GRANTED, b's start].
    """
    open_since: dict[tuple, dict[str, int]] = {}
    granted: dict[tuple, tuple[int, str]] = {}  # the queue's last GRANTED: (seq, client)
    for _, row in trace.of("lock", "orderly_start", "orderly_end"):
        if not has(row, *_QUEUE) or broadcasting_row(row):
            continue
        queue = (row["group"], row["topic"], row["queue_id"])
        client = row["client_id"]
        if row["event"] == "lock":
            if row["status"] == "GRANTED":
                granted[queue] = (row["seq"], client)
            continue
        windows = open_since.setdefault(queue, {})
        if row["event"] == "orderly_end":
            windows.pop(client, None)
            continue
        others = [(seq, c) for c, seq in windows.items() if c != client]
        if others:
            seq, other = max(others)
            grant = granted.get(queue)
            if grant is not None and grant[1] == client and grant[0] > seq:
                yield observation(
                    ObservationCode.ORDERLY_LOCK_OUTLIVED,
                    (seq, grant[0], row["seq"]),
                    keys_of(row, *_QUEUE),
                    f"{client} started under the lock the broker granted it after {other}'s orderly window "
                    f"opened: {other}'s listener outlived its broker lock (4.9 checks the lock only before a batch)",
                )
            else:
                yield violation(
                    Code.ORDERLY_CONCURRENT,
                    (seq, row["seq"]),
                    keys_of(row, *_QUEUE),
                    f"{client} started while {other}'s orderly window is open",
                )
        if client in windows:
            yield violation(
                Code.ORDERLY_CONCURRENT,
                (windows[client], row["seq"]),
                keys_of(row, *_QUEUE),
                f"{client} started a second batch while its own orderly window is open (one thread of a "
                "consumer per queue: MessageQueueLock)",
            )
        windows.setdefault(client, row["seq"])


def detect_orderly_loop_overrun(trace: Trace) -> Iterator[Finding]:
    """ORDERLY_LOOP_OVERRUN: an orderly batch taken after its consume request had run past
    MAX_TIME_CONSUME_CONTINUOUSLY (issue 42, seed 001, B10).

    SPEC §8.1 / §4.5 (4.9.8 ``ConsumeMessageOrderlyService.ConsumeRequest.run``, client jar ``javap -c``):
    the request notes ``beginTime`` when its loop starts and, before taking each batch (after the lock
    checks, in clustering and broadcasting alike), computes ``interval = now − beginTime``; when
    ``interval > MAX_TIME_CONSUME_CONTINUOUSLY`` (``-Drocketmq.client.maxTimeConsumeContinuously``, 60000 ms
    by default) it resubmits itself 10 ms later and ends, so other queues' requests get the consume
    threads. An ``orderly_start`` whose ``detail.loop_age_ms`` (that interval, stated by the client) is
    above the limit the same row states (``detail.loop_max_ms``; exactly the limit still takes a batch) is
    offending. A row without both is not judged (``checks_common.loop_age``).
    seqs = [orderly_start].
    """
    for _, row in trace.of("orderly_start"):
        stated = loop_age(row)
        if stated is None or stated[0] <= stated[1]:
            continue
        age, limit = stated
        yield violation(
            Code.ORDERLY_LOOP_OVERRUN,
            (row["seq"],),
            keys_of(row, *_QUEUE),
            f"{row.get('client_id')} took a batch {age} ms into its consume request's loop"
            f" (MAX_TIME_CONSUME_CONTINUOUSLY {limit} ms: the request resubmits itself instead)",
        )
