"""Lookup by time: a queue offset for a timestamp (SEARCH_OFFSET_BY_TIMESTAMP), and CONSUME_FROM_TIMESTAMP's
timestamp string.

Theory of operation
-------------------
RocketMQ 4.9.8 answers SEARCH_OFFSET_BY_TIMESTAMP (request code 29; ``AdminBrokerProcessor.searchOffsetByTimestamp``,
header ``topic``, ``queueId``, ``timestamp``, answer SUCCESS with ext field ``offset``) with
``DefaultMessageStore.getOffsetInQueueByTime``: 0 for a queue without a consume queue, else
``ConsumeQueue.getOffsetInQueueByTime``, which ``offset_by_time`` follows (read with ``javap -c`` from the
4.9.8 store jar):

1. the file: ``MappedFileQueue.getMappedFileByTime`` takes the first consume-queue file still kept whose
   last-modified time is at or after the timestamp, else the last file; no file answers 0;
2. a binary search over that file's written units only, from ``minLogicOffset`` when it lies inside the file
   (else from the file's first unit): ``mid = (low + high) / 2`` in units; a unit whose commitlog offset is
   below the commitlog's min offset counts as "left" without a timestamp; otherwise the record's store
   timestamp is read from the commitlog (``CommitLog.pickupStoreTimestamp``; a record it cannot read answers
   0 at once); equal stops the search at that unit (with equal timestamps, whichever the probes hit first),
   greater moves ``high`` below it (the right candidate), smaller moves ``low`` above it (the left one);
3. the answer: the exact hit; else, without a left candidate that had a timestamp, the right candidate;
   without a right one, the left one; else the nearer in time, the left one on a tie. Neither (every unit
   below the commitlog's min, or no unit) leaves the byte offset −1: ``(fileFromOffset − 1) / 20`` in Java's
   truncating division, the unit before the file (0 for the first file).

The file's last-modified time is the file system's mtime of the consume-queue file in RocketMQ; rmqspec's
store clock is injected, so both of its brokers take the store time of the record of the file's last unit:
the model computes it, the mmap broker sets the file's mtime to it with each unit it writes
(``impl/consumequeue.py``). ``docs/fidelity.md`` records where the two can differ.

CONSUME_FROM_TIMESTAMP (``RebalancePushImpl.computePullFromWhereWithException``, 4.9.8 client jar): with no
stored offset, a ``%RETRY%`` queue starts at the queue's max offset (not 0, as under LAST and FIRST), any other
at ``searchOffset(mq, parseDate(consumeTimestamp, "yyyyMMddHHmmss"))``. An exception (the broker's error
answer, a lost request) propagates, and ``RebalanceImpl.updateProcessQueueTableInRebalance`` catches it and
skips the queue until the next rebalance. ``consumeTimestamp`` defaults to 30 minutes before the
``DefaultMQPushConsumer`` was constructed, formatted to the second (``UtilAll.timeMillisToHumanString3``).
Java formats and parses in the JVM's default time zone; rmqspec uses UTC (``docs/fidelity.md``).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from rmqspec.model.directory import RETRY_GROUP_TOPIC_PREFIX
from rmqspec.model.message import MessageQueue

CQ_UNIT = 20
TIMESTAMP_FORMAT = "%Y%m%d%H%M%S"  # UtilAll.YYYYMMDDHHMMSS
DEFAULT_CONSUME_TIMESTAMP_BEFORE_MS = 30 * 60 * 1000  # DefaultMQPushConsumer: now − 1800000


@attrs.frozen
class QueueFile:
    """One consume-queue file still kept: its first unit's queue offset, its last-modified time, and the
    ``(commitlog offset, size)`` of each unit written in it, in order."""

    first_unit: int
    last_modified: int
    units: Sequence[tuple[int, int]]


def choose_file(files: Sequence[QueueFile], timestamp: int) -> QueueFile | None:
    """getMappedFileByTime: the first file modified at or after ``timestamp``, else the last; None without files."""
    for f in files:
        if f.last_modified >= timestamp:
            return f
    return files[-1] if files else None


def _java_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def offset_by_time(files: Sequence[QueueFile], timestamp: int, min_offset: int, min_phy: int,
                   store_ts_at: Callable[[int, int], int]) -> int:
    """ConsumeQueue.getOffsetInQueueByTime over ``files`` (module docstring). ``min_offset`` is the queue's
    min offset (minLogicOffset / 20), ``min_phy`` the commitlog's min offset, ``store_ts_at(offset, size)``
    the record's store timestamp or −1 (pickupStoreTimestamp)."""
    f = choose_file(files, timestamp)
    if f is None:
        return 0
    low = max(min_offset - f.first_unit, 0)
    high = len(f.units) - 1
    target = left = right = -1
    left_ts = right_ts = -1
    while high >= low:
        mid = (low + high) // 2
        phy, size = f.units[mid]
        if phy < min_phy:
            low, left = mid + 1, mid
            continue
        ts = store_ts_at(phy, size)
        if ts < 0:
            return 0
        if ts == timestamp:
            target = mid
            break
        if ts > timestamp:
            high, right, right_ts = mid - 1, mid, ts
        else:
            low, left, left_ts = mid + 1, mid, ts
    if target != -1:
        offset = target
    elif left_ts == -1:
        offset = right
    elif right_ts == -1:
        offset = left
    else:
        offset = right if abs(timestamp - left_ts) > abs(timestamp - right_ts) else left
    byte = offset * CQ_UNIT if offset >= 0 else -1  # Java keeps −1 as a byte position
    return _java_div(f.first_unit * CQ_UNIT + byte, CQ_UNIT)


