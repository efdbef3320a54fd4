"""Store recovery at open (RocketMQ ``DefaultMessageStore.recover`` + ``start``).

Theory of operation
-------------------
1. Every consume queue keeps its leading run of valid units (``ConsumeQueue.recover``).
2. The CommitLog is validated:
   - **normal** (no ``abort`` file: the last shutdown was clean): scan from the
     third-to-last file (``recoverNormally``);
   - **abnormal** (``abort`` present: kill or power loss): walk back from the
     last file to the first whose first record is a message with a non-zero
     storeTs ≤ ``checkpoint.min_timestamp()`` (none → the first file), scan
     from there and re-dispatch every valid record to the consume queues as
     it is read (``recoverAbnormally``).
   The scan stops at the first invalid record (bad magic, CRC mismatch, size
   mismatch, wrong physicalOffset) or at zeros; that offset is the end.
3. Everything after the end is forgotten: later CommitLog files are deleted, the
   rest of the file is zeroed (always: a power cut can leave data after a run
   of zeros, which RocketMQ leaves in place to be read back after a later
   crash), and every consume-queue unit pointing at or past the end is dropped.
   A blank end-of-file record with no file after it is not kept: the end is
   where it starts (as RocketMQ's ``recoverNormally``/``recoverAbnormally``).
4. Reput: records after the highest offset any consume queue covers are
   dispatched (``ReputMessageService`` from ``maxPhysicalPosInLogicQueue``).
5. The per-queue next offsets are then the consume queues' max offsets
   (``recoverTopicQueueTable``) — the caller reads them off the queues.

A queue whose records retention deleted and whose units a power loss took resumes, when the scan
reads from the CommitLog's first kept record, at its first surviving record's queue offset: the units
before it are pre-blanks below the queue's min offset (``ConsumeQueue.redispatch``).

Re-dispatch is idempotent (``ConsumeQueue.redispatch`` keeps a unit already
built when it is exactly the one the record needs, and cuts the queue there
when it is not — a unit torn by a power cut across a sector boundary can keep
its offset and size but lose its tagsCode, which RocketMQ keeps), so scanning
from too early a file only costs time; scanning from too late a
file would lose units, which is why the store lowers the checkpoint when a
record with an old timestamp opens a new file (see ``store.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import attrs

from rmqspec.impl.checkpoint import Checkpoint
from rmqspec.impl.codec import CorruptRecord, DecodedRecord
from rmqspec.impl.commitlog import CommitLog, ScanStop
from rmqspec.impl.consumequeue import ConsumeQueue


@attrs.frozen
class RecoveryReport:
    """What recovery did. ``kind``: "new" (empty store), "normal" or "abnormal"."""

    kind: str
    scan_start: int
    end_offset: int
    corrupt: CorruptRecord | None
    redispatched: int
    reput: int
    dropped_units: int
    last_store_ts: int = 0


def choose_abnormal_start(commitlog: CommitLog, checkpoint: Checkpoint) -> int:
    """Index of the file abnormal recovery scans from (``isMappedFileMatchedRecover``)."""
    limit = checkpoint.min_timestamp()
    files = commitlog.files.files
    for index in range(len(files) - 1, -1, -1):
        ts = commitlog.first_store_ts(files[index])
        if ts is not None and ts != 0 and ts <= limit:
            return index
    return 0


def recover(
    commitlog: CommitLog,
    queues: Collection[ConsumeQueue],
    checkpoint: Checkpoint,
    *,
    abnormal: bool,
    dispatch: Callable[[DecodedRecord, int | None], bool],
    check_crc: bool = True,
) -> RecoveryReport:
    # ``queues`` is a live view: dispatch adds the queues it has to create
    for cq in list(queues):
        cq.recover()
    files = commitlog.files.files
    if not files:
        return RecoveryReport("new", 0, commitlog.min_offset, None, 0, 0, 0)
    if abnormal:
        index = choose_abnormal_start(commitlog, checkpoint)
    else:
        index = max(0, len(files) - 3)
    scan_start = files[index].start
    # read from the first kept record: a queue's units ahead of its end may follow records retention took
    gap_min = commitlog.min_offset if scan_start == commitlog.min_offset else None
    stop = ScanStop(scan_start)
    last_ts = 0
    redispatched = 0
    for item in commitlog.scan(scan_start, check_crc=check_crc):
        if isinstance(item, ScanStop):
            stop = item
            break
        last_ts = item.store_ts
        if abnormal and dispatch(item, gap_min):  # as RocketMQ: while scanning; units past the end go below
            redispatched += 1
    end = stop.offset
    commitlog.files.set_end(end)
    # Always: zeros where the scan stopped do not mean zeros after it (a page written back
    # before the one holding the end), and stale bytes must never be read as records later.
    commitlog.files.truncate_from(end)
    dropped = 0
    for cq in list(queues):
        if cq.max_physic_offset > end:
            before = cq.max_offset
            cq.truncate_physical(end)
            dropped += before - cq.max_offset
    reput_from = max([commitlog.min_offset, *(cq.max_physic_offset for cq in queues)])
    reput = 0
    if reput_from < end:
        gap_min = commitlog.min_offset if reput_from == commitlog.min_offset else None
        for item in commitlog.scan(reput_from, limit=end, check_crc=False):
            if isinstance(item, ScanStop):
                break
            reput += 1 if dispatch(item, gap_min) else 0
    kind = "abnormal" if abnormal else "normal"
    return RecoveryReport(kind, scan_start, end, stop.error, redispatched, reput, dropped, last_ts)
