"""The commitlog's flush services on the real files: CommitLog.GroupCommitService (SYNC) and
CommitLog.FlushRealTimeService (ASYNC), as RocketMQ 4.9.8 runs them (``model/flushing.py`` holds the ASYNC
service's decisions, ``model/crash.py`` the durability they give).

- ``group_commit`` is the GroupCommitService's pass at a tick: under SYNC, msync whatever puts that did not wait
  (``isWaitStoreMsgOK`` false) left written but unflushed; the crash exploration then counts every record written
  so far as promised (a ``flushed`` mark).
- ``flush_real_time`` is the FlushRealTimeService's iterations at a tick under ASYNC, over what was written by
  the previous pass (the thread runs between ticks): the first with no page threshold when a thorough pass is
  due, then one file at a time while its file is full or has ``flush_least_pages`` dirty pages. Only the
  commitlog, as the service; the checkpoint is FlushConsumeQueueService's work (``MessageStore.flush``).
- ``stall(until)`` (``Capability.DISK_STALL``): a hung disk completes no flush before ``until`` — neither
  service's pass nor a waiting put's (``MessageStore.put`` asks ``stalled``); the store's ``flush`` waits for
  the disk, ending the stall; a restart builds new services (the disk came back).
"""

from __future__ import annotations

from rmqspec.impl.commitlog import CommitLog
from rmqspec.impl.effects import EffectLog
from rmqspec.model.flushing import FlushRealTime


class FlushServices:
    """The two services of one store; ``flush`` is the store's ``StoreConfig.flush`` (SYNC or ASYNC)."""

    def __init__(self, commitlog: CommitLog, flush: str, least_pages: int, thorough_interval_ms: int,
                 interval_ms: int, effects: EffectLog | None) -> None:
        self.commitlog = commitlog
        self.flush = flush
        self.effects = effects
        self.real_time = FlushRealTime(least_pages, thorough_interval_ms, interval_ms)
        self.stalled_until: int | None = None

    def stall(self, until: int) -> None:
        """The disk completes no flush before ``until``."""
        self.stalled_until = until

    def stalled(self, now: int) -> bool:
        return self.stalled_until is not None and now < self.stalled_until

    def start(self, now: int) -> None:
        """The FlushRealTimeService starts with the store: its first pass, thorough, is at ``now``."""
        self.real_time.restart(now, self.commitlog.files.readable_offset)

    def group_commit(self, now: int) -> None:
        """The GroupCommitService's pass (SYNC), unless the disk is stalled at ``now``."""
        if self.stalled(now):
            return
        self.stalled_until = None
        if self.flush == "SYNC" and self.commitlog.flush() and self.effects is not None:
            self.effects.mark("flushed")

    def flush_real_time(self, now: int) -> None:
        """The FlushRealTimeService's iterations at ``now`` (ASYNC)."""
        if self.flush != "ASYNC" or self.stalled(now):
            return
        service = self.real_time
        least = service.least_for(now)
        # what the previous pass saw (readable: with a TransientStorePool, what was committed)
        seen, service.mark = service.mark, self.commitlog.files.readable_offset
        while self.commitlog.files.flush_least(least, seen):
            least = service.least_pages
