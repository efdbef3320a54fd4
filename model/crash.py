"""Abstract crash semantics: which records survive, what in-memory state is lost.

Theory of operation
-------------------
RocketMQ's store (S/CommitLog, FlushDiskType, S/DefaultMessageStore.recover)
gives these guarantees, which the model states as a *set of allowed
outcomes* rather than one outcome:

- SYNC flush: a put whose message waits (``isWaitStoreMsgOK``: the producer's WAIT, true unless
  it sends ``false``) is durable once acknowledged, and so is everything written before it (the
  GroupCommitService flushes every written byte). A put that does not wait only wakes the service
  (CommitLog.submitFlushRequest) and is answered before the flush: a send-back's retry or DLQ copy,
  a committed transaction and its op message (END_TRANSACTION), a producer's WAIT=false send. Those
  are durable only after the service's next pass, which the model places at the next ``tick``
  (``on_tick``): a power loss in between may take them (the crash row lists them at risk). The
  services' own re-puts (a fired delayed or timer message, a check's re-put, a discarded half, 5.1+'s
  batched ops) do not wait either, but no one is answered and the group commit they wake flushes them
  within milliseconds, long before a service persists its progress (delayOffset.json, timercheck:
  ≥ 1 s): the model flushes them at the put. ASYNC flush: records are durable up to the last
  ``flush()`` / ``close()`` or the FlushRealTimeService's last pass (``on_async_pass``, run at each
  ``tick``: a full file, 4 dirty pages, or everything in its file every 10 s; ``model/flushing.py``).
- A stalled disk (``Capability.DISK_STALL``, ``stall(until)``): until ``until`` no flush completes — not
  the group commit's, not the FlushRealTimeService's, not a waiting put's. A SYNC put that waits is then
  answered FLUSH_DISK_TIMEOUT (CommitLog.GroupCommitService / FlushDiskWatcher: the request's
  ``syncFlushTimeout``, 5 s, passed; SendMessageProcessor answers code 10 with the message stored), so it
  joins ``unwaited``: answered before its flush. The first group commit after the stall flushes them.
  A restart clears the stall (the disk came back); ``flush`` / ``close`` wait for the disk (they end it).
- ``kill`` (process dies, the OS keeps its page cache): every written record
  survives — except, with a TransientStorePool (``model/committing.py``), what was not yet committed from
  the process's write buffer, acknowledged or not: exactly the committed records survive.
- ``power`` (machine loses power): a prefix of the commitlog survives, at least
  up to the flushed position (never past the committed one: the flush sees only committed bytes);
  anything after may be lost (a torn record is a lost record in the abstract model).
- In-memory state is lost on any crash: consumer offsets and delay progress
  not yet persisted (the last persisted snapshots are restored), the lock
  table, and the transaction check service's unpersisted progress (it lives in
  the consumer offsets).

``allowed_survivors`` is that set as a ``range`` of record counts; a lockstep
checker forks one model per choice (``ModelBroker.fork``) and keeps those the
candidate agrees with. ``recover`` takes a choice (default: the maximum) and
rebuilds consume queues and next offsets from the surviving prefix.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from rmqspec.model.flushing import FlushRealTime

CRASH_KINDS = ("kill", "power")
# a crash kind a broker may add to its ``crash_kinds`` (the mmap broker does): a power loss after the
# page cache wrote back some unflushed bytes, tearing a record — SPEC's "a torn tail is possible"; to
# the model (which allows every prefix of the unflushed records) it is a power loss
TORN = "torn"


class BrokerState(enum.Enum):
    RUNNING = "RUNNING"
    CRASHED = "CRASHED"
    CLOSED = "CLOSED"


class Durability:
    """How many commitlog records are durable (flushed)."""

    def __init__(self, sync: bool, flusher: FlushRealTime | None = None) -> None:
        self.sync = sync
        self.flushed = 0
        self.unwaited = 0  # SYNC: the records past ``flushed``, all answered before their flush (no wait, a hung disk)
        self.crash_kind: str | None = None
        # ASYNC: the FlushRealTimeService and its flushedWhere (a byte position: a pass may flush a
        # rolled file's blank, which no record ends)
        self.flusher = flusher or FlushRealTime()
        self.where = 0
        self.stalled_until: int | None = None  # Capability.DISK_STALL: no flush completes before it

    def stall(self, until: int) -> None:
        """The disk completes no flush before ``until``."""
        self.stalled_until = until

    def stalled(self, now: int | None) -> bool:
        return self.stalled_until is not None and (now is None or now < self.stalled_until)

    def on_append(self, total: int, wait: bool = True, now: int | None = None) -> bool:
        """A record appended (``total`` now): under SYNC a put that waits flushes everything so far.
        False when the put waited and its flush did not complete (FLUSH_DISK_TIMEOUT: a stalled disk)."""
        if self.stalled(now):
            if self.sync:
                self.unwaited += 1
            return not (self.sync and wait)
        if self.sync and wait:
            self.flush(total)
        elif self.sync:
            self.unwaited += 1
        return True

    def on_tick(self, total: int, now: int | None = None) -> None:
        """The GroupCommitService's pass (SYNC): whatever a put that did not wait left is flushed —
        unless the disk is stalled at ``now``."""
        if self.stalled(now):
            return
        self.stalled_until = None
        if self.sync:
            self.flush(total)

    def on_async_pass(self, now: int, wrote: int, file_size: int, ending_by: Callable[[int], int]) -> None:
        """ASYNC: the FlushRealTimeService's iterations at ``now`` (``model/flushing.py``); ``wrote`` is
        the commitlog's write position, ``ending_by(pos)`` the number of records that end at or before
        ``pos``."""
        if self.sync or self.stalled(now):
            return
        self.where = self.flusher.pass_at(now, self.where, wrote, file_size)
        self.flushed = max(self.flushed, ending_by(self.where))

    def flush(self, total: int, where: int | None = None) -> None:
        """Everything up to record ``total`` durable; ``where``: the byte position that flushed (an
        explicit flush, a clean shutdown: the write position)."""
        self.flushed = total
        self.unwaited = 0
        self.stalled_until = None  # a flush that returns waited for the disk
        if where is not None:
            self.where = where

    def allowed_survivors(self, total: int, committed: int | None = None) -> range:
        """``committed``: with a TransientStorePool, the records committed from the write buffers
        (``model/committing.py``): a kill keeps exactly those and loses the rest (the model's commit points
        are its ticks; fidelity TS1)."""
        if self.crash_kind is None:
            raise RuntimeError("recovery choices exist only after a crash")
        if self.crash_kind == "kill":
            kept = total if committed is None else committed
            return range(kept, kept + 1)
        return range(self.flushed, total + 1)

    def recovered_end(self, end: int, written: int, file_size: int, on_disk: int | None = None) -> int:
        """Where recovery ends when the survivors end at ``end`` and the commitlog had reached
        ``written``: the next file's start when the survivors' file was rolled (a later file exists)
        and flushed through its end-of-file blank, which recovery reads and steps over
        (recoverAbnormally: a blank moves it to the next file), though no record in the next file
        survived — only an ASYNC pass that flushed the full file and not the next one's few pages
        leaves that; else ``end``. ``on_disk``: how far the bytes outlived the crash when not the flushed
        position (a kill with a TransientStorePool: the committed ones, a loaded file's blank included)."""
        file_end = end - end % file_size + file_size
        reach = self.where if on_disk is None else on_disk
        # written == file_end: a recovery already resumed there (its empty file is kept): it does again
        if end % file_size and reach >= file_end and written >= file_end:
            return file_end
        return end

    def after_recovery(self, survivors: int, where: int) -> None:
        """Recovered: the surviving records (their end ``where``) are on disk; a new flush service."""
        self.flushed = survivors
        self.unwaited = 0
        self.crash_kind = None
        self.where = where
        self.stalled_until = None

    def restarted(self, now: int) -> None:
        """A restart (reopen or recovery) starts a new FlushRealTimeService at ``now``."""
        self.flusher.restart(now, self.where)