def search_from_timestamp(consumer: Any, mq: MessageQueue) -> int:
    """CONSUME_FROM_TIMESTAMP for a queue with no stored offset (``PushConsumer.compute_pull_from_where``): a
    retry queue starts at its max offset, any other where the broker's ``search_offset`` puts
    ``consumer.consume_timestamp``; −1 (the queue skipped until the next rebalance) where Java throws: an
    unparsable timestamp, the broker's error answer, a lost request, a broker that cannot search."""
    if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return int(consumer.max_offset(mq))
    try:
        timestamp = parse_consume_timestamp(consumer.consume_timestamp)
        return int(consumer.broker.search_offset(mq.topic, mq.queue_id, timestamp))
    except Exception:  # computePullFromWhereWithException throws; updateProcessQueueTableInRebalance skips the queue
        return -1


def format_consume_timestamp(ms: int) -> str:
    """timeMillisToHumanString3 (in UTC): ``yyyyMMddHHmmss``."""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime(TIMESTAMP_FORMAT)


def default_consume_timestamp(now: int) -> str:
    """DefaultMQPushConsumer's consumeTimestamp: 30 minutes before its construction."""
    return format_consume_timestamp(now - DEFAULT_CONSUME_TIMESTAMP_BEFORE_MS)


def parse_consume_timestamp(text: str) -> int:
    """UtilAll.parseDate(text, "yyyyMMddHHmmss").getTime() (in UTC): epoch milliseconds, whole seconds.

    SimpleDateFormat is lenient and parses from the start: six abutting numeric fields, every one but the
    last of its pattern's width (4, 2, 2, 2, 2 digits), the last (seconds) every digit that follows; each
    rolls over into the next larger one (month 13 is January of the next year, day 0 the last day of the
    month before, 75 seconds a minute and 15 s); what follows the digits is ignored. Raises ValueError where
    Java's parseDate answers null (its caller then throws): fewer than 12 digits before a 13th, or a
    non-digit among the first 13. Blanks and signs inside a field and years before 1583 (Java's Julian calendar) are not
    modelled."""
    head = text[:12]
    tail = len(text) - len(text[12:].lstrip("0123456789"))
    if len(head) < 12 or not all("0" <= c <= "9" for c in head) or tail <= 12:
        raise ValueError(f"unparsable consumeTimestamp {text!r}")
    year, month, day, hour, minute = (int(head[a:b]) for a, b in ((0, 4), (4, 6), (6, 8), (8, 10), (10, 12)))
    second = int(text[12:tail])
    year += (month - 1) // 12
    base = datetime.datetime(year, (month - 1) % 12 + 1, 1, tzinfo=datetime.UTC)
    return int(base.timestamp()) * 1000 + ((((day - 1) * 24 + hour) * 60 + minute) * 60 + second) * 1000


__all__ = ["QueueFile", "choose_file", "default_consume_timestamp", "format_consume_timestamp",
           "offset_by_time", "parse_consume_timestamp", "search_from_timestamp"]
